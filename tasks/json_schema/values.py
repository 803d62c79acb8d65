"""Value regexes: what a slot holds for a string, number, integer, boolean, null or finite set (enum / const).

What outlines' regexes cannot express is added here: integer bounds (exact digit-range regexes), number bounds (a
sound subset), multipleOf (integers, or a choice among multiples that the validator's float division accepts), type
lists, formats (the regex tables FORMATS / FORMAT_CHARS below), patterns (patterns.py), and the complements a folded
`not` adds. `ValuesMixin.value_regex` is the entry for a value of any schema (memoised); `compute_value_regex`
dispatches on the type, to one method per type (keywords.VALUE_REGEXES; arrays and objects are containers.py's).
"""

from __future__ import annotations

import contextlib
import decimal
import json
import math
import re
from typing import Any

from diffreason.constrain.chardfa import Complement
from diffreason.constrain.regex import Choice, alt
from diffreason.errors import SchemaError
from diffreason.tasks.json_schema.base import (
    CHOICE_FACTOR, COMBINING, DepthLimit, NoValue, TooComplex, contradictory_bounds, json_text,
    positive_number,
)
from diffreason.tasks.json_schema.keywords import (
    ANNOTATIONS, ANY_VALUE, APPLIES, EXCLUDED, GENERIC, MULTIPLES, NOT_MULTIPLES, PATTERNS, SUPPORTED, TYPES,
    VALIDATION_KEYWORDS, VALUE_REGEXES,
)
from diffreason.tasks.json_schema.patterns import (
    LENGTH_CHAR, STRING_CHAR, PatternEmpty, PatternError, PatternLengthError, lookaround_parts, pattern_to_json_regex,
)
from diffreason.tasks.json_schema.patterns import parser as pattern_parser

# Largest |i| of a number i.dddd the number regex writes: below 2**39 a float's spacing is under 1e-4, so i.dddd
# parses to a float strictly between i - 1 and i + 1 (near 2**53 it rounds onto them, and past an exclusive bound).
FRACTION_LIMIT = 2**39 - 1

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


# ---- integers -----------------------------------------------------------------------------------------------------


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


def open_cap(bound: int | None) -> int:
    """How far an open side of an integer range reaches (a sound subset: integers beyond it are left out): 10^12, or
    every integer with one digit more than the other side's `bound` (a bound beyond 10^12 — a time in milliseconds —
    still leaves values above it)."""
    return 10**12 if bound is None else max(10**12, 10 ** (len(str(abs(bound))) + 1) - 1)


def integer_regex(lo: int | None, hi: int | None) -> str:
    """Decimal integers in [lo, hi] (None: unbounded on that side, up to `open_cap`)."""
    if lo is None and hi is None:
        return r"-?(0|[1-9][0-9]*)"
    lo_ = lo if lo is not None else -open_cap(hi)
    hi_ = hi if hi is not None else open_cap(lo)
    if lo_ > hi_:
        raise ValueError(f"empty integer range [{lo}, {hi}]")
    parts = []
    if lo_ < 0:
        parts.append(f"-({_natural_range(max(1, -min(hi_, -1)), -lo_)})")
    if hi_ >= 0:
        parts.append(_natural_range(max(0, lo_), hi_))
    return "|".join(f"({p})" for p in parts)


def _multiples_past_bounds(schema: dict, step: decimal.Decimal) -> list[int]:
    """k for the 99 multiples k·step nearest each finite bound, on its inner side (a minimum of 10^15 leaves no
    multiple among the small ones)."""
    ks = []
    for key, inward in (("minimum", 1), ("exclusiveMinimum", 1), ("maximum", -1), ("exclusiveMaximum", -1)):
        bound = schema.get(key)  # (a finite number: the loader refuses inf and nan, the metaschema other types)
        if bound is not None:
            rounding = decimal.ROUND_CEILING if inward > 0 else decimal.ROUND_FLOOR
            with decimal.localcontext() as context:
                context.prec = 400
                edge = int((decimal.Decimal(repr(bound)) / step).to_integral_value(rounding=rounding))
            ks += [edge + inward * j for j in range(99)]
    return ks


FAR_BOUND = 10**15  # an outer bound past it (float32's 3.4e38, a double's 1.8e308) is brought in by `_near_bounds`


