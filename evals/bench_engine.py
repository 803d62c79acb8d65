"""Engine benchmark: per-step time split (model forward vs sampler + constraints) and end-to-end time of diffreason
against transformers' `model.generate` on the same checkpoint, prompt and seed, checking the tokens are identical.

    python -m diffreason.evals.bench_engine --preset small --repeats 3
"""

from __future__ import annotations

import statistics
import time

import torch
import typer
from rich.console import Console
from rich.table import Table

from diffreason import CanvasTemplate, Engine, SamplerConfig, build_model, load_model

app = typer.Typer(add_completion=False)


@app.command()
def main(
    preset: str = typer.Option("small", help="model preset to build (ignored with --model)"),
    model: str = typer.Option(None, help="checkpoint directory instead of a preset"),
    prompt: str = typer.Option("Write a short story about a robot learning to paint.", help="prompt"),
    seed: int = typer.Option(0),
    max_new_tokens: int = typer.Option(None, help="default: two canvases"),
    repeats: int = typer.Option(3, help="timed runs of each side (median reported)"),
    confident: bool = typer.Option(True, help="scale the random embeddings so canvases converge (early stop happens)"),
    threads: int = typer.Option(0, help="torch threads (0: leave as is)"),
) -> None:
    console = Console(width=170)
    if threads:
        torch.set_num_threads(threads)
    lm = load_model(model) if model else build_model(preset, seed=0)
    if confident and not model:
        # A random model is maximally unsure; sharpen it so the run exercises early stopping like a trained one.
        with torch.no_grad():
            lm.model.model.decoder.embed_tokens.weight.mul_(30)
    n_new = max_new_tokens or 2 * lm.canvas_length
    ids = [lm.tokenizer.bos_token_id] + lm.tokenizer.encode(prompt, add_special_tokens=False)
    input_ids = torch.tensor([ids], device=lm.device)
    n_params = sum(p.numel() for p in lm.model.parameters())
    engines = {
        draws: Engine(lm, lm.sampler_config.model_copy(update={"draws": draws}), profile=True)
        for draws in ("reference", "fast")
    }
    # The worst case for the constraint path: every position restricted to half the vocabulary.
    template = CanvasTemplate.from_positions(lm.vocab_size, [list(range(3, lm.vocab_size, 2))] * n_new)

    def run_reference():
        torch.manual_seed(seed)
        with torch.inference_mode():
            out = lm.model.generate(input_ids, max_new_tokens=n_new)
        return out.sequences[0, len(ids) :].tolist()

    def timed(fn):
        t = time.perf_counter()
        out = fn()
        return out, time.perf_counter() - t

    runs = {
        "transformers generate": run_reference,
        "diffreason, reference draws": lambda: engines["reference"].generate(prompt, seed=seed, max_new_tokens=n_new),
        "diffreason, fast draws": lambda: engines["fast"].generate(prompt, seed=seed, max_new_tokens=n_new),
        "diffreason, fast draws, all positions constrained": lambda: engines["fast"].generate(
            prompt, seed=seed, max_new_tokens=n_new, template=template
        ),
    }
    times = {name: [] for name in runs}
    splits = {name: [] for name in runs}
    outputs = {}
    for name, fn in runs.items():
        fn()  # warm-up
    for _ in range(repeats):
        for name, fn in runs.items():
            outputs[name], t = timed(fn)
            times[name].append(t)
            if name.startswith("diffreason"):
                engine = engines["reference" if "reference" in name else "fast"]
                splits[name].append(engine.stats)
    ref_tokens = outputs["transformers generate"]
    identical = ref_tokens == outputs["diffreason, reference draws"].raw_tokens
    base = statistics.median(times["transformers generate"])

    table = Table(title=f"diffreason vs transformers generate — preset {preset if not model else model}, "
                  f"{n_params / 1e6:.2f}M params, vocab {lm.vocab_size}, canvas {lm.canvas_length}, "
                  f"{n_new} new tokens, {torch.get_num_threads()} threads, device {lm.device}")
    table.add_column("run")
    table.add_column("end to end (s)", justify="right")
    table.add_column("vs transformers", justify="right")
    table.add_column("forward / step (ms)", justify="right")
    table.add_column("sampler / step (ms)", justify="right")
    table.add_column("sampler share", justify="right")
    table.add_column("steps per canvas", justify="right")
    for name in runs:
        t = statistics.median(times[name])
        row = [name, f"{t:.3f}", f"{base / t:.2f}x"]
        if splits[name]:
            fwd = statistics.median(s.forward / max(1, s.steps) for s in splits[name]) * 1e3
            smp = statistics.median(s.sampler / max(1, s.steps) for s in splits[name]) * 1e3
            row += [f"{fwd:.2f}", f"{smp:.2f}", f"{100 * smp / (fwd + smp):.1f} %", str(outputs[name].steps)]
        else:
            row += ["", "", "", ""]
        table.add_row(*row)
    console.print(table)
    console.print(f"reference draws: tokens identical to transformers generate: {'yes' if identical else 'NO'}")
    if not identical:
        raise typer.Exit(1)


if __name__ == "__main__":
    app()
