"""DiffusionGemma checkpoints: tiny presets, offline loading and saving of HF directories.

The backbone is always transformers' `DiffusionGemmaForBlockDiffusion`; this module only builds configs for it, and
loads / saves the directory layout that transformers, SGLang and vLLM read (config.json, model.safetensors,
generation_config.json, tokenizer files).

torch and transformers are imported inside the functions that need them: `check_checkpoint` (what `load_model` checks
first) and the presets need neither, so the command line refuses a bad --model before paying seconds of imports.
Checkpoints are written atomically (`save_model`): a crash mid-save leaves the previous checkpoint whole.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diffreason.errors import DiffreasonError, ModelLoadError, WrongModel, first_line

if TYPE_CHECKING:
    import torch
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion, PreTrainedTokenizerBase
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import DiffusionGemmaGenerationConfig

    from diffreason.sampler import SamplerConfig

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

# The checkpoints shipped inside the package (package data: diffreason/weights/**), the defaults of the command line,
# the SGLang frontend and the GPU checks.
WEIGHTS_DIR = Path(__file__).parent / "weights"
EMBEDDED_SUDOKU = WEIGHTS_DIR / "sudoku-base"  # the Sudoku solver (tasks/sudoku.py's cell-aware vocabulary)
EMBEDDED_JSON = WEIGHTS_DIR / "json-small"  # the JSON model (tasks/json_corpus.py's byte-level BPE)
EMBEDDED_CODE = WEIGHTS_DIR / "code-small"  # the code infilling model (tasks/infill/corpus.py's byte-level BPE)

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
    def context_length(self) -> int | None:
        """Positions the model was built for (the prompt and every canvas of the answer share them); None: unknown."""
        value = getattr(self.model.config.text_config, "max_position_embeddings", None)
        return int(value) if value else None

    def encode_prompt(self, text: str) -> list[int]:
        """A text prompt's token ids as the engine reads it: BOS, then the text's tokens (none added around it; a
        special token's text inside it, such as "<eos>", is that token, as transformers and SGLang read it: pass
        token ids to keep such text literal)."""
        return [self.tokenizer.bos_token_id] + self.tokenizer.encode(text, add_special_tokens=False)

    def fit_to_context(self, prompt_tokens: int, max_new_tokens: int, fixed_tokens: int = 0) -> int:
        """`max_new_tokens` cut to the whole canvases that fit the model's positions after the prompt (a cap, as
        SGLang cuts it); ContextTooLong (a ConfigError) when the prompt and the `fixed_tokens` an answer must hold (a
        template's length) do not fit."""
        from diffreason.errors import ContextTooLong

        limit, canvas = self.context_length, self.canvas_length
        if limit is None:
            return max_new_tokens
        room = (limit - prompt_tokens) // canvas * canvas  # (every canvas of the answer takes its positions whole)
        need = max(1, fixed_tokens)
        if room < need:
            canvases = -(-need // canvas)
            raise ContextTooLong(f"the prompt ({prompt_tokens} tokens) and the answer's {canvases} canvas"
                              f"{'es' if canvases > 1 else ''} of {canvas} need {prompt_tokens + canvases * canvas} "
                              f"positions; the model has {limit}")
        return min(max_new_tokens, room)

    @property
    def device(self) -> torch.device:
        return self.model.device

    def save(self, path: str | Path) -> Path:
        return save_model(self, path)


def make_config(preset: str | dict[str, Any], tokenizer: PreTrainedTokenizerBase, **overrides: Any) -> DiffusionGemmaConfig:
    """A valid DiffusionGemmaConfig for a named preset (or a dict of text-config fields) sized to `tokenizer`."""
    from transformers import DiffusionGemmaConfig

    from diffreason.tokenizer import IMAGE_MARKERS

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
    text = {  # (a preset's or an override's field wins: e.g. max_position_embeddings)
        "vocab_size": len(tokenizer),
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "max_position_embeddings": 4096,
        **fields,
    }
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
    import torch
    from transformers import DiffusionGemmaForBlockDiffusion

    from diffreason.sampler import SamplerConfig
    from diffreason.tokenizer import train_byte_bpe

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
    import torch
    from transformers import DiffusionGemmaForBlockDiffusion

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
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
        DiffusionGemmaGenerationConfig, EntropyBoundSamplerConfig,
    )

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


def sampler_config_from_generation_config(gc: DiffusionGemmaGenerationConfig | dict | None) -> SamplerConfig:
    """Map a checkpoint's generation_config (the object, or its JSON as a dict) onto ours; null or missing fields take
    the released defaults."""
    from diffreason.sampler import SamplerConfig

    if gc is None:
        return SamplerConfig()
    get = gc.get if isinstance(gc, dict) else (lambda key: getattr(gc, key, None))
    keys = ("max_denoising_steps", "t_min", "t_max", "stability_threshold", "confidence_threshold")
    values: dict[str, Any] = {key: get(key) for key in keys}
    sc = get("sampler_config")
    values["entropy_bound"] = sc.get("entropy_bound") if isinstance(sc, dict) else getattr(sc, "entropy_bound", None)
    return SamplerConfig(**{k: v for k, v in values.items() if v is not None})


# What `save_model` writes afresh every time: weights of an earlier save are never carried over beside new ones.
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".safetensors.index.json", ".bin.index.json")


