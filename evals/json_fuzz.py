"""Soundness fuzzing of the JSON Schema compiler: generated schemas, random fillings, the schema's own validator.

The compiler promises two things (see `diffreason.tasks.json_schema`):

- every filling of a compiled template is JSON text that validates against the schema (formats checked, by the
  validator of the schema's own `$schema` draft: `json_schema.validator`);
- a schema it cannot compile raises `SchemaError`, never another exception.

This module generates small JSON Schemas from a grammar of keywords (hypothesis strategies: `schemas`), checks each
one against both promises (`check_schema_soundness`, `examine`), and drives many of them deterministically for a seed
(`run_fuzz`), reporting counts and every failing schema with its problems (`write_report`).

    python -m diffreason.evals.json_fuzz --examples 4000 --seed 0 --fillings 6 --shrink 2 --out evals/reports/json-fuzz

(`--shrink N`: up to N failing schemas per kind of failure are shrunk to small reproducers, `shrink_schema`.)

The grammar (knobs in `FuzzConfig`):

- a `$schema` among draft-04, draft-06, draft-07, 2019-09, 2020-12 and none (read as 2020-12); keywords follow the
  draft most of the time (`definitions` / boolean exclusiveMinimum / `dependencies` / `items` arrays in the older
  drafts; `$defs`, `prefixItems`, `minContains`, `dependentRequired` in the newer ones; no `const` / boolean schemas in
  draft 4, no `if` before draft 7), and with probability `off_draft` a keyword of another draft is used instead
  (which that draft's validator ignores, or reads differently: the compiler must read keywords per draft too);
- leaves: strings (a `pattern` from a small regex grammar — literals, classes `[a-z]` `\\d` `\\D` `\\w` `.` ...,
  groups, alternation, quantifiers `?` `*` `+` `{m}` `{m,n}` `{m,}`, anchors `^` `$` — a `format`, minLength /
  maxLength), integers and numbers (minimum / maximum / exclusive bounds, multipleOf integers and decimals),
  booleans, null, enum / const (scalars, small arrays and objects), type lists, `{}`, `true`, `false`;
- arrays: items, prefixItems (or items arrays + additionalItems), minItems / maxItems, uniqueItems, contains,
  minContains / maxContains;
- objects: properties, required (declared names and not), additionalProperties (boolean or schema),
  patternProperties, minProperties / maxProperties, propertyNames, dependentRequired / dependentSchemas /
  dependencies;
- maps: objects of generated names (minProperties, propertyNames, patternProperties, additionalProperties, and
  dependencies among the names they may generate);
- combinators: anyOf / oneOf / allOf, `not` (including not of not, not of if / then / else), if / then / else, each
  possibly beside sibling keywords; combinators over variations of one schema (an object with a member required,
  retyped or added, closed, or a discriminator; an array with other items, a tuple prefix, other bounds; a string
  with another pattern / format / length; a number with other bounds / multipleOf), and a schema beside the `not`
  of a variation of itself;
- `$defs` / `definitions` with `$ref`s (beside sibling keywords sometimes), to boolean schemas and to recursive
  targets (a linked list, a tree, a recursive anyOf).

Depth is at most `max_depth` (4) and every list holds a handful of members, so a compile takes well under a second.
Needs `hypothesis` at run time.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

# ---- drafts -------------------------------------------------------------------------------------------------------

DRAFT_URIS = {
    "draft-04": "http://json-schema.org/draft-04/schema#",
    "draft-06": "http://json-schema.org/draft-06/schema#",
    "draft-07": "http://json-schema.org/draft-07/schema#",
    "2019-09": "https://json-schema.org/draft/2019-09/schema",
    "2020-12": "https://json-schema.org/draft/2020-12/schema",
}
# (None: no $schema; jsonschema and the compiler read it as 2020-12). Shrinks toward the first.
DRAFTS = (None, "2020-12", "draft-07", "2019-09", "draft-06", "draft-04")
_LEVEL = {"draft-04": 4, "draft-06": 6, "draft-07": 7, "2019-09": 8, "2020-12": 9, None: 9}

FORMATS = ("date", "date-time", "time", "email", "uri", "uuid", "hostname", "ipv4", "ipv6", "duration",
           "uri-reference", "iri", "idn-email", "idn-hostname", "json-pointer", "relative-json-pointer",
           "uri-template", "regex", "url", "my-vendor-format")
MULTIPLES = (1, 2, 3, 5, 10, 0.5, 0.25, 0.1, 0.01, 0.2, 1.5, 0.3, 2.5)
NAMES = ("a", "b", "c", "id", "x-y", "x1")
DEF_NAMES = ("a", "b", "node", "tree")


@dataclass(frozen=True)
class FuzzConfig:
    """Knobs of the schema grammar."""

    max_depth: int = 4  # nesting of subschemas (leaves only at this depth)
    max_members: int = 3  # properties, branches, enum values, prefix items, definitions
    drafts: tuple = DRAFTS  # the $schema values drawn from (None: no $schema)
    off_draft: float = 0.1  # how often a keyword of another draft is used instead of the declared draft's
    definitions: bool = True  # $defs / definitions and $ref (boolean and recursive targets included)
    patterns: bool = True  # string patterns (the regex grammar)
    formats: tuple = FORMATS
    combinators: bool = True  # anyOf / oneOf / allOf / not / if-then-else


# ---- small helpers over `draw` --------------------------------------------------------------------------------------


def _chance(draw, p: float) -> bool:
    """True with probability ~p; shrinks to False."""
    n = 20
    k = max(0, min(n, round(p * n)))
    return draw(st.sampled_from([False] * (n - k) + [True] * k))


def _weighted(draw, options: list[tuple[Any, int]]):
    """One of `options` (value, weight); shrinks toward the first."""
    return draw(st.sampled_from([v for v, w in options for _ in range(w)]))


@dataclass(frozen=True)
class _Ctx:
    config: FuzzConfig
    draft: str | None
    refs: tuple = ()  # the `$ref` strings that resolve

    @property
    def level(self) -> int:
        return _LEVEL[self.draft]

    def has(self, draw, since: int, until: int = 99) -> bool:
        """May a keyword of drafts [since, until] be used? Yes in those drafts; elsewhere off-draft, sometimes."""
        inside = since <= self.level <= until
        return inside or _chance(draw, self.config.off_draft)


# ---- regex grammar ------------------------------------------------------------------------------------------------

_LITERALS = ["a", "b", "x", "0", "7", "-", "_", " ", "@", "\\.", "/", ":", "Z"]
_CLASSES = ["[a-z]", "[0-9]", "\\d", "\\w", ".", "[A-Z]", "[a-f0-9]", "[^a-z]", "[abc]", "\\D", "\\W", "\\s", "\\S",
            "[^0-9]", "[-a]"]


@st.composite
def regex_patterns(draw, depth: int = 0) -> str:
    """A pattern from a small regex grammar: (^)? alternation of sequences of quantified atoms ($)?."""
    body = draw(_alternation(depth))
    start = "^" if _chance(draw, 0.4) else ""
    end = "$" if _chance(draw, 0.4) else ""
    return start + body + end


@st.composite
def _alternation(draw, depth: int) -> str:
    n = _weighted(draw, [(1, 6), (2, 3)] + ([(3, 1)] if depth == 0 else []))
    return "|".join(draw(_sequence(depth)) for _ in range(n))


@st.composite
def _sequence(draw, depth: int) -> str:
    n = draw(st.integers(1, 4 if depth == 0 else 2))
    return "".join(draw(_piece(depth)) for _ in range(n))


@st.composite
def _piece(draw, depth: int) -> str:
    # (one level of groups: patterns stay short, so a compile stays well under a second)
    kinds = [("literal", 5), ("class", 5)] + ([("group", 1), ("ncgroup", 1)] if depth == 0 else [])
    kind = _weighted(draw, kinds)
    if kind == "literal":
        atom = draw(st.sampled_from(_LITERALS))
    elif kind == "class":
        atom = draw(st.sampled_from(_CLASSES))
    else:
        inner = draw(_alternation(depth + 1))
        if _chance(draw, 0.05):  # an anchor inside a group (the compiler may refuse it)
            inner = draw(st.sampled_from(["^", ""])) + inner + draw(st.sampled_from(["$", ""]))
        atom = ("(" if kind == "group" else "(?:") + inner + ")"
    quantifier = _weighted(draw, [("", 6), ("?", 2), ("*", 2), ("+", 2), ("{m}", 1), ("{m,n}", 2), ("{m,}", 1)])
    if "m" in quantifier:
        m = draw(st.integers(0, 3))
        quantifier = quantifier.replace("m", str(m)).replace("n", str(m + draw(st.integers(0, 3))))
    return atom + quantifier


# ---- JSON values (enum / const) -----------------------------------------------------------------------------------

_scalars = st.one_of(
    st.text("ab-1 ", max_size=3),
    st.integers(-5, 20),
    st.sampled_from([0.5, -1.25, 1.0, 2.5, 0.1, 0.0, 2.0, -0.0]),  # (1.0 equals 1 to a validator)
    st.booleans(),
    st.none(),
)
json_values = st.one_of(
    _scalars,
    st.lists(_scalars, max_size=2),
    st.dictionaries(st.sampled_from(["k", "a"]), _scalars, max_size=2),
)


# ---- schemas ------------------------------------------------------------------------------------------------------


def _bound(draw, decimals: bool) -> int | float:
    if decimals and _chance(draw, 0.4):
        return draw(st.sampled_from([-2.5, -0.5, 0.25, 0.5, 1.5, 3.75, 10.1, 99.9]))
    return draw(st.integers(-20, 100))


def _numeric(draw, ctx: _Ctx, kind: str) -> dict:
    """Bounds and multipleOf of an integer or number."""
    out: dict = {}
    decimals = kind == "number" or _chance(draw, 0.2)
    lo = _bound(draw, decimals) if _chance(draw, 0.5) else None
    hi = _bound(draw, decimals) if _chance(draw, 0.5) else None
    if lo is not None and hi is not None and hi < lo and _chance(draw, 0.9):
        lo, hi = hi, lo
    boolean_flags = ctx.level == 4 and not _chance(draw, ctx.config.off_draft)
    for value, inclusive, exclusive in ((lo, "minimum", "exclusiveMinimum"), (hi, "maximum", "exclusiveMaximum")):
        if value is None:
            continue
        if not _chance(draw, 0.35):
            out[inclusive] = value
        elif boolean_flags:  # draft 4: a flag on minimum / maximum
            out[inclusive] = value
            out[exclusive] = draw(st.booleans())
        else:
            out[exclusive] = value
            if _chance(draw, 0.15):  # both, the looser or the tighter
                out[inclusive] = value + draw(st.sampled_from([-1, 1, 0.5]))
    if _chance(draw, 0.35):
        out["multipleOf"] = draw(st.sampled_from(MULTIPLES if kind == "number" else MULTIPLES[:5] + MULTIPLES[5:7]))
    return out


def _string(draw, ctx: _Ctx) -> dict:
    out: dict = {}
    if ctx.config.patterns and _chance(draw, 0.5):
        out["pattern"] = draw(regex_patterns())
    if ctx.config.formats and _chance(draw, 0.3):
        out["format"] = draw(st.sampled_from(ctx.config.formats))
    if _chance(draw, 0.4):
        out["minLength"] = draw(st.integers(0, 6))
    if _chance(draw, 0.4):
        out["maxLength"] = out.get("minLength", 0) + draw(st.integers(0 if _chance(draw, 0.9) else -2, 8))
        out["maxLength"] = max(0, out["maxLength"])
    return out


@st.composite
def _leaf(draw, ctx: _Ctx) -> Any:
    kinds = [("string", 5), ("integer", 4), ("number", 3), ("enum", 3), ("const", 2), ("boolean", 1), ("null", 1),
             ("types", 2), ("empty", 1), ("bool", 1)]
    if ctx.refs:
        kinds.append(("ref", 3))
    kind = _weighted(draw, kinds)
    if kind == "string":
        out = _string(draw, ctx)
        return {"type": "string", **out} if not out or _chance(draw, 0.85) else out
    if kind in ("integer", "number"):
        return {"type": kind, **_numeric(draw, ctx, kind)}
    if kind == "enum":
        values = draw(st.lists(json_values, min_size=1, max_size=ctx.config.max_members + 1))
        out = {"enum": values}
        if _chance(draw, 0.2):
            out["type"] = draw(st.sampled_from(["string", "integer", "number", "boolean", "array", "object"]))
        return out
    if kind == "const":
        if ctx.has(draw, 6):
            return {"const": draw(json_values)}
        return {"enum": [draw(json_values)]}
    if kind in ("boolean", "null"):
        return {"type": kind}
    if kind == "types":
        types = draw(st.lists(st.sampled_from(["string", "integer", "number", "boolean", "null", "array", "object"]),
                              min_size=1, max_size=3, unique=True))
        out: dict = {"type": types}
        if "string" in types and _chance(draw, 0.5):
            out.update(_string(draw, ctx))
        if {"integer", "number"} & set(types) and _chance(draw, 0.5):
            out.update(_numeric(draw, ctx, "number" if "number" in types else "integer"))
        if "array" in types and _chance(draw, 0.3):
            out["maxItems"] = draw(st.integers(0, 3))
        if "object" in types and _chance(draw, 0.3):
            out["maxProperties"] = draw(st.integers(0, 2))
        return out
    if kind == "empty":
        return {}
    if kind == "bool":
        if ctx.has(draw, 6):
            return draw(st.booleans())
        return {} if draw(st.booleans()) else {"not": {}}
    # a reference, sometimes with sibling keywords (draft 2019-09+ read them; older drafts ignore them)
    out = {"$ref": draw(st.sampled_from(ctx.refs))}
    if _chance(draw, 0.15):
        out.update(draw(st.sampled_from([{"type": "object"}, {"type": "string"}, {"minProperties": 1},
                                         {"maxLength": 3}, {"type": ["object", "null"]}])))
    return out


@st.composite
def _finite_items(draw, ctx: _Ctx) -> dict:
    """An item schema with finitely many values: an enum (values JSON Schema counts as equal — 1 and 1.0, 0 and
    -0.0 — among them sometimes), beside keywords that rule some out; booleans; a const."""
    kind = _weighted(draw, [("enum", 4), ("boolean", 1), ("const", 1)])
    if kind == "boolean":
        return {"type": "boolean"}
    if kind == "const":
        value = draw(json_values)
        return {"const": value} if ctx.has(draw, 6) else {"enum": [value]}
    values = draw(st.lists(json_values, min_size=1, max_size=4))
    if _chance(draw, 0.3):
        values += draw(st.sampled_from([[1, 1.0], [0, -0.0], [[1], [1.0]], [{"k": 2}, {"k": 2.0}]]))
    out: dict = {"enum": values}
    if _chance(draw, 0.4):
        out.update(draw(st.sampled_from([{"type": "integer"}, {"type": "string"}, {"minimum": 1},
                                         {"not": {"enum": [1]}}, {"maxLength": 1}, {"type": ["array", "null"]}])))
    return out


@st.composite
def _array(draw, ctx: _Ctx, depth: int) -> dict:
    out: dict = {"type": "array"}
    tuple_kind = _weighted(draw, [("items", 6), ("none", 1), ("tuple", 3)])
    if tuple_kind == "items":
        out["items"] = draw(_node(ctx, depth + 1))
    elif tuple_kind == "tuple":
        prefix = draw(st.lists(_node(ctx, depth + 1), min_size=1, max_size=ctx.config.max_members))
        new_style = ctx.level >= 9
        if _chance(draw, ctx.config.off_draft):
            new_style = not new_style
        rest = draw(_node(ctx, depth + 1)) if _chance(draw, 0.5) else None
        if new_style:
            out["prefixItems"] = prefix
            if rest is not None:
                out["items"] = rest
        else:
            out["items"] = prefix
            if rest is not None:
                out["additionalItems"] = rest
    if _chance(draw, 0.4):
        out["minItems"] = draw(st.integers(0, 3))
    if _chance(draw, 0.5):
        out["maxItems"] = out.get("minItems", 0) + draw(st.integers(0, 3))
    if _chance(draw, 0.2):
        out["uniqueItems"] = True
        if tuple_kind != "tuple" and _chance(draw, 0.5):  # distinct items from a finite set (equal values in it)
            out["items"] = draw(_finite_items(ctx))
    if _chance(draw, 0.2) and ctx.has(draw, 6):
        out["contains"] = draw(_node(ctx, depth + 1))
        if _chance(draw, 0.4) and ctx.has(draw, 8):
            out["minContains"] = draw(st.integers(0, 2))
        if _chance(draw, 0.1) and ctx.has(draw, 8):
            out["maxContains"] = draw(st.integers(1, 3))
    return out


@st.composite
def _object(draw, ctx: _Ctx, depth: int) -> dict:
    out: dict = {"type": "object"} if _chance(draw, 0.85) else {}
    names = draw(st.lists(st.sampled_from(NAMES), max_size=ctx.config.max_members, unique=True))
    if names or _chance(draw, 0.5):
        out["properties"] = {name: draw(_node(ctx, depth + 1)) for name in names}
    if _chance(draw, 0.6):  # (names of the first few: objects side by side require the same ones)
        required = draw(st.lists(st.sampled_from(NAMES[:3]), max_size=ctx.config.max_members, unique=True))
        declared = [n for n in required if n in names]
        if ctx.level > 4 or declared or _chance(draw, ctx.config.off_draft):  # draft 4: required non-empty
            out["required"] = declared if _chance(draw, 0.6) else required  # (or undeclared names too)
        if ctx.level == 4 and out.get("required") == [] and not _chance(draw, ctx.config.off_draft):
            del out["required"]
    extra = _weighted(draw, [(None, 5), (False, 3), ("schema", 2), (True, 1)])
    if extra == "schema":
        out["additionalProperties"] = draw(_node(ctx, depth + 1))
    elif extra is not None:
        out["additionalProperties"] = extra
    if _chance(draw, 0.2):
        out["patternProperties"] = {draw(st.sampled_from(["^x", "b", "^[a-c]$", "\\d"])): draw(_node(ctx, depth + 1))}
    if _chance(draw, 0.2):
        out["minProperties"] = draw(st.integers(0, 3))
    if _chance(draw, 0.2):
        out["maxProperties"] = out.get("minProperties", 0) + draw(st.integers(0, 2))
    if _chance(draw, 0.15) and ctx.has(draw, 6):
        out["propertyNames"] = draw(st.sampled_from([
            {"maxLength": 1}, {"pattern": "^[a-z]+$"}, {"enum": ["a", "b", "id"]}, {"minLength": 2}, {"enum": ["a"]},
            {"not": {"const": "a"}}, {"format": "email"}]))
    if _chance(draw, 0.15):  # (declared names or not: a generated member name may be one with dependents)
        a, b = draw(st.lists(st.sampled_from(NAMES[:3]), min_size=2, max_size=2, unique=True))
        schema_form = _chance(draw, 0.3)  # (a schema that the member brings, rather than names)
        dependent = {"required": [b]} if _chance(draw, 0.5) else {"properties": {b: {"type": "integer"}}}
        if ctx.has(draw, 8):
            out["dependentSchemas" if schema_form else "dependentRequired"] = {a: dependent if schema_form else [b]}
        else:
            out["dependencies"] = {a: dependent if schema_form else [b]}
    return out


@st.composite
def _map(draw, ctx: _Ctx, depth: int) -> dict:
    """An object of generated member names: minProperties, names limited by propertyNames / patternProperties,
    values by additionalProperties, and dependencies among the names it may generate."""
    out: dict = {"type": "object"}
    if _chance(draw, 0.8):
        out["minProperties"] = draw(st.integers(1, 2))
    if _chance(draw, 0.3):
        out["maxProperties"] = out.get("minProperties", 0) + draw(st.integers(0, 1))
    if ctx.has(draw, 6):
        out["propertyNames"] = draw(st.sampled_from([{"enum": ["a", "b"]}, {"enum": ["a"]}, {"maxLength": 1},
                                                     {"pattern": "^[ab]$"}, {"enum": ["a", "b", "c"]}]))
    if _chance(draw, 0.3):
        out["patternProperties"] = {draw(st.sampled_from(["^a", "b", "^[a-c]$"])): draw(_node(ctx, depth + 1))}
    if _chance(draw, 0.6):
        out["additionalProperties"] = draw(_node(ctx, depth + 1)) if _chance(draw, 0.8) else False
    if _chance(draw, 0.3):
        out["properties"] = {draw(st.sampled_from(["a", "c"])): draw(_leaf(ctx))}
    if _chance(draw, 0.5):
        dependent = draw(st.sampled_from([["b"], ["c"], {"required": ["b"]}, {"properties": {"b": {"type": "null"}}}]))
        if not ctx.has(draw, 8):
            out["dependencies"] = {"a": dependent}
        else:
            out["dependentRequired" if isinstance(dependent, list) else "dependentSchemas"] = {"a": dependent}
    return out


def _vary(draw, ctx: _Ctx, base: dict, tag: int) -> dict:
    """`base` with a few of its keywords changed: the branches of a union over similar schemas (an object with a
    member required, retyped or added, closed, or a discriminator; an array with other items, a tuple prefix, other
    bounds; a string with another pattern, format or length; a number with other bounds or multipleOf)."""
    kind = base.get("type")
    out = dict(base)
    if kind == "object":
        out["properties"] = dict(base.get("properties", {}))
        changes = ["require", "retype", "close", "add", "tag", "max", "unrequire"]
    elif kind == "array":
        changes = ["items", "prefix", "min", "max", "unique", "contains"]
    elif kind == "string":
        changes = ["pattern", "format", "min", "max", "type"]
    else:
        changes = ["bounds", "multiple", "type"]
    for change in draw(st.lists(st.sampled_from(changes), min_size=1, max_size=2, unique=True)):
        if change == "require":
            out["required"] = list(dict.fromkeys([*out.get("required", []), draw(st.sampled_from(NAMES[:3]))]))
        elif change == "unrequire":
            out.pop("required", None)
        elif change == "retype" and out["properties"]:
            out["properties"][draw(st.sampled_from(sorted(out["properties"])))] = draw(_leaf(ctx))
        elif change == "close":
            out["additionalProperties"] = False
        elif change == "add":
            out["properties"][draw(st.sampled_from(NAMES))] = draw(_leaf(ctx))
        elif change == "tag":  # a discriminator
            out["properties"]["kind"] = {"const": tag} if ctx.level > 4 else {"enum": [tag]}
            out["required"] = list(dict.fromkeys([*out.get("required", []), "kind"]))
        elif change == "max" and kind == "object":
            out["maxProperties"] = draw(st.integers(1, 2))
        elif change == "items":
            out["items"] = draw(_leaf(ctx))
            out.pop("prefixItems", None)
        elif change == "prefix":
            prefix = [draw(_leaf(ctx))]
            if ctx.level >= 9 or _chance(draw, ctx.config.off_draft):
                out["prefixItems"] = prefix
            else:
                out["items"], out["additionalItems"] = prefix, out.get("items", True)
        elif change == "min":
            out["minItems" if kind == "array" else "minLength"] = draw(st.integers(0, 3))
        elif change == "max":
            out["maxItems" if kind == "array" else "maxLength"] = draw(st.integers(0, 4))
        elif change == "unique":
            out["uniqueItems"] = True
        elif change == "contains" and ctx.has(draw, 6):
            out["contains"] = draw(_leaf(ctx))
        elif change == "pattern":
            out["pattern"] = draw(regex_patterns())
        elif change == "format":
            out["format"] = draw(st.sampled_from(ctx.config.formats or ("date",)))
        elif change == "type":
            out["type"] = draw(st.sampled_from(["string", "integer", "number", ["string", "null"]]))
        elif change == "bounds":
            for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                out.pop(key, None)
            out.update(_numeric(draw, ctx, "number"))
        elif change == "multiple":
            out["multipleOf"] = draw(st.sampled_from(MULTIPLES))
    if kind == "object" and not out["properties"]:
        del out["properties"]
    if ctx.level == 4 and out.get("required") == []:
        del out["required"]
    return out


@st.composite
def _family(draw, ctx: _Ctx, depth: int) -> dict:
    """A combinator over variations of one schema (an object, array, string or number): anyOf / oneOf / allOf of
    them, or the schema beside a `not` of a variation of itself."""
    kind = _weighted(draw, [("object", 3), ("array", 3), ("string", 1), ("number", 1)])
    if kind == "object":
        base = draw(_object(ctx, depth + 1))
        base["type"] = "object"
    elif kind == "array":
        base = draw(_array(ctx, max(depth + 1, ctx.config.max_depth - 1)))
    elif kind == "string":
        base = {"type": "string", **_string(draw, ctx)}
    else:
        base = {"type": draw(st.sampled_from(["number", "integer"])), **_numeric(draw, ctx, "number")}
    combinator = _weighted(draw, [("oneOf", 3), ("anyOf", 2), ("allOf", 2), ("not", 2)])
    if combinator == "not":
        return {**base, "not": _vary(draw, ctx, base, 0)}
    branches = [_vary(draw, ctx, base, i) for i in range(draw(st.integers(2, 3)))]
    return {combinator: branches}


def _siblings(draw, ctx: _Ctx) -> dict:
    """Keywords beside a combinator."""
    choice = _weighted(draw, [(None, 6), ("type", 3), ("bounds", 1), ("required", 1), ("string", 1)])
    if choice == "type":
        return {"type": draw(st.sampled_from(["string", "integer", "number", "object", "array", ["string", "null"],
                                              ["integer", "string"]]))}
    if choice == "bounds":
        return _numeric(draw, ctx, "number")
    if choice == "required":
        return {"required": draw(st.lists(st.sampled_from(NAMES[:3]), min_size=1, max_size=2, unique=True))}
    if choice == "string":
        return _string(draw, ctx)
    return {}


@st.composite
def _combinator(draw, ctx: _Ctx, depth: int) -> dict:
    kind = _weighted(draw, [("anyOf", 3), ("oneOf", 3), ("allOf", 2), ("not", 3), ("if", 2), ("not-not", 1),
                            ("not-if", 1)])
    if kind in ("if", "not-if") and not ctx.has(draw, 7):
        kind = "not"  # (drafts 4 and 6 know no if / then / else: there only off-draft)
    sub = _node(ctx, depth + 1)
    if kind in ("anyOf", "oneOf", "allOf"):
        out = {kind: draw(st.lists(sub, min_size=1, max_size=ctx.config.max_members))}
    elif kind == "not":
        out = {"not": draw(sub)}
    elif kind == "not-not":
        out = {"not": {"not": draw(sub)}}
    else:
        cond = {"if": draw(sub)}
        if _chance(draw, 0.7):
            cond["then"] = draw(sub)
        if _chance(draw, 0.6):
            cond["else"] = draw(sub)
        out = {"not": cond} if kind == "not-if" else cond
    return {**_siblings(draw, ctx), **out}


@st.composite
def _node(draw, ctx: _Ctx, depth: int) -> Any:
    if depth >= ctx.config.max_depth:
        return draw(_leaf(ctx))
    if depth == 0:  # (the root: structures more often than a lone leaf)
        kinds = [("leaf", 2), ("array", 2), ("object", 3), ("map", 2)]
        if ctx.config.combinators:
            kinds += [("combinator", 3), ("family", 4)]
    else:
        kinds = [("leaf", 8), ("array", 2), ("object", 3), ("map", 1)]
        if ctx.config.combinators:
            kinds += [("combinator", 4), ("family", 2)]
    kind = _weighted(draw, kinds)
    if kind == "leaf":
        return draw(_leaf(ctx))
    if kind == "array":
        return draw(_array(ctx, depth))
    if kind == "object":
        return draw(_object(ctx, depth))
    if kind == "map":
        return draw(_map(ctx, depth))
    if kind == "family":
        return draw(_family(ctx, depth))
    return draw(_combinator(ctx, depth))


@st.composite
def _definition(draw, ctx: _Ctx, ref: str) -> Any:
    """A definition's body: any subschema, a boolean schema, or a recursive one (a list, a tree, a nesting)."""
    kind = _weighted(draw, [("schema", 5), ("true", 1), ("false", 1), ("list", 2), ("tree", 2), ("nest", 1)])
    if kind == "true":
        return True if ctx.has(draw, 6) else {}
    if kind == "false":
        return False if ctx.has(draw, 6) else {"not": {}}
    if kind == "schema":
        return draw(_node(ctx, 2))
    value = draw(_leaf(dataclasses.replace(ctx, refs=())))
    if kind == "list":
        out = {"type": "object", "properties": {"v": value, "next": {"$ref": ref}}, "required": ["v"]}
        if _chance(draw, 0.15):
            out["required"] = ["v", "next"]  # required at every depth: no finite value (DepthLimit)
        if _chance(draw, 0.3):
            out["additionalProperties"] = False
        return out
    if kind == "tree":
        kids = {"type": "array", "items": {"$ref": ref}}
        if _chance(draw, 0.7):
            kids["maxItems"] = draw(st.integers(0, 2))
        out = {"type": "object", "properties": {"v": value, "kids": kids}}
        required = draw(st.sampled_from([["v"], [], ["v", "kids"]]))
        if required or ctx.level > 4:  # (draft 4: required must not be empty)
            out["required"] = required
        return out
    return {"anyOf": [value, {"type": "array", "items": {"$ref": ref}, "maxItems": draw(st.integers(1, 2))}]}


