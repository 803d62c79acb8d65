"""Structured output: `generate(model, schema_or_model, prompt=...)` → the parsed (and validated) object.

The one obvious entry point, outlines-style: give a checkpoint (or its directory) and a JSON Schema, a schema file or a
pydantic model class; get back the object (a pydantic instance for a model class) and the engine's result (steps per
canvas, tokens, text).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from diffreason.engine import Engine, GenerationResult
from diffreason.errors import DiffreasonError
from diffreason.model import DiffusionLM, load_model
from diffreason.sampler import SamplerConfig


def generate(
    model: DiffusionLM | str | Path,
    schema_or_model: Any,
    prompt: str = "",
    seed: int = 0,
    sampler: SamplerConfig | None = None,
) -> tuple[Any, GenerationResult]:
    from diffreason.tasks.json_schema import compile_schema

    lm = model if isinstance(model, DiffusionLM) else load_model(model)
    compiled = compile_schema(schema_or_model, lm.tokenizer)
    template = compiled.template.align_slots(lm.canvas_length, lm.tokenizer.pad_token_id)
    result = Engine(lm, sampler).generate(prompt, template=template, seed=seed)
    try:
        value = json.loads(result.text)
        compiled.validate(value)
    except Exception as exc:  # would be a compiler bug: the template guarantees validity
        raise DiffreasonError(f"internal error: output {result.text!r} does not validate: {exc}") from None
    if isinstance(schema_or_model, type) and hasattr(schema_or_model, "model_validate"):
        value = schema_or_model.model_validate(value)
    return value, result
