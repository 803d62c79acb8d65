"""The benchmark's utilisation figure counts the products a step runs (diffreason.evals.gemm_rate)."""

import torch

from diffreason import CanvasTemplate, Engine, SamplerConfig
from diffreason.evals.gemm_rate import MatmulRecorder, Product, replay_seconds


def test_the_recorder_counts_each_kind_of_product():
    linear = torch.nn.Linear(16, 8, bias=True)
    x = torch.randn(3, 5, 16)
    q, kv = torch.randn(2, 4, 6, 8), torch.randn(2, 2, 10, 8)
    a, b = torch.randn(12, 16), torch.randn(3, 16, 4)
    offs = torch.tensor([5, 9, 12], dtype=torch.int32)
    with torch.inference_mode(), MatmulRecorder() as rec:
        linear(x)  # [15, 16] x [16, 8]
        torch.bmm(torch.randn(4, 3, 7), torch.randn(4, 7, 2))
        torch.nn.functional.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
        torch._grouped_mm(a, b, offs=offs)
        torch.relu(x)  # no product
    kinds = {p.kind: n for p, n in rec.products.items()}
    assert kinds == {"mm": 1, "bmm": 1, "attention": 1, "grouped": 1}
    assert rec.flops == 2 * 15 * 16 * 8 + 2 * 4 * 3 * 7 * 2 + 4 * 2 * 4 * 6 * 10 * 8 + 2 * 12 * 16 * 4
    assert replay_seconds(rec.products, repeats=1) > 0


def test_replay_runs_each_product_as_often_as_it_ran():
    once = {Product("mm", ((64, 64), (64, 64)), torch.float32): 1}
    many = {Product("mm", ((64, 64), (64, 64)), torch.float32): 200}
    assert replay_seconds(many) > 20 * replay_seconds(once)


def test_the_engine_enters_the_forward_context_once_per_step(tiny_lm):
    entered = []

    class Count:
        def __enter__(self):
            entered.append(1)

        def __exit__(self, *exc):
            return False

    V, C = tiny_lm.vocab_size, tiny_lm.canvas_length
    template = CanvasTemplate.from_positions(V, [None if i % 2 else 5 for i in range(C)])
    engine = Engine(tiny_lm, SamplerConfig(draws="fast", max_denoising_steps=4), profile=True,
                    forward_context=Count)
    engine.generate("x", template=template, seed=0)
    assert len(entered) == engine.stats.steps > 0