@st.composite
def schemas(draw, config: FuzzConfig = FuzzConfig()) -> dict:
    """A JSON Schema (a dict) from the grammar (see the module doc)."""
    draft = draw(st.sampled_from(config.drafts))
    ctx = _Ctx(config, draft)
    defs: dict = {}
    keyword = None
    if config.definitions and _chance(draw, 0.35):
        keyword = "$defs" if ctx.level >= 8 else "definitions"
        if _chance(draw, config.off_draft):
            keyword = "definitions" if keyword == "$defs" else "$defs"
        names = draw(st.lists(st.sampled_from(DEF_NAMES), min_size=1, max_size=config.max_members, unique=True))
        ctx = dataclasses.replace(ctx, refs=tuple(f"#/{keyword}/{n}" for n in names))
        for name in names:
            defs[name] = draw(_definition(ctx, f"#/{keyword}/{name}"))
    if ctx.refs and _chance(draw, 0.4):
        root = {"$ref": draw(st.sampled_from(ctx.refs))}
    else:
        root = draw(_node(ctx, 0))
        if not isinstance(root, dict):  # (a boolean root: a document with $schema / definitions must be an object)
            root = {} if root else {"not": {}}
    out = dict(root)
    if draft is not None:
        out = {"$schema": DRAFT_URIS[draft], **out}
    if defs:
        out[keyword] = defs
    return out


