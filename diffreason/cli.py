"""The `diffreason` command line (typer + rich).

Every user error is one line on stderr and exit code 2; never a traceback.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import typer
from typer import exceptions as typer_exceptions
from rich.console import Console
from rich.live import Live
from rich.text import Text

from diffreason.errors import DiffreasonError

EMBEDDED_SUDOKU = Path(__file__).parent / "weights" / "sudoku-base"
EMBEDDED_JSON = Path(__file__).parent / "weights" / "json-small"

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
    model: Path = typer.Option(
        None, "--model", "-m", help="DiffusionGemma checkpoint directory (default: the embedded JSON model)"
    ),
    steps: int = typer.Option(None, "--steps", help="max denoising steps per canvas (default: the checkpoint's)"),
    seed: int = typer.Option(0, "--seed", help="random seed; the same seed gives the same output"),
    max_new_tokens: int = typer.Option(None, "--max-new-tokens", help="default: the checkpoint's (256)"),
    fast: bool = typer.Option(False, "--fast", help="fast random draws (not token-identical to transformers)"),
    schema: Path = typer.Option(None, "--schema", help="JSON Schema file: the output is a JSON value that validates"),
    watch: bool = typer.Option(False, "--watch", help="show the canvas denoising live"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """Generate text from PROMPT by block diffusion (with --schema: a JSON value that validates)."""
    from diffreason.engine import Engine
    from diffreason.model import load_model

    if max_new_tokens is not None and max_new_tokens < 1:
        raise DiffreasonError(f"--max-new-tokens must be at least 1, got {max_new_tokens}")
    schema_dict = None
    if schema is not None:
        from diffreason.tasks.json_schema import load_schema

        schema_dict = load_schema(schema)  # file errors before the model loads
    if model is None:
        if not (EMBEDDED_JSON / "config.json").is_file():
            raise DiffreasonError(f"the embedded JSON model is missing ({EMBEDDED_JSON}); pass --model DIR")
        model = EMBEDDED_JSON
    if schema_dict is not None:
        from diffreason.structured import generate as generate_structured

        lm = load_model(model)
        value, result = generate_structured(lm, schema_dict, prompt, seed, _sampler_config(lm, steps, fast))
        if as_json:
            print(json.dumps({"object": value, "steps": result.steps, "text": result.text, "seconds": result.seconds,
                              "fixed": list(result.fixed)}))
        else:
            print(json.dumps(value, indent=2, ensure_ascii=False))
            err_console.print(f"[dim]steps per canvas {result.steps}, {result.seconds:.2f}s[/dim]")
            for choice in result.fixed:  # (what the schema left open and the template chose)
                err_console.print(f"[dim]fixed by the template: {choice}[/dim]")
        return
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


train_app = typer.Typer(no_args_is_help=True, help="Fine-tune a DiffusionGemma with uniform-state SFT.")
app.add_typer(train_app, name="train")


def _first_error(exc: ValueError) -> str:
    """One line for a pydantic validation error (its first problem), or the message of any other ValueError."""
    errors = getattr(exc, "errors", None)
    if callable(errors) and errors():
        e = errors()[0]
        where = ".".join(str(part) for part in e.get("loc", ()))
        msg = e["msg"].removeprefix("Value error, ")
        return f"{where}: {msg}" if where else msg
    return " ".join(str(exc).split())


def _resolve_device(device: str) -> str:
    """`auto` → cuda when present, else cpu; a device this machine lacks is one clear error."""
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda") or (device == "cuda" and not torch.cuda.is_available()):
        raise DiffreasonError(f"--device {device} is not available here; use cpu")
    return device


PRECISION_OPTION = typer.Option(
    "fp32", "--precision", help="fp32, or bf16: bfloat16 autocast (float32 weights), faster on a GPU",
)
TIME_BUDGET_OPTION = typer.Option(
    None, "--time-budget", help="wall-clock minutes: the learning-rate schedule (and any curriculum) ends with whichever "
    "of --steps or the time runs out first",
)


def _training_setup(device: str, threads: int, **config):
    """The device to train on and the TrainConfig, with every bad option as one clear error."""
    import torch

    from diffreason.train import TrainConfig

    device = _resolve_device(device)
    if threads < 0:
        raise DiffreasonError("--threads must be >= 0")
    if threads:
        torch.set_num_threads(threads)
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # TF32 matmuls: faster, and precise enough for training
    minutes = config.pop("time_budget", None)
    if minutes is not None:
        if minutes <= 0:
            raise DiffreasonError("--time-budget must be > 0 minutes")
        config["time_budget"] = 60.0 * minutes
    try:
        return device, TrainConfig(**config)
    except ValueError as exc:
        raise DiffreasonError(_first_error(exc)) from None


@train_app.command("sudoku")
def train_sudoku(
    run_dir: Path = typer.Option(Path("runs/sudoku-small"), "--run-dir", help="checkpoints, logs and RUN/model"),
    preset: str = typer.Option(
        "sudoku-small", "--preset", help="model size: sudoku-small (CPU-sized) or sudoku-base (GPU-sized; the embedded "
        "model's)"
    ),
    steps: int = typer.Option(3000, "--steps", help="total optimiser steps (a rerun resumes up to this)"),
    batch_size: int = typer.Option(64, "--batch-size"),
    lr: float = typer.Option(1e-3, "--lr", help="peak learning rate (warmup, then cosine)"),
    eval_every: int = typer.Option(250, "--eval-every", help="held-out solve rate every N steps (0: never)"),
    seed: int = typer.Option(0, "--seed"),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda"),
    init_from: Path | None = typer.Option(
        None, "--init-from", help="start from this checkpoint's weights (e.g. the embedded model) instead of fresh ones"
    ),
    curriculum: bool = typer.Option(
        True, "--curriculum/--no-curriculum", help="blanks grow from few to many (off: full difficulty from step 0)"
    ),
    threads: int = typer.Option(0, "--threads", help="CPU threads for torch (0: torch's default)"),
    puzzle_fraction: float = typer.Option(
        0.0, "--puzzle-fraction", min=0.0, max=1.0,
        help="share of each batch drawn from uniquely solvable generated puzzles (mostly hard / extreme) instead of "
        "random blanks",
    ),
    puzzle_pool: int = typer.Option(2000, "--puzzle-pool", min=1, help="how many unique puzzles to generate for it"),
    grow_to: int | None = typer.Option(
        None, "--grow-to", help="with --init-from: first deepen that model to this many layers, computing the same "
        "function (added layers start as identities), then train"
    ),
    eval_tier: str = typer.Option("medium", "--eval-tier", help="tier of the periodic held-out eval"),
    precision: str = PRECISION_OPTION,
    time_budget: float | None = TIME_BUDGET_OPTION,
) -> None:
    """Train a Sudoku solver (resumable: rerun the same command to continue)."""
    import torch

    from diffreason.tasks import sudoku
    from diffreason.train import resume_or_build, train

    device, cfg = _training_setup(device, threads, steps=steps, batch_size=batch_size, lr=lr, eval_every=eval_every,
                                  seed=seed, time_budget=time_budget, precision=precision)
    if eval_tier not in sudoku.TIERS:
        raise DiffreasonError(f"--eval-tier {eval_tier!r}: choose one of {', '.join(sudoku.TIERS)}")
    if grow_to is not None and init_from is None:
        raise DiffreasonError("--grow-to deepens the --init-from model; give --init-from too")
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
    lm.model.to(device)
    if puzzle_fraction > 0:
        from rich.progress import Progress

        with Progress(console=err_console, transient=True) as bar:
            task = bar.add_task("generating training puzzles", total=puzzle_pool)
            stream = sudoku.SudokuStream(seed, puzzle_fraction=puzzle_fraction, puzzle_pool_size=puzzle_pool,
                                         progress=lambda: bar.advance(task))
    else:
        stream = sudoku.SudokuStream(seed)
    batches = sudoku.sft_batches(stream, torch.Generator().manual_seed(seed), curriculum=curriculum, device=device)
    train(
        lm, batches, cfg, run_dir, evaluate=sudoku.heldout_evaluator(tier=eval_tier),
        stream_state=(stream.state_dict, stream.load_state_dict), console=err_console,
    )
    err_console.print(f"model written to {run_dir / 'model'}")


@train_app.command("json")
def train_json(
    schemas: Path = typer.Option(..., "--schemas", help="jsonschemabench-style directory: schema files with instances"),
    run_dir: Path = typer.Option(Path("runs/json-small"), "--run-dir", help="checkpoints, logs and RUN/model"),
    steps: int = typer.Option(2000, "--steps", help="total optimiser steps (a rerun resumes up to this)"),
    batch_size: int = typer.Option(32, "--batch-size"),
    lr: float = typer.Option(1e-3, "--lr", help="peak learning rate (warmup, then cosine)"),
    seed: int = typer.Option(0, "--seed"),
    threads: int = typer.Option(0, "--threads", help="CPU threads for torch (0: torch's default)"),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda"),
    init_from: Path | None = typer.Option(
        None, "--init-from", help="start from this JSON model's weights and tokenizer (e.g. the embedded one)"
    ),
    precision: str = PRECISION_OPTION,
    time_budget: float | None = TIME_BUDGET_OPTION,
) -> None:
    """Train the JSON model on (prompt, object) pairs from the schemas' valid instances (resumable)."""
    import torch

    from diffreason.model import load_model
    from diffreason.tasks import json_corpus
    from diffreason.train import train

    if not schemas.is_dir():
        raise DiffreasonError(f"--schemas {str(schemas)!r} is not a directory")
    device, cfg = _training_setup(device, threads, steps=steps, batch_size=batch_size, lr=lr, eval_every=0, seed=seed,
                                  time_budget=time_budget, precision=precision)
    pairs = json_corpus.load_pairs(schemas)
    if (run_dir / "model" / "config.json").is_file():
        lm = load_model(run_dir / "model")
    elif init_from is not None:
        lm = load_model(init_from)
    else:
        lm = json_corpus.build_json_model(json_corpus.make_tokenizer(pairs), seed)
    lm.model.to(device)
    stream = json_corpus.JsonStream(pairs, lm.tokenizer, seed)
    err_console.print(f"{len(stream.examples)} training objects from {len(pairs)} valid instances")
    train(
        lm, stream.batches(torch.Generator().manual_seed(seed)), cfg, run_dir,
        stream_state=(stream.state_dict, stream.load_state_dict), console=err_console,
    )
    err_console.print(f"model written to {run_dir / 'model'}")


