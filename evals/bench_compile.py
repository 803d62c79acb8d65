"""Compile-time benchmark: a fixed sample of jsonschemabench schemas compiled from scratch, in rounds.

    python -m diffreason.evals.bench_compile --schemas ../shared/jsonschemabench/schemas

The sample is `--per-collection` schemas of each collection (`random.Random(seed)` over the sorted file names). Each
round clears the compile caches and compiles the whole sample in this process, so later rounds pay no imports or
one-time setup (what a long-running server amortises away); the caches still fill within a round, as across a
server's first requests. Reported: total CPU time / total canvas positions of the schemas that compile, over the
whole sample and per collection (large schemas weigh most in the first; a collection of small ones pays more per
position). On a shared machine take the best round.
"""

from __future__ import annotations

import gc
import json
import random
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(add_completion=False)


@app.command()
def main(
    schemas: Path = typer.Option(Path("../shared/jsonschemabench/schemas"), help="jsonschemabench schema directory"),
    collections: str = typer.Option("Github_easy,Glaiveai2K,Github_medium,Github_hard"),
    per_collection: int = typer.Option(60, help="schemas per collection"),
    rounds: int = typer.Option(3),
    seed: int = typer.Option(0),
    timeout: float = typer.Option(20.0, help="CPU seconds before a schema's compile counts as failed"),
    tokenizer_dir: Path | None = typer.Option(None, "--tokenizer", help="a tokenizer directory (a model's, e.g. "
                                              "a 262k-token Gemma one); default: the eval's 492-token BPE"),
    bpe_size: int | None = typer.Option(None, help="instead, a byte-level BPE of this many tokens trained on every "
                                        "schema in --schemas (how compile time grows with the vocabulary)"),
) -> None:
    from diffreason.errors import DiffreasonError
    from diffreason.tasks.json_corpus import collection_of
    from diffreason.tasks.json_schema import clear_compile_caches, compile_schema
    from diffreason.tokenizer import train_byte_bpe

    console = Console(width=160)
    files = sorted(schemas.glob("*.json"))
    if not files:
        console.print(f"[red]no schema files in {str(schemas)!r}[/red]")
        raise typer.Exit(2)
    sample = []
    for name in collections.split(","):
        mine = [f for f in files if collection_of(f.name) == name]
        if not mine:
            console.print(f"[red]no schemas of collection {name!r} in {str(schemas)!r}[/red]")
            raise typer.Exit(2)
        sample += random.Random(seed).sample(mine, min(per_collection, len(mine)))
    loaded = [(collection_of(f.name), json.loads(f.read_text())["schema"]) for f in sample]
    if bpe_size is not None:
        if bpe_size < 300:
            console.print("[red]--bpe-size must be at least 300 (the bytes and special tokens)[/red]")
            raise typer.Exit(2)
        tokenizer = train_byte_bpe((f.read_text() for f in files), vocab_size=bpe_size)
    elif tokenizer_dir is None:
        tokenizer = train_byte_bpe()  # the eval's tokenizer without --model
    else:
        from transformers import PreTrainedTokenizerFast

        try:
            tokenizer = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir, local_files_only=True)
        except Exception as exc:  # (transformers raises several types for a directory it cannot read)
            console.print(f"[red]cannot load a tokenizer from {str(tokenizer_dir)!r}: {str(exc).splitlines()[0]}[/red]")
            raise typer.Exit(2)
        if tokenizer.pad_token_id is None or tokenizer.eos_token_id is None:
            console.print(f"[red]the tokenizer in {str(tokenizer_dir)!r} has no pad or no eos token[/red]")
            raise typer.Exit(2)
    names = collections.split(",")
    table = Table("round", "compiled", "positions", "CPU s", "µs / position", *(f"{n} µs / pos" for n in names))
    best, best_of = None, dict.fromkeys(names, float("inf"))
    gc.collect()
    gc.freeze()  # the imports' objects out of the collector's way, as a server does after start-up (see json_eval)
    for r in range(rounds):
        clear_compile_caches()
        gc.collect()  # the previous round's automata, freed now, not inside this round's timing
        cpu_of, positions_of = dict.fromkeys(names, 0.0), dict.fromkeys(names, 0)
        compiled = 0
        for name, schema in loaded:
            start = time.thread_time()  # (this thread: json_eval says why)
            try:
                template = compile_schema(schema, tokenizer, cpu_seconds=timeout).template
            except DiffreasonError:
                continue
            cpu_of[name] += time.thread_time() - start
            positions_of[name] += len(template)
            compiled += 1
        cpu, positions = sum(cpu_of.values()), sum(positions_of.values())
        per = 1e6 * cpu / max(positions, 1)
        best = per if best is None else min(best, per)
        # a collection of many small schemas pays more per position than one of a few large ones: each apart
        each = [1e6 * cpu_of[n] / max(positions_of[n], 1) for n in names]
        best_of = {n: min(best_of[n], x) for n, x in zip(names, each)}
        table.add_row(str(r + 1) + (" (cold)" if r == 0 else ""), str(compiled), str(positions), f"{cpu:.2f}", f"{per:.1f}",
                      *(f"{x:.1f}" for x in each))
    console.print(table)
    console.print(f"{len(sample)} schemas ({per_collection} per collection: {collections}), {len(tokenizer)}-token "
                  f"vocabulary; best round: {best:.1f} µs per position (all positions); per collection, best round: "
                  + ", ".join(f"{n} {x:.1f}" for n, x in best_of.items()), soft_wrap=True)


if __name__ == "__main__":
    app()
