"""Code infilling: holes in code (holes.py), each hole's language (grammar.py), the layout the model was trained on
(layout.py), the length search and the checks (search.py; `diffreason.infill` is its entry point), the training
corpus (corpus.py) and HumanEval-infilling, checked by running the code in diffreason.sandbox (humaneval.py)."""

from diffreason.tasks.infill.humaneval import (
    InfillCheck,
    InfillTask,
    TaskFileError,
    assemble_program,
    check_program,
    default_task_files,
    load_tasks,
)
from diffreason.tasks.infill.holes import InfillCode, InfillInputError, parse_code, parse_pair
from diffreason.tasks.infill.search import InfillResult, run_infill

__all__ = ["InfillCheck", "InfillCode", "InfillInputError", "InfillResult", "InfillTask", "TaskFileError",
           "assemble_program", "check_program", "default_task_files", "load_tasks", "parse_code", "parse_pair",
           "run_infill"]
