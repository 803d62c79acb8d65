"""Sampler semantics on synthetic logits: acceptance, re-noising, constraints, stop rules, schedule."""

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diffreason import (
    CanvasConstraint,
    CanvasTemplate,
    EntropyBoundAcceptance,
    RenoiseSampler,
    SamplerConfig,
    StableAndConfidentStop,
)


def gens(n, seed=0):
    return [torch.Generator().manual_seed(seed + i) for i in range(n)]


def test_entropy_bound_accepts_lowest_within_budget():
    entropy = torch.tensor([[0.05, 0.3, 0.02, 0.04, 1.0]])
    # sorted 0.02, 0.04, 0.05, 0.3, 1.0 → running sums before each: 0, 0.02, 0.06, 0.11, 0.41
    accepted = EntropyBoundAcceptance(0.1)(entropy, None)
    assert accepted.tolist() == [[True, False, True, True, False]]


def test_entropy_bound_always_accepts_the_lowest():
    accepted = EntropyBoundAcceptance(0.1)(torch.tensor([[5.0, 3.0, 6.0]]), None)
    assert accepted.tolist() == [[False, True, False]]


def test_fixed_positions_spend_no_budget_and_never_displace_the_lowest_free():
    entropy = torch.tensor([[0.0, 0.09, 0.5, 0.02]])
    free = torch.tensor([[False, True, True, True]])
    accepted = EntropyBoundAcceptance(0.1)(entropy, free)
    assert accepted[0, 1:].tolist() == [True, False, True]
    # Even when every free position is far above the bound, the lowest free one is accepted.
    accepted = EntropyBoundAcceptance(0.1)(torch.tensor([[9.0, 4.0, 3.0]]), torch.tensor([[False, True, True]]))
    assert accepted[0, 1:].tolist() == [False, True]


def test_temperature_schedule_is_linear_from_t_max():
    cfg = SamplerConfig(max_denoising_steps=48, t_max=0.8, t_min=0.4)
    t = cfg.temperature(torch.tensor([48, 24, 1], dtype=torch.int32))
    assert t.tolist() == pytest.approx([0.8, 0.6, 0.4 + 0.4 / 48])


def test_config_validation():
    with pytest.raises(ValueError, match="t_max"):
        SamplerConfig(t_max=0.3, t_min=0.4)
    with pytest.raises(ValueError):
        SamplerConfig(max_denoising_steps=0)
    with pytest.raises(ValueError):
        SamplerConfig(entropy_bound=0)


@pytest.mark.parametrize("fields, message", [
    (dict(t_max=float("inf")), "t_max\n  Input should be a finite number"),
    (dict(t_min=float("nan")), "t_min\n  Input should be a finite number"),
    (dict(entropy_bound=float("inf")), "entropy_bound\n  Input should be a finite number"),
    (dict(confidence_threshold=float("inf")), "confidence_threshold\n  Input should be a finite number"),
    (dict(max_denoising_steps=True), "max_denoising_steps\n  Value error, an integer, not True"),
    (dict(stability_threshold=False), "stability_threshold\n  Value error, an integer, not False"),
    # (QA: at 1e-30 fast draws overwrote fixed tokens, reference draws raised inside torch.multinomial)
    (dict(t_max=1e-30, t_min=0.0), "the schedule's last temperature, t_min \\+ \\(t_max - t_min\\) / "
     "max_denoising_steps = 2.08e-32, must be at least 1e-06"),
    (dict(t_max=4e-5, t_min=0.0, max_denoising_steps=48), "= 8.33e-07, must be at least 1e-06"),
])
def test_config_refuses_degenerate_values(fields, message):
    with pytest.raises(ValueError, match=message):
        SamplerConfig(**fields)
    assert SamplerConfig(t_max=4.8e-5, t_min=0.0).t_max == 4.8e-5  # (the last temperature: exactly 1e-6)


