"""Canvas layout: a schema's value as a template — a fixed scaffold (braces, keys, commas) around fixed-length slots.

The scaffold — braces, keys, quotes, colons, commas of required properties — is fixed; every value is a fixed-length
*slot*: its regex (values.py, containers.py) becomes a token automaton that gives per-position allowed sets plus a
constrained commit. Values end early with pad tokens, which decoding removes. Optional properties, enums, booleans,
anyOf / oneOf branches and array lengths are choices inside a slot's language, so the model makes them — except where
a value is too complex for one slot: then its structure is fixed (one branch, the members, the item count), a choice
listed in `fixed`, and each part gets its own template (`LayoutMixin.template`, `scaffold`).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import torch

from diffreason import limits
from diffreason.canvas import CanvasTemplate
from diffreason.constrain.chardfa import AutomatonTooLarge
from diffreason.constrain.regex import group, lit, optional, seq
from diffreason.errors import SchemaError, TemplateError
from diffreason.tasks.json_schema.base import (
    CHOICE_FACTOR, DepthLimit, NoValue, TooComplex, canonical, finite_values, json_text,
)
from diffreason.tasks.json_schema.keywords import NOT_MULTIPLES

# The tokenizer's constraint compiler keeps the fixed texts (braces, commas, member names) under this name.
TEXTS_CACHE = "json_schema.texts"


def random_filling(template: CanvasTemplate, generator) -> list[int]:
    """A filling of `template` as the engine commits one (each slot's best path), from random logits."""
    tokens = template.fixed.clone()
    for slot in template.slots:
        lp = torch.randn(slot.length, template.vocab_size, generator=generator).mul(3).log_softmax(-1)
        tokens[slot.start : slot.start + slot.length] = torch.tensor(slot.automaton.best_path(lp, slot.backward))
    return tokens.tolist()


def end_of_sequence(tokenizer) -> CanvasTemplate:
    """The template's last position: the tokenizer's end-of-sequence token."""
    eos_id, vocab = tokenizer.eos_token_id, len(tokenizer)
    # (an id in the vocabulary needs no checks: the checking constructor cost a small schema 2 % of its compile)
    return (CanvasTemplate.from_parts(vocab, torch.tensor([eos_id])) if isinstance(eos_id, int) and 0 <= eos_id < vocab
            else CanvasTemplate.from_positions(vocab, [eos_id]))


class LayoutMixin:
    """Templates of values (methods of CompilerState and the other mixins are reached through `self`)."""

    def text(self, s: str) -> CanvasTemplate:
        """Every position fixed: the tokens of `s` (kept per tokenizer: braces, commas and member names recur)."""
        return self.constraints.cache(TEXTS_CACHE, 16 * 2**20).get(s, lambda: CanvasTemplate.from_parts(
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
                if finite_values(self.resolve(resolved["items"], "", seen)[0]) is not None:
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
            return CanvasTemplate.from_regex(regex, self.tokenizer, length, intersections, python=False)
        except AutomatonTooLarge as exc:  # (a scaffold may still hold it: see `template`)
            raise TooComplex(f"value too complex for one slot ({exc}) at {path or '#'}") from None
        except TemplateError as exc:
            # the budget was too short for the tokenizer's spelling of the shortest value (a long pattern literal, a
            # long enum value): the slot grows to that spelling, with the budget's room to spare, up to a limit
            longest = 4 * self.budget.max_slot
            shortest = self.constraints.automaton(regex, intersections).shortest_length(longest)
            if shortest is None or shortest <= length:
                self.fail(path, f"cannot fit the value in {longest if shortest is None else length} tokens ({exc})")
            return CanvasTemplate.from_regex(regex, self.tokenizer, min(shortest + length, longest), intersections,
                                             python=False)

    # -- scaffold ---------------------------------------------------------------------------------------------------

    def document(self, schema: Any, end: CanvasTemplate) -> CanvasTemplate:
        """The template of the whole output: a value of `schema` (the translated root), then `end` (the end of the
        sequence)."""
        return CanvasTemplate.join(self.template(schema) + [end])

    def template(self, schema: Any, path: str = "", seen: tuple = ()) -> list[CanvasTemplate]:
        """The template of a value, as parts to join: a fixed scaffold for objects with members, a slot for every
        other value.

        A value whose regex is too complex for one slot (an optional object member, an array of objects, anyOf
        over objects or a type list, a non-empty map of objects) gets a scaffold instead (see `scaffold`), with its
        structure fixed — a sound subset, listed in `self.fixed`; so does an object whose members only `required`
        names (nothing fixed).
        """
        schema, path, seen = self.resolve(schema, path, seen)
        if isinstance(schema.get("type"), list) and len(schema["type"]) == 1:  # ["object"] is "object"
            schema = {**schema, "type": schema["type"][0]}
        declared = any(v is not False for v in schema.get("properties", {}).values())  # (false: a name left out)
        if self.plain_object(schema) and declared:
            return self.object_template(schema, path, seen)
        too_complex = None
        try:
            regex, length = self.value_regex(schema, path, seen)
        except TooComplex as exc:
            regex, length, too_complex = None, 0, exc
        limit = self.regex_limit(schema, seen)
        if regex is not None and self.regex_size(regex) <= limit:
            try:
                return [self.slot(regex, length, path, limit)]
            except TooComplex as exc:  # its automaton outgrew the state limit
                regex, too_complex = None, exc
        return self.scaffold(schema, path, seen, regex, length, too_complex)

    @staticmethod
    def plain_object(schema: dict) -> bool:
        """Is `schema` (resolved) an object schema with no choice of its own (anyOf, oneOf, enum, const)?"""
        is_object = schema.get("type") == "object" or ("type" not in schema and "properties" in schema)
        return is_object and not any(k in schema for k in ("anyOf", "oneOf", "enum", "const"))

    def scaffold(self, schema: dict, path: str, seen: tuple, regex: str | None, length: int,
                 too_complex: TooComplex | None) -> list[CanvasTemplate]:
        """The template of a value too complex for one slot (`regex` None, or longer than a slot takes): one
        anyOf / oneOf branch, always; the members of an object named only by `required`; one member of a non-empty
        map; one type of a type list; an array's items, their count fixed. Without a structure to fix, the slot it
        is (which fails: too complex)."""
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.branch_template(schema, key, path, seen)
        if self.plain_object(schema):
            if isinstance(schema.get("required"), list) and schema["required"]:  # members named only by `required`
                return self.object_template(schema, path, seen)
            if schema.get("minProperties", 0) >= 1 and not self.members(schema, path, seen)[0]:  # a map of such values
                return self.map_template(schema, path, seen)
        if isinstance(schema.get("type"), list):  # as for anyOf: the first type that has a template, always
            parts = self.type_list_template(schema, path, seen, too_complex)
            if parts is not None:
                return parts
        kind = schema.get("type") if isinstance(schema.get("type"), str) else self.infer_type(schema, path)
        if kind == "array":
            return self.array_template(schema, path, seen)
        if regex is None:  # too complex, and no structure to fix
            raise too_complex
        return [self.slot(regex, length, path)]  # fails: too complex, and no structure to fix

    def branch_template(self, schema: dict, key: str, path: str, seen: tuple) -> list[CanvasTemplate]:
        """anyOf / oneOf: the first branch that has a template, always (a fixed choice)."""
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

    def type_list_template(self, schema: dict, path: str, seen: tuple,
                           too_complex: TooComplex | None) -> list[CanvasTemplate] | None:
        """A type list: the first type that has a template, always (a fixed choice); None for an empty list."""
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
        return None

    def array_template(self, schema: dict, path: str, seen: tuple) -> list[CanvasTemplate]:
        """An array's items each with a template of its own: a tuple's items, or max(minItems, 1) items of a list
        (a fixed count; minItems alone inside another written-for-you value); distinct values where they must be."""
        self.check_keywords(schema, "array", path)
        items, is_tuple = self.array_items(schema, path)
        need = self.contains_count(schema, path)
        if not is_tuple:
            lo = max(int(schema.get("minItems", 0)), need)
            if schema.get("uniqueItems") and lo > 1:  # (a scaffold's items could repeat)
                return [self.text(json_text(self.distinct_items(schema, items * lo, path, seen)))]
            if need and (not items or int(schema.get("maxItems", need)) < need):
                raise NoValue(f"the array cannot hold the {need} items 'contains' needs at {path}/contains")
            # one item at least, unless nested in another written-for-you value (the template stays small)
            items = items * (lo if self.forced > 1 else max(1, lo))
            if need:  # the matching items first
                items = [self.matching_item(schema, items[0])] * need + items[need:]
            self.fix(f"{path or '#'}: always {len(items)} item(s)")
        elif need:
            items = self.containing_tuple(schema, items, need, path, seen)
        if is_tuple and schema.get("uniqueItems") and not self.pairwise_distinct(items, seen):
            return [self.text(json_text(self.distinct_items(schema, items, path, seen)))]
        parts = [self.text("[")]
        self.forced += 1
        try:
            for i, item in enumerate(items):
                parts += ([self.text(",")] if i else []) + self.template(item, f"{path}/items", seen)
        finally:
            self.forced -= 1
        return parts + [self.text("]")]

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
        """An object's scaffold: its required members fixed, each value a template of its own; its optional ones
        after them (see `optional_member_template`)."""
        self.check_keywords(schema, "object", path)
        props, required = self.members(schema, path, seen)
        if not required:  # as in object_regex: the first member that compiles is emitted anyway
            for key in props:
                try:
                    self.value_regex(props[key], f"{path}/properties/{key}", seen)
                except TooComplex:  # written with a scaffold of its own
                    pass
                except SchemaError:  # a member that cannot be written (depth limit, no value, unsupported)
                    continue
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
            parts += self.optional_member_template(key, props[key], path, seen)
        return parts + [self.text("}")]

    def optional_member_template(self, key: str, schema: Any, path: str, seen: tuple) -> list[CanvasTemplate]:
        """An optional member `key` of the object at `path`: a choice inside one slot where its regex fits; else
        written always, with its own scaffold — unless we are inside such a member already (recursive schemas would
        make the template grow exponentially): then left out. [] where it is not written."""
        where = f"{path}/properties/{key}"
        try:
            r, n = self.value_regex(schema, where, seen)
        except (DepthLimit, NoValue):  # a member that cannot be written (depth limit, no value)
            return []
        except TooComplex:
            r, n = None, 0
        except SchemaError as exc:  # a value this compiler cannot write
            self.leave_out(where, exc)
            return []
        limit = self.regex_limit(schema, seen)
        if r is not None and self.regex_size(member := optional(seq(lit("," + json_text(key) + ":"),
                                                                    group(r)))) <= limit:
            try:
                return [self.slot(member, n + len(key) + 4, where, limit)]
            except TooComplex:  # its automaton outgrew the state limit: as below
                pass
        if self.forced:
            self.fix(f"{where}: optional member left out")
            return []
        self.forced += 1
        try:
            value = self.template(schema, where, seen)
        except (DepthLimit, NoValue):
            return []
        except SchemaError as exc:
            self.leave_out(where, exc)
            return []
        finally:
            self.forced -= 1
        self.fix(f"{where}: optional member always written")
        return [self.text("," + json.dumps(key, ensure_ascii=False) + ":")] + value

    # -- fixed choices: concrete values where a template cannot tell values apart -----------------------------------

    def distinct_items(self, schema: dict, items: list, path: str, seen: tuple) -> list:
        """len(items) distinct values, the i-th valid for items[i], that as an array the array schema accepts:
        found among random fillings of each item's own template, to be written as a fixed choice (uniqueItems where
        items may repeat: a template cannot tell a repeat from a new value)."""
        chosen: list = []
        for i, item in enumerate(items):
            taken = {canonical(v) for v in chosen}
            found = self.sample_values(item, f"{path}/items", seen,
                                       lambda v: canonical(v) not in taken, 1)
            if not found:
                self.fail(f"{path}/uniqueItems", f"unsupported keyword 'uniqueItems' (no distinct value found for "
                                                 f"item {i})")
            chosen += found
        if not self.valid(chosen, schema):
            self.fail(f"{path}/uniqueItems", "unsupported keyword 'uniqueItems' (the distinct values found do not "
                                             "make a valid array)")
        self.fix(f"{path or '#'}: always the items {json_text(chosen)[:60]} (uniqueItems)")
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
