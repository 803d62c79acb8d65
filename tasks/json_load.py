"""Reading JSON Schemas: JSON text, files and values checked to be plain JSON, each problem one SchemaError.

A schema that arrives with a request is data: `load_schema` reads a string as JSON text, never as a path; files are
read by `load_schema_file`, which the command line calls. Neither imports torch: the CLI checks a schema file before
it loads a model.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from diffreason.errors import SchemaError

# What a schema document may hold: JSON's own values, nested at most this deep (deeper, json.loads and every walk
# over it would hit Python's recursion limit), integers of at most this many digits (Python's int() refuses more).
MAX_SCHEMA_DEPTH = 1000
MAX_INTEGER_DIGITS = 4000


def load_schema(schema_or_model: Any) -> dict | bool:
    """A JSON Schema from a dict, a boolean, JSON text or a pydantic model class. A string is always JSON text, never
    a path: a schema that arrives with a request is data (files are read by `load_schema_file`, at the CLI)."""
    if isinstance(schema_or_model, Path):
        raise SchemaError("a schema path must be read with load_schema_file(path), not passed as a schema")
    if isinstance(schema_or_model, type) and hasattr(schema_or_model, "model_json_schema"):
        schema_or_model = schema_or_model.model_json_schema()
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
