"""The HumanEval-infilling loader, check_program and the harness command, on a few tasks (fast)."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys

import pytest

from diffreason.evals import infill_harness
from diffreason.tasks.infill import (
    InfillTask,
    TaskFileError,
    assemble_program,
    check_program,
    default_task_files,
    load_tasks,
)

TASK = {
    "task_id": "Toy/0/L0",
    "entry_point": "add",
    "prompt": "def add(a, b):\n",
    "suffix": "\n",
    "canonical_solution": "    return a + b\n",
    "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n",
}


def _write(path, rows, gz=False):
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path


def _shared(name):
    path = default_task_files()[name]
    if not path.is_file():
        pytest.skip(f"{path} not present (the shared data lies beside the repository)")
    return path


def test_lines_end_at_newlines_only(tmp_path):
    # raw U+2028 / U+0085 are legal inside JSON strings (QA: the file was "not JSON"); \r\n line ends too
    row = dict(TASK, prompt="# a\u2028b\x85c\ndef add(a, b):\n")
    path = tmp_path / "raw.jsonl"
    path.write_bytes((json.dumps(row, ensure_ascii=False) + "\r\n" + json.dumps(dict(TASK, task_id="Toy/1"))
                      + "\r\n").encode())
    assert [t.prompt for t in load_tasks(path)] == [row["prompt"], TASK["prompt"]]


def test_task_files_of_one_name_are_two_sets(tmp_path):
    from diffreason.evals.infill_eval import load_sets

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = _write(tmp_path / "a" / "toy.jsonl", [TASK])
    second = _write(tmp_path / "b" / "toy.jsonl", [TASK, dict(TASK, task_id="Toy/1")])
    sets = load_sets([first, second])  # (QA: the second replaced the first, its tasks silently dropped)
    assert {name: len(tasks) for name, (_, tasks) in sets.items()} == {"toy": 1, "b/toy": 2}
    # (QA, 2026-12-07: the harness kept only the last file of a name; a user's set named as the held-out spans was
    # replaced by them; one file given twice counted twice)
    wrong = _write(tmp_path / "a" / "HumanEval-toy.jsonl", [dict(TASK, canonical_solution="    return a - b\n")])
    assert infill_harness.main(["--tasks", str(wrong), "--tasks", str(second)]) == 1
    mine = _write(tmp_path / "HeldoutSingleLine.jsonl", [TASK])
    assert {name: len(t) for name, (_, t) in load_sets([mine], heldout=1).items()} == {
        f"{tmp_path.name}/HeldoutSingleLine": 1, "HeldoutSingleLine": 1}
    with pytest.raises(TaskFileError, match="given twice"):
        load_sets([first, tmp_path / "b" / ".." / "a" / "toy.jsonl"])


def test_a_set_is_single_line_by_its_tasks_not_its_file_name(tmp_path):
    """(A copy of the single-line set under another name got the multi-line language: other numbers.)"""
    from diffreason.tasks.infill.humaneval import single_line_set

    two = dict(TASK, task_id="Toy/1", canonical_solution="    c = a + b\n    return c\n")
    assert single_line_set(load_tasks(_write(tmp_path / "x.jsonl", [TASK])))
    assert not single_line_set(load_tasks(_write(tmp_path / "SingleLine.jsonl", [TASK, two])))


def test_load_jsonl_and_gz(tmp_path):
    for gz in (False, True):
        path = _write(tmp_path / f"t{gz}.jsonl{'.gz' if gz else ''}", [TASK, dict(TASK, task_id="Toy/1/L0")], gz)
        tasks = load_tasks(path)
        assert [t.task_id for t in tasks] == ["Toy/0/L0", "Toy/1/L0"]
        assert isinstance(tasks[0], InfillTask) and tasks[0].entry_point == "add"


def test_assembled_program_layout():
    task = InfillTask(**TASK)
    assert assemble_program(task, "    return 0\n") == (
        "def add(a, b):\n    return 0\n\n\n" + TASK["test"] + "\ncheck(add)\n")


@pytest.mark.parametrize("rows, message", [
    (None, "no such file"),
    ("not json\n", "not JSON"),
    ("[1, 2]\n", "must be a JSON object"),
    ([{k: v for k, v in TASK.items() if k != "test"}], "missing field(s) test"),
    ([dict(TASK, prompt=3)], "must be strings"),
    ([dict(TASK, test=" \n")], "task 'Toy/0/L0': its test is empty, so nothing would check a fill"),
    ([TASK, TASK], "duplicate task_id"),
    ([dict(TASK, suffix="x = '<|hole|>'\n")], "task 'Toy/0/L0': its suffix holds '<|hole', the hole marker's start"),
    ("\n", "no tasks"),
])
def test_bad_task_files(tmp_path, rows, message):
    path = tmp_path / "tasks.jsonl"
    if isinstance(rows, str):
        path.write_text(rows)
    elif rows is not None:
        _write(path, rows)
    with pytest.raises(TaskFileError, match=re.escape(message)):
        load_tasks(path)


def test_canonical_solutions_pass_and_wrong_completions_fail():
    tasks = load_tasks(_shared("SingleLineInfilling"))[:3] + load_tasks(_shared("MultiLineInfilling"))[:2]
    for task in tasks:
        check = check_program(task, task.canonical_solution, timeout=10)
        assert check.passed, (task.task_id, check.result.stderr[-2000:])
    task = tasks[0]  # has_close_elements: the hole is its outer loop
    wrong = check_program(task, "    for idx, elem in enumerate(numbers[1:]):\n", timeout=10)
    assert not wrong.passed and wrong.status == "failed" and "AssertionError" in wrong.result.stderr
    hang = check_program(task, "    for idx, elem in enumerate(numbers):\n        while True: pass\n", timeout=1)
    assert hang.status == "timeout"
    # a fill that leaves before the checks with status 0 fails, as in human-eval-infilling
    leaves = ("import os; os._exit(0)", "raise SystemExit(0)",
              "__import__('atexit').register(__import__('os')._exit, 0)")
    for leave in leaves:
        check = check_program(task, f"    {leave}\n    for idx, elem in enumerate(numbers[1:]):\n", timeout=10)
        assert not check.passed and check.status == "failed", (leave, check.result)


def test_harness_command_on_a_file(tmp_path, capsys):
    wrong = dict(TASK, task_id="Toy/1/L0", canonical_solution="    return a - b\n")
    path = _write(tmp_path / "HumanEval-Toy.jsonl", [TASK, wrong])
    assert infill_harness.main(["--tasks", str(path), "--workers", "2"]) == 1
    out = capsys.readouterr().out
    assert "## Toy" in out and "| 2 | 1 | 1 |" in out and "Failed: Toy/1/L0 (failed)" in out
    path = _write(tmp_path / "ok.jsonl", [TASK])
    assert infill_harness.main(["--tasks", str(path), "--limit", "1"]) == 0
    assert "| 1 | 1 | 0 |" in capsys.readouterr().out


def test_harness_shared_sets_limit(capsys):
    _shared("SingleLineInfilling"), _shared("MultiLineInfilling")
    assert infill_harness.main(["--limit", "3", "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("| 3 | 3 | 0 |") == 2 and "## SingleLineInfilling" in out and "## MultiLineInfilling" in out


@pytest.mark.parametrize("make, args", [
    (None, ["--tasks", "/nonexistent/tasks.jsonl"]),
    ("not json\n", None),
    (json.dumps({"task_id": "x"}) + "\n", None),
    (None, ["--workers", "0"]),
    (None, ["--timeout", "nan"]),  # (a ValueError traceback)
    (None, ["--timeout", "0"]),  # (every canonical solution then "failed")
    (None, ["--timeout", "-5"]),
])
def test_harness_bad_input_exits_2(tmp_path, make, args):
    if make is not None:
        path = tmp_path / "bad.jsonl"
        path.write_text(make)
        args = ["--tasks", str(path)]
    proc = subprocess.run([sys.executable, "-m", "diffreason.evals.infill_harness", *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0], proc.stderr
