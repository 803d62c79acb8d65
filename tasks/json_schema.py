"""JSON Schema (or a pydantic model) → a canvas template whose every committed filling is valid JSON that validates.

The scaffold — braces, keys, quotes, colons, commas of required properties — is fixed; every value is a fixed-length
*slot* (see `diffreason.constrain`): outlines-core turns the value's schema into a regex, the regex into a token
automaton, and the automaton gives per-position allowed sets plus a constrained commit. A structured value's regex
(objects, arrays, optional members, alternatives) keeps its parts (`diffreason.constrain.regex`) and its automaton is
composed from theirs: each leaf (a string, number, enum) is built once and shared across members and schemas.
Values end early with pad tokens, which decoding removes. Optional properties, enums, booleans, anyOf/oneOf branches
and array lengths are choices inside a slot's language, so the model makes them.

What outlines' regexes cannot express is added here: integer bounds (exact digit-range regexes), number bounds (a
sound subset), multipleOf (integers, or a choice among multiples that the validator's float division accepts), type
lists, formats. Anything else unsupported raises one `SchemaError` naming the keyword and its JSON path. Every result
is checked with `jsonschema`.

`not` is folded into what we write: a value fails a schema when it fails any one of its keywords, so each keyword of
the negated schema offers restrictions of the rest (other types, a flipped bound, a member left out, a member whose
value fails, and for strings and integers the complement of an enum / const / pattern, built into the slot's
automaton). oneOf: each branch writes only values that fail every other branch — it stays as is where the branches
provably exclude each other (distinct types, discriminators, required keys), else the others' `not` is folded in; a
branch left with no value is never written.

Covered: objects with required/optional properties, nested objects, arrays (items, min/maxItems,
uniqueItems over finite item sets), strings (enum, const, pattern, min/maxLength, date / date-time / time / uuid /
email / uri), integers and numbers with bounds, booleans, null, type lists, anyOf / oneOf, $ref/$defs (recursive ones
unfold to a depth limit).
"""

from __future__ import annotations

import contextlib
import copy
import decimal
import fractions
import functools
import itertools
import json
import math
import re
import warnings
from dataclasses import astuple, dataclass
from typing import Any, Callable

import torch

from diffreason import limits
from diffreason.canvas import CanvasTemplate
from diffreason.constrain.cache import BytesLRU
from diffreason.constrain.chardfa import AutomatonTooLarge, Complement, intersections_in
from diffreason.constrain.compiler import Compiler
from diffreason.constrain.dfa import paused_gc
from diffreason.constrain.regex import Choice, alt, group, lit, optional, repeat, seq
from diffreason.errors import DiffreasonError, SchemaError, TemplateError
from diffreason.tasks.json_drafts import to_2020_12, validator
from diffreason.tasks.json_load import load_schema
from diffreason.tasks.json_pattern import (
    STRING_CHAR, PatternEmpty, PatternError, PatternLengthError, lookaround_parts, pattern_to_json_regex,
    searched_json_regex,
)
from diffreason.tasks.json_pattern import parser as pattern_parser


# Python's re warns about a schema's pattern that a future version may read differently ("Possible set difference
# at position 5" for `[a-z--]`); it is the user's pattern, read today as validators read it, and the warning would be
# a second line beside a CLI's one-line error. Only warnings raised from this package's and jsonschema's own calls.
warnings.filterwarnings("ignore", message=r"Possible (nested set|set (difference|union|intersection|symmetric "
                        r"difference))", category=FutureWarning, module=r"(diffreason|jsonschema)(\.|$)")


class _NoValue(SchemaError):
    """A (sub)schema that accepts no value at all; an anyOf / oneOf branch like that is simply never chosen."""


class _TooComplex(SchemaError):
    """A value's regex grew past what any slot takes; a scaffold may still hold the value (see `template`)."""


class _DepthLimit(SchemaError):
    """A recursive $ref reached the depth limit; optional places drop the member, required ones fail."""


