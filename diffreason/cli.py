"""The `diffreason` command line (typer + rich).

Every user error is one line on stderr and exit code 2; never a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from typer import exceptions as typer_exceptions
from rich.console import Console
from rich.live import Live
from rich.text import Text

from diffreason.errors import DiffreasonError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Constrained generation and reasoning with DiffusionGemma block-diffusion models.",
)
err_console = Console(stderr=True)


def _sampler_config(lm, steps: int | None, fast: bool):
    updates = {}
    if steps is not None:
        if steps < 1:
            raise DiffreasonError(f"--steps must be at least 1, got {steps}")
        updates["max_denoising_steps"] = steps
    if fast:
        updates["draws"] = "fast"
    return lm.sampler_config.model_copy(update=updates)


@app.command()
def generate(
    prompt: str = typer.Argument("", help="the prompt (empty: generate from BOS alone)"),
    model: Path = typer.Option(None, "--model", "-m", help="DiffusionGemma checkpoint directory"),
    steps: int = typer.Option(None, "--steps", help="max denoising steps per canvas (default: the checkpoint's)"),
    seed: int = typer.Option(0, "--seed", help="random seed; the same seed gives the same output"),
    max_new_tokens: int = typer.Option(None, "--max-new-tokens", help="default: the checkpoint's (256)"),
    fast: bool = typer.Option(False, "--fast", help="fast random draws (not token-identical to transformers)"),
    watch: bool = typer.Option(False, "--watch", help="show the canvas denoising live"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """Generate text from PROMPT by block diffusion."""
    from diffreason.engine import Engine
    from diffreason.model import load_model

    if model is None:
        raise DiffreasonError("--model DIR is required (build one with: diffreason build-model --preset tiny DIR)")
    if max_new_tokens is not None and max_new_tokens < 1:
        raise DiffreasonError(f"--max-new-tokens must be at least 1, got {max_new_tokens}")
    lm = load_model(model)
    engine = Engine(lm, _sampler_config(lm, steps, fast))
    if watch:
        with CanvasWatcher(lm.tokenizer, engine.sampler.config.max_denoising_steps) as watcher:
            result = engine.generate(prompt, seed=seed, max_new_tokens=max_new_tokens, callback=watcher)
    else:
        result = engine.generate(prompt, seed=seed, max_new_tokens=max_new_tokens)
    if as_json:
        out = result.to_dict()
        out["prompt"] = prompt
        print(json.dumps(out))
    else:
        Console().print(Text(result.text))
        err_console.print(
            f"[dim]{len(result.tokens)} tokens, steps per canvas {result.steps}, {result.seconds:.2f}s[/dim]"
        )


@app.command("build-model")
def build_model_cmd(
    out: Path = typer.Argument(..., help="directory to write the checkpoint to"),
    preset: str = typer.Option("tiny", "--preset", help="model size preset: tiny or small"),
    seed: int = typer.Option(0, "--seed", help="weight initialisation seed"),
) -> None:
    """Write a randomly initialised DiffusionGemma checkpoint (HF directory) of a preset size."""
    from diffreason.model import PRESETS, build_model

    if preset not in PRESETS:
        raise DiffreasonError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    if out.exists() and not out.is_dir():
        raise DiffreasonError(f"{str(out)!r} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        raise DiffreasonError(f"{str(out)!r} is not empty; choose a new directory")
    lm = build_model(preset, seed=seed)
    lm.save(out)
    n = sum(p.numel() for p in lm.model.parameters())
    err_console.print(f"wrote {preset} checkpoint ({n / 1e6:.2f}M parameters) to {out}")


class CanvasWatcher:
    """Live terminal view of a denoising canvas: accepted tokens bright, re-noised ones dim (cf. llama.cpp's
    --diffusion-visual)."""

    def __init__(self, tokenizer, max_steps: int, console: Console | None = None):
        self.tokenizer = tokenizer
        self.max_steps = max_steps
        self.console = console or err_console
        self.live = Live(console=self.console, auto_refresh=False, transient=False)

    def __enter__(self):
        self.live.__enter__()
        return self

    def __exit__(self, *exc):
        self.live.__exit__(*exc)

    def piece(self, token: int) -> str:
        return self.tokenizer.decode([token]).replace("\n", "⏎").replace("\t", "⇥") or "·"

    def __call__(self, request: int, trace) -> None:
        text = Text(
            f"canvas {trace.canvas_index + 1}  step {trace.step}/{self.max_steps}  "
            f"mean entropy {trace.mean_entropy:.3f}\n",
            style="bold",
        )
        for tok, arg, acc in zip(trace.canvas, trace.argmax, trace.accepted):
            text.append(self.piece(arg if acc else tok), style="bold green" if acc else "dim")
        self.live.update(text, refresh=True)


def _fail(message: str) -> None:
    err_console.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    sys.exit(2)


def main() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        app(standalone_mode=False)
    except typer_exceptions.TyperException as exc:
        # Usage errors (bad option, bad value, missing argument) are user errors too: one line, exit 2.
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            print(ctx.get_help())
            sys.exit(0)
        format_message = getattr(exc, "format_message", None)
        _fail(" ".join((format_message() if format_message else str(exc)).split()))
    except DiffreasonError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
