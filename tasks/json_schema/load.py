"""Loading JSON Schemas: read as plain JSON, translated from their draft to 2020-12, checked against the metaschema.

Nothing here imports torch or the compiler: the command line checks a schema file before it loads a model.

Reading (`load_schema`, `load_schema_file`, `parse_json_text`): JSON text, files and values checked to be plain JSON,
each problem one SchemaError. A schema that arrives with a request is data: `load_schema` reads a string as JSON text,
never as a path; files are read by `load_schema_file`, which the command line calls.

Drafts (`to_2020_12`, `validator`): JSON Schema drafts 4 to 2020-12 → the one dialect the compiler reads (2020-12),
meaning kept exactly.

A keyword means what the schema's declared draft (`$schema`, default 2020-12) says it means: draft 7 has no
`prefixItems`, so there `items` covers every element; draft 4 has no `const` or `if`, and its `exclusiveMinimum` is a
flag on `minimum`; before 2019-09 a `$ref` hides the keywords beside it. Reading a draft-7 schema with 2020-12's
keywords writes values its validators reject — and under a `not`, a keyword the draft ignores (so the negated
schema accepts everything) would let through values the draft rejects. So the compiler never reads a schema as
written: `to_2020_12` translates it first, with jsonschema's own keyword tables of the declared draft:

- a key that is a keyword of some draft but not of this one is an annotation here, and is dropped (so is a `format`
  the draft's format checker does not check: validators of that draft accept any string for it);
- `items` as a list (drafts 4 to 2019-09) becomes `prefixItems`, `additionalItems` the `items` after them;
  `dependencies` (drafts 4 to 7) becomes `dependentRequired` / `dependentSchemas`; draft 4's boolean
  `exclusiveMinimum` / `exclusiveMaximum` become the numbers of draft 6;
- every local `$ref` is resolved against the document as written and its target translated once, into the
  translated document's `$defs` under the reference's own text — pointers into keywords that were renamed or
  dropped still find their target, and a target is translated as a schema of the declared draft.

`Translation.names` maps each rewritten reference back to the one the user wrote, for error messages.
A 2020-12 schema that needs none of this is used as it is.

Checking (`check_schema`): a schema must be valid under its draft's metaschema (jsonschema-rs gives the fast verdict,
jsonschema the error).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import jsonschema

from diffreason.errors import SchemaError, first_line

# ---- reading: JSON text, files and values checked to be plain JSON ------------------------------------------------

# What a schema document may hold: JSON's own values, nested at most this deep (deeper, json.loads and every walk
# over it would hit Python's recursion limit), integers of at most this many digits (Python's int() refuses more).
MAX_SCHEMA_DEPTH = 1000
MAX_INTEGER_DIGITS = 4000


# pydantic's formats no JSON Schema draft defines, as formats every value of which its validator accepts (an address
# is a network of one address, and an interface)
PYDANTIC_FORMATS = {
    "ipvanyaddress": "ipv4", "ipv4network": "ipv4", "ipvanynetwork": "ipv4", "ipv4interface": "ipv4",
    "ipvanyinterface": "ipv4", "ipv6network": "ipv6", "ipv6interface": "ipv6",
}
_TIME = r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
_MONTH_DAY = (r"((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
              r"|02-(0[1-9]|1[0-9]|2[0-8]))")
_YEARS = {None: "[1-9][0-9]{3}", "past": "1[0-9]{3}", "future": "[3-9][0-9]{3}"}  # (past / future of any day now)


def pydantic_schema(model: type) -> dict:
    """The JSON Schema of a pydantic model, as one whose every instance its validator accepts: pydantic's own is
    looser for some types (a Decimal may be any string, an IPv4Network any string of format "ipv4network", a
    NaiveDatetime any RFC 3339 date-time, a PastDate any date); those are written as the part the validator takes.
    A model pydantic cannot write a schema for (a Callable field, an arbitrary type) is one SchemaError."""
    from pydantic.json_schema import GenerateJsonSchema

    class Writable(GenerateJsonSchema):
        def decimal_schema(self, schema):  # a number (pydantic's other branch: any string)
            out = super().decimal_schema(schema)
            return next((b for b in out.get("anyOf", ()) if b.get("type") == "number"), out)

        def datetime_schema(self, schema):
            tz, now = schema.get("tz_constraint"), schema.get("now_op")
            if tz is None and now is None:
                return super().datetime_schema(schema)
            zone = "" if tz == "naive" else r"(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
            return {"type": "string", "pattern": f"^{_YEARS[now]}-{_MONTH_DAY}T{_TIME}{zone}$"}

        def date_schema(self, schema):
            now = schema.get("now_op")
            if now is None:
                return super().date_schema(schema)
            return {"type": "string", "pattern": f"^{_YEARS[now]}-{_MONTH_DAY}$"}

    try:
        schema = model.model_json_schema(schema_generator=Writable)
    except Exception as exc:  # pydantic's PydanticInvalidForJsonSchema, PydanticUserError, ...
        raise SchemaError(f"pydantic cannot write a JSON Schema for {model.__name__}: {first_line(exc)}") from None

    def narrowed(node: Any) -> Any:
        if isinstance(node, dict):  # (members that hold instances, as a default, are data: kept as they are)
            out = {k: v if k in _DATA else narrowed(v) for k, v in node.items()}
            if isinstance(out.get("format"), str) and out["format"] in PYDANTIC_FORMATS:  # (not a member "format")
                out["format"] = PYDANTIC_FORMATS[out["format"]]
            return out
        return [narrowed(v) for v in node] if isinstance(node, list) else node

    return narrowed(schema)


def load_schema(schema_or_model: Any) -> dict | bool:
    """A JSON Schema from a dict, a boolean, JSON text or a pydantic model class. A string is always JSON text, never
    a path: a schema that arrives with a request is data (files are read by `load_schema_file`, at the CLI)."""
    if isinstance(schema_or_model, Path):
        raise SchemaError("a schema path must be read with load_schema_file(path), not passed as a schema")
    if isinstance(schema_or_model, type) and hasattr(schema_or_model, "model_json_schema"):
        schema_or_model = pydantic_schema(schema_or_model)
    elif isinstance(schema_or_model, (str, bytes, bytearray)):
        schema_or_model = parse_json_text(schema_or_model, "the schema")
    if not isinstance(schema_or_model, (dict, bool)):
        raise SchemaError(f"a JSON Schema must be a JSON object or a boolean, got {type(schema_or_model).__name__}")
    check_json_document(schema_or_model, "the schema")
    return schema_or_model


def load_schema_file(path: str | Path) -> dict | bool:
    """The JSON Schema in a file (UTF-8 JSON text); every problem with the file is one SchemaError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SchemaError(f"schema file {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise SchemaError(f"schema file {str(path)!r} is a directory") from None
    except OSError as exc:
        raise SchemaError(f"cannot read schema file {str(path)!r}: {exc.strerror or exc}") from None
    return load_schema(parse_json_text(data, f"schema file {str(path)!r}"))


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON (JSON has no NaN or Infinity)")


def parse_json_text(text: str | bytes | bytearray, what: str = "the text") -> Any:
    """JSON text (str, or UTF-8 bytes) → a value, with every way it can be bad as one SchemaError naming `what`: not
    UTF-8, not JSON, NaN / Infinity, integers past MAX_INTEGER_DIGITS digits, nesting past MAX_SCHEMA_DEPTH, lone
    surrogates."""
    if isinstance(text, (bytes, bytearray)):
        if text.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(text) > 1 and (text[0] == 0 or text[1] == 0)):
            raise SchemaError(f"{what} is not UTF-8 text (it looks like UTF-16)")
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise SchemaError(f"{what} is not UTF-8 text (byte {exc.start} cannot be decoded)") from None
    if "\x00" in text:
        raise SchemaError(f"{what} is not JSON text (it holds NUL characters)")
    depth = _max_bracket_depth(text)
    if depth > MAX_SCHEMA_DEPTH:
        raise SchemaError(f"{what} nests {depth} levels deep; at most {MAX_SCHEMA_DEPTH} are supported")
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{what} is not valid JSON: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise SchemaError(f"{what} is not usable JSON: {exc}") from None
    check_json_document(value, what)
    return value


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INTEGER_DIGITS:
        raise ValueError(f"an integer of {digits} digits (at most {MAX_INTEGER_DIGITS} are supported)")
    return int(text)


