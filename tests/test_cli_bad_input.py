"""The command line against bad input, as a demanding user gives it: one `error: ` line and exit code 2 (never a
traceback), refused before torch is imported wherever the input alone shows the problem; nothing a user gave is lost
(a batch's good puzzles are answered beside its bad ones); Ctrl-C exits 130 with a line saying what was kept."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from diffreason.tasks import sudoku as S

# Runs the CLI as `python -m diffreason.cli` does, then says on stdout whether torch was imported.
RUNNER = (
    "import atexit, runpy, sys; "
    "atexit.register(lambda: sys.stdout.write('\\ntorch imported: %s\\n' % ('torch' in sys.modules))); "
    "runpy.run_module('diffreason.cli', run_name='__main__', alter_sys=True)"
)
ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}
PUZZLE = S.to_string(S.generate("easy", 0).puzzle)


def unsolvable(puzzle: S.Puzzle) -> list[int]:
    """The puzzle with one blank filled by a digit that breaks no rule yet leaves no solution."""
    cells = list(puzzle.puzzle)
    for i in (i for i, d in enumerate(cells) if not d):
        for d in range(1, 10):
            cells[i] = d
            if d != puzzle.solution[i] and S.first_conflict(cells) is None and S.solution_count(cells) == 0:
                return cells
        cells[i] = 0
    raise AssertionError("no such digit")


UNSOLVABLE = S.to_string(unsolvable(S.generate("easy", 0)))


def cli(*args, stdin=subprocess.DEVNULL, timeout=300, **kwargs):
    return subprocess.run([sys.executable, "-c", RUNNER, *args], stdin=stdin, capture_output=True, text=True,
                          timeout=timeout, env=ENV, **kwargs)


@pytest.fixture(scope="module")
def sudoku_checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("sudoku") / "model"
    S.build_sudoku_model("sudoku-tiny", seed=0).save(path)
    return path


@pytest.fixture(scope="module")
def paths(tmp_path_factory, tiny_checkpoint, sudoku_checkpoint) -> dict[str, str]:
    """Every bad file, checkpoint and run directory the table names, by placeholder."""
    d = tmp_path_factory.mktemp("bad")
    (d / "binary.dat").write_bytes(bytes(range(256)) * 4)
    (d / "notutf8.txt").write_bytes(b"\xff\xfe\x80\n\x81\x82\n")
    (d / "latin1.txt").write_bytes(b"# caf\xe9\n" + PUZZLE.encode() + b" r\xe9sum\xe9\n")
    (d / "empty.txt").write_text("")
    (d / "allbad.txt").write_text("123" + "." * 60 + "\n" + "11" + "." * 79 + "\n")
    (d / "afile").write_text("x")
    (d / "nonempty").mkdir()
    (d / "nonempty" / "keep.txt").write_text("mine")

    def checkpoint(name: str, edit) -> None:
        shutil.copytree(tiny_checkpoint, d / name)
        edit(d / name)

    def zero_canvas(path):
        config = json.loads((path / "config.json").read_text())
        (path / "config.json").write_text(json.dumps({**config, "canvas_length": 0}))

    checkpoint("zero_canvas", zero_canvas)
    checkpoint("torn_generation_config", lambda p: (p / "generation_config.json").write_text('{"t_max": '))
    checkpoint("hot_generation_config", lambda p: (p / "generation_config.json").write_text('{"t_max": "hot"}'))
    checkpoint("no_tokenizer", lambda p: (p / "tokenizer.json").unlink())
    (d / "json_run").mkdir()
    shutil.copytree(tiny_checkpoint, d / "json_run" / "model")
    (d / "sudoku_run").mkdir()
    shutil.copytree(sudoku_checkpoint, d / "sudoku_run" / "model")
    (d / "corrupt_state_run").mkdir()
    (d / "corrupt_state_run" / "trainer_state.pt").write_text("garbage\n")
    (d / "foreign_model_run" / "model").mkdir(parents=True)
    (d / "foreign_model_run" / "model" / "notes.txt").write_text("not a checkpoint")
    bad_schemas = {
        "binary": b"\x89PNG\r\n\x1a\n\x00\x00\x00",
        "utf16": '{"type": "string"}'.encode("utf-16"),
        "deep": b"[" * 10000 + b"]" * 10000,
        "bigint": b'{"type": "integer", "maximum": ' + b"9" * 5000 + b"}",
        "surrogate_value": b'{"enum": ["\\ud800"]}',
        "surrogate_key": b'{"type": "object", "properties": {"\\udc00": {"type": "null"}}}',
        "infinity": b'{"type": "number", "maximum": Infinity}',
        "nan": b'{"type": "number", "minimum": NaN}',
        "min_items": b'{"type": "array", "minItems": 1000000000}',
        "min_properties": b'{"type": "object", "minProperties": 1000000000}',
        "ref_false": b'{"$defs": {"no": false}, "type": "object", "required": ["a"], "properties": {"a": {"$ref": "#/$defs/no"}}}',
    }
    for name, data in bad_schemas.items():
        (d / f"{name}.schema.json").write_bytes(data)
    (d / "schemas").mkdir()
    (d / "schemas" / "a.json").write_text(json.dumps({
        "schema": {"type": "object", "properties": {"a": {"type": "integer"}}},
        "tests": [{"data": {"a": 1}, "valid": True}],
    }))
    return {"D": str(d), "D_NAME": d.name, "CKPT": str(tiny_checkpoint), "SUD": str(sudoku_checkpoint), "P": PUZZLE,
            "UNSOLVABLE": UNSOLVABLE}


SOLVE = ["solve", "sudoku", "--model", "{SUD}"]
TRAIN = ["train", "sudoku", "--preset", "sudoku-tiny", "--steps", "1", "--batch-size", "2", "--eval-every", "0"]
EVAL = ["eval", "sudoku", "--model", "{SUD}", "--n", "1", "--budgets", "2"]
GEN = ["generate", "--model", "{CKPT}"]

# (arguments, stdin, what the one error line says, whether the input alone shows it: then torch is never imported)
CASES = [
    # solve sudoku: files, stdin, puzzles, options
    (SOLVE + ["--file", "{D}/binary.dat"], None, "binary.dat is not a text file of puzzles (it holds NUL bytes)", True),
    (SOLVE + ["--file", "{D}/notutf8.txt"], None, "notutf8.txt line 1: not UTF-8 text (byte 0xff at column 1) (and 1 "
     "more: none of the 2 puzzles can be answered)", True),
    (SOLVE + ["--file", "{D}/latin1.txt"], None, "latin1.txt line 2: not UTF-8 text (byte 0xe9 at column 84)", True),
    (SOLVE + ["--file", "{D}/empty.txt"], None, "empty.txt: it is empty", True),
    (SOLVE + ["--file", "{D}"], None, "is a directory; give a file of puzzles", True),
    (SOLVE + ["--file", "{D}/missing.txt"], None, "missing.txt' does not exist", True),
    (SOLVE + ["--file", "{D}/allbad.txt"], None, "allbad.txt line 1: puzzle has 63 cells, expected 81 (and 1 more",
     True),
    (SOLVE + ["--file", "{D}/empty.txt", "{P}"], None, "give a PUZZLE or --file, not both", True),
    (SOLVE, "devnull", "no puzzle found in stdin: it is empty", True),
    (SOLVE, "closed", "no puzzle: give PUZZLE, --file F (one per line) or puzzles on stdin (stdin is closed)", True),
    (SOLVE + ["123"], None, "puzzle has 3 cells, expected 81", True),
    (SOLVE + ["11" + "." * 79], None, "contradictory givens: 1 at r1c1 and r1c2", True),
    (SOLVE + ["{UNSOLVABLE}"], None, "puzzle has no solution", True),
    (SOLVE + ["--steps", "99999999999999999999999", "{P}"], None, "--steps must be at most 4096", True),
    (SOLVE + ["--steps", "1000000000", "{P}"], None, "--steps must be at most 4096, got 1000000000", True),
    (SOLVE + ["--seed", "18446744073709551616", "{P}"], None, "--seed must be at most 9223372036854775807", True),
    (SOLVE + ["--seed", "-1", "{P}"], None, "--seed must be at least 0, got -1", True),
    (SOLVE + ["--batch-size", "-3", "{P}"], None, "--batch-size must be at least 1, got -3", True),
    (SOLVE + ["--batch-size", "100000", "{P}"], None, "--batch-size must be at most 4096", True),
    (SOLVE + ["--t-max", "inf", "{P}"], None, "--t-max must be a finite number, got inf", True),
    (SOLVE + ["--t-min", "nan", "{P}"], None, "--t-min must be a finite number, got nan", True),
    (SOLVE + ["--t-min", "5", "--t-max", "1", "{P}"], None, "--t-max (1) must be greater than --t-min (5)", True),
    (SOLVE + ["--t-min", "50", "{P}"], None, "--t-min 50 leaves t_max (", False),
    (SOLVE + ["--t-max", "0", "{P}"], None, "--t-max must lie in (0, 100], got 0", True),
    (SOLVE + ["--mode", "guess", "{P}"], None, "--mode must be one of model, verified, got 'guess'", True),
    (SOLVE + ["--threads", "-1", "{P}"], None, "--threads must be at least 0, got -1", True),
    (["solve", "sudoku", "--model", "{D}/missing", "{P}"], None, "missing' does not exist", True),
    (["solve", "sudoku", "--model", "{CKPT}", "{P}"], None, "is not a Sudoku model", False),
    # generate
    (GEN + ["--seed", str(2**64), "x"], None, "--seed must be at most 9223372036854775807", True),
    (GEN + [b"ab\xffcd"], None, "the prompt is not valid text: character 3 is '\\udcff'", True),
    (GEN + ["--steps", "5000", "x"], None, "--steps must be at most 4096, got 5000", True),
    (GEN + ["--max-new-tokens", "1000000", "x"], None, "--max-new-tokens must be at most 65536", True),
    (GEN + ["--threads", "5000", "x"], None, "--threads must be at most 1024", True),
    (["generate", "--model", "{D}/zero_canvas", "x"], None,
     "zero_canvas/config.json: canvas_length must be a positive integer, got 0", True),
    (["generate", "--model", "{D}/torn_generation_config", "x"], None,
     "torn_generation_config/generation_config.json is not valid JSON", True),
    (["generate", "--model", "{D}/hot_generation_config", "x"], None,
     "hot_generation_config/generation_config.json: t_max: Input should be a valid number", False),
    (["generate", "--model", "{D}/no_tokenizer", "x"], None, "no_tokenizer': it has no tokenizer.json", False),
    # generate --schema: files that are no JSON Schema, or ask for more than a template holds
    (GEN + ["--schema", "{D}/binary.schema.json", "x"], None, "binary.schema.json' is not UTF-8 text", True),
    (GEN + ["--schema", "{D}/utf16.schema.json", "x"], None, "is not UTF-8 text (it looks like UTF-16)", True),
    (GEN + ["--schema", "{D}/deep.schema.json", "x"], None, "nests 10000 levels deep; at most 1000", True),
    (GEN + ["--schema", "{D}/bigint.schema.json", "x"], None, "an integer of 5000 digits", True),
    (GEN + ["--schema", "{D}/surrogate_value.schema.json", "x"], None, "holds a lone surrogate", True),
    (GEN + ["--schema", "{D}/surrogate_key.schema.json", "x"], None, "holds a lone surrogate", True),
    (GEN + ["--schema", "{D}/infinity.schema.json", "x"], None, "Infinity is not JSON", True),
    (GEN + ["--schema", "{D}/nan.schema.json", "x"], None, "NaN is not JSON", True),
    (GEN + ["--schema", "{D}/missing.schema.json", "x"], None, "missing.schema.json' does not exist", True),
    (GEN + ["--schema", "{D}", "x"], None, "is a directory", True),
    (GEN + ["--schema", "{D}/min_items.schema.json", "x"], None, "minItems 1000000000 is more than this compiler "
     "writes", False),
    (GEN + ["--schema", "{D}/min_properties.schema.json", "x"], None, "minProperties 1000000000 is more than", False),
    (GEN + ["--schema", "{D}/ref_false.schema.json", "x"], None, "the schema false accepts no value", False),
    (GEN + ["--schema", "{D}/ref_false.schema.json", "--max-new-tokens", "8", "x"], None,
     "--max-new-tokens does not apply with --schema: the schema's template sets the length", True),
    # train
    (TRAIN + ["--run-dir", "{D}/afile"], None, "--run-dir '{D}/afile' is a file, not a directory", True),
    (TRAIN + ["--run-dir", "{D}/afile/run"], None, "--run-dir '{D}/afile/run' cannot be written: Not a directory",
     True),
    (TRAIN + ["--run-dir", "/proc/diffreason-test/run"], None, "cannot be written", True),
    (TRAIN + ["--run-dir", "{D}/foreign_model_run"], None, "holds a 'model' that is not a checkpoint", True),
    (TRAIN + ["--run-dir", "{D}/json_run"], None, "holds a run of another task (its model is not a Sudoku model)",
     False),
    (TRAIN + ["--run-dir", "{D}/corrupt_state_run"], None,
     "trainer_state.pt cannot be resumed (invalid literal for int()", False),
    (TRAIN + ["--run-dir", "{D}/r", "--lr", "inf"], None, "--lr must be a finite number, got inf", True),
    (TRAIN + ["--run-dir", "{D}/r", "--lr", "nan"], None, "--lr must be a finite number, got nan", True),
    (TRAIN + ["--run-dir", "{D}/r", "--lr", "0"], None, "--lr must lie in (0, 1], got 0", True),
    (TRAIN + ["--run-dir", "{D}/r", "--lr", "5"], None, "--lr must lie in (0, 1], got 5", True),
    (TRAIN + ["--run-dir", "{D}/r", "--time-budget", "inf"], None, "--time-budget must be a finite number", True),
    (TRAIN + ["--run-dir", "{D}/r", "--time-budget", "-1"], None, "--time-budget must lie in (0, 100000]", True),
    (TRAIN + ["--run-dir", "{D}/r", "--puzzle-fraction", "nan"], None, "--puzzle-fraction must be a finite", True),
    (TRAIN + ["--run-dir", "{D}/r", "--puzzle-fraction", "1.5"], None, "--puzzle-fraction must lie in [0, 1]", True),
    (TRAIN + ["--run-dir", "{D}/r", "--steps", "1000000000"], None, "--steps must be at most 10000000", True),
    (TRAIN + ["--run-dir", "{D}/r", "--batch-size", "0"], None, "--batch-size must be at least 1, got 0", True),
    (TRAIN + ["--run-dir", "{D}/r", "--save-every", "0"], None, "--save-every must be at least 1, got 0", True),
    (TRAIN + ["--run-dir", "{D}/r", "--seed", str(2**64)], None, "--seed must be at most 9223372036854775807", True),
    (TRAIN + ["--run-dir", "{D}/r", "--device", "tpu"], None, "--device must be auto, cpu or cuda, got 'tpu'", True),
    (TRAIN + ["--run-dir", "{D}/r", "--preset", "huge"], None, "unknown --preset 'huge'", True),
    (TRAIN + ["--run-dir", "{D}/r", "--init-from", "{D}/missing"], None, "missing' does not exist", True),
    (["train", "json", "--schemas", "{D}/missing"], None, "--schemas '{D}/missing' is not a directory", True),
    (["train", "json", "--schemas", "{D}/schemas", "--run-dir", "{D}/r", "--lr", "inf"], None,
     "--lr must be a finite number", True),
    (["train", "json", "--schemas", "{D}/schemas", "--run-dir", "{D}/sudoku_run", "--steps", "1"], None,
     "--run-dir '{D}/sudoku_run' holds a run of a Sudoku model, not a JSON one", False),
    # eval
    (EVAL + ["--tiers", ",", "--out", "{D}/out"], None, "--tiers names no tier", True),
    (EVAL + ["--puzzles", "{D}/latin1.txt,{D}/../{D_NAME}/latin1.txt", "--out", "{D}/out"], None,
     "--puzzles names '{D}/../{D_NAME}/latin1.txt' twice", True),
    (EVAL + ["--modes", "", "--out", "{D}/out"], None, "--modes names no mode", True),
    (EVAL + ["--tiers", "impossible", "--out", "{D}/out"], None, "unknown tier or mode 'impossible'", True),
    (EVAL + ["--out", "{D}/afile"], None, "--out '{D}/afile' is a file, not a directory", True),
    (EVAL + ["--out", "{D}/afile/reports"], None, "cannot be written: Not a directory", True),
    (EVAL + ["--n", "0", "--out", "{D}/out"], None, "--n must be at least 1, got 0", True),
    (EVAL + ["--budgets", "2,99999", "--out", "{D}/out"], None, "--budgets values must be at most 4096", True),
    (EVAL + ["--t-max", "inf", "--out", "{D}/out"], None, "--t-max must be a finite number", True),
    (["eval", "json", "--schemas", "{D}/schemas", "--threads", "-1"], None, "--threads must be at least 0", True),
    # (QA, 2026-12-07: a misspelt collection beside a good one shrank the eval without a word)
    (["eval", "json", "--schemas", "{D}/schemas", "--collections", "a,Nope", "--out", "{D}/out"], None,
     "--collections: '{D}/schemas' holds no schema of 'Nope' (its collections: a)", False),
    # (QA, 2026-12-07: a model that cannot write JSON was reported as compiler crashes)
    (["eval", "json", "--schemas", "{D}/schemas", "--model", "{SUD}", "--out", "{D}/out"], None,
     "--model '{SUD}' cannot write JSON", False),
    # build-model
    (["build-model", "/proc/diffreason-test/m"], None, "cannot be written", True),
    (["build-model", "{D}/afile"], None, "exists and is not a directory", True),
    (["build-model", "{D}/nonempty"], None, "is not empty; choose a new directory", True),
    (["build-model", "--seed", "-1", "{D}/m"], None, "--seed must be at least 0", True),
    (["build-model", "--preset", "huge", "{D}/m"], None, "unknown preset 'huge'", True),
    # an empty path reads as the current directory: a run's files landed there (QA, 2026-12-07)
    (TRAIN + ["--run-dir", ""], None, "--run-dir is empty: name a path ('.' for the current directory)", True),
    (TRAIN + ["--run-dir="], None, "--run-dir is empty", True),
    (EVAL + ["--out", ""], None, "--out is empty", True),
    (["infill", "--mode", "model", ""], None, "FILE is empty", True),
    (["build-model", "--preset", "tiny", ""], None, "OUT is empty", True),
    # the CLI framework's own
    (["solve", "sudoku", "--bogus"], None, "No such option: --bogus", True),
    (["nosuchcommand"], None, "No such command", True),
]


def _ids():
    return [" ".join(a if isinstance(a, str) else repr(a) for a in args[:2] + args[-3:]) for args, *_ in CASES]


@pytest.mark.parametrize("args, stdin, message, early", CASES, ids=_ids())
def test_bad_input_is_one_error_line_and_exit_2(args, stdin, message, early, paths):
    args = [a.format(**paths) if isinstance(a, str) else a for a in args]
    p = cli(*args, **({"preexec_fn": lambda: os.close(0)} if stdin == "closed" else {}))
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert message.format(**paths) in lines[0]
    assert "Traceback" not in p.stderr + p.stdout
    if early:
        assert p.stdout.rstrip().endswith("torch imported: False"), "the input alone shows the problem"


def test_a_bad_puzzle_fails_before_torch_is_imported():
    """What `python -X importtime` sees: a malformed puzzle and a bad option never reach torch or transformers."""
    for args in (["solve", "sudoku", "123"], ["solve", "sudoku", "--mode", "magic", PUZZLE]):
        p = subprocess.run([sys.executable, "-X", "importtime", "-m", "diffreason.cli", *args], capture_output=True,
                           text=True, timeout=120, env=ENV)
        imported = {ln.rsplit("|", 1)[-1].strip() for ln in p.stderr.splitlines() if ln.startswith("import time:")}
        assert p.returncode == 2 and p.stderr.splitlines()[-1].startswith("error: ")
        assert "typer" in imported and not {m for m in imported if m.split(".")[0] in ("torch", "transformers")}


def test_good_puzzles_are_answered_beside_bad_ones(paths, tmp_path):
    """One file: a header, two 9-line grids, a line puzzle, and bad ones (malformed, conflicting givens, no solution,
    a cut-off grid). Every good puzzle is answered in input order; each bad one gets an error record with its line and
    an error line on stderr; exit code 1."""
    a, b = (S.generate("easy", k).puzzle for k in (1, 2))
    lines = ["# puzzles to try", *S.to_grid(a).splitlines(), "", "12x" + "." * 60, *S.to_grid(b).splitlines(),
             PUZZLE + "  # easy", "11" + "." * 79, UNSOLVABLE, "1 2 3 | 4 5 6 | 7 8 9"]
    f = tmp_path / "mixed.txt"
    f.write_text("\n".join(lines) + "\n")
    p = cli("solve", "sudoku", "--model", paths["SUD"], "--steps", "2", "--json", "--file", str(f))
    assert p.returncode == 1, p.stderr
    records = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]
    assert [r["line"] for r in records] == [2, 14, 15, 26, 27, 28, 29]  # input order, errors in their places
    answered = [r for r in records if "error" not in r]
    errors = [r for r in records if "error" in r]
    assert [r["puzzle"] for r in answered] == [S.to_string(a), S.to_string(b), PUZZLE]
    assert all(len(r["solution"]) == 81 and r["has_solution"] and r["unique"] for r in answered)
    assert [r["input"] for r in errors] == ["12x" + "." * 60, "11" + "." * 79, UNSOLVABLE, "1 2 3 | 4 5 6 | 7 8 9"]
    assert "invalid character(s) 'x'" in errors[0]["error"] and "contradictory givens" in errors[1]["error"]
    assert errors[2]["error"].startswith("puzzle has no solution") and errors[2]["has_solution"] is False
    assert "grid has 1 row" in errors[3]["error"]
    stderr = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert [ln.split(": ", 2)[1] for ln in stderr] == [f"{f} line {n}" for n in (14, 27, 28, 29)]
    assert all(ln.startswith("error: ") for ln in stderr) and "Traceback" not in p.stderr


def test_an_unsolvable_puzzle_is_said_to_have_none_and_costs_no_model_time(paths):
    p = cli("solve", "sudoku", "--model", paths["SUD"], "--steps", "2", stdin=None,
            input=f"{PUZZLE}\n{UNSOLVABLE}\n")
    assert p.returncode == 1, p.stderr
    assert "stdin line 2: puzzle has no solution" in p.stderr
    assert p.stdout.count("steps (mode model)") == 1 and "line 1: " in p.stdout
    assert "1 could not be answered" in p.stderr


def interruptible() -> None:
    """In the child before exec: SIGINT delivered as a terminal delivers it (a shell's background job, e.g. `make
    test &`, starts with SIGINT ignored, and a Python started so never raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for(predicate, timeout: float = 240.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.1)


def test_ctrl_c_during_training_keeps_the_last_checkpoint(tmp_path):
    import torch

    run = tmp_path / "run"
    p = subprocess.Popen(
        [sys.executable, "-m", "diffreason.cli", *TRAIN[:4], "--steps", "100000", "--batch-size", "2",
         "--eval-every", "0", "--save-every", "2", "--run-dir", str(run)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
        preexec_fn=interruptible,
    )
    try:
        wait_for(lambda: (run / "trainer_state.pt").is_file() or p.poll() is not None)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
    finally:
        p.kill()
    step = torch.load(run / "trainer_state.pt", weights_only=False)["step"]
    assert p.returncode == 130, err
    assert err.splitlines()[-1] == (f"interrupted: kept the checkpoint of step {step} in {run}; rerun the same command "
                                    "to resume")
    assert step >= 2 and step % 2 == 0 and "Traceback" not in err


def test_ctrl_c_during_solve_prints_the_answers_so_far(paths, tmp_path):
    f = tmp_path / "many.txt"
    f.write_text((PUZZLE + "\n") * 3000)
    p = subprocess.Popen(
        [sys.executable, "-m", "diffreason.cli", *[a.format(**paths) for a in SOLVE], "--file", str(f), "--json",
         "--batch-size", "1", "--steps", "30"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
        preexec_fn=interruptible,
    )
    try:
        first = p.stdout.readline()
        p.send_signal(signal.SIGINT)
        rest, err = p.communicate(timeout=120)
    finally:
        p.kill()
    answers = [json.loads(ln) for ln in (first + rest).splitlines()]
    assert p.returncode == 130, err
    assert 1 <= len(answers) < 3000 and all(r["puzzle"] == PUZZLE for r in answers)
    assert err.splitlines()[-1] == (f"interrupted: answered {len(answers)} of 3000 puzzles (printed above); the other "
                                    f"{3000 - len(answers)} were not")


def test_eval_json_reports_bad_files_and_evaluates_the_others(tmp_path):
    """A schema folder with a torn file, a file without "schema" and two good ones: the good ones are compiled and
    checked, each bad file is one error line naming it, and the exit code says something failed."""
    folder = tmp_path / "schemas"
    folder.mkdir()
    good = {"schema": {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}, "tests": []}
    (folder / "Good_1.json").write_text(json.dumps(good))
    (folder / "Good_2.json").write_text(json.dumps({"schema": {"type": "string", "maxLength": 4}}))
    (folder / "Good_3.json").write_text('{"schema": {"type": ')
    (folder / "Good_4.json").write_text(json.dumps({"tests": []}))
    p = cli("eval", "json", "--schemas", str(folder), "--fillings", "2", "--out", str(tmp_path / "out"))
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error: ")]
    assert p.returncode == 1, p.stderr
    assert len(errors) == 2 and "Traceback" not in p.stderr
    assert "Good_3.json" in errors[0] + errors[1] and "Good_4.json has no \"schema\" member" in errors[0] + errors[1]
    report = json.loads((tmp_path / "out" / "json.json").read_text())
    assert report["total"]["schemas"] == 2 and report["total"]["compiled"] == 2 and report["total"]["valid"] == 4
    assert {x["file"] for x in report["bad_files"]} == {"Good_3.json", "Good_4.json"}


def test_eval_json_reads_each_schema_in_its_draft_and_takes_boolean_schemas(tmp_path):
    # QA: a draft-04 exclusiveMinimum was judged as 2020-12 (a false "validator disagreement"), and the schema
    # `true` under --model crashed the prompt (counted as invalid outputs)
    from diffreason.cli import EMBEDDED_JSON

    folder = tmp_path / "schemas"
    folder.mkdir()
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "minimum": 0,
              "exclusiveMinimum": True, "maximum": 1}
    (folder / "Mine_1.json").write_text(json.dumps({"schema": draft4, "tests": [{"data": 0.5, "valid": True},
                                                                                {"data": 0, "valid": False}]}))
    (folder / "Mine_2.json").write_text(json.dumps({"schema": True, "tests": [{"data": 1, "valid": True}]}))
    p = cli("eval", "json", "--schemas", str(folder), "--fillings", "2", "--model", str(EMBEDDED_JSON), "--out",
            str(tmp_path / "out"))
    assert p.returncode == 0, p.stderr
    report = json.loads((tmp_path / "out" / "json.json").read_text())
    assert report["validator_disagreements"] == 0 and report["total"]["compiled"] == 2, report
    assert report["invalid_outputs"] == [] and report["total"]["valid"] == 4, report
    assert "invalid" not in report["total"], report


def test_eval_json_counts_a_template_longer_than_the_model_apart_not_as_invalid(tmp_path):
    """(The model's context refused the request, and it was counted as an invalid output, exit 1: a compiler bug.)"""
    from diffreason.cli import EMBEDDED_JSON

    folder = tmp_path / "schemas"
    folder.mkdir()
    wide = {"type": "object", "required": [f"member_{k}" for k in range(400)],
            "properties": {f"member_{k}": {"type": "integer"} for k in range(400)}}
    (folder / "Mine_1.json").write_text(json.dumps({"schema": wide}))
    (folder / "Mine_2.json").write_text(json.dumps({"schema": {"type": "boolean"}}))
    p = cli("eval", "json", "--schemas", str(folder), "--fillings", "1", "--model", str(EMBEDDED_JSON), "--out",
            str(tmp_path / "out"))
    assert p.returncode == 0, p.stderr
    report = json.loads((tmp_path / "out" / "json.json").read_text())
    assert report["invalid_outputs"] == [] and report["total"]["valid"] == 1 and report["total"]["too_long"] == 1
    assert [x["schema"] for x in report["too_long_for_the_model"]] == ["Mine_1.json"]
    assert "positions; the model has 4096" in report["too_long_for_the_model"][0]["error"]
    assert "Outputs not generated (the template needs more positions" in (tmp_path / "out" / "json.md").read_text()


def test_a_puzzle_argument_that_cannot_be_answered_gets_its_json_record():
    """(--json printed a record for each bad puzzle of a file, and none for a bad PUZZLE argument.)"""
    for puzzle, error in (("abc", "invalid character(s) 'abc'"), ("11" + "." * 79, "")):
        p = cli("solve", "sudoku", "--json", puzzle)
        record = json.loads(p.stdout.splitlines()[0])
        assert p.returncode == 2 and record["line"] is None and record["input"] == puzzle, p.stdout + p.stderr
        assert error in record["error"] and p.stderr.strip() == f"error: {record['error']}"
