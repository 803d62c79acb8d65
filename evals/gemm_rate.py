"""How close a denoising step comes to the GEMM rate of its own shapes: the benchmark's utilisation figure.

`MatmulRecorder` (a TorchDispatchMode) records every matrix product a piece of code runs — `linear` and `matmul` by a
matrix (whole ops under inference mode), `mm`, `addmm`, `bmm`, `baddbmm`, `_grouped_mm` (the MoE experts) and the
fused CPU / CUDA attention kernels — with their shapes and dtypes (a linear layer's as the [M, K] × [K, N] product).
`replay_seconds` runs the same products again, alone, on random tensors of the recorded shapes (each distinct shape
timed, best of five, times its recorded count), which is what the step would cost if it did nothing but its GEMMs at
the rate this machine reaches on those shapes. So

    utilisation = replay seconds / the step's forward seconds
                = (the step's FLOP/s) / (the GEMM rate of the same shapes and FLOPs)

Attention counts as products (4 · batch · query heads · queries · keys · head size FLOPs, replayed with PyTorch's
SDPA); elementwise work, norms, softmax and gathers count as time but no FLOPs — they are what the figure measures.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
_ATTENTION = {getattr(aten, name) for name in ("scaled_dot_product_attention",
                                               "_scaled_dot_product_flash_attention_for_cpu",
                                               "_scaled_dot_product_flash_attention",
                                               "_scaled_dot_product_efficient_attention") if hasattr(aten, name)}


@dataclass(frozen=True)
class Product:
    """One recorded product: its kind, operand shapes and dtype (and a grouped product's group offsets)."""

    kind: str  # mm, bmm, grouped, attention
    shapes: tuple[tuple[int, ...], ...]
    dtype: torch.dtype
    offsets: tuple[int, ...] = ()

    @property
    def flops(self) -> int:
        if self.kind == "mm":
            (m, k), (_, n) = self.shapes
            return 2 * m * k * n
        if self.kind == "bmm":
            (b, m, k), (_, _, n) = self.shapes
            return 2 * b * m * k * n
        if self.kind == "grouped":  # [T, K] rows split into groups by offsets, times [G, K, N]
            (t, k), (_, _, n) = self.shapes
            return 2 * (self.offsets[-1] if self.offsets else t) * k * n
        (b, h, q, d), (_, _, keys, _) = self.shapes[0], self.shapes[1]
        return 4 * b * h * q * keys * d


class MatmulRecorder(TorchDispatchMode):
    """Counts the products run while it is active: `products` maps a Product to how many times it ran."""

    def __init__(self):
        super().__init__()
        self.products: Counter[Product] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        packet = func.overloadpacket
        if packet in (aten.linear, aten.matmul) and args[1].dim() == 2:  # (whole ops under inference mode)
            a, w = args[0], args[1]
            b = tuple(w.shape[::-1]) if packet is aten.linear else tuple(w.shape)  # as [K, N]
            self.products[Product("mm", ((a.numel() // a.shape[-1], a.shape[-1]), b), a.dtype)] += 1
        elif packet in (aten.mm, aten.addmm, aten.bmm, aten.baddbmm):
            a, b = (args[0], args[1]) if packet in (aten.mm, aten.bmm) else (args[1], args[2])
            kind = "mm" if packet in (aten.mm, aten.addmm) else "bmm"
            self.products[Product(kind, (tuple(a.shape), tuple(b.shape)), a.dtype)] += 1
        elif packet is aten._grouped_mm:
            a, b = args[0], args[1]
            offs = args[2] if len(args) > 2 else kwargs.get("offs")
            offsets = tuple(int(x) for x in offs.tolist()) if offs is not None else ()
            self.products[Product("grouped", (tuple(a.shape), tuple(b.shape)), a.dtype, offsets)] += 1
        elif packet in _ATTENTION:
            q, k, v = args[0], args[1], args[2]
            self.products[Product("attention", (tuple(q.shape), tuple(k.shape), tuple(v.shape)), q.dtype)] += 1
        return func(*args, **kwargs)

    @property
    def flops(self) -> int:
        return sum(p.flops * n for p, n in self.products.items())


def _runner(p: Product, device):
    make = lambda shape: torch.randn(shape, dtype=p.dtype, device=device)  # noqa: E731
    if p.kind == "mm":
        a, b = make(p.shapes[0]), make(p.shapes[1])
        return lambda: torch.mm(a, b)
    if p.kind == "bmm":
        a, b = make(p.shapes[0]), make(p.shapes[1])
        return lambda: torch.bmm(a, b)
    if p.kind == "grouped":
        a, b = make(p.shapes[0]), make(p.shapes[1])
        offs = torch.tensor(p.offsets, dtype=torch.int32, device=device)
        return lambda: torch._grouped_mm(a, b, offs=offs)
    q, k, v = (make(s) for s in p.shapes)
    gqa = q.shape[1] != k.shape[1]
    return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)


def replay_seconds(products: Counter, device="cpu", repeats: int = 5) -> float:
    """Seconds to run every recorded product as often as it ran, alone (per distinct shape: the fastest of `repeats`
    timed calls after a warm-up — the rate the machine reaches on that shape —, times its count)."""
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    total = 0.0
    with torch.inference_mode():
        for p, count in products.items():
            run = _runner(p, device)
            run()
            times = []
            for _ in range(repeats):
                sync()
                t = time.perf_counter()
                run()
                sync()
                times.append(time.perf_counter() - t)
            total += min(times) * count
    return total