def _max_bracket_depth(text: str) -> int:
    """How deep the brackets of JSON text nest (brackets inside strings counted too: an upper bound), in C-speed
    passes: json.loads recurses once per level and would hit the recursion limit first."""
    if len(text) < 2 * MAX_SCHEMA_DEPTH:
        return 0
    import numpy as np

    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    steps = (codes == ord("{")).astype(np.int32) + (codes == ord("[")) - (codes == ord("}")) - (codes == ord("]"))
    return int(np.cumsum(steps).max(initial=0))


def check_json_document(value: Any, what: str = "the schema") -> None:
    """`value` is made of JSON's own values only — dicts with string keys, lists, strings that are valid Unicode (no
    lone surrogates), finite numbers, booleans, None — nested at most MAX_SCHEMA_DEPTH levels; else one SchemaError
    with the JSON path of the first problem. Iterative: a deep value cannot exhaust the stack."""
    stack = [(value, "", 0)]
    while stack:
        node, where, depth = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise SchemaError(f"{what} nests more than {MAX_SCHEMA_DEPTH} levels deep at {where or '/'}")
        kind = type(node)
        if kind is str:
            if not node.isascii():
                _check_unicode(node, what, where)
        elif kind is dict:
            for key, item in node.items():
                if type(key) is not str:
                    raise SchemaError(f"{what} has a non-string key {key!r} at {where or '/'}")
                if not key.isascii():
                    _check_unicode(key, what, where)
                stack.append((item, f"{where}/{key}", depth + 1))
        elif kind is list:
            stack.extend((item, f"{where}/{i}", depth + 1) for i, item in enumerate(node))
        elif kind is float:
            if not math.isfinite(node):
                raise SchemaError(f"{what} holds {node!r} at {where or '/'}; JSON numbers are finite")
        elif kind is int:
            if node.bit_length() > MAX_INTEGER_DIGITS * 3.33:
                raise SchemaError(f"{what} holds an integer of more than {MAX_INTEGER_DIGITS} digits at {where or '/'}")
        elif node is not None and kind is not bool:
            raise SchemaError(f"{what} holds a {kind.__name__} at {where or '/'}, which is not a JSON value")


