"""HumanEval-infilling: load the task files and check a completion by running prompt + completion + suffix + the
tests in the sandbox.

The data (openai/human-eval-infilling, MIT; ../shared/humaneval_infilling/README.md): JSONL (optionally gzipped), one
task per line with task_id, entry_point, prompt (the code before the hole), suffix (the code after it),
canonical_solution (the reference infill) and test (a `check(candidate)` function). A completion passes when

    prompt + completion + suffix + "\\n" + test + "\\ncheck(" + entry_point + ")"

runs to its end without error — the same program and verdict as human-eval-infilling's `check_correctness` (which
counts a `SystemExit` or an `os._exit` before the checks as a failure: here `run_python(verdict="last")`), but run by
`diffreason.sandbox.run_python` (a separate process with OS-level limits and isolation) instead of a multiprocessing
child guarded in-process.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from diffreason.sandbox import Limits, SandboxResult, run_python
from diffreason.tasks.infill.holes import MARKER_START

FIELDS = ("task_id", "entry_point", "prompt", "suffix", "canonical_solution", "test")
# the repository's sibling shared/ folder (as laid next to a checkout and in CI)
SHARED_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "humaneval_infilling"
TASK_SETS = {
    "SingleLineInfilling": "HumanEval-SingleLineInfilling.jsonl.gz",
    "MultiLineInfilling": "HumanEval-MultiLineInfilling.jsonl.gz",
}


class TaskFileError(ValueError):
    """A task file that is missing, not JSONL, or lacks a field: the message names the file and line."""


@dataclass(frozen=True)
class InfillTask:
    task_id: str
    entry_point: str
    prompt: str
    suffix: str
    canonical_solution: str
    test: str


@dataclass(frozen=True)
class InfillCheck:
    """The verdict on one completion: `passed`, the sandbox's `status` and the whole `result`."""

    task_id: str
    passed: bool
    status: str
    result: SandboxResult


def default_task_files() -> dict[str, Path]:
    """The shared SingleLine and MultiLine sets, by name."""
    return {name: SHARED_DIR / file for name, file in TASK_SETS.items()}


def named_task_files(files: Sequence[str | Path], taken: Sequence[str] = ()) -> dict[str, Path]:
    """Task files by set name (the file's name without `HumanEval-`, `.jsonl`, `.gz`): two files of one name are two
    sets (the second gets its folder's name too), as is a name in `taken` (a set of the caller's own); one file given
    twice is a TaskFileError (its tasks would count twice)."""
    paths: dict[str, Path] = {}
    for p in files:
        if any(Path(p).resolve() == q.resolve() for q in paths.values()):
            raise TaskFileError(f"{p}: given twice")
        name = Path(p).name
        for ext in (".gz", ".jsonl"):
            name = name.removesuffix(ext)
        name = name.removeprefix("HumanEval-")
        if name in paths or name in taken:
            name = f"{Path(p).resolve().parent.name}/{name}"
        while name in paths or name in taken:
            name += "'"
        paths[name] = Path(p)
    return paths


def single_line_set(tasks: Sequence[InfillTask]) -> bool:
    """Is a set single-line infilling — every task's canonical solution one line — so that its holes get the
    single-line language (no newline inside)? The set's definition, not a task's answer."""
    return bool(tasks) and all("\n" not in t.canonical_solution.rstrip("\n") for t in tasks)


def load_tasks(path: str | Path) -> list[InfillTask]:
    """Tasks of a HumanEval-infilling file (.jsonl or .jsonl.gz: gzip is recognised by its magic bytes)."""
    path = Path(path)
    if path.is_dir():
        raise TaskFileError(f"{path}: a directory, not a task file (.jsonl or .jsonl.gz)")
    if not path.is_file():
        raise TaskFileError(f"{path}: no such file")
    try:
        with open(path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        opener = gzip.open if gz else open
        with opener(path, "rt", encoding="utf-8", newline="") as f:
            lines = f.read().split("\n")  # (JSON lines end at \n only: U+2028 or \x85 may stand inside a string)
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise TaskFileError(f"{path}: cannot read: {e}") from None
    tasks, seen = [], set()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            raise TaskFileError(f"{path}:{n}: not JSON ({e})") from None
        if not isinstance(row, dict):
            raise TaskFileError(f"{path}:{n}: a task must be a JSON object, not {type(row).__name__}")
        missing = [k for k in FIELDS if k not in row]
        if missing:
            raise TaskFileError(f"{path}:{n}: missing field(s) {', '.join(missing)}")
        bad = [k for k in FIELDS if not isinstance(row[k], str)]
        if bad:
            raise TaskFileError(f"{path}:{n}: field(s) {', '.join(bad)} must be strings")
        if not row["entry_point"].isidentifier():
            raise TaskFileError(f"{path}:{n}: entry_point {row['entry_point']!r} is not an identifier")
        marked = [k for k in ("prompt", "suffix") if MARKER_START in row[k]]
        if marked:  # (the hole lies between prompt and suffix: no code around it may hold a marker)
            raise TaskFileError(f"{path}:{n}: task {row['task_id']!r}: its {marked[0]} holds {MARKER_START!r}, "
                                "the hole marker's start, which no task's code may contain")
        if not row["test"].strip():  # (it was left out of the pass rates without a word: QA, 2026-12-07)
            raise TaskFileError(f"{path}:{n}: task {row['task_id']!r}: its test is empty, so nothing would check a "
                                "fill (HumanEval-infilling's tests define check(candidate))")
        if row["task_id"] in seen:
            raise TaskFileError(f"{path}:{n}: duplicate task_id {row['task_id']!r}")
        seen.add(row["task_id"])
        tasks.append(InfillTask(**{k: row[k] for k in FIELDS}))
    if not tasks:
        raise TaskFileError(f"{path}: no tasks")
    return tasks


def assemble_program(task: InfillTask, completion: str) -> str:
    """The program that decides a completion (human-eval-infilling's layout)."""
    return task.prompt + completion + task.suffix + "\n" + task.test + "\n" + f"check({task.entry_point})\n"


def check_program(task: InfillTask, completion: str, timeout: float = 10.0, limits: Limits | None = None,
                  **sandbox_options) -> InfillCheck:
    """Run the task's tests on `completion` in the sandbox (`sandbox_options` go to `run_python`)."""
    sandbox_options.setdefault("verdict", "last")  # checks come last: a program that exits before them fails
    result = run_python(assemble_program(task, completion), timeout=timeout, limits=limits, **sandbox_options)
    return InfillCheck(task_id=task.task_id, passed=result.passed, status=result.status, result=result)
