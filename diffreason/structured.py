"""Structured output: `generate(model, schema_or_model, prompt=...)` → the parsed (and validated) object.

The one obvious entry point, outlines-style: give a checkpoint (or its directory) and a JSON Schema, a schema file or a
pydantic model class; get back the object (a pydantic instance for a model class) and the engine's result (steps per
canvas, tokens, text).
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from pathlib import Path
from typing import Any

from diffreason.canvas import CanvasTemplate
from diffreason.engine import Engine, GenerationResult
from diffreason.errors import DiffreasonError
from diffreason.model import DiffusionLM, load_model
from diffreason.sampler import SamplerConfig


class TimeLimit(BaseException):
    """Raised inside a `time_limit` block when its seconds have passed. Not an Exception: library code that catches
    those (a validator's `except Exception`) must not swallow it."""


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise TimeLimit after `seconds`; no limit when 0, off the main thread or without SIGALRM (POSIX main thread
    only). Python's re checks for signals while it matches, so this interrupts a pattern that backtracks forever."""
    if not seconds or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise TimeLimit()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def constraint_template(
    tokenizer,
    canvas_length: int,
    *,
    regex: str | None = None,
    json_schema: Any = None,
    max_tokens: int | None = None,
) -> tuple[CanvasTemplate, Any]:
    """The canvas template of a request's constraint (regex or JSON Schema), slots aligned to canvases, EOS last.

    Returns (template, compiled schema or None). One function for every front end — the CLI, the sgl backend and
    the SGLang server plugin — so a constraint means the same thing everywhere.
    """
    from diffreason.errors import TemplateError
    from diffreason.tasks.json_schema import Budget, compile_schema, load_schema

    if regex is not None and json_schema is not None:
        raise DiffreasonError("give a regex or a json_schema, not both")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    compiled = None
    if json_schema is not None:
        json_schema = load_schema(json_schema)  # (a string is JSON text, never a path: requests carry data)
        # A slot never crosses a canvas boundary, so none may be longer than a canvas.
        budget = Budget(max_slot=min(Budget.max_slot, canvas_length))
        compiled = compile_schema(json_schema, tokenizer, budget)
        template = compiled.template
    elif regex is not None:
        if not isinstance(regex, str) or not regex:
            raise TemplateError("regex must be a non-empty string")
        # A regex is one slot: as long as the token budget allows, within one canvas (EOS takes the last place).
        length = min(max_tokens or canvas_length, canvas_length) - 1
        if length < 1:
            raise TemplateError(f"max_tokens={max_tokens} leaves no room for a regex match")
        eos = CanvasTemplate.from_positions(len(tokenizer), [tokenizer.eos_token_id])
        template = CanvasTemplate.from_regex(regex, tokenizer, length) + eos
    else:
        raise DiffreasonError("no constraint: give a regex or a json_schema")
    return template.align_slots(canvas_length, pad), compiled


VALIDATION_SECONDS = 30.0


def generate(
    model: DiffusionLM | str | Path,
    schema_or_model: Any,
    prompt: str = "",
    seed: int = 0,
    sampler: SamplerConfig | None = None,
) -> tuple[Any, GenerationResult]:
    from diffreason.tasks.json_schema import load_schema

    lm = model if isinstance(model, DiffusionLM) else load_model(model)
    template, compiled = constraint_template(lm.tokenizer, lm.canvas_length, json_schema=load_schema(schema_or_model))
    result = Engine(lm, sampler).generate(prompt, template=template, seed=seed)
    result.fixed = compiled.fixed
    import jsonschema

    try:
        value = json.loads(result.text)
        with time_limit(VALIDATION_SECONDS):  # a schema pattern can make Python's re backtrack for hours
            compiled.validate(value)
    except TimeLimit:
        raise DiffreasonError(f"jsonschema did not finish checking the output within {VALIDATION_SECONDS:g} s (a "
                              f"schema pattern that backtracks exponentially); the output, unchecked: "
                              f"{result.text}") from None
    except (ValueError, jsonschema.ValidationError) as exc:  # a compiler bug: the template guarantees validity
        raise DiffreasonError(f"internal error: output {result.text!r} does not validate: {exc}") from None
    except Exception as exc:  # jsonschema itself fails on this schema (e.g. a $ref into a non-schema)
        raise DiffreasonError(f"jsonschema cannot evaluate this schema ({type(exc).__name__}: {exc}); the output, "
                              f"unchecked: {result.text}") from None
    if isinstance(schema_or_model, type) and hasattr(schema_or_model, "model_validate"):
        value = schema_or_model.model_validate(value)
    return value, result
