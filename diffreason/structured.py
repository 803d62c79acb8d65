"""Structured output: `generate(model, schema_or_model, prompt=...)` → the parsed (and validated) object.

The one obvious entry point, outlines-style: give a checkpoint (or its directory) and a JSON Schema (a dict, a
boolean, JSON text — read a file with `load_schema_file`) or a pydantic model class; get back the object (a pydantic
instance for a model class) and the engine's result (steps per canvas, tokens, text).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from diffreason.canvas import CanvasTemplate
from diffreason.engine import Engine, GenerationResult
from diffreason.errors import DiffreasonError
from diffreason.limits import ValidationTimeout, cpu_budget, validate_json
from diffreason.model import DiffusionLM, load_model
from diffreason.sampler import SamplerConfig

# Bounds on building one request's constraint (CPU time of the compiling thread, growth of the process's memory) and
# on checking one output against its schema (wall time: a worker process; see diffreason.limits).
COMPILE_SECONDS = 30.0
COMPILE_MEMORY = 4 * 2**30
VALIDATION_SECONDS = 30.0
TEMPLATE_PARAM = "diffreason_template"  # a template sent by a client (`custom_params` of a server request)


def constraint_template(
    tokenizer,
    canvas_length: int,
    *,
    regex: str | None = None,
    json_schema: Any = None,
    max_tokens: int | None = None,
    compile_seconds: float | None = COMPILE_SECONDS,
    compile_memory: int | None = COMPILE_MEMORY,
) -> tuple[CanvasTemplate, Any]:
    """The canvas template of a request's constraint (regex or JSON Schema), slots aligned to canvases, EOS last.

    Returns (template, compiled schema or None). One function for every front end — the CLI, the sgl backend and
    the SGLang server plugin — so a constraint means the same thing everywhere. A constraint is data (a schema
    string is JSON text, never a path); sizes it asks for are checked against `max_tokens` before anything is built,
    and building it may take at most `compile_seconds` of this thread's CPU time and `compile_memory` bytes more
    memory (None: unbounded): past those, one DiffreasonError.
    """
    from diffreason.errors import TemplateError
    from diffreason.tasks.json_schema.load import load_schema
    from diffreason.tasks.json_schema import Budget, compile_schema

    if regex is not None and json_schema is not None:
        raise DiffreasonError("give a regex or a json_schema, not both")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    compiled = None
    if json_schema is not None:
        json_schema = load_schema(json_schema)
        # A slot never crosses a canvas boundary, so none may be longer than a canvas.
        budget = Budget(max_slot=min(Budget.max_slot, canvas_length), max_length=max_tokens or Budget.max_length)
        compiled = compile_schema(json_schema, tokenizer, budget, cpu_seconds=compile_seconds,
                                  memory_bytes=compile_memory)
        template = compiled.template
    elif regex is not None:
        if not isinstance(regex, str) or not regex:
            raise TemplateError("regex must be a non-empty string")
        # A regex is one slot: as long as the token budget allows, within one canvas (EOS takes the last place).
        length = min(max_tokens if max_tokens is not None else canvas_length, canvas_length) - 1
        if length < 1:
            raise TemplateError(f"max_new_tokens={max_tokens} leaves no room for a regex match")
        least = _least_chars(regex)
        if least > length * _longest_token(tokenizer):  # (refused before an automaton of its size is built)
            raise TemplateError(f"no text the constraint allows fits in {length} tokens (a match has at least "
                                f"{least} characters, and a token spells at most {_longest_token(tokenizer)})")
        eos = CanvasTemplate.from_positions(len(tokenizer), [tokenizer.eos_token_id])
        with cpu_budget(compile_seconds, compile_memory, "compiling the regex"):
            template = CanvasTemplate.from_regex(regex, tokenizer, length) + eos
    else:
        raise DiffreasonError("no constraint: give a regex or a json_schema")
    template = template.align_slots(canvas_length, pad)
    if max_tokens is not None and len(template) > max_tokens:  # (a JSON value's scaffold may need more)
        raise TemplateError(f"max_new_tokens={max_tokens} is shorter than the constrained output "
                            f"({len(template)} tokens)")
    template.source = ("regex", regex, max_tokens) if regex is not None else (
        "json_schema", json.dumps(json_schema), max_tokens)
    return template, compiled


def _least_chars(regex: str) -> int:
    """The fewest characters a match of `regex` has, as Python's parser counts them (0 when it cannot parse it: the
    regex compiler says why)."""
    try:
        return re._parser.parse(regex).getwidth()[0]
    except (re.error, RecursionError, OverflowError):
        return 0


@functools.lru_cache(maxsize=16)
def _longest_token(tokenizer) -> int:
    """At least the most characters one token of `tokenizer` spells: its longest token string (a byte-level BPE's
    holds one character per byte, a SentencePiece's one per character)."""
    return max(len(t or "") for t in tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))))