# ---- checking one schema ------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What became of one schema."""

    status: str  # compiled | refused (SchemaError) | slow (compile or fillings over the CPU limit) | crash | unjudged
    reason: str | None = None  # refused: the SchemaError's message; crash: the exception
    problems: list = field(default_factory=list)
    fixed: tuple = ()
    seconds: float = 0.0  # compile CPU seconds
    fillings: int = 0  # fillings checked


def _short(text: str, n: int = 300) -> str:
    return text if len(text) <= n else text[:n] + "…"


def _traceback_tail(exc: BaseException, lines: int = 6) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-lines:]).strip()


def examine(schema: Any, tokenizer, fillings: int = 8, seed: int = 0, compile_seconds: float = 5.0,
            check_seconds: float = 20.0) -> Outcome:
    """Compile `schema` (a compile past `compile_seconds` of CPU is "slow", not a failure) and check `fillings`
    random fillings of its template: decoded, parsed, validated by the schema's own draft's validator with formats
    checked (in a worker process past `check_seconds`: a fuzzed pattern may backtrack), and accepted by the template
    itself. Never raises (but KeyboardInterrupt)."""
    import torch

    from diffreason.errors import DiffreasonError
    from diffreason.limits import BudgetExceeded, ValidationTimeout, cpu_budget, validate_json
    from diffreason.tasks.json_schema import SchemaError, compile_schema

    start = time.thread_time()
    try:
        compiled = compile_schema(schema, tokenizer, cpu_seconds=compile_seconds)
    except SchemaError as exc:
        if str(exc).startswith("compile budget exceeded"):
            return Outcome("slow", f"compile over {compile_seconds:g} CPU s", seconds=time.thread_time() - start)
        return Outcome("refused", str(exc), seconds=time.thread_time() - start)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the compiler promised a SchemaError
        message = f"{type(exc).__name__}: {_short(str(exc), 200)}"
        return Outcome("crash", message, [("crash", message, _traceback_tail(exc))],
                       seconds=time.thread_time() - start)
    seconds = time.thread_time() - start
    outcome = Outcome("compiled", fixed=tuple(compiled.fixed), seconds=seconds)
    try:
        with cpu_budget(check_seconds, what="the fillings"):
            for k in range(fillings):
                try:
                    tokens = compiled.random_filling(torch.Generator().manual_seed(seed * 1000 + k))
                except Exception as exc:
                    message = f"{type(exc).__name__}: {_short(str(exc), 200)}"
                    outcome.problems.append(("crash", f"random_filling: {message}", _traceback_tail(exc)))
                    break
                outcome.fillings += 1
                text = tokenizer.decode(tokens, skip_special_tokens=True)
                bad = compiled.template.violations(tokens)
                if bad:
                    outcome.problems.append(("violation", text, f"positions {bad[:10]}"))
                try:
                    value = json.loads(text)
                except ValueError:
                    outcome.problems.append(("unparsable", text))
                    continue
                try:
                    error = validate_json(schema, value, check_seconds)
                except (ValidationTimeout, DiffreasonError) as exc:  # the validator fails or backtracks: no verdict
                    return dataclasses.replace(outcome, status="unjudged", reason=_short(str(exc), 200))
                if error is not None:
                    outcome.problems.append(("invalid", text, _short(error[0], 200), f"at {error[1]} by {error[2]}"))
    except BudgetExceeded:  # (a template builds its automata's tables lazily, on the first filling: part of the compile)
        return dataclasses.replace(outcome, status="slow", reason=f"fillings over {check_seconds:g} CPU s")
    outcome.problems = _distinct(outcome.problems)
    return outcome


