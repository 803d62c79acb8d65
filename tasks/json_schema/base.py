"""What every part of the JSON-schema compiler shares: its errors, budget, JSON value helpers and `CompilerState`.

`CompilerState` holds the state of one compile — the root document, the tokenizer's constraint compiler, the budget,
the choices fixed so far, the intersections written so far — and the checks every part makes: does a value validate
against a part of the schema (`valid`), the error naming a keyword and its path (`fail`). The mixins of rewrite.py,
negation.py, values.py, containers.py and layout.py build on it; compiler.py combines them into `SchemaCompiler`.
"""

from __future__ import annotations

import decimal
import fractions
import json
import math
import re
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from diffreason import limits
from diffreason.constrain.chardfa import intersections_in
from diffreason.constrain.compiler import Compiler
from diffreason.errors import SchemaError
from diffreason.tasks.json_schema.keywords import (
    ANNOTATIONS, APPLIES, EXCLUDED, MULTIPLES, NOT_MULTIPLES, PATTERNS, SUPPORTED,
)
from diffreason.tasks.json_schema.load import validator

# Python's re warns about a schema's pattern that a future version may read differently ("Possible set difference
# at position 5" for `[a-z--]`); it is the user's pattern, read today as validators read it, and the warning would be
# a second line beside a CLI's one-line error. Only warnings raised from this package's and jsonschema's own calls.
warnings.filterwarnings("ignore", message=r"Possible (nested set|set (difference|union|intersection|symmetric "
                        r"difference))", category=FutureWarning, module=r"(diffreason|jsonschema)(\.|$)")


class NoValue(SchemaError):
    """A (sub)schema that accepts no value at all; an anyOf / oneOf branch like that is simply never chosen."""


class TooComplex(SchemaError):
    """A value's regex grew past what any slot takes; a scaffold may still hold the value (see `template`)."""


class DepthLimit(SchemaError):
    """A recursive $ref reached the depth limit; optional places drop the member, required ones fail."""


# Public classes under the names these errors had when the compiler was one module: a failed compile's error type is
# part of its fingerprint (evals/template_hashes), which a refactoring must leave as it was. (`__qualname__` stays, so
# pickling finds the class.)
for _error in (NoValue, TooComplex, DepthLimit):
    _error.__name__ = "_" + _error.__qualname__


# Keywords (and path segments) around which an untyped schema's contradictory bounds are not traded for another type
COMBINING = {"not", "oneOf", "anyOf", "allOf", "if", "then", "else", "$ref", "$dynamicRef", "enum", "const",
             "dependentSchemas", "dependencies", "contains", "propertyNames"}


def contradictory_bounds(schema: dict, kind: str) -> bool:
    """Whether `kind`'s bounds in `schema` admit no value (minimum above maximum, minLength above maxLength, ...)."""
    def number(key):
        value = schema.get(key)
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None

    if kind == "number":
        lows = [(v, k == "exclusiveMinimum") for k in ("minimum", "exclusiveMinimum") if (v := number(k)) is not None]
        highs = [(v, k == "exclusiveMaximum") for k in ("maximum", "exclusiveMaximum") if (v := number(k)) is not None]
        return any(lo > hi or (lo == hi and (open_lo or open_hi)) for lo, open_lo in lows for hi, open_hi in highs)
    least, most = {"string": ("minLength", "maxLength"), "array": ("minItems", "maxItems"),
                   "object": ("minProperties", "maxProperties")}[kind]
    return number(least) is not None and number(most) is not None and number(least) > number(most)


@dataclass
class Budget:
    """Slot lengths in tokens for values whose length the schema leaves open."""

    string: int = 24
    number: int = 12
    array_items: int = 4
    max_slot: int = 96
    max_regex: int = 800  # larger regexes make the automaton construction slow (superlinear in the regex)
    max_length: int = 4096  # the longest template: minItems / minProperties / minLength that need more are refused


# An enum's regex may be this many times Budget.max_regex: its automaton is the values' trie (constrain.automata), built
# in one pass, so a 400-value enum of time zones (15k characters) compiles in milliseconds.
CHOICE_FACTOR = 40


def positive_number(value: Any) -> bool:
    """Is `value` a finite number above 0 (what multipleOf takes)?"""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf


