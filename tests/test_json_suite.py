"""The JSON-Schema-Test-Suite check of the compiler's templates (diffreason.evals.json_suite): the exact membership
search, the suite's loader, and the suite itself — no crash, every filling valid, no invalid instance inside a
template's language.

The suite test runs a subset (SUBSET, under a minute); the whole suite: `python -m diffreason.evals.json_suite`, or
this file with DIFFREASON_JSON_SUITE_FULL=1."""

import itertools
import json
import os
import random
import re

import pytest
import torch

from diffreason.canvas import CanvasTemplate
from diffreason.evals.json_suite import (
    DEFAULT_ROOT, DRAFTS, load_suite, needs_other_documents, run_suite, spellings, template_accepts_text, token_bytes,
)
from diffreason.tasks.json_schema import compile_schema, validator
from diffreason.tokenizer import train_byte_bpe

TOK = train_byte_bpe()


def accepts(template, text):
    return template_accepts_text(template, TOK, text)


def decode(tokens):
    return TOK.decode(tokens, skip_special_tokens=True)


def language(template, limit=200_000):
    """Every text the template's token sequences decode to (`tokenizer.decode` of the whole sequence), by brute force
    (small templates only): each position's allowed tokens (fixed / mask / any), and each slot walked through its
    automaton's `moves_from` and checked with its `accepts`."""
    seqs = {()}
    at = 0

    def positions(stop):
        nonlocal seqs
        for p in range(at, stop):
            allowed = template.allowed(p)
            ids = range(template.vocab_size) if allowed is None else allowed.tolist()
            seqs = {q + (i,) for q in seqs for i in ids}
            assert len(seqs) < limit

    for slot in sorted(template.slots, key=lambda s: s.start):
        positions(slot.start)
        automaton = slot.automaton
        paths = {((), automaton.initial)}
        for k in range(slot.length):
            allowed = template.allowed(slot.start + k)
            allowed = None if allowed is None else set(allowed.tolist())
            paths = {(seq + (tok,), nxt) for seq, state in paths for tok, nxt in automaton.moves_from(state).items()
                     if allowed is None or tok in allowed}
            assert len(paths) < limit
        words = {seq for seq, _ in paths if automaton.accepts(list(seq))}
        seqs = {q + w for q in seqs for w in words}
        assert len(seqs) < limit
        at = slot.start + slot.length
    positions(len(template))
    return {decode(list(q)) for q in seqs}


# -- the tokens' bytes ----------------------------------------------------------------------------------------------


def test_token_bytes_join_as_the_tokenizer_decodes():
    tb = token_bytes(TOK)
    assert tb.empty == [i for i in range(len(TOK)) if decode([i]) == ""]
    assert TOK.pad_token_id in tb.empty and TOK.eos_token_id in tb.empty
    rng = random.Random(0)
    partial = list(TOK.encode("é漢字 ok", add_special_tokens=False))  # byte tokens of multi-byte characters
    for _ in range(500):
        seq = [rng.choice(partial) if rng.random() < 0.5 else rng.randrange(len(TOK)) for _ in range(rng.randrange(9))]
        joined = b"".join(tb.spellings[t] for t in seq).decode("utf-8", "replace")
        assert decode(seq) == joined, seq


# -- membership -----------------------------------------------------------------------------------------------------


def test_regex_slot_membership_is_exact():
    template = CanvasTemplate.from_regex(r"[a-c]{2,3}", TOK, 6)
    lang = language(template)
    assert lang == {"".join(w) for n in (2, 3) for w in itertools.product("abc", repeat=n)}
    for n in range(5):
        for word in itertools.product("abcd", repeat=n):
            text = "".join(word)
            assert accepts(template, text) == (text in lang), text
    for text in ["ab ", " ab", "a\u00e9", "\ufffd", "ab\x00"]:
        assert not accepts(template, text)


def test_non_ascii_slot_is_matched_by_bytes():
    template = CanvasTemplate.from_regex(r"(é|x)y{1,2}", TOK, 5)
    lang = language(template)
    assert lang == {"éy", "éyy", "xy", "xyy"}
    for text in ["éy", "éyy", "xy", "xyy", "é", "ey", "\u00e9yyy", "\ufffdy", "\ud800y", "yy"]:
        assert accepts(template, text) == (text in lang), text