def _distinct(problems: list) -> list:
    """Problems without repeats (the same invalid text from several fillings counts once)."""
    return list(dict.fromkeys(problems))


def check_schema_soundness(schema: Any, tokenizer, fillings: int = 8, seed: int = 0,
                           compile_seconds: float = 5.0) -> list[tuple]:
    """The soundness problems of `schema`: ("crash", exception, traceback tail) when compile raises anything but
    SchemaError (or filling fails); for a compiled schema, per random filling, ("unparsable", text), ("invalid",
    text, message, where) and ("violation", text, positions). [] when sound: compiled with every filling valid,
    refused with SchemaError, or too slow to judge (a compile over `compile_seconds` CPU seconds)."""
    return examine(schema, tokenizer, fillings, seed, compile_seconds).problems


# ---- shrinking a failure ----------------------------------------------------------------------------------------


def signature(problem: tuple) -> tuple:
    """What kind of failure a problem is, to tell one bug from another: a crash by its exception (type and message
    without particulars) and the function it was raised in; an invalid filling by the keyword the validator refused
    it by; unparsable and violation as such."""
    kind = problem[0]
    if kind == "crash":
        frames = re.findall(r", in (\w+)\n", problem[2] + "\n")
        return kind, re.sub(r"'[^']*'|\d+", "…", problem[1])[:80], frames[-1] if frames else ""
    if kind == "invalid":
        return kind, problem[3].rsplit("/", 1)[-1]
    return (kind,)


