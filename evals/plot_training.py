"""Plot a training run's curve (loss, held-out solve rate) from RUN/log.jsonl.

    python -m diffreason.evals.plot_training runs/sudoku-small evals/reports/sudoku_training.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(run_dir: str, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [json.loads(line) for line in (Path(run_dir) / "log.jsonl").read_text().splitlines() if line.strip()]
    steps = [r["step"] for r in records]
    window = 50
    smooth = [
        sum(r["loss"] for r in records[max(0, i - window + 1) : i + 1]) / len(records[max(0, i - window + 1) : i + 1])
        for i in range(len(records))
    ]
    evals = [(r["step"], r["eval"]) for r in records if "eval" in r]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, smooth, color="tab:blue", label=f"SFT loss ({window}-step mean)")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("loss", color="tab:blue")
    if evals:
        key = next(k for k in evals[0][1] if k.endswith("_solved"))
        ax2 = ax.twinx()
        ax2.plot([s for s, _ in evals], [100 * e[key] for _, e in evals], "o-", color="tab:red", label=key)
        ax2.set_ylabel(f"held-out {key.replace('_', ' ')} (%)", color="tab:red")
        ax2.set_ylim(0, 100)
    ax.set_title(f"training: {run_dir} (blank-count curriculum grows until 60 % of the run)", fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