solve_app = typer.Typer(no_args_is_help=True, help="Solve constraint problems with a diffusion model.")
app.add_typer(solve_app, name="solve")
eval_app = typer.Typer(no_args_is_help=True, help="Evaluate models; reports go to evals/reports.")
app.add_typer(eval_app, name="eval")



def _sudoku_model(model: Path | None, t_max: float | None = None, t_min: float | None = None):
    """The checkpoint, with its sampler's temperature schedule overridden where asked."""
    from diffreason.model import load_model
    from diffreason.sampler import SamplerConfig

    if model is None:
        if not (EMBEDDED_SUDOKU / "config.json").is_file():
            raise DiffreasonError(f"the embedded Sudoku model is missing ({EMBEDDED_SUDOKU}); pass --model DIR")
        model = EMBEDDED_SUDOKU
    lm = load_model(model)
    update = {k: v for k, v in (("t_max", t_max), ("t_min", t_min)) if v is not None}
    if update:
        try:
            lm.sampler_config = SamplerConfig(**{**lm.sampler_config.model_dump(), **update})
        except ValueError as exc:
            raise DiffreasonError(_first_error(exc)) from None
    return lm


T_MAX_OPTION = typer.Option(None, "--t-max", help="temperature at the first step (default: the checkpoint's)")
T_MIN_OPTION = typer.Option(None, "--t-min", help="temperature the schedule falls towards (default: the checkpoint's)")