def _smaller(node: Any):
    """Simpler JSON values than `node`, one change each, the biggest cuts first: a member or item left out, an
    object replaced by one of its subschemas (hoisted), then a change inside a member or item; numbers toward 0,
    strings shorter."""
    if isinstance(node, dict):
        for key in node:
            yield {k: v for k, v in node.items() if k != key}
        for key, value in node.items():
            if key != "$schema":
                if isinstance(value, dict):
                    yield value
                elif isinstance(value, list):
                    yield from (v for v in value if isinstance(v, dict))
        for key, value in node.items():
            for smaller in _smaller(value):
                yield {**node, key: smaller}
    elif isinstance(node, list):
        for i in range(len(node)):
            yield node[:i] + node[i + 1 :]
        for i, value in enumerate(node):
            for smaller in _smaller(value):
                yield node[:i] + [smaller] + node[i + 1 :]
    elif isinstance(node, bool) or node is None:
        return
    elif isinstance(node, int):
        yield from (c for c in dict.fromkeys((0, int(node / 2))) if abs(c) < abs(node))
    elif isinstance(node, float):
        yield from dict.fromkeys((0, int(node)))
    elif isinstance(node, str):
        if node.startswith(("#/", "http")):  # ($ref and $schema: kept as they are)
            return
        for i in range(len(node)):
            yield node[:i] + node[i + 1 :]


