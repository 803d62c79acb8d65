"""Parse rates of infill candidates: what the hole's template buys, on the same tasks, seeds and slot lengths.

    python -m diffreason.evals.infill_parse_rates --limit 24 --samples 2 [--sets Single] [--free]

For each task of the HumanEval-infilling sets (`--limit` spread over each set), runs the hole-length search with K
seeds (the same as `diffreason eval infill`) and counts the candidates whose filled code parses: every candidate (all
slot lengths), the one model mode keeps per seed (its best-scoring length), and the tasks where some candidate parses
(what verified mode can return). `--free` also runs the slot left free (no template) on the same seeds. Prints one
line per set and side; `--out FILE` keeps every candidate as JSON.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

app = typer.Typer(add_completion=False)


def _rates(rows: list[dict]) -> str:
    kept = {(r["task"], r["seed"]): r for r in rows if r["picked"]}
    some: dict = {}
    for r in rows:
        some[r["task"]] = some.get(r["task"], False) or r["parses"]

    def pct(n: int, d: int) -> str:
        return f"{n}/{d} ({100 * n / max(d, 1):.1f} %)"

    return (f"candidates {pct(sum(r['parses'] for r in rows), len(rows))}; model mode "
            f"{pct(sum(r['parses'] for r in kept.values()), len(kept))}; tasks with a parsing candidate "
            f"{pct(sum(some.values()), len(some))}")


@app.command()
def main(
    limit: int = typer.Option(24, help="tasks per set, spread evenly over it"),
    samples: int = typer.Option(2, help="K seeds per task (0 .. K-1)"),
    sets: str = typer.Option("", help="only sets whose name starts with this (e.g. Single)"),
    free: bool = typer.Option(False, help="also the free slot (no template) on the same seeds"),
    max_hole_tokens: int = typer.Option(64),
    threads: int = typer.Option(1),
    out: Path = typer.Option(None, help="write every candidate here (JSON)"),
) -> None:
    import torch

    from diffreason.evals.infill_eval import load_sets
    from diffreason.infilling import code_model_path
    from diffreason.model import load_model
    from diffreason.tasks.infill.holes import parse_pair
    from diffreason.tasks.infill.search import Searcher, pick_length

    torch.set_num_threads(threads)
    lm = load_model(code_model_path())
    sides = {"template": Searcher(lm, constrain=True)}
    if free:
        sides["free"] = Searcher(lm, constrain=False)
    rows: list[dict] = []
    t0 = time.perf_counter()
    for name, (_, tasks) in load_sets(None, limit=limit).items():
        if not name.startswith(sets):
            continue
        for task in tasks:
            code = parse_pair(task.prompt, task.suffix)
            for side, searcher in sides.items():
                lens = searcher.lengths(code, 0, max_hole_tokens, None)
                found = searcher.search(code, 0, [[] for _ in range(samples)], list(range(samples)), lens,
                                        single_line=name.startswith("Single"))
                picked = [pick_length(found.by_sample[j], False) for j in range(samples)]  # (model mode's)
                rows += [dict(set=name, side=side, task=task.task_id, seed=j, length=c.length, text=c.text,
                              parses=bool(c.parses), score=c.score, picked=c is picked[j])
                         for j in range(samples) for c in found.by_sample[j]]
        for side in sides:
            print(f"{name} ({side}, {len(tasks)} tasks × {samples} seeds): "
                  + _rates([r for r in rows if r["set"] == name and r["side"] == side]), flush=True)
    print(f"{time.perf_counter() - t0:.0f} s")
    if out is not None:
        out.write_text(json.dumps(rows))


if __name__ == "__main__":
    app()
