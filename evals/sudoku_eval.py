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



SIZES = ("hidden_size", "num_hidden_layers", "num_experts", "vocab_size")


def _sizes(config) -> dict:
    """The sizes a baseline must share with the diffusion model to be one "of equal size"."""
    return {k: getattr(config, k, None) for k in SIZES}


def _baseline_sizes(report: dict) -> str:
    """What the report can say of the baseline's sizes against the model's: the same, or where they differ."""
    ours, theirs = report.get("sizes"), report["baseline"].get("sizes")
    if not ours or not theirs:
        return "sizes not compared"
    if ours == theirs:
        return ("the diffusion model's width, depth, experts and vocabulary, without its self-conditioning block and "
                "with a value projection of its own in the full-attention layers, which the diffusion model shares "
                "with its keys")
    return "not the diffusion model's sizes: " + ", ".join(f"{k} {theirs[k]} against {ours[k]}" for k in SIZES
                                                           if ours[k] != theirs[k])


def _display_path(path) -> str:
    if path is None:
        return "in-memory"
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _percentile(values, q):
    """`infill_eval.percentile` (nearest rank), NaN for no values."""
    from diffreason.evals.infill_eval import percentile

    found = percentile(values, q)
    return float("nan") if found is None else found


def run_eval(
    lm,
    tiers=("easy", "medium", "hard", "extreme"),
    n: int = 100,
    modes=("model", "verified"),
    budgets=(12, 24, 48),
    seed: int = 2026,
    progress=None,
    remote=None,
    samples=(1,),
    baseline=None,
    puzzle_sets: dict[str, list[list[int]]] | None = None,
) -> dict:
    """`remote`: a `diffreason.client.RemoteEngine` whose servers solve instead of `lm` (then None): model mode on
    the servers' own schedule, no fixed budgets; the classical solver still runs here. `samples`: the K of the
    test-time-compute runs (`sudoku.solve(samples=K)`), reported as their own modes (`model ×K`, `verified ×K`) beside
    each mode's K = 1 run. `baseline`: an autoregressive baseline (`diffreason.tasks.sudoku_ar`) solving the same
    puzzles, reported as mode `autoregressive` (its steps: forward passes, one per cell). `puzzle_sets`: named
    collections (e.g. read from files) evaluated after the generator's tiers, each as a tier of its own."""
    if not (tiers or puzzle_sets) or not modes:  # (the report's table and plot need one of each)
        raise sudoku.SudokuError(f"the eval needs at least one tier and one mode, got tiers {list(tiers)} and modes "
                                 f"{list(modes)}")
    clash = sorted(set(tiers) & set(puzzle_sets or {}))
    if clash:
        raise sudoku.SudokuError(f"a puzzle set may not be named as a tier it is reported beside: {', '.join(clash)}")
    if remote is not None:
        if list(modes) != ["model"] or budgets or set(samples) != {1}:
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
            "dtype": str(lm.model.dtype).removeprefix("torch."),
            "sizes": _sizes(lm.model.config.text_config),
            "sampler": lm.sampler_config.model_dump(exclude={"max_denoising_steps"}),
            "machine": f"{platform.machine()}, {torch.get_num_threads()} threads, {lm.device}",
            "own": lm.sampler_config.max_denoising_steps,  # the checkpoint's own schedule: the headline run
        }
    report.update({"n_per_tier": n, "budgets": list(budgets), "samples": sorted(set(samples) | {1}), "seed": seed,
                   "tiers": {}})
    if baseline is not None:
        from diffreason.tasks import sudoku_ar

        report["baseline"] = {"model": _display_path(baseline.path), "parameters": sudoku_ar.parameters(baseline.model),
                              "training_examples": sudoku_ar.training_examples(baseline.path),
                              "dtype": str(baseline.model.dtype).removeprefix("torch."),
                              "sizes": _sizes(baseline.model.config)}
    own = report.pop("own")
    sets = [(tier, "generator", None) for tier in tiers] + [(name, "file", grids) for name, grids in
                                                            (puzzle_sets or {}).items()]
    for tier, source, grids in sets:
        if grids is None:
            grids = [p.puzzle for p in sudoku.generate_set(tier, n, seed=seed)]
        if progress:
            progress(f"{tier}: {len(grids)} puzzles ({source})")
        t = time.perf_counter()
        for g in grids:
            sudoku.solve_exact(g, limit=1)
        classical = (time.perf_counter() - t) / len(grids)
        entry = {
            "source": source,
            "n": len(grids),
            **difficulty_summary(grids),
            "classical_seconds_per_puzzle": classical,
            "modes": {},
        }
        for mode in modes:
            by_budget = {}
            for budget in sorted(set(budgets) | {own}) if remote is None else [own]:
                t = time.perf_counter()
                results = sudoku.solve(lm, grids, mode=mode, seed=seed,
                                       max_steps=budget if remote is None else None, engine=remote)
                seconds = time.perf_counter() - t
                by_budget[budget] = (results, seconds)
                if progress:
                    progress(f"{tier}/{mode}/{budget or 'server'}")
            results, seconds = by_budget[own]
            if own is None:  # (a server that does not report its schedule)
                own = max(r.steps for r in results)
            entry["modes"][mode] = mode_entry(results, seconds, own)
            entry["modes"][mode]["solve_rate_at_budget"] = {
                str(b): sum(r.solved for r in by_budget[b][0]) / len(grids) for b in sorted(budgets)}
            for k in samples:
                if k == 1:
                    continue
                t = time.perf_counter()
                results = sudoku.solve(lm, grids, mode=mode, seed=seed, samples=k)
                elapsed = time.perf_counter() - t
                label = sudoku.mode_label(mode, k)
                entry["modes"][label] = {**mode_entry(results, elapsed, own), "k": k, "wall_ratio": elapsed / seconds}
                if progress:
                    progress(f"{tier}/{label}")
        if baseline is not None:
            t = time.perf_counter()
            results = sudoku_ar.solve_ar(baseline, grids)
            entry["modes"][sudoku_ar.MODE] = {**mode_entry(results, time.perf_counter() - t, sudoku.CELLS),
                                              "baseline": True,  # (it writes every cell: it never runs out of steps)
                                              "unsolved_ran_out": None, "unsolved_stopped": None}
            if progress:
                progress(f"{tier}/{sudoku_ar.MODE}")
        report["tiers"][tier] = entry
    report["budget"] = own
    return report


