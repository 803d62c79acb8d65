"""`diffreason eval suite` as a user runs it: one report from a suite file; a killed run continues to the very results
of an uninterrupted one; a changed definition, an unknown suite or a bad file is one line and exit code 2."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

ENV = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
TIMING = ("seconds", "seconds_per_item", "items_per_second")


def command(*args):
    return [sys.executable, "-m", "diffreason.cli", "eval", "suite", *args]


def run(*args, timeout=300):
    return subprocess.run(command(*args), capture_output=True, text=True, timeout=timeout, env=ENV)


def one_error_line(p, message):
    assert p.returncode == 2, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("error: ") and message in lines[0], lines[0]


def write_suite(folder, file="suite.json", **change):
    """A tiny suite: generated easy puzzles (chunks of 2), hard ones with two chains, a puzzle file, two schemas."""
    from diffreason.tasks import sudoku

    folder.mkdir(parents=True, exist_ok=True)
    puzzles = [sudoku.to_string(sudoku.generate("easy", 10**6 + k).puzzle) for k in range(3)]
    (folder / "puzzles.txt").write_text("# three easy ones\n" + "\n".join(puzzles) + "\nnot a puzzle\n")
    schemas = folder / "schemas"
    schemas.mkdir(exist_ok=True)
    (schemas / "Tiny_a.json").write_text(json.dumps({"schema": {"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]}}))
    (schemas / "Tiny_b.json").write_text(json.dumps({"schema": {"type": "array", "items": {"type": "boolean"},
                                                                "minItems": 1, "maxItems": 3}}))
    suite = {"name": "tiny", "entries": [
        {"task": "sudoku", "set": "easy", "mode": "model", "n": 6, "options": {"chunk": 2}},
        {"task": "sudoku", "set": "hard", "mode": "model", "n": 3, "options": {"samples": 2, "chunk": 1}},
        {"task": "sudoku", "set": "mine", "mode": "verified", "n": 0, "options": {"file": "puzzles.txt"}},
        {"task": "json", "set": "all", "mode": "random", "n": 0, "options": {"schemas": "schemas", "fillings": 2}},
    ]}
    suite.update(change)
    path = folder / file
    path.write_text(json.dumps(suite))
    return path


def items(out):
    """results.jsonl without the wall times (and the header's command): what a seed must reproduce."""
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    lines[0]["header"].pop("command")
    return [{k: v for k, v in line.items() if k not in TIMING} for line in lines]


def numbers(out):
    report = json.loads((out / "suite.json").read_text())
    report.pop("command")
    report.pop("seconds")
    for row in report["rows"]:
        for key in TIMING:
            row.pop(key, None)
    for c in report["comparisons"]:
        for key in TIMING:
            c.pop(key, None)
    return report


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """An uninterrupted run of the tiny suite: (suite file, out)."""
    folder = tmp_path_factory.mktemp("suite")
    path = write_suite(folder)
    out = folder / "out"
    p = run("--suite-file", str(path), "--out", str(out), "--seed", "5")
    assert p.returncode == 0, p.stderr
    return path, out


def test_suite_writes_one_report_with_the_counts(finished):
    path, out = finished
    lines = items(out)
    assert "header" in lines[0] and lines[0]["header"]["seed"] == 5 and len(lines[0]["header"]["entries"]) == 4
    report = json.loads((out / "suite.json").read_text())
    rows = {(r["task"], r["set"], r["mode"]): r for r in report["rows"]}
    assert list(rows) == [("sudoku", "easy", "model"), ("sudoku", "hard", "model ×2"),
                          ("sudoku", "mine", "verified"), ("json", "all", "random")]
    assert [r["done"] for r in rows.values()] == [6, 3, 3, 2]  # (the file's bad line skipped; n 0: all)
    assert len(lines) == 1 + 6 + 3 + 3 + 2 and report["items"] == 14 and report["complete"]
    easy = rows["sudoku", "easy", "model"]
    solved = [x for x in lines[1:7] if x["solved"]]
    assert easy["solved_rate"] == round(len(solved) / 6, 4)
    assert easy["steps_median"] is not None and easy["steps_p90"] >= easy["steps_median"]
    # the curve: solved within s steps, reaching the solve rate at the most steps any puzzle took
    assert easy["within_steps"][-1] == easy["solved_rate"] and len(easy["within_steps"]) == max(
        x["steps"] for x in lines[1:7])
    assert easy["seconds_per_item"] > 0 and easy["items_per_second"] > 0
    assert all(x["record"]["samples"] <= 2 for x in lines[7:10])
    schemas = rows["json", "all", "random"]
    assert schemas["baseline"] and schemas["valid_rate"] == 1.0 and schemas["json"]["outputs"] == 4
    assert sorted(x["id"] for x in lines[13:]) == ["Tiny_a.json", "Tiny_b.json"]
    md = (out / "suite.md").read_text()
    assert f"--suite-file {path}" in md and "| sudoku | mine | verified | 3 |" in md
    assert (out / "suite.png").stat().st_size > 1000
    # --report-only rebuilds the same report from results.jsonl alone
    before = numbers(out)
    p = run("--report-only", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert numbers(out) == before


def test_a_killed_run_continues_to_the_same_results(finished, tmp_path):
    _, done = finished
    path = write_suite(tmp_path)
    out = tmp_path / "out"
    results = out / "results.jsonl"
    proc = subprocess.Popen(command("--suite-file", str(path), "--out", str(out), "--seed", "5"), env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if results.exists() and len(results.read_text().splitlines()) >= 3:  # the header and a first chunk
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    kept = results.read_text().splitlines()
    assert proc.returncode == -signal.SIGKILL and 3 <= len(kept) < 15, len(kept)
    assert not (out / "suite.json").exists()
    p = run("--suite-file", str(path), "--out", str(out), "--seed", "5")
    assert p.returncode == 0, p.stderr
    assert results.read_text().splitlines()[: len(kept)] == kept  # continued, not redone
    assert items(out)[1:] == items(done)[1:]  # (the headers differ in the folder of the suite file only)
    assert numbers(out) == numbers(done)


def test_a_changed_definition_is_refused_on_resume(finished, tmp_path):
    path, done = finished
    out = tmp_path / "out"
    shutil.copytree(done, out)
    entries = json.loads(path.read_text())["entries"]
    entries[0]["n"] = 5
    changed = write_suite(path.parent, "changed.json", entries=entries)
    one_error_line(run("--suite-file", str(changed), "--out", str(out), "--seed", "5"),
                   "holds results of another suite definition: the entries differ (from entry 1; 4 there, 4 now)")
    one_error_line(run("--suite-file", str(path), "--out", str(out), "--seed", "6"),
                   "the seed differs (5 there, 6 now); pass --restart to discard them")
    assert items(out) == items(done)  # untouched


@pytest.mark.parametrize("args, message", [
    (["nosuch"], "unknown suite 'nosuch'; the named suites are quick, full"),
    ([], "give a suite name (quick, full) or --suite-file FILE"),
    (["quick", "--suite-file", "SUITE"], "not both"),
    (["--suite-file", "MISSING"], "cannot be read"),
    (["--suite-file", "TOML:[[entries]]\ntask = "], "is not TOML"),
    (["--suite-file", 'JSON:{"entries": [{"task": "chess", "set": "a", "mode": "model", "n": 1}]}'],
     "entry 1: unknown task 'chess'"),
    (["--suite-file", 'JSON:{"entries": [{"task": "sudoku", "set": "easy", "mode": "model", "n": 2, '
      '"options": {"samples": 0}}]}'], "entry 1: option 'samples' must lie in [1, 256], got 0"),
    (["--suite-file", 'JSON:{"entries": [{"task": "sudoku", "set": "easy", "mode": "model", "n": "2"}]}'],
     "`n` must be an integer"),
    (["--suite-file", 'JSON:{"entries": [{"task": "sudoku", "set": "easy", "mode": "autoregressive", "n": 2}]}'],
     "give its checkpoint with --baseline DIR"),
    (["--suite-file", 'JSON:{"entries": [{"task": "sudoku", "set": "mine", "mode": "model", "n": 0, '
      '"options": {"file": "nope.txt"}}]}'], "suite.json': entry 1: option `file` '"),  # (named the entry)
    (["--suite-file", 'JSON:{"entries": [{"task": "json", "set": "x", "mode": "random", "n": 1, '
      '"options": {"compile_timeout": 0}}]}'], "entry 1: option 'compile_timeout' must lie in (0, 86400], got 0"),
    (["--report-only", "--out", "EMPTY"], "no suite results in"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path):
    def arg(a):
        if a == "SUITE" or a == "MISSING":
            return str(tmp_path / "suite.json")
        if a == "EMPTY":
            return str(tmp_path)
        if a.startswith(("TOML:", "JSON:")):
            path = tmp_path / ("suite.toml" if a.startswith("TOML:") else "suite.json")
            path.write_text(a[5:])
            return str(path)
        return a

    if "SUITE" in args:
        write_suite(tmp_path)
    p = run(*map(arg, args), "--out", str(tmp_path / "out")) if "--out" not in args else run(*map(arg, args))
    one_error_line(p, message)
    assert "Traceback" not in p.stderr


def test_a_line_cut_off_by_a_kill_is_dropped_and_the_run_goes_on(tmp_path):
    from diffreason.evals.suite import Results, SuiteError

    results = Results(tmp_path / "results.jsonl")
    head = {"suite": "s", "entries": [], "seed": 0}
    assert results.start(head, restart=False) == []
    records = [{"task": "sudoku", "set": "easy", "mode": "model", "item": k} for k in (0, 1)]
    results.append(records)
    with open(results.path, "a") as f:
        f.write('{"task": "sudoku", "it')  # a write the kill cut off
    assert results.start(head, restart=False) == records
    assert results.path.read_text().endswith('"item": 1}\n')  # cut from the file: appending goes on after it
    with pytest.raises(SuiteError, match="another suite definition: the seed differs"):
        results.start({**head, "seed": 1}, restart=False)
    assert results.start({**head, "seed": 1}, restart=True) == []
    assert len(results.path.read_text().splitlines()) == 1
    # a second suite writing to the same folder at once is refused (it would append every item twice)
    with pytest.raises(SuiteError, match="another suite is writing to"):
        Results(tmp_path / "results.jsonl").start({**head, "seed": 1}, restart=False)


@pytest.mark.parametrize("line", ['{"foo": 1}', "null", '{"task": "sudoku", "set": "easy", "mode": "model"}',
                                  '{"task": "sudoku", "set": "easy", "mode": "model", "item": "0"}'])
def test_a_line_that_is_no_record_is_one_clear_error(tmp_path, line):
    from diffreason.evals.suite import Results, SuiteError

    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({"header": {"seed": 0}}) + "\n" + line + "\n")
    with pytest.raises(SuiteError, match="line 2 is not a result record"):
        Results(path).read()
    path.write_text('{"header": 5}\n')
    with pytest.raises(SuiteError, match="no suite header on its first line"):
        Results(path).read()


def test_changed_files_or_checkpoints_at_the_same_paths_are_another_definition(tmp_path):
    # the same counts, other contents: a resumed suite would have mixed the two (QA, 2026-12-06)
    from diffreason.evals import suite as suites
    from diffreason.tasks import sudoku

    folder = tmp_path / "s"
    path = write_suite(folder)
    model = tmp_path / "model"
    shutil.copytree("diffreason/weights/sudoku-base", model)

    def head():
        suite = suites.load_suite_file(path, False)
        return suites.header(suite, 5, {"sudoku": str(model)}, "cmd", [suites.Items(e) for e in suite.entries])

    first = head()
    assert suites._differs(first, head()) is None
    puzzles = [sudoku.to_string(sudoku.generate("easy", 2 * 10**6 + k).puzzle) for k in range(3)]
    (folder / "puzzles.txt").write_text("\n".join(puzzles) + "\n")  # three other puzzles
    assert suites._differs(first, head()) == "the items of entry 3 differ (a puzzle, schema or task file changed?)"
    write_suite(folder)
    (folder / "schemas" / "Tiny_b.json").write_text(json.dumps({"schema": {"type": "boolean"}}))
    assert suites._differs(first, head()).startswith("the items of entry 4 differ")
    write_suite(folder)
    config = model / "generation_config.json"
    config.write_text(config.read_text().replace('"max_denoising_steps": 20', '"max_denoising_steps": 5'))
    assert suites._differs(first, head()) == ("the sudoku checkpoint's contents differ (retrained or replaced at the "
                                              "same path?)")
    old = {k: v for k, v in first.items() if k not in ("items", "model_digests")}  # a header from before digests
    assert suites._differs(old, first) is None


def test_report_only_finds_a_suite_files_named_folder(tmp_path, monkeypatch):
    """`--report-only --suite-file F` reads evals/reports/suite-NAME, NAME the file's `name` (it read the stem)."""
    from diffreason.evals import suite as suites

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"name": "mine", "entries": [
        {"task": "sudoku", "set": "easy", "mode": "model", "n": 1, "options": {"steps": 2}}]}))
    assert suites.suite_file_name(path) == "mine"
    p = run("--suite-file", str(path), "--report-only")
    one_error_line(p, "no suite results in 'evals/reports/suite-mine'")


def test_report_only_refuses_another_suites_results(finished):
    """QA, 2026-12-07: `quick --out DIR --report-only` over the results of suite "tiny" rebuilt tiny's report."""
    _, out = finished
    one_error_line(run("quick", "--out", str(out), "--report-only"), f"{str(out)!r} holds the results of suite "
                                                                       "'tiny', not 'quick'")


def test_the_named_suites_are_valid_and_name_their_baseline_entries():
    from diffreason.evals.suite import SuiteError, models_used, named_suite

    for name in ("quick", "full"):
        plain, with_ar = named_suite(name, baseline=False), named_suite(name, baseline=True)
        assert {e.task for e in plain.entries} == {"sudoku", "json", "infill"}
        assert models_used(plain) == {"sudoku", "json", "code"}
        added = [e for e in with_ar.entries if e not in plain.entries]
        assert added and all(e.mode == "autoregressive" for e in added)
        assert {e.set for e in added} == {e.set for e in plain.entries if e.task == "sudoku"}
    full = named_suite("full", baseline=False)
    assert {e.set for e in full.entries if e.task == "sudoku"} == {"easy", "medium", "hard", "extreme", "diabolical"}
    assert {e.label for e in full.entries if e.task == "sudoku"} == {"model", "verified", "model ×16"}
    with pytest.raises(SuiteError, match="unknown suite 'fast'"):
        named_suite("fast", baseline=False)


def test_a_puzzle_files_bad_puzzles_are_warned_about(tmp_path, capsys):
    """(A suite's puzzle file lost its bad puzzles without a word; `eval sudoku --puzzles` warns.)"""
    from diffreason.evals import suite as suites
    from diffreason.tasks import sudoku

    path = write_suite(tmp_path / "s")
    good = sudoku.to_string(sudoku.generate("easy", 5).puzzle)
    (tmp_path / "s" / "puzzles.txt").write_text(f"{good}\n{good[:-1]}\n")
    assert len(suites.Items(suites.load_suite_file(path, False).entries[2])) == 1
    assert "puzzles.txt line 2: puzzle has 80 cells, expected 81 (skipped)" in capsys.readouterr().err


def test_report_only_refuses_options_it_would_not_apply(tmp_path):
    path = write_suite(tmp_path / "s")
    p = run("--suite-file", str(path), "--out", str(tmp_path / "out"), "--report-only", "--restart", "--seed", "3")
    one_error_line(p, "--report-only rebuilds the report from the results as they were run: --restart, --seed would "
                      "not apply")


def test_an_infill_task_the_suite_cannot_run_is_a_problem_and_the_others_are_evaluated(tmp_path):
    """(A hole whose language was too large to compile ended the suite with a traceback, as it ended `eval infill`
    before: QA, 2026-12-07.) The good task is evaluated; the other is said, left out of the rates, and exit code 1."""
    good = {"task_id": "Toy/0", "entry_point": "add", "prompt": "def add(a, b):\n", "suffix": "\n",
            "canonical_solution": "    return a + b\n",
            "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n"}
    deep = {"task_id": "Toy/deep", "entry_point": "f", "prompt": "def f(x):\n", "suffix": " " * 3000 + "return y\n",
            "canonical_solution": " " * 3000 + "y = x + 1\n", "test": "def check(c):\n    assert c(1) == 2\n"}
    (tmp_path / "toy.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(deep) + "\n")
    path = tmp_path / "suite.json"
    path.write_text(json.dumps({"name": "toy", "entries": [{"task": "infill", "set": "toy", "mode": "model", "n": 0,
                                                            "options": {"file": "toy.jsonl", "max_hole_tokens": 8}}]}))
    out = tmp_path / "out"
    p = run("--suite-file", str(path), "--out", str(out), "--seed", "1")
    assert p.returncode == 1, p.stderr
    assert "error: Toy/deep: not evaluated: the hole's language is too large to compile" in p.stderr
    row = json.loads((out / "suite.json").read_text())["rows"][0]
    assert row["done"] == 2 and row["solved_rate"] in (0.0, 1.0) and row["valid_rate"] in (0.0, 1.0)
    assert row["infill"]["problems"] == [line[len("error: "):] for line in p.stderr.splitlines()
                                         if line.startswith("error: Toy/deep")]
    assert "Problems (items not evaluated" in (out / "suite.md").read_text()


def test_a_model_row_and_its_baseline_on_other_items_are_marked_not_comparable():
    """(Rows were paired by task and set alone: a baseline run on other puzzles — another generator seed, file or n
    — sat beside the model row as its comparison: QA, 2026-12-07.)"""
    from diffreason.evals.suite import build_report

    def lines(mode, ids):
        return [{"task": "sudoku", "set": "easy", "mode": mode, "item": k, "id": i, "solved": True, "valid": None,
                 "steps": 3, "seconds": 0.1, "record": {"solution": "1" * 81, "samples": 1, "voted": False,
                                                         "budget": 48}} for k, i in enumerate(ids)]

    entries = [{"task": "sudoku", "set": "easy", "mode": m, "n": 2, "options": {}} for m in ("model", "autoregressive")]
    head = {"suite": "s", "seed": 0, "models": {}, "entries": entries, "counts": [2, 2]}
    same = build_report(head, lines("model", ["p1", "p2"]) + lines("autoregressive", ["p1", "p2"]))
    other = build_report(head, lines("model", ["p1", "p2"]) + lines("autoregressive", ["p3", "p4"]))
    assert [c["same_items"] for c in same["comparisons"]] == [True]
    assert [c["same_items"] for c in other["comparisons"]] == [False]


def test_a_schema_too_long_for_the_model_is_said_so_not_dropped(tmp_path):
    """QA, 2026-12-07: a compiled schema whose template needs more positions than the model has (4096) was left out
    of the outputs without a word, beside a "same items" comparison."""
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    names = [f"member_{i:03d}" for i in range(300)]
    (schemas / "Wide_a.json").write_text(json.dumps({"schema": {"type": "object", "required": names, "properties": {
        n: {"type": "string"} for n in names}}}))
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"name": "wide", "entries": [
        {"task": "json", "set": "all", "mode": "model", "n": 0, "options": {"schemas": "schemas"}}]}))
    p = run("--suite-file", str(suite), "--out", str(tmp_path / "out"))
    assert p.returncode == 0, p.stderr
    (row,) = json.loads((tmp_path / "out" / "suite.json").read_text())["rows"]
    assert row["json"]["outputs"] == 0 and len(row["json"]["not_run"]) == 1
    assert row["json"]["not_run"][0].startswith("Wide_a.json: ") and "the model has 4096" in row["json"]["not_run"][0]
    md = (tmp_path / "out" / "suite.md").read_text()
    assert "not run (too long for the model): 1" in md and "Wide_a.json: " in md


def test_p90_is_the_nearest_rank():
    """(The index rounded from 0.9 (n - 1) read low on small sets: p90 of [10, 10, 10, 11, 13, 15] was 13, with one
    value of six above it.)"""
    from diffreason.evals.infill_eval import percentile

    assert percentile([10, 10, 10, 11, 13, 15], 0.9) == 15
    assert [percentile(list(range(1, n + 1)), 0.9) for n in (1, 10, 30, 100)] == [1, 9, 27, 90]
    assert percentile([], 0.9) is None and percentile([3, 1], 0.5) == 1
