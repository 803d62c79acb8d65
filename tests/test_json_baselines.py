"""The engine baselines for JSON-schema coverage (diffreason.evals.json_baselines): xgrammar's grammar is built and
its acceptance of labelled instances counted; llguidance's refusal is counted; a bad folder is one line, exit 2."""

import json

from diffreason.evals.json_baselines import main, run


def _write(folder, name, doc):
    (folder / name).write_text(json.dumps(doc))


def test_counts_coverage_and_over_approximation(tmp_path):
    # `not` is refused by llguidance, and xgrammar drops it,
    # so it accepts the instance the `not` excludes: an over-approximation the table must show.
    _write(tmp_path, "Mine_1.json", {"schema": {"type": "integer"},
                                      "tests": [{"data": 1, "valid": True}, {"data": "a", "valid": False}]})
    _write(tmp_path, "Mine_2.json", {"schema": {"type": "integer", "not": {"const": 5}},
                                      "tests": [{"data": 5, "valid": False}, {"data": 6, "valid": True}]})
    rows = run(sorted(tmp_path.glob("*.json")))
    assert rows["Mine"]["schemas"] == 2
    assert rows["Mine"]["xgrammar"] == 2
    assert rows["Mine"]["llguidance"] == 1
    assert rows["Mine"]["accepted_invalid"] == 1 and rows["Mine"]["schemas_over"] == 1
    assert rows["Mine"]["rejected_valid"] == 0


def test_diffreason_column_and_report(tmp_path, capsys):
    schemas = tmp_path / "s"
    schemas.mkdir()
    _write(schemas, "Mine_1.json", {"schema": {"type": "string"}})
    report = tmp_path / "json.json"
    report.write_text(json.dumps({"collections": {"Mine": {"schemas": 1, "compiled": 1}}}))
    out = tmp_path / "out"
    assert main(["--schemas", str(schemas), "--diffreason", f"ours={report}", "--out", str(out)]) == 0
    table = (out / "json_baselines.md").read_text()
    assert "| Mine | 1 | 1 (100.0 %) | 1 (100.0 %) | 1 (100.0 %) | 0 (0) | 0 |" in table
    assert (out / "json_baselines.png").stat().st_size > 0


def test_bad_folder_is_one_line(tmp_path, capsys):
    assert main(["--schemas", str(tmp_path / "missing")]) == 2
    assert main(["--schemas", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: --schemas {tmp_path / 'missing'} is not a folder", f"error: no *.json files in {tmp_path}"]


def test_a_report_that_is_not_an_eval_of_this_folder_is_one_line(tmp_path, capsys):
    """(`{}` was a KeyError traceback; a report of another folder printed 2 of 1 schemas, 200 %.)"""
    schemas = tmp_path / "s"
    schemas.mkdir()
    _write(schemas, "Mine_1.json", {"schema": {"type": "string"}})
    empty, other = tmp_path / "empty.json", tmp_path / "other.json"
    empty.write_text("{}")
    other.write_text(json.dumps({"collections": {"Mine": {"schemas": 2, "compiled": 2}}}))
    assert main(["--schemas", str(schemas), "--diffreason", str(empty)]) == 2
    assert main(["--schemas", str(schemas), "--diffreason", f"x={other}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: --diffreason {empty}: not a report of `diffreason eval json` (no \"collections\")",
                   f"error: --diffreason {other}: made on another folder: 2 Mine schemas there, 1 in --schemas (give "
                   "the report of an eval of the whole folder, without --limit)"]