def test_step_accepts_the_confident_position_and_renoises_the_rest():
    vocab, length = 50, 6
    sampler = RenoiseSampler(SamplerConfig())
    state = sampler.init_state(1, length, vocab, gens(1))
    logits = torch.zeros(1, length, vocab)  # uniform: entropy log(50) everywhere
    logits[0, 2, 7] = 100.0  # position 2 is certain of token 7
    logits[0, 4, 9] = 6.0  # position 4 is fairly sure of token 9 (entropy ~0.5 at t = 0.8)
    out = sampler.step(logits, state)
    # sum(H) - max(H): {2}: 0; {2, 4}: 0 (the lowest two are always in); {2, 4, any uniform}: H_4 > 0.1
    assert out.accepted.tolist() == [[False, False, True, False, True, False]]
    assert state.canvas[0, 2] == 7 and state.argmax[0, 2] == 7 and state.argmax[0, 4] == 9
    # mean entropy of the tempered distribution (t = t_max at the first step)
    p4 = torch.softmax(logits[0, 4] / 0.8, -1)
    h4 = float(-(p4 * p4.log()).sum())
    assert float(out.mean_entropy[0]) == pytest.approx((4 * math.log(vocab) + h4) / 6, rel=1e-5)
    assert int(state.steps_taken[0]) == 1 and int(state.steps_left[0]) == 47
    # the tempered logits are kept for self-conditioning
    assert torch.allclose(state.self_conditioning[0, 2, 7], torch.tensor(100.0 / 0.8))


def test_stop_rule_needs_a_stable_and_confident_canvas():
    rule = StableAndConfidentStop(stability=1, confidence=0.005)
    history = rule.init_history(2, 3, torch.device("cpu"))
    argmax = torch.tensor([[1, 2, 3], [4, 5, 6]])
    low = torch.tensor([0.001, 0.001])
    stop, history = rule(history, argmax, low)
    assert stop.tolist() == [False, False]  # nothing to compare with yet
    stop, history = rule(history, argmax, torch.tensor([0.001, 0.1]))
    assert stop.tolist() == [True, False]  # row 1 stable but not confident
    stop, _ = rule(history, torch.tensor([[1, 2, 0], [4, 5, 6]]), low)
    assert stop.tolist() == [False, True]  # row 0 changed


def test_stop_rule_window_of_two():
    rule = StableAndConfidentStop(stability=2, confidence=1.0)
    h = rule.init_history(1, 2, torch.device("cpu"))
    a, e = torch.tensor([[3, 4]]), torch.tensor([0.0])
    results = []
    for _ in range(3):
        stop, h = rule(h, a, e)
        results.append(bool(stop))
    assert results == [False, False, True]


def test_sampler_stops_when_converged_and_counts_steps():
    vocab, length = 20, 4
    sampler = RenoiseSampler(SamplerConfig(max_denoising_steps=10))
    state = sampler.init_state(2, length, vocab, gens(2))
    sharp = torch.full((2, length, vocab), -50.0)
    sharp[:, :, 3] = 50.0
    blurry = torch.zeros(2, length, vocab)
    steps = 0
    while not bool(state.done.all()):
        rows = state.active_rows()
        logits = torch.stack([sharp[0] if int(r) == 0 else blurry[1] for r in rows])
        sampler.step(logits, state, rows)
        steps += 1
    assert state.steps_taken.tolist() == [2, 10]  # row 0: stable on its 2nd step; row 1: budget
    assert state.stopped_early.tolist() == [True, False]
    assert state.argmax[0].tolist() == [3, 3, 3, 3]
    assert steps == 10


def test_zero_confidence_disables_early_stop():
    sampler = RenoiseSampler(SamplerConfig(max_denoising_steps=5, confidence_threshold=0.0))
    state = sampler.init_state(1, 3, 10, gens(1))
    logits = torch.full((1, 3, 10), -50.0)
    logits[..., 1] = 50.0
    while not bool(state.done.all()):
        sampler.step(logits, state)
    assert state.steps_taken.tolist() == [5] and state.stopped_early.tolist() == [False]


