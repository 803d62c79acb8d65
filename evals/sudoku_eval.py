"""Sudoku eval: solve rate against denoising steps, per tier, in both modes, against the classical solver.

Fresh puzzles per tier from the deterministic generator (seeds that training never uses: training draws random
maskings of its own grid pool, never this generator). For each mode (`model`: the plain sampler over the template;
`verified`: task-aware re-noising of conflicting cells) and tier:

- solve rate (the verifier decides) under the checkpoint's own schedule with early stop, mean / median / p90 steps
  used, puzzles/s;
- solve rate at fixed budgets (12 / 24 / 48 steps, each a run whose schedule spans that budget);
- the classical solver's time per puzzle as a reference line.

Writes `sudoku.json`, `sudoku.md` and `sudoku.png` (solve rate vs steps per tier) into the report directory.
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from pathlib import Path

import torch

from diffreason.tasks import sudoku


def _display_path(path) -> str:
    if path is None:
        return "in-memory"
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _percentile(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    k = min(len(values) - 1, max(0, round(q * (len(values) - 1))))
    return values[k]


def run_eval(
    lm,
    tiers=("easy", "medium", "hard", "extreme"),
    n: int = 100,
    modes=("model", "verified"),
    budgets=(12, 24, 48),
    seed: int = 2026,
    progress=None,
    remote=None,
) -> dict:
    """`remote`: a `diffreason.client.RemoteEngine` whose servers solve instead of `lm` (then None): model mode on
    the servers' own schedule, no fixed budgets; the classical solver still runs here."""
    if not tiers or not modes:  # (the report's table and plot need one of each)
        raise sudoku.SudokuError(f"the eval needs at least one tier and one mode, got tiers {list(tiers)} and modes "
                                 f"{list(modes)}")
    if remote is not None:
        if list(modes) != ["model"] or budgets:
            raise sudoku.SudokuError("servers run the plain sampler on their own schedule: --modes model and "
                                     "--budgets '' with --endpoint")
        infos = remote.endpoints.check()
        server_steps = {info.get("max_denoising_steps") for info in infos}
        report = {
            "model": ", ".join(f"{info.get('model_path', '?')} at {url}"
                               for info, url in zip(infos, remote.endpoints.urls)),
            "parameters": None,
            "sampler": {},
            "machine": f"{len(infos)} server(s), {remote.endpoints.concurrency} requests in flight each",
            "seeding": "; ".join(
                f"{url}: " + ("sampling_seed (diffreason serve: the local engine's tokens)"
                              if remote.endpoints.seeded(url) else "a request id made from the seed (SGLang: "
                              "reproducible on that server, not the local engine's tokens)")
                for url in remote.endpoints.urls),
            # a server that does not say (SGLang) leaves the schedule to be read off the longest run
            "own": server_steps.pop() if len(server_steps) == 1 and None not in server_steps else None,
        }
    else:
        report = {
            "model": _display_path(lm.path),
            "parameters": sum(p.numel() for p in lm.model.parameters()),
            "sampler": lm.sampler_config.model_dump(exclude={"max_denoising_steps"}),
            "machine": f"{platform.machine()}, {torch.get_num_threads()} threads, {lm.device}",
            "own": lm.sampler_config.max_denoising_steps,  # the checkpoint's own schedule: the headline run
        }
    report.update({"n_per_tier": n, "budgets": list(budgets), "seed": seed, "tiers": {}})
    own = report.pop("own")
    for tier in tiers:
        puzzles = sudoku.generate_set(tier, n, seed=seed)
        t = time.perf_counter()
        for p in puzzles:
            sudoku.solve_exact(p.puzzle, limit=1)
        classical = (time.perf_counter() - t) / n
        entry = {
            "givens_mean": statistics.mean(p.givens for p in puzzles),
            "search_guesses_mean": statistics.mean(p.guesses for p in puzzles),
            "classical_seconds_per_puzzle": classical,
            "modes": {},
        }
        for mode in modes:
            by_budget = {}
            for budget in sorted(set(budgets) | {own}) if remote is None else [own]:
                t = time.perf_counter()
                results = sudoku.solve(lm, [p.puzzle for p in puzzles], mode=mode, seed=seed,
                                       max_steps=budget if remote is None else None, engine=remote)
                seconds = time.perf_counter() - t
                by_budget[budget] = (results, seconds)
                if progress:
                    progress(f"{tier}/{mode}/{budget or 'server'}")
            results, seconds = by_budget[own]
            if own is None:  # (a server that does not report its schedule)
                own = max(r.steps for r in results)
            steps = [r.steps for r in results]
            solved_steps = [r.steps for r in results if r.solved]
            unsolved_steps = [r.steps for r in results if not r.solved]
            entry["modes"][mode] = {
                "solve_rate": sum(r.solved for r in results) / n,
                # how the misses end: still unsure when the budget ran out, or stopped early on a wrong canvas
                "unsolved_ran_out": sum(1 for s in unsolved_steps if s >= own) / n,
                "unsolved_stopped": sum(1 for s in unsolved_steps if s < own) / n,
                "steps_mean": statistics.mean(steps),
                "steps_median": statistics.median(steps),
                "steps_p90": _percentile(steps, 0.9),
                "puzzles_per_second": n / seconds,
                "solve_rate_at_budget": {str(b): sum(r.solved for r in by_budget[b][0]) / n for b in sorted(budgets)},
                # cumulative: fraction solved within k steps in the headline (early-stop) run
                "solved_within": [sum(1 for s in solved_steps if s <= k) / n for k in range(1, own + 1)],
            }
        report["tiers"][tier] = entry
    report["budget"] = own
    return report