def _size(node: Any) -> int:
    return len(_canonical(node))


def shrink_schema(schema: dict, tokenizer, wanted: tuple | None = None, fillings: int = 8, seed: int = 0,
                  max_checks: int = 400) -> tuple[dict, Outcome]:
    """A smaller schema that fails the same way as `schema` (a problem with signature `wanted`, by default its first
    problem's), by greedy delta debugging over its JSON: each simpler variant (`_smaller`) that still fails so is
    kept, until none does or `max_checks` compiles are spent. Returns (schema, its outcome)."""
    outcome = examine(schema, tokenizer, fillings, seed)
    if wanted is None:
        if not outcome.problems:
            return schema, outcome
        wanted = signature(outcome.problems[0])
    checks = 0
    tried: set[str] = set()
    improved = True
    while improved and checks < max_checks:
        improved = False
        for candidate in _smaller(schema):
            key = _canonical(candidate)
            if key in tried or len(key) >= _size(schema):  # (strictly smaller: the loop ends)
                continue
            tried.add(key)
            checks += 1
            result = examine(candidate, tokenizer, fillings, seed)
            if any(signature(p) == wanted for p in result.problems):
                schema, outcome, improved = candidate, result, True
                break
            if checks >= max_checks:
                break
    return schema, outcome


# ---- driving many ---------------------------------------------------------------------------------------------------