def save_model(lm: DiffusionLM, path: str | Path) -> Path:
    """Write an HF directory (safetensors weights, config, generation config, tokenizer) that any loader reads.
    The sampler's settings go to the generation config, all but `draws` (a run-time choice; see SamplerConfig).

    The write is atomic: the files go to a temporary sibling directory (`.NAME.tmp`, a crashed save's leftover is
    removed first), which then takes the place of `path` by rename. A crash or Ctrl-C mid-save leaves the previous
    checkpoint whole — a half-written model.safetensors once blocked resuming a training run; stopped between its two
    renames, the previous one waits as `.NAME.old`, which the next save puts back first. Other files of the
    previous checkpoint (a README, say) are copied over; a directory that holds files but no checkpoint is refused
    rather than replaced. Problems writing are one DiffreasonError.
    """
    path = Path(os.path.abspath(Path(path).expanduser()))
    if path.exists() and not path.is_dir():
        raise DiffreasonError(f"cannot write a checkpoint to {str(path)!r}: it is a file")
    tmp, old = path.with_name(f".{path.name}.tmp"), path.with_name(f".{path.name}.old")
    try:
        if not path.exists() and (old / "config.json").is_file():  # (a save stopped between its two renames)
            os.replace(old, path)
        existing = sorted(path.iterdir()) if path.is_dir() else []
    except OSError as exc:
        raise DiffreasonError(f"cannot write a checkpoint to {str(path)!r}: {exc.strerror or exc}") from None
    if existing and not (path / "config.json").is_file():
        raise DiffreasonError(
            f"{str(path)!r} holds files but no checkpoint; refusing to replace it (choose a new or empty directory)"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        lm.model.generation_config = to_generation_config(lm.sampler_config, lm.tokenizer)
        lm.model.save_pretrained(tmp, safe_serialization=True)
        lm.tokenizer.save_pretrained(tmp)
        write_processor(tmp)
        mask = os.umask(0)
        os.umask(mask)
        for written in tmp.iterdir():  # (safetensors writes its file 0600: readable as the others are)
            if written.is_file():
                os.chmod(written, 0o666 & ~mask)
        for entry in existing:
            if not (tmp / entry.name).exists() and not entry.name.endswith(_WEIGHT_SUFFIXES):
                (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, tmp / entry.name)
        _fsync_files(tmp)
        if path.is_dir():
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
        _fsync_files(path.parent, directory_only=True)
    except OSError as exc:
        raise DiffreasonError(f"cannot write the checkpoint to {str(path)!r}: {exc.strerror or exc}") from None
    lm.path = path
    return path


PROCESSOR_FILE = "processor_config.json"


def write_processor(directory: str | Path) -> None:
    """Make the checkpoint in `directory` one SGLang's tokenizer manager loads: SGLang serves DiffusionGemma as a
    multimodal model and loads its processor (`AutoProcessor` → transformers' `Gemma4Processor`, which reads the image
    markers off the tokenizer). Declares the tokenizer's image markers (`boi_token`, `eoi_token`, `image_token`: the
    tokens `config.json` names) in tokenizer_config.json, and writes processor_config.json from transformers' own
    Gemma4Processor with its default image, audio and video settings. The vocabulary is unchanged (the processor's
    `<|video|>` is not added: SGLang reloads the tokenizer from tokenizer.json). A tokenizer.json that adds no BOS
    before a text (checkpoints written before 2026-12-07) gets the post-processor that does, so SGLang's tokenizer
    manager encodes a request's text as the engine lays its prompt out. Idempotent."""
    import copy
    import tempfile

    from tokenizers import Tokenizer
    from tokenizers.processors import TemplateProcessing
    from transformers import AutoTokenizer
    from transformers.models.gemma4 import (
        Gemma4AudioFeatureExtractor,
        Gemma4ImageProcessor,
        Gemma4Processor,
        Gemma4VideoProcessor,
    )

    from diffreason.tokenizer import BOS, IMAGE_MARKERS

    directory = Path(directory)
    vocab = Tokenizer.from_file(str(directory / "tokenizer.json"))
    missing = [t for t in IMAGE_MARKERS if vocab.token_to_id(t) is None]
    if missing:  # (declaring them would add them: a vocabulary larger than the model's embeddings)
        raise DiffreasonError(f"the tokenizer in {str(directory)!r} lacks the image markers {missing}; SGLang "
                              "cannot load a DiffusionGemma processor for it")
    bos = vocab.token_to_id(BOS)
    if bos is not None and vocab.encode("x").ids[:1] != [bos]:
        vocab.post_processor = TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A {BOS}:1 $B:1",
                                                  special_tokens=[(BOS, bos)])
        vocab.save(str(directory / "tokenizer.json"))
    markers = dict(zip(("boi_token", "eoi_token", "image_token"), IMAGE_MARKERS))
    tokenizer = AutoTokenizer.from_pretrained(directory, extra_special_tokens=markers)
    with tempfile.TemporaryDirectory() as scratch:
        tokenizer.save_pretrained(scratch)
        config = json.loads((Path(scratch) / "tokenizer_config.json").read_text())
        for key in ("is_local", "local_files_only"):  # (where this copy was loaded from, not what it is)
            config.pop(key, None)
        (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
        processor = Gemma4Processor(feature_extractor=Gemma4AudioFeatureExtractor(),
                                    image_processor=Gemma4ImageProcessor(), tokenizer=copy.deepcopy(tokenizer),
                                    video_processor=Gemma4VideoProcessor())
        processor.save_pretrained(Path(scratch) / "processor")
        shutil.copy2(Path(scratch) / "processor" / PROCESSOR_FILE, directory / PROCESSOR_FILE)


def _fsync_files(directory: Path, directory_only: bool = False) -> None:
    """Flush a directory's files (unless `directory_only`) and the directory itself to disk, so that a rename that
    publishes them cannot outlive them after a power loss."""
    for f in [] if directory_only else [f for f in directory.iterdir() if f.is_file()]:
        with open(f, "rb") as handle:
            os.fsync(handle.fileno())
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_checkpoint(path: str | Path) -> tuple[Path, dict, dict | None]:
    """(path, config.json, generation_config.json or None) of a DiffusionGemma checkpoint directory, checked without
    importing torch: any problem is one ModelLoadError that names the file."""
    if not isinstance(path, (str, os.PathLike)):
        raise ModelLoadError(f"a model path is a string or a path, not {type(path).__name__}")
    path = Path(path).expanduser()
    if not path.exists():
        raise ModelLoadError(f"model directory {str(path)!r} does not exist")
    if not path.is_dir():
        raise ModelLoadError(f"{str(path)!r} is a file; --model takes a checkpoint directory")
    config_file = path / "config.json"
    if not config_file.is_file():
        raise ModelLoadError(f"{str(path)!r} has no config.json; it is not a Hugging Face checkpoint directory")
    raw = _read_json(config_file)
    model_type = raw.get("model_type") if isinstance(raw, dict) else None
    if model_type != "diffusion_gemma":
        arch = raw.get("architectures") if isinstance(raw, dict) else None
        arch = ", ".join(map(str, arch)) if isinstance(arch, list) else ""
        # (a model of a type named: another kind, never rebuilt over — a training run resumed on it would start a new
        # model and fail to load its trainer state into that)
        raise (WrongModel if model_type else ModelLoadError)(
            f"{str(path)!r} holds a {model_type or 'unknown'} model{f' ({arch})' if arch else ''}; "
            "diffreason needs a DiffusionGemma checkpoint (model_type 'diffusion_gemma')"
        )
    canvas = raw.get("canvas_length", 256)  # (transformers' default when the key is absent)
    if isinstance(canvas, bool) or not isinstance(canvas, int) or canvas < 1:
        raise ModelLoadError(f"{config_file}: canvas_length must be a positive integer, got {canvas!r}")
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        raise ModelLoadError(f"{str(path)!r} has no weights (*.safetensors)")
    gen_file = path / "generation_config.json"
    generation = None
    if gen_file.exists():
        generation = _read_json(gen_file)
        if not isinstance(generation, dict):
            raise ModelLoadError(f"{gen_file} must hold a JSON object, not {type(generation).__name__}")
        numbers = {k: generation.get(k) for k in ("max_denoising_steps", "t_min", "t_max", "confidence_threshold")}
        bad = next(((k, v) for k, v in numbers.items() if isinstance(v, float) and not math.isfinite(v)), None)
        if bad:
            raise ModelLoadError(f"{gen_file}: {bad[0]} must be a finite number, got {bad[1]}")
    return path, raw, generation


def _read_json(file: Path) -> Any:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ModelLoadError(f"cannot read {file}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelLoadError(f"{file} is not valid JSON: {exc}") from None


def load_model(
    path: str | Path, device: str | torch.device | None = None, dtype: torch.dtype | None = None
) -> DiffusionLM:
    """Load a DiffusionGemma HF directory offline. Any problem with the directory is one ModelLoadError."""
    path, _, generation = check_checkpoint(path)
    import torch
    from transformers import DiffusionGemmaForBlockDiffusion, PreTrainedTokenizerFast

    try:
        sampler_config = sampler_config_from_generation_config(generation)
    except ValueError as exc:  # pydantic's ValidationError: the file's first bad field
        raise ModelLoadError(f"{path / 'generation_config.json'}: {describe_validation_error(exc)}") from None
    try:
        model, info = DiffusionGemmaForBlockDiffusion.from_pretrained(
            path, local_files_only=True, dtype=dtype or torch.float32, output_loading_info=True,
            ignore_mismatched_sizes=True,  # (reported below with their shapes; transformers' error refers to a log)
        )
    except Exception as exc:  # transformers raises many types for a broken directory; the user needs one message
        raise ModelLoadError(f"could not load the weights in {str(path)!r}: {first_line(exc)}") from None
    check_weights(path, model, info)
    try:
        tokenizer = PreTrainedTokenizerFast.from_pretrained(path, local_files_only=True)
    except Exception as exc:
        why = "it has no tokenizer.json" if not (path / "tokenizer.json").is_file() else first_line(exc).rstrip(":")
        raise ModelLoadError(f"could not load the tokenizer in {str(path)!r}: {why}") from None
    embedded = model.get_input_embeddings().num_embeddings
    if len(tokenizer) > embedded:  # (its last ids would index past the embedding)
        raise ModelLoadError(f"the tokenizer in {str(path)!r} has {len(tokenizer)} tokens, more than the model's "
                             f"{embedded} embeddings: they are not one checkpoint's")
    for name in ("eos_token_id", "pad_token_id", "bos_token_id"):
        token = getattr(tokenizer, name)
        if token is not None and not 0 <= token < embedded:
            raise ModelLoadError(f"the tokenizer in {str(path)!r} has {name} {token}, outside the model's {embedded} "
                                 "embeddings")
    if device is not None:
        model.to(device)
    model.eval()
    return DiffusionLM(model=model, tokenizer=tokenizer, sampler_config=sampler_config, path=path)


def check_weights(path: Path, model, info: dict) -> None:
    """A ModelLoadError for weights that are not the model's whole and finite parameters: transformers fills a
    missing tensor with random values and skips an unexpected one (a damaged or foreign file then generates noise),
    and a NaN or infinite weight makes every step's statistics NaN."""
    import torch

    whole = "not a whole checkpoint of this model"
    for kind, what, why in (("missing_keys", "lack", whole),
                            ("unexpected_keys", "hold tensors the model does not have:", whole),
                            ("mismatched_keys", "hold tensors of other shapes:", "config.json describes another model")):
        names = sorted(f"{k[0]} ({list(k[1])} there, {list(k[2])} in the model)"
                       if isinstance(k, tuple) and len(k) == 3 else str(k) for k in info.get(kind) or ())
        if names:
            more = f" and {len(names) - 3} more" if len(names) > 3 else ""
            raise ModelLoadError(f"the weights in {str(path)!r} {what} {', '.join(names[:3])}{more}: {why}")
    bad = next((name for name, p in model.named_parameters() if not bool(torch.isfinite(p).all())), None)
    if bad is not None:
        raise ModelLoadError(f"the weights in {str(path)!r} are damaged: {bad} holds NaN or infinite values")


def describe_validation_error(exc: ValueError) -> str:
    """One line for a pydantic validation error (its first problem, with the field it is about), or the message of any
    other ValueError."""
    errors = getattr(exc, "errors", None)
    if callable(errors) and errors():
        e = errors()[0]
        where = ".".join(str(part) for part in e.get("loc", ()))
        msg = e["msg"].removeprefix("Value error, ")
        return f"{where}: {msg}" if where else msg
    return " ".join(str(exc).split())
