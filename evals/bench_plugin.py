"""The SGLang plugin's step at a real vocabulary: constrained rows against upstream's unconstrained step.

    python -m diffreason.evals.bench_plugin [--vocab 262144] [--canvas 256] [--rows 2] [--steps 4] [--device cpu]

Both sides run SGLang's algorithm classes on the same logits [rows, C, V] in the same process, alternating, each
timed over `--steps` denoising steps of fresh states: upstream `Gemma4Renoise.step` on unconstrained rows, and
`DiffreasonRenoise.step` on rows whose canvas template restricts every free position (a fixed token every fourth
position, the others one of 10 or 100 allowed ids: two token classes, as a compiled template keeps them), so the
plugin does all its constrained work (the batch's masks expanded on the device, masked statistics, noise within the
allowed sets). What a step costs beyond the model's forward is what is compared; the forward is the same on both
sides. Prints the per-step seconds of each side and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time
import types

import torch


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", type=int, default=262144)
    ap.add_argument("--canvas", type=int, default=256)
    ap.add_argument("--rows", type=int, default=2)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    for name, low in (("vocab", 1100), ("canvas", 1), ("rows", 1), ("steps", 1), ("repeats", 1), ("threads", 1)):
        if getattr(args, name) < low:  # (the template's ids reach 1099)
            ap.error(f"--{name} must be at least {low}, got {getattr(args, name)}")
    if args.device not in ("cpu", "cuda") or (args.device == "cuda" and not torch.cuda.is_available()):
        ap.error(f"--device must be cpu or cuda (with a GPU), got {args.device!r}")
    if args.device == "cpu":
        torch.set_num_threads(args.threads)

    from sglang.srt.dllm.algorithm.gemma4_renoise import Gemma4Renoise
    from sglang.srt.dllm.config import DllmConfig

    from diffreason.backends import sglang_runtime as plugin
    from diffreason.canvas import CanvasTemplate

    V, C, B, device = args.vocab, args.canvas, args.rows, torch.device(args.device)
    hidden = 64
    embed = torch.nn.Embedding(V, hidden, device=device)
    embed.embed_scale = 1.0

    def algorithm(cls):
        algo = cls(DllmConfig("Gemma4Renoise", {"max_denoising_steps": args.steps + 1}, C, -1, B))
        algo.vocab_size, algo.embed_tokens = V, embed
        return algo

    few, many = list(range(100, 110)), list(range(1000, 1100))
    positions = [7 if p % 4 == 0 else (few if p % 2 else many) for p in range(C)]
    template = CanvasTemplate.from_positions(V, positions)
    rids = [f"bench-{i}" for i in range(B)]
    for rid in rids:
        plugin.REQUESTS.get(rid).template = template
    fb = types.SimpleNamespace(batch_size=B, input_ids=torch.zeros(B * C, dtype=torch.long, device=device),
                               rids=rids)
    g = torch.Generator(device=device).manual_seed(0)
    logits = [torch.randn(B * C, V, generator=g, device=device) * 3 for _ in range(args.steps)]

    def run(algo) -> float:
        for rid in rids:
            plugin.REQUESTS.get(rid).canvases_done = 0
        states = algo.init_step_state(fb)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        for k in range(args.steps):
            algo.step(fb, logits[k], states)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - t) / args.steps

    upstream, ours = algorithm(Gemma4Renoise), algorithm(plugin.DiffreasonRenoise)
    run(upstream), run(ours)  # warm-up (and the plugin's one copy of the masks to the device)
    times = {"upstream (unconstrained)": [], "diffreason (constrained)": []}
    for _ in range(args.repeats):
        times["upstream (unconstrained)"].append(run(upstream))
        times["diffreason (constrained)"].append(run(ours))
    for rid in rids:
        plugin.REQUESTS.drop(rid)
    result = {name: statistics.median(v) for name, v in times.items()}
    ratio = result["diffreason (constrained)"] / result["upstream (unconstrained)"]
    print(f"V={V} C={C} rows={B} device={device} threads={args.threads if device.type == 'cpu' else '-'}; "
          f"median of {args.repeats} runs of {args.steps} steps")
    for name, sec in result.items():
        print(f"  {name:26s} {sec * 1000:9.1f} ms / step")
    print(f"  ratio {ratio:.3f} (constrained step / upstream step)")
    return {**result, "ratio": ratio}


if __name__ == "__main__":
    main()
