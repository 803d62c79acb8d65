"""Code infilling tasks (HumanEval-infilling), checked by running the code in diffreason.sandbox."""

from diffreason.tasks.infill.humaneval import (
    InfillCheck,
    InfillTask,
    TaskFileError,
    assemble_program,
    check_program,
    default_task_files,
    load_tasks,
)

__all__ = ["InfillCheck", "InfillTask", "TaskFileError", "assemble_program", "check_program", "default_task_files",
           "load_tasks"]