# Keywords that only annotate: they never change which instances validate.
ANNOTATIONS = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly",
    "writeOnly", "markdownDescription", "id", "$defs", "definitions", "contentMediaType", "contentEncoding",
}
# Keywords that constrain instances (JSON Schema 2020-12 and draft 4-7). Any other key is not a validation keyword —
# an annotation, a vendor extension or a typo — and, as validators do, the compiler ignores it.
VALIDATION_KEYWORDS = {
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength",
    "minLength", "pattern", "format", "items", "additionalItems", "prefixItems", "maxItems", "minItems",
    "uniqueItems", "contains", "maxContains", "minContains", "maxProperties", "minProperties", "required",
    "properties", "patternProperties", "additionalProperties", "dependencies", "dependentRequired",
    "dependentSchemas", "propertyNames", "if", "then", "else", "allOf", "anyOf", "oneOf", "not", "$ref",
    "unevaluatedItems", "unevaluatedProperties", "$dynamicRef", "$recursiveRef",
}
# Keywords that constrain only instances of some types; the rest (GENERIC) constrain every instance. A keyword that
# does not apply to the type being generated is ignored, as validators ignore it.
APPLIES = {
    "object": {"properties", "required", "additionalProperties", "patternProperties", "minProperties",
               "maxProperties", "dependencies", "dependentRequired", "dependentSchemas", "propertyNames",
               "unevaluatedProperties"},
    "array": {"items", "additionalItems", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains",
              "minContains", "maxContains", "unevaluatedItems"},
    "string": {"minLength", "maxLength", "pattern", "format"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
}
APPLIES["integer"] = APPLIES["number"]
APPLIES["boolean"] = APPLIES["null"] = set()
# Keywords of the compiler's own, never in a user's schema. EXCLUDED: regexes over a string's or integer's JSON text
# that the value must not match, added where a `not` is folded (enum, const, pattern); the slot holds their
# complements. PATTERNS: further patterns a string must match (allOf parts with different patterns). MULTIPLES: the
# multipleOf values of allOf parts whose least common multiple `multipleOf` holds; each is still checked as validators
# check it, in floating point. NOT_MULTIPLES: values a number must not be a multiple of (a folded `not`).
EXCLUDED = "$diffreason:excluded"
PATTERNS = "$diffreason:patterns"
MULTIPLES = "$diffreason:multiples"
NOT_MULTIPLES = "$diffreason:not-multiples"
VALIDATION_KEYWORDS.update({EXCLUDED, PATTERNS, MULTIPLES, NOT_MULTIPLES})
# REFS: the `$ref`s followed (resolve's `seen`) on the way to a schema merged from resolved parts (allOf parts, anyOf /
# oneOf branches beside siblings). Resolving it carries them on, so a recursive `$ref` inside such a part still
# counts toward the depth limit (without it, each merge started the count afresh: unbounded recursion). Not a
# validation keyword: validators and the keyword checks ignore it.
REFS = "$diffreason:refs"
APPLIES["string"].add(PATTERNS)
APPLIES["number"].update({MULTIPLES, NOT_MULTIPLES})  # (APPLIES["integer"] is the same set)
GENERIC = VALIDATION_KEYWORDS - set().union(*APPLIES.values())
# What an unconstrained value ({} or true) becomes: any scalar — every one of them validates.
ANY_VALUE = {"type": ["string", "number", "boolean", "null"]}
SUPPORTED = {
    "object": {"type", "properties", "required", "additionalProperties", "patternProperties", "minProperties",
               "maxProperties", "dependencies", "dependentRequired", "dependentSchemas", "propertyNames"},
    "array": {"type", "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
              "minContains"},
    "string": {"type", "enum", "const", "pattern", "minLength", "maxLength", "format", EXCLUDED, PATTERNS},
    "integer": {"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "enum", "const",
                EXCLUDED, MULTIPLES, NOT_MULTIPLES},
    "number": {"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "enum", "const",
               MULTIPLES, NOT_MULTIPLES},
    "boolean": {"type", "enum", "const"},
    "null": {"type", "enum", "const"},
}
# Ways to fail a bound: keyword → (the type it applies to, the bound that fails it, shift of the value; None: the
# same value, as the exclusive / inclusive counterpart).
NEGATED_BOUNDS = {
    "minimum": ("number", "exclusiveMaximum", None), "exclusiveMinimum": ("number", "maximum", None),
    "maximum": ("number", "exclusiveMinimum", None), "exclusiveMaximum": ("number", "minimum", None),
    "minLength": ("string", "maxLength", -1), "maxLength": ("string", "minLength", 1),
    "minItems": ("array", "maxItems", -1), "maxItems": ("array", "minItems", 1),
}
# The order in which a `not`'s keywords are tried: the ways that keep most of the values first.
NEGATION_ORDER = ["type", "enum", "const", "required", *NEGATED_BOUNDS, "pattern", "anyOf", "oneOf", "items",
                  "properties"]
# Keywords whose ways to fail are only some of the ways (every item failing, every oneOf branch failing): when none leaves a value, values may still exist, so the `not` is unsupported rather than unsatisfiable.
SUBSET_NEGATIONS = {"items", "oneOf"}
FINITE_TYPES = {"boolean": [True, False], "null": [None]}
_EMPTY = object()  # a way to fail a `not` that leaves no value

# Calendar dates (what a format checker's date.fromisoformat accepts): 31-, 30-day months and February to the 28th.
_DATE = (r"[1-9][0-9]{3}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
         r"|02-(0[1-9]|1[0-9]|2[0-8]))")
FORMATS = {
    "date": f'"{_DATE}"',
    "time": r'"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,3})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"',  # RFC 3339
    "date-time": f'"{_DATE}T' + r'([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,3})?'
                 r'(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"',
    "uuid": r'"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"',
    # (no two dots in a row, nor a dot at either end of the local part: RFC 5322's dot-atom, which jsonschema's
    # checker does not check but other validators do)
    "email": r'"[a-z0-9]{1,12}([._+-][a-z0-9]{1,8}){0,2}@[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z]{2,6}){1,2}"',
    "uri": r'"https?://[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z0-9-]{1,20}){0,3}(/[a-zA-Z0-9._~-]{1,16}){0,4}"',
}
FORMATS["hostname"] = r'"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?){0,3}"'
FORMATS["ipv4"] = r'"((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"'
for _name in ("uri-reference", "iri", "iri-reference"):  # an absolute http(s) URI is each of these
    FORMATS[_name] = FORMATS["uri"]
FORMATS["idn-email"] = FORMATS["email"]  # ASCII addresses and names are internationalised ones too
# (labels joined by single hyphens: IDNA refuses '--' in a label's third and fourth characters)
FORMATS["idn-hostname"] = r'"[a-z0-9]{1,12}(-[a-z0-9]{1,8})?(\.[a-z0-9]{1,12}(-[a-z0-9]{1,8})?){0,3}"'
FORMATS["ipv6"] = r'"[0-9a-f]{1,4}(:[0-9a-f]{1,4}){7}"'  # the full form: eight groups
FORMATS["duration"] = r'"P([1-9][0-9]{0,2}[YMWD]|T[1-9][0-9]{0,2}[HMS]|[1-9][0-9]{0,2}DT[1-9][0-9]{0,2}[HMS])"'
FORMATS["regex"] = r'"[a-zA-Z0-9 _-]{0,22}"'  # literal characters only: each such string compiles as a regex
FORMATS["json-pointer"] = r'"(/([a-zA-Z0-9_-]|~[01]){0,10}){0,4}"'
# (jsonschema's checker refuses a digit after a 0 anywhere in the number: "105/a" fails, so none is written)
FORMATS["relative-json-pointer"] = r'"(0|[1-9]([1-9][0-9]?)?)(#|(/([a-zA-Z0-9_-]|~[01]){0,10}){0,4})"'
FORMATS["uri-template"] = r'"https?://[a-z0-9]{1,12}(\.[a-z0-9]{1,12}){0,2}(/([a-z0-9]{1,10}|\{[a-z]{1,10}\})){0,3}"'
# The formats JSON Schema defines. Others (vendor formats: "path", "topic", ...) only annotate: no validator checks
# them, so neither do we.
SPEC_FORMATS = {
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4", "ipv6", "uri",
    "uri-reference", "iri", "iri-reference", "uuid", "uri-template", "json-pointer", "relative-json-pointer", "regex",
}
FORMAT_CHARS = {"date": 12, "time": 22, "date-time": 32, "uuid": 38, "email": 52, "uri": 80, "hostname": 92, "ipv4": 17,
                "uri-reference": 80, "iri": 80, "iri-reference": 80, "idn-email": 52, "idn-hostname": 92,
                "ipv6": 41, "duration": 16, "regex": 24, "json-pointer": 62, "relative-json-pointer": 66,
                "uri-template": 92}
# Generated strings use printable ASCII (STRING_CHAR, a sound subset of JSON strings: lengths count exactly, no
# partial UTF-8).


@dataclass
class Budget:
    """Slot lengths in tokens for values whose length the schema leaves open."""

    string: int = 24
    number: int = 12
    array_items: int = 4
    max_slot: int = 96
    max_regex: int = 800  # larger regexes make the automaton construction slow (superlinear in the regex)
    max_length: int = 4096  # the longest template: minItems / minProperties / minLength that need more are refused


# An enum's regex may be this many times Budget.max_regex: its automaton is the values' trie (automaton._trie_fsm),
# built in one pass, so a 400-value enum of time zones (15k characters) compiles in milliseconds.
CHOICE_FACTOR = 40

# ---- regexes for leaf values ----------------------------------------------------------------------------------------


def _digits_range(lo: str, hi: str) -> str:
    """Regex for equal-length digit strings lo..hi (leading zeros allowed)."""
    if lo == hi:
        return lo
    if not lo:
        return ""
    i = next(k for k in range(len(lo)) if lo[k] != hi[k])
    prefix, rest = lo[:i], len(lo) - i - 1
    a, b = int(lo[i]), int(hi[i])
    parts = []
    if rest == 0:
        return prefix + (f"[{a}-{b}]" if b > a else str(a))
    low_full, high_full = lo[i + 1 :] == "0" * rest, hi[i + 1 :] == "9" * rest
    start = a if low_full else a + 1
    end = b if high_full else b - 1
    if not low_full:
        parts.append(prefix + str(a) + f"({_digits_range(lo[i + 1:], '9' * rest)})")
    if start <= end:
        parts.append(prefix + (f"[{start}-{end}]" if end > start else str(start)) + f"[0-9]{{{rest}}}")
    if not high_full:
        parts.append(prefix + str(b) + f"({_digits_range('0' * rest, hi[i + 1:])})")
    return "|".join(parts)


def _natural_range(lo: int, hi: int) -> str:
    """Regex for the decimal integers lo..hi, 0 <= lo <= hi, no leading zeros. Whole runs of digit counts are one
    part, `[1-9][0-9]{a,b}`: an open bound (10^12) was twelve alternatives, each its own branch of the automaton."""
    parts = []
    if lo == 0:
        parts.append("0")
        lo = 1
    while lo <= hi:
        n = len(str(lo))
        if lo == 10 ** (n - 1) and hi >= 10**n - 1:  # every integer of n, n + 1, ..., m digits
            m = n
            while hi >= 10 ** (m + 1) - 1:
                m += 1
            parts.append("[1-9]" + ("" if m == 1 else f"[0-9]{{{n - 1},{m - 1}}}" if m > n else f"[0-9]{{{n - 1}}}"))
            lo = 10**m
            continue
        top = min(hi, 10**n - 1)
        parts.append(_digits_range(str(lo), str(top)))
        lo = top + 1
    return "|".join(f"({p})" for p in parts)


def integer_regex(lo: int | None, hi: int | None) -> str:
    """Decimal integers in [lo, hi] (None: unbounded on that side)."""
    if lo is None and hi is None:
        return r"-?(0|[1-9][0-9]*)"
    lo_ = lo if lo is not None else -(10**12)
    hi_ = hi if hi is not None else 10**12
    if lo_ > hi_:
        raise ValueError(f"empty integer range [{lo}, {hi}]")
    parts = []
    if lo_ < 0:
        parts.append(f"-({_natural_range(max(1, -min(hi_, -1)), -lo_)})")
    if hi_ >= 0:
        parts.append(_natural_range(max(0, lo_), hi_))
    return "|".join(f"({p})" for p in parts)


def _positive_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf


def _lcm(a: int | float, b: int | float) -> int | float:
    """The least common multiple of two positive numbers as their decimal texts read: for p1/q1 and p2/q2 in lowest
    terms, lcm(p1, p2) / gcd(q1, q2)."""
    x, y = (fractions.Fraction(decimal.Decimal(repr(v))) for v in (a, b))
    m = fractions.Fraction(math.lcm(x.numerator, y.numerator), math.gcd(x.denominator, y.denominator))
    return m.numerator if m.denominator == 1 else float(decimal.Decimal(m.numerator) / m.denominator)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object", type(None): "null"}[type(value)]


def _finite_values(schema: dict) -> list | None:
    if "const" in schema:
        return [schema["const"]]
    if "enum" in schema and isinstance(schema["enum"], list):
        return list(schema["enum"])
    if schema.get("type") == "boolean":
        return [True, False]
    if schema.get("type") == "null":
        return [None]
    return None


def _draft4_bounds(schema: dict) -> dict:
    """Draft 4's boolean exclusiveMinimum / exclusiveMaximum (flags on minimum / maximum) as the numbers of draft 6+.
    (Later drafts refuse booleans there: compile_schema has checked the schema against its draft's metaschema.)"""
    if not any(isinstance(schema.get(k), bool) for k in ("exclusiveMinimum", "exclusiveMaximum")):
        return schema
    out = dict(schema)
    for flag, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(out.get(flag), bool) and out.pop(flag) and bound in out:
            out[flag] = out.pop(bound)
    return out


def _empty_bounds(schema: dict) -> bool:
    """Do the schema's own bounds leave no value of its type (min above max)? Draft 4's boolean exclusives aside."""
    for lo, hi in (("minLength", "maxLength"), ("minItems", "maxItems")):
        if lo in schema and hi in schema and schema[lo] > schema[hi]:
            return True
    bounds = [(schema[k], k) for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
              if isinstance(schema.get(k), (int, float)) and not isinstance(schema.get(k), bool)]
    lows = [(v, k.startswith("exclusive")) for v, k in bounds if "inimum" in k]
    highs = [(v, k.startswith("exclusive")) for v, k in bounds if "aximum" in k]
    if lows and highs:
        (low, x_low), (high, x_high) = max(lows), min(highs, key=lambda b: (b[0], not b[1]))
        if low > high or (low == high and (x_low or x_high)):
            return True
        if schema.get("type") == "integer":
            first = math.floor(low) + 1 if x_low else math.ceil(low)
            last = math.ceil(high) - 1 if x_high else math.floor(high)
            return first > last
    return False


def _longer(seen: tuple, chain) -> tuple:
    """Of two `$ref` chains, the longer: a schema resolved again deeper in the same walk keeps the deeper count."""
    return tuple(chain) if len(chain) > len(seen) else seen


def _with_refs(schema: dict, chain: tuple, seen: tuple) -> dict:
    """`schema` (resolved under `chain`) marked with that chain where resolving it followed `$ref`s beyond `seen`."""
    return {**schema, REFS: chain} if len(chain) > len(seen) else schema


def _canonical(value: Any) -> str:
    """A text equal for two JSON values exactly when JSON Schema calls them equal (uniqueItems, enum, const): 1 and
    1.0 alike, true and 1 not, members in any order."""
    def norm(v):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        if isinstance(v, list):
            return [norm(x) for x in v]
        return v

    return json.dumps(norm(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _json_text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _json_literal(value: Any) -> str:
    return re.escape(_json_text(value))


class _Compiler:
    def __init__(self, root: dict, tokenizer, budget: Budget, max_depth: int = 3, ref_names: dict | None = None):
        self.root = root  # (2020-12: json_drafts.to_2020_12's document)
        self.ref_names = ref_names or {}  # references as the translation rewrote them → as the user wrote them
        self.max_depth = max_depth
        self.tokenizer = tokenizer
        self.constraints = Compiler.for_tokenizer(tokenizer)  # regexes → token automata and slots, cached
        self.budget = budget
        self.vocab = len(tokenizer)
        self._validator = None
        self.fixed: list[str] = []  # choices the template makes for the model (see `template`)
        self.forced = 0  # how many members / items written for the model enclose the current value
        self.intersections: dict[tuple[str, ...], str] = {}  # regexes that must all hold → their placeholder
        self._regexes: dict = {}  # value_regex's memo

    def intersect(self, *regexes: str) -> str:
        """A stand-in for the strings all `regexes` match (regex syntax has no intersection): a placeholder character
        from Unicode's private use plane 15, which value regexes never contain (they write non-ASCII as escapes);
        `slot` hands the automaton what each placeholder stands for (see automaton.Intersections)."""
        if regexes not in self.intersections:
            self.intersections[regexes] = chr(0xF0000 + len(self.intersections))
        return self.intersections[regexes]

    def placeholders_in(self, regex: str) -> tuple:
        """The intersections `regex` holds placeholders of, as the automaton takes them (automaton.Intersections) —
        with those their parts hold in turn (an intersection of a name regex that is itself one)."""
        return intersections_in(regex, tuple((mark, parts) for parts, mark in self.intersections.items()))

    def regex_size(self, regex: str) -> int:
        """The length of `regex` with each placeholder counted as the regexes it stands for."""
        return len(regex) + sum(regex.count(mark) * (sum(map(len, parts)) - 1)
                                for parts, mark in self.intersections.items())

    # -- helpers ----------------------------------------------------------------------------------------------------

    def fix(self, choice: str) -> None:
        """Record a choice the template makes for the model (once, however often the part is compiled)."""
        if choice not in self.fixed:
            self.fixed.append(choice)

    def valid(self, value: Any, node: dict) -> bool:
        """Does `value` validate against `node` (a part of the root schema; its $refs resolve against the root)?"""
        return self.checker(node)(value)

    def checker(self, node: dict) -> Callable[[Any], bool]:
        """`valid(·, node)` as a function of the value, with its validators made once: a choice among many candidate
        values (`multiples_regex` tries 595) checked them one jsonschema `evolve` each."""
        if self._validator is None:
            self._validator = validator(self.root)
        own = node if isinstance(node, dict) else {}  # the compiler's own keywords: jsonschema does not know them
        excluded, patterns = own.get(EXCLUDED, []), own.get(PATTERNS, [])
        multiples, not_multiples = ([self._validator.evolve(schema={"multipleOf": d}) for d in own.get(key, [])]
                                    for key in (MULTIPLES, NOT_MULTIPLES))  # (as validators divide)
        try:
            whole = self._validator.evolve(schema=node)
        except Exception:  # a node jsonschema cannot take: no value of it we can vouch for
            whole = None

        def check(value: Any) -> bool:
            limits.check()  # (a long enum is checked value by value)
            if whole is None:
                return False
            if excluded and any(re.fullmatch(x, json.dumps(value, ensure_ascii=False)) for x in excluded):
                return False
            if isinstance(value, str) and not all(re.search(p, value) for p in patterns):
                return False
            if _json_type(value) in ("integer", "number") and (not all(v.is_valid(value) for v in multiples)
                                                                or any(v.is_valid(value) for v in not_multiples)):
                return False
            try:
                return whole.is_valid(value)
            except Exception:  # an unresolvable reference or a malformed keyword: not a value we can vouch for
                return False

        return check

    def valid_member(self, value: Any, node: dict, key: str) -> bool:
        """`valid(value, node)` for a value of the node's own `key` ('enum' or 'const'), which it satisfies: when
        nothing but a type stands beside it, only the type is checked (a long enum was quadratic through jsonschema)."""
        limits.check()
        others = node.keys() - ANNOTATIONS - {key}
        if not others <= {"type"}:  # checked without its own key: jsonschema compares a value with every other one
            return self.valid(value, {k: v for k, v in node.items() if k != key})
        kinds = node.get("type", [])
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if not all(isinstance(k, str) and k in SUPPORTED for k in kinds):
            return self.valid(value, node)  # (jsonschema says what is wrong with the type)
        if self._validator is None:
            self._validator = validator(self.root)
        return not others or any(self._validator.is_type(value, k) for k in kinds)

    def fail(self, path: str, message: str):
        raise SchemaError(f"{message} at {path or '#'}")

    def resolve(self, schema: Any, path: str, seen: tuple = (), fold_not: bool = True,
                exact: bool = False) -> tuple[dict, str, tuple]:
        """(schema, its path, the `$ref`s followed): references followed, if / then / else and allOf written out,
        a `not` folded in (`fold_not`). `exact`: the result accepts exactly what `schema` accepts — what a schema
        that is negated or tested against must be —, where otherwise it may accept less (a case of if / then / else
        this compiler cannot write is left out, a schema that accepts anything becomes the scalars we write for it);
        an error where that cannot be kept."""
        limits.check()
        if schema is False:
            raise _NoValue(f"the schema false accepts no value at {path or '#'}")
        if schema is True or (isinstance(schema, dict) and not (schema.keys() & VALIDATION_KEYWORDS)):
            return ({} if exact else dict(ANY_VALUE)), path, seen
        if not isinstance(schema, dict):
            self.fail(path, f"a schema must be an object, got {type(schema).__name__}")
        seen = _longer(seen, schema.get(REFS, ()))
        while "$ref" in schema:
            ref = schema["$ref"]
            if not isinstance(ref, str) or not ref.startswith("#"):
                self.fail(path, f"unsupported keyword '$ref' (only local references, got {ref!r})")
            if seen.count(ref) >= self.max_depth:
                raise _DepthLimit(
                    f"recursive reference {self.ref_names.get(ref, ref)} is required at every depth (depth limit "
                    f"{self.max_depth}) at {path}"
                )
            seen = seen + (ref,)
            node: Any = self.root
            for part in [p for p in ref[1:].split("/") if p]:
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(node, dict) or part not in node:
                    self.fail(path, f"unresolvable '$ref' {self.ref_names.get(ref, ref)}")
                node = node[part]
            extra = {k: v for k, v in schema.items() if k not in ("$ref", REFS) and k not in ANNOTATIONS}
            if extra:  # keywords beside a $ref constrain too: both must hold
                node = {"allOf": [node, extra]}
            schema, path = node, self.ref_names.get(ref, ref)
            if not isinstance(schema, dict):  # (true, false, or what the metaschema check will refuse)
                return self.resolve(schema, path, seen, fold_not, exact)
        if schema.keys() & {"if", "then", "else"}:
            schema = self.without_if(schema, path, seen, exact)
        if "allOf" in schema:
            schema = self.merge_all_of(schema, path, seen, exact)
            seen = _longer(seen, schema.get(REFS, ()))
            if schema.keys() & {"$ref", "allOf"}:
                return self.resolve(schema, path, seen, fold_not, exact)
        brought = self.brought_schemas(schema)
        if brought:  # a required member's dependentSchemas always hold
            return self.resolve({"allOf": brought}, path, seen, fold_not, exact)
        if isinstance(schema.get("anyOf"), list) and isinstance(schema.get("oneOf"), list) and schema["oneOf"]:
            # (A1 or A2) and oneOf(B) = (A1 and oneOf(B)) or (A2 and oneOf(B))
            rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
            schema = {**rest, "anyOf": [{"allOf": [branch, {"oneOf": schema["oneOf"]}]} for branch in schema["anyOf"]]}
        # An allOf part keeps its `not` until the parts are merged; beside anyOf / oneOf, the `not` goes into each
        # branch with the other siblings (folded there, it may drop a member one branch needs and another does not).
        if "not" in schema and fold_not and "anyOf" not in schema and "oneOf" not in schema:
            schema = self.without_not(schema, path, seen)
        return schema, path, seen

    @staticmethod
    def brought_schemas(schema: dict) -> list:
        """[the schema without them, the dependentSchemas of its required members] — a required member is always
        there, so what it brings always holds (empty when there are none)."""
        deps, required = schema.get("dependentSchemas"), schema.get("required")
        if not isinstance(deps, dict) or not isinstance(required, list):
            return []
        names = [n for n in dict.fromkeys(required) if isinstance(n, str) and n in deps and deps[n] not in (True, {})]
        if not names:
            return []
        rest = {**schema, "dependentSchemas": {k: v for k, v in deps.items() if k not in names}}
        return [rest, *(deps[n] for n in names)]

    def resolve_marked(self, schema: Any, path: str, seen: tuple, fold_not: bool = True, exact: bool = False) -> dict:
        """`resolve`'s schema, carrying the `$ref`s it followed (REFS) for a caller that goes on with its own `seen`."""
        resolved, _, chain = self.resolve(schema, path, seen, fold_not, exact)
        return _with_refs(resolved, chain, seen)

    # -- if / then / else: a choice between (if and then) and (not if and else) ----------------------------------------

    def without_if(self, schema: dict, path: str, seen: tuple, exact: bool = False) -> dict:
        """The schema with if / then / else written as what it means: anyOf [allOf [if, then], allOf [not if, else]]
        (then / else default to true; without `if` they mean nothing, as validators read them). Unless `exact`, a
        case that accepts nothing beside the rest of the schema is left out; so is one this compiler cannot write (a
        `not` of the condition it cannot fold) — then only the other case is written, a choice listed in `fixed`."""
        rest = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
        if "if" not in schema:
            return rest
        cond = schema["if"]
        cases = {"then": {"allOf": [cond, schema.get("then", True)]},
                 "else": {"allOf": [{"not": cond}, schema.get("else", True)]}}
        if exact:
            either = {"anyOf": list(cases.values())}
            return {"allOf": [rest, either]} if rest.keys() & {"anyOf", "oneOf"} else {**rest, **either}
        kept, problem = {}, None
        for name, case in cases.items():
            try:  # (what resolving the case beside the rest raises, written later, it raises now)
                self.resolve({"allOf": [rest, case]} if rest else case, path, seen)
            except _NoValue as exc:
                problem = problem or exc
                continue
            except SchemaError as exc:
                if isinstance(exc, (_DepthLimit, _TooComplex)):
                    raise
                problem = exc
                self.fix(f"{path or '#'}: if / then / else: never the {name!r} case ({str(exc).split(' at ')[0]})")
                continue
            kept[name] = case
        if not kept:
            raise problem
        if len(kept) == 1:
            (case,) = kept.values()
            return {"allOf": [rest, case]} if rest else case
        either = {"anyOf": list(kept.values())}
        return {"allOf": [rest, either]} if rest.keys() & {"anyOf", "oneOf"} else {**rest, **either}

    # -- not: folded into the schema as a restriction of what we write, where one exists ----------------------------

    def without_not(self, schema: dict, path: str, seen: tuple, skip: int = 0) -> dict:
        """The schema without its `not`, restricted so that every value we write fails the negated schema.

        A value fails a schema when it fails any one of its keywords, so each keyword of the negated schema offers
        ways to fail it (see `negations`), each a restriction of the rest of the schema; the first that leaves values
        wins (`skip`: the first `skip` such ways are passed over — a search for one that suits what comes next).
        A finite set (enum / const beside the `not`) keeps its `not`: its values are checked against it.
        """
        neg, rest = schema["not"], {k: v for k, v in schema.items() if k != "not"}
        if "enum" in rest or "const" in rest:  # a finite set: its values are checked against the whole schema
            values = [rest["const"]] if "const" in rest else rest["enum"]
            if isinstance(values, list) and not any(self.valid(v, schema) for v in values):
                raise _NoValue(f"no 'enum' / 'const' value fails the 'not' at {path}/not")
            return schema
        if neg is False:
            return rest
        if neg is True or (isinstance(neg, dict) and not (neg.keys() & VALIDATION_KEYWORDS)):
            raise _NoValue(f"'not' of a schema that accepts every value at {path}/not")
        try:  # (exactly what it accepts: what the negated schema leaves out, we may write)
            neg, _, _ = self.resolve(neg, f"{path}/not", seen, fold_not=False, exact=True)
        except _NoValue:  # it accepts nothing: every value fails it
            return rest
        keys = neg.keys() & VALIDATION_KEYWORDS
        if keys == {"not"}:  # not (not X) = X
            return self.resolve_marked({"allOf": [rest, neg["not"]]} if rest else neg["not"], path, seen)
        unsupported = set()
        for key in sorted(keys, key=lambda k: (NEGATION_ORDER.index(k) if k in NEGATION_ORDER else 99, k)):
            ways = self.negations(rest, neg, key, f"{path}/not", seen)
            if ways is None:
                unsupported.add(key)
                continue
            options, exact = ways
            for option in options:
                if option is _EMPTY:
                    continue
                try:
                    resolved = self.resolve_marked(option, path, seen)
                except _NoValue:
                    continue
                except SchemaError:
                    unsupported.add(key)
                    continue
                if not skip:
                    return resolved
                skip -= 1
            if not exact:  # the ways tried are only some of the ways: none left proves nothing
                unsupported.add(key)
        if unsupported:
            self.fail(f"{path}/not", f"unsupported keyword 'not' (of {', '.join(sorted(unsupported))})")
        raise _NoValue(f"no value satisfies the schema and fails its 'not' at {path}/not")

    def negations(self, rest: dict, neg: dict, key: str, path: str, seen: tuple):
        """(restrictions of `rest` whose every value fails keyword `key` of `neg` (so fails `neg`), most general
        first; whether together they are every way to fail it), or None when this compiler has none for `key`. A keyword that applies to one type (pattern, minimum,
        items, ...) is failed only by values of that type: values of other types pass it. (`format` too: a format
        checker passes non-strings, and our format regexes are subsets, so they have no exact complement.)"""
        types = self.types_of(rest)
        value = neg[key]

        def other_types(excluded: set[str]) -> dict | None:
            if "number" in excluded:
                excluded = excluded | {"integer"}
            kept = [t for t in types if t not in excluded]
            if "integer" in excluded and "number" in kept:  # non-integral numbers only: we write none
                kept.remove("number")
            return {**rest, "type": kept if len(kept) > 1 else kept[0]} if kept else None

        def within(kind: str, extra: dict) -> dict | None:
            kinds = [t for t in types if t == kind or (kind == "number" and t == "integer")]
            if not kinds:
                return None
            try:
                out = self.merge_two({**rest, "type": kinds if len(kinds) > 1 else kinds[0]}, extra, path)
            except SchemaError:  # no value, or keywords this compiler cannot merge
                return None
            return None if _empty_bounds(out) else out

        def failing_member(name: str, sub: Any, where: str) -> dict | None:
            """`rest` with member `name` required and its value failing `sub`. A name `rest` neither declares nor
            matches by a pattern also meets its additionalProperties. The member's own `not` is folded now, so one
            that leaves no value raises _NoValue and rules this way out."""
            covered = name in rest.get("properties", {}) or any(
                re.search(p, name) for p in rest.get("patternProperties", {}))
            extra = rest.get("additionalProperties", True)
            member = {"not": sub} if covered or extra is True else {"allOf": [extra, {"not": sub}]}
            option = within("object", {"required": [name], "properties": {name: member}})
            if option is not None:
                self.resolve(option["properties"][name], where, seen)
            return option

        options: list[dict | None] = []
        exact = key not in SUBSET_NEGATIONS
        if key == "type":
            banned = set(value if isinstance(value, list) else [value])
            only_fractions = "integer" in banned and "number" not in banned and "number" in types
            if only_fractions and set(types) - banned <= {"number"}:
                return None  # only non-integral numbers would be left: we write none
            options = [other_types(banned)]
        elif key in ("enum", "const"):
            values = [value] if key == "const" else value
            if not isinstance(values, list):
                return None
            options.append(other_types({_json_type(v) for v in values}))
            # strings and integers: the other values' JSON texts, as complements (numbers narrowed to integers)
            narrowed = list(dict.fromkeys("integer" if t == "number" else t for t in types))
            if set(narrowed) <= {"string", "integer"}:
                texts = [json.dumps(v, ensure_ascii=False) for v in values if isinstance(v, str) and "string" in types]
                texts += [str(int(v)) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
                          and float(v).is_integer() and "integer" in narrowed]
                base = {**rest, "type": narrowed if len(narrowed) > 1 else narrowed[0]}
                options.append({**base, EXCLUDED: [*rest.get(EXCLUDED, []), "|".join(map(re.escape, texts))]}
                               if texts else base)
                exact = narrowed == types
            elif set(types) <= FINITE_TYPES.keys():  # true, false, null: the values left
                left = [v for t in types for v in FINITE_TYPES[t]
                        if not any(v == w and _json_type(v) == _json_type(w) for w in values)]
                options.append({**rest, "enum": left} if left else None)
            else:  # numbers, arrays, objects of the enum's types: no complement written
                exact = False
        elif key == "not":  # failing `not X` is validating X
            options.append({"allOf": [rest, value]} if rest else value)
        elif key == "multipleOf":  # a number that is not a multiple (checked as validators check)
            if not _positive_number(value):
                return None
            option = within("number", {NOT_MULTIPLES: [value]})
            if option is not None and _positive_number(option.get("multipleOf")) and _lcm(
                    option["multipleOf"], value) == option["multipleOf"]:
                option = None  # every multiple of the schema's multipleOf is a multiple of `value` too
            options.append(option)
        elif key == "pattern":
            try:
                options.append(within("string", {EXCLUDED: [searched_json_regex(value)]}))
            except PatternError:
                return None
        elif key in NEGATED_BOUNDS:
            kind, flipped, shift = NEGATED_BOUNDS[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return None  # draft 4's boolean exclusiveMinimum / exclusiveMaximum
            if shift is None or value + shift >= 0:
                options.append(within(kind, {flipped: value if shift is None else value + shift}))
        elif key == "required":
            if not isinstance(value, list):
                return None
            if not value:
                return [_EMPTY], True
            # one of the names left out: `properties: {name: false}`, so no later merge can bring it back
            for name in value:
                if name not in rest.get("required", []):
                    options.append(within("object", {"properties": {name: False}}))
        elif key == "properties":  # one option per member: together every way to fail, unless one is skipped
            if not isinstance(value, dict):
                return None
            for name, sub in value.items():
                if sub is True or (isinstance(sub, dict) and not (sub.keys() & VALIDATION_KEYWORDS)):
                    continue  # every value of this member passes
                declared = rest.get("properties", {})
                extra = rest.get("additionalProperties", True)
                if name not in declared and (extra is False or rest.get("patternProperties")):
                    exact = exact and not rest.get("patternProperties")  # (a pattern may allow the name)
                    continue
                try:
                    options.append(failing_member(name, sub, f"{path}/properties/{name}"))
                except _NoValue:
                    continue
                except SchemaError:
                    exact = False
        elif key == "propertyNames":  # a member whose name fails it: a few such names, each required in turn
            exact = False
            try:
                failing = self.without_not({"type": "string", "not": value}, f"{path}/propertyNames", seen)
                regex, _ = self.value_regex(failing, f"{path}/propertyNames", seen)
            except SchemaError:
                return None
            for name in self.names_in(regex, rest, lambda name: not self.valid(name, value)):
                options.append(within("object", {"required": [name]}))
        elif key == "patternProperties":  # a member whose name a pattern finds and whose value fails that schema
            if not isinstance(value, dict):
                return None
            exact = False
            for pattern, sub in value.items():
                if sub is True or (isinstance(sub, dict) and not (sub.keys() & VALIDATION_KEYWORDS)):
                    continue  # every value passes
                try:
                    regex = self.searched_pattern(pattern)
                except PatternError:
                    continue
                for name in self.names_in(regex, rest, lambda name: bool(re.search(pattern, name))):
                    with contextlib.suppress(SchemaError):
                        options.append(failing_member(name, sub, f"{path}/patternProperties/{pattern}"))
        elif key == "items" and isinstance(value, (dict, bool)):  # an array whose items all fail (one would do)
            # (`items` beside the negated schema's prefixItems covers the elements after them only)
            prefix = len(neg["prefixItems"]) if isinstance(neg.get("prefixItems"), list) else 0
            fail = {"minItems": max(prefix + 1, rest.get("minItems", 1)), "items": {"not": value}}
            option = within("array", {**fail, "prefixItems": [True] * prefix} if prefix else fail)
            try:  # the items' own `not` folded now: one that leaves no value rules this way out
                if option is not None and not isinstance(option.get("items"), list):
                    self.resolve(option["items"], f"{path}/items", seen)
            except SchemaError:
                option = None
            options.append(option)
        elif key == "contains":  # no item matches (exactly failing it when one match is needed)
            need = neg.get("minContains", 1)
            if not isinstance(need, int) or isinstance(need, bool):
                return None
            if need == 0:
                return [], True  # every array passes it
            options.append(within("array", {"items": {"not": value}}))
            exact = need == 1 and "maxContains" not in neg
        elif key in ("minContains", "maxContains"):  # (nothing without contains; with it, see "contains")
            return [], "contains" not in neg or key == "minContains"
        elif key in ("anyOf", "oneOf"):  # not (A or B) = not A and not B; failing every oneOf branch fails oneOf
            if not isinstance(value, list):
                return None
            out, complete = self.fail_every(rest, value, path, seen)
            options.append(out)
            exact = complete
        else:
            return None
        return [o if o is not None else _EMPTY for o in options], exact

    def fail_every(self, rest: dict, branches: list, path: str, seen: tuple,
                   tries: int = 32) -> tuple[dict | None, bool]:
        """(`rest` restricted so that every value fails each of `branches`, or None; whether a None is a proof) —
        each branch's `not` folded in turn, and where the way chosen to fail one branch leaves no value for the next,
        the next way to fail it (a search over at most `tries` folds: `not (if A then B)` fails A's case by failing
        B, which other types would not)."""
        budget = [tries]
        proof = [True]

        def search(out: dict, i: int) -> dict | None:
            if i == len(branches):
                return out
            both = {"anyOf": [out["not"], branches[i]]} if "not" in out else branches[i]
            base = {k: v for k, v in out.items() if k != "not"}
            for skip in itertools.count():
                if budget[0] <= 0:
                    proof[0] = False
                    return None
                budget[0] -= 1
                try:
                    option = self.without_not({**base, "not": both}, path, seen, skip)
                except _NoValue:
                    return None  # no (further) way to fail branch i beside what is chosen
                except SchemaError:
                    proof[0] = False  # a way this compiler cannot write: a value may still exist
                    return None
                found = search(option, i + 1)
                if found is not None:
                    return found
            return None

        return search(rest, 0), proof[0]

    def types_of(self, schema: dict) -> list[str]:
        """The JSON types `schema`'s own type keyword allows (all of them when it has none). (The scalars resolve
        writes for a schema that accepts everything are read as what they say: a user's type list can be the same.)"""
        every = ["object", "array", "string", "number", "boolean", "null"]
        kind = schema.get("type", every)
        return list(kind) if isinstance(kind, list) else [kind]

    # -- allOf: every part must hold, so the parts merge into one schema ---------------------------------------------

    def merge_all_of(self, schema: dict, path: str, seen: tuple, exact: bool = False) -> dict:
        parts = schema["allOf"]
        if not isinstance(parts, list) or not parts:
            self.fail(f"{path}/allOf", "'allOf' must be a non-empty list")
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for i, part in enumerate(parts):
            if part is True or (isinstance(part, dict) and not (part.keys() & VALIDATION_KEYWORDS)):
                continue  # true, {} or annotations only: constrains nothing
            resolved = self.resolve_marked(part, f"{path}/allOf/{i}", seen, fold_not=False, exact=exact)
            merged = self.merge_two(merged, resolved, f"{path}/allOf/{i}", exact)
        return merged

    def merge_two(self, a: dict, b: dict, path: str, exact: bool = False) -> dict:
        """One schema accepting what both accept, for the keywords this compiler knows; otherwise an error. Exactly
        what both accept, except where additionalProperties meets patternProperties (see apply_additional): there
        `exact` makes it an error."""
        out = dict(a)
        lower = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
        upper = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
        arrays = self.merge_arrays(a, b)
        for key, value in b.items():
            if arrays is not None and key in ("prefixItems", "items"):
                continue  # (merged element by element below)
            if key == REFS:
                out[key] = _longer(out.get(key, ()), value)
                continue
            if key not in out or out[key] == value or key in ANNOTATIONS or key not in VALIDATION_KEYWORDS:
                out.setdefault(key, value)
                continue
            mine = out[key]
            if key == "type":
                types_a = set(mine if isinstance(mine, list) else [mine])
                types_b = set(value if isinstance(value, list) else [value])
                widen = lambda ts: ts | ({"integer"} if "number" in ts else set())  # noqa: E731
                both = widen(types_a) & widen(types_b)
                if "number" in both:
                    both.discard("integer")
                if not both:
                    raise _NoValue(f"types {sorted(types_a)} and {sorted(types_b)} accept no common value at "
                                   f"{path}/type")
                out[key] = sorted(both) if len(both) > 1 else both.pop()
            elif key == "properties":
                props = dict(mine)
                for name, sub in value.items():
                    if name not in props:
                        props[name] = sub
                    else:  # (false stays false: a member that must be absent)
                        props[name] = False if False in (props[name], sub) else {"allOf": [props[name], sub]}
                out[key] = props
            elif key == "required":
                out[key] = list(dict.fromkeys([*mine, *value]))
            elif key in lower:
                out[key] = max(mine, value)
            elif key in upper:
                out[key] = min(mine, value)
            elif key == "enum":
                out[key] = [v for v in mine if any(v == w and _json_type(v) == _json_type(w) for w in value)]
            elif key in (EXCLUDED, PATTERNS, MULTIPLES, NOT_MULTIPLES):
                out[key] = [*mine, *value]
            elif key == "multipleOf" and _positive_number(mine) and _positive_number(value):
                # multiples of both are exactly the multiples of their least common multiple
                out[key] = _lcm(mine, value)
                out[MULTIPLES] = list(dict.fromkeys([*out.get(MULTIPLES, []), mine, value]))
            elif key == "pattern":  # both patterns hold: the second joins the slot's intersection
                out[PATTERNS] = [*out.get(PATTERNS, []), value]
            elif key in ("anyOf", "oneOf") and isinstance(mine, list) and isinstance(value, list):
                # (A1 or A2) and (B1 or B2) = (A1 and (B1 or B2)) or (A2 and (B1 or B2)); the same for oneOf
                out[key] = [{"allOf": [branch, {key: value}]} for branch in mine]
            elif key == "patternProperties" and isinstance(mine, dict) and isinstance(value, dict):
                merged = dict(mine)
                for pattern, sub in value.items():
                    merged[pattern] = {"allOf": [merged[pattern], sub]} if pattern in merged else sub
                out[key] = merged
            elif key == "not":  # not A and not B: not (A or B)
                out[key] = {"anyOf": [mine, value]}
            elif key in ("items", "additionalProperties", "propertyNames") and isinstance(mine, dict) and isinstance(
                    value, dict):
                out[key] = {"allOf": [mine, value]}
            elif key in ("additionalProperties", "propertyNames") and False in (mine, value):
                out[key] = False
            elif key in ("items", "additionalProperties", "propertyNames") and True in (mine, value):
                out[key] = value if mine is True else mine
            elif key == "const":  # two different constants: no value is both
                raise _NoValue(f"'const' {mine!r} and {value!r} accept no common value at {path}/const")
            else:
                self.fail(f"{path}/{key}", f"unsupported keyword {key!r} with different values in 'allOf' parts")
        if arrays is not None:
            out.pop("items", None)
            out.update(arrays)
        self.apply_additional(a, b, out, path if exact else None)
        return out

    @staticmethod
    def merge_arrays(a: dict, b: dict) -> dict | None:
        """{prefixItems, items} of two parts of which one has prefixItems, merged element by element: a part's
        `items` covers the elements after its own prefixItems only — all of them where it has none —, so the other
        part's prefix positions take it too (None when neither has prefixItems: `items` merge as schemas)."""
        prefixes = [p.get("prefixItems") for p in (a, b)]
        if not any(isinstance(p, list) for p in prefixes):
            return None
        pa, pb = (p if isinstance(p, list) else [] for p in prefixes)
        ra, rb = a.get("items", True), b.get("items", True)

        def both(x, y):
            return x if y is True else y if x is True else False if False in (x, y) else {"allOf": [x, y]}

        at = lambda prefix, rest, i: prefix[i] if i < len(prefix) else rest  # noqa: E731
        out = {"prefixItems": [both(at(pa, ra, i), at(pb, rb, i)) for i in range(max(len(pa), len(pb)))]}
        if both(ra, rb) is not True:
            out["items"] = both(ra, rb)
        return out

    def apply_additional(self, a: dict, b: dict, out: dict, exact_at: str | None = None) -> None:
        """A part's additionalProperties holds for every name that part neither declares nor matches by a pattern,
        so `out` (the two parts merged) gives it to the other part's such members (exactly: false leaves them out)
        and patterns (soundly: a name the pattern finds may be one the part matches after all — with `exact_at`,
        the path to name in an error instead)."""
        for part, other in ((a, b), (b, a)):
            extra = other.get("additionalProperties", True)
            if extra is True or not isinstance(extra, (dict, bool)):
                continue
            declared = other.get("properties", {}) if isinstance(other.get("properties"), dict) else {}
            patterns = other.get("patternProperties", {}) if isinstance(other.get("patternProperties"), dict) else {}

            def covered(name: str) -> bool:
                with contextlib.suppress(re.error):  # (a pattern Python cannot compile covers nothing: stricter)
                    return name in declared or any(re.search(p, name) for p in patterns)
                return name in declared

            for key, keep in (("properties", covered), ("patternProperties", lambda p: p in patterns)):
                if not isinstance(part.get(key), dict):
                    continue
                merged = dict(out[key])
                for name in part[key]:
                    if not keep(name):
                        if key == "patternProperties" and exact_at is not None:
                            self.fail(exact_at, "unsupported keyword 'allOf' (parts with patternProperties and "
                                                "additionalProperties, merged exactly)")
                        merged[name] = False if False in (extra, merged[name]) else {"allOf": [merged[name], extra]}
                out[key] = merged

    def text(self, s: str) -> CanvasTemplate:
        """Every position fixed: the tokens of `s` (kept per tokenizer: braces, commas and member names recur)."""
        return _TEXTS.get((s, self.tokenizer), lambda: CanvasTemplate._of(
            self.vocab, torch.tensor(self.constraints.token_ids(s))), lambda t: 64 + t.nbytes)

    def regex_limit(self, schema: Any, seen: tuple) -> int:
        """The longest regex a slot may hold for `schema`: an enum / const is an alternation of literals, whose
        automaton grows linearly, so it may be ten times longer than other values'."""
        try:
            resolved = self.resolve(schema, "", seen)[0]
        except SchemaError:
            return self.budget.max_regex
        if "enum" in resolved or "const" in resolved:  # a trie: built in one pass, linear in the values
            return self.budget.max_regex * CHOICE_FACTOR
        if resolved.get("uniqueItems") and isinstance(resolved.get("items"), (dict, bool)):  # (shares of a set)
            with contextlib.suppress(SchemaError):
                if _finite_values(self.resolve(resolved["items"], "", seen)[0]) is not None:
                    return self.budget.max_regex * CHOICE_FACTOR
        # multipleOf and NOT_MULTIPLES: a choice among numbers
        finite = resolved.keys() & {"multipleOf", NOT_MULTIPLES}
        return self.budget.max_regex * (10 if finite else 1)

    def slot(self, regex: str, length: int, path: str, limit: int | None = None) -> CanvasTemplate:
        limits.check()
        if self.regex_size(regex) > (limit or self.budget.max_regex):
            self.fail(path, f"value too complex for one slot ({self.regex_size(regex)}-character regex)")
        intersections = self.placeholders_in(regex)
        length = min(length, self.budget.max_slot)
        try:
            return CanvasTemplate.from_regex(regex, self.tokenizer, length, intersections)
        except AutomatonTooLarge as exc:  # (a scaffold may still hold it: see `template`)
            raise _TooComplex(f"value too complex for one slot ({exc}) at {path or '#'}") from None
        except TemplateError as exc:
            # the budget was too short for the tokenizer's spelling of the shortest value (a long pattern literal, a
            # long enum value): the slot grows to that spelling, with the budget's room to spare, up to a limit
            longest = 4 * self.budget.max_slot
            shortest = self.constraints.automaton(regex, intersections).shortest_length(longest)
            if shortest is None or shortest <= length:
                self.fail(path, f"cannot fit the value in {longest if shortest is None else length} tokens ({exc})")
            return CanvasTemplate.from_regex(regex, self.tokenizer, min(shortest + length, longest), intersections)

    # -- regex of a value (what a slot holds) -----------------------------------------------------------------------

    def value_regex(self, schema: Any, path: str, seen: tuple = ()) -> tuple[str, int]:
        """(regex, length budget in tokens) of any value of `schema`. Stops early once the regex is longer than any
        slot takes: nested anyOf over recursive objects would otherwise grow it exponentially.

        Memoised per (schema object, path, seen): the template walk asks again for values it has seen (an optional
        member's, then its object's), three times per value on jsonschemabench. The entry keeps the schema alive, so
        its id is not reused."""
        key = (id(schema), path, seen)
        if key not in self._regexes:
            try:
                self._regexes[key] = (schema, self._bounded_value_regex(schema, path, seen), None)
            except SchemaError as exc:
                self._regexes[key] = (schema, None, exc)
        _, result, error = self._regexes[key]
        if error is not None:
            raise error
        return result

    def _bounded_value_regex(self, schema: Any, path: str, seen: tuple) -> tuple[str, int]:
        regex, length = self._value_regex(schema, path, seen)
        if self.regex_size(regex) > (CHOICE_FACTOR if isinstance(regex, Choice) else 10) * self.budget.max_regex:
            raise _TooComplex(f"value too complex for one slot ({self.regex_size(regex)}-character regex) "
                              f"at {path or '#'}")
        return regex, length

    def _value_regex(self, schema: Any, path: str, seen: tuple = ()) -> tuple[str, int]:
        schema, path, seen = self.resolve(schema, path, seen)
        if "const" in schema or "enum" in schema:
            # A finite set: keep the values that satisfy the whole schema (type, if/then, ... beside the enum).
            key = "const" if "const" in schema else "enum"
            values = [schema["const"]] if key == "const" else schema["enum"]
            if not isinstance(values, list):
                self.fail(f"{path}/enum", "'enum' must be a list")
            if not values:  # (drafts 6 and later allow it: it accepts nothing)
                raise _NoValue(f"an empty 'enum' accepts no value at {path}/enum")
            lits = [json.dumps(v, separators=(",", ":"), ensure_ascii=False) for v in values
                    if self.valid_member(v, schema, key)]
            if not lits:
                raise _NoValue(f"no '{key}' value satisfies the rest of the schema at {path}/{key}")
            return Choice(lits), max(len(v) for v in lits) + 2
        for key in ("anyOf", "oneOf"):
            if key in schema:
                branches = self.alternatives(schema, key, path, seen)
                options, limit, unsupported = [], None, []
                for i, sub in enumerate(branches):
                    try:
                        options.append(self.value_regex(sub, f"{path}/{key}/{i}", seen))
                    except (_DepthLimit, _NoValue) as exc:  # a branch that cannot be taken
                        limit = exc
                    except _TooComplex:
                        raise  # (`template` gives such a value a scaffold)
                    except SchemaError as exc:
                        if key == "oneOf":  # (its other branches' values were made to fail this one as written)
                            raise
                        unsupported.append((i, exc))  # an anyOf branch we cannot write: the others still validate
                if not options:
                    raise unsupported[0][1] if unsupported else limit
                for i, exc in unsupported:
                    self.fix(f"{path or '#'}/{key}/{i}: never written ({str(exc).split(' at ')[0]})")
                return alt([r for r, _ in options]), max(n for _, n in options)
        kind = schema.get("type")
        if isinstance(kind, list):
            options = [self.value_regex(sub, path, seen) for _, sub in self.per_type(schema, path)]
            return alt([r for r, _ in options]), max(n for _, n in options)
        if kind is None:
            kind = self.infer_type(schema, path)
            if kind is None:  # only keywords that apply to every type (or none at all)
                self.check_keywords(schema, "null", path)
                return self.value_regex(ANY_VALUE, path, seen)
        if kind not in SUPPORTED:
            self.fail(f"{path}/type", f"unsupported type {kind!r}")
        self.check_keywords(schema, kind, path)
        # Budgets count characters: a token holds at least one, so the value always fits.
        if kind == "null":
            return "null", 4
        if kind == "boolean":
            return "(true|false)", 5
        if kind in ("integer", "number"):
            schema = _draft4_bounds(schema)
        if kind in ("integer", "number") and schema.keys() & {"multipleOf", NOT_MULTIPLES}:
            return self.multiples_regex(schema, kind, path)
        if kind == "integer":
            lo, hi = schema.get("minimum"), schema.get("maximum")
            lo = None if lo is None else math.ceil(lo)
            hi = None if hi is None else math.floor(hi)
            if "exclusiveMinimum" in schema:
                lo = max(lo if lo is not None else -(10**12), math.floor(schema["exclusiveMinimum"]) + 1)
            if "exclusiveMaximum" in schema:
                hi = min(hi if hi is not None else 10**12, math.ceil(schema["exclusiveMaximum"]) - 1)
            width = self.budget.number if lo is None or hi is None else max(len(str(lo)), len(str(hi)))
            try:
                regex = integer_regex(lo, hi)
            except ValueError as exc:
                self.fail(path, str(exc))
            if EXCLUDED in schema:  # integers a `not` rules out (enum, const)
                parts = (regex, *(Complement(x) for x in schema[EXCLUDED]))
                regex = self.intersect(*parts)
                if self.constraints.matches_nothing(regex, ((regex, parts),)):
                    raise _NoValue(f"no integer satisfies the schema and its 'not' at {path}")
            return regex, width
        if kind == "number":
            return self.number_regex(schema, path), self.budget.number + 4
        if kind == "string":
            return self.string_regex(schema, path)
        if kind == "array":
            item_schemas, is_tuple = self.array_items(schema, path)
            need = self.contains_count(schema, path)
            if not item_schemas:
                if need:
                    raise _NoValue(f"'contains' needs an item, and the array holds none at {path}/contains")
                return seq(lit("["), lit("]")), 2
            if is_tuple:  # exactly these items
                item_schemas = self.containing_tuple(schema, item_schemas, need, path)
                if schema.get("uniqueItems") and not self.pairwise_distinct(item_schemas, seen):
                    text = _json_text(self.distinct_items(schema, item_schemas, path, seen))
                    return Choice([text]), len(text) + 2
                parts = [self.value_regex(s, f"{path}/items/{i}", seen) for i, s in enumerate(item_schemas)]
                items = [group(r) if i == 0 else seq(lit(","), group(r)) for i, (r, _) in enumerate(parts)]
                return seq(lit("["), *items, lit("]")), 2 + sum(n + 1 for _, n in parts)
            lo = max(int(schema.get("minItems", 0)), need)
            hi = min(int(schema.get("maxItems", max(lo, self.budget.array_items))), max(lo, self.budget.array_items))
            if need:
                return self.containing_array_regex(schema, item_schemas[0], need, lo, hi, path, seen)
            try:
                item_regex, item_len = self.value_regex(item_schemas[0], f"{path}/items", seen)
            except (_DepthLimit, _NoValue):  # a member that cannot be written (depth limit, no value)
                if lo > 0:
                    raise
                return seq(lit("["), lit("]")), 2
            if schema.get("uniqueItems") and hi > 1:
                return self.unique_array_regex(schema, item_schemas[0], item_regex, item_len, lo, hi, path, seen)
            # Without maxItems the count is free (the slot length bounds it): a star keeps the automaton small, where
            # a bounded repeat would copy the item's states once per possible item.
            most = None if "maxItems" not in schema else hi - 1
            body = seq(group(item_regex), repeat(seq(lit(","), group(item_regex)), max(0, lo - 1), most))
            regex = seq(lit("["), group(body) if lo >= 1 else optional(body), lit("]"))
            return regex, 2 + hi * (item_len + 1)
        if kind == "object":
            return self.object_regex(schema, path, seen)
        self.fail(path, f"unsupported type {kind!r}")

    def per_type(self, schema: dict, path: str) -> list[tuple[str, dict]]:
        """(type, its schema) for each type of a type list: keywords apply only to instances of their type, so each
        keeps its own."""
        for t in schema["type"]:
            if t not in SUPPORTED:
                self.fail(f"{path}/type", f"unsupported type {t!r}")
            self.check_keywords(schema, t, path)
        return [(t, {k: v for k, v in schema.items() if k in SUPPORTED[t] or k in ANNOTATIONS} | {"type": t})
                for t in schema["type"]]

    def alternatives(self, schema: dict, key: str, path: str, seen: tuple) -> list:
        """The branches to write for anyOf / oneOf: siblings folded in; for oneOf, made mutually exclusive."""
        branches = self.branches(schema, key, path, seen)
        if key == "oneOf":
            return self.exclusive_branches(branches, schema[key], path, seen)
        return [b for b in branches if b is not None]

    def branches(self, schema: dict, key: str, path: str, seen: tuple = ()) -> list:
        """anyOf / oneOf branches with the sibling keywords folded in (a value must satisfy both); None for a branch
        that accepts nothing beside them (never chosen)."""
        if not isinstance(schema[key], list) or not schema[key]:
            self.fail(f"{path}/{key}", f"'{key}' must be a non-empty list")
        if "anyOf" in schema and "oneOf" in schema:
            self.fail(f"{path}/oneOf", "unsupported keyword 'oneOf' together with 'anyOf'")
        siblings = {k: v for k, v in schema.items() if k != key and k not in ANNOTATIONS}
        out, empty = [], None
        for i, sub in enumerate(schema[key]):
            if not siblings:
                out.append(sub)
                continue
            try:
                # the branch's `not` waits for the siblings: `not required X` must see the members they declare
                sub, sub_path, chain = self.resolve(sub, f"{path}/{key}/{i}", seen, fold_not=False)
                out.append(self.merge_two(siblings, _with_refs(sub, chain, seen), sub_path))
            except _NoValue as exc:  # this branch accepts nothing beside the siblings: never chosen
                out.append(None)
                empty = exc
        if all(b is None for b in out):
            raise empty
        return out

    # -- oneOf: exactly one branch must match, so each branch's outputs must fail every other branch ----------------

    def exclusive_branches(self, branches: list, raw: list, path: str, seen: tuple) -> list:
        """The oneOf branches to generate from, each of whose values fails every other branch, or an error.

        `branches` have the siblings folded in (None: accepts nothing); `raw` are the branches as written. For each
        pair a branch that provably excludes the other stays as is. Otherwise, in turn: an object branch leaves out
        its optional members that another requires, or requires one whose value fails the other; or, in general, the
        other branch's `not` is folded into it (see `without_not`). A branch left with no value is never the one that
        matches, so it is not written (the others must still fail it); so is one that cannot be made to fail another
        (a fixed choice, listed in `fixed`), as long as some branch is left.

        What every written value must fail is each other branch as written (`raw`), read exactly (`as_accepted`):
        only a branch that provably accepts nothing at all is left out of that — one this compiler merely cannot
        write a value of may still match.
        """
        kept, resolved, empty = {}, [], None  # kept: each branch as written, read exactly (None: not exactly readable)
        for i, b in enumerate(branches):
            try:
                kept[i] = self.as_accepted(raw[i], seen)
            except _NoValue as exc:  # accepts nothing at all, so it can never be the one that matches
                empty = exc
                continue
            except SchemaError:
                kept[i] = None  # (exclusion is still tested by folding its `not`)
            if b is None:  # accepts nothing beside the siblings: not written
                continue
            try:
                resolved.append((i, self.resolve_marked(b, f"{path}/oneOf/{i}", seen)))
            except _NoValue as exc:  # no value of it we can write
                empty = exc
        if not resolved:
            raise empty or _NoValue(f"no branch accepts a value at {path}/oneOf")
        out, unwritable = [], []
        for i, a in resolved:
            others = [(j, b) for j, b in kept.items() if j != i]
            excluded = lambda a, j, b: b is not None and self.excludes(a, b, seen, raw[j])  # noqa: E731
            if not all(excluded(a, j, b) for j, b in others) and isinstance(a.get("properties"), dict):
                required = set(a.get("required", []))
                drop = {k for _, b in others if b is not None for k in b.get("required", []) if k not in required}
                if drop & a["properties"].keys():  # (left out: `false`, so no later fold writes them after all)
                    a = {**a, "properties": {k: False if k in drop else v for k, v in a["properties"].items()}}
            try:
                # Every exclusion must hold of the branch as finally written. A folded `not` keeps holding (later
                # folds only narrow the branch); an exclusion read off the branch's shape may not (a fold of `not
                # object` turns an inferred object into other types): those are checked again after any change.
                folded: set[int] = set()
                changed = True
                while changed:
                    changed = False
                    for j, b in others:
                        if j in folded:
                            continue
                        if b is not None and b == kept[i]:  # the same schema twice: whatever matches one matches both
                            raise _NoValue(f"branches {i} and {j} are the same schema at {path}/oneOf")
                        before = a
                        if b is not None and not excluded(a, j, b):
                            a = self.force_member_against(a, b, seen)
                        if not excluded(a, j, b):
                            neg = {"anyOf": [a["not"], raw[j]]} if "not" in a else raw[j]  # (a finite a's own)
                            a = self.without_not({**a, "not": neg}, f"{path}/oneOf/{i}", seen)
                            folded.add(j)
                        changed = changed or a is not before
            except _NoValue as exc:  # no value of branch i fails every other branch
                empty = exc
                continue
            except SchemaError as exc:  # branch i cannot be made to fail branch j: not written
                if isinstance(exc, (_DepthLimit, _TooComplex)):
                    raise
                unwritable.append((i, j, exc))
                continue
            out.append(a)
        if not out and unwritable:
            i, j, exc = unwritable[0]
            self.fail(f"{path}/oneOf", f"unsupported keyword 'oneOf' (branches {i} and {j} may both match, and {exc})")
        if not out:
            raise _NoValue(f"no value matches exactly one 'oneOf' branch at {path}/oneOf")
        for i, j, exc in unwritable:
            self.fix(f"{path or '#'}/oneOf/{i}: never written (it may match branch {j} too, and "
                     f"{str(exc).split(' at ')[0]})")
        return out

    def as_accepted(self, schema: Any, seen: tuple) -> dict:
        """`schema` resolved to test what it accepts: its `not` kept (see `excludes`), and a schema that accepts every
        value as {} (resolve gives ANY_VALUE, the scalars we write for it — fewer than it accepts)."""
        if schema is True or (isinstance(schema, dict) and not (schema.keys() & VALIDATION_KEYWORDS)):
            return {}
        return self.resolve(schema, "", seen, fold_not=False, exact=True)[0]

    def force_member_against(self, a: dict, b: dict, seen: tuple) -> dict:
        """`a` with one optional member made required whose presence fails `b` (b forbids the name, or its values
        for the name exclude a's): a subset of a's objects, none of which validates against b. `a` if none is."""
        props = a.get("properties")
        if not isinstance(props, dict) or "object" not in (self.emitted_types(a, seen) or set()):
            return a
        required = a.get("required", [])
        b_props = b.get("properties", {}) if isinstance(b.get("properties"), dict) else {}
        for key in [k for k in props if k not in required]:
            if key in b_props:
                try:
                    mine, theirs = self.resolve(props[key], "", seen)[0], self.as_accepted(b_props[key], seen)
                except SchemaError:
                    continue
                fails_b = theirs != {} and self.excludes(mine, theirs, seen)
            else:
                fails_b = b.get("additionalProperties") is False and not b.get("patternProperties")
            if fails_b:
                return {**a, "required": [*required, key]}
        return a

    def emitted_types(self, schema: dict, seen: tuple) -> set[str] | None:
        """JSON types the compiler can emit for `schema` (None: unknown). number and integer count as one type."""
        if "const" in schema or "enum" in schema:
            return self.accepted_types(schema)
        for key in ("anyOf", "oneOf"):
            if key in schema and isinstance(schema[key], list):
                out: set[str] = set()
                for sub in schema[key]:
                    sub_types = self.emitted_types(self.resolve(sub, "", seen)[0], seen)
                    if sub_types is None:
                        return None
                    out |= sub_types
                return out
        if "type" in schema:
            return self.accepted_types(schema)
        kind = self.infer_type(schema, "")
        if kind is None:
            return None if schema.keys() & GENERIC else {"string", "number", "boolean", "null"}
        return {kind}

    def accepted_types(self, schema: dict) -> set[str] | None:
        """JSON types `schema` can accept (None: any), judged only by its own type / const / enum keywords."""
        if "const" in schema:
            return {_json_type(schema["const"])}
        if "enum" in schema and isinstance(schema["enum"], list):
            return {_json_type(v) for v in schema["enum"]}
        kind = schema.get("type")
        if kind is None:
            return None
        return {"number" if t == "integer" else t for t in (kind if isinstance(kind, list) else [kind])}

    def excludes(self, a: dict, b: dict, seen: tuple, raw_b: Any = None) -> bool:
        """True when provably no value this compiler emits for `a` validates against `b` (a sound, partial test).

        `a` is what we write from (its `not` folded in); `b` must keep its `not` (resolved with fold_not=False): a
        folded `not` narrows a schema below what it accepts, and a value outside the narrowed `b` may still pass `b`.
        `raw_b`: `b` as written, to check a finite `a`'s values against exactly.
        """
        emitted, accepted = self.emitted_types(a, seen), self.accepted_types(b)
        if emitted is not None and accepted is not None and not emitted & accepted:
            return True
        finite_a = _finite_values(a)
        finite_b = _finite_values(b)
        if finite_a is not None and finite_b is not None:
            return not any(x == y and _json_type(x) == _json_type(y) for x in finite_a for y in finite_b)
        if finite_b is not None and not any(self.valid(v, a) for v in finite_b):
            return True  # we write only values `a` accepts, and `a` accepts none of b's
        if finite_a is not None and raw_b is not None and not any(self.valid(v, raw_b) for v in finite_a):
            return True
        if emitted == {"object"}:
            a_props, b_props = a.get("properties", {}), b.get("properties", {})
            a_required = [k for k in a.get("required", []) if k in a_props]
            # b requires a key a never writes: a leaves it out (`false`), or neither declares, requires nor may
            # generate it (no branches of its own, no minProperties, no dependency naming it)
            b_required = b.get("required", []) if isinstance(b.get("required"), list) else []
            if any(a_props.get(k) is False or self.never_writes(a, k) for k in b_required):
                return True
            # a always writes a member b forbids, or whose value b's refuses (a's branches only narrow it further)
            for key in a_required:
                if key not in b_props:
                    if b.get("additionalProperties") is False and not b.get("patternProperties"):
                        return True
                    continue
                sub_a = self.resolve(a_props[key], "", seen)[0]
                sub_b = self.as_accepted(b_props[key], seen)
                if sub_b and self.excludes(sub_a, sub_b, seen):
                    return True
        return False

    @staticmethod
    def never_writes(schema: dict, name: str) -> bool:
        """Is `name` provably never a member of the objects we write for `schema`?"""
        if schema.keys() & {"anyOf", "oneOf", "minProperties"} or name in schema.get("properties", {}):
            return False
        required = schema.get("required", [])
        brought = [d for key in ("dependentRequired", "dependencies") if isinstance(schema.get(key), dict)
                   for d in schema[key].values() if isinstance(d, list)]
        return name not in required and not any(name in d for d in brought) and not schema.get("dependentSchemas")

    def tuple_items(self, schema: dict, path: str) -> tuple[list, Any] | None:
        """(the positional item schemas, the schema of any further item) of a tuple array, or None if not a tuple."""
        if isinstance(schema.get("prefixItems"), list):  # 2020-12
            return schema["prefixItems"], schema.get("items", True)
        if isinstance(schema.get("items"), list):  # drafts 4 to 2019-09
            import jsonschema

            cls = jsonschema.validators.validator_for(self.root, default=jsonschema.Draft202012Validator)
            if cls is jsonschema.Draft202012Validator:
                self.fail(f"{path}/items", "'items' as a list is a tuple only before draft 2020-12 "
                                           "(use 'prefixItems', or declare an older '$schema')")
            return schema["items"], schema.get("additionalItems", True)
        return None

    def array_items(self, schema: dict, path: str) -> tuple[list, bool]:
        """(item schemas, is a tuple) of the arrays we write: every item of a tuple, or one schema for a homogeneous
        array (the regex repeats it; the scaffold writes it max(minItems, 1) times). No items: only [] is written."""
        lo = int(schema.get("minItems", 0))
        hi = int(schema.get("maxItems", max(lo, self.budget.array_items)))
        if lo > hi:
            self.fail(path, f"minItems {lo} > maxItems {hi}")
        tuple_items = self.tuple_items(schema, path)
        if tuple_items is None:
            return ([] if hi == 0 else [schema.get("items", {"type": "string"})]), False
        prefix, rest = tuple_items
        n = min(max(len(prefix), lo), hi)  # as many items as the tuple declares, within the bounds
        if n > len(prefix) and rest is False:
            self.fail(path, f"minItems {lo} needs more items than the tuple's {len(prefix)}")
        return [prefix[i] if i < len(prefix) else rest for i in range(n)], True

    def contains_count(self, schema: dict, path: str) -> int:
        """How many items must match `contains` (minContains, default 1; 0 without contains)."""
        if "contains" not in schema:
            return 0
        if "maxContains" in schema:
            self.fail(f"{path}/maxContains", "unsupported keyword 'maxContains'")
        need = schema.get("minContains", 1)
        if not isinstance(need, int) or isinstance(need, bool) or need < 0:
            self.fail(f"{path}/minContains", f"'minContains' must be a non-negative integer, got {need!r}")
        return need

    def containing_array_regex(self, schema: dict, item: Any, need: int, lo: int, hi: int, path: str,
                               seen: tuple) -> tuple[str, int]:
        """An array whose first `need` items match `contains` (and `items`): a sound subset of the arrays with that
        many matches anywhere; the items after them are any items, up to maxItems."""
        if "maxItems" in schema and int(schema["maxItems"]) < need:
            raise _NoValue(f"maxItems {schema['maxItems']} below the {need} items 'contains' needs at {path}/contains")
        if schema.get("uniqueItems") and hi > 1:
            self.fail(f"{path}/contains", "unsupported keyword 'contains' together with 'uniqueItems'")
        matching, matching_len = self.value_regex({"allOf": [item, schema["contains"]]}, f"{path}/contains", seen)
        parts = [lit("["), group(matching), repeat(seq(lit(","), group(matching)), need - 1, need - 1)]
        n = 2 + need * (matching_len + 1)
        most = None if "maxItems" not in schema else hi - need
        if most is None or most > 0:
            try:
                item_regex, item_len = self.value_regex(item, f"{path}/items", seen)
                parts.append(repeat(seq(lit(","), group(item_regex)), max(0, lo - need), most))
                n += (hi - need) * (item_len + 1)
            except (_DepthLimit, _NoValue):
                if lo > need:
                    raise
        return seq(*parts, lit("]")), n

    def unique_array_regex(self, schema: dict, item: Any, item_regex: str, item_len: int, lo: int, hi: int,
                           path: str, seen: tuple) -> tuple[str, int]:
        """Arrays of lo..hi distinct items. Items from a finite set: every ordered selection without repetition,
        spelled out where there are few; else distinct by construction — the k-th item from the k-th of hi disjoint
        shares of the set (a fixed choice). Other items: at most one (minItems <= 1), or a fixed array of distinct
        values found among the item's own (see `distinct_items`)."""
        resolved = self.resolve(item, f"{path}/items", seen)[0]
        values = _finite_values(resolved)
        if values is None:
            if lo <= 1:
                self.fix(f"{path or '#'}: at most one item (uniqueItems)")
                item = group(item_regex) if lo == 1 else optional(group(item_regex))
                return seq(lit("["), item, lit("]")), 2 + item_len
            text = _json_text(self.distinct_items(schema, [item] * lo, path, seen))
            return Choice([text]), len(text) + 2
        key = "const" if "const" in resolved else "enum" if "enum" in resolved else None
        kept = [v for v in values if self.valid_member(v, resolved, key)] if key else values
        lits = list({_canonical(v): _json_text(v) for v in kept}.values())  # (1 and 1.0 are one item)
        hi = min(hi, len(lits))
        if lo > hi:
            raise _NoValue(f"minItems {lo} exceeds the {len(lits)} distinct items at {path}/uniqueItems")
        width = 2 + sum(sorted((len(x) + 1 for x in lits), reverse=True)[:hi])
        # counted before they are listed: 500 values taken 4 at a time are 6e10 orders
        if sum(math.perm(len(lits), k) for k in range(lo, hi + 1)) <= 5000:
            selections = [p for k in range(lo, hi + 1) for p in itertools.permutations(lits, k)]
            return Choice("[" + ",".join(p) + "]" for p in selections), width
        shares = [Choice(lits[k::hi]) for k in range(hi)]
        self.fix(f"{path or '#'}: item k is one of every {hi}th value from the k-th on (uniqueItems)")
        tail = None
        for k in range(hi - 1, 0, -1):  # item k present only after item k-1; the first lo always
            part = seq(lit(","), shares[k], *([tail] if tail is not None else []))
            tail = group(part) if k < lo else optional(part)
        first = seq(shares[0], *([tail] if tail is not None else []))
        return seq(lit("["), group(first) if lo >= 1 else optional(first), lit("]")), width

    def containing_tuple(self, schema: dict, items: list, need: int, path: str) -> list:
        """A tuple's item schemas with its first `need` items also matching `contains` (a sound subset of the tuples
        with that many matches anywhere)."""
        if need > len(items):
            raise _NoValue(f"the tuple's {len(items)} items cannot hold the {need} 'contains' needs at {path}/contains")
        return [{"allOf": [item, schema["contains"]]} for item in items[:need]] + items[need:]

    def pairwise_distinct(self, items: list, seen: tuple) -> bool:
        """Does every value we write for items[i] fail items[j] (i != j), so that a tuple's items never repeat?"""
        try:
            written = [self.resolve(item, "", seen)[0] for item in items]
            accepted = [self.as_accepted(item, seen) for item in items]
        except SchemaError:
            return False
        return all(self.excludes(written[i], accepted[j], seen, items[j])
                   for i in range(len(items)) for j in range(len(items)) if i != j)

    def distinct_items(self, schema: dict, items: list, path: str, seen: tuple) -> list:
        """len(items) distinct values, the i-th valid for items[i], that as an array the array schema accepts:
        found among random fillings of each item's own template, to be written as a fixed choice (uniqueItems where
        items may repeat: a template cannot tell a repeat from a new value)."""
        chosen: list = []
        for i, item in enumerate(items):
            taken = {_canonical(v) for v in chosen}
            found = self.sample_values(item, f"{path}/items", seen,
                                       lambda v: _canonical(v) not in taken, 1)
            if not found:
                self.fail(f"{path}/uniqueItems", f"unsupported keyword 'uniqueItems' (no distinct value found for "
                                                 f"item {i})")
            chosen += found
        if not self.valid(chosen, schema):
            self.fail(f"{path}/uniqueItems", "unsupported keyword 'uniqueItems' (the distinct values found do not "
                                             "make a valid array)")
        self.fix(f"{path or '#'}: always the items {_json_text(chosen)[:60]} (uniqueItems)")
        return chosen

    def sample_values(self, schema: Any, path: str, seen: tuple, accept, count: int, tries: int = 64) -> list:
        """Up to `count` values among random fillings of `schema`'s own template that it accepts and `accept(value)`
        passes — concrete values where a fixed choice must be made (no choice the template makes for them counts)."""
        fixed, found = list(self.fixed), []
        self.forced += 1
        try:
            template = CanvasTemplate.join(self.template(schema, path, seen))
        finally:
            self.forced -= 1
            self.fixed[:] = fixed
        generator = torch.Generator().manual_seed(0)
        for _ in range(tries):
            limits.check()
            text = self.tokenizer.decode(random_filling(template, generator), skip_special_tokens=True)
            with contextlib.suppress(ValueError):
                value = json.loads(text)
                if self.valid(value, schema) and accept(value):
                    found.append(value)
                    if len(found) == count:
                        break
        return found

    def infer_type(self, schema: dict, path: str) -> str | None:
        """A type whose keywords the schema uses (its values then meet them; other types' keywords are moot), or
        None when only keywords for every type are present."""
        for kind in ("object", "array", "string", "number"):
            if schema.keys() & APPLIES[kind]:
                return kind
        return None

    def check_sizes(self, schema: dict, kind: str, path: str) -> None:
        """Counts a value of `kind` must reach (minLength, minItems, minProperties, minContains) within what a
        template can hold (Budget.max_length tokens; a string within a slot), checked before anything is built:
        `minItems` 10^9 would otherwise build 10^9 items."""
        # (tokens each unit takes at least: an item and its comma; a member's name, colon, value and comma)
        per_unit = {"array": ("minItems", 2), "object": ("minProperties", 4)}.get(kind)
        bounds = [("minLength", 8 * self.budget.max_slot)] if kind == "string" else []
        if per_unit:
            bounds.append((per_unit[0], self.budget.max_length // per_unit[1]))
        if kind == "array":
            bounds.append(("minContains", self.budget.max_length // 2))
        for key, most in bounds:
            value = schema.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > most:
                room = (f"a slot holds {most} characters at most" if kind == "string" else
                        f"a template of {self.budget.max_length} tokens holds {most} at most")
                self.fail(f"{path}/{key}", f"{key} {value} is more than this compiler writes ({room})")

    def check_keywords(self, schema: dict, kind: str, path: str) -> None:
        self.check_sizes(schema, kind, path)
        for key in schema:
            if key not in VALIDATION_KEYWORDS or key in SUPPORTED[kind] or key in ("anyOf", "oneOf", "$ref"):
                continue
            if key in GENERIC:
                self.fail(f"{path}/{key}", f"unsupported keyword {key!r}")
            if key in APPLIES[kind]:
                self.fail(f"{path}/{key}", f"unsupported keyword {key!r} for type {kind!r}")
        if kind == "string" and schema.get("format") in SPEC_FORMATS - FORMATS.keys():
            self.fail(f"{path}/format", f"unsupported keyword 'format' value {schema['format']!r}")
        if kind == "object" and ("minProperties" in schema or "maxProperties" in schema):
            # Objects we write hold every required member (and optional ones up to minProperties, see `members`)
            # and at most every declared one (at most maxProperties: `members` leaves the optional ones beyond out).
            required = set(schema.get("required", [])) if isinstance(schema.get("required"), list) else set()
            if isinstance(schema.get("maxProperties"), int) and schema["maxProperties"] < len(required):
                raise _NoValue(f"maxProperties {schema['maxProperties']} below the {len(required)} required members "
                               f"at {path}/maxProperties")
        if kind == "object" and "patternProperties" in schema:
            # Names we write are declared (or required, or generated): a pattern they match adds its schema to
            # theirs (see `members`).
            patterns = schema["patternProperties"]
            if not isinstance(patterns, dict):
                self.fail(f"{path}/patternProperties", "'patternProperties' must be an object")
            for pattern in patterns:
                try:
                    re.compile(pattern)
                except re.error:
                    self.fail(f"{path}/patternProperties", f"unsupported keyword 'patternProperties' ({pattern!r})")

    def multiples_regex(self, schema: dict, kind: str, path: str) -> tuple[str, int]:
        """multipleOf d: multiples of 1 are the integers within the bounds. Otherwise a choice among multiples k·d,
        k spread over magnitudes (1..99 × 10^e, e = 0..2, and 0; negated too where the bounds allow). No digit pattern
        is exact: validators divide in floating point, so 0.07 fails multipleOf 0.01 (0.07 / 0.01 = 7.000000000000001)
        — each candidate is kept only if it validates against the whole schema. A number that must not be a multiple
        of some values (a folded `not`) is such a choice too, among multiples of d, or of 1 without multipleOf."""
        d = schema.get("multipleOf", 1)
        if not _positive_number(d):
            self.fail(f"{path}/multipleOf", f"'multipleOf' must be a positive number, got {d!r}")
        rest = {k: v for k, v in schema.items() if k != "multipleOf"}
        if d == 1 and not schema.keys() & {MULTIPLES, NOT_MULTIPLES}:
            return self.value_regex({**rest, "type": "integer"}, path)  # (3 / 0.1 is no integer: not with MULTIPLES)
        ks = sorted({m * 10**e for m in range(1, 100) for e in range(3)})
        # a number that only must not be a multiple may be a decimal (not a multiple of 0.5, within [0, 3])
        steps = [d] if "multipleOf" in schema or kind == "integer" else [1, 0.1]
        valid = self.checker(schema)
        for step in map(decimal.Decimal, map(repr, steps)):
            texts = (format((step * k).normalize(), "f") for k in [0, *ks, *(-k for k in ks)])
            lits = [text for text in texts if valid(json.loads(text))]  # (which honours EXCLUDED too)
            if lits:
                return Choice(lits), max(len(v) for v in lits)
        if "multipleOf" not in schema:
            self.fail(f"{path}/not", "unsupported keyword 'not' (of multipleOf: no number tried, k or k/10 for "
                                     "|k| <= 9900, validates)")
        self.fail(f"{path}/multipleOf", f"unsupported keyword 'multipleOf' ({d!r}: none of the multiples tried, "
                                        f"k·{d!r} for |k| <= 9900, validates)")

    def number_regex(self, schema: dict, path: str) -> str:
        lo, hi = schema.get("minimum"), schema.get("maximum")
        xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        # Both an inclusive and an exclusive bound on one side: only the tighter one counts.
        if lo is not None and xlo is not None:
            lo, xlo = (None, xlo) if xlo >= lo else (lo, None)
        if hi is not None and xhi is not None:
            hi, xhi = (None, xhi) if xhi <= hi else (hi, None)
        if lo is None and hi is None and xlo is None and xhi is None:
            return r"-?(0|[1-9][0-9]*)(\.[0-9]{1,6})?"
        # A sound subset: integers within the bounds, and decimals i.f whose whole interval fits — (i, i+1) for
        # i >= 0, (i-1, i) for i < 0 — so a fraction never crosses a bound.
        int_lo = math.ceil(lo) if lo is not None else (math.floor(xlo) + 1 if xlo is not None else None)
        int_hi = math.floor(hi) if hi is not None else (math.ceil(xhi) - 1 if xhi is not None else None)
        low = lo if lo is not None else xlo
        high = hi if hi is not None else xhi
        options = []

        def add(a, b, fraction):
            if a is not None and b is not None and a > b:
                return
            body = integer_regex(a, b)
            options.append(f"({body})\\.[0-9]{{1,4}}" if fraction else body)

        add(int_lo, int_hi, False)
        neg_hi = -1 if int_hi is None else min(-1, int_hi)
        add(None if low is None else math.ceil(low + 1), neg_hi, True)
        pos_lo = 0 if int_lo is None else max(0, int_lo)
        add(pos_lo, None if high is None else math.floor(high) - 1, True)
        if not options:  # no integer and no i.f within the bounds: a choice among decimals between them
            return self.decimals_between(schema, low, high, path)
        return "(" + "|".join(f"({o})" for o in options) + ")"

    def decimals_between(self, schema: dict, low: float, high: float, path: str) -> Choice:
        """Bounds too tight for an integer or a one-decimal-interval fraction ((0.1, 0.2)): nineteen evenly spaced
        decimals between them, each of at most twelve significant digits, kept where the validator accepts the number
        its text reads as (the bounds are checked in floating point, as validators check them)."""
        valid = self.checker(schema)
        lo, hi = decimal.Decimal(repr(low)), decimal.Decimal(repr(high))
        with decimal.localcontext() as context:
            context.prec = 12
            texts = dict.fromkeys(format((lo + (hi - lo) * k / 20).normalize(), "f") for k in range(1, 20))
        lits = [text for text in texts if len(text) <= self.budget.number and valid(json.loads(text))]
        if not lits:
            self.fail(path, "numeric bounds too tight to express")
        return Choice(lits)

    def string_regex(self, schema: dict, path: str) -> tuple[str, int]:
        fmt = schema.get("format") if schema.get("format") in FORMATS else None  # others annotate (SPEC_FORMATS)
        # Width: the slot's length in tokens. Budgets count characters (a token holds at least one), so values fit.
        width = FORMAT_CHARS[fmt] if fmt else self.budget.string
        lo = int(schema.get("minLength", 0))
        hi = schema.get("maxLength")
        if hi is not None and int(hi) < lo:
            self.fail(path, f"minLength {lo} > maxLength {hi}")
        # maxLength is an upper bound: capping it at the slot budget keeps outputs valid and the automaton small
        # (a 32767-character bound would be 32767 automaton states).
        hi = min(int(hi), max(lo, width - 2)) if hi is not None else max(lo, width - 2)
        lengths = f'"{STRING_CHAR}{{{lo},{hi}}}"'
        excluded = schema.get(EXCLUDED, [])
        if schema.get(PATTERNS) and "pattern" not in schema:  # (merged patterns: the first is the pattern)
            schema = {**schema, "pattern": schema[PATTERNS][0], PATTERNS: schema[PATTERNS][1:]}
        if not fmt and "pattern" not in schema and not excluded:
            return lengths, min(hi + 2, self.budget.max_slot)
        # format, pattern and the lengths must all hold: the slot holds the intersection of their regexes, leaving
        # the lengths out where every match of the others already has a length within them.
        regexes, keywords, bounded = [], [], False
        if fmt:
            regexes.append(FORMATS[fmt])
            keywords.append(f"format {fmt!r}")
            bounded = self.within_lengths(schema, FORMATS[fmt][1:-1])
        try:
            around = lookaround_parts(schema["pattern"]) if "pattern" in schema else None
        except PatternError as exc:
            self.pattern_failure(exc, f"{path}/pattern")
        if around is not None:  # one match spanning the string, within what its lookarounds say of the string
            body, required, forbidden = around
            keywords.append(f"pattern {schema['pattern']!r}")
            regexes += [f'"{body}"', *(f'"{r}"' for r in required)]
            excluded = [*excluded, *(f'"{r}"' for r in forbidden)]
        elif "pattern" in schema:
            pattern = schema["pattern"]
            keywords.append(f"pattern {pattern!r}")
            try:  # minLength / maxLength are folded into the pattern's variable part where its shape allows
                folded = pattern_to_json_regex(pattern, lo, schema.get("maxLength", float("inf")))
            except PatternLengthError:
                folded = None
            except PatternError as exc:
                self.pattern_failure(exc, f"{path}/pattern")
            if folded is not None and not fmt and not excluded and not schema.get(PATTERNS):
                # A pattern is searched, not matched: a string that is exactly one match satisfies it, so
                # unanchored ends need no padding (which would also multiply the automaton's states).
                regexes.append(f'"({folded})"')
                bounded = True
            else:  # intersected: a full match alone may be too short, or not the format's shape (^https://)
                try:
                    regexes.append(self.searched_pattern(pattern))
                except PatternError as exc:
                    self.pattern_failure(exc, f"{path}/pattern")
        for pattern in schema.get(PATTERNS, []):  # further patterns (allOf parts), searched like the first
            keywords.append(f"pattern {pattern!r}")
            try:
                regexes.append(self.searched_pattern(pattern))
            except PatternError as exc:
                self.pattern_failure(exc, f"{path}/allOf")
        if not bounded and ("minLength" in schema or "maxLength" in schema):
            regexes.append(lengths)
            keywords += [f"{k} {schema[k]}" for k in ("minLength", "maxLength") if k in schema]
            width = min(width, hi + 2)
        if excluded:  # complements are exact among printable-ASCII strings only: the slot holds to those
            regexes += [f'"{STRING_CHAR}*"', *(Complement(x) for x in excluded)]
        width = min(max(width, lo + 2), self.budget.max_slot)
        if len(regexes) == 1:
            return regexes[0], width
        regex = self.intersect(*regexes)
        if self.constraints.matches_nothing(regex, ((regex, tuple(regexes)),)):
            # no value here: an anyOf / oneOf branch like this is never taken, a member is left out where it may be
            capped = " (maxLength capped at the slot budget)" if hi < schema.get("maxLength", hi) else ""
            together = f"{', '.join(keywords)} together" if keywords else "the schema"
            raise _NoValue(f"no string satisfies {together}{' and its not' if excluded else ''}{capped} at {path}")
        return regex, width

    def pattern_failure(self, exc: PatternError, where: str):
        """A pattern no string we write can match (PatternEmpty: no value, an optional member is left out), or one
        this compiler cannot read (an error naming the keyword)."""
        if isinstance(exc, PatternEmpty):
            raise _NoValue(f"{exc} at {where}")
        self.fail(where, f"unsupported keyword 'pattern' ({exc})")

    @staticmethod
    def searched_pattern(pattern: str) -> str:
        """A regex for JSON strings `pattern` is found in: its full matches, with any characters before (after) them
        where nothing in it anchors the start (end)."""
        body = pattern_to_json_regex(pattern)
        before = "" if "^" in pattern or "\\A" in pattern else f"{STRING_CHAR}*"
        after = "" if "$" in pattern or "\\Z" in pattern else f"{STRING_CHAR}*"
        return f'"{before}({body}){after}"'

    @staticmethod
    def within_lengths(schema: dict, regex: str) -> bool:
        """Does every full match of `regex` already have a length within the schema's minLength / maxLength?"""
        try:
            shortest, longest = pattern_parser.parse(regex).getwidth()
        except Exception:
            return False
        return schema.get("minLength", 0) <= shortest and longest <= schema.get("maxLength", float("inf"))

    def members(self, schema: dict, path: str) -> tuple[dict, list]:
        """(member schemas, required names): the declared properties, plus required names that are not declared,
        with the schema validators apply to them (a matching patternProperties entry, else additionalProperties)."""
        props = dict(schema.get("properties", {}))
        required = schema.get("required", [])
        if not isinstance(required, list):
            self.fail(f"{path}/required", "'required' must be a list")
        forbidden = {k for k, v in props.items() if v is False}  # (a folded `not required` leaves names out so)
        if forbidden & set(required):
            name = sorted(forbidden & set(required))[0]
            raise _NoValue(f"the schema false accepts no value at {path}/properties/{name} (required property {name!r})")
        props = {k: v for k, v in props.items() if k not in forbidden}
        # dependencies: a required member brings its dependents along; an optional one that has any is not written
        deps = {}
        for keyword in ("dependencies", "dependentRequired", "dependentSchemas"):
            if isinstance(schema.get(keyword), dict):
                deps.update({name: (keyword, dep) for name, dep in schema[keyword].items()})
        required = list(dict.fromkeys(required))
        # Objects we write hold a member at least (see object_regex); beyond that, minProperties is met by always
        # writing the first optional members.
        least = schema.get("minProperties", 0)
        if isinstance(least, int) and least > schema.get("maxProperties", least):
            raise _NoValue(f"minProperties {least} above maxProperties {schema['maxProperties']} at {path}/minProperties")
        if isinstance(least, int) and least > max(len(required), 1 if props else 0):
            short = least - len(required)
            forced = [k for k in props if k not in required][:short]
            required += forced
            if forced:
                self.fix(f"{path or '#'}: always writes {', '.join(map(repr, forced))} (minProperties)")
            # more than declared: members with fixed names (one generated name, chosen by the model, where a map
            # declares none and needs one: see map_entry)
            if least > len(props.keys() | set(required)) and (props or least > 1):
                added = self.extra_names(schema, least - len(props.keys() | set(required)), path)
                required += added
                self.fix(f"{path or '#'}: always writes {', '.join(map(repr, added))} (minProperties)")
        for name in required:  # grows while we walk it: the closure
            keyword, dep = deps.get(name, (None, True))
            if isinstance(dep, dict) and not (dep.keys() & VALIDATION_KEYWORDS - {"required"}):
                dep = dep.get("required", [])
            if not isinstance(dep, list) and dep is not True:
                self.fail(f"{path}/{keyword}/{name}", f"unsupported keyword {keyword!r} (a schema that required "
                                                      f"member {name!r} brings)")
            required += [d for d in (dep if isinstance(dep, list) else []) if d not in required]
        for name in deps:
            if name not in required and deps[name][1] not in (True, [], {}):
                props.pop(name, None)
        for key in [k for k in required if k not in props]:
            patterns = [p for p in schema.get("patternProperties", {}) if re.search(p, key)]
            extra = schema.get("additionalProperties", True)
            if patterns:
                props[key] = {"allOf": [schema["patternProperties"][p] for p in patterns]}
            elif extra is False:
                self.fail(f"{path}/required", f"required property {key!r} is not declared and additionalProperties "
                                              "is false: no object validates")
            else:
                props[key] = extra
        patterns = schema.get("patternProperties", {}) if isinstance(schema.get("patternProperties"), dict) else {}
        for key in schema.get("properties", {}):  # a declared member whose name a pattern matches: both schemas hold
            with contextlib.suppress(re.error):  # (check_keywords refuses a pattern Python cannot compile)
                matched = [patterns[p] for p in patterns if re.search(p, key)]
                if matched and key in props:
                    props[key] = {"allOf": [props[key], *matched]}
        names = schema.get("propertyNames", True)
        if names is not True:  # every name written must be a valid propertyNames instance
            for key in [k for k in props if not self.valid(k, names)]:
                if key in required:
                    raise _NoValue(f"required property {key!r} fails propertyNames at {path}/propertyNames")
                props.pop(key)
        most = schema.get("maxProperties")
        if isinstance(most, int) and most < len([k for k in props if k in required]):  # (required with dependents)
            raise _NoValue(f"maxProperties {most} below the {len(required)} members required (with the ones they "
                           f"bring along) at {path}/maxProperties")
        if isinstance(most, int) and most < len(props):  # below the declared count: the first optional ones only
            optional = [k for k in props if k not in required]
            room = max(0, most - (len(props) - len(optional)))
            left_out = set(optional[room:])
            props = {k: v for k, v in props.items() if k not in left_out}
            self.fix(f"{path or '#'}: never writes {', '.join(map(repr, optional[room:]))} (maxProperties)")
        return props, [k for k in props if k in required]

    def object_regex(self, schema: dict, path: str, seen: tuple) -> tuple[str, int]:
        props, required = self.members(schema, path)
        members = []  # (always present, member regex, budget)
        for key in [k for k in props if k in required] + [k for k in props if k not in required]:
            try:
                r, n = self.value_regex(props[key], f"{path}/properties/{key}", seen)
            except (_DepthLimit, _NoValue):  # a member that cannot be written (depth limit, no value)
                if key in required:
                    raise
                continue
            members.append((key in required, _json_text(key) + ":", group(r), n + len(key) + 4))
        if not members:
            if schema.get("minProperties", 0) >= 1 and props:
                self.fail(f"{path}/minProperties", "minProperties needs a member, and no declared one can be written")
            if schema.get("minProperties", 0) >= 1:  # a map that must not be empty
                key, value, n = self.map_entry(schema, path, seen)
                return seq(lit("{"), key, lit(":"), group(value), lit("}")), n + 3
            return seq(lit("{"), lit("}")), 2
        # With no required member the first one is emitted anyway: a sound subset that keeps commas linear
        # (the alternative, "any first member", makes the regex quadratic and the automaton explode).
        # literals as the JSON model's training canvases split them: '{', '"first":', value, ',"next":', value, ...
        parts = [lit("{"), lit(members[0][1]), members[0][2]]
        for required_member, name, value, _ in members[1:]:
            member = seq(lit("," + name), value)
            parts.append(member if required_member else optional(member))
        return seq(*parts, lit("}")), 2 + sum(n for *_, n in members)

    def extra_names(self, schema: dict, count: int, path: str) -> list[str]:
        """`count` member names beyond the declared ones that the object accepts (minProperties above the declared
        count): each passes propertyNames and, under additionalProperties false, matches a patternProperties
        pattern (candidates: key1, key2, ..., then the shortest strings each pattern is found in)."""
        declared = set(schema.get("properties", {})) | set(schema.get("required", []))
        patterns = schema.get("patternProperties", {}) if isinstance(schema.get("patternProperties"), dict) else {}
        candidates = [f"key{i}" for i in range(1, count + 8)]
        for pattern in patterns:
            with contextlib.suppress(PatternError):
                candidates += self.strings_of(self.searched_pattern(pattern), 4 * count)
        dependent = set(self.dependent_names(schema))  # (a name that brings others along is not written alone)
        names = [name for name in dict.fromkeys(candidates)
                 if name not in declared and name not in dependent and self.accepts_name(schema, name)]
        if len(names) < count:
            self.fail(f"{path}/minProperties", "unsupported keyword 'minProperties' above the declared count (no "
                                               "names beyond the declared ones that the object accepts)")
        return names[:count]

    @staticmethod
    def dependent_names(schema: dict) -> list[str]:
        """Member names whose presence brings requirements along (dependentRequired, dependentSchemas,
        dependencies), which a generated member would not meet."""
        out = []
        for keyword in ("dependentRequired", "dependentSchemas", "dependencies"):
            if isinstance(schema.get(keyword), dict):
                out += [name for name, dep in schema[keyword].items() if dep not in (True, [], {})]
        return list(dict.fromkeys(out))

    def names_in(self, regex: str, schema: dict, check, count: int = 3) -> list[str]:
        """Up to `count` of the shortest member names the JSON-string `regex` spells that pass `check` and that
        object `schema` accepts."""
        return [name for name in self.strings_of(regex, 8 * count)
                if self.accepts_name(schema, name) and check(name)][:count]

    def strings_of(self, regex: str, tried: int) -> list[str]:
        """The strings among the `tried` shortest JSON texts the JSON-string `regex` (its intersections included)
        spells (a character the regex leaves open spells no string)."""
        from diffreason.constrain.chardfa import shortest_strings

        out = []
        with contextlib.suppress(AutomatonTooLarge):
            for chars in shortest_strings(self.constraints.char_fsm(regex, self.placeholders_in(regex)), tried):
                with contextlib.suppress(ValueError, TypeError):
                    value = json.loads("".join(chars))
                    if isinstance(value, str):
                        out.append(value)
        return out

    def accepts_name(self, schema: dict, name: str) -> bool:
        """Would object `schema` take a member named `name`: not left out (`name: false`), passing its
        propertyNames, and, under additionalProperties false, declared or matched by a patternProperties pattern."""
        declared = schema.get("properties", {})
        patterns = schema.get("patternProperties", {}) if isinstance(schema.get("patternProperties"), dict) else {}
        allowed = (name in declared or any(re.search(p, name) for p in patterns)
                   or schema.get("additionalProperties", True) is not False)
        return allowed and declared.get(name) is not False and self.valid(name, schema.get("propertyNames", True))

    def map_entry(self, schema: dict, path: str, seen: tuple) -> tuple[str, str, int]:
        """(key regex, value regex, budget) of one member with a generated name, for an object that declares no
        members yet needs one (minProperties); see `map_member`."""
        key, value_schema, where = self.map_member(schema, path, seen)
        value, n = self.value_regex(value_schema, where, seen)
        self.fix(f"{path or '#'}: always one member, its name generated (minProperties)")
        return key, value, n + self.budget.string

    def map_member(self, schema: dict, path: str, seen: tuple) -> tuple[str, Any, str]:
        """(key regex, value schema, its path) of that member: a name matching the object's one patternProperties
        pattern with that pattern's schema, or, without patternProperties, any name with the additionalProperties
        schema."""
        patterns = schema.get("patternProperties", {})
        extra = schema.get("additionalProperties", True)
        if len(patterns) > 1:
            self.fail(f"{path}/minProperties", "unsupported keyword 'minProperties' above the declared count "
                                               "(a generated name may match several patternProperties)")
        if patterns:
            (pattern, value_schema), = patterns.items()
            where = f"{path}/patternProperties/{pattern}"
            try:
                key = self.searched_pattern(pattern)
            except PatternError as exc:
                self.fail(where, f"unsupported keyword 'patternProperties' ({exc})")
        elif extra is False:
            self.fail(f"{path}/minProperties", "minProperties needs a member, and no name is allowed")
        else:
            value_schema, where = (ANY_VALUE if extra is True else extra), f"{path}/additionalProperties"
            key = f'"{STRING_CHAR}{{1,{self.budget.string - 2}}}"'
        # names a folded `not required` left out, and names that bring dependencies along: never generated
        forbidden = [k for k, v in schema.get("properties", {}).items() if v is False] + self.dependent_names(schema)
        if forbidden:
            key = self.intersect(key, Complement("|".join(_json_literal(k) for k in forbidden)))
        if schema.get("propertyNames", True) is not True:  # the generated name must be a valid name too
            names, _ = self.value_regex(schema["propertyNames"], f"{path}/propertyNames", seen)
            key = self.intersect(key, names)
        if (forbidden or schema.get("propertyNames", True) is not True) and self.constraints.matches_nothing(
                key, self.placeholders_in(key)):
            raise _NoValue(f"no name can be generated for a member (propertyNames, names left out or bringing "
                           f"others along) at {path}/minProperties")
        return key, value_schema, where

    # -- scaffold ---------------------------------------------------------------------------------------------------

    def template(self, schema: Any, path: str = "", seen: tuple = ()) -> list[CanvasTemplate]:
        """The template of a value, as parts to join: a fixed scaffold for objects with members, a slot for every
        other value.

        A value whose regex is too complex for one slot (an optional object member, an array of objects, anyOf
        over objects or a type list, a non-empty map of objects) gets a scaffold instead, with its structure fixed — a
        sound subset, listed in `self.fixed`; so does an object whose members only `required` names (nothing fixed).
        """
        schema, path, seen = self.resolve(schema, path, seen)
        if isinstance(schema.get("type"), list) and len(schema["type"]) == 1:  # ["object"] is "object"
            schema = {**schema, "type": schema["type"][0]}
        is_object = schema.get("type") == "object" or ("type" not in schema and "properties" in schema)
        declared = any(v is not False for v in schema.get("properties", {}).values())  # (false: a name left out)
        if is_object and declared and not any(k in schema for k in ("anyOf", "oneOf", "enum", "const")):
            return self.object_template(schema, path, seen)
        too_complex = None
        try:
            regex, length = self.value_regex(schema, path, seen)
        except _TooComplex as exc:
            regex, length, too_complex = None, 0, exc
        limit = self.regex_limit(schema, seen)
        if regex is not None and self.regex_size(regex) <= limit:
            try:
                return [self.slot(regex, length, path, limit)]
            except _TooComplex as exc:  # its automaton outgrew the state limit
                regex, too_complex = None, exc
        for key in ("anyOf", "oneOf"):
            if key in schema:
                branches = self.alternatives(schema, key, path, seen)
                problem = None
                for i, sub in enumerate(branches):
                    try:
                        parts = self.template(sub, f"{path}/{key}/{i}", seen)
                    except SchemaError as exc:  # includes branches that accept nothing
                        problem = exc
                        continue
                    self.fix(f"{path or '#'}: always branch {i} of '{key}'")
                    return parts
                raise problem
        if is_object and not any(k in schema for k in ("anyOf", "oneOf", "enum", "const")):
            if isinstance(schema.get("required"), list) and schema["required"]:  # members named only by `required`
                return self.object_template(schema, path, seen)
            if schema.get("minProperties", 0) >= 1 and not self.members(schema, path)[0]:  # a map of such values
                return self.map_template(schema, path, seen)
        if isinstance(schema.get("type"), list):  # as for anyOf: the first type that has a template, always
            problem = too_complex
            for t, only in self.per_type(schema, path):
                try:
                    parts = self.template(only, path, seen)
                except SchemaError as exc:
                    problem = exc
                    continue
                self.fix(f"{path or '#'}: always type {t!r}")
                return parts
            if problem is not None:
                raise problem
        kind = schema.get("type") if isinstance(schema.get("type"), str) else self.infer_type(schema, path)
        if kind == "array":
            self.check_keywords(schema, "array", path)
            items, is_tuple = self.array_items(schema, path)
            need = self.contains_count(schema, path)
            if not is_tuple:
                lo = max(int(schema.get("minItems", 0)), need)
                if schema.get("uniqueItems") and lo > 1:  # (a scaffold's items could repeat)
                    return [self.text(_json_text(self.distinct_items(schema, items * lo, path, seen)))]
                if need and (not items or int(schema.get("maxItems", need)) < need):
                    raise _NoValue(f"the array cannot hold the {need} items 'contains' needs at {path}/contains")
                # one item at least, unless nested in another written-for-you value (the template stays small)
                items = items * (lo if self.forced > 1 else max(1, lo))
                if need:  # the matching items first
                    items = [{"allOf": [items[0], schema["contains"]]}] * need + items[need:]
                self.fix(f"{path or '#'}: always {len(items)} item(s)")
            elif need:
                items = self.containing_tuple(schema, items, need, path)
            if is_tuple and schema.get("uniqueItems") and not self.pairwise_distinct(items, seen):
                return [self.text(_json_text(self.distinct_items(schema, items, path, seen)))]
            parts = [self.text("[")]
            self.forced += 1
            try:
                for i, item in enumerate(items):
                    parts += ([self.text(",")] if i else []) + self.template(item, f"{path}/items", seen)
            finally:
                self.forced -= 1
            return parts + [self.text("]")]
        if regex is None:  # too complex, and no structure to fix
            raise too_complex
        return [self.slot(regex, length, path)]  # fails: too complex, and no structure to fix

    def map_template(self, schema: dict, path: str, seen: tuple) -> list[CanvasTemplate]:
        """A map that must not be empty, whose values are too complex for one slot: one member always, its name a
        slot, its value a scaffold of its own."""
        self.check_keywords(schema, "object", path)
        key, value_schema, where = self.map_member(schema, path, seen)
        self.forced += 1
        try:
            value = self.template(value_schema, where, seen)
        finally:
            self.forced -= 1
        self.fix(f"{path or '#'}: always one member, its name generated (minProperties)")
        return [self.text("{"), self.slot(key, self.budget.string, f"{path}/propertyNames"), self.text(":"), *value,
                self.text("}")]

    def object_template(self, schema: dict, path: str, seen: tuple) -> list[CanvasTemplate]:
        self.check_keywords(schema, "object", path)
        props, required = self.members(schema, path)
        if not required:  # as in object_regex: the first member that compiles is emitted anyway
            for key in props:
                try:
                    self.value_regex(props[key], f"{path}/properties/{key}", seen)
                except (_DepthLimit, _NoValue):  # a member that cannot be written (depth limit, no value)
                    continue
                except _TooComplex:  # written with a scaffold of its own
                    pass
                required = [key]
                break
            else:
                if schema.get("minProperties", 0) >= 1:
                    return [self.slot(*self.object_regex(schema, path, seen), path)]  # a generated member
                return [self.text("{}")]
        parts = [self.text("{")]
        for i, key in enumerate(required):
            parts.append(self.text(("," if i else "") + json.dumps(key, ensure_ascii=False) + ":"))
            parts += self.template(props[key], f"{path}/properties/{key}", seen)
        for key in [k for k in props if k not in required]:
            try:
                r, n = self.value_regex(props[key], f"{path}/properties/{key}", seen)
            except (_DepthLimit, _NoValue):  # a member that cannot be written (depth limit, no value)
                continue
            except _TooComplex:
                r, n = None, 0
            limit = self.regex_limit(props[key], seen)
            if r is not None and self.regex_size(member := optional(seq(lit("," + _json_text(key) + ":"),
                                                                        group(r)))) <= limit:
                try:
                    parts.append(self.slot(member, n + len(key) + 4, f"{path}/properties/{key}", limit))
                    continue
                except _TooComplex:  # its automaton outgrew the state limit: as below
                    pass
            # Too complex to be a choice inside one slot: written always, with its own scaffold — unless we are
            # inside such a member already (recursive schemas would make the template grow exponentially).
            if self.forced:
                self.fix(f"{path}/properties/{key}: optional member left out")
                continue
            self.forced += 1
            try:
                value = self.template(props[key], f"{path}/properties/{key}", seen)
            except (_DepthLimit, _NoValue):
                continue
            finally:
                self.forced -= 1
            self.fix(f"{path}/properties/{key}: optional member always written")
            parts += [self.text("," + json.dumps(key, ensure_ascii=False) + ":")] + value
        return parts + [self.text("}")]


def random_filling(template: CanvasTemplate, generator) -> list[int]:
    """A filling of `template` as the engine commits one (each slot's best path), from random logits."""
    tokens = template.fixed.clone()
    for slot in template.slots:
        lp = torch.randn(slot.length, template.vocab_size, generator=generator).mul(3).log_softmax(-1)
        tokens[slot.start : slot.start + slot.length] = torch.tensor(slot.automaton.best_path(lp, slot.backward))
    return tokens.tolist()


@dataclass
class CompiledSchema:
    schema: dict
    template: CanvasTemplate
    # Where the template fixes a choice the schema leaves open (a member always written, an array length, one
    # anyOf branch) because the open choice was too complex for one slot. Outputs still always validate.
    fixed: tuple[str, ...] = ()

    def random_filling(self, generator) -> list[int]:
        """A filling of the template as the engine commits one, from random logits (for property tests)."""
        return random_filling(self.template, generator)

    def validate(self, value: Any) -> None:
        """Raise jsonschema.ValidationError unless `value` validates (formats checked, as far as jsonschema can)."""
        import jsonschema

        error = jsonschema.exceptions.best_match(validator(self.schema).iter_errors(value))
        if error is not None:
            raise error


def check_schema(schema: dict) -> None:
    """The schema must itself be valid under its draft's metaschema (what `jsonschema.validate` checks first): no
    output can be checked against an invalid one."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if _metaschema_accepts(cls, schema):
        return
    error = jsonschema.exceptions.best_match(cls(cls.META_SCHEMA).iter_errors(schema))
    if error is not None:
        where = "/" + "/".join(str(p) for p in error.absolute_path)
        raise SchemaError(f"the schema is not valid JSON Schema at {where}: {error.message[:200]}")


# jsonschema-rs recurses on the native stack: past some thousands of levels it overflows it (a crash, not an
# exception), so deeper schemas go to jsonschema alone, which stops at Python's recursion limit
_RUST_MAX_DEPTH = 500


def _metaschema_accepts(cls, schema: dict) -> bool:
    """The verdict of jsonschema-rs over the same metaschema document jsonschema checks against (`cls.META_SCHEMA`,
    formats not asserted, as in jsonschema's check), ~80x cheaper: a schema it accepts is valid; for one it rejects
    (or that is not plain JSON, or too deep for it) jsonschema decides and says where. The two agree on all 8,913
    jsonschemabench schemas and 17,826 copies with one keyword given a wrong value (a sample in the tests). Its own
    metaschemas differ (draft 4's `enum` may be empty or repeat), hence the document, not the draft name."""
    if not _plain_json(schema, _RUST_MAX_DEPTH):
        return False
    try:
        return _rust_metaschema(cls).is_valid(schema)
    except Exception:  # (an input it refuses: jsonschema decides)
        return False


@functools.cache
def _rust_metaschema(cls):
    import jsonschema_rs

    return jsonschema_rs.validator_for(cls.META_SCHEMA, validate_formats=False)


def _plain_json(node, max_depth: int) -> bool:
    """Is `node` made of JSON's own types only (dicts with string keys, lists, strings, numbers, booleans, None),
    nested at most `max_depth` levels? (jsonschema-rs reads a tuple as an array, which jsonschema does not.)"""
    stack = [(node, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if depth >= max_depth or not all(type(k) is str for k in node):
                return False
            stack += [(v, depth + 1) for v in node.values() if type(v) not in _SCALARS]
        elif isinstance(node, list):
            if depth >= max_depth:
                return False
            stack += [(v, depth + 1) for v in node if type(v) not in _SCALARS]
        elif type(node) not in _SCALARS:
            return False
    return True


_SCALARS = frozenset({str, int, float, bool, type(None)})


def compile_schema(
    schema_or_model: Any, tokenizer, budget: Budget | None = None, max_depth: int = 3,
    cpu_seconds: float | None = None, memory_bytes: int | None = None,
) -> CompiledSchema:
    """Compile a JSON Schema (dict, boolean, JSON text) or a pydantic model class into a canvas template.

    Recursive `$ref`s unfold up to `max_depth` times; below that, optional members and array items are left out.
    Results are cached by the canonical schema text, tokenizer and budget. `cpu_seconds` / `memory_bytes` bound the
    compile (this thread's CPU time, growth of the process's memory; see `diffreason.limits.cpu_budget`): past
    either it stops with a SchemaError, in any thread.
    """
    schema = load_schema(schema_or_model)
    budget = budget or Budget()
    try:
        key = (json.dumps(schema, sort_keys=True), id(tokenizer), astuple(budget), max_depth)
    except (TypeError, ValueError):  # not JSON-serialisable: compile without the cache
        key = None

    def build() -> CompiledSchema:
        eos_id, vocab = tokenizer.eos_token_id, len(tokenizer)
        # (an id in the vocabulary needs no checks: the checking constructor cost a small schema 2 % of its compile)
        eos = (CanvasTemplate._of(vocab, torch.tensor([eos_id])) if isinstance(eos_id, int) and 0 <= eos_id < vocab
               else CanvasTemplate.from_positions(vocab, [eos_id]))
        try:
            translation = to_2020_12(schema)  # (keywords read as the schema's draft defines them)
            compiler = _Compiler(translation.document, tokenizer, budget, max_depth, translation.names)
            template = CanvasTemplate.join(compiler.template(translation.schema) + [eos])
        except DiffreasonError:
            raise
        except Exception:  # a malformed schema (a string where a number goes): say where, not how it broke
            check_schema(schema)
            raise
        # checked after the compiler's own errors, which say more about what it cannot do
        check_schema(schema)
        return CompiledSchema(copy.deepcopy(schema), template, tuple(compiler.fixed))

    def guarded() -> CompiledSchema:
        too_deep = SchemaError("the schema nests too deeply for the compiler (Python's recursion limit)")
        try:
            # (no garbage collection inside: what a compile builds it mostly keeps — templates, cached automata)
            with paused_gc(), limits.cpu_budget(cpu_seconds, memory_bytes, "compiling the schema"):
                return build()
        except limits.BudgetExceeded as exc:
            raise SchemaError(f"compile budget exceeded: {exc}") from None
        except RecursionError:
            raise too_deep from None
        except BaseException as exc:  # a Rust extension (jsonschema's rpds) panics when Python's stack runs out
            if type(exc).__name__ == "PanicException" and "RecursionError" in str(exc):
                raise too_deep from None
            raise

    if key is None:
        return guarded()
    return _COMPILED.get(key, guarded, lambda c: c.template.nbytes)


# Compiled schemas by (canonical schema, tokenizer, budget): a server or a program that sends the same schema again
# pays the compile once. Templates are never modified in place, so sharing them is safe.
_COMPILED = BytesLRU(512 * 2**20)
_TEXTS = BytesLRU(16 * 2**20)


def clear_compile_caches() -> None:
    """Forget compiled schemas, fixed texts, slots, token and character automata, parsed regexes, emptiness verdicts,
    token groups (benchmarks time compiles from scratch; what is kept per tokenizer is its vocabulary as outlines
    spells it)."""
    for cache in (_COMPILED, _TEXTS):
        cache.clear()
    Compiler.clear_all()