def _near_bounds(schema: dict) -> dict:
    """`schema` with a far outer bound — a maximum above 10^15, a minimum below -10^15, as code generators write a
    float's or a double's range — brought in to where an open side of the range reaches (`open_cap`): a subset of the
    numbers, written short (the templates write no exponents: 3.4e38 written out is 39 digits). A far inner bound (a
    minimum of 1e300) stays: every number it admits is long."""
    lows = [schema[k] for k in ("minimum", "exclusiveMinimum") if k in schema]
    highs = [schema[k] for k in ("maximum", "exclusiveMaximum") if k in schema]
    lo, hi = max(lows, default=None), min(highs, default=None)
    far_lo, far_hi = lo is not None and lo < -FAR_BOUND, hi is not None and hi > FAR_BOUND
    out = schema
    if far_hi and (cap := open_cap(None if lo is None or far_lo else math.ceil(lo))) < hi:
        out = {k: v for k, v in out.items() if k != "exclusiveMaximum"} | {"maximum": cap}
    if far_lo and (cap := open_cap(None if hi is None or far_hi else math.floor(hi))) < -lo:
        out = {k: v for k, v in out.items() if k != "exclusiveMinimum"} | {"minimum": -cap}
    return out


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


class ValuesMixin:
    """Regexes of values (methods of CompilerState and the other mixins are reached through `self`)."""

    def value_regex(self, schema: Any, path: str, seen: tuple = ()) -> tuple[str, int]:
        """(regex, length budget in tokens) of any value of `schema`. Stops early once the regex is longer than any
        slot takes: nested anyOf over recursive objects would otherwise grow it exponentially.

        Memoised per (schema object, path, seen): the template walk asks again for values it has seen (an optional
        member's, then its object's), three times per value on jsonschemabench. The entry keeps the schema alive, so
        its id is not reused."""
        key = (id(schema), path, seen)
        if key not in self.regex_memo:
            try:
                self.regex_memo[key] = (schema, self._bounded_value_regex(schema, path, seen), None)
            except SchemaError as exc:
                self.regex_memo[key] = (schema, None, exc)
        _, result, error = self.regex_memo[key]
        if error is not None:
            raise error
        return result

    def _bounded_value_regex(self, schema: Any, path: str, seen: tuple) -> tuple[str, int]:
        regex, length = self.compute_value_regex(schema, path, seen)
        if self.regex_size(regex) > (CHOICE_FACTOR if isinstance(regex, Choice) else 10) * self.budget.max_regex:
            raise TooComplex(f"value too complex for one slot ({self.regex_size(regex)}-character regex) "
                             f"at {path or '#'}")
        return regex, length

    def compute_value_regex(self, schema: Any, path: str, seen: tuple = ()) -> tuple[str, int]:
        """(regex, length budget in tokens) of any value of `schema`, computed afresh: a finite set, a choice among
        branches or types, or a value of one type, written by that type's method (keywords.VALUE_REGEXES)."""
        schema, path, seen = self.resolve(schema, path, seen)
        if "const" in schema or "enum" in schema:
            return self.enum_regex(schema, path, seen)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.alternatives_regex(schema, key, path, seen)
        kind = schema.get("type")
        if isinstance(kind, list):
            return self.type_list_regex(schema, path, seen)
        if kind is None:
            kind = self.infer_type(schema, path)
            if kind is None:  # only keywords that apply to every type (or none at all)
                self.check_keywords(schema, "null", path)
                return self.value_regex(ANY_VALUE, path, seen)
            return self.untyped_regex(schema, kind, path, seen)
        if kind not in SUPPORTED:
            self.fail(f"{path}/type", f"unsupported type {kind!r}")
        self.check_keywords(schema, kind, path)
        # Budgets count characters: a token holds at least one, so the value always fits.
        return getattr(self, VALUE_REGEXES[kind])(schema, path, seen)

    def untyped_regex(self, schema: dict, kind: str, path: str, seen: tuple) -> tuple[str, int]:
        """A schema without `type` whose keywords are `kind`'s: a value of that kind; where its bounds admit none
        (`minimum: 5, maximum: 3`), a value of another type, which those keywords do not bind."""
        try:
            return self.compute_value_regex({**schema, "type": kind}, path, seen)
        except TooComplex:
            raise
        except SchemaError:
            if not contradictory_bounds(schema, kind) or seen or (schema.keys() | set(path.split("/"))) & COMBINING:
                raise  # (a value the compiler cannot write is refused, not traded for another type's; beside or
                # within not / oneOf / if ... another type may break them: a oneOf's other branch may take it too;
                # through a $ref the path no longer says where the value is: refused there too)
            bound = {kind, "integer"} if kind == "number" else {kind}
            others = [t for t in TYPES if t not in bound]
            regex = self.type_list_regex({**schema, "type": others}, path, seen)
            self.fix(f"{path or '#'}: no {kind} meets its bounds; a value of another type, which they do not bind")
            return regex

    def enum_regex(self, schema: dict, path: str, seen: tuple) -> tuple[str, int]:
        """A finite set (const / enum): the values that satisfy the whole schema (type, if/then, ... beside it)."""
        key = "const" if "const" in schema else "enum"
        values = [schema["const"]] if key == "const" else schema["enum"]
        if not isinstance(values, list):
            self.fail(f"{path}/enum", "'enum' must be a list")
        if not values:  # (drafts 6 and later allow it: it accepts nothing)
            raise NoValue(f"an empty 'enum' accepts no value at {path}/enum")
        lits = list(dict.fromkeys(json_text(v) for v in values if self.valid_member(v, schema, key)))
        if not lits:
            raise NoValue(f"no '{key}' value satisfies the rest of the schema at {path}/{key}")
        return Choice(lits), max(len(v) for v in lits) + 2

    def alternatives_regex(self, schema: dict, key: str, path: str, seen: tuple) -> tuple[str, int]:
        """anyOf / oneOf: a choice among the branches we can write (see `alternatives`)."""
        branches = self.alternatives(schema, key, path, seen)
        options, limit, unsupported = [], None, []
        for i, sub in enumerate(branches):
            try:
                options.append(self.value_regex(sub, f"{path}/{key}/{i}", seen))
            except (DepthLimit, NoValue) as exc:  # a branch that cannot be taken
                limit = exc
            except TooComplex:
                raise  # (`template` gives such a value a scaffold)
            except SchemaError as exc:
                if key == "oneOf":  # (its other branches' values were made to fail this one as written)
                    raise
                unsupported.append((i, exc))  # an anyOf branch we cannot write: the others still validate
        if not options:
            raise unsupported[0][1] if unsupported else limit
        for i, exc in unsupported:
            self.fix(f"{path or '#'}/{key}/{i}: never written ({str(exc).rsplit(' at ', 1)[0]})")
        return alt([r for r, _ in options]), max(n for _, n in options)

    def type_list_regex(self, schema: dict, path: str, seen: tuple) -> tuple[str, int]:
        """A type list: a choice among the types, each with its own keywords (see `per_type`); a type this compiler
        cannot write a value of (bounds no integer meets beside `number`) is left out, as an anyOf branch is."""
        options, failed = [], []
        for kind, sub in self.per_type(schema, path):
            try:
                options.append(self.value_regex(sub, path, seen))
            except TooComplex:
                raise  # (`template` gives such a value a scaffold)
            except SchemaError as exc:
                failed.append((kind, exc))
        if not options:
            raise failed[0][1]
        for kind, exc in failed:
            if not isinstance(exc, DepthLimit | NoValue):
                self.fix(f"{path or '#'}: type {kind!r} never written ({str(exc).rsplit(' at ', 1)[0]})")
        return alt([r for r, _ in options]), max(n for _, n in options)

    # -- one method per type (keywords.VALUE_REGEXES); arrays and objects are in containers.py ----------------------

    def null_regex(self, schema: dict, path: str, seen: tuple) -> tuple[str, int]:
        return "null", 4

    def boolean_regex(self, schema: dict, path: str, seen: tuple) -> tuple[str, int]:
        return "(true|false)", 5

    def integer_value_regex(self, schema: dict, path: str, seen: tuple) -> tuple[str, int]:
        """Integers within the bounds (exact digit-range regexes), or a choice among multiples (`multiples_regex`);
        those a folded `not` rules out (EXCLUDED: enum, const) intersected away."""
        schema = _near_bounds(_draft4_bounds(schema))
        if schema.keys() & {"multipleOf", NOT_MULTIPLES}:
            return self.multiples_regex(schema, "integer", path)
        lo, hi = schema.get("minimum"), schema.get("maximum")
        lo = None if lo is None else math.ceil(lo)
        hi = None if hi is None else math.floor(hi)
        if "exclusiveMinimum" in schema:
            xlo = math.floor(schema["exclusiveMinimum"]) + 1
            lo = xlo if lo is None else max(lo, xlo)
        if "exclusiveMaximum" in schema:
            xhi = math.ceil(schema["exclusiveMaximum"]) - 1
            hi = xhi if hi is None else min(hi, xhi)
        width = max(len(str(b)) for b in (lo, hi) if b is not None) if lo is not None or hi is not None else 0
        if lo is None or hi is None:  # (an open side: up to the budget, or one digit past the other bound)
            width = max(self.budget.number, width + 1)
        self.check_number_width(width, path)
        try:
            regex = integer_regex(lo, hi)
        except ValueError as exc:
            self.fail(path, str(exc))
        if EXCLUDED in schema:  # integers a `not` rules out (enum, const)
            parts = (regex, *(Complement(x) for x in schema[EXCLUDED]))
            regex = self.intersect(*parts)
            if self.constraints.matches_nothing(regex, ((regex, parts),)):
                raise NoValue(f"no integer satisfies the schema and its 'not' at {path or '#'}")
        return regex, width

    def number_value_regex(self, schema: dict, path: str, seen: tuple) -> tuple[str, int]:
        """Numbers within the bounds (a sound subset: `number_regex`), or a choice among multiples."""
        schema = _near_bounds(_draft4_bounds(schema))
        if schema.keys() & {"multipleOf", NOT_MULTIPLES}:
            return self.multiples_regex(schema, "number", path)
        bounds = [schema.get(k) for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")]
        # one digit past the widest bound (an open side reaches one digit further), a fraction (.dddd) and a sign
        width = max(self.budget.number, max((len(str(abs(math.floor(b)))) + 1 for b in bounds if b is not None),
                                            default=0)) + 4
        self.check_number_width(width, path)
        return self.number_regex(schema, path), width

    def check_number_width(self, width: int, path: str) -> None:
        """Refuse numbers whose bounds need more characters than a slot holds (a minimum of 1e300 is 301 digits
        written out: the templates write no exponents)."""
        if width > self.budget.max_slot:
            self.fail(path, f"numeric bounds need numbers of {width} characters, more than a slot holds "
                            f"({self.budget.max_slot}; numbers are written without exponents)")

    def multiples_regex(self, schema: dict, kind: str, path: str) -> tuple[str, int]:
        """multipleOf d: multiples of 1 are the integers within the bounds. Otherwise a choice among multiples k·d,
        k spread over magnitudes (1..99 × 10^e, e = 0..2, and 0; negated too where the bounds allow). No digit pattern
        is exact: validators divide in floating point, so 0.07 fails multipleOf 0.01 (0.07 / 0.01 = 7.000000000000001)
        — each candidate is kept only if it validates against the whole schema. A number that must not be a multiple
        of some values (a folded `not`) is such a choice too, among multiples of d, or of 1 without multipleOf."""
        d = schema.get("multipleOf", 1)
        if not positive_number(d):
            self.fail(f"{path}/multipleOf", f"'multipleOf' must be a positive number, got {d!r}")
        rest = {k: v for k, v in schema.items() if k != "multipleOf"}
        if d == 1 and not schema.keys() & {MULTIPLES, NOT_MULTIPLES}:
            return self.value_regex({**rest, "type": "integer"}, path)  # (3 / 0.1 is no integer: not with MULTIPLES)
        ks = sorted({m * 10**e for m in range(1, 100) for e in range(3)})
        # a number that only must not be a multiple may be a decimal (not a multiple of 0.5, within [0, 3])
        steps = [d] if "multipleOf" in schema or kind == "integer" else [1, 0.1]
        valid = self.checker(schema)
        for step in map(decimal.Decimal, map(repr, steps)):
            texts = (format((step * k).normalize(), "f")
                     for k in dict.fromkeys([0, *ks, *(-k for k in ks), *_multiples_past_bounds(schema, step)]))
            lits = [text for text in texts  # (the checker honours EXCLUDED too)
                    if len(text) <= 40 and valid(json.loads(text))]
            if lits:
                return Choice(lits), max(len(v) for v in lits)
        if "multipleOf" not in schema:
            self.fail(f"{path}/not", "unsupported keyword 'not' (of multipleOf: no number tried, k or k/10 for "
                                     "|k| <= 9900 or near a bound, validates)")
        self.fail(f"{path}/multipleOf", f"unsupported keyword 'multipleOf' ({d!r}: none of the multiples tried, "
                                        f"k·{d!r} for |k| <= 9900 and the 99 nearest each bound, of at most 40 "
                                        "characters, validates)")

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
            if fraction:  # i.dddd only where a float holds it to a ten-thousandth, so it cannot round onto a bound
                a = -FRACTION_LIMIT if a is None else max(a, -FRACTION_LIMIT)
                b = FRACTION_LIMIT if b is None else min(b, FRACTION_LIMIT)
            if a is not None and b is not None and a > b:
                return
            body = integer_regex(a, b)
            options.append(f"({body})\\.[0-9]{{1,4}}" if fraction else body)

        add(int_lo, int_hi, False)
        integers = len(options)
        neg_hi = -1 if int_hi is None else min(-1, int_hi)
        add(None if low is None else math.ceil(low + 1), neg_hi, True)
        pos_lo = 0 if int_lo is None else max(0, int_lo)
        add(pos_lo, None if high is None else math.floor(high) - 1, True)
        if not options:  # no integer and no i.f within the bounds: a choice among decimals between them
            return self.decimals_between(schema, low, high, path)
        if len(options) == integers and low is not None and high is not None:  # (a range narrower than its
            with contextlib.suppress(SchemaError):                              # fractions: [1, 1.5] wrote 1 only)
                options.append(self.decimals_between(schema, low, high, path))
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

    # -- strings: lengths, formats, patterns ------------------------------------------------------------------------

    def string_regex(self, schema: dict, path: str, seen: tuple = ()) -> tuple[str, int]:
        """Strings with their lengths, format, patterns and the complements a folded `not` adds (EXCLUDED), as the
        intersection of their regexes."""
        fmt = schema.get("format") if schema.get("format") in FORMATS else None  # others annotate (SPEC_FORMATS)
        # Width: the slot's length in tokens. Budgets count characters (a token holds at least one), so values fit.
        width = FORMAT_CHARS[fmt] if fmt else self.budget.string
        lo = int(schema.get("minLength", 0))
        hi = schema.get("maxLength")
        if lo < 0 or (hi is not None and hi < 0):  # (a malformed schema; was an automaton error)
            self.fail(path, "minLength and maxLength must not be negative")
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
            # (counting every character a pattern or format may write: a pattern's é is \u00e9, one character)
            regexes.append(f'"{LENGTH_CHAR}{{{lo},{hi}}}"')
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
            negated = " and its not" if excluded else ""
            subset = (" (of the strings this compiler writes: a subset of a format's, printable ASCII for a pattern's "
                      "classes)" if "format" in schema or schema.get("pattern") or schema.get(PATTERNS) else "")
            raise NoValue(f"no string satisfies {together}{negated}{capped}{subset} at {path or '#'}")
        return regex, width

    def pattern_failure(self, exc: PatternError, where: str):
        """A pattern no string we write can match (PatternEmpty: no value, an optional member is left out), or one
        this compiler cannot read (an error naming the keyword)."""
        if isinstance(exc, PatternEmpty):
            raise NoValue(f"{exc} at {where}")
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

    # -- types and the keywords that apply to them ------------------------------------------------------------------

    def per_type(self, schema: dict, path: str) -> list[tuple[str, dict]]:
        """(type, its schema) for each type of a type list: keywords apply only to instances of their type, so each
        keeps its own."""
        for t in schema["type"]:
            if t not in SUPPORTED:
                self.fail(f"{path}/type", f"unsupported type {t!r}")
            self.check_keywords(schema, t, path)
        return [(t, {k: v for k, v in schema.items() if k in SUPPORTED[t] or k in ANNOTATIONS} | {"type": t})
                for t in schema["type"]]

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
                raise NoValue(f"maxProperties {schema['maxProperties']} below the {len(required)} required members "
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
                except re.error as exc:  # (the message said the pattern only, not what is wrong with it)
                    self.fail(f"{path}/patternProperties", f"pattern {pattern!r} is not a regular expression Python "
                                                           f"accepts: {exc}")
            if list(patterns) == [""] and schema.get("additionalProperties", True) is not True:
                # (jsonschema joins the patterns with "|" to find the additional names, and an empty join is no
                # pattern: every name written under "" fails additionalProperties there, the outputs' check)
                self.fail(f"{path}/patternProperties", "the empty pattern alone beside additionalProperties: "
                                                       "jsonschema reads it as no pattern; write '^' for every name")
