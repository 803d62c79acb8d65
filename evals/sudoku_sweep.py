"""Sampler schedule sweep for a Sudoku checkpoint: model-mode solve rate and steps per (t_max, t_min, step budget).

The renoise sampler's temperature falls linearly from t_max to t_min over the step budget, so a shorter budget also
cools faster (and stops earlier); a checkpoint ships its schedule in generation_config.json. This picks it on a
validation set (generator seed 4242, not the report's 2026):

    python -m diffreason.evals.sudoku_sweep --schedules 0.8:0.4,1.5:0.4,1.5:0.4:16,2.0:0.4:24 --n 128 \\
        --out evals/reports/sudoku_sweep

A fourth field sets the sampler's entropy bound too (`1.2:0.4:20:0.05`; `1.2:0.4::0.05` keeps the step budget).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from diffreason.evals.sudoku_eval import run_eval, style_solve_rate_axes
from diffreason.sampler import SamplerConfig


def sweep(lm, schedules, tiers, n: int, seed: int) -> list[dict]:
    """Schedules: (t_max, t_min, max_steps or None[, entropy_bound]); None / left out: the checkpoint's."""
    base = lm.sampler_config
    rows = []
    for t_max, t_min, max_steps, *rest in schedules:
        max_steps = max_steps or base.max_denoising_steps
        entropy_bound = rest[0] if rest and rest[0] is not None else base.entropy_bound
        lm.sampler_config = SamplerConfig(**{**base.model_dump(), "t_max": t_max, "t_min": t_min,
                                             "max_denoising_steps": max_steps, "entropy_bound": entropy_bound})
        report = run_eval(lm, tiers, n, modes=("model",), budgets=(max_steps,), seed=seed)
        for tier, entry in report["tiers"].items():
            m = entry["modes"]["model"]
            rows.append({"t_max": t_max, "t_min": t_min, "max_steps": max_steps, "entropy_bound": entropy_bound,
                         "tier": tier,
                         "solve_rate": m["solve_rate"],
                         "steps_median": m["steps_median"], "steps_mean": m["steps_mean"]})
    lm.sampler_config = base
    return rows


def _parse_schedule(text: str) -> tuple[float, float, int | None, float | None]:
    parts = text.split(":")
    if len(parts) not in (2, 3, 4):
        raise ValueError(text)
    return (float(parts[0]), float(parts[1]), int(parts[2]) if len(parts) > 2 and parts[2] else None,
            float(parts[3]) if len(parts) == 4 else None)


def _schedule(row: dict) -> tuple:
    return row["t_max"], row["t_min"], row["max_steps"], row["entropy_bound"]


def write(rows: list[dict], out: Path, command: str, model: str, n: int, seed: int) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep.json").write_text(json.dumps(rows, indent=2))
    tiers = list(dict.fromkeys(r["tier"] for r in rows))
    schedules = list(dict.fromkeys(_schedule(r) for r in rows))
    cell = {(*_schedule(r), r["tier"]): r for r in rows}
    lines = ["# Sudoku sampler schedule sweep (model mode)", "", f"Command: `{command}`  ",
             f"Model: `{model}`; {n} puzzles per tier, generator seed {seed} (a validation set: the report uses 2026); "
             "early stop within the step budget, over which the temperature falls. Cells: solved, median steps.", "",
             "| t_max → t_min | step budget | entropy bound | " + " | ".join(tiers) + " |",
             "|---|---|---|" + "---|" * len(tiers)]
    for schedule in schedules:
        lines.append(f"| {schedule[0]:g} → {schedule[1]:g} | {schedule[2]} | {schedule[3]:g} | " + " | ".join(
            f"{100 * cell[*schedule, t]['solve_rate']:.1f} %, {cell[*schedule, t]['steps_median']:.0f}"
            for t in tiers) + " |")
    lines += ["", "![solve rate vs median steps](sweep.png)", ""]
    (out / "sweep.md").write_text("\n".join(lines))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.2))  # points, not lines: schedules have no order
    for tier in tiers:
        pts = [r for r in rows if r["tier"] == tier]
        (line,) = ax.plot([r["steps_median"] for r in pts], [100 * r["solve_rate"] for r in pts], "o",
                          label=tier)
        for r in pts:
            ax.annotate(f"{r['t_max']:g}/{_schedule(r)[2]}", (r["steps_median"], 100 * r["solve_rate"]), fontsize=7,
                        color=line.get_color(), xytext=(3, 3), textcoords="offset points")
    style_solve_rate_axes(ax, "median denoising steps", "sampler schedule (labels: t_max / step budget)")
    fig.tight_layout()
    fig.savefig(out / "sweep.png", dpi=110)
    plt.close(fig)
    return [out / "sweep.json", out / "sweep.md", out / "sweep.png"]


def main(argv=None) -> None:
    import sys

    from diffreason.model import load_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="diffreason/weights/sudoku-base")
    parser.add_argument("--schedules", default="0.8:0.4,1.2:0.4,1.5:0.4,2.0:0.4",
                        help="t_max:t_min[:max_steps[:entropy_bound]],... (left out: the checkpoint's)")
    parser.add_argument("--tiers", default="medium,hard")
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--seed", type=int, default=4242)
    parser.add_argument("--out", type=Path, default=Path("evals/reports/sudoku_sweep"))
    args = parser.parse_args(argv)
    try:
        schedules = [_parse_schedule(s) for s in args.schedules.split(",")]
    except ValueError:
        parser.error(f"--schedules must look like 1.2:0.4,2.0:0.4:16, got {args.schedules!r}")
    for text, (t_max, t_min, max_steps, entropy_bound) in zip(args.schedules.split(","), schedules):
        try:
            SamplerConfig(t_max=t_max, t_min=t_min, max_denoising_steps=48 if max_steps is None else max_steps,
                          **({} if entropy_bound is None else {"entropy_bound": entropy_bound}))
        except ValueError as exc:
            parser.error(f"schedule {text}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}")
    lm = load_model(args.model)
    rows = sweep(lm, schedules, [t for t in args.tiers.split(",") if t], args.n, args.seed)
    command = "python -m diffreason.evals.sudoku_sweep " + " ".join(sys.argv[1:] if argv is None else argv)
    for path in write(rows, args.out, command.strip(), args.model, args.n, args.seed):
        print(f"wrote {path}")
    print((args.out / "sweep.md").read_text())


if __name__ == "__main__":
    main()
