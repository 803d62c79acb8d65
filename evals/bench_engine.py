"""Engine benchmark: per-step time split (model forward / sampler / constraint) of diffreason on the paths users run —
unconstrained generation (a `small` preset model, against transformers' `model.generate`, tokens checked identical),
Sudoku (the shipped sudoku-base, batch 1 and 64), JSON (the shipped JSON model, a schema's template) and code infill
(the shipped code model, a single-line hole's search: 2 samples × the slot lengths) — with reference draws, fast
draws over the model's whole forward (`fast-whole`) and fast draws with the head and self-conditioning at free
positions only (`fast`, the default; tokens checked identical to `fast-whole`), one thread and two, wall and CPU time.

Equal work on both sides: every run does a fixed number of denoising steps per canvas (early stop off) over the same
canvases (same requests, seeds and templates), and every figure is per canvas-step as well as per step.

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
    if "json" in names:
        from diffreason.structured import constraint_template
        from diffreason.tasks.json_corpus import prompt_of

        lm = load_model(WEIGHTS / "json-small")
        template, _ = constraint_template(lm.tokenizer, lm.canvas_length, json_schema=SCHEMA)
        paths.append(Path("json-small", lm,
                          [GenerationRequest(prompt_of(SCHEMA), template=template, seed=0)],
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


def _transformers_tokens(path: Path) -> list[int]:
    lm, request = path.lm, path.requests[0]
    ids = [lm.tokenizer.bos_token_id] + lm.tokenizer.encode(request.prompt, add_special_tokens=False)
    torch.manual_seed(request.seed)
    with torch.inference_mode():
        out = lm.model.generate(torch.tensor([ids]), max_new_tokens=request.max_new_tokens,
                                max_denoising_steps=path.steps, confidence_threshold=NO_EARLY_STOP)
    return out.sequences[0, len(ids):].tolist()


@app.command()
def main(
    paths: str = typer.Option("unconstrained,sudoku-1,sudoku-64,json,infill", help="paths to measure"),
    draws: str = typer.Option("reference,fast-whole,fast", help="draws to compare (each path runs every one, "
                              "alternated); fast-whole: fast draws with the model's whole forward"),
    threads: str = typer.Option("1,2", help="torch thread counts to measure"),
    steps: int = typer.Option(None, help="denoising steps per canvas (default: each checkpoint's own)"),
    repeats: int = typer.Option(2, help="timed runs of each side (median reported), after one warm-up"),
    preset: str = typer.Option("small", help="model preset of the unconstrained path"),
) -> None:
    console = Console(width=160)
    names = [n.strip() for n in paths.split(",") if n.strip()]
    draw_list = [d.strip() for d in draws.split(",") if d.strip()]
    thread_list = [int(t) for t in threads.split(",") if t.strip()]
    console.print("Command: python -m diffreason.evals.bench_engine " + " ".join(sys.argv[1:]))
    table = Table(title="diffreason engine: time per denoising step, fixed steps per canvas (early stop off), "
                  f"float32, cpu; median of {repeats} runs")
    for column in ("path", "draws", "threads", "steps (canvas-steps)", "wall ms", "CPU ms", "forward ms",
                   "sampler ms", "constraint ms", "sampler + constraint", "wall ms / canvas-step", "end to end s"):
        table.add_column(column, justify="left" if column in ("path", "draws") else "right")
    identical, same_free = [], []
    for path in _paths(names, steps, preset):
        engines = {d: _engine(path, d) for d in draw_list}
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
    console.print(table)
    console.print("Per step: wall and CPU time of the whole run, its model forwards, sampler steps and constraint "
                  "work (per canvas: the batch's constraint, first canvas and commit; spread over its steps). Share: "
                  "(sampler + constraint) / (forward + sampler + constraint). Sudoku, JSON and code requests as "
                  "`solve sudoku`, the JSON eval and `diffreason infill` make them; the unconstrained model's embeddings sharpened (x30) so "
                  "its steps accept positions as a trained model's do.")
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
