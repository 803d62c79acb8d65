"""Uniform-state SFT for DiffusionGemma: the reference objective, resumable, on CPU or GPU.

Per example: t ~ U(t_min, 1); each corruptible (free) canvas position is replaced, with probability t, by a uniform
random token from its allowed set (no mask token); cross-entropy of the clean canvas under the template's allowed sets
(no 1/t weight), averaged over the corruptible positions; plus the encoder's next-token loss on the prompt when there is
one. Self-conditioning is trained in two passes: pass 1 without it (no grad); per example with probability p its logits
condition pass 2, otherwise the signal is exactly zero (`self_conditioning_mask`; pass 1 runs only for the examples
drawn).

A task supplies batches (`SFTBatch`); `train()` owns the loop: AdamW with warmup + cosine decay, gradient clipping, a
rich progress bar (loss, steps/s), periodic evaluation, and checkpoints (model, optimiser, scheduler, step, RNG, data
stream) that a rerun resumes from. The model is always written as an HF directory (`RUN/model`).

Checkpoints are written atomically (a temporary file or directory renamed into place), so an interrupted save leaves
the previous one whole. A loss or gradient that stops being finite ends training with an error before the optimiser
applies it, and weights that are not finite are never saved: a diverged run never overwrites a good checkpoint.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.progress import (
    BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn,
)
from transformers import DynamicCache

from diffreason.errors import DiffreasonError, ModelLoadError, WrongModel
from diffreason.model import DiffusionLM, load_model

STATE_FILE = "trainer_state.pt"


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during `train()`: still a KeyboardInterrupt, carrying the step of the checkpoint a rerun resumes from
    (None when this run has none yet)."""

    def __init__(self, checkpoint_step: int | None):
        super().__init__(checkpoint_step)
        self.checkpoint_step = checkpoint_step


class TrainConfig(BaseModel):
    # non-finite numbers are refused: an infinite learning rate or time budget passes every bound but trains nothing
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    steps: int = Field(3000, ge=1)
    batch_size: int = Field(64, ge=1)
    lr: float = Field(1e-3, gt=0)
    warmup: int = Field(100, ge=0)
    min_lr_ratio: float = Field(0.1, ge=0, le=1)
    weight_decay: float = Field(0.01, ge=0)
    grad_clip: float = Field(1.0, gt=0)
    self_conditioning_p: float = Field(0.5, ge=0, le=1)
    t_min: float = Field(1e-3, gt=0, lt=1)
    ar_loss_weight: float = Field(1.0, ge=0)
    eval_every: int = Field(250, ge=0)
    save_every: int = Field(100, ge=1)
    # Wall-clock budget in seconds (None: none). The schedule (warmup + cosine, the task's curriculum) then follows
    # whichever of steps or time runs out first, so a run cut by time still ends at the low learning rate.
    time_budget: float | None = Field(None, gt=0)
    # "bf16": forward and backward under bfloat16 autocast (weights and optimiser stay float32): on a GPU the small
    # models here are bound by memory traffic and kernel count, not FLOPs, and half the bytes moves them faster
    precision: Literal["fp32", "bf16"] = "fp32"
    seed: int = 0


@dataclass
class SFTBatch:
    prompt_ids: torch.Tensor  # [B, P]
    target: torch.Tensor  # [B, C] clean canvas
    noise: torch.Tensor  # [B, C] a uniform draw from each position's allowed set
    corruptible: torch.Tensor  # [B, C] bool: free positions (the template's fixed ones never change)
    allowed: torch.Tensor | None = None  # [B, C, V] bool; None = the whole vocabulary

    def to(self, device) -> "SFTBatch":
        move = lambda x: None if x is None else x.to(device)  # noqa: E731
        return SFTBatch(*(move(getattr(self, f)) for f in ("prompt_ids", "target", "noise", "corruptible", "allowed")))


def _forward(model, prompt_ids, canvas, sc_logits=None, sc_mask=None):
    cache = DynamicCache(config=model.config.get_text_config(decoder=True))
    return model(
        input_ids=prompt_ids,
        decoder_input_ids=canvas,
        past_key_values=cache,
        self_conditioning_logits=sc_logits,
        self_conditioning_mask=sc_mask,
    )


