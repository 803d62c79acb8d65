"""DiffusionGemma checkpoints: tiny presets, offline loading and saving of HF directories.

The backbone is always transformers' `DiffusionGemmaForBlockDiffusion`; this module only builds configs for it, and
loads / saves the directory layout that transformers, SGLang and vLLM read (config.json, model.safetensors,
generation_config.json, tokenizer files).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import (
    DiffusionGemmaConfig,
    DiffusionGemmaForBlockDiffusion,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)
from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
    DiffusionGemmaGenerationConfig,
    EntropyBoundSamplerConfig,
)

from diffreason.errors import ModelLoadError
from diffreason.sampler import SamplerConfig
from diffreason.tokenizer import IMAGE_MARKERS, train_byte_bpe

# Text-model shapes of the named presets. Every preset keeps Gemma 4's structure: sliding-window layers with a final
# full-attention layer, a dense MLP in parallel with a top-k MoE, tied embeddings, soft-capped logits.
PRESETS: dict[str, dict[str, Any]] = {
    # Smallest thing that exercises every code path; used by the tests.
    "tiny": dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
        head_dim=32, global_head_dim=32, sliding_window=16, num_experts=4, top_k_experts=2, moe_intermediate_size=32,
        canvas_length=32,
    ),
    # A few million parameters with realistic proportions (layers dominate the vocabulary work), full 256 canvas.
    "small": dict(
        hidden_size=256, intermediate_size=1024, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
        head_dim=64, global_head_dim=64, sliding_window=64, num_experts=8, top_k_experts=2, moe_intermediate_size=256,
        canvas_length=256,
    ),
}

# DiffusionGemma requires a vision tower config; ours is the smallest Gemma 4 vision config that builds.
TINY_VISION = dict(
    model_type="gemma4_vision", hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
    num_key_value_heads=2, head_dim=16, patch_size=4, position_embedding_size=64, pooling_kernel_size=1,
)


@dataclass
class DiffusionLM:
    """A loaded checkpoint: the transformers model, its tokenizer and its sampler defaults."""

    model: DiffusionGemmaForBlockDiffusion
    tokenizer: PreTrainedTokenizerBase
    sampler_config: SamplerConfig
    path: Path | None = None

    @property
    def config(self) -> DiffusionGemmaConfig:
        return self.model.config

    @property
    def canvas_length(self) -> int:
        return int(self.model.config.canvas_length)

    @property
    def vocab_size(self) -> int:
        return int(self.model.config.text_config.vocab_size)

    @property
    def device(self) -> torch.device:
        return self.model.device

    def save(self, path: str | Path) -> Path:
        return save_model(self, path)


def make_config(preset: str | dict[str, Any], tokenizer: PreTrainedTokenizerBase, **overrides: Any) -> DiffusionGemmaConfig:
    """A valid DiffusionGemmaConfig for a named preset (or a dict of text-config fields) sized to `tokenizer`."""
    if isinstance(preset, str):
        if preset not in PRESETS:
            raise ModelLoadError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
        fields = dict(PRESETS[preset])
    else:
        fields = dict(preset)
    fields.update(overrides)
    canvas_length = fields.pop("canvas_length", 256)
    # Gemma 4 pattern (5 sliding : 1 full), with the last layer full as the architecture requires.
    n_layers = fields["num_hidden_layers"]
    fields.setdefault(
        "layer_types",
        ["full_attention" if (i + 1) % 6 == 0 or i == n_layers - 1 else "sliding_attention" for i in range(n_layers)],
    )
    markers = tokenizer.convert_tokens_to_ids(list(IMAGE_MARKERS))
    text = dict(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
        max_position_embeddings=4096,
        **fields,
    )
    return DiffusionGemmaConfig(
        text_config=text,
        vision_config=dict(TINY_VISION),
        canvas_length=canvas_length,
        boi_token_id=markers[0],
        eoi_token_id=markers[1],
        image_token_id=markers[2],
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )


def build_model(
    preset: str | dict[str, Any] = "tiny",
    tokenizer: PreTrainedTokenizerBase | None = None,
    seed: int = 0,
    sampler_config: SamplerConfig | None = None,
    **overrides: Any,
) -> DiffusionLM:
    """A randomly initialised DiffusionGemma of a preset size (seeded, so the same call builds the same weights)."""
    tokenizer = tokenizer or train_byte_bpe()
    config = make_config(preset, tokenizer, **overrides)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = DiffusionGemmaForBlockDiffusion(config)
    model.eval()
    model.generation_config = to_generation_config(sampler_config or SamplerConfig(), tokenizer)
    return DiffusionLM(model=model, tokenizer=tokenizer, sampler_config=sampler_config or SamplerConfig())


def grow_depth(lm: DiffusionLM, num_layers: int) -> DiffusionLM:
    """A deeper copy of `lm` that computes exactly the same function (depth up-scaling, to go on training it).

    Each added layer is a copy of a sliding-attention layer placed right after it, with its two output norms
    (post-attention, post-feed-forward) zeroed: Gemma's RMSNorm scales by its weight, so the copy adds nothing to the
    residual stream until training moves those weights. Copies are spread evenly over the sliding layers; the last
    (full-attention) layer stays last.
    """
    text = lm.config.text_config
    old = int(text.num_hidden_layers)
    if num_layers <= old:
        raise ModelLoadError(f"the model has {old} layers already; growing needs more than that, got {num_layers}")
    sliding = [i for i, kind in enumerate(text.layer_types) if kind == "sliding_attention"]
    extra = num_layers - old
    if extra > len(sliding):
        raise ModelLoadError(f"can add at most {len(sliding)} layers (one per sliding layer) to this model, asked {extra}")
    # copy every (len(sliding) / extra)-th sliding layer, starting from the first
    copied = {sliding[round(k * len(sliding) / extra)] for k in range(extra)}
    source: list[int] = []  # source[j]: the old layer that new layer j starts from
    for i in range(old):
        source += [i, i] if i in copied else [i]
    config = lm.config.__class__.from_dict(lm.config.to_dict())
    config.text_config.num_hidden_layers = num_layers
    config.text_config.layer_types = [text.layer_types[i] for i in source]
    with torch.device(lm.device):
        model = DiffusionGemmaForBlockDiffusion(config).to(lm.model.dtype)
    # the decoder's layers are the encoder's (shared weights); both views appear in the state dict
    prefixes = ("model.encoder.language_model.layers.", "model.decoder.layers.")
    old_state = lm.model.state_dict()
    state = {}
    for key in model.state_dict():
        prefix = next((p for p in prefixes if key.startswith(p)), None)
        if prefix:
            j, rest = key[len(prefix):].split(".", 1)
            j = int(j)
            state[key] = old_state[f"{prefix}{source[j]}.{rest}"].clone()
            is_copy = j > 0 and source[j - 1] == source[j]
            if is_copy and rest in ("post_attention_layernorm.weight", "post_feedforward_layernorm.weight"):
                state[key].zero_()
        else:
            state[key] = old_state[key].clone()
    model.load_state_dict(state, strict=True)
    model.eval()
    model.generation_config = lm.model.generation_config
    return DiffusionLM(model=model, tokenizer=lm.tokenizer, sampler_config=lm.sampler_config)


def to_generation_config(cfg: SamplerConfig, tokenizer: PreTrainedTokenizerBase) -> DiffusionGemmaGenerationConfig:
    return DiffusionGemmaGenerationConfig(
        max_denoising_steps=cfg.max_denoising_steps,
        sampler_config=EntropyBoundSamplerConfig(entropy_bound=float(cfg.entropy_bound)),
        t_min=float(cfg.t_min),
        t_max=float(cfg.t_max),
        stability_threshold=cfg.stability_threshold,
        confidence_threshold=float(cfg.confidence_threshold),
        max_new_tokens=256,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )


def sampler_config_from_generation_config(gc: DiffusionGemmaGenerationConfig | None) -> SamplerConfig:
    """Map a checkpoint's generation_config onto ours; null or missing fields take the released defaults."""
    if gc is None:
        return SamplerConfig()
    values: dict[str, Any] = {
        "max_denoising_steps": getattr(gc, "max_denoising_steps", None),
        "t_min": getattr(gc, "t_min", None),
        "t_max": getattr(gc, "t_max", None),
        "stability_threshold": getattr(gc, "stability_threshold", None),
        "confidence_threshold": getattr(gc, "confidence_threshold", None),
    }
    sc = getattr(gc, "sampler_config", None)
    values["entropy_bound"] = sc.get("entropy_bound") if isinstance(sc, dict) else getattr(sc, "entropy_bound", None)
    return SamplerConfig(**{k: v for k, v in values.items() if v is not None})


