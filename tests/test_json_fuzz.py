"""The schema compiler as a soundness gate, over generated schemas (diffreason.evals.json_fuzz): every schema either
compiles with every random filling valid JSON that validates against it (its own draft's validator, formats
checked), or is refused with SchemaError — never another exception. Hypothesis shrinks a failure to a minimal schema.

The property runs 600 generated schemas from a fixed seed (about 20 s): deterministic, and wide enough to reach the
unions, negations and tuples where the compiler's reasoning is. The long run is the eval (`diffreason.evals.json_fuzz`)."""

import json

from hypothesis import HealthCheck, given, seed, settings

import diffreason.tasks.json_schema as json_schema
from diffreason.evals.json_fuzz import (
    DRAFT_URIS, FuzzConfig, check_schema_soundness, examine, regex_patterns, run_fuzz, schemas, write_report,
)
from diffreason.tokenizer import train_byte_bpe

TOK = train_byte_bpe()


@seed(1)
@settings(max_examples=600, deadline=None, database=None, suppress_health_check=list(HealthCheck),
          report_multiple_bugs=False)
@given(schema=schemas())
def test_every_generated_schema_compiles_soundly_or_is_refused(schema):
    problems = check_schema_soundness(schema, TOK, fillings=4)
    assert not problems, f"{json.dumps(schema)}\n{problems[0]}"


def _depth(node) -> int:
    if isinstance(node, dict):
        return 1 + max(map(_depth, node.values()), default=0)
    if isinstance(node, list):
        return 1 + max(map(_depth, node), default=0)
    return 0


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(schema=schemas(FuzzConfig(max_depth=2)), pattern=regex_patterns())
def test_generated_schemas_are_json_documents_of_their_draft(schema, pattern):
    import re

    assert json.loads(json.dumps(schema)) == schema
    assert schema.get("$schema", DRAFT_URIS["2020-12"]) in DRAFT_URIS.values()
    assert _depth(schema) < 40
    re.compile(pattern)  # the regex grammar writes only patterns Python accepts


def test_checker_reports_crashes_and_invalid_fillings(monkeypatch):
    assert check_schema_soundness({"type": "integer", "minimum": 3, "maximum": 9}, TOK, fillings=3) == []
    refused = examine({"type": "string", "minLength": 5, "maxLength": 2}, TOK, fillings=1)
    assert refused.status == "refused" and refused.problems == []

    real = json_schema.compile_schema
    # a template of another schema: its fillings are strings, which the integer schema refuses
    monkeypatch.setattr(json_schema, "compile_schema",
                        lambda schema, tok, **limits: real({"type": "string", "maxLength": 3}, tok, **limits))
    problems = check_schema_soundness({"type": "integer"}, TOK, fillings=2)
    assert problems and all(p[0] == "invalid" and "is not of type 'integer'" in p[2] for p in problems)

    def broken(schema, tok, **limits):
        raise TypeError("argument of type 'bool' is not iterable")

    monkeypatch.setattr(json_schema, "compile_schema", broken)
    (problem,) = check_schema_soundness({"type": "integer"}, TOK)
    assert problem[0] == "crash" and problem[1].startswith("TypeError")


def test_run_fuzz_is_deterministic_and_reports(tmp_path):
    first = run_fuzz(12, seed=3, fillings=1, tokenizer=TOK, config=FuzzConfig(max_depth=2))
    again = run_fuzz(12, seed=3, fillings=1, tokenizer=TOK, config=FuzzConfig(max_depth=2))
    c = first["counts"]
    assert c["generated"] == 12 and sum(first["statuses"].values()) == c["distinct"] <= 12
    assert [f["schema"] for f in first["failures"]] == [f["schema"] for f in again["failures"]]
    assert first["counts"] == again["counts"]
    json_path, md_path = write_report(first, tmp_path, "pytest")
    assert json.loads(json_path.read_text())["command"] == "pytest"
    assert "soundness fuzz" in md_path.read_text()
