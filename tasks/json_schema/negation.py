"""Negation: a `not` folded into what we write, and oneOf's branches made to exclude each other.

`not` is folded into what we write: a value fails a schema when it fails any one of its keywords, so each keyword of
the negated schema offers restrictions of the rest (other types, a flipped bound, a member left out, a member whose
value fails, and for strings and integers the complement of an enum / const / pattern, built into the slot's
automaton) — one `negate_<keyword>` method per keyword (keywords.KEYWORDS names it). oneOf: each branch writes only
values that fail every other branch — it stays as is where the branches provably exclude each other (distinct types,
discriminators, required keys: `excludes`), else the others' `not` is folded in; a branch left with no value is never
written.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import re
from typing import Any

from diffreason.errors import SchemaError
from diffreason.tasks.json_schema.base import (
    DepthLimit, NoValue, TooComplex, contradictory_bounds, finite_values, json_equal, json_type, lcm, positive_number,
)
from diffreason.tasks.json_schema.keywords import (
    EXCLUDED, FINITE_TYPES, GENERIC, KEYWORDS, NEGATED_BOUNDS, NEGATION_ORDER, NOT_MULTIPLES, VALIDATION_KEYWORDS,
)
from diffreason.tasks.json_schema.patterns import PatternError, searched_json_regex

_EMPTY = object()  # a way to fail a `not` that leaves no value


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


class NegationMixin:
    """`not` folded in, oneOf made exclusive (methods of CompilerState and the other mixins are reached through
    `self`)."""

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
                raise NoValue(f"no 'enum' / 'const' value fails the 'not' at {path}/not")
            return schema
        if neg is False:
            return rest
        if neg is True or (isinstance(neg, dict) and not (neg.keys() & VALIDATION_KEYWORDS)):
            raise NoValue(f"'not' of a schema that accepts every value at {path}/not")
        try:  # (exactly what it accepts: what the negated schema leaves out, we may write)
            neg, _, _ = self.resolve(neg, f"{path}/not", seen, fold_not=False, exact=True)
        except NoValue:  # it accepts nothing: every value fails it
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
                except NoValue:
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
        raise NoValue(f"no value satisfies the schema and fails its 'not' at {path}/not")

    def negations(self, rest: dict, neg: dict, key: str, path: str, seen: tuple):
        """(restrictions of `rest` whose every value fails keyword `key` of `neg` (so fails `neg`), most general
        first; whether together they are every way to fail it), or None when this compiler has none for `key` — from
        the keyword's `negate_<keyword>` method (keywords.KEYWORDS names it; a None among its ways is one that leaves
        no value). A keyword that applies to one type (pattern, minimum, items, ...) is failed only by values of that
        type: values of other types pass it. (`format` too: a format checker passes non-strings, and our format
        regexes are subsets, so they have no exact complement.)"""
        row = KEYWORDS.get(key)
        ways = getattr(self, row.negate)(rest, neg, key, path, seen) if row is not None and row.negate else None
        if ways is None:
            return None
        options, exact = ways
        return [o if o is not None else _EMPTY for o in options], exact

    def other_types(self, rest: dict, excluded: set[str]) -> dict | None:
        """`rest` restricted to its types other than `excluded` (None: none left)."""
        types = self.types_of(rest)
        if "number" in excluded:
            excluded = excluded | {"integer"}
        kept = [t for t in types if t not in excluded]
        if "integer" in excluded and "number" in kept:  # non-integral numbers only: we write none
            kept.remove("number")
        return {**rest, "type": kept if len(kept) > 1 else kept[0]} if kept else None

    def within(self, rest: dict, kind: str, extra: dict, path: str) -> dict | None:
        """`rest` restricted to its values of type `kind` (numbers: integers too) that meet `extra` (None: none, or
        keywords this compiler cannot merge)."""
        types = self.types_of(rest)
        kinds = [t for t in types if t == kind or (kind == "number" and t == "integer")]
        if not kinds:
            return None
        try:
            out = self.merge_two({**rest, "type": kinds if len(kinds) > 1 else kinds[0]}, extra, path)
        except SchemaError:  # no value, or keywords this compiler cannot merge
            return None
        return None if _empty_bounds(out) else out

    def failing_member(self, rest: dict, name: str, sub: Any, where: str, path: str, seen: tuple) -> dict | None:
        """`rest` with member `name` required and its value failing `sub`. A name `rest` neither declares nor matches
        by a pattern also meets its additionalProperties. The member's own `not` is folded now, so one that leaves no
        value raises NoValue and rules this way out."""
        covered = name in rest.get("properties", {}) or any(
            re.search(p, name) for p in rest.get("patternProperties", {}))
        extra = rest.get("additionalProperties", True)
        member = {"not": sub} if covered or extra is True else {"allOf": [extra, {"not": sub}]}
        option = self.within(rest, "object", {"required": [name], "properties": {name: member}}, path)
        if option is not None:
            self.resolve(option["properties"][name], where, seen)
        return option

    # One method per keyword a `not` can be folded over: (the ways to fail keyword `key` of `neg`, each a restriction
    # of `rest` or None where it leaves no value; whether they are every way), or None where this compiler has none.

    def negate_type(self, rest: dict, neg: dict, key: str, path: str, seen: tuple):
        """Values of the other types."""
        types, value = self.types_of(rest), neg[key]
        banned = set(value if isinstance(value, list) else [value])
        only_fractions = "integer" in banned and "number" not in banned and "number" in types
        if only_fractions and set(types) - banned <= {"number"}:
            return None  # only non-integral numbers would be left: we write none
        return [self.other_types(rest, banned)], True

    def negate_enum(self, rest: dict, neg: dict, key: str, path: str, seen: tuple):
        """enum / const: values of other types; strings and integers: the other values' JSON texts, as complements
        (numbers narrowed to integers); true, false, null: the values left."""
        types, value = self.types_of(rest), neg[key]
        values = [value] if key == "const" else value
        if not isinstance(values, list):
            return None
        options = [self.other_types(rest, {json_type(v) for v in values})]
        exact = True
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
                    if not any(json_equal(v, w) for w in values)]
            options.append({**rest, "enum": left} if left else None)
        else:  # numbers, arrays, objects of the enum's types: no complement written
            exact = False
        return options, exact

    def negate_not(self, rest: dict, neg: dict, key: str, path: str, seen: tuple):
        """Failing `not X` is validating X."""
        value = neg[key]
        return [{"allOf": [rest, value]} if rest else value], True

    def negate_multiple_of(self, rest: dict, neg: dict, key: str, path: str, seen: tuple):
        """A number that is not a multiple (checked as validators check it)."""
        value = neg[key]
        if not positive_number(value):
            return None
        option = self.within(rest, "number", {NOT_MULTIPLES: [value]}, path)
        if option is not None and positive_number(option.get("multipleOf")) and lcm(
                option["multipleOf"], value) == option["multipleOf"]:
            option = None  # every multiple of the schema's multipleOf is a multiple of `value` too
        return [option], True

    def negate_pattern(self, rest: dict, neg: dict, key: str, path: str, seen: tuple):
        """A string the pattern is not found in: the complement of the strings it is found in."""
        try:
            return [self.within(rest, "string", {EXCLUDED: [searched_json_regex(neg[key])]}, path)], True
        except PatternError:
            return None

    def negate_bound(self, rest: dict, neg: dict, key: str, path: str, seen: tuple):
        """minimum, maxLength, minItems, ...: the flipped bound (NEGATED_BOUNDS)."""
        value = neg[key]
        kind, flipped, shift = NEGATED_BOUNDS[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None  # draft 4's boolean exclusiveMinimum / exclusiveMaximum
        options = []
        if shift is None or value + shift >= 0:
            options.append(self.within(rest, kind, {flipped: value if shift is None else value + shift}, path))
        return options, True

    def negate_required(self, rest: dict, neg: dict, key: str, path: str, seen: tuple):
        """One of the names left out: `properties: {name: false}`, so no later merge can bring it back."""
        value = neg[key]
        if not isinstance(value, list):
            return None
        if not value:
            return [_EMPTY], True
        return [self.within(rest, "object", {"properties": {name: False}}, path)
                for name in value if name not in rest.get("required", [])], True

    def negate_properties(self, rest: dict, neg: dict, key: str, path: str, seen: tuple):
        """One member whose value fails its schema: one option per member, together every way to fail, unless one is
        skipped."""
        value = neg[key]
        if not isinstance(value, dict):
            return None
        options, exact = [], True
        for name, sub in value.items():
            if sub is True or (isinstance(sub, dict) and not (sub.keys() & VALIDATION_KEYWORDS)):
                continue  # every value of this member passes
            declared = rest.get("properties", {})
            extra = rest.get("additionalProperties", True)
            if name not in declared and (extra is False or rest.get("patternProperties")):
                exact = exact and not rest.get("patternProperties")  # (a pattern may allow the name)
                continue
            try:
                options.append(self.failing_member(rest, name, sub, f"{path}/properties/{name}", path, seen))
            except NoValue:
                continue
            except SchemaError:
                exact = False
        return options, exact

    def negate_property_names(self, rest: dict, neg: dict, key: str, path: str, seen: tuple):
        """A member whose name fails it: a few such names, each required in turn."""
        value = neg[key]
        try:
            failing = self.without_not({"type": "string", "not": value}, f"{path}/propertyNames", seen)
            regex, _ = self.value_regex(failing, f"{path}/propertyNames", seen)
        except SchemaError:
            return None
        return [self.within(rest, "object", {"required": [name]}, path)
                for name in self.names_in(regex, rest, lambda name: not self.valid(name, value))], False

    def negate_pattern_properties(self, rest: dict, neg: dict, key: str, path: str, seen: tuple):
        """A member whose name a pattern finds and whose value fails that pattern's schema."""
        value = neg[key]
        if not isinstance(value, dict):
            return None
        options = []
        for pattern, sub in value.items():
            if sub is True or (isinstance(sub, dict) and not (sub.keys() & VALIDATION_KEYWORDS)):
                continue  # every value passes
            try:
                regex = self.searched_pattern(pattern)
            except PatternError:
                continue
            for name in self.names_in(regex, rest, lambda name: bool(re.search(pattern, name))):
                with contextlib.suppress(SchemaError):
                    options.append(self.failing_member(rest, name, sub, f"{path}/patternProperties/{pattern}", path,
                                                       seen))
        return options, False

    def negate_items(self, rest: dict, neg: dict, key: str, path: str, seen: tuple):
        """An array whose items all fail (one would do: only some of the ways)."""
        value = neg[key]
        if not isinstance(value, (dict, bool)):
            return None
        # (`items` beside the negated schema's prefixItems covers the elements after them only)
        prefix = len(neg["prefixItems"]) if isinstance(neg.get("prefixItems"), list) else 0
        fail = {"minItems": max(prefix + 1, rest.get("minItems", 1)), "items": {"not": value}}
        option = self.within(rest, "array", {**fail, "prefixItems": [True] * prefix} if prefix else fail, path)
        try:  # the items' own `not` folded now: one that leaves no value rules this way out
            if option is not None and not isinstance(option.get("items"), list):
                self.resolve(option["items"], f"{path}/items", seen)
        except SchemaError:
            option = None
        return [option], False

    def negate_contains(self, rest: dict, neg: dict, key: str, path: str, seen: tuple):
        """No item matches (exactly failing it when one match is needed)."""
        need = neg.get("minContains", 1)
        if not isinstance(need, int) or isinstance(need, bool):
            return None
        if need == 0:
            return [], True  # every array passes it
        return [self.within(rest, "array", {"items": {"not": neg[key]}}, path)], need == 1 and "maxContains" not in neg

    def negate_contains_count(self, rest: dict, neg: dict, key: str, path: str, seen: tuple):
        """minContains / maxContains: nothing without contains; with it, see negate_contains."""
        return [], "contains" not in neg or key == "minContains"

    def negate_alternatives(self, rest: dict, neg: dict, key: str, path: str, seen: tuple):
        """not (A or B) = not A and not B; failing every oneOf branch fails oneOf (only some of the ways)."""
        value = neg[key]
        if not isinstance(value, list):
            return None
        out, complete = self.fail_every(rest, value, path, seen)
        return [out], complete

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
                except NoValue:
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

    # -- oneOf: exactly one branch must match, so each branch's outputs must fail every other branch ----------------

    def alternatives(self, schema: dict, key: str, path: str, seen: tuple) -> list:
        """The branches to write for anyOf / oneOf: siblings folded in; for oneOf, made mutually exclusive."""
        branches = self.branches(schema, key, path, seen)
        if key == "oneOf":
            return self.exclusive_branches(branches, schema[key], path, seen)
        return [b for b in branches if b is not None]

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
            except NoValue as exc:  # accepts nothing at all, so it can never be the one that matches
                empty = exc
                continue
            except SchemaError:
                kept[i] = None  # (exclusion is still tested by folding its `not`)
            if b is None:  # accepts nothing beside the siblings: not written
                continue
            try:
                resolved.append((i, self.resolve_marked(b, f"{path}/oneOf/{i}", seen)))
            except NoValue as exc:  # no value of it we can write
                empty = exc
        if not resolved:
            raise empty or NoValue(f"no branch accepts a value at {path}/oneOf")
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
                            raise NoValue(f"branches {i} and {j} are the same schema at {path}/oneOf")
                        before = a
                        if b is not None and not excluded(a, j, b):
                            a = self.force_member_against(a, b, seen)
                        if not excluded(a, j, b):
                            neg = {"anyOf": [a["not"], raw[j]]} if "not" in a else raw[j]  # (a finite a's own)
                            a = self.without_not({**a, "not": neg}, f"{path}/oneOf/{i}", seen)
                            folded.add(j)
                        changed = changed or a is not before
            except NoValue as exc:  # no value of branch i fails every other branch
                empty = exc
                continue
            except SchemaError as exc:  # branch i cannot be made to fail branch j: not written
                if isinstance(exc, (DepthLimit, TooComplex)):
                    raise
                unwritable.append((i, j, exc))
                continue
            out.append(a)
        if not out and unwritable:
            i, j, exc = unwritable[0]
            self.fail(f"{path}/oneOf", f"unsupported keyword 'oneOf' (branches {i} and {j} may both match, and {exc})")
        if not out:
            raise NoValue(f"no value matches exactly one 'oneOf' branch at {path}/oneOf")
        for i, j, exc in unwritable:
            self.fix(f"{path or '#'}/oneOf/{i}: never written (it may match branch {j} too, and "
                     f"{str(exc).rsplit(' at ', 1)[0]})")
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
                # a branch is written merged with the schema around it, so its types are read off the merge: one
                # that names no type of its own takes the surrounding `type` (`{"pattern": ""}` beside `"type":
                # ["array", ...]` writes arrays too), and a `not` inside it is folded against that type (`not
                # {"type": "string"}` beside `"type": ["array", "null"]` writes arrays and nulls, alone strings)
                around, rest, out = self.accepted_types(schema), {k: v for k, v in schema.items() if k != key}, set()
                for sub in schema[key]:
                    try:
                        resolved = self.resolve({"allOf": [rest, sub]} if rest else sub, "", seen)[0]
                    except NoValue:  # the branch writes nothing beside the rest of the schema
                        continue
                    except SchemaError:
                        return None
                    if key == "oneOf" and self.accepted_types(resolved) is None and not resolved.keys() & {
                            "anyOf", "oneOf"}:
                        # (a oneOf branch whose type is only inferred — `{"required": [...]}` as an object — is
                        # written as other types too once another branch's `not` is folded into it: a number under
                        # `{"oneOf": [{"anyOf": [{"type": "array"}]}, {"required": ["b"]}]}`, where this said
                        # arrays and objects only, and a oneOf around it let that number match two branches)
                        return None
                    sub_types = self.emitted_types(resolved, seen)
                    if sub_types is None:
                        return None
                    out |= sub_types
                return out if around is None else out & around
        if "type" in schema:
            return self.accepted_types(schema)
        kind = self.infer_type(schema, "")
        if kind is None:
            return None if schema.keys() & GENERIC else {"string", "number", "boolean", "null"}
        if contradictory_bounds(schema, kind):  # (written as another type: `untyped_regex`)
            return None
        return {kind}

    def accepted_types(self, schema: dict) -> set[str] | None:
        """JSON types `schema` can accept (None: any), judged only by its own type / const / enum keywords."""
        if "const" in schema:
            return {json_type(schema["const"])}
        if "enum" in schema and isinstance(schema["enum"], list):
            return {json_type(v) for v in schema["enum"]}
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
        finite_a = finite_values(a)
        finite_b = finite_values(b)
        if finite_a is not None and finite_b is not None:
            return not any(json_equal(x, y) for x in finite_a for y in finite_b)
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
            a_patterns = a.get("patternProperties", {}) if isinstance(a.get("patternProperties"), dict) else {}
            for key in a_required:
                if key not in b_props:
                    if b.get("additionalProperties") is False and not b.get("patternProperties"):
                        return True
                    continue
                # (the member's value is written from its declared schema and those of the patterns it matches)
                try:
                    matched = [a_patterns[p] for p in a_patterns if re.search(p, key)]
                except re.error:
                    continue
                sub_a = self.resolve({"allOf": [a_props[key], *matched]} if matched else a_props[key], "", seen)[0]
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
