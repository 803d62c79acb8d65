"""`SchemaCompiler`: the compiler of one schema, its parts combined; `compile_document`: one compile, bounded.

Each concern is a mixin in its own module, all sharing `CompilerState` (base.py):

    rewrite.py     RewriteMixin      $ref, if / then / else, allOf merges, dependentSchemas, anyOf / oneOf siblings
    negation.py    NegationMixin     `not` folded in; oneOf branches made to exclude each other
    values.py      ValuesMixin       regexes of scalars and finite sets; the keyword checks per type
    containers.py  ContainersMixin   regexes of arrays and objects; which items and members are written
    layout.py      LayoutMixin       the template: scaffold, slots, fixed choices

keywords.py lists every keyword and the methods that read it (tests/test_json_schema_layers.py checks they exist).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from diffreason import limits
from diffreason.canvas import CanvasTemplate
from diffreason.constrain.dfa import paused_gc
from diffreason.errors import DiffreasonError, SchemaError
from diffreason.tasks.json_schema.base import Budget, CompilerState
from diffreason.tasks.json_schema.containers import ContainersMixin
from diffreason.tasks.json_schema.layout import LayoutMixin, end_of_sequence, random_filling
from diffreason.tasks.json_schema.load import check_schema, endless_reference, to_2020_12, validator
from diffreason.tasks.json_schema.negation import NegationMixin
from diffreason.tasks.json_schema.rewrite import RewriteMixin
from diffreason.tasks.json_schema.values import ValuesMixin


class SchemaCompiler(LayoutMixin, ContainersMixin, ValuesMixin, NegationMixin, RewriteMixin, CompilerState):
    """One schema (2020-12, inside its root document) → a canvas template: `document(schema, end)`, or
    `template(schema)` for a value's parts. Holds the state of that one compile (see CompilerState)."""


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
        """Raise jsonschema.ValidationError unless `value` validates (formats checked, as far as jsonschema can);
        `limits.EndlessRecursion` where jsonschema recurses without end on the schema."""
        error = limits.best_validation_error(validator(self.schema), value)
        if error is not None:
            raise error


def compile_document(schema: dict | bool, tokenizer, budget: Budget, max_depth: int, cpu_seconds: float | None,
                     memory_bytes: int | None) -> CompiledSchema:
    """One compile of a loaded schema (see `compile_schema`), within its CPU / memory budget, every failure a
    SchemaError (a malformed schema says where it is malformed; a too deep one says so)."""

    def build() -> CompiledSchema:
        end = end_of_sequence(tokenizer)
        try:
            translation = to_2020_12(schema)  # (keywords read as the schema's draft defines them)
            cycle = endless_reference(translation)
            if cycle:
                raise SchemaError(f"'$ref' {cycle[0]} applies the schema to the same value again without end "
                                  f"(through {', '.join(cycle)}): no validator can evaluate it")
            compiler = SchemaCompiler(translation.document, tokenizer, budget, max_depth, translation.names)
            template = compiler.document(translation.schema, end)
        except DiffreasonError:
            raise
        except Exception:  # a malformed schema (a string where a number goes): say where, not how it broke
            check_schema(schema)
            raise
        # checked after the compiler's own errors, which say more about what it cannot do
        check_schema(schema)
        return CompiledSchema(copy.deepcopy(schema), template, tuple(compiler.fixed))

    too_deep = SchemaError("the schema nests too deeply for the compiler (Python's recursion limit)")
    try:
        # (no garbage collection inside: what a compile builds it mostly keeps — templates, cached automata)
        with paused_gc(), limits.cpu_budget(cpu_seconds, memory_bytes, "compiling the schema"):
            return build()
    except limits.BudgetExceeded as exc:
        raise SchemaError(f"compile budget exceeded: {exc}") from None
    except BaseException as exc:
        if limits.stack_ran_out(exc):
            raise too_deep from None
        raise