def save_model(lm: DiffusionLM, path: str | Path) -> Path:
    """Write an HF directory (safetensors weights, config, generation config, tokenizer) that any loader reads."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    lm.model.generation_config = to_generation_config(lm.sampler_config, lm.tokenizer)
    lm.model.save_pretrained(path, safe_serialization=True)
    lm.tokenizer.save_pretrained(path)
    lm.path = path
    return path


def load_model(
    path: str | Path, device: str | torch.device | None = None, dtype: torch.dtype | None = None
) -> DiffusionLM:
    """Load a DiffusionGemma HF directory offline. Any problem with the directory is one ModelLoadError."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ModelLoadError(f"model directory {str(path)!r} does not exist")
    if not path.is_dir():
        raise ModelLoadError(f"{str(path)!r} is a file; --model takes a checkpoint directory")
    config_file = path / "config.json"
    if not config_file.is_file():
        raise ModelLoadError(f"{str(path)!r} has no config.json; it is not a Hugging Face checkpoint directory")
    try:
        raw = json.loads(config_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelLoadError(f"{config_file} is not valid JSON: {exc}") from None
    model_type = raw.get("model_type") if isinstance(raw, dict) else None
    if model_type != "diffusion_gemma":
        arch = ", ".join(raw.get("architectures") or []) if isinstance(raw, dict) else ""
        raise ModelLoadError(
            f"{str(path)!r} holds a {model_type or 'unknown'} model{f' ({arch})' if arch else ''}; "
            "diffreason needs a DiffusionGemma checkpoint (model_type 'diffusion_gemma')"
        )
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        raise ModelLoadError(f"{str(path)!r} has no weights (*.safetensors)")
    try:
        model = DiffusionGemmaForBlockDiffusion.from_pretrained(
            path, local_files_only=True, dtype=dtype or torch.float32
        )
    except Exception as exc:  # transformers raises many types for a broken directory; the user needs one message
        raise ModelLoadError(f"could not load the weights in {str(path)!r}: {_first_line(exc)}") from None
    try:
        tokenizer = PreTrainedTokenizerFast.from_pretrained(path, local_files_only=True)
    except Exception as exc:
        raise ModelLoadError(f"could not load the tokenizer in {str(path)!r}: {_first_line(exc)}") from None
    if device is not None:
        model.to(device)
    model.eval()
    gc = model.generation_config if (path / "generation_config.json").is_file() else None
    return DiffusionLM(model=model, tokenizer=tokenizer, sampler_config=sampler_config_from_generation_config(gc), path=path)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