def difficulty_summary(grids: list[list[int]]) -> dict:
    """What solving a set takes (`sudoku.difficulty`): givens, the share singles alone solve, search guesses after
    singles (mean, median, p90)."""
    rated = [sudoku.difficulty(g) for g in grids]
    guesses = [r.guesses for r in rated]
    return {
        "givens_mean": statistics.mean(r.givens for r in rated),
        "singles_solved": sum(r.singles for r in rated) / len(rated),
        "guesses_mean": statistics.mean(guesses),
        "guesses_median": statistics.median(guesses),
        "guesses_p90": _percentile(guesses, 0.9),
    }


SAMPLES_NOTE = (
    "`model ×K` / `verified ×K` = test-time compute with the verifier: up to K chains per puzzle, chain 0 the K = 1 "
    "run and each other chain the puzzle under a random symmetry (digits relabelled, rows / columns permuted within "
    "bands / stacks, bands / stacks permuted, transposed), mapped back; the first grid the verifier accepts is the "
    "answer, chains run in waves of 1, 1, 2, 4, ... over the puzzles still unsolved, so a puzzle costs only the "
    "chains it needed; with none accepted, the chains' per-cell vote. Its steps count every chain's; `time × K=1` is "
    "its wall time against its mode's K = 1 run on the same machine."
)