def _read_puzzles(puzzle: str | None, file: Path | None) -> list[tuple[str, list[int]]]:
    from diffreason.tasks import sudoku

    if puzzle is not None and file is not None:
        raise DiffreasonError("give a PUZZLE or --file, not both")
    if file is not None:
        if not file.is_file():
            raise DiffreasonError(f"--file {str(file)!r} does not exist")
        source, text = str(file), file.read_text()
    elif puzzle is not None:
        source, text = None, puzzle
    else:
        if sys.stdin.isatty():
            raise DiffreasonError("no puzzle: give PUZZLE, --file F (one per line) or puzzles on stdin")
        source, text = "stdin", sys.stdin.read()
    lines = [text] if source is None else text.splitlines()
    # A 9-line grid (or any text whose cells add up to 81 only together) is one puzzle.
    if source is not None and len(lines) > 1 and all(len(ln.strip()) < 81 for ln in lines if ln.strip()):
        lines = [text]
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            out.append((line.strip(), sudoku.parse(line)))
        except sudoku.SudokuError as exc:
            raise DiffreasonError(f"{source} line {n}: {exc}" if source and len(lines) > 1 else str(exc)) from None
    if not out:
        raise DiffreasonError(f"no puzzle found in {source}")
    return out


@solve_app.command("sudoku")
def solve_sudoku(
    puzzle: str = typer.Argument(None, help="81 cells, '.' or '0' for blanks (or use --file / stdin)"),
    file: Path = typer.Option(None, "--file", "-f", help="one puzzle per line"),
    model: Path = typer.Option(None, "--model", "-m", help="Sudoku checkpoint (default: the embedded one)"),
    mode: str = typer.Option("model", "--mode", help="model (plain sampler) or verified (task-aware re-noising)"),
    steps: int = typer.Option(None, "--steps", help="max denoising steps (default: the checkpoint's, 48)"),
    seed: int = typer.Option(0, "--seed"),
    batch_size: int = typer.Option(64, "--batch-size"),
    watch: bool = typer.Option(False, "--watch", help="show the grid denoising live (first puzzle)"),
    as_json: bool = typer.Option(False, "--json", help="JSON lines, one object per puzzle, in input order"),
    t_max: float = T_MAX_OPTION,
    t_min: float = T_MIN_OPTION,
) -> None:
    """Solve Sudoku puzzles with a diffusion model."""
    import time

    from rich.progress import Progress

    from diffreason.tasks import sudoku

    if mode not in sudoku.MODES:
        raise DiffreasonError(f"--mode must be one of {', '.join(sudoku.MODES)}, got {mode!r}")
    if steps is not None and steps < 1:
        raise DiffreasonError(f"--steps must be at least 1, got {steps}")
    if batch_size < 1:
        raise DiffreasonError(f"--batch-size must be at least 1, got {batch_size}")
    items = _read_puzzles(puzzle, file)
    lm = _sudoku_model(model, t_max, t_min)
    sudoku.check_vocabulary(lm)
    t = time.perf_counter()
    grids = [g for _, g in items]
    watcher = GridWatcher([g for g in grids[:1]], steps or lm.sampler_config.max_denoising_steps) if watch else None
    if len(grids) > 1 and not watch:
        with Progress(console=err_console, transient=True) as bar:
            task = bar.add_task("solving", total=len(grids))
            results = sudoku.solve(lm, grids, mode, seed, steps, batch_size, progress=lambda k: bar.advance(task, k))
    elif watcher is not None:
        with watcher:
            results = sudoku.solve(lm, grids, mode, seed, steps, batch_size, callback=watcher)
    else:
        results = sudoku.solve(lm, grids, mode, seed, steps, batch_size)
    elapsed = time.perf_counter() - t
    out = Console()
    for (_, grid), res in zip(items, results):
        if as_json:
            print(json.dumps(res.to_dict()))
            continue
        cells = [int(c) for c in res.solution] if res.solution else grid
        out.print(Text(sudoku.to_grid(cells)))
        verdict = "solved" if res.solved else "NOT solved"
        out.print(f"{verdict} in {res.steps} steps (mode {res.mode})\n")
    if not as_json:
        n_solved = sum(r.solved for r in results)
        err_console.print(f"{n_solved}/{len(results)} solved, {elapsed:.2f}s ({len(results) / elapsed:.1f} puzzles/s)")


