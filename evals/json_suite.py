"""The official JSON-Schema-Test-Suite as a compliance check of the JSON-schema compiler's templates.

The suite (github.com/json-schema-org/JSON-Schema-Test-Suite, MIT; a subset is vendored under
tests/data/json_schema_test_suite, see its README for where it came from) holds, per draft, groups of a schema and
instances labelled valid or invalid. For every group this compiles the schema (`compile_schema`) and checks:

(a) random fillings of the template (as the engine commits them) parse and validate (formats checked);
(b) soundness: every instance labelled invalid lies OUTSIDE the template's language — no token sequence the template
    allows decodes to its JSON text, written compactly, in any order of its objects' members (permutations, capped),
    nor with non-ASCII characters escaped. One inside is a bug: the engine could write that invalid value;
(c) coverage: how many instances labelled valid the template's language holds (not a bug when it does not: the
    template writes a sound subset).

Membership is exact (`template_accepts_text`): a search over (template position, byte offset into the text, slot
automaton state) using each token's bytes (byte-level BPE: special tokens decode to nothing), so partial UTF-8 tokens
are handled as the tokenizer's decoder joins them. Groups whose schema needs documents the suite serves from its
`remotes/` folder (remote `$ref`s, `$id`-relative references to other documents, remote `$schema` metaschemas)
are skipped and named.

    python -m diffreason.evals.json_suite --out evals/reports/json-suite [--drafts draft7 draft2020-12] [--fillings 3]
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import re
import time
import traceback
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import torch

from diffreason.evals.json_eval import checkout_commit

DEFAULT_ROOT = Path(__file__).resolve().parent.parent / "tests" / "data" / "json_schema_test_suite"
SOURCE = ("JSON-Schema-Test-Suite as embedded in the PyPI sdist jsonschema-4.26.0.tar.gz (json/tests/<draft>/*.json "
          "and json/tests/<draft>/optional/format/*.json), vendored verbatim")
# The metaschema URI each draft's schemas declare (added to a group's schema that declares none).
DRAFTS = {
    "draft4": "http://json-schema.org/draft-04/schema#",
    "draft6": "http://json-schema.org/draft-06/schema#",
    "draft7": "http://json-schema.org/draft-07/schema#",
    "draft2019-09": "https://json-schema.org/draft/2019-09/schema",
    "draft2020-12": "https://json-schema.org/draft/2020-12/schema",
}


# -- the suite's cases ---------------------------------------------------------------------------------------------


@dataclass
class CaseGroup:
    """One group of a suite file: a schema and its labelled instances ({description, data, valid})."""

    draft: str
    file: str  # relative to the draft's folder: "ref.json", "optional/format/date.json"
    index: int  # the group's place in its file
    description: str
    schema: Any  # with the draft's `$schema` added where it had none (a boolean schema stays a boolean)
    tests: list[dict]
    skip: str | None = None  # why the group is skipped (a schema that needs documents from elsewhere)

    @property
    def id(self) -> str:
        return f"{self.draft}/{self.file}#{self.index}"


def load_suite(drafts: Iterable[str] | None = None, root: str | Path = DEFAULT_ROOT, optional_format: bool = True,
               files: Iterable[str] | None = None) -> list[CaseGroup]:
    """The case groups of `drafts` (all five by default), in file order. `files`: only these (relative to a draft's
    folder, e.g. "enum.json", "optional/format/date.json")."""
    root = Path(root)
    wanted = set(files) if files is not None else None
    groups = []
    for draft in drafts or DRAFTS:
        if draft not in DRAFTS:
            raise ValueError(f"unknown draft {draft!r} (known: {', '.join(DRAFTS)})")
        folder = root / draft
        paths = sorted(folder.glob("*.json"))
        if optional_format:
            paths += sorted((folder / "optional" / "format").glob("*.json"))
        for path in paths:
            rel = path.relative_to(folder).as_posix()
            if wanted is not None and rel not in wanted:
                continue
            for index, group in enumerate(_read_case_file(path)):
                schema = group["schema"]
                if isinstance(schema, dict) and "$schema" not in schema:
                    schema = {"$schema": DRAFTS[draft], **schema}
                case = CaseGroup(draft, rel, index, group["description"], schema, group["tests"])
                case.skip = needs_other_documents(schema, draft)
                groups.append(case)
    return groups


def _read_case_file(path: Path) -> list[dict]:
    """A test file's case groups, checked: a JSON list of {"description", "schema", "tests": [{"description", "data",
    "valid"}, ...]}. Anything else is one DiffreasonError naming the file and what is wrong."""
    from diffreason.errors import DiffreasonError

    try:
        groups = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise DiffreasonError(f"{path}: not UTF-8 text") from None
    except ValueError as exc:
        raise DiffreasonError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(groups, list):
        raise DiffreasonError(f"{path}: a test file holds a list of case groups, got {type(groups).__name__}")
    for index, group in enumerate(groups):
        where = f"{path}: case group {index}"
        if not isinstance(group, dict) or not {"description", "schema", "tests"} <= group.keys():
            raise DiffreasonError(f"{where} is not an object with description, schema and tests")
        if not isinstance(group["tests"], list):
            raise DiffreasonError(f"{where}: tests must be a list")
        for k, test in enumerate(group["tests"]):
            if not isinstance(test, dict) or "data" not in test or not isinstance(test.get("valid"), bool):
                raise DiffreasonError(f"{where}: test {k} is not an object with data and a boolean valid")
    return groups


def needs_other_documents(schema: Any, draft: str) -> str | None:
    """Why `schema` cannot be read on its own — a `$ref` / `$dynamicRef` / `$recursiveRef` that resolves neither
    inside the schema (its own `$id`s and anchors, as jsonschema's `referencing` resolves them) nor to a draft
    metaschema, or a `$schema` that is no known dialect — else None. Nothing is fetched."""
    if not isinstance(schema, dict):
        return None
    import jsonschema_specifications
    import referencing.jsonschema

    dialect = schema.get("$schema", DRAFTS.get(draft))
    try:
        spec = referencing.jsonschema.specification_with(str(dialect))
    except referencing.jsonschema.UnknownDialect:
        return f"$schema {dialect!r} is not a known dialect (a remote metaschema)"
    resource = spec.create_resource(schema)
    unresolved = []

    def walk(res, resolver, depth=0):
        resolver = resolver.in_subresource(res)
        contents = res.contents
        if isinstance(contents, dict):
            for keyword in ("$ref", "$dynamicRef", "$recursiveRef"):
                ref = contents.get(keyword)
                if isinstance(ref, str):
                    try:
                        resolver.lookup(ref)
                    except Exception:  # referencing.exceptions.Unresolvable and its kinds
                        unresolved.append(ref)
        if depth < 200:
            for sub in res.subresources():
                walk(sub, resolver, depth + 1)

    walk(resource, jsonschema_specifications.REGISTRY.resolver_with_root(resource))
    if unresolved:
        return "references another document: " + ", ".join(sorted(set(unresolved)))
    return None


# -- membership: is a text in a template's language? ------------------------------------------------------------


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet: the printable character that stands for each byte, inverted."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


@dataclass
class TokenBytes:
    """Each token's bytes as `tokenizer.decode(..., skip_special_tokens=True)` joins them (special tokens: none), and a
    trie over them to find the tokens that spell a text's next bytes."""

    spellings: list[bytes]
    empty: list[int]  # ids that decode to nothing
    trie: dict = field(repr=False)  # byte → (ids ending here, children)

    def matches(self, data: bytes) -> list[list[tuple[int, int]]]:
        """matches[i]: (token, j) for every token whose bytes are data[i:j], j > i."""
        out = []
        for i in range(len(data) + 1):
            found, node = [], self.trie
            for j in range(i, len(data)):
                node = node.get(data[j])
                if node is None:
                    break
                ends, node = node
                found += [(t, j + 1) for t in ends]
            out.append(found)
        return out


_TOKEN_BYTES: dict[int, tuple[Any, TokenBytes]] = {}


def token_bytes(tokenizer) -> TokenBytes:
    """The bytes of every token of a byte-level BPE tokenizer (HF fast tokenizer with a ByteLevel decoder)."""
    held = _TOKEN_BYTES.get(id(tokenizer))
    if held is not None and held[0] is tokenizer:
        return held[1]
    decoder = _byte_decoder()
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    spellings, empty = [], []
    for i in range(len(tokenizer)):
        if tokenizer.decode([i], skip_special_tokens=True) == "":
            spellings.append(b"")
            empty.append(i)
            continue
        if i in added:  # an added, non-special token decodes to its content as it is
            spellings.append(str(added[i].content).encode("utf-8"))
            continue
        piece = tokenizer.convert_ids_to_tokens(i)
        if not all(ch in decoder for ch in piece):
            raise ValueError(f"token {i} ({piece!r}) is not spelled in the byte-level alphabet: not a byte-level BPE")
        spellings.append(bytes(decoder[ch] for ch in piece))
    trie: dict = {}
    for i, spelling in enumerate(spellings):
        node = None
        level = trie
        for k, b in enumerate(spelling):
            node = level.setdefault(b, ([], {}))
            level = node[1]
        if node is not None:
            node[0].append(i)
    result = TokenBytes(spellings, empty, trie)
    _TOKEN_BYTES[id(tokenizer)] = (tokenizer, result)
    return result


class _Moves:
    """A slot's automaton as a (possibly nondeterministic) set of moves: `initial` states, `next(state, token)`,
    `accepting(state)`. TokenAutomaton: its sorted moves over token classes (composed ones may move to several
    states). PrefixedAutomaton (an optional member's slot): all pads, or its literal's tokens then its value."""

    def __init__(self, automaton):
        from diffreason.constrain.slots import PrefixedAutomaton
        from diffreason.constrain.tokens import TokenAutomaton

        self._cache: dict[tuple[int, int], tuple[int, ...]] = {}
        if isinstance(automaton, PrefixedAutomaton):
            self.kind = "prefixed"
            self.literal, self.pad = tuple(int(t) for t in automaton.literal), int(automaton.pad)
            self.value = _Moves(automaton.value)
            # states: value states (>= 0); -1 the all-pad path; -(2 + i) before the literal's i-th token
            self.initial = (-1, -2)
        elif isinstance(automaton, TokenAutomaton):
            self.kind = "token"
            src, tok, dst = (t.numpy().astype(np.int64) for t in automaton.edges)
            self.num_classes = int(automaton.num_classes)
            keys = src * self.num_classes + tok
            order = np.argsort(keys, kind="stable")
            self.keys, self.dst = keys[order], dst[order]
            self.of = np.asarray(automaton.classes.of)
            self.vocab = int(automaton.vocab_size)
            self.accept = automaton.accepting.numpy().astype(bool)
            self.initial = (int(automaton.initial),)
        else:
            raise TypeError(f"no membership search for slot automata of type {type(automaton).__name__}")

    def next(self, state: int, token: int) -> tuple[int, ...]:
        key = (state, token)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if self.kind == "token":
            if not 0 <= token < self.vocab:
                out = ()
            else:
                k = state * self.num_classes + int(self.of[token])
                lo, hi = np.searchsorted(self.keys, k, "left"), np.searchsorted(self.keys, k, "right")
                out = tuple(int(d) for d in self.dst[lo:hi])
        elif state >= 0:
            out = self.value.next(state, token)
        elif state == -1:
            out = (-1,) if token == self.pad else ()
        else:
            i = -state - 2
            if token != self.literal[i]:
                out = ()
            elif i + 1 < len(self.literal):
                out = (-(i + 3),)
            else:
                out = self.value.initial
        self._cache[key] = out
        return out

    def accepting(self, state: int) -> bool:
        if self.kind == "token":
            return bool(self.accept[state])
        if state >= 0:
            return self.value.accepting(state)
        return state == -1


class _Compiled:
    """What the search needs of a template, made once per template."""

    def __init__(self, template):
        self.fixed = template.fixed.numpy()
        self.mask_index = template.mask_index.numpy()
        self.masks = template.masks.numpy()
        slots = sorted(template.slots, key=lambda s: s.start)
        for a, b in zip(slots, slots[1:]):
            if a.start + a.length > b.start:
                raise ValueError(f"overlapping slots at {a.start} and {b.start}")
        # segments: (start, stop, moves or None); positions outside slots are segments of one position
        self.segments, at = [], 0
        for slot in slots:
            self.segments += [(p, p + 1, None) for p in range(at, slot.start)]
            self.segments.append((slot.start, slot.start + slot.length, _Moves(slot.automaton)))
            at = slot.start + slot.length
        self.segments += [(p, p + 1, None) for p in range(at, len(self.fixed))]

    def allowed(self, position: int, token: int) -> bool:
        f = self.fixed[position]
        if f >= 0:
            return token == f
        m = self.mask_index[position]
        return m < 0 or bool(self.masks[m, token])


_TEMPLATES: "weakref.WeakKeyDictionary[Any, _Compiled]" = weakref.WeakKeyDictionary()


def _compiled(template) -> _Compiled:
    c = _TEMPLATES.get(template)
    if c is None:
        c = _TEMPLATES[template] = _Compiled(template)
    return c


def template_accepts_text(template, tokenizer, text: str) -> bool:
    """Is there a token sequence in `template`'s language whose `tokenizer.decode(..., skip_special_tokens=True)` is
    `text`? The language: fixed tokens at fixed positions, free positions restricted by their mask, and the positions
    of each slot a sequence its automaton accepts (slots end in pads, which decode to nothing).

    Exact search over (template position, byte offset into the text's UTF-8, automaton state), with tokens as their
    bytes: byte-level decoding joins the tokens' bytes and decodes them as UTF-8, replacing invalid sequences by
    U+FFFD. Exact for every text without U+FFFD (a text with one: only spellings with those very characters count,
    not invalid byte sequences that decode to them). A text with lone surrogates is never a decoding: False.
    """
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    tb = token_bytes(tokenizer)
    tc = _compiled(template)
    matches = tb.matches(data)
    empty = tb.empty
    n = len(data)
    # candidates at offset i: (token, offset after it)
    cand = [m + [(t, i) for t in empty] for i, m in enumerate(matches)]
    offsets = {0}
    for start, stop, moves in tc.segments:
        if moves is None:
            new = set()
            for i in offsets:
                for t, j in cand[i]:
                    if tc.allowed(start, t):
                        new.add(j)
            offsets = new
        else:
            frontier = {(i, s) for i in offsets for s in moves.initial}
            for p in range(start, stop):
                new = set()
                for i, s in frontier:
                    for t, j in cand[i]:
                        if tc.allowed(p, t):
                            for d in moves.next(s, t):
                                new.add((j, d))
                frontier = new
                if not frontier:
                    break
            offsets = {i for i, s in frontier if moves.accepting(s)}
        if not offsets:
            return False
    return n in offsets


# -- instance spellings ---------------------------------------------------------------------------------------------


def _orders(value: Any) -> Iterator[Any]:
    """`value` with its objects' members in every order (the given order first), lazily."""
    if isinstance(value, dict):
        keys = list(value)
        child = {k: _orders(value[k]) for k in keys}  # (materialised below, only as far as needed)
        children = {k: list(itertools.islice(child[k], 64)) for k in keys}
        for perm in itertools.permutations(keys):
            for combo in itertools.product(*(children[k] for k in perm)):
                yield dict(zip(perm, combo))
    elif isinstance(value, list):
        parts = [list(itertools.islice(_orders(v), 64)) for v in value]
        for combo in itertools.product(*parts):
            yield list(combo)
    else:
        yield value


def spellings(data: Any, cap: int = 120) -> list[str]:
    """The texts to look for: the compact JSON text (`ensure_ascii=False`) of `data` with its objects' members in up
    to `cap` orders, and each with non-ASCII characters escaped too (where that differs). All parse to `data`."""
    out = []
    for variant in itertools.islice(_orders(data), cap):
        out.append(json.dumps(variant, separators=(",", ":"), ensure_ascii=False))
        escaped = json.dumps(variant, separators=(",", ":"), ensure_ascii=True)
        if escaped != out[-1]:
            out.append(escaped)
    return list(dict.fromkeys(out))


# -- the run --------------------------------------------------------------------------------------------------------


def _reason(exc: BaseException) -> str:
    return re.sub(r" at .*$", "", " ".join(str(exc).split()))[:120]


def _judge(schema, value) -> tuple[bool | None, str]:
    """(valid?, first error) under the schema's draft, formats checked; None when jsonschema cannot judge."""
    from diffreason.limits import best_validation_error
    from diffreason.tasks.json_schema import validator

    try:
        error = best_validation_error(validator(schema), value)
    except Exception as exc:  # noqa: BLE001  (an unresolvable reference, a malformed keyword)
        return None, f"{type(exc).__name__}: {_reason(exc)}"
    return (error is None), ("" if error is None else error.message[:300])


def run_suite(drafts: Iterable[str] | None = None, tokenizer=None, fillings: int = 3, *,
              root: str | Path = DEFAULT_ROOT,
              groups: list[CaseGroup] | None = None, seed: int = 0, orders: int = 120, compile_timeout: float = 60.0,
              progress=None) -> dict:
    """Compile every case group's schema and check its template (see the module docstring). Returns a report:
    per-draft counts, and every crash, invalid filling and invalid instance inside a template's language in full."""
    from diffreason.tasks.json_schema import SchemaError, compile_schema

    if tokenizer is None:
        from diffreason.tokenizer import train_byte_bpe

        tokenizer = train_byte_bpe()
    drafts = list(drafts or DRAFTS)
    if groups is None:
        groups = load_suite(drafts, root)
    per: dict[str, collections.Counter] = {d: collections.Counter() for d in drafts}
    reasons: dict[str, collections.Counter] = {d: collections.Counter() for d in drafts}
    skipped, crashes, invalid_fillings, invalid_inside, misses, unjudged = [], [], [], [], [], []
    disagreements, group_seconds = [], []
    started = time.perf_counter()
    for case in groups:
        c = per.setdefault(case.draft, collections.Counter())
        reasons.setdefault(case.draft, collections.Counter())
        c["groups"] += 1
        where = {"group": case.id, "description": case.description, "schema": case.schema}
        if case.skip:
            c["skipped"] += 1
            skipped.append({"group": case.id, "description": case.description, "why": case.skip})
            if progress:
                progress()
            continue
        for test in case.tests:  # the validator we trust against the suite's labels (information only)
            ok, _ = _judge(case.schema, test["data"])
            if ok is not None and ok != test["valid"]:
                c["validator_disagrees"] += 1
                disagreements.append({**where, "instance": test["description"], "data": test["data"],
                                      "label": test["valid"]})
        t = time.perf_counter()
        try:
            compiled = compile_schema(case.schema, tokenizer, cpu_seconds=compile_timeout)
        except SchemaError as exc:
            c["not_covered"] += 1
            reasons[case.draft][_reason(exc)] += 1
            if progress:
                progress()
            continue
        except Exception as exc:  # noqa: BLE001  (a crash: a bug)
            c["crashes"] += 1
            error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            crashes.append({**where, "stage": "compile", "error": error,
                            "traceback": traceback.format_exc(limit=-4)[-1500:]})
            if progress:
                progress()
            continue
        c["compiled"] += 1
        c["compile_ms"] += 1e3 * (time.perf_counter() - t)
        template = compiled.template
        # (a) random fillings parse and validate
        for k in range(fillings):
            try:
                tokens = compiled.random_filling(torch.Generator().manual_seed(seed + k))
            except Exception as exc:  # noqa: BLE001
                c["crashes"] += 1
                crashes.append({**where, "stage": f"random_filling(seed {seed + k})",
                                "error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}",
                                "traceback": traceback.format_exc(limit=-4)[-1500:]})
                break
            c["fillings"] += 1
            text = tokenizer.decode(tokens, skip_special_tokens=True)
            problem = None
            if template.violations(tokens):
                problem = "the filling breaks its own template"
            else:
                try:
                    value = json.loads(text)
                except ValueError as exc:
                    problem = f"not JSON: {exc}"
                else:
                    ok, message = _judge(case.schema, value)
                    if ok is None:
                        c["fillings_unjudged"] += 1
                        unjudged.append({**where, "text": text, "error": message})
                    elif not ok:
                        problem = message
            if problem is not None:
                c["invalid_fillings"] += 1
                invalid_fillings.append({**where, "seed": seed + k, "text": text, "error": problem})
            if not template_accepts_text(template, tokenizer, text):  # the search must find what was written
                misses.append({**where, "text": text})
        # (b) instances labelled invalid lie outside the language; (c) how many valid ones lie inside
        for test in case.tests:
            texts = spellings(test["data"], orders)
            inside = next((x for x in texts if template_accepts_text(template, tokenizer, x)), None)
            if test["valid"]:
                c["valid_instances"] += 1
                c["valid_inside"] += inside is not None
            else:
                c["invalid_instances"] += 1
                c["spellings_checked"] += len(texts)
                if inside is not None:
                    c["invalid_inside"] += 1
                    ok, _ = _judge(case.schema, test["data"])
                    c["invalid_inside_validator_accepts"] += ok is True
                    invalid_inside.append({**where, "instance": test["description"], "data": test["data"],
                                           "text": inside, "validator_says_valid": ok})
        group_seconds.append((round(time.perf_counter() - t, 2), case.id))
        if progress:
            progress()
    total = collections.Counter()
    for counts in per.values():
        total.update(counts)
    return {
        "commit": checkout_commit(),
        "source": SOURCE,
        "tokenizer_vocab": len(tokenizer),
        "fillings_per_group": fillings,
        "orders_cap": orders,
        "seconds": round(time.perf_counter() - started, 1),
        "drafts": {d: dict(per[d]) for d in per},
        "total": dict(total),
        "not_covered_reasons": {d: reasons[d].most_common() for d in reasons},
        "crashes": crashes,
        "invalid_fillings": invalid_fillings,
        "invalid_inside": invalid_inside,
        "membership_misses": misses,
        "fillings_unjudged": unjudged,
        "validator_disagreements": disagreements,
        "skipped": skipped,
        "slowest_groups": sorted(group_seconds, reverse=True)[:10],  # (seconds: compile and checks, group)
    }


# -- the report -----------------------------------------------------------------------------------------------------


def _js(value: Any, limit: int = 600) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars)"


