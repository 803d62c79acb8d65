"""diffreason: constrained generation, infilling and reasoning with DiffusionGemma block-diffusion models.

The public names below are imported on first use (PEP 562): most of them need torch and transformers, which take
seconds to import, and `import diffreason.errors` (or the command line checking its input) should not pay for that.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the submodule that defines it
_EXPORTS = {
    "CanvasConstraint": "canvas", "CanvasTemplate": "canvas",
    "Engine": "engine", "GenerationRequest": "engine", "GenerationResult": "engine", "StepTrace": "engine",
    "ConfigError": "errors", "DiffreasonError": "errors", "ModelLoadError": "errors", "TemplateError": "errors",
    "PRESETS": "model", "DiffusionLM": "model", "build_model": "model", "load_model": "model", "save_model": "model",
    "generate": "structured",
    "infill": "infilling",
    "DenoiseState": "sampler", "EntropyBoundAcceptance": "sampler", "RenoiseSampler": "sampler",
    "SamplerConfig": "sampler", "StableAndConfidentStop": "sampler",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'diffreason' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"diffreason.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:
    from diffreason.canvas import CanvasConstraint, CanvasTemplate
    from diffreason.engine import Engine, GenerationRequest, GenerationResult, StepTrace
    from diffreason.errors import ConfigError, DiffreasonError, ModelLoadError, TemplateError
    from diffreason.infilling import infill
    from diffreason.model import PRESETS, DiffusionLM, build_model, load_model, save_model
    from diffreason.sampler import (
        DenoiseState, EntropyBoundAcceptance, RenoiseSampler, SamplerConfig, StableAndConfidentStop,
    )
    from diffreason.structured import generate