def mode_entry(results: list, seconds: float, own: int) -> dict:
    """One mode's row: solve rate, how the misses end, steps (all chains), throughput, the solve-vs-steps curve."""
    n = len(results)
    steps = [r.steps for r in results]
    solved_steps = [r.steps for r in results if r.solved]
    unsolved = [r for r in results if not r.solved]
    samples = max(r.samples for r in results)
    return {
        "k": 1,  # the chains asked for (test-time compute); the runs below set theirs
        "chains_max": samples,
        "solve_rate": len(solved_steps) / n,
        # how the misses end: still unsure when the budget ran out, or stopped early on a wrong canvas (one chain)
        "unsolved_ran_out": sum(1 for r in unsolved if r.samples == 1 and r.steps >= own) / n,
        "unsolved_stopped": sum(1 for r in unsolved if r.samples == 1 and r.steps < own) / n,
        "voted": sum(r.voted for r in results) / n,
        "chains_mean": statistics.mean(r.samples for r in results),
        "steps_mean": statistics.mean(steps),
        "steps_median": statistics.median(steps),
        "steps_p90": _percentile(steps, 0.9),
        "puzzles_per_second": n / seconds,
        "seconds_per_puzzle": seconds / n,
        "solve_rate_at_budget": {},
        # cumulative: fraction solved within k steps (all chains) in the headline (early-stop) run
        "solved_within": [sum(1 for s in solved_steps if s <= k) / n for k in range(1, samples * own + 1)],
    }


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
        + (f" ({report['parameters'] / 1e6:.2f}M parameters, {report.get('dtype', '?')})" if report.get("parameters")
           else " (served)")
        + f"; up to {report['n_per_tier']} puzzles per set (generated tiers: fresh, generator seed {report['seed']}; "
        "files: their first ones); " + f"{report['machine']}.",
        "",
        ("Sampler (the checkpoint's generation_config): "
         + ", ".join(f"{k} {v}" for k, v in report.get("sampler", {}).items()) + "."
         if report.get("sampler") else f"Sampler: the servers' own. Seeds: {report.get('seeding', 'unknown')}."),
        "",
        "`model` = the plain renoise sampler over the template; `verified` = task-aware: cells whose argmax breaks a "
        "row/column/box constraint are re-noised each step, and a grid that breaks none (a solution) stops at once. "
        "`solved` and the step columns: early stop within the "
        f"checkpoint's own {own}-step schedule; the budget columns (@) are separate runs whose schedule spans that "
        "budget. Unsolved puzzles either ran out of steps (the sampler never became sure) or stopped early on a "
        "wrong canvas.",
        "",
        *([f"`autoregressive` = the baseline `{report['baseline']['model']}`: a causal LM of "
           f"{report['baseline']['parameters'] / 1e6:.2f}M parameters, {report['baseline'].get('dtype', '?')} ("
           + _baseline_sizes(report) + "), trained on the puzzle stream"
           + (f" for {report['baseline']['training_examples']:,} examples" if report['baseline'].get(
               "training_examples") else "")
           + ", decoding greedily cell by cell under the same template; its steps are forward passes (one per cell; "
           "a denoising step is one forward pass too).", ""] if report.get("baseline") else []),
        *([SAMPLES_NOTE, ""] if len(report.get("samples", [1])) > 1 else []),
        "| tier | givens | mode | solved | "
        + "".join(f"@{b} | " for b in budgets)
        + "unsolved: out of steps / stopped | mean steps | median | p90 | chains | time × K=1 | puzzles/s "
          "| classical solver |",
        "|---|---|---|---|" + "---|" * len(budgets) + "---|---|---|---|---|---|---|---|",
    ]
    for tier, entry in report["tiers"].items():
        for mode, m in entry["modes"].items():
            at = m.get("solve_rate_at_budget", {})
            lines.append(
                f"| {tier} | {entry['givens_mean']:.1f} | {mode} | {100 * m['solve_rate']:.1f} % | "
                + "".join(f"{100 * at[str(b)]:.1f} % | " if str(b) in at else "— | " for b in budgets)
                + ("—" if m.get("baseline") else f"voted {100 * m['voted']:.1f} %" if m.get("k", 1) > 1
                   else f"{100 * m['unsolved_ran_out']:.1f} / {100 * m['unsolved_stopped']:.1f} %")
                + f" | {m['steps_mean']:.1f} | {m['steps_median']:g} | {m['steps_p90']:g} | "
                f"{m.get('chains_mean', 1):.2f} | "
                + (f"{m['wall_ratio']:.2f} | " if "wall_ratio" in m else "1 | ")
                + f"{m['puzzles_per_second']:.1f} | {1e3 * entry['classical_seconds_per_puzzle']:.1f} ms |"
            )
    lines += ["", "Difficulty of each set (`sudoku.difficulty`: naked and hidden singles first, then the exact "
                  "solver's search guesses on what they leave; the public hard collections need hundreds):", "",
              "| set | source | puzzles | givens | solved by singles | guesses after singles: mean / median / p90 |",
              "|---|---|---|---|---|---|"]
    for tier, entry in report["tiers"].items():
        if "singles_solved" in entry:
            lines.append(f"| {tier} | {entry.get('source', 'generator')} | {entry.get('n', report['n_per_tier'])} | "
                         f"{entry['givens_mean']:.1f} | {100 * entry['singles_solved']:.0f} % | "
                         f"{entry['guesses_mean']:.1f} / {entry['guesses_median']:.0f} / {entry['guesses_p90']:.0f} |")
    lines += ["", "![solve rate vs steps](sudoku.png)", ""]
    if len(report.get("samples", [1])) > 1:
        lines += ["![solve rate vs chains and vs total steps](sudoku_samples.png)", ""]
    md_path = out_dir / "sudoku.md"
    md_path.write_text("\n".join(lines))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = sorted({m for e in report["tiers"].values() for m, v in e["modes"].items()
                    if "×" not in m and not v.get("baseline")})
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
    paths = [json_path, md_path, png_path]
    if len(report.get("samples", [1])) > 1:
        paths.append(_plot_samples(report, modes, out_dir / "sudoku_samples.png", plt))
    return paths


def _plot_samples(report: dict, modes: list[str], path: Path, plt) -> Path:
    """Per mode: solved % against K (chains asked for), and against the mean total steps spent, per tier."""
    fig, axes = plt.subplots(1, 2 * len(modes), figsize=(5.5 * 2 * len(modes), 4.2), squeeze=False)
    for i, mode in enumerate(modes):
        for tier, entry in report["tiers"].items():
            rows = sorted(((m.get("k", 1), m) for label, m in entry["modes"].items()
                           if label == mode or label.startswith(f"{mode} ×")), key=lambda x: x[0])
            if not rows:
                continue
            (line,) = axes[0][2 * i].plot([k for k, _ in rows], [100 * m["solve_rate"] for _, m in rows], marker="o",
                                          label=tier)
            axes[0][2 * i + 1].plot([m["steps_mean"] for _, m in rows], [100 * m["solve_rate"] for _, m in rows],
                                    marker="o", color=line.get_color(), label=tier)
        axes[0][2 * i].set_xscale("log", base=2)
        style_solve_rate_axes(axes[0][2 * i], "chains K (test-time compute)", f"mode: {mode} ×K")
        style_solve_rate_axes(axes[0][2 * i + 1], "mean denoising steps per puzzle, all chains", f"mode: {mode} ×K")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
