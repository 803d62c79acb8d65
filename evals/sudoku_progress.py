"""Solve rate against training puzzles seen: checkpoints of one training run under one eval, and a power-law fit.

Each checkpoint is named with how many training puzzles it has seen (steps × batch size, summed over the runs it
continues). All are evaluated alike — model mode, one sampler schedule, fresh puzzles of a validation seed — so the
points differ only by training. The unsolved fraction is fitted as a power law of puzzles seen (a straight line in
log-log, as scaling laws fit loss or error against data), per tier, and extended to where it would reach a target:

    python -m diffreason.evals.sudoku_progress --checkpoints DIR1=640512,DIR2=1711616 --tiers hard,extreme \\
        --schedule 1.2:0.4:20 --n 256 --seed 777 --target 0.95 --out evals/reports/sudoku_progress

An extrapolation from a handful of points: it says how far off a target is at the current rate of return, not a
promise. Writes progress.json, progress.md and progress.png.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from diffreason.evals.sudoku_eval import run_eval
from diffreason.sampler import SamplerConfig


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a binomial proportion."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def power_law_fit(puzzles: list[float], solve_rates: list[float]) -> tuple[float, float] | None:
    """(a, b) of log(1 - solve rate) = a + b · log(puzzles), least squares; None with fewer than two distinct points
    or a solve rate of 1 (no error left to fit)."""
    return loglog_fit(puzzles, [1 - s for s in solve_rates])


def loglog_fit(xs: list[float], ys: list[float]) -> tuple[float, float] | None:
    """(a, b) of log(y) = a + b · log(x), least squares over the points with y > 0; None with fewer than two distinct
    x left."""
    points = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if y > 0]
    if len({x for x, _ in points}) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return my - b * mx, b


def puzzles_for(fit: tuple[float, float] | None, target: float) -> float | None:
    """Training puzzles at which the fitted unsolved fraction falls to 1 - target; None if it does not fall."""
    if fit is None or fit[1] >= 0:
        return None
    a, b = fit
    return math.exp((math.log(1 - target) - a) / b)


def evaluate(checkpoints: list[tuple[str, int]], tiers: list[str], schedule: tuple[float, float, int], n: int,
             seed: int) -> list[dict]:
    from diffreason.model import load_model

    rows = []
    for path, puzzles in checkpoints:
        lm = load_model(path)
        t_max, t_min, steps = schedule
        lm.sampler_config = SamplerConfig(**{**lm.sampler_config.model_dump(), "t_max": t_max, "t_min": t_min,
                                             "max_denoising_steps": steps})
        report = run_eval(lm, tiers, n, modes=("model",), budgets=(steps,), seed=seed)
        for tier, entry in report["tiers"].items():
            m = entry["modes"]["model"]
            solved = round(m["solve_rate"] * n)
            rows.append({"checkpoint": path, "puzzles": puzzles, "parameters": report["parameters"], "tier": tier,
                         "solved": solved, "n": n, "solve_rate": solved / n, "interval": wilson(solved, n),
                         "steps_median": m["steps_median"]})
    return rows


def summarise(rows: list[dict], target: float) -> dict:
    """Per tier: the fit over the checkpoints of the most common size (the run's own line; another size, such as a
    deepened sibling, is drawn beside it) and the puzzles it needs to reach `target`."""
    out = {}
    for tier in dict.fromkeys(r["tier"] for r in rows):
        mine = [r for r in rows if r["tier"] == tier]
        size = max((r["parameters"] for r in mine), key=lambda p: sum(r["parameters"] == p for r in mine))
        line = sorted((r for r in mine if r["parameters"] == size), key=lambda r: r["puzzles"])
        fit = power_law_fit([r["puzzles"] for r in line], [r["solve_rate"] for r in line])
        needed = puzzles_for(fit, target)
        out[tier] = {"parameters": size, "points": len(line), "fit": fit, "puzzles_for_target": needed,
                     "times_seen": needed / line[-1]["puzzles"] if needed else None}
    return out


def write(rows: list[dict], summary: dict, target: float, out: Path, command: str, n: int, seed: int,
          schedule: tuple) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "progress.json").write_text(json.dumps({"rows": rows, "fits": summary, "target": target,
                                                   "command": command}, indent=2))
    lines = ["# Sudoku solve rate against training puzzles seen (model mode)", "", f"Command: `{command}`  ",
             f"{n} puzzles per tier, generator seed {seed} (a validation set: the report uses 2026); every checkpoint "
             f"under one schedule, {schedule[0]:g} → {schedule[1]:g} over {schedule[2]} steps, early stop. "
             "Intervals: 95 % Wilson.", "",
             "| checkpoint | parameters | training puzzles seen | tier | solved | 95 % interval | median steps |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lo, hi = r["interval"]
        lines.append(f"| `{r['checkpoint']}` | {r['parameters'] / 1e6:.2f}M | {r['puzzles'] / 1e6:.2f}M | {r['tier']} "
                     f"| {100 * r['solve_rate']:.1f} % | {100 * lo:.1f}–{100 * hi:.1f} % | {r['steps_median']:.0f} |")
    lines += ["", f"Power law of the unsolved fraction against puzzles seen (least squares in log-log over the "
                  f"checkpoints of the most common size), extended to {100 * target:.0f} % solved:", ""]
    for tier, s in summary.items():
        if s["fit"] is None:
            lines.append(f"- {tier}: too few points to fit")
        elif s["puzzles_for_target"] is None:
            lines.append(f"- {tier}: the unsolved fraction does not fall over these checkpoints (unsolved ∝ "
                         f"puzzles^{s['fit'][1]:.2f}): no estimate")
        else:
            lines.append(f"- {tier}: unsolved ∝ puzzles^{s['fit'][1]:.2f} over {s['points']} checkpoints; "
                         f"{100 * target:.0f} % at about {s['puzzles_for_target'] / 1e6:.0f}M puzzles, "
                         f"{s['times_seen']:.0f}× what the last one has seen")
    lines += ["", "![solve rate vs training puzzles](progress.png)", ""]
    (out / "progress.md").write_text("\n".join(lines))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for tier, s in summary.items():
        mine = [r for r in rows if r["tier"] == tier]
        on_line = [r for r in mine if r["parameters"] == s["parameters"]]
        xs = [r["puzzles"] for r in on_line]
        ys = [100 * r["solve_rate"] for r in on_line]
        err = [[y - 100 * r["interval"][0] for y, r in zip(ys, on_line)],
               [100 * r["interval"][1] - y for y, r in zip(ys, on_line)]]
        bar = ax.errorbar(xs, ys, yerr=err, fmt="o", capsize=3, label=f"{tier} ({s['parameters'] / 1e6:.1f}M)")
        colour = bar[0].get_color()
        for r in mine:
            if r["parameters"] != s["parameters"]:
                ax.plot(r["puzzles"], 100 * r["solve_rate"], "s", color=colour, mfc="none",
                        label=f"{tier} ({r['parameters'] / 1e6:.1f}M)")
        if s["fit"] is not None:
            a, b = s["fit"]
            end = max(s["puzzles_for_target"] or 0, 4 * max(xs))
            grid = [min(xs) * (end / min(xs)) ** (k / 60) for k in range(61)]
            ax.plot(grid, [100 * (1 - math.exp(a + b * math.log(d))) for d in grid], "--", color=colour, lw=1)
    ax.axhline(100 * target, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_xlabel("training puzzles seen")
    ax.set_ylabel("solved (%)")
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    ax.set_title("model mode; dashed: power-law fit of the unsolved fraction")
    fig.tight_layout()
    fig.savefig(out / "progress.png", dpi=110)
    plt.close(fig)
    return [out / "progress.json", out / "progress.md", out / "progress.png"]


def _checkpoints(text: str) -> list[tuple[str, int]]:
    out = []
    for item in text.split(","):
        path, sep, puzzles = item.rpartition("=")
        if not sep or not path or not puzzles.isdigit():
            raise ValueError(item)
        out.append((path, int(puzzles)))
    return out


def main(argv=None) -> None:
    import sys

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", required=True, help="DIR=PUZZLES_SEEN,... (one training run's checkpoints)")
    parser.add_argument("--tiers", default="hard,extreme")
    parser.add_argument("--schedule", default="1.2:0.4:20", help="t_max:t_min:max_steps, the same for every one")
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--seed", type=int, default=777)
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument("--out", type=Path, default=Path("evals/reports/sudoku_progress"))
    args = parser.parse_args(argv)
    try:
        checkpoints = _checkpoints(args.checkpoints)
    except ValueError as exc:
        parser.error(f"--checkpoints must look like DIR=640512,DIR2=1711616; {str(exc)!r} does not")
    try:
        t_max, t_min, steps = args.schedule.split(":")
        schedule = (float(t_max), float(t_min), int(steps))
        SamplerConfig(t_max=schedule[0], t_min=schedule[1], max_denoising_steps=schedule[2])
    except ValueError:
        parser.error(f"--schedule must look like 1.2:0.4:20 (t_max above t_min, at least 1 step), got {args.schedule!r}")
    if not 0 < args.target < 1:
        parser.error(f"--target must lie between 0 and 1, got {args.target}")
    if args.n < 1:
        parser.error(f"--n must be at least 1, got {args.n}")
    from diffreason.errors import DiffreasonError

    try:
        rows = evaluate(checkpoints, [t for t in args.tiers.split(",") if t], schedule, args.n, args.seed)
    except DiffreasonError as exc:
        parser.exit(2, f"error: {exc}\n")
    summary = summarise(rows, args.target)
    command = "python -m diffreason.evals.sudoku_progress " + " ".join(sys.argv[1:] if argv is None else argv)
    for path in write(rows, summary, args.target, args.out, command.strip(), args.n, args.seed, schedule):
        print(f"wrote {path}")
    print((args.out / "progress.md").read_text())


if __name__ == "__main__":
    main()