def lcm(a: int | float, b: int | float) -> int | float:
    """The least common multiple of two positive numbers as their decimal texts read: for p1/q1 and p2/q2 in lowest
    terms, lcm(p1, p2) / gcd(q1, q2)."""
    x, y = (fractions.Fraction(decimal.Decimal(repr(v))) for v in (a, b))
    m = fractions.Fraction(math.lcm(x.numerator, y.numerator), math.gcd(x.denominator, y.denominator))
    return m.numerator if m.denominator == 1 else float(decimal.Decimal(m.numerator) / m.denominator)


def json_type(value: Any) -> str:
    """The JSON type of a value ("number" for integers too; booleans are not numbers)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object", type(None): "null"}[type(value)]


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values as JSON Schema has it: Python's, except that a boolean is never a number (Python's
    False == 0 == -0.0), in lists and objects too."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return a == b


def finite_values(schema: dict) -> list | None:
    """Every value `schema` names by its own const / enum / type boolean or null (None: not a finite set)."""
    if "const" in schema:
        return [schema["const"]]
    if "enum" in schema and isinstance(schema["enum"], list):
        return list(schema["enum"])
    if schema.get("type") == "boolean":
        return [True, False]
    if schema.get("type") == "null":
        return [None]
    return None


def canonical(value: Any) -> str:
    """A text equal for two JSON values exactly when JSON Schema calls them equal (uniqueItems, enum, const): 1 and
    1.0 alike, true and 1 not, members in any order."""
    return json.dumps(_integral_as_int(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _integral_as_int(value: Any) -> Any:
    """`value` with every float of an integral value made an int (of the same value: 1e16 is 10**16), at any depth."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral_as_int(x) for k, x in value.items()}
    if isinstance(value, list):
        return [_integral_as_int(x) for x in value]
    return value


def json_text(value: Any) -> str:
    """`value` as compact JSON text (the spelling values are written in). A number with an integral value is written
    as an integer (0.0 and -0.0 as 0, 1e16 as 10000000000000000): equal to the float under enum / const /
    uniqueItems in every draft, and an integer in every draft too — draft 4 calls 1.0 and 1e16 no integer, while the
    compiler reads values as 2020-12 does."""
    return json.dumps(_integral_as_int(value), separators=(",", ":"), ensure_ascii=False)


def json_literal(value: Any) -> str:
    """A regex matching exactly `value`'s JSON text."""
    return re.escape(json_text(value))


class CompilerState:
    """The state of one compile and the checks every part of the compiler makes."""

    def __init__(self, root: dict, tokenizer, budget: Budget, max_depth: int = 3, ref_names: dict | None = None):
        self.root = root  # (2020-12: load.to_2020_12's document)
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
        self.regex_memo: dict = {}  # value_regex's memo

    def intersect(self, *regexes: str) -> str:
        """A stand-in for the strings all `regexes` match (regex syntax has no intersection): a placeholder character
        from Unicode's private use plane 15, which value regexes never contain (they write non-ASCII as escapes);
        `slot` hands the automaton what each placeholder stands for (see constrain.chardfa.Intersections)."""
        if regexes not in self.intersections:
            self.intersections[regexes] = chr(0xF0000 + len(self.intersections))
        return self.intersections[regexes]

    def placeholders_in(self, regex: str) -> tuple:
        """The intersections `regex` holds placeholders of, as the automaton takes them (chardfa.Intersections) —
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

    def leave_out(self, where: str, exc: SchemaError) -> None:
        """An optional member whose value this compiler cannot write (`exc`: an unsupported keyword, bounds no value
        meets): the object never holds it, which every object without it satisfies; recorded as a fixed choice."""
        self.fix(f"{where}: optional member never written ({str(exc).rsplit(' at ', 1)[0]})")

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
            if excluded and any(re.fullmatch(x, json_text(value)) for x in excluded):  # (-0.0 as written: 0)
                return False
            if isinstance(value, str) and not all(re.search(p, value) for p in patterns):
                return False
            if json_type(value) in ("integer", "number") and (not all(v.is_valid(value) for v in multiples)
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
        # (a member name's control characters, escaped: a raw newline broke the one-line message)
        path = "".join(c if c.isprintable() else repr(c)[1:-1] for c in path)
        raise SchemaError(f"{message} at {path or '#'}")

    def infer_type(self, schema: dict, path: str) -> str | None:
        """A type whose keywords the schema uses (its values then meet them; other types' keywords are moot), or
        None when only keywords for every type are present."""
        for kind in ("object", "array", "string", "number"):
            if schema.keys() & APPLIES[kind]:
                return kind
        return None
