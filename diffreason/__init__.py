"""diffreason: constrained generation, infilling and reasoning with DiffusionGemma block-diffusion models."""

from diffreason.canvas import CanvasConstraint, CanvasTemplate
from diffreason.engine import Engine, GenerationRequest, GenerationResult, StepTrace
from diffreason.errors import ConfigError, DiffreasonError, ModelLoadError, TemplateError
from diffreason.model import PRESETS, DiffusionLM, build_model, load_model, save_model
from diffreason.structured import generate
from diffreason.sampler import (
    DenoiseState,
    EntropyBoundAcceptance,
    RenoiseSampler,
    SamplerConfig,
    StableAndConfidentStop,
)

__version__ = "0.1.0"

__all__ = [
    "CanvasConstraint", "CanvasTemplate", "ConfigError", "DenoiseState", "DiffreasonError", "DiffusionLM", "Engine",
    "EntropyBoundAcceptance", "GenerationRequest", "GenerationResult", "ModelLoadError", "PRESETS", "RenoiseSampler",
    "SamplerConfig", "StableAndConfidentStop", "StepTrace", "TemplateError", "build_model", "generate", "load_model", "save_model",
]
