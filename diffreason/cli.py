"""The `diffreason` command line (typer + rich).

Exit codes: 0 done; 1 some items of a batch failed (each said on stderr, the others answered); 2 bad input — one line
on stderr starting with `error: `, never a traceback; 130 Ctrl-C, with a line saying what was kept.

Every option and input is checked before torch and transformers are imported (which takes seconds to a minute on a
busy machine): a typo fails at once. Options have documented limits (the MAX_* constants) so that a slip of the
finger (`--steps 1000000000`) is refused rather than run for ever.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import shlex
import sys
import tempfile
from pathlib import Path

import typer
from rich.console import Console
from rich.live import Live
from rich.text import Text
from typer import exceptions as typer_exceptions

from diffreason.errors import DiffreasonError
from diffreason.model import EMBEDDED_JSON, EMBEDDED_SUDOKU  # (no torch: model.py imports it where it is used)

EXIT_SOME_FAILED = 1  # a batch in which some items could not be done; the others were
EXIT_BAD_INPUT = 2  # nothing could be done: a bad option, file or model
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it)

MAX_DENOISING_STEPS = 4096  # solve / generate --steps, eval --budgets (the shipped schedules use 20-48)
MAX_TRAIN_STEPS = 10**7  # train --steps, --eval-every, --save-every
MAX_BATCH_SIZE = 4096  # a Sudoku batch's allowed mask is 0.12 MB per puzzle
MAX_NEW_TOKENS = 65536
MAX_SEED = 2**63 - 1  # torch's generators take signed 64-bit seeds
MAX_THREADS = 1024
MAX_TEMPERATURE = 100.0
MAX_MINUTES = 100_000.0  # train --time-budget (about ten weeks)
MAX_EVAL_PUZZLES = 100_000  # eval sudoku --n, per tier
MAX_PUZZLE_POOL = 100_000  # train sudoku --puzzle-pool
MAX_LAYERS = 64  # train sudoku --grow-to

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Constrained generation and reasoning with DiffusionGemma block-diffusion models.",
)
err_console = Console(stderr=True)


class Interrupted(Exception):
    """Ctrl-C inside a command that caught it to say what was kept (the message); exit code 130. Not a
    KeyboardInterrupt, which the CLI framework would turn into a bare exit code."""


# ---- checking options (no heavy imports) ------------------------------------------------------------------------


def _int_in(option: str, value: int | None, lo: int, hi: int) -> None:
    """One clear error unless lo <= value <= hi (None: the option was not given)."""
    if value is None:
        return
    if value < lo:
        raise DiffreasonError(f"{option} must be at least {lo}, got {value}")
    if value > hi:
        raise DiffreasonError(f"{option} must be at most {hi}, got {value}")


def _float_in(option: str, value: float | None, lo: float, hi: float, low_open: bool = True) -> None:
    """One clear error unless value is finite and in (lo, hi] (or [lo, hi] without `low_open`)."""
    if value is None:
        return
    if not math.isfinite(value):
        raise DiffreasonError(f"{option} must be a finite number, got {value}")
    if value < lo or (low_open and value == lo) or value > hi:
        raise DiffreasonError(f"{option} must lie in {'(' if low_open else '['}{lo:g}, {hi:g}], got {value:g}")


def _check_seed(seed: int) -> None:
    _int_in("--seed", seed, 0, MAX_SEED)


def _check_device(device: str) -> None:
    if device not in ("auto", "cpu", "cuda"):
        raise DiffreasonError(f"--device must be auto, cpu or cuda, got {device!r}")


def _check_dtype(dtype: str | None) -> None:
    if dtype is not None and dtype not in DTYPES:
        raise DiffreasonError(f"--dtype must be {' or '.join(DTYPES)}, got {dtype!r}")


def _torch_dtype(dtype: str | None):
    """The torch dtype of --dtype (None: `load_model`'s default, float32); torch must be imported already."""
    import torch

    return None if dtype is None else getattr(torch, dtype)


def _check_temperatures(t_max: float | None, t_min: float | None) -> None:
    _float_in("--t-max", t_max, 0.0, MAX_TEMPERATURE)
    _float_in("--t-min", t_min, 0.0, MAX_TEMPERATURE, low_open=False)
    if t_max is not None and t_min is not None and not t_max > t_min:
        raise DiffreasonError(f"--t-max ({t_max:g}) must be greater than --t-min ({t_min:g}): the temperature falls "
                              "from one to the other")


def _check_model_dir(model: Path | None) -> None:
    """A --model that is no checkpoint fails here, before the imports that loading needs."""
    from diffreason.model import check_checkpoint

    if model is not None:
        check_checkpoint(model)


def _writable_dir(path: Path, what: str) -> None:
    """Create `path` (and its parents) if needed and make sure files can be written in it; `what` names it."""
    if path.exists() and not path.is_dir():
        raise DiffreasonError(f"{what} {str(path)!r} is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise DiffreasonError(f"{what} {str(path)!r} cannot be written: {exc.strerror or exc}") from None


def _check_prompt(prompt: str) -> None:
    """The prompt must be text the tokenizer can read: undecodable bytes in an argument reach Python as lone
    surrogates, which no tokenizer takes."""
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DiffreasonError(
            f"the prompt is not valid text: character {exc.start + 1} is {prompt[exc.start]!r} (bytes that are not "
            "UTF-8 in the argument?)"
        ) from None


THREADS_OPTION = typer.Option(
    1, "--threads", help="CPU threads for torch (0: torch's default, every core). Default 1: these models are small, "
    "and on a busy machine torch's every-core default ran 8-22x slower than one thread",
)
SEED_HELP = f"random seed, 0 to {MAX_SEED}; the same seed gives the same output"
SEED_OPTION = typer.Option(0, "--seed", help=SEED_HELP)
DEVICE_OPTION = typer.Option("auto", "--device", help="auto, cpu or cuda")
DTYPES = ("float32", "bfloat16")
DTYPE_OPTION = typer.Option(None, "--dtype", help="the model's weights and forward passes: float32 (the default) or "
                            "bfloat16 (faster on GPUs and CPUs with AMX); the sampler's statistics stay float32")


def _runtime(threads: int | None) -> None:
    """Import torch and transformers (seconds to a minute: only once the input is known to be good), quiet
    transformers' logging and progress bars, and apply --threads (`None`: leave torch's setting)."""
    _int_in("--threads", threads, 0, MAX_THREADS)
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    if threads:
        torch.set_num_threads(threads)


DRAWS = ("reference", "fast")


def _draws_option(default: str):
    return typer.Option(default, "--draws", help="random draws: fast (the same distributions, statistics over the "
                        "allowed sets, a counter-based stream: the cheapest) or reference (transformers' own stream, "
                        f"token-identical to model.generate); default {default}")


def _check_draws(draws: str | None) -> None:
    if draws is not None and draws not in DRAWS:
        raise DiffreasonError(f"--draws must be one of {', '.join(DRAWS)}, got {draws!r}")


def _with_draws(lm, draws: str | None) -> None:
    """Set the checkpoint's sampler to `draws` (None: leave it)."""
    if draws is not None:
        lm.sampler_config = lm.sampler_config.model_copy(update={"draws": draws})


def _sampler_config(lm, steps: int | None, draws: str):
    updates = {"draws": draws}
    if steps is not None:
        updates["max_denoising_steps"] = steps
    return lm.sampler_config.model_copy(update=updates)


@app.command()
def generate(
    prompt: str = typer.Argument("", help="the prompt (empty: generate from BOS alone)"),
    model: Path = typer.Option(
        None, "--model", "-m", help="DiffusionGemma checkpoint directory (default: the embedded JSON model)"
    ),
    steps: int = typer.Option(
        None, "--steps", help=f"max denoising steps per canvas, 1 to {MAX_DENOISING_STEPS} (default: the checkpoint's)"
    ),
    seed: int = SEED_OPTION,
    max_new_tokens: int = typer.Option(
        None, "--max-new-tokens", help=f"1 to {MAX_NEW_TOKENS} (default: the checkpoint's, 256)"
    ),
    fast: bool = typer.Option(False, "--fast", help="the same as --draws fast"),
    draws: str = typer.Option(None, "--draws", help="random draws: reference (token-identical to transformers' "
                              "model.generate; the default without --schema) or fast (the same distributions, far "
                              "cheaper on constrained canvases; the default with --schema)"),
    schema: Path = typer.Option(None, "--schema", help="JSON Schema file: the output is a JSON value that validates"),
    watch: bool = typer.Option(False, "--watch", help="show the canvas denoising live"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    dtype: str = DTYPE_OPTION,
    threads: int = THREADS_OPTION,
) -> None:
    """Generate text from PROMPT by block diffusion (with --schema: a JSON value that validates)."""
    _int_in("--steps", steps, 1, MAX_DENOISING_STEPS)
    _int_in("--max-new-tokens", max_new_tokens, 1, MAX_NEW_TOKENS)
    _check_seed(seed)
    _int_in("--threads", threads, 0, MAX_THREADS)
    _check_prompt(prompt)
    _check_model_dir(model)
    _check_draws(draws)
    _check_dtype(dtype)
    if fast and draws == "reference":
        raise DiffreasonError("--fast and --draws reference contradict each other")
    draws = draws or ("fast" if fast or schema is not None else "reference")
    if schema is not None and max_new_tokens is not None:
        raise DiffreasonError("--max-new-tokens does not apply with --schema: the schema's template sets the length")
    schema_dict = None
    if schema is not None:
        from diffreason.tasks.json_schema.load import load_schema_file

        schema_dict = load_schema_file(schema)  # file errors before the model loads
    if model is None:
        if not (EMBEDDED_JSON / "config.json").is_file():
            raise DiffreasonError(f"the embedded JSON model is missing ({EMBEDDED_JSON}); pass --model DIR")
        model = EMBEDDED_JSON
    _runtime(threads)
    from diffreason.engine import Engine
    from diffreason.model import load_model

    if schema_dict is not None:
        from diffreason.structured import generate as generate_structured

        lm = load_model(model, dtype=_torch_dtype(dtype))
        config = _sampler_config(lm, steps, draws)
        if watch:
            with CanvasWatcher(lm.tokenizer, config.max_denoising_steps) as watcher:
                value, result = generate_structured(lm, schema_dict, prompt, seed, config, callback=watcher)
        else:
            value, result = generate_structured(lm, schema_dict, prompt, seed, config)
        if as_json:
            print(json.dumps({"object": value, "steps": result.steps, "text": result.text, "seconds": result.seconds,
                              "fixed": list(result.fixed)}))
        else:
            print(json.dumps(value, indent=2, ensure_ascii=False))
            err_console.print(f"[dim]steps per canvas {result.steps}, {result.seconds:.2f}s[/dim]")
            for choice in result.fixed:  # (what the schema left open and the template chose)
                err_console.print(f"[dim]fixed by the template: {choice}[/dim]")
        return
    lm = load_model(model, dtype=_torch_dtype(dtype))
    engine = Engine(lm, _sampler_config(lm, steps, draws))
    if watch:
        with CanvasWatcher(lm.tokenizer, engine.sampler.config.max_denoising_steps) as watcher:
            result = engine.generate(prompt, seed=seed, max_new_tokens=max_new_tokens, callback=watcher)
    else:
        result = engine.generate(prompt, seed=seed, max_new_tokens=max_new_tokens)
    if max_new_tokens is not None and not result.finished and len(result.raw_tokens) < max_new_tokens:
        # (the engine caps it to the canvases the model's positions hold after the prompt, as SGLang caps it)
        _stderr_line(f"note: --max-new-tokens {max_new_tokens} was cut to {len(result.raw_tokens)}: the prompt "
                     f"({len(result.prompt_ids)} tokens) and whole canvases of {lm.canvas_length} fill the model's "
                     f"{lm.context_length} positions")
    if as_json:
        out = result.to_dict()
        out["prompt"] = prompt
        print(json.dumps(out))
    else:
        # (the text as written: rich would wrap it at the terminal's width and expand its tabs)
        sys.stdout.write(result.text + "\n")
        err_console.print(
            f"[dim]{len(result.tokens)} tokens, steps per canvas {result.steps}, {result.seconds:.2f}s[/dim]"
        )


@app.command()
def serve(
    model: Path = typer.Argument(None, help="DiffusionGemma checkpoint directory (default: the embedded JSON model)"),
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
    port: int = typer.Option(30000, "--port", help="port, 1 to 65535"),
    max_batch: int = typer.Option(16, "--max-batch", help="requests run together at most, 1 to 1024"),
    threads: int = THREADS_OPTION,
) -> None:
    """Serve the local engine behind SGLang's /generate contract (json_schema, regex, templates, steps in meta)."""
    _int_in("--port", port, 1, 65535)
    _int_in("--max-batch", max_batch, 1, 1024)
    _check_model_dir(model)
    if model is None:
        if not (EMBEDDED_JSON / "config.json").is_file():
            raise DiffreasonError(f"the embedded JSON model is missing ({EMBEDDED_JSON}); pass a checkpoint")
        model = EMBEDDED_JSON
    import socket

    try:  # bound here, before the model loads, so a busy port is one error line (uvicorn would log and exit 1)
        listener = socket.create_server((host, port))
    except OSError as exc:
        raise DiffreasonError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    _runtime(threads)
    import uvicorn

    from diffreason.model import load_model
    from diffreason.serve import make_app

    app = make_app(load_model(model), max_batch=max_batch)
    err_console.print(f"[dim]serving {model} on http://{host}:{port} (POST /generate, GET /health)[/dim]")
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listener])


@app.command("build-model")
def build_model_cmd(
    out: Path = typer.Argument(..., help="directory to write the checkpoint to (new, or empty)"),
    preset: str = typer.Option("tiny", "--preset", help="model size preset: tiny or small"),
    seed: int = typer.Option(0, "--seed", help=f"weight initialisation seed, 0 to {MAX_SEED}"),
) -> None:
    """Write a randomly initialised DiffusionGemma checkpoint (HF directory) of a preset size."""
    from diffreason.model import PRESETS

    if preset not in PRESETS:
        raise DiffreasonError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    _check_seed(seed)
    if out.exists() and not out.is_dir():
        raise DiffreasonError(f"{str(out)!r} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        raise DiffreasonError(f"{str(out)!r} is not empty; choose a new directory")
    # the checkpoint is written beside OUT and renamed into place (atomic), so OUT's parent must take files
    _writable_dir(Path(os.path.abspath(out)).parent, "OUT's directory")
    _runtime(None)
    from diffreason.model import build_model

    lm = build_model(preset, seed=seed)
    lm.save(out)
    n = sum(p.numel() for p in lm.model.parameters())
    err_console.print(f"wrote {preset} checkpoint ({n / 1e6:.2f}M parameters) to {out}")


train_app = typer.Typer(no_args_is_help=True, help="Fine-tune a DiffusionGemma with uniform-state SFT.")
app.add_typer(train_app, name="train")


def _resolve_device(device: str) -> str:
    """`auto` → cuda when present, else cpu; a device this machine lacks is one clear error."""
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise DiffreasonError(f"--device {device} is not available here; use cpu")
    return device


PRECISION_OPTION = typer.Option(
    "fp32", "--precision", help="fp32, or bf16: bfloat16 autocast (float32 weights), faster on a GPU",
)
TIME_BUDGET_OPTION = typer.Option(
    None, "--time-budget", help="wall-clock minutes (at most 100000): the learning-rate schedule (and any curriculum) "
    "ends with whichever of --steps or the time runs out first",
)
SAVE_EVERY_OPTION = typer.Option(100, "--save-every", help="write a checkpoint every N steps (and at the end)")
LR_OPTION = typer.Option(1e-3, "--lr", help="peak learning rate, in (0, 1] (warmup, then cosine)")


def _check_training_options(steps: int, batch_size: int, lr: float, eval_every: int, save_every: int,
                            seed: int, device: str, threads: int, precision: str, time_budget: float | None) -> None:
    """The options every `train` command shares, each refused with its limits."""
    _int_in("--steps", steps, 1, MAX_TRAIN_STEPS)
    _int_in("--batch-size", batch_size, 1, MAX_BATCH_SIZE)
    _float_in("--lr", lr, 0.0, 1.0)
    _int_in("--eval-every", eval_every, 0, MAX_TRAIN_STEPS)
    _int_in("--save-every", save_every, 1, MAX_TRAIN_STEPS)
    _check_seed(seed)
    _check_device(device)
    _int_in("--threads", threads, 0, MAX_THREADS)
    if precision not in ("fp32", "bf16"):
        raise DiffreasonError(f"--precision must be fp32 or bf16, got {precision!r}")
    _float_in("--time-budget", time_budget, 0.0, MAX_MINUTES)


def _prepare_run_dir(run_dir: Path) -> None:
    """A --run-dir that cannot hold a run fails before any model loads (checked last: it creates the directory)."""
    _writable_dir(run_dir, "--run-dir")
    model_dir = run_dir / "model"
    if model_dir.exists() and not (model_dir / "config.json").is_file() and (
        not model_dir.is_dir() or any(model_dir.iterdir())
    ):
        raise DiffreasonError(f"--run-dir {str(run_dir)!r} holds a 'model' that is not a checkpoint; choose another")


def _train_config(device: str, threads: int, time_budget: float | None, **config):
    """The device to train on and the TrainConfig (after the options were checked; this imports torch)."""
    import torch

    from diffreason.model import describe_validation_error
    from diffreason.train import TrainConfig

    _runtime(threads)
    device = _resolve_device(device)
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # TF32 matmuls: faster, and precise enough for training
    if time_budget is not None:
        config["time_budget"] = 60.0 * time_budget
    try:
        return device, TrainConfig(**config)
    except ValueError as exc:
        raise DiffreasonError(describe_validation_error(exc)) from None


def _train(lm, batches, cfg, run_dir: Path, **kwargs) -> None:
    """`diffreason.train.train`, with Ctrl-C said as what was kept."""
    from diffreason.train import TrainingInterrupted, train

    try:
        train(lm, batches, cfg, run_dir, console=err_console, **kwargs)
    except TrainingInterrupted as exc:
        if exc.checkpoint_step is None:
            raise Interrupted(f"no checkpoint was written yet in {run_dir}") from None
        raise Interrupted(
            f"kept the checkpoint of step {exc.checkpoint_step} in {run_dir}; rerun the same command to resume"
        ) from None
    err_console.print(f"model written to {run_dir / 'model'}")


def _resolved(path: Path | None) -> str | None:
    return None if path is None else str(Path(path).resolve())


def _not_started(run_dir: Path) -> Interrupted:
    return Interrupted(f"before training began; {run_dir} is as it was")


@train_app.command("sudoku")
def train_sudoku(
    run_dir: Path = typer.Option(Path("runs/sudoku-small"), "--run-dir", help="checkpoints, logs and RUN/model"),
    preset: str = typer.Option(
        "sudoku-small", "--preset", help="model size: sudoku-small (CPU-sized) or sudoku-base (GPU-sized; the embedded "
        "model's)"
    ),
    steps: int = typer.Option(3000, "--steps", help=f"total optimiser steps, at most {MAX_TRAIN_STEPS} (a rerun "
                              "resumes up to this)"),
    batch_size: int = typer.Option(64, "--batch-size", help=f"1 to {MAX_BATCH_SIZE}"),
    lr: float = LR_OPTION,
    eval_every: int = typer.Option(250, "--eval-every", help="held-out solve rate every N steps (0: never)"),
    save_every: int = SAVE_EVERY_OPTION,
    seed: int = SEED_OPTION,
    device: str = DEVICE_OPTION,
    init_from: Path | None = typer.Option(
        None, "--init-from", help="start from this checkpoint's weights (e.g. the embedded model) instead of fresh ones"
    ),
    curriculum: bool = typer.Option(
        True, "--curriculum/--no-curriculum", help="blanks grow from few to many (off: full difficulty from step 0)"
    ),
    threads: int = THREADS_OPTION,
    puzzle_fraction: float = typer.Option(
        0.0, "--puzzle-fraction",
        help="share of each batch, in [0, 1], drawn from uniquely solvable generated puzzles (mostly hard / extreme) "
        "instead of random blanks",
    ),
    puzzle_pool: int = typer.Option(
        2000, "--puzzle-pool", help=f"how many unique puzzles to generate for it (1 to {MAX_PUZZLE_POOL})"
    ),
    grow_to: int | None = typer.Option(
        None, "--grow-to", help="with --init-from: first deepen that model to this many layers, computing the same "
        "function (added layers start as identities), then train"
    ),
    eval_tier: str = typer.Option("medium", "--eval-tier", help="tier of the periodic held-out eval"),
    precision: str = PRECISION_OPTION,
    time_budget: float | None = TIME_BUDGET_OPTION,
) -> None:
    """Train a Sudoku solver (resumable: rerun the same command to continue; Ctrl-C keeps the last checkpoint)."""
    from diffreason.tasks import sudoku

    _check_training_options(steps, batch_size, lr, eval_every, save_every, seed, device, threads, precision,
                            time_budget)
    if preset not in sudoku.MODEL_PRESETS:
        raise DiffreasonError(f"unknown --preset {preset!r}; choose one of {', '.join(sudoku.MODEL_PRESETS)}")
    _float_in("--puzzle-fraction", puzzle_fraction, 0.0, 1.0, low_open=False)
    _int_in("--puzzle-pool", puzzle_pool, 1, MAX_PUZZLE_POOL)
    _int_in("--grow-to", grow_to, 1, MAX_LAYERS)
    if eval_tier not in sudoku.TIERS:
        raise DiffreasonError(f"--eval-tier {eval_tier!r}: choose one of {', '.join(sudoku.TIERS)}")
    if grow_to is not None and init_from is None:
        raise DiffreasonError("--grow-to deepens the --init-from model; give --init-from too")
    _check_model_dir(init_from)
    _prepare_run_dir(run_dir)
    try:
        device, cfg = _train_config(device, threads, time_budget, steps=steps, batch_size=batch_size, lr=lr,
                                    eval_every=eval_every, save_every=save_every, seed=seed, precision=precision)
        from diffreason.train import resume_or_build

        if init_from is not None:
            from diffreason.model import grow_depth, load_model

            base = load_model(init_from)
            if base.tokenizer.get_vocab() != sudoku.make_tokenizer().get_vocab():
                raise DiffreasonError(f"--init-from {str(init_from)!r} is not a Sudoku model (its vocabulary differs)")
            # deepened only for a new run: a resumed one already has its (deeper) weights in the run directory
            build = lambda: base if grow_to is None else grow_depth(base, grow_to)  # noqa: E731
        else:
            build = lambda: sudoku.build_sudoku_model(preset, seed)  # noqa: E731
        lm = resume_or_build(run_dir, build)
        try:
            sudoku.check_vocabulary(lm)
        except DiffreasonError:
            raise DiffreasonError(
                f"--run-dir {str(run_dir)!r} holds a run of another task (its model is not a Sudoku model); choose "
                "another --run-dir"
            ) from None
        lm.model.to(device)
        if puzzle_fraction > 0:
            from rich.progress import Progress

            with Progress(console=err_console, transient=True) as bar:
                task = bar.add_task("generating training puzzles", total=puzzle_pool)
                stream = sudoku.SudokuStream(seed, puzzle_fraction=puzzle_fraction, puzzle_pool_size=puzzle_pool,
                                             progress=lambda: bar.advance(task))
        else:
            stream = sudoku.SudokuStream(seed)
        batches = sudoku.sft_batches(stream, curriculum=curriculum, device=device)
    except KeyboardInterrupt:
        raise _not_started(run_dir) from None
    _train(lm, batches, cfg, run_dir, evaluate=sudoku.heldout_evaluator(tier=eval_tier),
           stream_state=(stream.state_dict, stream.load_state_dict),
           identity={"task": "sudoku", "preset": None if init_from else preset, "init_from": _resolved(init_from),
                     "grow_to": grow_to,
                     "puzzle_fraction": puzzle_fraction, "puzzle_pool": puzzle_pool if puzzle_fraction else None,
                     "curriculum": curriculum})


@train_app.command("sudoku-ar")
def train_sudoku_ar(
    run_dir: Path = typer.Option(Path("runs/sudoku-ar"), "--run-dir", help="checkpoints, logs and RUN/model"),
    preset: str = typer.Option("sudoku-small", "--preset", help="the diffusion preset whose size it copies: "
                               "sudoku-small or sudoku-base"),
    steps: int = typer.Option(3000, "--steps", help=f"total optimiser steps, at most {MAX_TRAIN_STEPS} (a rerun "
                              "resumes up to this)"),
    batch_size: int = typer.Option(64, "--batch-size", help=f"1 to {MAX_BATCH_SIZE}"),
    lr: float = LR_OPTION,
    eval_every: int = typer.Option(250, "--eval-every", help="held-out solve rate every N steps (0: never)"),
    save_every: int = SAVE_EVERY_OPTION,
    seed: int = SEED_OPTION,
    device: str = DEVICE_OPTION,
    curriculum: bool = typer.Option(True, "--curriculum/--no-curriculum", help="blanks grow from few to many"),
    threads: int = THREADS_OPTION,
    precision: str = PRECISION_OPTION,
    time_budget: float | None = TIME_BUDGET_OPTION,
) -> None:
    """Train the autoregressive Sudoku baseline: a causal LM of the diffusion preset's size on the same puzzle stream
    (same seed: the same puzzles), so `eval sudoku --baseline RUN/model` compares them at equal data."""
    from diffreason.tasks import sudoku

    _check_training_options(steps, batch_size, lr, eval_every, save_every, seed, device, threads, precision,
                            time_budget)
    if preset not in sudoku.MODEL_PRESETS:
        raise DiffreasonError(f"unknown --preset {preset!r}; choose one of {', '.join(sudoku.MODEL_PRESETS)}")
    _prepare_run_dir(run_dir)
    try:
        device, cfg = _train_config(device, threads, time_budget, steps=steps, batch_size=batch_size, lr=lr,
                                    eval_every=eval_every, save_every=save_every, seed=seed, precision=precision)
        from diffreason.tasks import sudoku_ar

        ar = sudoku_ar.resume_or_build_ar(run_dir, preset, seed)
        ar.model.to(device)
        stream = sudoku.SudokuStream(seed)
        batches = sudoku_ar.ar_batches(stream, curriculum=curriculum, device=device)
    except KeyboardInterrupt:
        raise _not_started(run_dir) from None
    _train(ar, batches, cfg, run_dir, evaluate=sudoku_ar.heldout_evaluator(), loss_fn=sudoku_ar.ar_loss,
           stream_state=(stream.state_dict, stream.load_state_dict),
           identity={"task": "sudoku-ar", "preset": preset, "curriculum": curriculum})


@train_app.command("json")
def train_json(
    schemas: Path = typer.Option(..., "--schemas", help="jsonschemabench-style directory: schema files with instances"),
    run_dir: Path = typer.Option(Path("runs/json-small"), "--run-dir", help="checkpoints, logs and RUN/model"),
    steps: int = typer.Option(2000, "--steps", help=f"total optimiser steps, at most {MAX_TRAIN_STEPS} (a rerun "
                              "resumes up to this)"),
    batch_size: int = typer.Option(32, "--batch-size", help=f"1 to {MAX_BATCH_SIZE}"),
    lr: float = LR_OPTION,
    save_every: int = SAVE_EVERY_OPTION,
    seed: int = SEED_OPTION,
    threads: int = THREADS_OPTION,
    device: str = DEVICE_OPTION,
    init_from: Path | None = typer.Option(
        None, "--init-from", help="start from this JSON model's weights and tokenizer (e.g. the embedded one)"
    ),
    precision: str = PRECISION_OPTION,
    time_budget: float | None = TIME_BUDGET_OPTION,
) -> None:
    """Train the JSON model on (prompt, object) pairs from the schemas' valid instances (resumable; Ctrl-C keeps the
    last checkpoint)."""
    if not schemas.is_dir():
        raise DiffreasonError(f"--schemas {str(schemas)!r} is not a directory")
    _check_training_options(steps, batch_size, lr, 0, save_every, seed, device, threads, precision, time_budget)
    _check_model_dir(init_from)
    _prepare_run_dir(run_dir)
    try:
        device, cfg = _train_config(device, threads, time_budget, steps=steps, batch_size=batch_size, lr=lr,
                                    eval_every=0, save_every=save_every, seed=seed, precision=precision)
        from diffreason.model import load_model
        from diffreason.tasks import json_corpus, sudoku
        from diffreason.train import resume_or_build

        pairs = json_corpus.load_pairs(schemas)
        if init_from is not None:
            build = lambda: load_model(init_from)  # noqa: E731
        else:
            build = lambda: json_corpus.build_json_model(json_corpus.make_tokenizer(pairs), seed)  # noqa: E731
        resumed = (run_dir / "model" / "config.json").is_file()
        lm = resume_or_build(run_dir, build)
        if sudoku.is_sudoku_model(lm):
            where = f"--run-dir {str(run_dir)!r} holds a run of" if resumed else f"--init-from {str(init_from)!r} is"
            raise DiffreasonError(f"{where} a Sudoku model, not a JSON one; choose another")
        lm.model.to(device)
        stream = json_corpus.JsonStream(pairs, lm.tokenizer, seed)
    except KeyboardInterrupt:
        raise _not_started(run_dir) from None
    err_console.print(f"{len(stream.examples)} training objects from {len(pairs)} valid instances")
    _train(lm, stream.batches(), cfg, run_dir, stream_state=(stream.state_dict, stream.load_state_dict),
           identity={"task": "json", "schemas": str(schemas.resolve()), "init_from": _resolved(init_from)})


@train_app.command("code")
def train_code(
    run_dir: Path = typer.Option(Path("runs/code-small"), "--run-dir", help="checkpoints, logs and RUN/model"),
    preset: str = typer.Option("code-small", "--preset", help="model size: code-small (the embedded model's) or "
                               "code-tiny (tests)"),
    steps: int = typer.Option(20000, "--steps", help=f"total optimiser steps, at most {MAX_TRAIN_STEPS} (a rerun "
                              "resumes up to this)"),
    batch_size: int = typer.Option(16, "--batch-size", help=f"1 to {MAX_BATCH_SIZE}"),
    lr: float = LR_OPTION,
    eval_every: int = typer.Option(250, "--eval-every", help="held-out loss every N steps (0: never)"),
    save_every: int = SAVE_EVERY_OPTION,
    seed: int = SEED_OPTION,
    threads: int = THREADS_OPTION,
    device: str = DEVICE_OPTION,
    init_from: Path | None = typer.Option(
        None, "--init-from", help="start from this code model's weights and tokenizer (e.g. the embedded one)"
    ),
    source: list[Path] = typer.Option(
        [], "--source", help="a directory of Python code to train on (repeatable; default: the standard library, "
        "then site-packages)"
    ),
    max_files: int = typer.Option(0, "--max-files", help="at most this many source files, a stable sample (0: all)"),
    precision: str = PRECISION_OPTION,
    time_budget: float | None = TIME_BUDGET_OPTION,
) -> None:
    """Train the code infilling model on functions of the standard library and site-packages with holes (lines,
    blocks, spans), HumanEval's functions and the held-out packages kept out (resumable; Ctrl-C keeps the last
    checkpoint)."""
    from diffreason.tasks.infill import corpus

    _check_training_options(steps, batch_size, lr, eval_every, save_every, seed, device, threads, precision,
                            time_budget)
    if preset not in corpus.PRESETS:
        raise DiffreasonError(f"unknown --preset {preset!r}; choose one of {', '.join(corpus.PRESETS)}")
    _int_in("--max-files", max_files, 0, 10**7)
    for s in source:
        if not s.is_dir():
            raise DiffreasonError(f"--source {str(s)!r} is not a directory")
    _check_model_dir(init_from)
    _prepare_run_dir(run_dir)
    try:
        device, cfg = _train_config(device, threads, time_budget, steps=steps, batch_size=batch_size, lr=lr,
                                    eval_every=eval_every, save_every=save_every, seed=seed, precision=precision)
        from diffreason.model import load_model
        from diffreason.tasks import sudoku
        from diffreason.train import resume_or_build

        with err_console.status("reading the Python sources"):
            code = corpus.build_corpus(source or None, max_files=max_files)
        st = code.stats
        err_console.print(
            f"{st['train_functions']} training functions ({st['heldout_functions']} held out: "
            f"{', '.join(st['heldout_found']) or 'none found'}) from {st['files']} files; HumanEval kept out: "
            f"{st['humaneval_name']} by name, {st['humaneval_body']} by body"
        )
        if init_from is not None:
            build = lambda: load_model(init_from)  # noqa: E731
        else:
            build = lambda: corpus.build_code_model(  # noqa: E731
                corpus.make_tokenizer(code.train, seed=seed), seed, corpus.PRESETS[preset])
        resumed = (run_dir / "model" / "config.json").is_file()
        lm = resume_or_build(run_dir, build)
        if sudoku.is_sudoku_model(lm) or lm.canvas_length != corpus.CANVAS:
            where = f"--run-dir {str(run_dir)!r} holds a run of" if resumed else f"--init-from {str(init_from)!r} is"
            raise DiffreasonError(f"{where} another model (not a code model with a {corpus.CANVAS}-token canvas); "
                                  "choose another")
        lm.model.to(device)
        stream = corpus.CodeStream(code.train, lm.tokenizer, seed)
        evaluate = corpus.heldout_evaluator(code.heldout, lm.tokenizer) if eval_every else None
    except KeyboardInterrupt:
        raise _not_started(run_dir) from None
    _train(lm, stream.batch, cfg, run_dir, evaluate=evaluate, stream_state=(stream.state_dict, stream.load_state_dict),
           identity={"task": "code", "preset": None if init_from else preset, "init_from": _resolved(init_from),
                     "source": [str(s.resolve()) for s in source], "max_files": max_files})


solve_app = typer.Typer(no_args_is_help=True, help="Solve constraint problems with a diffusion model.")
app.add_typer(solve_app, name="solve")
eval_app = typer.Typer(no_args_is_help=True, help="Evaluate models; reports go to evals/reports.")
app.add_typer(eval_app, name="eval")


def _sudoku_model(model: Path | None, t_max: float | None = None, t_min: float | None = None,
                  draws: str | None = None, dtype: str | None = None):
    """The checkpoint, with its sampler's temperature schedule and draws overridden where asked."""
    from diffreason.model import describe_validation_error, load_model
    from diffreason.sampler import SamplerConfig

    if model is None:
        if not (EMBEDDED_SUDOKU / "config.json").is_file():
            raise DiffreasonError(f"the embedded Sudoku model is missing ({EMBEDDED_SUDOKU}); pass --model DIR")
        model = EMBEDDED_SUDOKU
    lm = load_model(model, dtype=_torch_dtype(dtype))
    update = {k: v for k, v in (("t_max", t_max), ("t_min", t_min)) if v is not None}
    if update:
        config = {**lm.sampler_config.model_dump(), **update}
        if not config["t_max"] > config["t_min"]:  # (one of them the checkpoint's)
            given = " and ".join(f"--{k.replace('_', '-')} {v:g}" for k, v in update.items())
            raise DiffreasonError(f"{given} leaves t_max ({config['t_max']:g}) not above t_min ({config['t_min']:g}) "
                                  "in the checkpoint's schedule: the temperature falls from t_max to t_min")
        try:
            lm.sampler_config = SamplerConfig(**config)
        except ValueError as exc:
            raise DiffreasonError(describe_validation_error(exc)) from None
    _with_draws(lm, draws)
    return lm


ENDPOINT_OPTION = typer.Option(
    None, "--endpoint", help="run on servers instead of a local model: http://HOST:PORT[,http://HOST:PORT...] "
    "(`diffreason serve`, SGLang with the diffreason plugin, or a router), requests sharded over them"
)
CONCURRENCY_OPTION = typer.Option(8, "--concurrency", help="with --endpoint: requests in flight per server, 1 to 1024")
RETRIES_OPTION = typer.Option(3, "--retries", help="with --endpoint: rounds over the servers a request whose "
                              "connection fails is retried, 0 to 100")


def _remote_engine(endpoint: str | None, concurrency: int, retries: int, **local_only):
    """The RemoteEngine of --endpoint (None without it), its servers checked reachable; options that only apply to a
    local model are refused beside it."""
    _int_in("--concurrency", concurrency, 1, 1024)
    _int_in("--retries", retries, 0, 100)
    if endpoint is None:
        return None
    given = [name.replace("_", "-") for name, value in local_only.items() if value is not None]
    if given:
        raise DiffreasonError(f"--{given[0]} applies to a local model; the servers behind --endpoint use their own")
    from diffreason.client import Endpoints, RemoteEngine

    endpoints = Endpoints(endpoint, concurrency=concurrency, retries=retries)
    endpoints.check()
    return RemoteEngine(endpoints)


T_MAX_OPTION = typer.Option(
    None, "--t-max", help=f"temperature at the first step, in (0, {MAX_TEMPERATURE:g}] (default: the checkpoint's)"
)
T_MIN_OPTION = typer.Option(
    None, "--t-min", help=f"temperature the schedule falls towards, in [0, {MAX_TEMPERATURE:g}] (default: the "
    "checkpoint's)"
)


def _where(source: str | None, entry) -> str:
    """Where a puzzle is, for messages: 'FILE line N' (nothing for the PUZZLE argument)."""
    return "" if source is None else f"{source} line {entry.line}: "


def _stderr_line(line: str) -> None:
    """One line on stderr, whatever it holds: newlines are joined, markup-like brackets printed as they are."""
    err_console.print(" ".join(line.split()), markup=False, highlight=False, soft_wrap=True)


@solve_app.command("sudoku")
def solve_sudoku(
    puzzle: str = typer.Argument(None, help="81 cells, '.' or '0' for blanks (or use --file / stdin; '-' reads stdin)"),
    file: Path = typer.Option(
        None, "--file", "-f", help="puzzles: one per line (81 cells) or 9-line grids (blank lines between grids); "
        "'#' starts a comment"
    ),
    model: Path = typer.Option(None, "--model", "-m", help="Sudoku checkpoint (default: the embedded one)"),
    mode: str = typer.Option("model", "--mode", help="model (plain sampler) or verified (task-aware re-noising)"),
    steps: int = typer.Option(
        None, "--steps", help=f"max denoising steps, 1 to {MAX_DENOISING_STEPS} (default: the checkpoint's)"
    ),
    seed: int = typer.Option(0, "--seed", help=f"random seed, 0 to {MAX_SEED} (puzzle k uses seed + k)"),
    batch_size: int = typer.Option(64, "--batch-size", help=f"puzzles solved together, 1 to {MAX_BATCH_SIZE}"),
    watch: bool = typer.Option(False, "--watch", help="show the grid denoising live (first puzzle)"),
    samples: int = typer.Option(1, "--samples", "-k", help="test-time compute: up to K chains per puzzle, each "
                                "under a random symmetry, the first grid the verifier accepts (else a per-cell vote); "
                                "1 to 256"),
    as_json: bool = typer.Option(
        False, "--json", help="JSON lines, one object per puzzle in input order: puzzle, solution, solved, steps, "
        "mode, seconds, samples, voted, line, has_solution, unique; a puzzle that cannot be answered: line, input, "
        "error"
    ),
    t_max: float = T_MAX_OPTION,
    t_min: float = T_MIN_OPTION,
    draws: str = _draws_option("fast"),
    dtype: str = DTYPE_OPTION,
    threads: int = THREADS_OPTION,
) -> None:
    """Solve Sudoku puzzles with a diffusion model.

    Each puzzle is checked first, with the exact solver too; one that cannot be answered does not stop the others.

    A malformed puzzle, conflicting givens or no solution: an error line (and an error record under --json).

    Exit code: 0 every puzzle answered (solved or not), 1 some could not be, 2 none could (or a bad option).

    Ctrl-C: exit code 130, after the answers so far (each batch's answers are printed as it finishes).
    """
    import time

    from diffreason.tasks import sudoku

    if mode not in sudoku.MODES:
        raise DiffreasonError(f"--mode must be one of {', '.join(sudoku.MODES)}, got {mode!r}")
    _int_in("--steps", steps, 1, MAX_DENOISING_STEPS)
    _int_in("--batch-size", batch_size, 1, MAX_BATCH_SIZE)
    _int_in("--samples", samples, 1, sudoku.MAX_SAMPLES)
    if watch and samples > 1:
        raise DiffreasonError("--watch shows one chain; it cannot be used with --samples above 1")
    _check_seed(seed)
    _check_temperatures(t_max, t_min)
    _check_draws(draws)
    _check_dtype(dtype)
    _int_in("--threads", threads, 0, MAX_THREADS)
    _check_model_dir(model)
    try:
        entries, source = sudoku.read_puzzle_input(puzzle, file)
    except KeyboardInterrupt:  # (reading a slow stdin)
        raise Interrupted("while reading the puzzles; none was answered") from None
    counts = sudoku.count_solutions(entries)
    failed = [i for i, e in enumerate(entries) if e.error is not None]
    todo = [i for i, e in enumerate(entries) if e.error is None]

    def error_record(i: int) -> dict:
        e = entries[i]
        record = {"line": e.line if source else None, "input": e.text, "error": e.error}
        if e.cells is not None:  # readable, but no solution
            record.update(puzzle=sudoku.to_string(e.cells), has_solution=False)
        return record

    if not todo:
        if as_json:
            for i in failed:
                _print_json(error_record(i))
        first = f"{_where(source, entries[failed[0]])}{entries[failed[0]].error}"
        if len(failed) > 1:
            n = len(failed)
            raise DiffreasonError(f"{first} (and {n - 1} more: none of the {n} puzzles can be answered)")
        raise DiffreasonError(first)
    for i in failed:
        _stderr_line(f"error: {_where(source, entries[i])}{entries[i].error}")

    try:
        _runtime(threads)
        lm = _sudoku_model(model, t_max, t_min, draws, dtype)
        sudoku.check_vocabulary(lm)
    except KeyboardInterrupt:
        raise Interrupted(f"before solving; none of the {len(todo)} puzzles was answered") from None
    pending_errors = list(failed)  # error records not yet printed (--json), in input order
    answered = solved = 0

    def emit(res) -> None:
        """Print the next answer (after the error records of the bad puzzles before it), then count it."""
        nonlocal answered, solved
        i = todo[answered]
        while as_json and pending_errors and pending_errors[0] < i:
            _print_json(error_record(pending_errors.pop(0)))
        e, count = entries[i], counts[i]
        if as_json:
            known = count is not None
            _print_json({**res.to_dict(), "line": e.line if source else None,
                         "has_solution": True if known else None, "unique": count == 1 if known else None})
        else:
            cells = [int(c) for c in res.solution] if res.solution else e.cells
            where = f"line {e.line}: " if source else ""
            several = " — the puzzle has more than one solution" if count == 2 else ""
            verdict = "solved" if res.solved else "NOT solved"
            vote = ", per-cell vote" if res.voted else ""
            chains = f", {res.samples} chain{'s' if res.samples != 1 else ''}{vote}" if samples > 1 else ""
            # (plain lines: a console would wrap the verdict at the terminal's width)
            sys.stdout.write(f"{sudoku.to_grid(cells)}\n{where}{verdict} in {res.steps} steps (mode {res.mode}{chains})"
                             f"{several}\n\n")
            sys.stdout.flush()
        answered += 1
        solved += res.solved

    grids = [entries[i].cells for i in todo]
    watcher = GridWatcher(grids[0], steps or lm.sampler_config.max_denoising_steps) if watch else None
    batches = sudoku.solve_batches(lm, grids, mode, seed, steps, batch_size, callback=watcher, samples=samples)
    t = time.perf_counter()
    held = _HeldInterrupt()  # an answer is printed and counted whole, so the count said on Ctrl-C is what was printed
    try:
        with held.installed():
            if watcher is not None:
                with watcher:
                    for chunk in batches:
                        for res in chunk:
                            with held:
                                emit(res)
            else:
                from rich.progress import Progress

                with Progress(console=err_console, transient=True, redirect_stdout=_stdout_is_terminal()) as bar:
                    task = bar.add_task("solving", total=len(todo), visible=len(todo) > 1)
                    for chunk in batches:
                        for res in chunk:
                            with held:
                                emit(res)
                        bar.advance(task, len(chunk))
    except KeyboardInterrupt:
        raise Interrupted(
            f"answered {answered} of {len(todo)} puzzles{' (printed above)' if answered else ''}; the other "
            f"{len(todo) - answered} were not"
        ) from None
    elapsed = max(1e-9, time.perf_counter() - t)
    if as_json:
        for i in pending_errors:
            _print_json(error_record(i))
    else:
        unanswered = f"; {len(failed)} could not be answered (errors above)" if failed else ""
        rate = f"{answered / elapsed:.1f} puzzles/s"
        err_console.print(f"{solved}/{answered} solved, {elapsed:.2f}s ({rate}){unanswered}")
    if failed:
        raise typer.Exit(EXIT_SOME_FAILED)


class _HeldInterrupt:
    """Ctrl-C held back while a block runs and raised as KeyboardInterrupt right after it (`with held: ...`, once
    `held.installed()`). Python runs signal handlers in the main thread between bytecodes, so nothing can slip in
    between: a block runs whole or not at all."""

    def __init__(self):
        self.holding = self.pending = False

    def _handler(self, signum, frame) -> None:
        if not self.holding:
            raise KeyboardInterrupt
        self.pending = True

    @contextlib.contextmanager
    def installed(self):
        """This SIGINT handler for the duration, unless Ctrl-C is ignored (a background job) or handled elsewhere."""
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            yield
            return
        signal.signal(signal.SIGINT, self._handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)

    def __enter__(self) -> None:
        self.holding = True

    def __exit__(self, exc_type, *exc) -> None:
        self.holding = False
        if self.pending and exc_type is None:
            self.pending = False
            raise KeyboardInterrupt


def _print_json(record: dict) -> None:
    """One JSON line on stdout, in one write and flushed: a reader sees whole records as they come, and Ctrl-C never
    leaves half of one."""
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def _stdout_is_terminal() -> bool:
    """Whether a live display may take over stdout: when stdout is a terminal, printing goes above the display; when
    it is a file or pipe, redirecting it would send the answers to the terminal instead."""
    return sys.stdout is not None and sys.stdout.isatty()


def _eval_command(name: str) -> str:
    """The command line of an eval as its report names it, quoted (an empty value such as --tiers '' stays one)."""
    return shlex.join(["diffreason", "eval", name, *sys.argv[3:]])


def _puzzle_sets(spec: str, n: int, tiers: list[str]) -> dict[str, list[list[int]]]:
    """--puzzles: each file's first `n` answerable puzzles, named by the file's stem (by its name where the stem is a
    tier of `tiers` or another file's; then primed); a puzzle that cannot be read or has no solution is a warning
    line (the others are evaluated); a file with none is an error."""
    from diffreason.tasks import sudoku

    sets: dict[str, list[list[int]]] = {}
    names = [f.strip() for f in spec.split(",") if f.strip()]
    real = [os.path.realpath(name) for name in names]
    if twice := next((name for k, name in enumerate(names) if real[k] in real[:k]), None):
        raise DiffreasonError(f"--puzzles names {twice!r} twice")
    for name in names:
        path = Path(name)
        entries, source = sudoku.read_puzzle_input(None, path, option="--puzzles")
        counts = sudoku.count_solutions(entries)
        good = [e.cells for i, e in enumerate(entries) if e.error is None and counts.get(i) != 0][:n]
        for line in sudoku.skipped_lines(source, entries):
            _stderr_line(line)
        if not good:
            raise DiffreasonError(f"--puzzles {name!r} holds no puzzle that can be answered")
        key = path.stem if path.stem not in sets and path.stem not in tiers else path.name
        while key in sets or key in tiers:
            key += "'"
        sets[key] = good
    return sets


@eval_app.command("sudoku")
def eval_sudoku(
    model: Path = typer.Option(None, "--model", "-m", help="Sudoku checkpoint (default: the embedded one)"),
    n: int = typer.Option(100, "--n", help=f"puzzles per tier, 1 to {MAX_EVAL_PUZZLES}"),
    tiers: str = typer.Option("easy,medium,hard,extreme,diabolical", "--tiers", help="generated tiers to evaluate "
                              "(comma-separated; empty with --puzzles: the files only)"),
    modes: str = typer.Option(None, "--modes", help="model,verified (with --endpoint: model)"),
    budgets: str = typer.Option(None, "--budgets", help="fixed step budgets, each a run whose schedule spans it, "
                                f"each 1 to {MAX_DENOISING_STEPS}; default 12,24,48 (the headline run uses the "
                                "checkpoint's own; with --endpoint none: the servers' schedule)"),
    seed: int = typer.Option(2026, "--seed", help=f"generator seed of the eval puzzles, 0 to {MAX_SEED}"),
    samples: str = typer.Option("1", "--samples", help="test-time compute: the K values to run besides K = 1, "
                                "comma-separated (e.g. 1,2,4,8,16), each reported as its own mode (model ×K, "
                                "verified ×K)"),
    puzzle_files: str = typer.Option(None, "--puzzles", help="puzzle files, comma-separated, each evaluated as a set "
                                     "of its own (named by its file name; at most --n puzzles each): one per line or "
                                     "9-line grids, '.' or '0' blanks, comments and trailing notes skipped"),
    baseline: Path = typer.Option(None, "--baseline", help="an autoregressive baseline (`train sudoku-ar`'s "
                                  "RUN/model) solving the same puzzles, reported as mode autoregressive"),
    out: Path = typer.Option(Path("evals/reports"), "--out", help="report directory"),
    t_max: float = T_MAX_OPTION,
    t_min: float = T_MIN_OPTION,
    draws: str = _draws_option("fast"),
    device: str = DEVICE_OPTION,
    dtype: str = DTYPE_OPTION,
    threads: int = THREADS_OPTION,
    endpoint: str = ENDPOINT_OPTION,
    concurrency: int = CONCURRENCY_OPTION,
    retries: int = RETRIES_OPTION,
) -> None:
    """Solve rate vs denoising steps per tier, both modes; writes sudoku.json / .md / .png.

    With --endpoint the puzzles are solved by servers (`diffreason serve`, or SGLang with the diffreason plugin),
    sharded over them: model mode on the servers' schedule."""
    from diffreason.tasks import sudoku

    modes = modes if modes is not None else ("model" if endpoint else "model,verified")
    budgets = budgets if budgets is not None else ("" if endpoint else "12,24,48")
    tier_list = list(dict.fromkeys(t.strip() for t in tiers.split(",") if t.strip()))
    mode_list = list(dict.fromkeys(m.strip() for m in modes.split(",") if m.strip()))
    puzzle_sets = _puzzle_sets(puzzle_files, n, tier_list) if puzzle_files else {}
    if not tier_list and not puzzle_sets:
        raise DiffreasonError(f"--tiers names no tier; give some of {', '.join(sudoku.TIERS)} (or --puzzles FILE)")
    if not mode_list:
        raise DiffreasonError(f"--modes names no mode; give some of {', '.join(sudoku.MODES)}")
    bad = [t for t in tier_list if t not in sudoku.TIERS] + [m for m in mode_list if m not in sudoku.MODES]
    if bad:
        raise DiffreasonError(f"unknown tier or mode {bad[0]!r}")
    try:
        budget_list = [int(b) for b in budgets.split(",") if b.strip()]
    except ValueError:
        raise DiffreasonError(f"--budgets must be comma-separated integers, got {budgets!r}") from None
    _int_in("--n", n, 1, MAX_EVAL_PUZZLES)
    for b in budget_list:
        _int_in("--budgets values", b, 1, MAX_DENOISING_STEPS)
    try:
        sample_list = sorted({int(k) for k in samples.split(",") if k.strip()} | {1})
    except ValueError:
        raise DiffreasonError(f"--samples must be comma-separated integers, got {samples!r}") from None
    for k in sample_list:
        _int_in("--samples values", k, 1, sudoku.MAX_SAMPLES)
    _check_seed(seed)
    _check_temperatures(t_max, t_min)
    _check_draws(draws)
    _check_device(device)
    _check_dtype(dtype)
    _int_in("--threads", threads, 0, MAX_THREADS)
    _check_model_dir(model)
    if baseline is not None and not (baseline / "config.json").is_file():
        raise DiffreasonError(f"--baseline {str(baseline)!r} is not a checkpoint directory (no config.json)")
    _writable_dir(out, "--out")
    remote = _remote_engine(endpoint, concurrency, retries, model=model, t_max=t_max, t_min=t_min, dtype=dtype)
    if remote is not None and (mode_list != ["model"] or budget_list or sample_list != [1]):
        raise DiffreasonError("servers run the plain sampler on their own schedule: with --endpoint use --modes model, "
                              "no --budgets and --samples 1")
    _runtime(threads)
    from diffreason.evals.sudoku_eval import run_eval, write_report

    lm = ar = None
    if remote is None:
        device = _resolve_device(device)
        lm = _sudoku_model(model, t_max, t_min, draws, dtype)
        sudoku.check_vocabulary(lm)
        lm.model.to(device)
    if baseline is not None:
        from diffreason.tasks.sudoku_ar import load_ar_model

        ar = load_ar_model(baseline)
        ar.model.to(device if remote is None else "cpu")
    report = run_eval(lm, tier_list, n, mode_list, budget_list, seed, progress=lambda s: err_console.print(f"done {s}"),
                      remote=remote, samples=sample_list, baseline=ar, puzzle_sets=puzzle_sets)
    command = _eval_command("sudoku")
    try:
        paths = write_report(report, out, command)
    except OSError as exc:
        raise DiffreasonError(f"cannot write the report to {str(out)!r}: {exc.strerror or exc}") from None
    for path in paths:
        err_console.print(f"wrote {path}")
    print((out / "sudoku.md").read_text())


@eval_app.command("json")
def eval_json(
    schemas: Path = typer.Option(..., "--schemas", help="directory of jsonschemabench-style files"),
    model: Path = typer.Option(None, "--model", "-m", help="generate with this model (default: random fillings)"),
    limit: int = typer.Option(0, "--limit", help="at most N schemas per collection (0: all)"),
    collections: str = typer.Option("", "--collections", help="comma-separated collection names (default: all)"),
    fillings: int = typer.Option(2, "--fillings", help="outputs checked per compiled schema"),
    out: Path = typer.Option(Path("evals/reports"), "--out", help="report directory"),
    heldout: bool = typer.Option(False, "--heldout", help="only schemas the JSON model never trained on"),
    draws: str = _draws_option("fast"),
    dtype: str = DTYPE_OPTION,
    compile_timeout: float = typer.Option(30.0, "--compile-timeout", help="seconds per schema before giving up"),
    threads: int = THREADS_OPTION,
    endpoint: str = ENDPOINT_OPTION,
    concurrency: int = CONCURRENCY_OPTION,
    retries: int = RETRIES_OPTION,
) -> None:
    """Coverage, validity and compile time of the JSON-schema compiler, per collection.

    --limit picks a stable pseudo-random sample per collection (by file-name hash), not the first files. A file that
    is no jsonschemabench file, a compile that crashes or an output that does not validate is reported (a line each
    on stderr, and in the report) and the others are still evaluated; the exit code is then 1. With --endpoint the
    outputs come from servers (each compiled schema sent as json_schema, requests sharded over them); --model then
    only gives the tokenizer the coverage and compile columns are measured with (give the served checkpoint's)."""
    _int_in("--threads", threads, 0, MAX_THREADS)
    _int_in("--limit", limit, 0, 10**9)
    _int_in("--fillings", fillings, 0, 1000)
    _float_in("--compile-timeout", compile_timeout, 0, 86400)
    if not schemas.is_dir():
        raise DiffreasonError(f"--schemas {str(schemas)!r} is not a directory")
    _writable_dir(out, "--out")
    _check_model_dir(model)
    _check_draws(draws)
    _check_dtype(dtype)
    remote = _remote_engine(endpoint, concurrency, retries, dtype=dtype)
    _runtime(threads)
    from rich.progress import Progress

    from diffreason.evals.json_eval import run_eval, write_report
    from diffreason.model import load_model
    from diffreason.tasks.json_corpus import collection_of, sample_schema_files
    from diffreason.tokenizer import train_byte_bpe

    wanted = [c.strip() for c in collections.split(",") if c.strip()]
    present = {collection_of(f.name) for f in schemas.glob("*.json")}
    missing = [c for c in wanted if c not in present]
    if missing and present:  # (one misspelt name beside good ones shrank the eval without a word: QA, 2026-12-07)
        raise DiffreasonError(f"--collections: {str(schemas)!r} holds no schema of {', '.join(map(repr, missing))} "
                              f"(its collections: {', '.join(sorted(present))})")
    files = sample_schema_files(schemas, limit, wanted, heldout)
    if not files:
        raise DiffreasonError(f"no schema files selected in {schemas}")
    lm = load_model(model, dtype=_torch_dtype(dtype)) if model else None
    if lm is not None:
        _with_draws(lm, draws)
        _writes_json(lm)
    tokenizer = lm.tokenizer if lm else train_byte_bpe()
    with Progress(console=err_console, transient=True) as bar:
        task = bar.add_task("schemas", total=len(files))
        report = run_eval(files, tokenizer, None if remote else lm, fillings, progress=lambda: bar.advance(task),
                          compile_timeout=compile_timeout, remote=remote)
    command = _eval_command("json")
    for path in write_report(report, out, command):
        err_console.print(f"wrote {path}")
    print((out / "json.md").read_text())
    for x in report["refused_by_server"]:
        _stderr_line(f"warning: {x['schema']}: {' '.join(x['error'].split())}")
    problems = ([f"{x['file']}: {x['error']}" for x in report["bad_files"]]
                + [f"{x['schema']}: compile crashed: {x['error']}" for x in report["crashes"]]
                + [f"{x['schema']}: invalid output: {x['error']}" for x in report["invalid_outputs"]])
    for problem in problems:
        _stderr_line(f"error: {' '.join(problem.split())}")
    if problems:
        raise typer.Exit(EXIT_SOME_FAILED)


def _writes_json(lm) -> None:
    """A model whose tokenizer cannot spell a small JSON object (a Sudoku model's) is bad input, not a schema's
    failure: one error before the eval."""
    from diffreason.structured import constraint_template

    small = {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
             "required": ["name", "n"]}
    try:
        constraint_template(lm.tokenizer, lm.canvas_length, json_schema=small)
    except DiffreasonError as exc:
        raise DiffreasonError(f"--model {str(lm.path)!r} cannot write JSON ({' '.join(str(exc).split())[:200]})") \
            from None


@eval_app.command("json-fuzz")
def eval_json_fuzz(
    examples: int = typer.Option(2000, "--examples", help="schemas generated from the keyword grammar"),
    seed: int = typer.Option(0, "--seed", help="the same seed generates the same schemas"),
    fillings: int = typer.Option(6, "--fillings", help="random fillings checked per compiled schema"),
    compile_timeout: float = typer.Option(5.0, "--compile-timeout", help="CPU seconds per compile (past it: 'slow')"),
    shrink: int = typer.Option(3, "--shrink", help="failing schemas shrunk to a smallest reproducer, per kind"),
    out: Path = typer.Option(Path("evals/reports/json-fuzz"), "--out", help="report directory"),
    threads: int = THREADS_OPTION,
) -> None:
    """Soundness fuzz of the JSON-schema compiler: schemas from a grammar of keywords (every draft), each compiled
    template filled at random and every filling validated (formats too); a schema that does not compile must fail
    with SchemaError. Writes json_fuzz.json / .md; exit code 1 when any schema crashed or wrote an invalid value."""
    _int_in("--examples", examples, 1, 10**7)
    _check_seed(seed)
    _int_in("--fillings", fillings, 1, 1000)
    _float_in("--compile-timeout", compile_timeout, 0, 86400)
    _int_in("--shrink", shrink, 0, 100)
    _int_in("--threads", threads, 0, MAX_THREADS)
    _writable_dir(out, "--out")
    _runtime(threads)
    from rich.progress import Progress

    from diffreason.evals.json_fuzz import run_fuzz, write_report

    with Progress(console=err_console, transient=True) as bar:
        task = bar.add_task("schemas", total=examples)
        report = run_fuzz(examples, seed, fillings, compile_seconds=compile_timeout, shrink=shrink,
                          progress=lambda done, *_: bar.update(task, completed=done))
    for path in write_report(report, out, _eval_command("json-fuzz")):
        err_console.print(f"wrote {path}")
    print((out / "json_fuzz.md").read_text())
    if report["failures"]:
        raise typer.Exit(EXIT_SOME_FAILED)


@eval_app.command("json-suite")
def eval_json_suite(
    suite: Path = typer.Option(None, "--suite", help="a JSON-Schema-Test-Suite checkout's tests/ folder (default: the "
                               "copy vendored in this repository's tests/data)"),
    drafts: str = typer.Option("", "--drafts", help="comma-separated: draft4, draft6, draft7, draft2019-09, "
                               "draft2020-12 (default: all)"),
    fillings: int = typer.Option(3, "--fillings", help="random fillings checked per compiled schema"),
    compile_timeout: float = typer.Option(60.0, "--compile-timeout", help="CPU seconds per compile"),
    out: Path = typer.Option(Path("evals/reports/json-suite"), "--out", help="report directory"),
    threads: int = THREADS_OPTION,
) -> None:
    """The official JSON-Schema-Test-Suite as a compliance check: each compiled template's fillings validate, and no
    instance the suite labels invalid lies in a template's language. Writes json_suite.json / .md; exit code 1 on
    any crash, invalid filling or invalid instance inside a template's language."""
    from diffreason.evals.json_suite import DEFAULT_ROOT, DRAFTS

    wanted = [d.strip() for d in drafts.split(",") if d.strip()] or list(DRAFTS)
    unknown = [d for d in wanted if d not in DRAFTS]
    if unknown:
        raise DiffreasonError(f"--drafts: unknown draft {unknown[0]!r} (known: {', '.join(DRAFTS)})")
    root = suite or DEFAULT_ROOT
    if not root.exists():
        raise DiffreasonError(f"--suite {str(root)!r} does not exist")
    if not all((root / d).is_dir() for d in wanted):
        raise DiffreasonError(f"--suite {str(root)!r} has no folder for each of {', '.join(wanted)}")
    _int_in("--fillings", fillings, 1, 1000)
    _float_in("--compile-timeout", compile_timeout, 0, 86400)
    _int_in("--threads", threads, 0, MAX_THREADS)
    _writable_dir(out, "--out")
    _runtime(threads)
    from rich.progress import Progress

    from diffreason.evals.json_suite import load_suite, run_suite, write_report

    groups = load_suite(wanted, root)
    with Progress(console=err_console, transient=True) as bar:
        task = bar.add_task("case groups", total=len(groups))
        report = run_suite(wanted, fillings=fillings, root=root, groups=groups, compile_timeout=compile_timeout,
                           progress=lambda: bar.advance(task))
    for path in write_report(report, out, _eval_command("json-suite")):
        err_console.print(f"wrote {path}")
    print((out / "json_suite.md").read_text())
    if any(report[key] for key in ("crashes", "invalid_fillings", "invalid_inside")):
        raise typer.Exit(EXIT_SOME_FAILED)


def _code_model_dir(model: Path | None) -> tuple[Path, int]:
    """The --model directory (default: the embedded code model) and its canvas length, read without torch."""
    from diffreason.infilling import code_model_path
    from diffreason.model import check_checkpoint

    if model is None:
        model = code_model_path()
        if not (model / "config.json").is_file():
            raise DiffreasonError(f"the embedded code model is missing ({model}); pass --model DIR")
    _, config, _ = check_checkpoint(model)
    return model, int(config.get("canvas_length", 256))


def _check_infill_options(mode: str, samples: int, max_hole_tokens: int, seed: int, steps: int | None,
                          timeout: float, threads: int) -> None:
    from diffreason.tasks.infill.search import MAX_SAMPLES, MODES

    if mode not in MODES:
        raise DiffreasonError(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    _int_in("--samples", samples, 1, MAX_SAMPLES)
    _int_in("--max-hole-tokens", max_hole_tokens, 1, MAX_NEW_TOKENS)
    _check_seed(seed)
    _int_in("--steps", steps, 1, MAX_DENOISING_STEPS)
    _float_in("--timeout", timeout, 0.0, 3600.0)
    _int_in("--threads", threads, 0, MAX_THREADS)


@app.command("infill")
def infill_cmd(
    file: Path = typer.Argument(..., help="a Python file with holes marked <|hole|> (or <|hole:N|>: at most N "
                                "tokens); a marker alone on its line is whole lines, elsewhere text within the line"),
    tests: Path = typer.Option(None, "--tests", help="a Python file run against the filled code, in the sandbox "
                               "(never in this process), with the code's names in scope and the code importable "
                               "as FILE's module; it passes when it runs to its end (unittest.main(), TestCases "
                               "and test* functions it never calls are run too)"),
    mode: str = typer.Option("model", "--mode", help="model: the top-scoring sample; verified: the first, best "
                             "first, whose code parses and passes --tests"),
    samples: int = typer.Option(1, "--samples", "-k", help="K samples (seeds SEED .. SEED+K-1), run as one batch with "
                                "the hole-length search"),
    max_hole_tokens: int = typer.Option(64, "--max-hole-tokens", help="a hole's slot holds at most this many tokens "
                                        "(at most the model's canvas; slot lengths searched up to it)"),
    single_line: bool = typer.Option(False, "--single-line", help="whole-line holes hold exactly one line"),
    model: Path = typer.Option(None, "--model", "-m", help="DiffusionGemma checkpoint directory (default: the "
                               "embedded code model)"),
    seed: int = SEED_OPTION,
    steps: int = typer.Option(None, "--steps", help=f"max denoising steps per canvas, 1 to {MAX_DENOISING_STEPS} "
                              "(default: the checkpoint's)"),
    timeout: float = typer.Option(10.0, "--timeout", help="seconds of wall clock per sandboxed test run"),
    watch: bool = typer.Option(False, "--watch", help="show a canvas denoising live (sample 0, each hole)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object: code, mode, samples, candidate, "
                                 "checked, parses, passed, and per hole text, length, tokens, steps, candidate, why"),
    dtype: str = DTYPE_OPTION,
    threads: int = THREADS_OPTION,
) -> None:
    """Fill the holes of FILE with a diffusion model: each hole a slot the template constrains (lines, indentation,
    balanced brackets), the suffix fixed on the canvas, slot lengths × K samples in one batch.

    Prints the filled file (with --json, one object). Exit code 1 when the code returned fails what was asked:
    --tests that do not pass, or, in verified mode, no sample whose code parses (then nothing is printed: verified mode
    only returns code that parses)."""
    from diffreason.tasks.infill.holes import check_tests, parse_code, read_code_file
    from diffreason.tasks.infill.testrun import check_test_functions, module_name

    _check_infill_options(mode, samples, max_hole_tokens, seed, steps, timeout, threads)
    _check_dtype(dtype)
    model, canvas = _code_model_dir(model)
    code = parse_code(read_code_file(file, keep_bom=True), max_marker_tokens=canvas)
    if max_hole_tokens > canvas:
        raise DiffreasonError(f"--max-hole-tokens {max_hole_tokens} is longer than the model's canvas ({canvas} "
                              "tokens): a hole must fit one canvas")
    test_source = None
    if tests is not None:
        test_source = read_code_file(tests)
        check_tests(test_source, f"the tests in {str(tests)!r}")
        check_test_functions(test_source, f"the tests in {str(tests)!r}")
    _runtime(threads)
    from diffreason.model import load_model
    from diffreason.tasks.infill.search import run_infill

    lm = load_model(model, dtype=_torch_dtype(dtype))
    options = dict(tests=test_source, mode=mode, samples=samples, max_hole_tokens=max_hole_tokens, seed=seed,
                   single_line=single_line or None, max_steps=steps, timeout=timeout,
                   module=module_name(file.stem), tests_name=tests.name if tests is not None else "tests.py")
    try:
        if watch:
            with CanvasWatcher(lm.tokenizer, steps or lm.sampler_config.max_denoising_steps) as watcher:
                result = run_infill(lm, code, watch=lambda hole, trace: watcher(0, trace), **options)
        else:
            result = run_infill(lm, code, **options)
    except KeyboardInterrupt:
        raise Interrupted("before the holes were filled; nothing was written") from None
    if as_json:
        out = result.to_dict()
        out["file"] = str(file)
        print(json.dumps(out))
    else:
        if result.code is not None:  # (verified mode returns no code when no sample parses)
            sys.stdout.write(result.code)
            sys.stdout.flush()
        else:
            _stderr_line(f"nothing returned: {result.why}")
        for h in result.holes:
            searched = ", ".join(map(str, h.lengths))
            _stderr_line(f"hole {h.index + 1}: {h.tokens} tokens in a slot of {h.length} ({searched} searched), "
                         f"steps {h.steps}, sample {h.candidate} of {result.samples}: {h.why}")
        verdict = "no tests" if result.passed is None else ("tests passed" if result.passed else "tests FAILED")
        _stderr_line(f"mode {result.mode}, K {result.samples}, {result.checked} checked; "
                     f"{'parses' if result.parses else 'does NOT parse'}; {verdict}; {result.seconds:.1f}s")
    if result.passed is False or (mode == "verified" and not result.parses):
        raise typer.Exit(EXIT_SOME_FAILED)


@eval_app.command("infill")
def eval_infill(
    tasks: list[Path] = typer.Option([], "--tasks", help="a task file in HumanEval-infilling's format (.jsonl or "
                                     ".jsonl.gz; repeatable; default: the shared single-line and multi-line sets)"),
    limit: int = typer.Option(0, "--limit", help="N tasks per set, spread evenly over it (0: all)"),
    heldout: int = typer.Option(0, "--heldout", help="also N whole-line holes in functions of the packages the code "
                                "model never trained on (no tests: parse rate, exact match, steps)"),
    mode: str = typer.Option("both", "--mode", help="model (pass@1), verified (pass@k: some sample of the first k "
                             "passes, one run of k, not the Codex estimator) or both"),
    samples: int = typer.Option(4, "--samples", "-k", help="K samples per task; verified pass@k for k in 1, 4, 16 up "
                                "to K"),
    max_hole_tokens: int = typer.Option(64, "--max-hole-tokens", help="slot lengths searched up to this"),
    baseline: bool = typer.Option(True, "--baseline/--no-baseline", help="also run every task with the slot left "
                                  "free (the parse rate without the template's constraints)"),
    baseline_samples: int = typer.Option(1, "--baseline-samples", help="the baseline runs the first N of the K seeds"),
    cost: int = typer.Option(0, "--cost", help="also time N samples of the first task as one batch against N "
                             "separate runs (seconds per candidate; 0: skip)"),
    model: Path = typer.Option(None, "--model", "-m", help="code checkpoint (default: the embedded code model)"),
    seed: int = SEED_OPTION,
    timeout: float = typer.Option(10.0, "--timeout", help="seconds per sandboxed test run"),
    out: Path = typer.Option(Path("evals/reports/infill"), "--out", help="report directory"),
    as_json: bool = typer.Option(False, "--json", help="print one summary object (tasks, pass_at_1, pass_at_k, "
                                 "parse_rate, median_steps, ..., per set) instead of the markdown table"),
    dtype: str = DTYPE_OPTION,
    threads: int = THREADS_OPTION,
) -> None:
    """HumanEval-infilling through the infill search: the canonical solutions through the same sandboxed harness
    first, then per set pass@1 (model mode), pass@k (verified mode), parse rate with and without the constraints,
    exact match, steps and seconds per task. Writes infill.json / .md / .png; exit code 1 when a canonical solution
    fails (the harness is then not proven)."""
    from diffreason.tasks.infill.humaneval import TaskFileError, default_task_files, load_tasks, named_task_files
    from diffreason.tasks.infill.search import MAX_SAMPLES

    modes = ["model", "verified"] if mode == "both" else [mode]
    if mode not in ("model", "verified", "both"):
        raise DiffreasonError(f"--mode must be model, verified or both, got {mode!r}")
    _int_in("--limit", limit, 0, 10**7)
    _int_in("--heldout", heldout, 0, 10**5)
    _int_in("--samples", samples, 1, MAX_SAMPLES)
    _int_in("--baseline-samples", baseline_samples, 1, MAX_SAMPLES)
    _int_in("--cost", cost, 0, MAX_SAMPLES)
    _int_in("--max-hole-tokens", max_hole_tokens, 1, MAX_NEW_TOKENS)
    _check_seed(seed)
    _float_in("--timeout", timeout, 0.0, 3600.0)
    _int_in("--threads", threads, 0, MAX_THREADS)
    _check_dtype(dtype)
    model, canvas = _code_model_dir(model)
    if max_hole_tokens > canvas:
        raise DiffreasonError(f"--max-hole-tokens {max_hole_tokens} is longer than the model's canvas ({canvas})")
    files = list(tasks) or list(default_task_files().values())
    try:
        named_task_files(files)  # (one file given twice: its tasks would count twice)
        for f in files:
            load_tasks(f)  # a bad file fails here, before the model loads
    except TaskFileError as exc:
        raise DiffreasonError(str(exc)) from None
    _writable_dir(out, "--out")
    _runtime(threads)
    from rich.progress import Progress

    from diffreason.evals.infill_eval import json_summary, load_sets, run_eval, write_report
    from diffreason.model import load_model

    sets = load_sets(files, limit or None, heldout)
    lm = load_model(model, dtype=_torch_dtype(dtype))
    total = sum(len(t) for _, t in sets.values())
    try:
        with Progress(console=err_console, transient=True) as bar:
            harness = bar.add_task("canonical solutions", total=total)
            bars = {name: bar.add_task(name, total=len(t)) for name, (_, t) in sets.items()}
            report = run_eval(lm, sets, samples=samples, modes=modes, seed=seed, max_hole_tokens=max_hole_tokens,
                              baseline=baseline, baseline_samples=baseline_samples, cost=cost, timeout=timeout,
                              progress=lambda stage, n: bar.advance(bars.get(stage, harness), n))
    except KeyboardInterrupt:
        raise Interrupted(f"no report was written to {out}") from None
    command = _eval_command("infill")
    for path in write_report(report, out, command.strip()):
        err_console.print(f"wrote {path}")
    if as_json:
        print(json.dumps(json_summary(report)))
    else:
        print((out / "infill.md").read_text())
    failed = [f"{f['task_id']} ({f['status']})" for h in report["harness"].values() for f in h["failed"]]
    if failed:
        _stderr_line(f"error: canonical solutions failed the harness: {', '.join(failed[:10])}")
    errors = [f"{name} {e['task_id']}: {e['error']}" for name, s in report["sets"].items() for e in s["errors"]]
    for line in errors[:10]:
        _stderr_line(f"error: {line} (the task was not evaluated)")
    if failed or errors:
        raise typer.Exit(EXIT_SOME_FAILED)


@eval_app.command("suite")
def eval_suite(
    ctx: typer.Context,
    name: str = typer.Argument(None, help="a named suite: quick (a few minutes on one CPU thread) or full (the "
                               "published reports' sets)"),
    suite_file: Path = typer.Option(None, "--suite-file", help="a suite of your own: a TOML or JSON file with "
                                    "`entries`, each task, set, mode, n and options (see docs/cli.md)"),
    out: Path = typer.Option(None, "--out", help="report directory (default: evals/reports/suite-NAME); it holds "
                             "results.jsonl, from which a stopped run continues"),
    seed: int = SEED_OPTION,
    sudoku_model: Path = typer.Option(None, "--sudoku-model", help="Sudoku checkpoint (default: the embedded one)"),
    json_model: Path = typer.Option(None, "--json-model", help="JSON checkpoint (default: the embedded one)"),
    code_model: Path = typer.Option(None, "--code-model", help="code checkpoint (default: the embedded one)"),
    baseline: Path = typer.Option(None, "--baseline", help="an autoregressive Sudoku baseline (`train sudoku-ar`'s "
                                  "RUN/model): the suite's Sudoku sets also run in mode autoregressive"),
    restart: bool = typer.Option(False, "--restart", help="discard the results in --out and start afresh"),
    report_only: bool = typer.Option(False, "--report-only", help="only rebuild the report from --out's "
                                     "results.jsonl"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bars (there are none when stderr is not a "
                               "terminal)"),
    device: str = DEVICE_OPTION,
    threads: int = THREADS_OPTION,
) -> None:
    """Run a suite of evals — Sudoku tiers and puzzle files, JSON schemas, code infilling, each in its modes and
    baselines — and write one report: suite.json / .md / .png.

    Every finished item is a line of <out>/results.jsonl: run the same command again after a stop (Ctrl-C, a kill)
    and it continues where it stopped; the same seed gives the same results, item by item."""
    from diffreason.evals import suite as suites

    if report_only:
        if out is None and name is None and suite_file is None:
            raise DiffreasonError("--report-only needs the suite's --out (or its name)")
        given = [f"--{p.replace('_', '-')}" for p in ("restart", "seed", "sudoku_model", "json_model", "code_model",
                                                      "baseline", "device", "threads")
                 if getattr(ctx.get_parameter_source(p), "name", None) == "COMMANDLINE"]
        if given:
            raise DiffreasonError(f"--report-only rebuilds the report from the results as they were run: "
                                  f"{', '.join(given)} would not apply")
        out = out or Path("evals/reports") / f"suite-{name or suites.suite_file_name(suite_file)}"
        head, lines = suites.Results(out / "results.jsonl").read()
        if head is None:
            raise DiffreasonError(f"no suite results in {str(out)!r} (no results.jsonl with a header)")
        if name is not None and head.get("suite") != name:  # (QA, 2026-12-07: another suite's report was rebuilt)
            raise DiffreasonError(f"{str(out)!r} holds the results of suite {head.get('suite')!r}, not {name!r}")
        _write_suite_report(suites, out, head, lines)
        return
    if (name is None) == (suite_file is None):
        raise DiffreasonError("give a suite name (" + ", ".join(suites.SUITES) + ") or --suite-file FILE"
                              + (", not both" if name is not None else ""))
    _check_seed(seed)
    _check_device(device)
    _int_in("--threads", threads, 0, MAX_THREADS)
    has_baseline = baseline is not None
    suite = (suites.named_suite(name, has_baseline) if name is not None
             else suites.load_suite_file(suite_file, has_baseline))
    from diffreason.infilling import code_model_path
    from diffreason.model import check_checkpoint

    paths = {"sudoku": sudoku_model or EMBEDDED_SUDOKU, "json": json_model or EMBEDDED_JSON,
             "code": code_model or code_model_path(), "baseline": baseline}
    used = suites.models_used(suite)
    if has_baseline and "baseline" not in used:
        raise DiffreasonError(f"--baseline is given but suite {suite.name!r} has no entry in mode autoregressive")
    for role in sorted(used):
        if role == "baseline" and not (baseline / "config.json").is_file():
            raise DiffreasonError(f"--baseline {str(baseline)!r} is not a checkpoint directory (no config.json)")
        if role != "baseline":
            check_checkpoint(paths[role])
    out = out or Path("evals/reports") / f"suite-{suite.name}"
    _writable_dir(out, "--out")
    where = f"suite file {str(suite_file)!r}" if suite_file is not None else f"suite {suite.name!r}"
    items = suites.items_of(suite, where)  # (a missing or bad file fails here, before torch)
    # (absolute: the same checkpoints whatever the working directory of a run that continues it)
    head = suites.header(suite, seed, {role: str(Path(paths[role]).resolve()) for role in sorted(used)},
                         _eval_command("suite"), items)
    results = suites.Results(out / "results.jsonl")
    done = results.start(head, restart)
    _runtime(threads)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    models = suites.Models(paths, _resolve_device(device))
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err_console, transient=False, disable=quiet or not err_console.is_terminal) as bar:
            def progress(entry, total: int, already: int):
                task = bar.add_task(f"{entry.task} {entry.set} {entry.label}", total=total, completed=already)
                return lambda k: bar.advance(task, k)

            suites.run(suite, seed, results, done, models, progress, items=items)
    except KeyboardInterrupt:
        again = "the same command without --restart" if restart else "the same command"
        raise Interrupted(f"the finished items are kept in {results.path}; {again} continues the suite") from None
    try:
        head, lines = results.read()
        _write_suite_report(suites, out, head, lines)
    except KeyboardInterrupt:
        raise Interrupted(f"while writing the report; every item is in {results.path} (`diffreason eval suite "
                          f"--report-only --out {out}` writes the report)") from None


def _write_suite_report(suites, out: Path, head: dict, lines: list[dict]) -> None:
    """suite.json / .md / .png from the results; the markdown on stdout; exit code 1 on a problem (a crashed
    compile, an invalid output: bugs; an infill task that could not be evaluated)."""
    try:
        paths = suites.write_report(out, head, lines)
    except OSError as exc:
        raise DiffreasonError(f"cannot write the report to {str(out)!r}: {exc.strerror or exc}") from None
    for path in paths:
        err_console.print(f"wrote {path}")
    print((out / "suite.md").read_text())
    problems = [p for line in lines for p in line["record"].get("problems", [])]
    for problem in problems[:20]:
        _stderr_line(f"error: {problem}")
    if problems:
        raise typer.Exit(EXIT_SOME_FAILED)


class GridWatcher:
    """Live Sudoku grid: givens bold, cells accepted this step green, the rest the model's current guess, dim."""

    def __init__(self, grid: list[int], max_steps: int):
        self.grid = grid
        self.max_steps = max_steps
        self.live = Live(console=err_console, auto_refresh=False, redirect_stdout=_stdout_is_terminal())

    def __enter__(self):
        self.live.__enter__()
        return self

    def __exit__(self, *exc):
        self.live.__exit__(*exc)

    def __call__(self, request: int, trace) -> None:
        from diffreason.tasks import sudoku

        if request != 0:
            return
        text = Text(f"step {trace.step}/{self.max_steps}  mean entropy {trace.mean_entropy:.3f}\n", style="bold")
        for i, tok in enumerate(trace.argmax[: sudoku.CELLS]):
            digit = str(sudoku.token_digit(tok))
            style = "bold" if self.grid[i] else ("bold green" if trace.accepted[i] else "dim")
            text.append(digit, style=style)
            if i % 9 == 8:
                text.append("\n" + ("------+-------+------\n" if i in (26, 53) else ""))
            else:
                text.append(" | " if i % 3 == 2 else " ")
        self.live.update(text, refresh=True)


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


def _empty_path(argv: list[str]) -> str | None:
    """The first path option or argument `argv` gives as an empty string (which reads as the current directory: a
    run's files would land there), or None."""
    import inspect

    from typer.main import get_command

    command, at = get_command(app), 0
    while at < len(argv) and hasattr(command, "commands") and argv[at] in command.commands:
        command, at = command.commands[argv[at]], at + 1
    if command.callback is None:
        return None
    signature = inspect.signature(command.callback)
    paths = [p for p in command.params if "Path" in str(getattr(signature.parameters.get(p.name), "annotation", ""))]
    for option in (p for p in paths if getattr(p, "opts", None) and type(p).__name__.endswith("Option")):
        for name in option.opts:
            given = [b for a, b in zip(argv[at:], argv[at + 1:]) if a == name] + [
                a[len(name) + 1:] for a in argv[at:] if a.startswith(name + "=")]
            if "" in given:
                return name
    arguments = [p for p in paths if type(p).__name__.endswith("Argument")]
    takes_value = {name for p in command.params if not getattr(p, "is_flag", True) for name in p.opts}
    rest = argv[at:]
    if arguments and any(a == "" and (i == 0 or rest[i - 1] not in takes_value) for i, a in enumerate(rest)):
        return arguments[0].name.upper()  # (every command has one positional path at most)
    return None


def main() -> None:
    """The `diffreason` entry point: user errors as one `error: ` line (exit 2), Ctrl-C as one line (exit 130)."""
    empty = _empty_path(sys.argv[1:])
    if empty is not None:
        _exit(f"error: {empty} is empty: name a path ('.' for the current directory)", EXIT_BAD_INPUT)
    try:
        code = app(standalone_mode=False)
    except typer_exceptions.TyperException as exc:
        # Usage errors (bad option, bad value, missing argument) are user errors too: one line, exit 2.
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            print(ctx.get_help())
            sys.exit(0)
        format_message = getattr(exc, "format_message", None)
        _exit(f"error: {format_message() if format_message else exc}", EXIT_BAD_INPUT)
    except DiffreasonError as exc:
        _exit(f"error: {exc}", EXIT_BAD_INPUT)
    except Interrupted as exc:
        _exit(f"interrupted: {exc}", EXIT_INTERRUPTED)
    except typer_exceptions.Abort:  # end of input at a prompt
        _exit("interrupted: nothing was written", EXIT_INTERRUPTED)
    except OSError as exc:  # a file that vanished or a full disk mid-run: still one line, not a traceback
        _exit(f"error: {exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}", EXIT_BAD_INPUT)
    if code == EXIT_INTERRUPTED:  # Ctrl-C outside a command's own handler: the CLI framework returns 130
        _exit("interrupted: the command did not finish (only the files it said it wrote are whole)", EXIT_INTERRUPTED)
    _ignore_interrupts()
    if code:
        sys.exit(code)


def _ignore_interrupts() -> None:
    """The command is over: a Ctrl-C while the interpreter shuts down would print a traceback from its teardown or
    kill the process by the signal, not with the command's exit code (QA, 2026-12-07)."""
    with contextlib.suppress(ValueError):  # (not the main thread: the caller's own handler stays)
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _exit(line: str, code: int) -> None:
    _stderr_line(line)
    _ignore_interrupts()
    sys.exit(code)


if __name__ == "__main__":
    main()
