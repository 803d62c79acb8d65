"""Arrays and objects: their regexes (what one slot holds) and the items and members we write.

An array is a tuple (its items in order) or a list of one item schema (minItems..maxItems of them, maxItems capped
at Budget.array_items); `contains` is met by the first items, uniqueItems by choices among a finite item set (or a
fixed array of distinct values). An object writes its required members always and its declared optional ones as
choices (`members` works out which: dependencies, minProperties / maxProperties, patternProperties,
additionalProperties, propertyNames); a map that must not be empty writes one member with a generated name.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import re
from typing import Any

from diffreason.constrain.chardfa import AutomatonTooLarge, Complement, shortest_strings
from diffreason.constrain.regex import Choice, group, lit, optional, repeat, seq
from diffreason.errors import SchemaError
from diffreason.tasks.json_schema.base import (
    DepthLimit, NoValue, TooComplex, canonical, finite_values, json_literal, json_text,
)
from diffreason.tasks.json_schema.keywords import ANY_VALUE, VALIDATION_KEYWORDS
from diffreason.tasks.json_schema.patterns import STRING_CHAR, PatternError, encoded_literal, searched_json_regex

# What we write for the items of an array that declares none (any item is valid): strings (one object, so that
# `matching_item` knows it by identity)
UNDECLARED_ITEM = {"type": "string"}


class ContainersMixin:
    """Arrays and objects (methods of CompilerState and the other mixins are reached through `self`)."""

    # -- arrays -----------------------------------------------------------------------------------------------------

    def array_regex(self, schema: dict, path: str, seen: tuple) -> tuple[str, int]:
        """Arrays: [] where no item is written; a tuple's items in order; else lo..hi items of one schema."""
        item_schemas, is_tuple = self.array_items(schema, path)
        need = self.contains_count(schema, path)
        if not item_schemas:
            if need:
                raise NoValue(f"'contains' needs an item, and the array holds none at {path}/contains")
            return seq(lit("["), lit("]")), 2
        if is_tuple:
            return self.tuple_regex(schema, item_schemas, need, path, seen)
        return self.list_regex(schema, item_schemas[0], need, path, seen)

    def tuple_regex(self, schema: dict, item_schemas: list, need: int, path: str, seen: tuple) -> tuple[str, int]:
        """Exactly these items (the first `need` also matching `contains`)."""
        item_schemas = self.containing_tuple(schema, item_schemas, need, path, seen)
        if schema.get("uniqueItems") and not self.pairwise_distinct(item_schemas, seen):
            text = json_text(self.distinct_items(schema, item_schemas, path, seen))
            return Choice([text]), len(text) + 2
        parts = [self.value_regex(s, f"{path}/items/{i}", seen) for i, s in enumerate(item_schemas)]
        items = [group(r) if i == 0 else seq(lit(","), group(r)) for i, (r, _) in enumerate(parts)]
        return seq(lit("["), *items, lit("]")), 2 + sum(n + 1 for _, n in parts)

    def list_regex(self, schema: dict, item: Any, need: int, path: str, seen: tuple) -> tuple[str, int]:
        """minItems..maxItems items of one schema (maxItems capped at the budget's item count)."""
        lo = max(int(schema.get("minItems", 0)), need)
        hi = min(int(schema.get("maxItems", max(lo, self.budget.array_items))), max(lo, self.budget.array_items))
        if need:
            return self.containing_array_regex(schema, item, need, lo, hi, path, seen)
        try:
            item_regex, item_len = self.value_regex(item, f"{path}/items", seen)
        except (DepthLimit, NoValue):  # a member that cannot be written (depth limit, no value)
            if lo > 0:
                raise
            return seq(lit("["), lit("]")), 2
        if schema.get("uniqueItems") and hi > 1:
            return self.unique_array_regex(schema, item, item_regex, item_len, lo, hi, path, seen)
        # Without maxItems the count is free (the slot length bounds it): a star keeps the automaton small, where
        # a bounded repeat would copy the item's states once per possible item.
        most = None if "maxItems" not in schema else hi - 1
        body = seq(group(item_regex), repeat(seq(lit(","), group(item_regex)), max(0, lo - 1), most))
        regex = seq(lit("["), group(body) if lo >= 1 else optional(body), lit("]"))
        return regex, 2 + hi * (item_len + 1)

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
        lo, hi = self.item_bounds(schema, path)
        tuple_items = self.tuple_items(schema, path)
        if tuple_items is None:
            return ([] if hi == 0 else [schema.get("items", UNDECLARED_ITEM)]), False
        prefix, rest, hi = self.tuple_parts(schema, path)
        n = min(max(len(prefix), lo), hi)  # as many items as the tuple declares, within the bounds
        if n > len(prefix) and rest is False:
            self.fail(path, f"minItems {lo} needs more items than the tuple's {len(prefix)}")
        return [prefix[i] if i < len(prefix) else rest for i in range(n)], True

    def item_bounds(self, schema: dict, path: str) -> tuple[int, int]:
        """(minItems, maxItems) of the arrays we write (maxItems: the budget's item count at least minItems where
        the schema sets none)."""
        lo = int(schema.get("minItems", 0))
        hi = int(schema.get("maxItems", max(lo, self.budget.array_items)))
        if lo > hi:
            self.fail(path, f"minItems {lo} > maxItems {hi}")
        return lo, hi

    def tuple_parts(self, schema: dict, path: str) -> tuple[list, Any, int]:
        """(positional item schemas, the schema of any further item, most items) of a tuple array: a positional item
        of the schema false ends the arrays before it."""
        lo, hi = self.item_bounds(schema, path)
        prefix, rest = self.tuple_items(schema, path)
        if any(item is False for item in prefix):  # (an item no value satisfies)
            end = next(i for i, item in enumerate(prefix) if item is False)
            if lo > end:
                self.fail(path, f"minItems {lo} needs item {end}, which the schema false at {path}/prefixItems/{end} "
                                "forbids")
            prefix, rest, hi = prefix[:end], False, min(hi, end)
        return prefix, rest, hi

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
            raise NoValue(f"maxItems {schema['maxItems']} below the {need} items 'contains' needs at {path}/contains")
        if schema.get("uniqueItems") and hi > 1:
            self.fail(f"{path}/contains", "unsupported keyword 'contains' together with 'uniqueItems'")
        matching, matching_len = self.value_regex(self.matching_item(schema, item), f"{path}/contains", seen)
        parts = [lit("["), group(matching), repeat(seq(lit(","), group(matching)), need - 1, need - 1)]
        n = 2 + need * (matching_len + 1)
        most = None if "maxItems" not in schema else hi - need
        if most is None or most > 0:
            try:
                item_regex, item_len = self.value_regex(item, f"{path}/items", seen)
                parts.append(repeat(seq(lit(","), group(item_regex)), max(0, lo - need), most))
                n += (hi - need) * (item_len + 1)
            except (DepthLimit, NoValue):
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
        values = finite_values(resolved)
        if values is None:
            if lo <= 1:
                self.fix(f"{path or '#'}: at most one item (uniqueItems)")
                item = group(item_regex) if lo == 1 else optional(group(item_regex))
                return seq(lit("["), item, lit("]")), 2 + item_len
            text = json_text(self.distinct_items(schema, [item] * lo, path, seen))
            return Choice([text]), len(text) + 2
        key = "const" if "const" in resolved else "enum" if "enum" in resolved else None
        kept = [v for v in values if self.valid_member(v, resolved, key)] if key else values
        lits = list({canonical(v): json_text(v) for v in kept}.values())  # (1 and 1.0 are one item)
        hi = min(hi, len(lits))
        if lo > hi:
            raise NoValue(f"minItems {lo} exceeds the {len(lits)} distinct items at {path}/uniqueItems")
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

    @staticmethod
    def matching_item(schema: dict, item: Any) -> Any:
        """The schema of an item that matches `contains` as well as `item`: `contains` alone where the array declares
        no items (any item is valid; the strings written for undeclared items are the compiler's choice)."""
        return schema["contains"] if item is UNDECLARED_ITEM else {"allOf": [item, schema["contains"]]}

    def containing_tuple(self, schema: dict, items: list, need: int, path: str, seen: tuple = ()) -> list:
        """A tuple's item schemas with `need` of them also matching `contains`: the first items that can, then items
        past the tuple's end where its bounds and further items allow (a sound subset of the tuples with that many
        matches anywhere; `[integer]` with `contains: string` writes `[1, "a"]`)."""
        if not need:
            return items
        _, rest, hi = self.tuple_parts(schema, path)
        out, chosen = list(items), 0
        for i, item in enumerate(out):
            both = {"allOf": [item, schema["contains"]]}
            if chosen < need and self.writable(both, f"{path}/items/{i}", seen):
                out[i], chosen = both, chosen + 1
        while chosen < need and rest is not False and len(out) < hi:
            both = {"allOf": [rest, schema["contains"]]}
            if not self.writable(both, f"{path}/items/{len(out)}", seen):
                break
            out, chosen = out + [both], chosen + 1
        if chosen < need:
            raise NoValue(f"the tuple's items cannot hold the {need} 'contains' needs at {path}/contains")
        return out

    def pairwise_distinct(self, items: list, seen: tuple) -> bool:
        """Does every value we write for items[i] fail items[j] (i != j), so that a tuple's items never repeat?"""
        try:
            written = [self.resolve(item, "", seen)[0] for item in items]
            accepted = [self.as_accepted(item, seen) for item in items]
        except SchemaError:
            return False
        return all(self.excludes(written[i], accepted[j], seen, items[j])
                   for i in range(len(items)) for j in range(len(items)) if i != j)

    # -- objects ----------------------------------------------------------------------------------------------------

    def members(self, schema: dict, path: str, seen: tuple = ()) -> tuple[dict, list]:
        """(member schemas, required names): the declared properties, plus required names that are not declared,
        with the schema validators apply to them (a matching patternProperties entry, else additionalProperties)."""
        props = dict(schema.get("properties", {}))
        required = schema.get("required", [])
        if not isinstance(required, list):
            self.fail(f"{path}/required", "'required' must be a list")
        forbidden = {k for k, v in props.items() if v is False}  # (a folded `not required` leaves names out so)
        if forbidden & set(required):
            name = sorted(forbidden & set(required))[0]
            raise NoValue(f"the schema false accepts no value at {path}/properties/{name} (required property {name!r})")
        props = {k: v for k, v in props.items() if k not in forbidden}
        # dependencies: a required member brings its dependents along; an optional one that has any is not written
        deps: dict[str, list] = {}  # name → every (keyword, dependency) (dependentRequired beside dependentSchemas)
        for keyword in ("dependencies", "dependentRequired", "dependentSchemas"):
            if isinstance(schema.get(keyword), dict):
                for name, dep in schema[keyword].items():
                    deps.setdefault(name, []).append((keyword, dep))
        required = list(dict.fromkeys(required))
        # Objects we write hold a member at least (see object_regex); beyond that, minProperties is met by always
        # writing the first optional members.
        least = schema.get("minProperties", 0)
        if isinstance(least, int) and least > schema.get("maxProperties", least):
            raise NoValue(f"minProperties {least} above maxProperties {schema['maxProperties']} at "
                          f"{path}/minProperties")
        if isinstance(least, int) and least > max(len(required), 1 if props else 0):
            short = least - len(required)
            optional = [k for k in props if k not in required]  # (those it can write first; too few: it fails)
            writable = [k for k in optional if self.writable(props[k], f"{path}/properties/{k}", seen)]
            forced = (writable + [k for k in optional if k not in writable])[:short]
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
            for keyword, dep in deps.get(name, ()):
                if isinstance(dep, dict) and not (dep.keys() & VALIDATION_KEYWORDS - {"required"}):
                    dep = dep.get("required", [])
                if not isinstance(dep, list) and dep is not True:
                    self.fail(f"{path}/{keyword}/{name}", f"unsupported keyword {keyword!r} (a schema that required "
                                                          f"member {name!r} brings)")
                required += [d for d in (dep if isinstance(dep, list) else []) if d not in required]
        if forbidden & set(required):  # (a member left out that a required one brings along)
            name = sorted(forbidden & set(required))[0]
            raise NoValue(f"the schema false accepts no value at {path}/properties/{name} (property {name!r}, "
                          "required by a dependency)")
        for name in deps:
            if name not in required and any(dep not in (True, [], {}) for _, dep in deps[name]):
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
                    raise NoValue(f"required property {key!r} fails propertyNames at {path}/propertyNames")
                props.pop(key)
        most = schema.get("maxProperties")
        if isinstance(most, int) and most < len([k for k in props if k in required]):  # (required with dependents)
            raise NoValue(f"maxProperties {most} below the {len(required)} members required (with the ones they "
                          f"bring along) at {path}/maxProperties")
        if isinstance(most, int) and most < len(props):  # below the declared count: the first optional ones only
            optional = [k for k in props if k not in required]
            room = max(0, most - (len(props) - len(optional)))
            left_out = set(optional[room:])
            props = {k: v for k, v in props.items() if k not in left_out}
            self.fix(f"{path or '#'}: never writes {', '.join(map(repr, optional[room:]))} (maxProperties)")
        return props, [k for k in props if k in required]

    def writable(self, schema: Any, path: str, seen: tuple) -> bool:
        """Can this compiler write a value of `schema` (a probe: too complex for one slot still counts, a scaffold
        holds it)? minProperties then writes the members it can (the first optional one may hold a keyword it
        cannot write: QA, 2026-12-07)."""
        try:
            self.value_regex(schema, path, seen)
        except TooComplex:
            return True
        except SchemaError:
            return False
        return True

    def object_regex(self, schema: dict, path: str, seen: tuple) -> tuple[str, int]:
        props, required = self.members(schema, path, seen)
        members = []  # (always present, member regex, budget)
        for key in [k for k in props if k in required] + [k for k in props if k not in required]:
            try:
                r, n = self.value_regex(props[key], f"{path}/properties/{key}", seen)
            except (DepthLimit, NoValue):  # a member that cannot be written (depth limit, no value)
                if key in required:
                    raise
                continue
            except TooComplex:
                raise  # (`template` gives such a value a scaffold)
            except SchemaError as exc:  # an optional value this compiler cannot write: left out
                if key in required:
                    raise
                self.leave_out(f"{path}/properties/{key}", exc)
                continue
            members.append((key in required, json_text(key) + ":", group(r), n + len(key) + 4))
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
        pattern (candidates: key1, key2, ..., then the shortest strings each pattern is found in, and the shortest
        names propertyNames takes)."""
        declared = set(schema.get("properties", {})) | set(schema.get("required", []))
        patterns = schema.get("patternProperties", {}) if isinstance(schema.get("patternProperties"), dict) else {}
        candidates = [f"key{i}" for i in range(1, count + 8)]
        for pattern in patterns:
            with contextlib.suppress(PatternError):
                candidates += self.strings_of(self.searched_pattern(pattern), 4 * count)
        if schema.get("propertyNames", True) is not True:
            with contextlib.suppress(SchemaError):
                names, _ = self.value_regex(self.name_schema(schema), f"{path}/propertyNames")
                candidates += self.strings_of(names, 4 * count + len(declared))
        dependent = set(self.dependent_names(schema))  # (a name that brings others along is not written alone)
        names = [name for name in dict.fromkeys(candidates)
                 if name not in declared and name not in dependent and self.accepts_name(schema, name)]
        if len(names) < count:
            self.fail(f"{path}/minProperties", "unsupported keyword 'minProperties' above the declared count (no "
                                               "names beyond the declared ones that the object accepts)")
        return names[:count]

    @staticmethod
    def name_schema(schema: dict) -> dict:
        """The schema of an object's member names: its propertyNames, of strings (what names are; untyped, the
        compiler could write its values as another type)."""
        return {"allOf": [{"type": "string"}, schema.get("propertyNames", True)]}

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
        """(key regex, value schema, its path) of that member: a name matching one patternProperties pattern and no
        other, with that pattern's schema (the first pattern that has such names), or, without patternProperties,
        any name with the additionalProperties schema."""
        patterns = schema.get("patternProperties", {})
        extra = schema.get("additionalProperties", True)
        if patterns:
            searched = {}
            for pattern in patterns:
                try:
                    searched[pattern] = self.searched_pattern(pattern)
                except PatternError as exc:
                    self.fail(f"{path}/patternProperties/{pattern}", f"unsupported keyword 'patternProperties' ({exc})")
            for pattern, value_schema in patterns.items():
                try:  # (exact over printable-ASCII names: the capped value regex let a name through that another
                    # pattern finds; so the name keeps to them — an escape, `\u00e9` or `\n`, no complement reads)
                    others = [Complement(searched_json_regex(p)) for p in searched if p != pattern]
                except PatternError as exc:
                    self.fail(f"{path}/patternProperties", f"unsupported keyword 'patternProperties' ({exc})")
                key = self.intersect(searched[pattern], f'"{STRING_CHAR}*"', *others) if others else searched[pattern]
                if not others or not self.constraints.matches_nothing(key, self.placeholders_in(key)):
                    break
            else:
                self.fail(f"{path}/minProperties", "unsupported keyword 'minProperties' above the declared count "
                                                   "(every name matches several patternProperties)")
            where = f"{path}/patternProperties/{pattern}"
        elif extra is False:
            self.fail(f"{path}/minProperties", "minProperties needs a member, and no name is allowed")
        else:
            value_schema, where = (ANY_VALUE if extra is True else extra), f"{path}/additionalProperties"
            key = f'"{STRING_CHAR}{{1,{self.budget.string - 2}}}"'
        # names a folded `not required` left out, and names that bring dependencies along: never generated
        forbidden = [k for k, v in schema.get("properties", {}).items() if v is False] + self.dependent_names(schema)
        if forbidden:  # (in both spellings: as values are written, and as a pattern writes a name — `\u00e9`)
            spellings = {json_literal(k) for k in forbidden} | {
                '"' + "".join(map(encoded_literal, k)) + '"' for k in forbidden}
            key = self.intersect(key, Complement("|".join(sorted(spellings))))
        if schema.get("propertyNames", True) is not True:  # the generated name must be a valid name too
            names, _ = self.value_regex(self.name_schema(schema), f"{path}/propertyNames", seen)
            key = self.intersect(key, names)
        if (forbidden or schema.get("propertyNames", True) is not True) and self.constraints.matches_nothing(
                key, self.placeholders_in(key)):
            raise NoValue(f"no name can be generated for a member (propertyNames, names left out or bringing "
                          f"others along) at {path}/minProperties")
        return key, value_schema, where