def reason_of(message: str) -> str:
    """A refusal's reason without its place and particulars, to count reasons across schemas."""
    reason = re.sub(r" at [^ ]*$", "", message.split("\n")[0])
    reason = re.sub(r"'(?:[^'\\]|\\.)*'", "'…'", reason)  # quoted values
    reason = re.sub(r"\{.*\}|\[.*\]", "…", reason)
    reason = re.sub(r"-?\d+(\.\d+)?", "N", reason)
    return reason[:100]


def _canonical(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def run_fuzz(examples: int, seed: int, fillings: int = 6, tokenizer=None, config: FuzzConfig = FuzzConfig(),
             compile_seconds: float = 5.0, progress=None, shrink: int = 0) -> dict:
    """Generate `examples` schemas (deterministic for `seed`), `examine` each, and report: counts (generated, distinct,
    compiled, refused by reason, slow, crashed, invalid, unjudged), per draft, and the failing schemas with their
    problems. Never raises for a bad schema. `progress(i, schema, outcome)` is called after each. `shrink`: up to
    this many failing schemas per failure signature are shrunk (`shrink_schema`) into the report's `reproducers`,
    deduplicated."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    if tokenizer is None:
        from diffreason.tokenizer import train_byte_bpe

        tokenizer = train_byte_bpe()
    seen: dict[str, Outcome] = {}
    order: list[str] = []
    drafts: dict = collections.defaultdict(collections.Counter)
    generated = 0
    started = time.time()

    @hypothesis_seed(seed)
    @settings(max_examples=examples, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), derandomize=False)
    @given(schemas(config))
    def inner(schema):
        nonlocal generated
        generated += 1
        key = _canonical(schema)
        if key not in seen:
            seen[key] = examine(schema, tokenizer, fillings, seed, compile_seconds)
            order.append(key)
            draft = next((k for k, v in DRAFT_URIS.items() if v == schema.get("$schema")), "none")
            status = seen[key].status
            if status == "compiled" and seen[key].problems:
                status = "unsound"
            drafts[draft][status] += 1
        if progress is not None:
            progress(generated, schema, seen[key])

    inner()
    outcomes = [seen[k] for k in order]
    counts = collections.Counter(o.status for o in outcomes)
    crashed = [k for k in order if seen[k].status == "crash" or any(p[0] == "crash" for p in seen[k].problems)]
    invalid = [k for k in order if seen[k].status == "compiled"
               and any(p[0] in ("invalid", "unparsable", "violation") for p in seen[k].problems)]
    reasons = collections.Counter(reason_of(o.reason) for o in outcomes if o.status == "refused")
    compile_times = sorted(o.seconds for o in outcomes if o.status == "compiled")
    failures = [{"schema": json.loads(k), "status": seen[k].status, "problems": [list(p) for p in seen[k].problems],
                 "fixed": list(seen[k].fixed)} for k in order if k in set(crashed) | set(invalid)]
    reproducers: dict[str, dict] = {}
    if shrink:
        per_signature: collections.Counter = collections.Counter()
        for failure in failures:
            wanted = signature(tuple(failure["problems"][0]))
            if per_signature[wanted] >= shrink:
                continue
            per_signature[wanted] += 1
            small, result = shrink_schema(failure["schema"], tokenizer, wanted, fillings, seed)
            problem = next(p for p in result.problems if signature(p) == wanted)
            entry = reproducers.setdefault(_canonical(small), {
                "signature": list(wanted), "schema": small, "problem": list(problem), "shrunk_from": []})
            entry["shrunk_from"].append(failure["schema"])
    return {
        "seed": seed,
        "examples": examples,
        "fillings_per_schema": fillings,
        "config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(config).items()},
        "counts": {
            "generated": generated,
            "distinct": len(order),
            "compiled": counts["compiled"] + counts["unjudged"],
            "compiled_sound": sum(1 for o in outcomes if o.status == "compiled" and not o.problems),
            "refused": counts["refused"],
            "slow": counts["slow"],
            "crashed": len(crashed),
            "invalid": len(invalid),
            "unjudged": counts["unjudged"],
            "fillings_checked": sum(o.fillings for o in outcomes),
        },
        "statuses": dict(counts),  # (each distinct schema once: compiled, refused, slow, crash, unjudged)
        "per_draft": {k: dict(v) for k, v in sorted(drafts.items())},
        "refused_by_reason": reasons.most_common(),
        "unjudged": [{"schema": json.loads(k), "reason": seen[k].reason} for k in order
                     if seen[k].status == "unjudged"],
        "slow": [json.loads(k) for k in order if seen[k].status == "slow"],
        "compile_seconds_median": compile_times[len(compile_times) // 2] if compile_times else None,
        "compile_seconds_max": compile_times[-1] if compile_times else None,
        "wall_seconds": round(time.time() - started, 1),
        "failures": failures,
        "reproducers": sorted(reproducers.values(), key=lambda r: (r["signature"], _size(r["schema"]))),
    }


def write_report(report: dict, out_dir: str | Path, command: str) -> list[Path]:
    """json_fuzz.json (everything) and json_fuzz.md (counts, reasons, failing schemas) under `out_dir`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {**report, "command": command}
    (out_dir / "json_fuzz.json").write_text(json.dumps(report, indent=2))
    c = report["counts"]
    lines = [
        "# JSON Schema compiler soundness fuzz",
        "",
        f"Command: `{command}`  ",
        f"Seed {report['seed']}, {report['examples']} examples, {report['fillings_per_schema']} random fillings per "
        f"compiled schema, {report['wall_seconds']} s.",
        "",
        "| generated | distinct | compiled | of which sound | refused (SchemaError) | slow | crashed | invalid "
        "| unjudged | fillings checked |",
        "|---|---|---|---|---|---|---|---|---|---|",
        f"| {c['generated']} | {c['distinct']} | {c['compiled']} | {c['compiled_sound']} | {c['refused']} | {c['slow']} "
        f"| {c['crashed']} | {c['invalid']} | {c['unjudged']} | {c['fillings_checked']} |",
        "",
        "Per draft (`$schema`; none reads as 2020-12):",
        "",
        "| draft | " + " | ".join(("compiled", "unsound", "refused", "crash", "slow", "unjudged")) + " |",
        "|---|---|---|---|---|---|---|",
    ]
    for draft, n in report["per_draft"].items():
        lines.append(f"| {draft} | " + " | ".join(str(n.get(k, 0)) for k in (
            "compiled", "unsound", "refused", "crash", "slow", "unjudged")) + " |")
    lines += ["", "Refusals (SchemaError) by first reason:", ""]
    lines += [f"- {n} × {reason}" for reason, n in report["refused_by_reason"][:30]]
    if report["failures"]:
        lines += ["", f"Failing schemas ({len(report['failures'])}: crashes and invalid fillings):", ""]
        for failure in report["failures"]:
            lines.append(f"- `{json.dumps(failure['schema'], separators=(',', ':'))}`")
            for problem in failure["problems"][:3]:
                kind, *rest = problem
                detail = rest[0] if kind == "crash" else " — ".join(map(str, rest))
                lines.append(f"  - {kind}: `{_short(str(detail), 300)}`")
    if report.get("reproducers"):
        lines += ["", f"Minimal reproducers ({len(report['reproducers'])}, shrunk from the failing schemas):", ""]
        for r in report["reproducers"]:
            kind, *rest = r["problem"]
            detail = rest[0] if kind == "crash" else " — ".join(map(str, rest))
            lines.append(f"- {' / '.join(map(str, r['signature']))}: `{json.dumps(r['schema'], separators=(',', ':'))}`")
            lines.append(f"  - {kind}: `{_short(str(detail), 300)}`")
    (out_dir / "json_fuzz.md").write_text("\n".join(lines) + "\n")
    return [out_dir / "json_fuzz.json", out_dir / "json_fuzz.md"]


def main(argv: list[str] | None = None) -> int:
    import argparse
    import shlex
    import sys

    parser = argparse.ArgumentParser(description="Soundness fuzz of the JSON Schema compiler")
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fillings", type=int, default=6)
    parser.add_argument("--compile-seconds", type=float, default=5.0)
    parser.add_argument("--out", default="evals/reports/json-fuzz")
    parser.add_argument("--shrink", type=int, default=3, help="failing schemas shrunk per failure signature")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)

    def progress(i, schema, outcome):
        if not args.quiet and (i % 50 == 0 or (outcome.problems and outcome.status != "refused")):
            flag = f" {outcome.status}: {outcome.problems[0][0]}" if outcome.problems else ""
            print(f"[{i}/{args.examples}]{flag}", flush=True)

    report = run_fuzz(args.examples, args.seed, args.fillings, compile_seconds=args.compile_seconds,
                      progress=progress, shrink=args.shrink)
    command = "python -m diffreason.evals.json_fuzz " + shlex.join(sys.argv[1:] if argv is None else argv)
    paths = write_report(report, args.out, command)
    print(json.dumps(report["counts"]), *map(str, paths), sep="\n")
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