@eval_app.command("sudoku")
def eval_sudoku(
    model: Path = typer.Option(None, "--model", "-m", help="Sudoku checkpoint (default: the embedded one)"),
    n: int = typer.Option(100, "--n", help="puzzles per tier"),
    tiers: str = typer.Option("easy,medium,hard,extreme", "--tiers"),
    modes: str = typer.Option("model,verified", "--modes"),
    budgets: str = typer.Option("12,24,48", "--budgets", help="fixed step budgets, each a run whose schedule spans "
                                "it (the headline run uses the checkpoint's own)"),
    seed: int = typer.Option(2026, "--seed", help="generator seed of the eval puzzles"),
    out: Path = typer.Option(Path("evals/reports"), "--out", help="report directory"),
    t_max: float = T_MAX_OPTION,
    t_min: float = T_MIN_OPTION,
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda"),
) -> None:
    """Solve rate vs denoising steps per tier, both modes; writes sudoku.json / .md / .png."""
    from diffreason.evals.sudoku_eval import run_eval, write_report
    from diffreason.tasks import sudoku

    tier_list = [t.strip() for t in tiers.split(",") if t.strip()]
    mode_list = [m.strip() for m in modes.split(",") if m.strip()]
    bad = [t for t in tier_list if t not in sudoku.TIERS] + [m for m in mode_list if m not in sudoku.MODES]
    if bad:
        raise DiffreasonError(f"unknown tier or mode {bad[0]!r}")
    try:
        budget_list = [int(b) for b in budgets.split(",")]
    except ValueError:
        raise DiffreasonError(f"--budgets must be comma-separated integers, got {budgets!r}") from None
    if n < 1 or not budget_list or min(budget_list) < 1:
        raise DiffreasonError("--n and every budget must be at least 1")
    device = _resolve_device(device)
    lm = _sudoku_model(model, t_max, t_min)
    sudoku.check_vocabulary(lm)
    lm.model.to(device)
    report = run_eval(lm, tier_list, n, mode_list, budget_list, seed, progress=lambda s: err_console.print(f"done {s}"))
    command = "diffreason eval sudoku " + " ".join(sys.argv[3:]) if len(sys.argv) > 3 else "diffreason eval sudoku"
    for path in write_report(report, out, command):
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
    compile_timeout: float = typer.Option(30.0, "--compile-timeout", help="seconds per schema before giving up"),
) -> None:
    """Coverage, validity and compile time of the JSON-schema compiler, per collection.

    --limit picks a stable pseudo-random sample per collection (by file-name hash), not the first files."""
    from rich.progress import Progress

    from diffreason.evals.json_eval import collection_of, run_eval, write_report
    from diffreason.model import load_model
    from diffreason.tokenizer import train_byte_bpe

    if not schemas.is_dir():
        raise DiffreasonError(f"--schemas {str(schemas)!r} is not a directory")
    from diffreason.tasks.json_corpus import is_heldout

    wanted = {c.strip() for c in collections.split(",") if c.strip()}
    files, counts = [], {}
    sample_order = sorted(schemas.glob("*.json"), key=lambda f: hashlib.sha1(f.name.encode()).hexdigest())
    for f in sample_order:
        c = collection_of(f.name)
        skip = (wanted and c not in wanted) or (heldout and not is_heldout(f.name))
        if skip or (limit and counts.get(c, 0) >= limit):
            continue
        counts[c] = counts.get(c, 0) + 1
        files.append(f)
    if not files:
        raise DiffreasonError(f"no schema files selected in {schemas}")
    lm = load_model(model) if model else None
    tokenizer = lm.tokenizer if lm else train_byte_bpe()
    with Progress(console=err_console, transient=True) as bar:
        task = bar.add_task("schemas", total=len(files))
        report = run_eval(files, tokenizer, lm, fillings, progress=lambda: bar.advance(task),
                          compile_timeout=compile_timeout)
    command = "diffreason eval json " + " ".join(sys.argv[3:])
    for path in write_report(report, out, command):
        err_console.print(f"wrote {path}")
    print((out / "json.md").read_text())


class GridWatcher:
    """Live Sudoku grid: givens bold, cells accepted this step green, the rest the model's current guess, dim."""

    def __init__(self, grids, max_steps: int):
        self.grid = grids[0]
        self.max_steps = max_steps
        self.live = Live(console=err_console, auto_refresh=False)

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
            digit = str((tok - sudoku.FREE_BASE) % 9 + 1)
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
