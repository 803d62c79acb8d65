"""Engine benchmark: per-step time split (model forward / sampler / constraint) of diffreason on the paths users run —
unconstrained generation (a `small` preset model, against transformers' `model.generate`, tokens checked identical),
Sudoku (the shipped sudoku-base, batch 1 and 64), JSON (the shipped JSON model, a schema's template; and 16 schemas'
templates in one batch) and code infill
(the shipped code model, a single-line hole's search: 2 samples × the slot lengths) — with reference draws, fast
draws over the model's whole forward (`fast-whole`) and fast draws with the head and self-conditioning at free
positions only (`fast`, the default; tokens checked identical to `fast-whole`), one thread and two, wall and CPU time.

Equal work on both sides: every run does a fixed number of denoising steps per canvas (early stop off) over the same
canvases (same requests, seeds and templates), and every figure is per canvas-step as well as per step.

Requests as served (`--served`, on by default): a batch of 16 JSON prompts (SCHEMA's members and its subsets of at
least three, untitled), unconstrained, two canvases at most, early stop on (the checkpoint's schedule) — the
engine (reference and fast draws) against transformers' `generate` batched and one request at a time; the engine's
reference tokens are checked identical to transformers' one at a time, and the decoder's row-passes are counted on
every side.

Two more tables: the GEMM utilisation of a fast-draws step (its FLOP/s against the rate of the same products run
alone, `diffreason.evals.gemm_rate`), and Sudoku throughput (the 64 puzzles solved as `solve sudoku` does, in float32
and bfloat16, in model and verified mode, against the project's exact solver, in puzzles per CPU-second).

    python -m diffreason.evals.bench_engine --repeats 2
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass

import torch
import typer
from rich.console import Console
from rich.table import Table

from diffreason import Engine, build_model, load_model
from diffreason.engine import GenerationRequest
from diffreason.evals.gemm_rate import MatmulRecorder, replay_seconds

app = typer.Typer(add_completion=False)
WEIGHTS = __import__("pathlib").Path(__file__).resolve().parent.parent / "diffreason" / "weights"
NO_EARLY_STOP = 1e-30  # a mean entropy no step reaches (transformers refuses 0): every canvas runs all its steps
SCHEMA = {
    "title": "a customer order",
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 1},
        "customer": {"type": "string", "maxLength": 24},
        "email": {"type": "string", "format": "email"},
        "items": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3},
        "paid": {"type": "boolean"},
    },
    "required": ["id", "customer", "email", "items", "paid"],
}
CODE = (  # a single-line hole, as `diffreason infill` searches it: 2 samples × the slot lengths up to 64 tokens
    'def mean_of_positive(values):\n    """The mean of the positive values (0.0 when there are none)."""\n'
    "    kept = [v for v in values if v > 0]\n    ",
    "\n    return total / len(kept) if kept else 0.0\n",
)


@dataclass
class Path:
    name: str
    lm: object
    requests: list
    steps: int


def _paths(names: list[str], steps: int | None, preset: str) -> list[Path]:
    paths = []
    if "unconstrained" in names:
        lm = build_model(preset, seed=0)
        with torch.no_grad():  # a random model is maximally unsure: sharpened, its steps accept positions
            lm.model.model.decoder.embed_tokens.weight.mul_(30)
        prompt = "Write a short story about a robot learning to paint."
        paths.append(Path("unconstrained, small", lm,
                          [GenerationRequest(prompt, seed=0, max_new_tokens=lm.canvas_length)], steps or 48))
    if any(n.startswith("sudoku") for n in names):
        from diffreason.tasks import sudoku

        lm = load_model(WEIGHTS / "sudoku-base")
        puzzles = [p.puzzle for p in sudoku.generate_set("medium", 64, seed=1)]
        bos = lm.tokenizer.bos_token_id
        requests = [GenerationRequest([bos], sudoku.template(p), seed=i, max_new_tokens=sudoku.CELLS)
                    for i, p in enumerate(puzzles)]
        for batch in (1, 64):
            if f"sudoku-{batch}" in names:
                paths.append(Path(f"sudoku-base ×{batch}", lm, requests[:batch],
                                  steps or lm.sampler_config.max_denoising_steps))
    if "json" in names or "json-16" in names:
        from diffreason.structured import constraint_template
        from diffreason.tasks.json_corpus import prompt_of

        lm = load_model(WEIGHTS / "json-small")
        schemas = [SCHEMA] if "json" in names else []
        schemas += served_schemas() if "json-16" in names else []
        requests = [GenerationRequest(prompt_of(schema), seed=i,
                                      template=constraint_template(lm.tokenizer, lm.canvas_length,
                                                                   json_schema=schema)[0])
                    for i, schema in enumerate(schemas)]
        for name, part in (("json", requests[:1]), ("json-16", requests[-16:])):
            if name in names:
                paths.append(Path("json-small" + (" ×16" if name == "json-16" else ""), lm, part,
                                  steps or lm.sampler_config.max_denoising_steps))
    if "infill" in names:
        from diffreason.tasks.infill.holes import parse_pair
        from diffreason.tasks.infill.search import Searcher

        lm = load_model(WEIGHTS / "code-small")
        searcher = Searcher(lm)
        code = parse_pair(*CODE)
        requests, _ = searcher.requests(code, 0, [[], []], [0, 1], searcher.lengths(code, 0, 64, None),
                                        single_line=True)
        paths.append(Path(f"code-small ×{len(requests)}", lm, requests,
                          steps or lm.sampler_config.max_denoising_steps))
    return paths


def _engine(path: Path, draws: str) -> Engine:
    """`draws`: reference, fast, or fast-whole (fast draws with the model's whole forward: `free_logits` off)."""
    config = path.lm.sampler_config.model_copy(update={
        "draws": draws.removesuffix("-whole"), "max_denoising_steps": path.steps,
        "confidence_threshold": NO_EARLY_STOP})
    return Engine(path.lm, config, max_batch_size=64, profile=True, free_logits=draws != "fast-whole")


def _timed(engine: Engine, requests) -> dict:
    wall, cpu = time.perf_counter(), time.process_time()
    results = engine.generate_batch(requests)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    s = engine.stats
    return dict(wall=wall, cpu=cpu, forward=s.forward, sampler=s.sampler, constraint=s.constraint, encode=s.encode,
                steps=s.steps, canvas_steps=s.canvas_steps, tokens=[r.raw_tokens for r in results])


def _products(path: Path) -> tuple[MatmulRecorder, int]:
    """The products of one fast-draws run of `path` (recorded: the same whatever the thread count), and its steps."""
    recorder = MatmulRecorder()
    engine = _engine(path, "fast")
    engine.forward_context = lambda: recorder
    engine.generate_batch(path.requests)
    return recorder, engine.stats.steps


def _utilisation(recorded: tuple[MatmulRecorder, int], forward: float) -> list[str]:
    """Row cells: the recorded products' GFLOP per step, and the time they take alone (replayed with the current
    thread count) against the step's `forward` seconds."""
    recorder, steps = recorded
    flops, alone = recorder.flops / steps, replay_seconds(recorder.products) / steps
    return [f"{flops / 1e9:.2f}", f"{1e3 * forward:.2f}", f"{flops / forward / 1e9:.1f}", f"{1e3 * alone:.2f}",
            f"{flops / alone / 1e9:.1f}", f"{100 * alone / forward:.0f} %"]


def _throughput(path: Path, models: dict) -> list[list[str]]:
    """Rows: the engine on `path`'s puzzles in float32 and bfloat16 (fast draws, early stop on), in model mode and in
    verified mode (`solve sudoku --mode verified`: the verifier's hook, which stops a grid at a solution), and
    `solve_exact`. `models`: the bfloat16 model, once loaded (kept across thread counts)."""
    from diffreason.tasks import sudoku

    rows = []
    puzzles = [[sudoku.token_digit(t) if t >= 0 else 0 for t in r.template.fixed.tolist()] for r in path.requests]
    for dtype in (torch.float32, torch.bfloat16):
        lm = path.lm if dtype == torch.float32 else models.get(dtype)
        if lm is None:
            lm = models[dtype] = load_model(WEIGHTS / "sudoku-base", dtype=dtype)
        engine = Engine(lm, lm.sampler_config.model_copy(update={"draws": "fast"}), max_batch_size=64)
        engine.generate_batch(path.requests[:2])  # warm-up
        for mode in sudoku.MODES:
            hook = sudoku.verified_hook(engine.sampler) if mode == "verified" else None
            wall, cpu = time.perf_counter(), time.process_time()
            results = engine.generate_batch(path.requests, step_hook=hook)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            solved = sum(sudoku.verify(p, sudoku.decode(r.raw_tokens)) for p, r in zip(puzzles, results))
            steps = sum(sum(r.steps) for r in results) / len(results)
            rows.append([f"engine, {str(dtype).removeprefix('torch.')}, {mode}", f"{solved} / {len(puzzles)}",
                         f"{steps:.2f}", f"{cpu:.2f}", f"{wall:.2f}", f"{len(puzzles) / cpu:.1f}"])
    wall, cpu = time.perf_counter(), time.process_time()
    solved = sum(sudoku.verify(p, (sudoku.solve_exact(p, limit=1)[0] or [None])[0]) for p in puzzles)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rows.append(["exact solver (solve_exact)", f"{solved} / {len(puzzles)}", "—", f"{cpu:.3f}", f"{wall:.3f}",
                 f"{len(puzzles) / cpu:.0f}"])
    return rows


def served_schemas() -> list[dict]:
    """16 schemas: SCHEMA's members and each subset of three or four of them, untitled."""
    from itertools import combinations

    names = list(SCHEMA["properties"])
    subsets = [c for k in (5, 4, 3) for c in combinations(names, k)]
    return [{"type": "object", "properties": {n: SCHEMA["properties"][n] for n in c}} for c in subsets]


def served_prompts() -> list[str]:
    """The served batch's 16 prompts, as the JSON model was trained on them ("an object with id, customer, ...")."""
    from diffreason.tasks.json_corpus import prompt_of

    return [prompt_of(schema) for schema in served_schemas()]


class RowPasses:
    """Counts the decoder's row-passes (canvases through the denoiser) while entered."""

    def __init__(self, lm):
        self.decoder, self.rows, self.handle = lm.model.model.decoder, 0, None

    def _count(self, module, args, kwargs) -> None:
        self.rows += kwargs["decoder_input_ids"].shape[0]

    def __enter__(self) -> "RowPasses":
        self.handle = self.decoder.register_forward_pre_hook(self._count, with_kwargs=True)
        return self

    def __exit__(self, *exc) -> None:
        self.handle.remove()


def _served(lm, repeats: int) -> tuple[list[dict], bool]:
    """The served batch (`served_prompts`, seed i for prompt i, 256 new tokens): per side the median wall and CPU
    seconds of `repeats` runs after a warm-up, sides alternated, and the decoder's row-passes; and whether the
    engine's reference tokens equal transformers' one request at a time."""
    tok, prompts, new = lm.tokenizer, served_prompts(), 2 * lm.canvas_length
    ids = [[tok.bos_token_id] + tok.encode(p, add_special_tokens=False) for p in prompts]

    def engine(draws):
        e = Engine(lm, lm.sampler_config.model_copy(update={"draws": draws}), max_batch_size=len(prompts))
        return lambda: [r.raw_tokens for r in e.generate_batch(
            [GenerationRequest(p, seed=i, max_new_tokens=new) for i, p in enumerate(prompts)])]

    def batched():
        width = max(map(len, ids))
        x = torch.tensor([[tok.pad_token_id] * (width - len(i)) + i for i in ids])
        mask = torch.tensor([[0] * (width - len(i)) + [1] * len(i) for i in ids])
        torch.manual_seed(0)
        with torch.inference_mode():
            lm.model.generate(x, attention_mask=mask, max_new_tokens=new)

    def one_by_one():
        return [_transformers_alone(lm, p, i, new) for i, p in enumerate(prompts)]

    sides = {"engine, reference draws": engine("reference"), "engine, fast draws": engine("fast"),
             "transformers, batched": batched, "transformers, one at a time": one_by_one}
    runs = {name: [] for name in sides}
    outputs = {}
    for name, run in sides.items():
        run()  # warm-up
    for _ in range(repeats):
        for name, run in sides.items():
            with RowPasses(lm) as passes:
                wall, cpu = time.perf_counter(), time.process_time()
                outputs[name] = run()
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            runs[name].append(dict(wall=wall, cpu=cpu, rows=passes.rows))
    rows = [dict(side=name, **{k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu", "rows")})
            for name, rs in runs.items()]
    pad = tok.pad_token_id  # (transformers stops a request at its EOS canvas; the engine pads it to the batch's)
    same = all(ours[:len(theirs)] == theirs and set(ours[len(theirs):]) <= {pad} for ours, theirs in zip(
        outputs["engine, reference draws"], outputs["transformers, one at a time"]))
    return rows, same


def _transformers_alone(lm, prompt: str, seed: int, new: int, **generation) -> list[int]:
    """The tokens transformers' `generate` gives one request (under `torch.manual_seed(seed)`, as parity has it)."""
    ids = [lm.tokenizer.bos_token_id] + lm.tokenizer.encode(prompt, add_special_tokens=False)
    torch.manual_seed(seed)
    with torch.inference_mode():
        out = lm.model.generate(torch.tensor([ids]), max_new_tokens=new, **generation)
    return out.sequences[0, len(ids):].tolist()


def _transformers_tokens(path: Path) -> list[int]:
    request = path.requests[0]
    return _transformers_alone(path.lm, request.prompt, request.seed, request.max_new_tokens,
                               max_denoising_steps=path.steps, confidence_threshold=NO_EARLY_STOP)


PATHS = ("unconstrained", "sudoku-1", "sudoku-64", "json", "json-16", "infill")
DRAWS = ("reference", "fast-whole", "fast")


def _options(paths: str, draws: str, threads: str, steps: int | None, repeats: int, preset: str = "small") -> tuple:
    """The lists of paths, draws and thread counts asked for, or one clear error (exit 2) naming the bad value."""
    def listed(text: str, option: str, known: tuple) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        unknown = [n for n in names if n not in known]
        if unknown or not names:
            raise typer.BadParameter(f"{', '.join(map(repr, unknown)) or 'nothing'} (choose from {', '.join(known)})",
                                     param_hint=option)
        return names

    names, draw_list = listed(paths, "--paths", PATHS), listed(draws, "--draws", DRAWS)
    try:
        thread_list = [int(t) for t in threads.split(",") if t.strip()]
    except ValueError:
        thread_list = []
    if not thread_list or min(thread_list) < 1:
        raise typer.BadParameter(f"{threads!r}: comma-separated counts of at least 1", param_hint="--threads")
    if repeats < 1:
        raise typer.BadParameter(f"{repeats}: at least 1 timed run", param_hint="--repeats")
    if steps is not None and steps < 1:
        raise typer.BadParameter(f"{steps}: at least 1 step", param_hint="--steps")
    from diffreason.model import PRESETS

    if preset not in PRESETS:
        raise typer.BadParameter(f"{preset!r} (choose from {', '.join(PRESETS)})", param_hint="--preset")
    return names, draw_list, thread_list


@app.command()
def main(
    paths: str = typer.Option(",".join(PATHS), help="paths to measure"),
    draws: str = typer.Option("reference,fast-whole,fast", help="draws to compare (each path runs every one, "
                              "alternated); fast-whole: fast draws with the model's whole forward"),
    threads: str = typer.Option("1,2", help="torch thread counts to measure"),
    steps: int = typer.Option(None, help="denoising steps per canvas (default: each checkpoint's own)"),
    repeats: int = typer.Option(2, help="timed runs of each side (median reported), after one warm-up"),
    preset: str = typer.Option("small", help="model preset of the unconstrained path"),
    served: bool = typer.Option(True, help="also time a batch of 16 JSON prompts as served (early stop on) against "
                                "transformers' generate, batched and one at a time"),
) -> None:
    console = Console(width=160)
    names, draw_list, thread_list = _options(paths, draws, threads, steps, repeats, preset)
    console.print("Command: python -m diffreason.evals.bench_engine " + " ".join(sys.argv[1:]))
    table = Table(title="diffreason engine: time per denoising step, fixed steps per canvas (early stop off), "
                  f"float32, cpu; median of {repeats} runs")
    for column in ("path", "draws", "threads", "steps (canvas-steps)", "wall ms", "CPU ms", "forward ms",
                   "sampler ms", "constraint ms", "sampler + constraint", "wall ms / canvas-step", "end to end s"):
        table.add_column(column, justify="left" if column in ("path", "draws") else "right")
    util = Table(title="GEMM utilisation of a denoising step (fast draws): the step's FLOP/s against the rate of the "
                 "same products run alone (diffreason.evals.gemm_rate)")
    for column in ("path", "threads", "GFLOP / step", "forward ms / step", "step GFLOP/s", "GEMMs alone ms / step",
                   "GEMM GFLOP/s", "utilisation"):
        util.add_column(column, justify="left" if column == "path" else "right")
    throughput = Table(title="Sudoku throughput: the 64 puzzles solved as `solve sudoku` does (fast draws, the "
                       "checkpoint's schedule, early stop on; model mode, and verified mode, which stops a grid at a "
                       "solution), against the project's exact solver")
    for column in ("solver", "threads", "solved", "steps / puzzle", "CPU s", "wall s", "puzzles / CPU-second"):
        throughput.add_column(column, justify="left" if column == "solver" else "right")
    served_table = Table(title="Requests as served: 16 JSON prompts (json-small), unconstrained, early stop on, two "
                         f"canvases at most; median of {repeats} runs")
    for column in ("side", "threads", "wall s", "CPU s", "decoder row-passes", "speed-up (wall) over transformers' "
                   "faster side"):
        served_table.add_column(column, justify="left" if column == "side" else "right")
    identical, same_free = [], []
    models: dict = {}  # (the throughput's bfloat16 model)
    for path in _paths(names, steps, preset):
        engines = {d: _engine(path, d) for d in draw_list}
        recorded = None  # (the products of a fast-draws run, recorded once per path)
        for n_threads in thread_list:
            torch.set_num_threads(n_threads)
            runs = {d: [] for d in draw_list}
            for d in draw_list:
                _timed(engines[d], path.requests)  # warm-up
            for _ in range(repeats):
                for d in draw_list:  # sides alternated
                    runs[d].append(_timed(engines[d], path.requests))
            work = {(r["steps"], r["canvas_steps"]) for d in draw_list for r in runs[d]}
            if len(work) != 1:
                raise typer.BadParameter(f"{path.name}: unequal work across runs {work}")
            if "fast" in draw_list and "fast-whole" in draw_list:
                same_free.append(runs["fast"][-1]["tokens"] == runs["fast-whole"][-1]["tokens"])
            if "fast" in draw_list:
                forward = statistics.median(r["forward"] for r in runs["fast"]) / runs["fast"][0]["steps"]
                recorded = recorded or _products(path)
                util.add_row(path.name, str(n_threads), *_utilisation(recorded, forward))
            if path.name == "sudoku-base ×64":
                for row in _throughput(path, models):
                    throughput.add_row(row[0], str(n_threads), *row[1:])
            for d in draw_list:
                med = {k: statistics.median(r[k] for r in runs[d])
                       for k in ("wall", "cpu", "forward", "sampler", "constraint")}
                n, cs = runs[d][0]["steps"], runs[d][0]["canvas_steps"]
                share = (med["sampler"] + med["constraint"]) / (med["forward"] + med["sampler"] + med["constraint"])
                table.add_row(path.name, d, str(n_threads), f"{n} ({cs})", f"{1e3 * med['wall'] / n:.2f}",
                              f"{1e3 * med['cpu'] / n:.2f}", f"{1e3 * med['forward'] / n:.2f}",
                              f"{1e3 * med['sampler'] / n:.3f}", f"{1e3 * med['constraint'] / n:.3f}",
                              f"{100 * share:.1f} %", f"{1e3 * med['wall'] / cs:.3f}", f"{med['wall']:.2f}")
            if path.name.startswith("unconstrained") and "reference" in draw_list:
                _transformers_tokens(path)  # warm-up
                t = time.perf_counter()
                ref = _transformers_tokens(path)
                t = time.perf_counter() - t
                ours = runs["reference"][-1]
                identical.append(ref == ours["tokens"][0])
                table.add_row(path.name, "transformers", str(n_threads), f"{path.steps} ({path.steps})",
                              f"{1e3 * t / path.steps:.2f}", "", "", "", "", "", f"{1e3 * t / path.steps:.3f}",
                              f"{t:.2f}")
        table.add_section()
    if served:
        lm = load_model(WEIGHTS / "json-small")
        for n_threads in thread_list:
            torch.set_num_threads(n_threads)
            rows, same = _served(lm, repeats)
            identical.append(same)
            best = min(r["wall"] for r in rows if r["side"].startswith("transformers"))
            for r in rows:
                served_table.add_row(r["side"], str(n_threads), f"{r['wall']:.2f}", f"{r['cpu']:.2f}",
                                     f"{r['rows']:.0f}", f"{best / r['wall']:.2f}x")
    if table.row_count:
        console.print(table)
    if util.row_count:
        console.print(util)
        console.print("Products: linear layers, the MoE experts' grouped products, attention (4·b·h·q·k·d FLOPs) and "
                      "the vocabulary products, recorded over one run; run alone on random tensors of the same "
                      "shapes, each as often as it ran. Utilisation = their time / the step's forward time.")
    if throughput.row_count:
        console.print(throughput)
    if served_table.row_count:
        console.print(served_table)
        console.print("As served: every request runs until its canvases stop (or reach EOS). The engine takes a "
                      "row out of the batch when it stops; transformers' batched generate runs every row until the "
                      "last stops. Reference tokens: each request's, in the engine's batch, equal transformers' "
                      "for that request alone (checked below).")
    console.print("Per step: wall and CPU time of the whole run, its model forwards, sampler steps and constraint "
                  "work (per canvas: the batch's constraint, first canvas and commit; spread over its steps). Share: "
                  "(sampler + constraint) / (forward + sampler + constraint). Sudoku, JSON and code requests as "
                  "`solve sudoku`, the JSON eval and `diffreason infill` make them; the unconstrained model's "
                  "embeddings sharpened (x30) so its steps accept positions as a trained model's do.")
    if same_free:
        console.print("fast draws: tokens identical with the head at free positions and with the whole forward: "
                      f"{'yes' if all(same_free) else 'NO'}")
    if identical:
        console.print("reference draws: tokens identical to transformers generate: "
                      f"{'yes' if all(identical) else 'NO'}")
    if not all(identical) or not all(same_free):
        raise typer.Exit(1)


if __name__ == "__main__":
    app()
