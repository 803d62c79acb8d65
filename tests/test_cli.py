"""The command line as a user runs it: JSON output, and one-line errors with exit code 2."""

import json
import os
import subprocess
import sys

import pytest


def run(*args, timeout=300):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, "-m", "diffreason.cli", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def test_generate_json(tiny_checkpoint):
    p = run("generate", "--model", str(tiny_checkpoint), "--seed", "3", "--steps", "5", "--json", "Hello")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert isinstance(out["text"], str) and all(isinstance(t, int) for t in out["tokens"])
    assert out["steps"] and all(1 <= s <= 5 for s in out["steps"])
    again = json.loads(run("generate", "--model", str(tiny_checkpoint), "--seed", "3", "--steps", "5", "--json", "Hello").stdout)
    assert again["tokens"] == out["tokens"]


def test_generate_prints_the_text_as_generated(tiny_checkpoint):
    """Plain output is the text itself, not wrapped at the terminal's width (COLUMNS), nor its tabs expanded."""
    args = ("generate", "--model", str(tiny_checkpoint), "--seed", "4", "--steps", "3", "Hello")
    text = json.loads(run(*args, "--json").stdout)["text"]
    assert len(text) > 12
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "COLUMNS": "12"}
    p = subprocess.run([sys.executable, "-m", "diffreason.cli", *args], capture_output=True, text=True, timeout=300,
                       env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout == text + "\n"


def test_generate_stops_at_max_new_tokens(tiny_checkpoint):
    """Canvases come whole (raw_tokens, as transformers returns them); the output stops at --max-new-tokens."""
    p = run("generate", "--model", str(tiny_checkpoint), "--seed", "3", "--steps", "3", "--max-new-tokens", "5",
            "--json", "Hello")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert len(out["tokens"]) <= 5 and out["tokens"] == out["raw_tokens"][: len(out["tokens"])]
    assert len(out["raw_tokens"]) > 5
    assert out["finished"] == (len(out["tokens"]) < 5)  # (an EOS within the five tokens)


def test_generate_says_when_max_new_tokens_is_cut_to_the_models_positions(tmp_path):
    """(--max-new-tokens past the model's positions was cut without a word: QA, 2026-12-07.) A tiny model of 80
    positions holds a 2-token prompt and two canvases of 32."""
    from diffreason import build_model

    build_model("tiny", seed=0, max_position_embeddings=80).save(tmp_path / "m")
    p = run("generate", "--model", str(tmp_path / "m"), "--seed", "1", "--steps", "3", "--max-new-tokens", "200",
            "--json", "Hello")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert not out["finished"] and len(out["raw_tokens"]) == len(out["tokens"]) == 64
    assert ("note: --max-new-tokens 200 was cut to 64: the prompt (2 tokens) and whole canvases of 32 fill the "
            "model's 80 positions") in p.stderr
    p = run("generate", "--model", str(tmp_path / "m"), "--seed", "1", "--steps", "3", "--max-new-tokens", "64",
            "--json", "Hello")
    assert p.returncode == 0 and "note:" not in p.stderr, p.stderr


def test_generate_watch(tiny_checkpoint):
    p = run("generate", "--model", str(tiny_checkpoint), "--steps", "3", "--watch", "Hi")
    assert p.returncode == 0, p.stderr
    assert "step 3/3" in p.stderr


def test_build_model(tmp_path):
    p = run("build-model", "--preset", "tiny", str(tmp_path / "m"))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "m" / "model.safetensors").is_file()


@pytest.mark.parametrize(
    "args, message",
    [
        (["generate", "--model", "/nonexistent/dir", "x"], "does not exist"),
        (["generate", "--schema", "/nonexistent/schema.json", "x"], "schema file '/nonexistent/schema.json' does not exist"),
        (["generate", "--bogus"], "No such option"),
        (["generate", "--model", "CKPT", "--steps", "0", "x"], "--steps must be at least 1"),
        (["generate", "--model", "CKPT", "--steps", "many", "x"], "Invalid value for '--steps'"),
        (["generate", "--model", "CKPT", "--max-new-tokens", "0", "x"], "--max-new-tokens must be at least 1"),
        (["build-model", "--preset", "huge", "OUT"], "unknown preset 'huge'"),
        (["nosuchcommand"], "No such command"),
    ],
)
def test_user_errors_are_one_line_exit_2(args, message, tiny_checkpoint, tmp_path):
    args = [str(tiny_checkpoint) if a == "CKPT" else str(tmp_path / "out") if a == "OUT" else a for a in args]
    p = run(*args)
    assert p.returncode == 2
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("error: ") and message in lines[0]
    assert "Traceback" not in p.stderr


def test_eval_json_suite_and_fuzz_commands(tmp_path):
    """The two soundness evals as a user runs them: reports written, exit 0 when nothing unsound was found."""
    p = run("eval", "json-suite", "--drafts", "draft6", "--fillings", "1", "--out", str(tmp_path / "suite"))
    assert p.returncode == 0, p.stderr
    report = json.loads((tmp_path / "suite" / "json_suite.json").read_text())
    assert report["total"]["compiled"] > 150 and not report["invalid_inside"] and not report["crashes"]
    p = run("eval", "json-fuzz", "--examples", "30", "--seed", "5", "--fillings", "2", "--out", str(tmp_path / "fuzz"))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr
    report = json.loads((tmp_path / "fuzz" / "json_fuzz.json").read_text())
    assert report["counts"]["generated"] == 30 and not report["failures"]
