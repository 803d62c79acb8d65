"""`diffreason infill` and `diffreason eval infill` from the command line: bad input is one `error:` line and exit code
2, refused before torch is imported; a run prints the filled file or one JSON object; the eval's --json summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from diffreason.tasks.infill.humaneval import default_task_files

RUNNER = (
    "import atexit, runpy, sys; "
    "atexit.register(lambda: sys.stdout.write('\\ntorch imported: %s\\n' % ('torch' in sys.modules))); "
    "runpy.run_module('diffreason.cli', run_name='__main__', alter_sys=True)"
)
ENV = {**os.environ, "PYTHONWARNINGS": "ignore", "TOKENIZERS_PARALLELISM": "false"}


def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-c", RUNNER, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=ENV, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def code_checkpoint(tmp_path_factory):
    """A random code model of the shipped layout (128-token canvas, the smallest shapes), saved."""
    import torch

    from diffreason.tasks.infill.corpus import PRESETS, build_code_model
    from diffreason.tokenizer import train_byte_bpe

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        path = tmp_path_factory.mktemp("code") / "model"
        build_code_model(train_byte_bpe(), seed=0, preset=PRESETS["code-tiny"]).save(path)
    finally:
        torch.set_num_threads(before)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("infill")
    texts = {
        "good.py": "def add(a, b):\n    <|hole|>\n\nprint(add(1, 2))\n",
        "nohole.py": "x = 1\n",
        "unbalanced.py": "x = 1\ny = <|hole\n",
        "nested.py": "x = <|hole<|hole|>|>\n",
        "closing.py": "x = <|hole|>1<|/hole|>\n",
        "long.py": "x = <|hole:500|>\n",
        "badtests.py": "assert (\n",
        "goodtests.py": "assert add(1, 2) == 3\n",
        "bad.jsonl": "{not json\n",
        "never.py": "x = 1 +\n<|hole|>\n",
        "comment.py": "def add(a, b):\n    return a + b  # <|hole|>\n",
        "wrongtests.py": "assert add(1, 2) == 4\n",
        "importtests.py": "from comment import add as plus\nassert plus(1, 2) == 3\n",
    }
    for name, text in texts.items():
        (d / name).write_text(text)
    (d / "latin1.py").write_bytes(b"# caf\xe9\nx = <|hole|>\n")
    (d / "latin1tests.py").write_bytes(b"assert x == '\xe9'\n")
    return d


BAD = [
    (["{d}/nohole.py"], "the code has no hole"),
    (["{d}/unbalanced.py"], "line 2 column 5: unbalanced hole marker"),
    (["{d}/nested.py"], "a hole marker nested in another"),
    (["{d}/closing.py"], "a closing marker"),
    (["{d}/latin1.py"], "is not UTF-8 text (byte 0xe9 on line 1)"),
    (["{d}/long.py"], "asks for a hole of 500 tokens, longer than the canvas allows (128)"),
    (["{d}/good.py", "--max-hole-tokens", "500"], "longer than the model's canvas (128 tokens)"),
    (["{d}/good.py", "--tests", "{d}/badtests.py"], "do not parse: '(' was never closed (line 1)"),
    (["{d}/good.py", "--tests", "{d}/latin1tests.py"], "is not UTF-8 text"),
    (["{d}/good.py", "--tests", "{d}/missing.py"], "no such file"),
    (["{d}/missing.py"], "no such file"),
    (["{d}"], "is a directory, not a file"),
    (["{d}/good.py", "--mode", "best"], "--mode must be one of model, verified, got 'best'"),
    (["{d}/good.py", "--samples", "0"], "--samples must be at least 1, got 0"),
    (["{d}/good.py", "--max-hole-tokens", "0"], "--max-hole-tokens must be at least 1"),
    (["{d}/good.py", "--model", "{d}/nomodel"], "does not exist"),
]


@pytest.mark.parametrize("args, message", BAD, ids=[m[:40] for _, m in BAD])
def test_bad_input_is_one_line_and_exit_2_before_torch(args, message, files, code_checkpoint):
    argv = [a.format(d=files) for a in args]
    if "--model" not in argv:
        argv += ["--model", str(code_checkpoint)]
    p = cli("infill", *argv)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert message in lines[0], lines[0]
    assert "Traceback" not in p.stderr and "torch imported: False" in p.stdout


@pytest.mark.parametrize("args, message", [
    (["--tasks", "{d}/bad.jsonl"], "bad.jsonl:1: not JSON"),
    (["--tasks", "{d}/none.jsonl"], "none.jsonl: no such file"),
    (["--tasks", "{d}"], ": a directory, not a task file (.jsonl or .jsonl.gz)"),
    (["--mode", "x"], "--mode must be model, verified or both"),
    (["--samples", "0"], "--samples must be at least 1"),
    (["--max-hole-tokens", "999"], "longer than the model's canvas (128)"),
    (["--tasks", "{d}/bad.jsonl", "--tasks", "{d}/../{name}/bad.jsonl"], "bad.jsonl: given twice"),
])
def test_eval_bad_input(args, message, files, code_checkpoint, tmp_path):
    p = cli("eval", "infill", *[a.format(d=files, name=Path(files).name) for a in args], "--model", code_checkpoint,
            "--out", tmp_path)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], p.stderr
    assert "torch imported: False" in p.stdout


def test_infill_json_and_watch(files, code_checkpoint):
    p = cli("infill", files / "good.py", "--model", code_checkpoint, "--json", "--watch", "--samples", "2",
            "--max-hole-tokens", "16", "--steps", "3")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.split("\ntorch imported")[0])
    hole = out["holes"][0]
    assert {"text", "length", "tokens", "steps", "candidate", "why"} <= set(hole)
    assert hole["length"] == 16 and len(hole["steps"]) == 1 and 1 <= hole["steps"][0] <= 3
    assert out["mode"] == "model" and out["samples"] == 2 and out["passed"] is None
    assert out["code"].startswith("def add(a, b):\n") and out["code"].endswith("\n\nprint(add(1, 2))\n")
    assert "canvas 1  step" in p.stderr  # the live canvas


def test_infill_verified_exit_code_and_text_output(files, code_checkpoint):
    """The hole is in a comment (every fill parses) and the tests fail: the file is printed, then a summary line;
    exit code 1."""
    p = cli("infill", files / "comment.py", "--model", code_checkpoint, "--tests", files / "wrongtests.py", "--mode",
            "verified", "--samples", "2", "--max-hole-tokens", "16", "--steps", "2")
    assert p.returncode == 1, p.stderr
    assert p.stdout.startswith("def add(a, b):\n    return a + b  # ")
    assert "hole 1:" in p.stderr and "mode verified, K 2, 2 checked; parses; tests FAILED" in p.stderr


def test_infill_tests_import_the_file_as_its_module(files, code_checkpoint):
    """(The tests ran as one program after the code: `from comment import add` failed for every fill.)"""
    p = cli("infill", files / "comment.py", "--model", code_checkpoint, "--tests", files / "importtests.py",
            "--mode", "verified", "--samples", "1", "--max-hole-tokens", "16", "--steps", "2")
    assert p.returncode == 0, p.stderr
    assert "mode verified, K 1, 1 checked; parses; tests passed" in p.stderr


def test_infill_verified_prints_nothing_when_no_sample_parses(files, code_checkpoint):
    """No fill of a line after `x = 1 +` parses: verified mode returns no code (stdout empty, JSON code null)."""
    args = ("infill", files / "never.py", "--model", code_checkpoint, "--mode", "verified", "--samples", "2",
            "--max-hole-tokens", "16", "--steps", "2")
    p = cli(*args)
    assert p.returncode == 1, p.stderr
    assert p.stdout.strip() == "torch imported: True"
    assert "nothing returned: no sample of 2 parses" in p.stderr and "mode verified, K 2" in p.stderr
    p = cli(*args, "--json")
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout.splitlines()[0])
    assert out["code"] is None and out["holes"] == [] and out["candidate"] is None and out["parses"] is False
    assert len(out["ranking"]) == 2 and not any(s["parses"] for s in out["ranking"])


def test_commands_take_threads_defaulting_to_one():
    import typer

    from diffreason.cli import app

    cmd = typer.main.get_command(app)
    for path in (["infill"], ["eval", "infill"]):
        c = cmd
        for name in path:
            c = c.commands[name]
        assert next(p for p in c.params if "--threads" in getattr(p, "opts", ())).default == 1


@pytest.mark.skipif(not all(p.is_file() for p in default_task_files().values()),
                    reason="needs ../shared/humaneval_infilling")
def test_eval_limit_2_json(code_checkpoint, tmp_path):
    p = cli("eval", "infill", "--limit", "2", "--samples", "2", "--json", "--model", code_checkpoint, "--out",
            tmp_path, "--max-hole-tokens", "16")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.split("\ntorch imported")[0])
    assert out["tasks"] == 4 and out["harness_passed"] == out["harness_tasks"] == 4
    for key in ("pass_at_1", "parse_rate", "parse_rate_unconstrained", "median_steps", "exact_match"):
        assert key in out
    assert 0 <= out["pass_at_1"] <= 1 and 0 <= out["parse_rate"] <= 1
    assert set(out["pass_at_k"]) == {"1", "2"} and out["samples"] == 2 and out["mode"] == "model+verified"
    assert set(out["sets"]) == {"SingleLineInfilling", "MultiLineInfilling"}
    assert all(s["tasks"] == 2 for s in out["sets"].values())
    assert {f.name for f in tmp_path.iterdir()} >= {"infill.json", "infill.md", "infill.png"}
    report = json.loads((tmp_path / "infill.json").read_text())
    assert report["command"].startswith("diffreason eval infill --limit 2")


def test_eval_tasks_file_with_a_hole_inside_a_line_and_no_baseline(code_checkpoint, tmp_path):
    """A task file in HumanEval-infilling's format whose hole starts and ends inside lines (a random span): the
    harness passes its canonical solution; without the baseline its columns read — in the report, not nan."""
    task = {"task_id": "RandomSpan/0", "entry_point": "scale",
            "prompt": "def scale(values, k):\n    return [v * ",
            "canonical_solution": "k for v in val", "suffix": "ues]\n",
            "test": "def check(candidate):\n    assert candidate([1, 2], 3) == [3, 6]\n"}
    tasks = tmp_path / "span.jsonl"
    tasks.write_text(json.dumps(task) + "\n")
    out = tmp_path / "out"
    p = cli("eval", "infill", "--tasks", tasks, "--samples", "1", "--mode", "verified", "--no-baseline", "--json",
            "--model", code_checkpoint, "--out", out, "--max-hole-tokens", "8")
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout.split("\ntorch imported")[0])
    assert summary["tasks"] == 1 and summary["harness_passed"] == summary["harness_tasks"] == 1
    table = next(line for line in (out / "infill.md").read_text().splitlines() if line.startswith("| span |"))
    assert "nan" not in table and " / — / " in table, table


def test_a_task_the_eval_cannot_run_is_reported_and_the_others_are_evaluated(code_checkpoint, tmp_path):
    """(A hole whose language was too large to compile ended the whole eval, after the model had run: no report.)"""
    good = {"task_id": "Toy/0", "entry_point": "add", "prompt": "def add(a, b):\n", "suffix": "\n",
            "canonical_solution": "    return a + b\n",
            "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n"}
    deep = {"task_id": "Toy/deep", "entry_point": "f", "prompt": "def f(x):\n", "suffix": " " * 3000 + "return y\n",
            "canonical_solution": " " * 3000 + "y = x + 1\n", "test": "def check(c):\n    assert c(1) == 2\n"}
    tasks = tmp_path / "toy.jsonl"
    tasks.write_text(json.dumps(good) + "\n" + json.dumps(deep) + "\n")
    out = tmp_path / "out"
    p = cli("eval", "infill", "--tasks", tasks, "--samples", "1", "--mode", "model", "--no-baseline", "--json",
            "--model", code_checkpoint, "--out", out, "--max-hole-tokens", "8")
    assert p.returncode == 1, p.stderr
    summary = json.loads(p.stdout.split("\ntorch imported")[0])
    assert summary["tasks"] == 1 and summary["errors"] == 1
    assert "error: toy Toy/deep: the hole's language is too large to compile" in p.stderr
    assert "Tasks not evaluated" in (out / "infill.md").read_text()