@pytest.mark.parametrize("draws", ["reference", "fast"])
def test_samples_follow_the_distribution(draws):
    sampler = RenoiseSampler(SamplerConfig(draws=draws, entropy_bound=100.0))  # accept everything
    seen = set()
    for seed in range(40):
        state = sampler.init_state(1, 2, 6, gens(1, seed))
        logits = torch.full((1, 2, 6), -1e4)
        logits[0, :, 1] = 0.0
        logits[0, :, 4] = 0.0
        sampler.step(logits, state)
        seen.update(state.canvas[0].tolist())
    assert seen == {1, 4}


# ---- constraints ---------------------------------------------------------------------------------------------------


@st.composite
def constrained_problem(draw):
    vocab = draw(st.integers(3, 30))
    length = draw(st.integers(1, 12))
    positions = []
    for _ in range(length):
        kind = draw(st.sampled_from(["fixed", "any", "set"]))
        if kind == "fixed":
            positions.append(draw(st.integers(0, vocab - 1)))
        elif kind == "any":
            positions.append(None)
        else:
            positions.append(draw(st.sets(st.integers(0, vocab - 1), min_size=1, max_size=vocab)))
    return vocab, positions


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    problem=constrained_problem(),
    rows=st.integers(1, 3),
    seed=st.integers(0, 2**31 - 1),
    draws=st.sampled_from(["reference", "fast"]),
    scale=st.sampled_from([0.1, 3.0, 30.0]),
)
def test_constraints_hold_at_every_step(problem, rows, seed, draws, scale):
    """Thousands of random steps (150 problems x up to 3 rows x 15 steps): no disallowed token ever appears in the
    noisy or the argmax canvas, and fixed tokens never change."""
    vocab, positions = problem
    template = CanvasTemplate.from_positions(vocab, positions)
    constraint = CanvasConstraint.from_templates([template] * rows)
    sampler = RenoiseSampler(SamplerConfig(max_denoising_steps=15, draws=draws))
    state = sampler.init_state(rows, len(positions), vocab, gens(rows, seed), constraint)
    fixed = torch.tensor([p if isinstance(p, int) else -1 for p in positions])
    torch.manual_seed(seed)
    assert all(template.violations(row) == [] for row in state.canvas)
    while not bool(state.done.all()):
        r = state.active_rows()
        sampler.step(torch.randn(r.numel(), len(positions), vocab) * scale, state, r)
        for row in range(rows):
            assert template.violations(state.canvas[row]) == []
            assert template.violations(state.argmax[row]) == []
            assert torch.equal(state.canvas[row][fixed >= 0], fixed[fixed >= 0])


def test_renoising_covers_the_allowed_set_uniformly():
    vocab = 40
    allowed = {5, 6, 30}
    template = CanvasTemplate.from_positions(vocab, [allowed] * 300)
    sampler = RenoiseSampler(SamplerConfig())
    state = sampler.init_state(1, 300, vocab, gens(1), CanvasConstraint.from_templates([template]))
    counts = torch.bincount(state.canvas[0], minlength=vocab)
    assert set(counts.nonzero().flatten().tolist()) == allowed
    assert counts[list(allowed)].min() > 60  # ~100 each


def test_fixed_positions_are_excluded_from_the_stop_statistic():
    """A canvas whose only free position is certain stops, though fixed positions are 'uncertain' in the raw logits."""
    vocab = 10
    template = CanvasTemplate.from_positions(vocab, [4, 4, None])
    sampler = RenoiseSampler(SamplerConfig(max_denoising_steps=20))
    state = sampler.init_state(1, 3, vocab, gens(1), CanvasConstraint.from_templates([template]))
    logits = torch.zeros(1, 3, vocab)
    logits[0, 2, 8] = 80.0
    while not bool(state.done.all()):
        out = sampler.step(logits, state)
        assert float(out.mean_entropy[0]) < 1e-6  # only position 2 counts
    assert state.steps_taken.tolist() == [2] and state.argmax[0].tolist() == [4, 4, 8]