def style_solve_rate_axes(ax, xlabel: str, title: str) -> None:
    """The look every Sudoku plot shares: solved (%) from 0 to 100 against steps."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("solved (%)")
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def write_report(report: dict, out_dir: str | Path, command: str) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {**report, "command": command}
    json_path = out_dir / "sudoku.json"
    json_path.write_text(json.dumps(report, indent=2))

    budgets = report["budgets"]
    own = report["budget"]
    lines = [
        "# Sudoku eval",
        "",
        f"Command: `{command}`  ",
        f"Model: `{report['model']}`"
        + (f" ({report['parameters'] / 1e6:.2f}M parameters)" if report.get("parameters") else " (served)")
        + f"; {report['n_per_tier']} fresh puzzles per tier (generator seed {report['seed']}); {report['machine']}.",
        "",
        ("Sampler (the checkpoint's generation_config): "
         + ", ".join(f"{k} {v}" for k, v in report.get("sampler", {}).items()) + "."
         if report.get("sampler") else f"Sampler: the servers' own. Seeds: {report.get('seeding', 'unknown')}."),
        "",
        "`model` = the plain renoise sampler over the template; `verified` = task-aware: cells whose argmax breaks a "
        "row/column/box constraint are re-noised each step. `solved` and the step columns: early stop within the "
        f"checkpoint's own {own}-step schedule; the budget columns (@) are separate runs whose schedule spans that "
        "budget. Unsolved puzzles either ran out of steps (the sampler never became sure) or stopped early on a "
        "wrong canvas.",
        "",
        "| tier | givens | mode | solved | "
        + "".join(f"@{b} | " for b in budgets)
        + "unsolved: out of steps / stopped | mean steps | median | p90 | puzzles/s | classical solver |",
        "|---|---|---|---|" + "---|" * len(budgets) + "---|---|---|---|---|---|",
    ]
    for tier, entry in report["tiers"].items():
        for mode, m in entry["modes"].items():
            lines.append(
                f"| {tier} | {entry['givens_mean']:.1f} | {mode} | {100 * m['solve_rate']:.1f} % | "
                + "".join(f"{100 * m['solve_rate_at_budget'][str(b)]:.1f} % | " for b in budgets)
                + f"{100 * m['unsolved_ran_out']:.1f} / {100 * m['unsolved_stopped']:.1f} %"
                + f" | {m['steps_mean']:.1f} | {m['steps_median']:.0f} | {m['steps_p90']:.0f} | "
                f"{m['puzzles_per_second']:.1f} | {1e3 * entry['classical_seconds_per_puzzle']:.1f} ms |"
            )
    lines += ["", "![solve rate vs steps](sudoku.png)", ""]
    md_path = out_dir / "sudoku.md"
    md_path.write_text("\n".join(lines))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = sorted({m for e in report["tiers"].values() for m in e["modes"]})
    fig, axes = plt.subplots(1, len(modes), figsize=(6 * len(modes), 4.2), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        for tier, entry in report["tiers"].items():
            m = entry["modes"].get(mode)
            if not m:
                continue
            ks = list(range(1, len(m["solved_within"]) + 1))
            (line,) = ax.plot(ks, [100 * v for v in m["solved_within"]], label=f"{tier} (early stop)")
            ax.scatter(budgets, [100 * m["solve_rate_at_budget"][str(b)] for b in budgets], color=line.get_color(),
                       marker="o", s=25)
        style_solve_rate_axes(ax, "denoising steps", f"mode: {mode}  (dots: fixed budgets)")
    fig.tight_layout()
    png_path = out_dir / "sudoku.png"
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return [json_path, md_path, png_path]
