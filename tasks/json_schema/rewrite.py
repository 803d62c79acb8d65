"""Schema rewriting: a (sub)schema → one plain schema the value writers read, meaning kept (or narrowed soundly).

`RewriteMixin.resolve` is the entry: `$ref`s followed (recursive ones to a depth limit), if / then / else written as
the choice it is, allOf parts merged into one schema (`merge_two`, one `merge_<keyword>` method per keyword that two
parts may give different values: see keywords.KEYWORDS), a required member's dependentSchemas brought in, and the
schema's `not` folded in (negation.py). `branches` folds an anyOf / oneOf's sibling keywords into each branch.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any
from urllib.parse import unquote

from diffreason import limits
from diffreason.errors import SchemaError
from diffreason.tasks.json_schema.base import (
    DepthLimit, NoValue, TooComplex, json_equal, lcm, positive_number,
)
from diffreason.tasks.json_schema.keywords import (
    ANNOTATIONS, ANY_VALUE, KEYWORDS, MULTIPLES, PATTERNS, REFS, VALIDATION_KEYWORDS,
)
from diffreason.tasks.json_schema.load import MISSING, pointer_target


def _longer(seen: tuple, chain) -> tuple:
    """Of two `$ref` chains, the longer: a schema resolved again deeper in the same walk keeps the deeper count."""
    return tuple(chain) if len(chain) > len(seen) else seen


def _with_refs(schema: dict, chain: tuple, seen: tuple) -> dict:
    """`schema` (resolved under `chain`) marked with that chain where resolving it followed `$ref`s beyond `seen`."""
    return {**schema, REFS: chain} if len(chain) > len(seen) else schema


class RewriteMixin:
    """`$ref`, if / then / else, allOf and dependentSchemas rewritten away (methods of CompilerState and the other
    mixins are reached through `self`)."""

    def resolve(self, schema: Any, path: str, seen: tuple = (), fold_not: bool = True,
                exact: bool = False) -> tuple[dict, str, tuple]:
        """(schema, its path, the `$ref`s followed): references followed, if / then / else and allOf written out,
        a `not` folded in (`fold_not`). `exact`: the result accepts exactly what `schema` accepts — what a schema
        that is negated or tested against must be —, where otherwise it may accept less (a case of if / then / else
        this compiler cannot write is left out, a schema that accepts anything becomes the scalars we write for it);
        an error where that cannot be kept."""
        limits.check()
        if schema is False:
            raise NoValue(f"the schema false accepts no value at {path or '#'}")
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
                raise DepthLimit(
                    f"recursive reference {self.ref_names.get(ref, ref)} is required at every depth (depth limit "
                    f"{self.max_depth}) at {path or '#'}"
                )
            seen = seen + (ref,)
            node = self.ref_target(ref, path)
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

    def ref_target(self, ref: str, path: str) -> Any:
        """The node a local `$ref` (a JSON pointer in a URI fragment: percent-encoded, array indices as numbers) points
        at in the root document; an error where there is none."""
        node = pointer_target(self.root, unquote(ref[1:])) if ref == "#" or ref.startswith("#/") else MISSING
        if node is MISSING:  # (a "#name" left here is an anchor that names nothing the root's resource holds)
            self.fail(path, f"unresolvable '$ref' {self.ref_names.get(ref, ref)}")
        return node

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

    # -- if / then / else: a choice between (if and then) and (not if and else) -------------------------------------

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
            except NoValue as exc:
                problem = problem or exc
                continue
            except SchemaError as exc:
                if isinstance(exc, (DepthLimit, TooComplex)):
                    raise
                problem = exc
                self.fix(f"{path or '#'}: if / then / else: never the {name!r} case ({str(exc).rsplit(' at ', 1)[0]})")
                continue
            kept[name] = case
        if not kept:
            raise problem
        if len(kept) == 1:
            (case,) = kept.values()
            return {"allOf": [rest, case]} if rest else case
        either = {"anyOf": list(kept.values())}
        return {"allOf": [rest, either]} if rest.keys() & {"anyOf", "oneOf"} else {**rest, **either}

    # -- allOf: every part must hold, so the parts merge into one schema --------------------------------------------

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
        `exact` makes it an error. A keyword the two give different values is merged by its `merge_<keyword>` method
        (keywords.KEYWORDS names it)."""
        out = dict(a)
        arrays = self.merge_arrays(a, b)
        for key, value in b.items():
            if arrays is not None and key in ("prefixItems", "items"):
                continue  # (merged element by element below)
            if key == REFS:
                out[key] = _longer(out.get(key, ()), value)
                continue
            if key not in out or json_equal(out[key], value) or key in ANNOTATIONS or key not in VALIDATION_KEYWORDS:
                out.setdefault(key, value)
                continue
            merge = KEYWORDS[key].merge
            if merge is None or not getattr(self, merge)(out, key, out[key], value, path):
                self.fail(f"{path}/{key}", f"unsupported keyword {key!r} with different values in 'allOf' parts")
        if arrays is not None:
            out.pop("items", None)
            out.update(arrays)
        self.apply_additional(a, b, out, path if exact else None)
        return out

    # One method per keyword that two parts may give different values (`mine`, already in `out`, and `value`): each
    # writes into `out` what both accept and returns True, or returns False where this compiler has no merge of the
    # two values (merge_two's error).

    def merge_type(self, out: dict, key: str, mine: Any, value: Any, path: str) -> bool:
        types_a = set(mine if isinstance(mine, list) else [mine])
        types_b = set(value if isinstance(value, list) else [value])
        widen = lambda ts: ts | ({"integer"} if "number" in ts else set())  # noqa: E731
        both = widen(types_a) & widen(types_b)
        if "number" in both:
            both.discard("integer")
        if not both:
            raise NoValue(f"types {sorted(types_a)} and {sorted(types_b)} accept no common value at {path}/type")
        out[key] = sorted(both) if len(both) > 1 else both.pop()
        return True

    def merge_properties(self, out: dict, key: str, mine: Any, value: Any, path: str) -> bool:
        props = dict(mine)
        for name, sub in value.items():
            if name not in props:
                props[name] = sub
            else:  # (false stays false: a member that must be absent)
                props[name] = False if False in (props[name], sub) else {"allOf": [props[name], sub]}
        out[key] = props
        return True

    def merge_required(self, out: dict, key: str, mine: Any, value: Any, path: str) -> bool:
        out[key] = list(dict.fromkeys([*mine, *value]))
        return True

    def merge_lower(self, out: dict, key: str, mine: Any, value: Any, path: str) -> bool:
        """A lower bound (minimum, exclusiveMinimum, minLength, minItems, minProperties): the higher one."""
        out[key] = max(mine, value)
        return True

    def merge_upper(self, out: dict, key: str, mine: Any, value: Any, path: str) -> bool:
        """An upper bound (maximum, exclusiveMaximum, maxLength, maxItems, maxProperties): the lower one."""
        out[key] = min(mine, value)
        return True

    def merge_enum(self, out: dict, key: str, mine: Any, value: Any, path: str) -> bool:
        out[key] = [v for v in mine if any(json_equal(v, w) for w in value)]  # (deep: [false] is not [0])
        return True

    def merge_const(self, out: dict, key: str, mine: Any, value: Any, path: str) -> bool:
        """Two different constants: no value is both."""
        raise NoValue(f"'const' {mine!r} and {value!r} accept no common value at {path}/const")

    def merge_lists(self, out: dict, key: str, mine: Any, value: Any, path: str) -> bool:
        """The compiler's own keywords (EXCLUDED, PATTERNS, MULTIPLES, NOT_MULTIPLES): lists whose every entry holds."""
        out[key] = [*mine, *value]
        return True

    def merge_multiple_of(self, out: dict, key: str, mine: Any, value: Any, path: str) -> bool:
        """Multiples of both are exactly the multiples of their least common multiple (each still checked as
        validators check it: MULTIPLES)."""
        if not (positive_number(mine) and positive_number(value)):
            return False
        out[key] = lcm(mine, value)
        out[MULTIPLES] = list(dict.fromkeys([*out.get(MULTIPLES, []), mine, value]))
        return True

    def merge_pattern(self, out: dict, key: str, mine: Any, value: Any, path: str) -> bool:
        """Both patterns hold: the second joins the slot's intersection (PATTERNS)."""
        out[PATTERNS] = [*out.get(PATTERNS, []), value]
        return True

    def merge_alternatives(self, out: dict, key: str, mine: Any, value: Any, path: str) -> bool:
        """(A1 or A2) and (B1 or B2) = (A1 and (B1 or B2)) or (A2 and (B1 or B2)); the same for oneOf."""
        if not (isinstance(mine, list) and isinstance(value, list)):
            return False
        out[key] = [{"allOf": [branch, {key: value}]} for branch in mine]
        return True

    def merge_pattern_properties(self, out: dict, key: str, mine: Any, value: Any, path: str) -> bool:
        if not (isinstance(mine, dict) and isinstance(value, dict)):
            return False
        merged = dict(mine)
        for pattern, sub in value.items():
            merged[pattern] = {"allOf": [merged[pattern], sub]} if pattern in merged else sub
        out[key] = merged
        return True

    def merge_not(self, out: dict, key: str, mine: Any, value: Any, path: str) -> bool:
        """not A and not B: not (A or B)."""
        out[key] = {"anyOf": [mine, value]}
        return True

    def merge_subschema(self, out: dict, key: str, mine: Any, value: Any, path: str) -> bool:
        """A keyword holding one schema (items, additionalProperties, propertyNames): both schemas hold."""
        if isinstance(mine, dict) and isinstance(value, dict):
            out[key] = {"allOf": [mine, value]}
        elif key in ("additionalProperties", "propertyNames") and False in (mine, value):
            out[key] = False
        elif True in (mine, value):
            out[key] = value if mine is True else mine
        else:
            return False
        return True

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

    # -- anyOf / oneOf: the siblings folded into each branch --------------------------------------------------------

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
            except NoValue as exc:  # this branch accepts nothing beside the siblings: never chosen
                out.append(None)
                empty = exc
        if all(b is None for b in out):
            raise empty
        return out