def _check_unicode(text: str, what: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise SchemaError(f"{what} holds a lone surrogate (not Unicode text) at {where or '/'}") from None


# ---- drafts: each supported draft read as 2020-12 -----------------------------------------------------------------

LATEST = jsonschema.Draft202012Validator
# Keywords jsonschema evaluates inside another one's validator (so absent from VALIDATORS): draft 4's flags on
# minimum / maximum, then / else (read by `if`), minContains / maxContains (read by `contains`).
_MODIFIERS = {
    "Draft4Validator": {"exclusiveMinimum", "exclusiveMaximum"},
    "Draft6Validator": set(),
    "Draft7Validator": {"then", "else"},
    "Draft201909Validator": {"then", "else", "minContains", "maxContains"},
    "Draft202012Validator": {"then", "else", "minContains", "maxContains"},
}
_DRAFTS = [jsonschema.Draft4Validator, jsonschema.Draft6Validator, jsonschema.Draft7Validator,
           jsonschema.Draft201909Validator, LATEST]
# Where subschemas sit (in 2020-12 and, for `items` / `additionalItems` / `dependencies`, before)
_ONE = {"additionalProperties", "propertyNames", "contains", "not", "if", "then", "else", "unevaluatedItems",
        "unevaluatedProperties"}
_MAP = {"properties", "patternProperties", "dependentSchemas"}
_LIST = {"allOf", "anyOf", "oneOf", "prefixItems"}
_DEFINITIONS = {"$defs", "definitions"}  # reached through $ref only: translated when a reference reaches them
# Which draft and base URI a (sub)schema has: the translation is 2020-12 throughout, its references into its own
# $defs (_check_bases has refused what a base URI would change)
_IDENTITY = {"$schema", "$id", "id", "$anchor", "$dynamicAnchor", "$recursiveAnchor"}
# The compiler's own keywords start with this: never the user's (an annotation to validators, so dropped)
_OWN_PREFIX = "$diffreason:"


class DraftError(SchemaError):
    """A schema of a draft the compiler does not read (draft 3, or an unknown `$schema`)."""


@functools.cache
def keywords(cls: type) -> frozenset[str]:
    """The keywords validators of draft `cls` evaluate."""
    return frozenset(cls.VALIDATORS) | _MODIFIERS[cls.__name__]


@functools.cache
def _every_keyword() -> frozenset[str]:
    return frozenset().union(*(keywords(cls) for cls in _DRAFTS)) | {"dependencies", "additionalItems"}


def dialect(schema: Any) -> type:
    """The jsonschema validator class of the schema's declared draft (2020-12 when it declares none or one jsonschema
    does not know)."""
    declared = schema.get("$schema") if isinstance(schema, dict) else None
    cls = jsonschema.validators.validator_for(schema, default=LATEST) if isinstance(schema, dict) else LATEST
    if cls not in _DRAFTS:
        raise DraftError(f"unsupported '$schema' {declared!r}: drafts 4, 6, 7, 2019-09 and 2020-12 are supported")
    return cls  # (an unknown $schema reads as 2020-12, as jsonschema reads it)


def validator(schema: Any):
    """The validator of the schema's draft (2020-12 when it declares none), checking formats too (jsonschema checks
    them only when asked)."""
    cls = jsonschema.validators.validator_for(schema, default=LATEST) if isinstance(schema, dict) else LATEST
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


@dataclass
class Translation:
    """The schema in 2020-12 (`schema`), inside `document` (what its `$ref`s resolve against), and the references the
    user wrote for the ones rewritten (`names`: rewritten → written)."""

    document: Any
    schema: Any
    names: dict[str, str] = field(default_factory=dict)


def to_2020_12(root: Any) -> Translation:
    """`root` (any supported draft) as a 2020-12 schema that accepts exactly the same instances (see the module)."""
    cls = dialect(root)
    _check_bases(root, "id" if cls is _DRAFTS[0] else "$id")
    if cls is LATEST and not _needs_translation(root):
        return Translation(root, root)
    return _Translator(root, cls).run()


def pointer_target(root: Any, pointer: str) -> Any:
    """The node a JSON pointer ("/$defs/a", "" for the root) names in `root`; `MISSING` where there is none."""
    node = root
    for part in pointer.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return MISSING
    return node


_IN_PLACE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas")  # the value itself
_DESCENDING = ("properties", "patternProperties", "additionalProperties", "propertyNames", "items", "prefixItems",
               "contains", "unevaluatedItems", "unevaluatedProperties")  # a member's or an item's value


def endless_reference(translation: Translation) -> list[str] | None:
    """The `$ref`s of a cycle that applies a schema to the same value again without descending into it
    (`{"$defs": {"a": {"not": {"$ref": "#/$defs/a"}}}}`): no validator can evaluate such a schema (the spec leaves
    it undefined; jsonschema recurses until the stack runs out). None when every cycle descends (a linked list's
    `next` member). Walks the subschemas reachable from the schema; a `$ref` that does not resolve is left to the
    compiler's own error."""
    def target(ref: Any) -> Any:
        if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
            return None
        return pointer_target(translation.document, ref[1:])

    def children(node: dict, keys) -> list[tuple[dict, str | None]]:
        """(subschema, the `$ref` written when it is one's target) under `keys` (and `$ref`, with the in-place ones)."""
        out = []
        for key in keys:
            value = node.get(key)
            if isinstance(value, dict) and key in ("properties", "patternProperties", "dependentSchemas"):
                value = list(value.values())
            out += [(v, None) for v in (value if isinstance(value, list) else [value]) if isinstance(v, dict)]
        ref = node.get("$ref")
        if keys is _IN_PLACE and isinstance(to := target(ref), dict):
            out.append((to, translation.names.get(ref, ref)))
        return out

    in_place: dict[int, list] = {}  # id -> in-place children, of every subschema some value may meet
    nodes, stack = {}, [translation.schema] if isinstance(translation.schema, dict) else []
    while stack:
        node = stack.pop()
        if id(node) not in nodes:
            nodes[id(node)], in_place[id(node)] = node, children(node, _IN_PLACE)
            stack += [child for child, _ in in_place[id(node)] + children(node, _DESCENDING)]
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    for start in nodes.values():
        if state.get(id(start)):
            continue
        path = [(start, None, iter(in_place[id(start)]))]
        state[id(start)] = 1
        while path:
            node, _, pending = path[-1]
            child = next(pending, None)
            if child is None:
                state[id(node)] = 2
                path.pop()
                continue
            nxt, ref = child
            if state.get(id(nxt)) == 1:
                at = next(i for i, (n, _, _) in enumerate(path) if n is nxt)
                # (a schema document is a tree: every cycle passes through a $ref)
                return [r for _, r, _ in path[at + 1:] if r] + ([ref] if ref else [])
            if not state.get(id(nxt)):
                state[id(nxt)] = 1
                path.append((nxt, ref, iter(in_place[id(nxt)])))
    return None


def _check_bases(root: Any, id_key: str) -> None:
    """Refuse a `$ref` below a nested `$id` that changes the base URI: validators resolve it against that resource,
    while the compiler resolves every local reference against the document (which would be another schema)."""
    stack = [(root, False)]
    while stack:
        node, based = stack.pop()
        if isinstance(node, dict):
            if node is not root and isinstance(node.get(id_key), str) and not node[id_key].startswith("#"):
                based = True
            if based and isinstance(node.get("$ref"), str):
                raise DraftError(f"unsupported '$ref' {node['$ref']!r} inside a subschema with its own {id_key!r} "
                                 "(a different base URI)")
            stack.extend((value, based) for key, value in node.items() if key not in _DATA)
        elif isinstance(node, list):
            stack.extend((value, based) for value in node)


_DATA = ("enum", "const", "default", "examples")  # members that hold instances, not schemas


def _objects(root: Any, id_key: str | None = None):
    """Every JSON object in a schema document, outside the members that hold instances (`_DATA`); with `id_key`,
    only those of the root's own resource (not below a subschema whose `id_key` names another: a `$id` that is not
    just a fragment)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            own = node.get(id_key) if id_key is not None else None
            if node is not root and isinstance(own, str) and not own.startswith("#"):
                continue
            yield node
            stack.extend(value for key, value in node.items() if key not in _DATA)
        elif isinstance(node, list):
            stack.extend(node)


def _needs_translation(root: Any) -> bool:
    """Does a 2020-12 schema hold a key that is a keyword only of older drafts, or one of the compiler's own, a
    format that is not checked, a `$dynamicRef` or a reference to an anchor? (Only then is it rewritten: the common
    case reads as written.)"""
    stale = _every_keyword() - keywords(LATEST)
    checked = LATEST.FORMAT_CHECKER.checkers
    for node in _objects(root):
        for key, value in node.items():
            if key in stale or key.startswith(_OWN_PREFIX) or key == "$dynamicRef" or _is_anchor_ref(key, value):
                return True
            if key == "format" and isinstance(value, str) and value not in checked:
                return True
    return False


def _is_anchor_ref(key: str, value: Any) -> bool:
    return key == "$ref" and isinstance(value, str) and value.startswith("#") and value != "#" and value[1] != "/"


def _anchors(root: Any, cls: type) -> dict[str, Any]:
    """Plain-name fragments (`#name`) → the schema that names itself so: `$anchor` (2019-09 on), an `$id` (`id` in
    draft 4) of just a fragment (drafts 6 and 7), `$dynamicAnchor` (2020-12: a plain `$ref` to it reads it as an
    anchor); a draft without the keyword has no such anchor (jsonschema: NoSuchAnchor). Only the root resource's: an
    anchor inside a subschema with its own `$id` belongs to that resource, which `#name` from the root does not reach
    (jsonschema: NoSuchAnchor; it was compiled, and its values could not be checked)."""
    out: dict[str, Any] = {}
    id_key = "id" if cls is _DRAFTS[0] else "$id"
    keys = [k for k, since in (("$anchor", 3), ("$dynamicAnchor", 4)) if _DRAFTS.index(cls) >= since]
    for node in _objects(root, id_key):
        names = [node.get(k) for k in keys]
        if isinstance(node.get(id_key), str) and node[id_key].startswith("#"):
            names.append(node[id_key][1:])
        for name in names:
            if isinstance(name, str) and name:
                out.setdefault(name, node)
    return out


class _Translator:
    def __init__(self, root: Any, cls: type):
        self.root, self.cls = root, cls
        self.keywords = keywords(cls)
        self.legacy_ref = cls in (jsonschema.Draft4Validator, jsonschema.Draft6Validator, jsonschema.Draft7Validator)
        self.formats = cls.FORMAT_CHECKER.checkers
        self.memo: dict[int, Any] = {}  # id(schema as written) → its translation (the written one is kept alive)
        self.local: dict[str, str] = {}  # reference as written → where its target's translation sits
        self.defs: dict[str, Any] = {}  # $defs of the translated document: name → translated target
        self.pending: list[str] = []
        self.targets: dict[str, Any] = {}
        self.anchors = _anchors(root, cls)

    def run(self) -> Translation:
        schema = self.schema(self.root)
        while self.pending:
            ref = self.pending.pop()
            self.defs[self.local[ref].rsplit("/", 1)[1]] = self.schema(self.target(ref))
        document = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": self.defs}
        return Translation(document, schema, {local: ref for ref, local in self.local.items()})

    def reference(self, ref: Any) -> Any:
        """A `$ref` as the translation writes it: a local one that resolves points into the translated document's
        `$defs` (the others stay as written: the compiler says what is wrong with them)."""
        if not isinstance(ref, str) or not ref.startswith("#") or self.target(ref) is MISSING:
            return ref
        if ref not in self.local:
            self.local[ref] = f"#/$defs/ref{len(self.local)}"
            self.pending.append(ref)
        return self.local[ref]

    def target(self, ref: str) -> Any:
        """The node a local reference points at in the document as written (MISSING: none)."""
        if ref not in self.targets:
            self.targets[ref] = self._walk(ref)
        return self.targets[ref]

    def _walk(self, ref: str) -> Any:
        if ref != "#" and not ref.startswith("#/"):  # an anchor, "#name"
            return self.anchors.get(unquote(ref[1:]), MISSING)
        return pointer_target(self.root, unquote(ref[1:]))

    def schema(self, node: Any) -> Any:
        if not isinstance(node, dict):
            return node  # booleans, and malformed values the metaschema check reports
        if id(node) in self.memo:
            return self.memo[id(node)]
        out: dict[str, Any] = {}
        self.memo[id(node)] = out  # (before the members: a schema may contain a reference to itself)
        hide_siblings = self.legacy_ref and "$ref" in node
        for key, value in node.items():
            if key.startswith(_OWN_PREFIX) or key in _DEFINITIONS or key in _IDENTITY:
                continue
            if key in _every_keyword() and key not in self.keywords:
                continue  # not a keyword of this draft: an annotation
            if hide_siblings and key in _every_keyword() and key != "$ref":
                continue  # before 2019-09, a $ref's siblings are ignored
            self.member(out, key, value, node)
        return out

    def member(self, out: dict, key: str, value: Any, node: dict) -> None:
        if key == "$ref":
            out[key] = self.reference(value)
        elif key == "$dynamicRef" and isinstance(value, str) and value.startswith("#/") and "$ref" not in node:
            out["$ref"] = self.reference(value)  # a JSON pointer, not an anchor: it resolves as $ref does
        elif key == "format":
            if isinstance(value, str) and value in self.formats:
                out[key] = value
        elif key in _ONE:
            out[key] = self.schema(value)
        elif key in _MAP and isinstance(value, dict):
            out[key] = {name: self.schema(sub) for name, sub in value.items()}
        elif key in _LIST and isinstance(value, list):
            out[key] = [self.schema(sub) for sub in value]
        elif key == "items":
            if isinstance(value, list) and self.cls is not LATEST:  # (drafts 4 to 2019-09: a tuple)
                out["prefixItems"] = [self.schema(sub) for sub in value]
                if "additionalItems" in node and "additionalItems" in self.keywords:
                    out["items"] = self.schema(node["additionalItems"])
            else:
                out[key] = self.schema(value)
        elif key == "additionalItems":
            pass  # (read with `items`; without a list of items it means nothing)
        elif key == "dependencies" and isinstance(value, dict):
            for name, dep in value.items():
                which = "dependentRequired" if isinstance(dep, list) else "dependentSchemas"
                out.setdefault(which, {})[name] = dep if isinstance(dep, list) else self.schema(dep)
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            if value and bound in node:  # draft 4: the bound itself is excluded
                out[key] = node[bound]
        elif key in ("minimum", "maximum") and node.get("exclusiveM" + key[1:]) is True and self.cls is _DRAFTS[0]:
            pass  # (written as the exclusive bound above)
        else:
            out[key] = value


MISSING = object()  # (a JSON pointer that names no node)


# ---- the metaschema check -----------------------------------------------------------------------------------------


def check_schema(schema: dict) -> None:
    """The schema must itself be valid under its draft's metaschema (what `jsonschema.validate` checks first): no
    output can be checked against an invalid one."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if metaschema_accepts(cls, schema):
        return
    error = jsonschema.exceptions.best_match(cls(cls.META_SCHEMA).iter_errors(schema))
    if error is not None:
        where = "/" + "/".join(str(p) for p in error.absolute_path)
        raise SchemaError(f"the schema is not valid JSON Schema at {where}: {error.message[:200]}")


# jsonschema-rs recurses on the native stack: past some thousands of levels it overflows it (a crash, not an
# exception), so deeper schemas go to jsonschema alone, which stops at Python's recursion limit
_RUST_MAX_DEPTH = 500


def metaschema_accepts(cls, schema: dict) -> bool:
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
