"""Plot training curves (loss, held-out loss and solve / exact-match rates) from RUN/log.jsonl; later runs continue the first.

    python -m diffreason.evals.plot_training evals/reports/sudoku_training.png runs/sudoku-small [runs/sudoku-ft ...]

A run that starts from another run's final weights (`train sudoku --init-from`) is drawn after it: its steps are
offset by the steps before it, and a dashed line marks where it starts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(out: str, *run_dirs: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not run_dirs:
        raise SystemExit("usage: plot_training OUT.png RUN [RUN ...]")
    steps, losses, evals, starts, offset, batch_sizes = [], [], [], [], 0, []
    for run in run_dirs:
        records = [json.loads(ln) for ln in (Path(run) / "log.jsonl").read_text().splitlines() if ln.strip()]
        config = Path(run) / "train_config.json"
        batch_sizes.append(json.loads(config.read_text())["batch_size"] if config.is_file() else None)
        starts.append((offset, run))
        steps += [offset + r["step"] for r in records]
        losses += [r["loss"] for r in records]
        evals += [(offset + r["step"], r["eval"]) for r in records if "eval" in r]
        offset += records[-1]["step"] if records else 0
    window = 50
    smooth = [sum(losses[max(0, i - window + 1) : i + 1]) / len(losses[max(0, i - window + 1) : i + 1])
              for i in range(len(losses))]
    fig, ax = plt.subplots(figsize=(7.5, 4))
    ax.plot(steps, smooth, color="tab:blue", label=f"SFT loss ({window}-step mean)")
    known = list(dict.fromkeys(b for b in batch_sizes if b is not None))
    ax.set_xlabel("optimiser step" + (f" (batch {', then '.join(map(str, known))})" if known else ""))
    ax.set_ylabel("loss", color="tab:blue")
    for start, run in starts[1:]:
        ax.axvline(start, color="gray", ls="--", lw=1)
        ax.text(start, ax.get_ylim()[1], f" {Path(run).name}", fontsize=7, va="top", color="gray")
    held_loss = [(s, e["val_loss"]) for s, e in evals if "val_loss" in e]  # (`train code`: held-out packages)
    if held_loss:
        ax.plot(*zip(*held_loss), "s-", color="tab:green", ms=3, label="held-out loss (diffusion)")
        ax.legend(loc="upper right", fontsize=8)
    # one series per held-out tier (runs may evaluate different tiers: `train sudoku --eval-tier`) or rate
    keys = list(dict.fromkeys(k for _, e in evals for k in e if k.endswith(("_solved", "_exact"))))
    if keys:
        ax2 = ax.twinx()
        for key, color in zip(keys, ("tab:red", "tab:purple", "tab:orange", "tab:brown")):
            points = [(s, 100 * e[key]) for s, e in evals if key in e]
            ax2.plot(*zip(*points), "o-", color=color, label=f"held-out {key.replace('_', ' ')}")
        ax2.set_ylabel("held-out solve / exact rate (%)", color="tab:red")
        ax2.set_ylim(0, 100)
        ax2.legend(loc="center right", fontsize=8)
    ax.set_title("training: " + " → ".join(Path(r).name for r in run_dirs), fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(*sys.argv[1:])