def test_fixed_and_free_positions():
    brace, eos = TOK.encode("{", add_special_tokens=False)[0], TOK.eos_token_id
    ab = [TOK.convert_tokens_to_ids(c) for c in "ab"]
    template = CanvasTemplate.from_positions(len(TOK), [brace, None, ab, eos])
    lang = language(template)
    assert "{a" in lang and "{xb" in lang and "{éa" not in lang  # (é is two byte tokens: one free position holds one)
    assert "{\ufffda" in lang  # a lone byte of a multi-byte character decodes to U+FFFD
    rng = random.Random(1)
    samples = sorted(lang)[:: max(1, len(lang) // 60)] + ["{a", "{b", "{ab", "{ba", "{zzb", "a", "{é", "{"]
    for text in samples + ["".join(rng.choice("{ab}x") for _ in range(rng.randrange(5))) for _ in range(100)]:
        if "\ufffd" not in text:  # (exact for texts without U+FFFD: see template_accepts_text)
            assert accepts(template, text) == (text in lang), text
    # a text with U+FFFD is matched only by tokens that spell that very character, not by invalid bytes
    assert not accepts(template, "{\ufffda")


SCHEMA = {"type": "object", "required": ["a"], "properties": {
    "a": {"type": "integer", "minimum": 0, "maximum": 20}, "b": {"enum": ["x", "y"]},
    "c": {"type": "string", "maxLength": 3}}}


def test_compiled_schema_membership():
    compiled = compile_schema(SCHEMA, TOK)
    template, check = compiled.template, validator(SCHEMA)
    rng = random.Random(2)
    fillings = []
    for seed in range(12):
        tokens = compiled.random_filling(torch.Generator().manual_seed(seed))
        text = decode(tokens)
        assert accepts(template, text), text  # every filling is in the language
        fillings.append((tokens, text))
    for tokens, text in fillings:
        # token-level mutations: any sequence the template allows decodes to an accepted text
        for _ in range(10):
            mutated = list(tokens)
            p = rng.randrange(len(mutated))
            allowed = template.allowed(p)
            mutated[p] = rng.choice(allowed.tolist()) if allowed is not None else rng.randrange(len(TOK))
            if template.violations(mutated) == []:
                assert accepts(template, decode(mutated)), decode(mutated)
        # character-level mutations: a text that is no valid JSON of the schema is never accepted
        for _ in range(10):
            i = rng.randrange(len(text) + 1)
            edit = rng.choice(["drop", "insert", "swap"])
            if edit == "drop" and i < len(text):
                bad = text[:i] + text[i + 1:]
            elif edit == "insert":
                bad = text[:i] + rng.choice(' 9,"}x\u00e9') + text[i:]
            else:
                bad = text[:i] + rng.choice('0a"') + text[i + 1:]
            try:
                ok = check.is_valid(json.loads(bad))
            except ValueError:
                ok = False
            if not ok:
                assert not accepts(template, bad), bad
    assert accepts(template, '{"a":5}') and accepts(template, '{"a":20,"b":"y","c":"abc"}')
    for text in ['{"a":21}', '{"a":-1}', '{"b":"x","a":5}', '{"a":5,"b":"z"}', '{"a":5,"c":"abcd"}', '{"a":5} ',
                 '{ "a":5}', '{"a":5,"c":"\u00e9"}', '{"a":05}', "[]", ""]:
        assert not accepts(template, text), text


def test_spellings_are_member_orders_of_the_same_value():
    data = {"a": 1, "b": {"c": [1, {"d": 2, "e": 3}], "f": "é"}, "g": None}
    texts = spellings(data, cap=1000)
    assert texts[0] == json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    assert '{"g":null,"b":{"f":"\\u00e9","c":[1,{"e":3,"d":2}]},"a":1}' in texts
    assert all(json.loads(t) == data for t in texts)
    assert len(texts) == len(set(texts)) == 3 * 2 * 2 * 2 * 2  # 3! · 2! · 2! orders, each also ASCII-escaped
    assert len(spellings(data, cap=5)) == 10
    assert spellings("x", cap=5) == ['"x"']


# -- the suite's loader -----------------------------------------------------------------------------------------------


def test_loader_reads_the_vendored_suite():
    groups = load_suite()
    assert {g.draft for g in groups} == set(DRAFTS)
    assert len(groups) > 1400 and sum(len(g.tests) for g in groups) > 6000
    for g in groups:
        if isinstance(g.schema, dict):
            assert "$schema" in g.schema
    d4 = [g for g in groups if g.draft == "draft4" and g.file == "type.json"]
    assert d4[0].schema["$schema"] == "http://json-schema.org/draft-04/schema#"
    skipped = {g.id for g in groups if g.skip}
    assert all("refRemote.json" in s or "vocabulary.json" in s or "dynamicRef.json" in s for s in skipped)
    assert "draft7/refRemote.json#0" in skipped and len(skipped) == 69
    assert (DEFAULT_ROOT / "LICENSE").exists()


def test_other_documents_are_detected():
    assert needs_other_documents({"$ref": "http://localhost:1234/integer.json"}, "draft7")
    assert needs_other_documents({"$id": "http://x.com/a/", "items": {"$ref": "b.json"}}, "draft2020-12")
    assert needs_other_documents({"$schema": "http://localhost:1234/meta.json"}, "draft2020-12")
    assert not needs_other_documents({"$ref": "#/$defs/a", "$defs": {"a": {}}}, "draft2020-12")
    assert not needs_other_documents({"$ref": "http://json-schema.org/draft-07/schema#"}, "draft7")
    assert not needs_other_documents({"$id": "http://x.com/r", "$defs": {"b": {"$id": "b.json"}},
                                      "items": {"$ref": "b.json"}}, "draft2020-12")
    assert not needs_other_documents(True, "draft7")


# -- the suite ---------------------------------------------------------------------------------------------------

# Files of each draft that run in well under a minute together (all five drafts: how each reads the same keywords).
SUBSET = ["type.json", "enum.json", "const.json", "required.json", "properties.json", "additionalProperties.json",
          "items.json", "minItems.json", "maxItems.json", "minimum.json", "maximum.json", "exclusiveMinimum.json",
          "exclusiveMaximum.json", "multipleOf.json", "pattern.json", "minLength.json", "maxLength.json", "anyOf.json",
          "oneOf.json", "allOf.json", "not.json", "ref.json", "boolean_schema.json", "uniqueItems.json",
          "dependencies.json", "dependentRequired.json", "dependentSchemas.json", "if-then-else.json",
          "dynamicRef.json", "recursiveRef.json", "defs.json", "definitions.json",
          "optional/format/date.json", "optional/format/email.json", "optional/format/ipv4.json"]


def _failures(report):
    lines = []
    for x in report["crashes"]:
        lines.append(f"CRASH {x['group']} {x['description']!r} ({x['stage']}): {x['error']}\n"
                     f"  schema {json.dumps(x['schema'])}")
    for x in report["invalid_fillings"]:
        lines.append(f"INVALID FILLING {x['group']} {x['description']!r}: {x['error']}\n  text {x['text']}")
    for x in report["invalid_inside"]:
        verdict = {True: "valid", False: "invalid", None: "cannot judge"}[x["validator_says_valid"]]
        lines.append(f"INVALID INSIDE {x['group']} {x['description']!r} / {x['instance']!r}: {x['text']} "
                     f"(jsonschema: {verdict})\n"
                     f"  schema {json.dumps(x['schema'])}")
    for x in report["membership_misses"]:
        lines.append(f"MISSED FILLING {x['group']}: {x['text']}")
    return lines


@pytest.mark.parametrize("draft", list(DRAFTS))
def test_suite_subset(draft):
    groups = load_suite([draft], files=SUBSET)
    report = run_suite([draft], TOK, fillings=1, groups=groups, compile_timeout=30)
    assert report["drafts"][draft]["compiled"] > 0
    failures = _failures(report)
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("DIFFREASON_JSON_SUITE_FULL"),
                    reason="the whole suite: set DIFFREASON_JSON_SUITE_FULL=1")
@pytest.mark.parametrize("draft", list(DRAFTS))
def test_suite_full(draft):
    report = run_suite([draft], TOK, fillings=3)
    failures = _failures(report)
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures)


