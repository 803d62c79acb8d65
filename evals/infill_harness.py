"""Prove the HumanEval-infilling harness: run every task's canonical solution through the sandbox; all must pass.

    python -m diffreason.evals.infill_harness [--tasks FILE ...] [--limit N] [--workers N] [--timeout S]

Without --tasks it runs both shared sets (../shared/humaneval_infilling/HumanEval-{SingleLine,MultiLine}Infilling
.jsonl.gz); --tasks takes any file in that format (.jsonl or .jsonl.gz, repeatable). Prints, per set, markdown: tasks,
passed, failed (with task ids and how they ended), seconds, and the isolation the sandbox had. Exit status: 0 when
every task passed, 1 when one did not, 2 for bad input (a missing file, not JSONL, missing fields: one line on
stderr), 3 when the sandbox itself could not run.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from diffreason.sandbox import ISOLATIONS, SandboxError
from diffreason.tasks.infill.humaneval import (
    TaskFileError, check_program, default_task_files, load_tasks, named_task_files,
)

PROG = "python -m diffreason.evals.infill_harness"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def _positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {n}")
    return n


def _seconds(text: str) -> float:
    """A timeout: seconds in (0, 3600], as `diffreason eval infill --timeout` takes them."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 3600:  # (NaN too)
        raise argparse.ArgumentTypeError(f"must lie in (0, 3600], not {text}")
    return value


def run_set(name, path, tasks, workers, timeout, isolation, out=None):
    out = out or sys.stdout
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        checks = list(pool.map(lambda t: check_program(t, t.canonical_solution, timeout=timeout,
                                                       isolation=isolation), tasks))
    seconds = time.monotonic() - start
    failed = [c for c in checks if not c.passed]
    isolations = collections.Counter(c.result.isolation for c in checks)
    print(f"## {name}\n", file=out)
    shown = os.path.relpath(path) if not os.path.relpath(path).startswith("../../") else str(path)
    print(f"`{shown}`\n", file=out)
    print("| tasks | passed | failed | seconds |\n|---:|---:|---:|---:|", file=out)
    print(f"| {len(checks)} | {len(checks) - len(failed)} | {len(failed)} | {seconds:.1f} |\n", file=out)
    if failed:
        print("Failed: " + ", ".join(f"{c.task_id} ({c.status})" for c in failed) + "\n", file=out)
        for c in failed[:5]:
            tail = c.result.stderr.strip().splitlines()[-3:]
            print(f"- {c.task_id}: {c.status} {c.result.reason} — " + " / ".join(tail), file=out)
        print(file=out)
    else:
        print("Failed: none\n", file=out)
    print("Sandbox isolation: " + ", ".join(f"{k} ({v})" for k, v in sorted(isolations.items())) + "\n", file=out)
    out.flush()
    return len(failed)


def main(argv: list[str] | None = None) -> int:
    ap = _Parser(prog=PROG, description="Run HumanEval-infilling canonical solutions through the sandbox.")
    ap.add_argument("--tasks", action="append", type=Path, metavar="FILE",
                    help="a task file (.jsonl or .jsonl.gz); repeatable; default: both shared sets")
    ap.add_argument("--limit", type=_positive, help="only the first N tasks of each set")
    ap.add_argument("--workers", type=_positive, default=2, help="sandboxes at once (default 2)")
    ap.add_argument("--timeout", type=_seconds, default=10.0, help="seconds per task, in (0, 3600] (default 10)")
    ap.add_argument("--isolation", choices=ISOLATIONS, default="auto", help="sandbox isolation (default auto)")
    args = ap.parse_args(argv)
    try:
        files = named_task_files(args.tasks) if args.tasks else default_task_files()
        sets = {name: load_tasks(path) for name, path in files.items()}
    except TaskFileError as e:
        sys.stderr.write(f"{PROG}: error: {e}\n")
        return 2
    failures = 0
    try:
        for name, tasks in sets.items():
            tasks = tasks[: args.limit] if args.limit else tasks
            failures += run_set(name, files[name], tasks, args.workers, args.timeout, args.isolation)
    except SandboxError as e:
        sys.stderr.write(f"{PROG}: sandbox error: {e}\n")
        return 3
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