def sft_loss(model, batch: SFTBatch, cfg: TrainConfig, generator: torch.Generator) -> tuple[torch.Tensor, dict]:
    """The uniform-state SFT loss of one batch (see the module docstring)."""
    B, C = batch.target.shape
    device = batch.target.device
    t = cfg.t_min + (1 - cfg.t_min) * torch.rand(B, 1, generator=generator, device=device)
    corrupt = batch.corruptible & (torch.rand(B, C, generator=generator, device=device) < t)
    canvas = torch.where(corrupt, batch.noise, batch.target)

    def constrain(logits, rows=slice(None)):
        return logits if batch.allowed is None else logits.masked_fill(~batch.allowed[rows], float("-inf"))

    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.precision == "bf16")
    sc_logits = sc_mask = None
    if cfg.self_conditioning_p > 0:
        sc_mask = torch.rand(B, generator=generator, device=device) < cfg.self_conditioning_p
        # pass 1 only for the examples that use it (the mask zeroes the others' signal): half the pass at p = 0.5
        rows = sc_mask.nonzero().squeeze(1)
        if len(rows):
            with torch.no_grad(), autocast:
                chosen_logits = constrain(_forward(model, batch.prompt_ids[rows], canvas[rows]).logits.float(), rows)
            sc_logits = chosen_logits.new_zeros((B, *chosen_logits.shape[1:]))
            sc_logits[rows] = chosen_logits
    with autocast:
        out = _forward(model, batch.prompt_ids, canvas, sc_logits, sc_mask)
    logits = constrain(out.logits.float())
    ce = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.target.flatten(), reduction="none").view(B, C)
    weight = batch.corruptible.float()
    diffusion = (ce * weight).sum() / weight.sum().clamp(min=1)
    loss = diffusion
    metrics = {"diffusion_loss": float(diffusion.detach())}
    if batch.prompt_ids.shape[1] > 1 and cfg.ar_loss_weight > 0:
        # The causal encoder's next-token loss on the prompt, with the model's own head and soft-capping.
        cap = model.config.text_config.final_logit_softcapping
        with autocast:
            enc_logits = model.lm_head(out.encoder_last_hidden_state)
        enc_logits = enc_logits.float()
        if cap:
            enc_logits = torch.tanh(enc_logits / cap) * cap
        ar = torch.nn.functional.cross_entropy(enc_logits[:, :-1].flatten(0, 1), batch.prompt_ids[:, 1:].flatten())
        loss = loss + cfg.ar_loss_weight * ar
        metrics["ar_loss"] = float(ar.detach())
    with torch.no_grad():
        acc = ((logits.argmax(-1) == batch.target) | ~batch.corruptible).all(-1).float().mean()
    metrics["canvas_acc"] = float(acc)
    return loss, metrics


def progress_at(step: int, elapsed: float, cfg: TrainConfig) -> float:
    """How far training is, in [0, 1]: by steps, or by wall-clock time when that budget runs out sooner."""
    by_steps = step / cfg.steps
    return min(1.0, max(by_steps, elapsed / cfg.time_budget) if cfg.time_budget else by_steps)