@pytest.mark.parametrize("content, message", [
    (b"garbage", "not valid JSON"),
    (b"\xff\xfe[", "not UTF-8 text"),
    (b'{"not": "a list"}', "a test file holds a list of case groups, got dict"),
    (b'[{"description": "d", "schema": {}}]', "case group 0 is not an object with description, schema and tests"),
    (b'[{"description": "d", "schema": {}, "tests": "x"}]', "case group 0: tests must be a list"),
    (b'[{"description": "d", "schema": {}, "tests": [{"data": 1, "valid": "yes"}]}]',
     "case group 0: test 0 is not an object with data and a boolean valid"),
])
def test_a_malformed_test_file_is_one_clear_error(tmp_path, content, message):
    from diffreason.errors import DiffreasonError

    (tmp_path / "draft7").mkdir()
    (tmp_path / "draft7" / "bad.json").write_bytes(content)
    with pytest.raises(DiffreasonError, match=re.escape(f"{tmp_path / 'draft7' / 'bad.json'}: {message}")):
        load_suite(["draft7"], tmp_path)


def test_cli_names_a_malformed_test_file_and_a_missing_suite(tmp_path):
    import subprocess
    import sys

    (tmp_path / "draft7").mkdir()
    (tmp_path / "draft7" / "bad.json").write_text("garbage")
    for suite, message in ((tmp_path, f"error: {tmp_path / 'draft7' / 'bad.json'}: not valid JSON"),
                           (tmp_path / "nope", f"error: --suite '{tmp_path / 'nope'}' does not exist")):
        p = subprocess.run([sys.executable, "-m", "diffreason.cli", "eval", "json-suite", "--suite", str(suite),
                            "--drafts", "draft7", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 2 and p.stderr.startswith(message) and len(p.stderr.splitlines()) == 1, p.stderr