def write_report(report: dict, out_dir: str | Path, command: str) -> list[Path]:
    """json_suite.json (everything) and json_suite.md (counts per draft, every failure in full)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {**report, "command": command}
    (out_dir / "json_suite.json").write_text(json.dumps(report, indent=2, ensure_ascii=False))
    lines = [
        "# JSON-Schema-Test-Suite: the compiler's templates",
        "",
        f"Command: `{command}` (commit {report['commit']}, {report['seconds']} s)  ",
        f"Data: {report['source']}.  ",
        f"Per compiled group: {report['fillings_per_group']} random fillings must validate (formats checked); every "
        f"instance labelled invalid must lie outside the template's language (its compact JSON text in up to "
        f"{report['orders_cap']} member orders, and ASCII-escaped); instances labelled valid inside the language "
        "are coverage.",
        "",
        "| draft | groups | skipped | compiled | not covered | crashes | fillings | invalid fillings "
        "| invalid instances | invalid inside (must be 0) | valid instances | valid inside |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = list(report["drafts"].items()) + [("total", report["total"])]
    for name, c in rows:
        g = lambda k: c.get(k, 0)  # noqa: E731
        lines.append(f"| {name} | {g('groups')} | {g('skipped')} | {g('compiled')} | {g('not_covered')} "
                     f"| {g('crashes')} | {g('fillings')} | {g('invalid_fillings')} | {g('invalid_instances')} "
                     f"| {g('invalid_inside')} | {g('valid_instances')} | {g('valid_inside')} |")
    accepts = report["total"].get("invalid_inside_validator_accepts", 0)
    if report["total"].get("invalid_inside"):
        lines += ["", f"Of the invalid instances inside a language, {accepts} are ones that jsonschema (formats "
                      "checked: the validator the compiler promises) itself accepts: the suite's label and the "
                      "validator differ there (see the disagreements below)."]
    for title, key, fmt in [
        ("Crashes (any exception other than SchemaError: bugs)", "crashes",
         lambda x: [f"- `{x['group']}` {x['description']!r} ({x['stage']}): {x['error']}",
                    f"  - schema: `{_js(x['schema'])}`"]),
        ("Invalid fillings (bugs)", "invalid_fillings",
         lambda x: [f"- `{x['group']}` {x['description']!r} (seed {x['seed']}): {x['error']}",
                    f"  - schema: `{_js(x['schema'])}`", f"  - filling: `{x['text']}`"]),
        ("Invalid instances inside the template's language (soundness bugs)", "invalid_inside",
         lambda x: [f"- `{x['group']}` {x['description']!r} — instance {x['instance']!r}"
                    + ("" if x["validator_says_valid"] is False else " (note: jsonschema's verdict on it: "
                       + ("valid)" if x["validator_says_valid"] else "cannot judge)")),
                    f"  - schema: `{_js(x['schema'])}`", f"  - accepted text: `{x['text']}`"]),
        ("Fillings the membership search did not find (bugs of the search)", "membership_misses",
         lambda x: [f"- `{x['group']}`: `{x['text']}`"]),
    ]:
        items = report.get(key, [])
        lines += ["", f"## {title}: {len(items)}", ""]
        for x in items:
            lines += fmt(x)
    unj = report.get("fillings_unjudged", [])
    if unj:
        groups = ", ".join(sorted({x["group"] for x in unj}))
        lines += ["", f"Fillings jsonschema could not judge: {len(unj)} ({groups})."]
    dis = report.get("validator_disagreements", [])
    lines += ["", f"## jsonschema (formats checked) against the suite's labels: {len(dis)} disagreements", "",
              "Information only: the compiler promises what this validator checks; a disagreement is where the "
              "validator itself departs from the suite (often a format it does not check).", ""]
    lines += [f"- `{x['group']}` {x['description']!r} — {x['instance']!r} (label: "
              f"{'valid' if x['label'] else 'invalid'})" for x in dis]
    lines += ["", "## Not covered (SchemaError), by reason", ""]
    for draft, items in report["not_covered_reasons"].items():
        if items:
            lines += [f"- {draft}: " + "; ".join(f"{n} × {r}" for r, n in items)]
    lines += ["", f"## Skipped (schemas that need other documents): {len(report['skipped'])}", ""]
    lines += [f"- `{x['group']}` {x['description']!r}: {x['why']}" for x in report["skipped"]]
    (out_dir / "json_suite.md").write_text("\n".join(lines) + "\n")
    return [out_dir / "json_suite.json", out_dir / "json_suite.md"]


def main(argv: list[str] | None = None) -> dict:
    import sys

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--drafts", nargs="*", default=list(DRAFTS), choices=list(DRAFTS))
    parser.add_argument("--root", default=str(DEFAULT_ROOT))
    parser.add_argument("--fillings", type=int, default=3)
    parser.add_argument("--orders", type=int, default=120, help="member orders tried per invalid instance (cap)")
    parser.add_argument("--compile-timeout", type=float, default=60.0)
    parser.add_argument("--files", nargs="*", default=None, help="only these files of each draft (e.g. enum.json)")
    parser.add_argument("--out", default=None, help="write json_suite.json / json_suite.md here")
    args = parser.parse_args(argv)
    from diffreason.tokenizer import train_byte_bpe

    tokenizer = train_byte_bpe()
    groups = load_suite(args.drafts, args.root, files=args.files)
    done = [0]

    def progress():
        done[0] += 1
        if done[0] % 50 == 0:
            print(f"{done[0]}/{len(groups)} groups", file=sys.stderr, flush=True)

    report = run_suite(args.drafts, tokenizer, args.fillings, root=args.root, groups=groups, orders=args.orders,
                       compile_timeout=args.compile_timeout, progress=progress)
    command = "python -m diffreason.evals.json_suite " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.out:
        for path in write_report(report, args.out, command.strip()):
            print(path)
    t = report["total"]
    print(json.dumps({k: report["drafts"][k] for k in report["drafts"]} | {"total": t}, indent=1))
    return report


if __name__ == "__main__":
    main()