def lr_at(step: int, cfg: TrainConfig, progress: float | None = None) -> float:
    """Linear warmup over `cfg.warmup` steps, then cosine decay to `min_lr_ratio` as progress goes to 1."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    if progress is None:
        progress = step / cfg.steps
    # the cosine starts where warmup ended
    start = cfg.warmup / cfg.steps if cfg.time_budget is None else 0.0
    x = min(1.0, max(0.0, (progress - start) / max(1e-9, 1 - start)))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * x)))


def train(
    lm: DiffusionLM,
    batches: Callable[[int, float], SFTBatch],
    cfg: TrainConfig,
    run_dir: str | Path,
    evaluate: Callable[[DiffusionLM], dict] | None = None,
    stream_state: tuple[Callable[[], dict], Callable[[dict], None]] | None = None,
    console: Console | None = None,
    loss_fn: Callable | None = None,
    identity: dict | None = None,
) -> DiffusionLM:
    """Train `lm` in place on `batches(batch_size, progress)`; resume from `run_dir` if a checkpoint is there.

    `identity`: what makes the run this run besides `cfg.seed` (the model's preset, its origin, the data stream's
    options), kept in RUN/run.json; a resume that asks for another is refused (its model and saved streams are the
    first ones'), while the schedule's settings (steps, lr, batch size, ...) may change on resume: the change is
    said, and each setting's earlier values are kept in RUN/train_config_history.jsonl.

    `loss_fn(model, batch, cfg, generator) -> (loss, metrics)`: the objective, `sft_loss` by default (a baseline's
    own, e.g. the autoregressive Sudoku baseline's; `lm` then needs only `.model` and `.save(path)`).

    Ctrl-C raises `TrainingInterrupted` (the step of the checkpoint kept); a run directory that cannot be written, an
    unreadable trainer state, or a loss that stops being finite is a DiffreasonError.
    """
    console = console or Console(stderr=True)
    run_dir = Path(run_dir)
    model = lm.model
    device = model.device
    optim = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.98))
    generator = torch.Generator(device=device).manual_seed(cfg.seed)
    step, elapsed, saved = 0, 0.0, None  # saved: the step of the newest trainer state on disk
    state_file = run_dir / STATE_FILE
    if state_file.exists() and not state_file.is_file():
        raise DiffreasonError(f"{state_file} is not a file; move it away or choose another run directory")
    identity = {"seed": cfg.seed, **(identity or {})}
    identity_file, config_file = run_dir / "run.json", run_dir / "train_config.json"
    previous = None
    if state_file.is_file():
        previous = _read_json(config_file)
        _check_identity(identity_file, identity, run_dir, previous)
        step, elapsed = _restore(state_file, model, optim, generator, stream_state)
        saved = step
        console.print(f"resuming from step {step} ({state_file})")
        changed = {k: (previous[k], v) for k, v in cfg.model_dump().items()
                   if isinstance(previous, dict) and k in previous and previous[k] != v}
        if changed:
            console.print("resuming with changed settings: " + ", ".join(
                f"{k} {old} → {new}" for k, (old, new) in changed.items()))
    log_file = run_dir / "log.jsonl"
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        if isinstance(previous, dict) and previous != json.loads(cfg.model_dump_json()):
            with open(run_dir / "train_config_history.jsonl", "a") as f:
                f.write(json.dumps({"until_step": step, "config": previous}) + "\n")
        if not state_file.is_file() or not identity_file.is_file():  # (a fresh start is the run from now on)
            _write_atomic(identity_file, json.dumps(identity, indent=2) + "\n")
        _write_atomic(config_file, cfg.model_dump_json(indent=2))
        if log_file.is_file():  # drop records past the checkpoint (those steps are about to be redone) and torn lines
            kept = [ln for ln in log_file.read_text().splitlines() if _logged_step(ln, step)]
            log_file.write_text("".join(ln + "\n" for ln in kept))
        log = log_file.open("a")
    except OSError as exc:
        raise DiffreasonError(f"cannot write to the run directory {str(run_dir)!r}: {exc.strerror or exc}") from None

    def save():
        nonlocal saved
        if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
            raise DiffreasonError(
                f"training diverged: weights are not finite at step {step}; not saved, {_kept(saved, run_dir)}"
            )
        state = {
            "model": model.state_dict(),
            "optim": optim.state_dict(),
            "generator": generator.get_state(),
            "torch_rng": torch.get_rng_state(),
            "stream": stream_state[0]() if stream_state else None,
            "step": step,
            "elapsed": elapsed,
        }
        lm.save(run_dir / "model")  # (first: a trainer state on disk always has its model beside it)
        tmp = state_file.with_suffix(".tmp")
        try:
            with open(tmp, "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(state_file)
        except OSError as exc:
            raise DiffreasonError(f"cannot write the checkpoint {state_file}: {exc.strerror or exc}") from None
        saved = step  # what a rerun resumes from (the trainer state holds the weights too)

    model.train()
    if saved is not None and progress_at(step, elapsed, cfg) >= 1.0:
        console.print(f"step {step} already reaches the end of this schedule (steps {cfg.steps}): nothing to train")
    t_last, s_last = time.perf_counter(), step
    t_resumed, elapsed_before = t_last, elapsed
    progress = progress_at(step, elapsed, cfg)
    # under a time budget the bar shows progress (time or steps, whichever ends first) and the step count separately:
    # "725/100000" would misstate how far the run is
    count = TaskProgressColumn() if cfg.time_budget else MofNCompleteColumn()
    try:
        with Progress(
            TextColumn("[bold]train"), BarColumn(), count, TextColumn("{task.fields[info]}"), TimeRemainingColumn(),
            console=console,
        ) as bar:
            task = bar.add_task("train", total=cfg.steps, completed=round(progress * cfg.steps), info="")
            while progress < 1.0:
                lr = lr_at(step, cfg, progress)
                for group in optim.param_groups:
                    group["lr"] = lr
                batch = batches(cfg.batch_size, progress).to(device)
                loss, metrics = (loss_fn or sft_loss)(model, batch, cfg, generator)
                optim.zero_grad(set_to_none=True)
                loss.backward()
                grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip))
                loss = float(loss.detach())
                if not (math.isfinite(loss) and math.isfinite(grad_norm)):
                    what = f"the loss is {loss}" if not math.isfinite(loss) else f"the gradient norm is {grad_norm}"
                    raise DiffreasonError(
                        f"training diverged at step {step + 1}: {what} (a lower --lr may help); that update was not "
                        f"applied, {_kept(saved, run_dir)}"
                    )
                optim.step()
                step += 1
                now = time.perf_counter()
                elapsed = elapsed_before + now - t_resumed
                progress = progress_at(step, elapsed, cfg)
                rate = (step - s_last) / max(1e-9, now - t_last)
                record = {"step": step, "loss": loss, "lr": lr, "grad_norm": grad_norm, **metrics}
                if cfg.time_budget:
                    record["elapsed"] = round(elapsed, 2)
                info = f"loss {loss:.4f}  {rate:.2f} steps/s"
                if cfg.time_budget:
                    info = f"step {step}  {info}"
                bar.update(task, completed=round(progress * cfg.steps), info=info)
                if step % 20 == 0:
                    t_last, s_last = now, step
                if evaluate is not None and cfg.eval_every and (step % cfg.eval_every == 0 or progress >= 1.0):
                    model.eval()
                    record["eval"] = evaluate(lm)
                    model.train()
                    console.print(f"step {step}: {record['eval']}")
                log.write(json.dumps(record) + "\n")
                log.flush()
                if step % cfg.save_every == 0 or progress >= 1.0:
                    save()
        if saved is not None and not (run_dir / "model" / "config.json").is_file():
            lm.save(run_dir / "model")  # (a finished run whose model went missing: the state's weights are its)
    except KeyboardInterrupt:
        raise TrainingInterrupted(saved) from None
    finally:
        model.eval()
        log.close()
    return lm


def _kept(saved: int | None, run_dir: Path) -> str:
    """What an interrupted or failed run leaves behind, for its message."""
    if saved is None:
        return "and no checkpoint was written"
    return f"the checkpoint of step {saved} in {run_dir} is kept"


def _logged_step(line: str, step: int) -> bool:
    """Whether a log record survives a resume from `step`: it parses (a crash can tear the last line) and is not
    past the checkpoint."""
    try:
        record = json.loads(line)
        return isinstance(record, dict) and int(record["step"]) <= step
    except (ValueError, KeyError, TypeError):
        return False


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write_atomic(path: Path, text: str) -> None:
    """`path` holds `text`, or what it held before (a crash mid-write tears nothing)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _check_identity(identity_file: Path, identity: dict, run_dir: Path, previous_config) -> None:
    """A resume that asks for another run than the one in `run_dir` is one clear error. A run from before run.json
    was kept is checked by the seed of its train_config.json; a run.json that cannot be read is an error (the check
    cannot be made)."""
    if identity_file.exists():
        kept = _read_json(identity_file)
        if not isinstance(kept, dict):
            raise DiffreasonError(f"{identity_file} cannot be read, so a resume cannot be checked against the run "
                                  "(its seed, model and data): restore it, or give another --run-dir")
    else:
        kept = {k: previous_config[k] for k in ("seed",) if isinstance(previous_config, dict) and k in previous_config}
    differ = [f"{k} {json.dumps(kept.get(k))} there, {json.dumps(v)} now" for k, v in identity.items()
              if k in kept and kept[k] != v]
    # (a run of another task keeps options this one has not: a JSON run's schemas under `train code`; a run from
    # before an option was kept lacks it, and is checked by the others)
    differ += [f"{k} {json.dumps(v)} there, none now" for k, v in kept.items() if k not in identity and v is not None]
    if differ:
        raise DiffreasonError(f"--run-dir {str(run_dir)!r} holds another run ({'; '.join(differ)}): a resumed run "
                              "keeps its model and data streams; give the same options, or another --run-dir")


def _restore(state_file: Path, model, optim, generator, stream_state) -> tuple[int, float]:
    """Load a trainer state into the model, optimiser, RNGs and data stream; (step, elapsed seconds). A state that
    cannot be read or does not fit this model is one DiffreasonError saying what to do."""
    try:
        state = torch.load(state_file, map_location=model.device, weights_only=False)
        model.load_state_dict(state["model"])
        optim.load_state_dict(state["optim"])
        generator.set_state(state["generator"].cpu())  # a generator's state is a CPU tensor, also a CUDA one's
        torch.set_rng_state(state["torch_rng"])
        if stream_state and state.get("stream"):
            stream_state[1](state["stream"])
        step, elapsed = int(state["step"]), float(state.get("elapsed", 0.0))
    except Exception as exc:  # torch.load and load_state_dict raise many types for a corrupt or foreign file
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise DiffreasonError(
            f"the trainer state {state_file} cannot be resumed ({detail[:200]}); move it away to start over from "
            "RUN/model's weights, or choose another --run-dir"
        ) from None
    if step < 0 or not math.isfinite(elapsed):
        raise DiffreasonError(f"the trainer state {state_file} is corrupt (step {step}, elapsed {elapsed})")
    return step, elapsed


def resume_or_build(run_dir: str | Path, build: Callable[[], Any],
                    load: Callable[[Path], Any] | None = None) -> Any:
    """The run's model if it has one (its weights are then overwritten by the trainer state), else a new one.
    `load`: how RUN/model is read (default `load_model`; the autoregressive baseline passes its own).

    When the trainer state is there, RUN/model's weights are not needed: a model directory that does not load (a
    half-written file from a crash under an older, non-atomic save) is then rebuilt, and the state fills it in. One
    that loads as another kind of model (`WrongModel`) is never rebuilt over.
    """
    run_dir = Path(run_dir)
    model_dir = run_dir / "model"
    if not (model_dir / "config.json").is_file():
        return build()
    try:
        return (load or load_model)(model_dir)
    except ModelLoadError as exc:
        if isinstance(exc, WrongModel) or not (run_dir / STATE_FILE).is_file():
            raise
        return build()


def examples_trained(run_dir: str | Path) -> int | None:
    """Examples a run trained on up to its last logged step (RUN/log.jsonl), each step at the batch size it ran with:
    RUN/train_config.json's, and before a resume that changed it, RUN/train_config_history.jsonl's (written by
    `train`). None when the run's files do not say."""
    run = Path(run_dir)
    try:
        config = json.loads((run / "train_config.json").read_text())
        last = int(json.loads((run / "log.jsonl").read_text().strip().splitlines()[-1])["step"])
        history = run / "train_config_history.jsonl"
        segments = [json.loads(line) for line in history.read_text().splitlines() if line.strip()] \
            if history.is_file() else []
        examples, start = 0, 0
        for segment in sorted(segments, key=lambda x: int(x["until_step"])):
            until = min(int(segment["until_step"]), last)
            examples += max(0, until - start) * int(segment["config"]["batch_size"])
            start = max(start, until)
        return examples + max(0, last - start) * int(config["batch_size"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
