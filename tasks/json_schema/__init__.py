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

This module is the API; the compiler is split by concern, each module importing only those listed before it:

    patterns.py    a `pattern` → a regex over JSON string bodies
    load.py        reading schemas, drafts 4 to 2019-09 translated to 2020-12, the metaschema check
    keywords.py    every keyword, what it constrains and the method that reads it — where a keyword is added
    base.py        errors, Budget, JSON value helpers, `CompilerState` (what one compile holds and checks)
    rewrite.py     $ref, if / then / else, allOf merges (`RewriteMixin`)
    negation.py    `not` folding, oneOf exclusion (`NegationMixin`)
    values.py      regexes of strings, formats, numbers, enums (`ValuesMixin`)
    containers.py  regexes of arrays and objects (`ContainersMixin`)
    layout.py      the template: scaffold, slots, fixed choices (`LayoutMixin`)
    compiler.py    `SchemaCompiler`, the mixins combined; one bounded compile

Only load.py is imported with this module (the command line reads a schema file before it imports torch); the other
public names are imported on first use (PEP 562).
"""

from __future__ import annotations

import importlib
import json
from dataclasses import astuple
from typing import TYPE_CHECKING, Any

from diffreason.errors import SchemaError
from diffreason.tasks.json_schema.load import (
    check_schema, load_schema, load_schema_file, parse_json_text, validator,
)

if TYPE_CHECKING:
    from diffreason.tasks.json_schema.base import Budget
    from diffreason.tasks.json_schema.compiler import CompiledSchema, SchemaCompiler
    from diffreason.tasks.json_schema.layout import random_filling
    from diffreason.tasks.json_schema.values import FORMATS, SPEC_FORMATS, integer_regex

# public name -> the submodule that defines it (imported on first use)
_EXPORTS = {
    "Budget": "base", "CompiledSchema": "compiler", "SchemaCompiler": "compiler", "random_filling": "layout",
    "FORMATS": "values", "SPEC_FORMATS": "values", "integer_regex": "values",
}

__all__ = [
    "FORMATS", "SPEC_FORMATS", "Budget", "CompiledSchema", "SchemaCompiler", "SchemaError", "check_schema",
    "clear_compile_caches", "compile_schema", "integer_regex", "load_schema", "load_schema_file", "parse_json_text",
    "random_filling", "validator",
]

# The tokenizer's constraint compiler keeps compiled schemas under this name, by (canonical schema, budget, depth): a
# server or a program that sends the same schema again pays the compile once. Templates are never modified in
# place, so sharing them is safe.
COMPILED_CACHE = "json_schema.compiled"


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
    from diffreason.constrain.compiler import Compiler
    from diffreason.tasks.json_schema.base import Budget
    from diffreason.tasks.json_schema.compiler import compile_document

    schema = load_schema(schema_or_model)
    budget = budget or Budget()
    try:
        key = (json.dumps(schema, sort_keys=True), astuple(budget), max_depth)
    except (TypeError, ValueError):  # not JSON-serialisable: compile without the cache
        key = None

    def compile_it() -> CompiledSchema:
        return compile_document(schema, tokenizer, budget, max_depth, cpu_seconds, memory_bytes)

    if key is None:
        return compile_it()
    cache = Compiler.for_tokenizer(tokenizer).cache(COMPILED_CACHE, 512 * 2**20)
    return cache.get(key, compile_it, lambda c: c.template.nbytes)


def clear_compile_caches() -> None:
    """Forget compiled schemas, fixed texts, slots, token and character automata, parsed regexes, emptiness verdicts,
    token groups (benchmarks time compiles from scratch; what is kept per tokenizer is its vocabulary as outlines
    spells it)."""
    from diffreason.constrain.compiler import Compiler

    Compiler.clear_all()


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # (imported once)
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
