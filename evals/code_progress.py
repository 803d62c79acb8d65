"""The code model's held-out quality against training examples seen, read from its training log, and a power-law fit.

    python -m diffreason.evals.code_progress runs/code-small --target 0.5 --out evals/reports/code_progress

Each evaluation record of RUN/log.jsonl (`eval`: `val_loss` and `val_slot_exact` on the held-out packages' fixed
examples, `diffreason train code --eval-every`) at step s has seen s × batch examples (RUN/train_config.json's batch
size). As `sudoku_progress` fits the unsolved fraction, this fits the share of held-out slots the model does not
get exactly right in one pass as a power law of examples seen (a straight line in log-log), extends it to where it
would reach `--target`, and fits the held-out loss the same way. The points are one run's under its learning-rate
schedule (a resumed run may change the schedule), and the held-out set is small (`--heldout`): a rate of return
at this size, not a promise. Writes progress.json, progress.md and progress.png.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from diffreason.errors import DiffreasonError
from diffreason.evals.sudoku_progress import loglog_fit, power_law_fit, puzzles_for, wilson


def read_run(run: Path, heldout: int) -> list[dict]:
    """The evaluation points of a training run: step, examples seen, held-out loss and exact slots."""
    log, config = run / "log.jsonl", run / "train_config.json"
    if not log.is_file():
        raise DiffreasonError(f"{log} not found: give a run directory of `diffreason train code`")
    try:
        batch = int(json.loads(config.read_text())["batch_size"])
        records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DiffreasonError(f"cannot read the run in {run}: {exc}") from None
    rows = []
    for r in records:
        e = r.get("eval") if isinstance(r, dict) else None
        if isinstance(e, dict) and "val_loss" in e and "val_slot_exact" in e:
            exact = min(max(round(e["val_slot_exact"] * heldout), 0), heldout)
            rows.append({"step": r["step"], "examples": r["step"] * batch, "val_loss": e["val_loss"],
                         "val_slot_exact": e["val_slot_exact"], "interval": wilson(exact, heldout)})
    if len(rows) < 2:
        raise DiffreasonError(f"{log} holds {len(rows)} evaluation record(s); a fit needs two or more")
    return rows


def summarise(rows: list[dict], target: float) -> dict:
    xs = [r["examples"] for r in rows]
    miss = power_law_fit(xs, [r["val_slot_exact"] for r in rows])  # log(1 - exact) = a + b log(examples)
    loss = loglog_fit(xs, [r["val_loss"] for r in rows])  # log(loss) = a + b log(examples)
    needed = puzzles_for(miss, target)
    last = xs[-1]
    return {"miss_fit": miss, "loss_fit": loss, "target": target, "examples_for_target": needed,
            "times_seen": needed / last if needed else None,
            "loss_at_10x": math.exp(loss[0] + loss[1] * math.log(10 * last)) if loss else None,
            "last_examples": last}


def write(rows: list[dict], summary: dict, out: Path, command: str, heldout: int) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "progress.json").write_text(json.dumps({"rows": rows, "fits": summary, "command": command}, indent=2))
    target = summary["target"]
    lines = ["# The code model: held-out quality against training examples seen", "", f"Command: `{command}`  ",
             f"From the run's training log: {heldout} fixed held-out examples (whole packages kept out of training), "
             "each a hole in a slot as infill lays it out; `exact`: every corrupted slot token right in one pass. "
             "Intervals: 95 % Wilson.", "",
             "| step | examples seen | held-out loss | exact slots | 95 % interval |", "|---|---|---|---|---|"]
    for r in rows:
        lo, hi = r["interval"]
        lines.append(f"| {r['step']:,} | {r['examples']:,} | {r['val_loss']:.4f} | {100 * r['val_slot_exact']:.1f} % "
                     f"| {100 * lo:.1f}–{100 * hi:.1f} % |")
    lines += ["", "Power laws against examples seen (least squares in log-log over every point):", ""]
    miss, loss = summary["miss_fit"], summary["loss_fit"]
    if miss is None or summary["examples_for_target"] is None:
        lines.append("- the share of inexact slots does not fall over these points: no estimate")
    else:
        lines.append(f"- inexact slots ∝ examples^{miss[1]:.3f}: {100 * target:.0f} % exact at about "
                     f"{summary['examples_for_target']:.3g} examples, {summary['times_seen']:,.0f}× what the last "
                     "point has seen")
    if loss is not None:
        lines.append(f"- held-out loss ∝ examples^{loss[1]:.3f}: {summary['loss_at_10x']:.3f} at 10× the examples "
                     "(no floor fitted: with an irreducible floor the loss falls slower, so this is optimistic)")
    lines += ["", "![held-out quality vs examples](progress.png)", ""]
    (out / "progress.md").write_text("\n".join(lines))
    plot(rows, summary, out / "progress.png")
    return [out / "progress.json", out / "progress.md", out / "progress.png"]


def plot(rows: list[dict], summary: dict, path: Path) -> None:
    """Exact slots (with intervals) and held-out loss against examples seen, each with its fit dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs, miss, loss, target = [r["examples"] for r in rows], summary["miss_fit"], summary["loss_fit"], summary["target"]
    end = max(summary["examples_for_target"] or 0, 10 * xs[-1]) if miss else 10 * xs[-1]
    end = min(end, 1e4 * xs[-1])
    grid = [xs[0] * (end / xs[0]) ** (k / 80) for k in range(81)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    ys = [100 * r["val_slot_exact"] for r in rows]
    err = [[y - 100 * r["interval"][0] for y, r in zip(ys, rows)],
           [100 * r["interval"][1] - y for y, r in zip(ys, rows)]]
    left.errorbar(xs, ys, yerr=err, fmt="o", capsize=3, ms=4)
    if miss:
        left.plot(grid, [100 * (1 - math.exp(miss[0] + miss[1] * math.log(x))) for x in grid], "--", lw=1)
        left.axhline(100 * target, color="grey", lw=0.8, ls=":")
    left.set(xscale="log", xlabel="training examples seen", ylabel="held-out slots exact (%)",
             title="exact slots; dashed: power-law fit")
    right.plot(xs, [r["val_loss"] for r in rows], "o", ms=4)
    if loss:
        right.plot(grid, [math.exp(loss[0] + loss[1] * math.log(x)) for x in grid], "--", lw=1)
    right.set(xscale="log", yscale="log", xlabel="training examples seen", ylabel="held-out loss",
              title="held-out loss; dashed: power-law fit")
    for ax in (left, right):
        ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="the run directory of `diffreason train code` (its log.jsonl and config)")
    parser.add_argument("--target", type=float, default=0.5, help="share of exact held-out slots to extend the fit to")
    parser.add_argument("--heldout", type=int, default=64, help="held-out examples per evaluation (the trainer's 64)")
    parser.add_argument("--out", default="evals/reports/code_progress")
    args = parser.parse_args(argv)
    if not 0 < args.target < 1 or args.heldout < 1:
        parser.exit(2, "error: --target must lie in (0, 1) and --heldout be at least 1\n")
    try:
        rows = read_run(Path(args.run), args.heldout)
    except DiffreasonError as exc:
        parser.exit(2, f"error: {exc}\n")
    command = "python -m diffreason.evals.code_progress " + " ".join(argv if argv is not None else sys.argv[1:])
    for path in write(rows, summarise(rows, args.target), Path(args.out), command, args.heldout):
        print(path)


if __name__ == "__main__":
    main()