def generate(
    model: DiffusionLM | str | Path,
    schema_or_model: Any,
    prompt: str = "",
    seed: int = 0,
    sampler: SamplerConfig | None = None,
    callback=None,
) -> tuple[Any, GenerationResult]:
    """(value, result): a JSON value of `schema_or_model` (a schema, or a pydantic model class: then an instance),
    generated on its template and checked against it (`check_output`); `callback(request, trace)` after every
    denoising step, as `Engine.generate` calls it."""
    from diffreason.tasks.json_schema.load import load_schema

    lm = model if isinstance(model, DiffusionLM) else load_model(model)
    template, compiled = constraint_template(lm.tokenizer, lm.canvas_length, json_schema=load_schema(schema_or_model))
    result = Engine(lm, sampler).generate(prompt, template=template, seed=seed, callback=callback)
    result.fixed = compiled.fixed
    value = check_output(compiled.schema, result.text)
    if isinstance(schema_or_model, type) and hasattr(schema_or_model, "model_validate"):
        from pydantic import ValidationError

        try:
            value = schema_or_model.model_validate(value)
        except ValidationError as exc:  # (a type whose JSON Schema is looser than its validator, not narrowed yet)
            error = exc.errors()[0]
            where = "/".join(map(str, error["loc"])) or "#"
            raise DiffreasonError(f"{schema_or_model.__name__} refuses the generated value at {where}: {error['msg']} "
                                  f"(pydantic's JSON Schema for it allows values its validator does not); the value: "
                                  f"{result.text}") from None
    return value, result


class OutputUnchecked(DiffreasonError):
    """jsonschema could not decide on an output (it fails on the schema, or ran out of time): `reason` says why."""

    def __init__(self, reason: str, text: str):
        super().__init__(f"{reason}; the output, unchecked: {text}")
        self.reason = reason


def check_output(schema: Any, text: str, seconds: float = VALIDATION_SECONDS) -> Any:
    """The JSON value of a constrained output, checked against its schema (formats too) as the last line of defence:
    the template makes every output valid, so a failure here is a compiler bug, reported as one — never a value
    passed on as valid. A check that cannot decide (jsonschema fails on the schema, or runs past `seconds` on a
    pattern that backtracks) says so, with the output (OutputUnchecked)."""
    try:
        value = json.loads(text)
    except ValueError:
        raise DiffreasonError(f"internal error: the output {text!r} is not JSON") from None
    try:
        error = validate_json(schema, value, seconds)
    except ValidationTimeout as exc:
        raise OutputUnchecked(str(exc), text) from None
    except DiffreasonError as exc:  # jsonschema itself fails on this schema (e.g. a $ref into a non-schema)
        raise OutputUnchecked(str(exc), text) from None
    if error is not None:
        message, where, _ = error
        raise DiffreasonError(f"internal error: the output {text!r} does not validate ({message} at {where})")
    return value


def template_from_positions(text: str | list, vocab_size: int, max_new_tokens: int | None = None) -> CanvasTemplate:
    """A template sent by a client (the SGLang plugin's and `diffreason serve`'s `custom_params`): a JSON list with, per
    position, a token id, null (any) or a list of ids — as JSON text, or the list itself where the request is JSON.
    A list longer than the request's `max_new_tokens` is refused before its masks are built (a 30 KiB body of
    distinct sets took 2 GiB first: QA, 2026-12-07). DiffreasonError with a client-facing message."""
    if isinstance(text, list):
        positions = text
    elif isinstance(text, str):
        try:
            positions = json.loads(text)
        except ValueError as exc:  # (JSON's, or an integer of more than 4,300 digits)
            raise DiffreasonError(f"{TEMPLATE_PARAM} must be a JSON list: {exc}") from None
    else:
        raise DiffreasonError(f"{TEMPLATE_PARAM} must be a list of positions or its JSON text, got "
                              f"{type(text).__name__}")
    if not isinstance(positions, list) or not positions:
        raise DiffreasonError(f"{TEMPLATE_PARAM} must be a non-empty JSON list of positions")
    if max_new_tokens is not None and max_new_tokens < len(positions):
        raise DiffreasonError(f"max_new_tokens={max_new_tokens} is shorter than the constrained output "
                              f"({len(positions)} tokens)")
    for i, p in enumerate(positions):
        ok = p is None or (isinstance(p, int) and not isinstance(p, bool)) or (
            isinstance(p, list) and p and all(isinstance(t, int) and not isinstance(t, bool) for t in p)
        )
        if not ok:
            raise DiffreasonError(f"{TEMPLATE_PARAM} position {i}: expected a token id, null or a list of ids")
        ids = [] if p is None else (p if isinstance(p, list) else [p])
        bad = [t for t in ids if not 0 <= t < vocab_size]
        if bad:
            raise DiffreasonError(f"{TEMPLATE_PARAM} position {i}: token {bad[0]} is outside [0, {vocab_size})")
    return CanvasTemplate.from_positions(vocab_size, positions)
