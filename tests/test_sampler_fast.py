"""Fast draws (`draws="fast"`): the counter-based stream, exact distributions, statistics over the allowed sets equal to
the reference's, and per-row reproducibility that no batch changes."""

import json
import os
import subprocess
import sys

import pytest
import torch
from scipy.stats import chisquare

from diffreason import CanvasConstraint, CanvasTemplate, Engine, GenerationRequest, RenoiseSampler, SamplerConfig
from diffreason.sampler import MASKED_OUT, counter_uniforms, first_max

M64 = 2**64 - 1


def splitmix64(key: int, index: int) -> float:
    """Output `index` of the splitmix64 stream seeded with `key`, top 53 bits over 2**53 (plain Python integers)."""
    z = (key + (index + 1) * 0x9E3779B97F4A7C15 - 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    z ^= z >> 31
    return (z >> 11) / 2**53


def gens(n, seed=0):
    return [torch.Generator().manual_seed(seed + i) for i in range(n)]


def test_counter_uniforms_are_splitmix64():
    keys = torch.tensor([0, -1, 2**62 + 12345, -(2**63)])
    counters = torch.tensor([0, 7, 1, 2**20])
    u = counter_uniforms(keys, counters, 5)
    for i, (k, n) in enumerate(zip(keys.tolist(), counters.tolist())):
        assert u[i].tolist() == [splitmix64(k % 2**64, n * 2**32 + c) for c in range(5)]
    assert float(u.max()) < 1.0 and float(u.min()) >= 0.0


def test_counter_uniforms_are_uniform():
    u = counter_uniforms(torch.tensor([3, 99]), torch.tensor([1, 1]), 20_000).flatten()
    counts = torch.histc(u.float(), bins=20, min=0, max=1)
    assert chisquare(counts.numpy()).pvalue > 1e-3


# ---- exact distributions --------------------------------------------------------------------------------------------

V = 12
LOGITS = torch.tensor([2.0, 1.5, -1.0, 0.3, 1.0, 0.0, -0.5, 0.8, 1.2, -2.0, 0.1, 0.6])
ALL = list(range(V))
SMALL = [1, 3, 4, 7]  # at most half the vocabulary: the compact layout
LARGE = [0, 1, 2, 3, 4, 5, 7, 8, 11]  # more than half: dense


def _where(positions, allowed):
    return [i for i, p in enumerate(positions) if p == allowed or (p is None and allowed == ALL)]


def _expected(allowed, temperature, n):
    probs = torch.softmax(LOGITS[allowed].double() / temperature, -1)
    return (probs * n).numpy()


def _layout_cases():
    C = 40
    return {
        "unconstrained": [None] * C,
        "compact, with fixed positions": [SMALL if i % 4 else 5 for i in range(C)],
        "dense, a few free positions": [LARGE if i % 3 == 0 else 6 for i in range(C)],
        "dense, every position": [LARGE] * (C - 1) + [None],
    }


@pytest.mark.parametrize("case", list(_layout_cases()))
def test_fast_samples_follow_the_tempered_masked_softmax(case):
    """Every free position accepted (a huge entropy bound): over 60 rows x 40 positions the sampled tokens follow
    softmax(logits / t_max) restricted to the allowed set — the argmax-first shortcut and the search over the others
    both weigh in (p_max is about 0.3)."""
    positions = _layout_cases()[case]
    rows, C = 60, len(positions)
    template = CanvasTemplate.from_positions(V, positions) if case != "unconstrained" else None
    constraint = CanvasConstraint.from_templates([template] * rows) if template is not None else None
    sampler = RenoiseSampler(SamplerConfig(draws="fast", entropy_bound=1e9, t_max=0.8, t_min=0.4))
    state = sampler.init_state(rows, C, V, gens(rows, 7), constraint)
    logits = LOGITS.expand(rows, C, V).clone()
    out = sampler.step(logits, state)
    free = [i for i, p in enumerate(positions) if not isinstance(p, int)]
    assert bool(out.accepted[:, free].all())
    checked = 0
    for allowed in (ALL, SMALL, LARGE):
        tokens = state.canvas[:, _where(positions, allowed)].flatten()
        if tokens.numel():
            counts = torch.bincount(tokens, minlength=V)
            assert int(counts.sum()) == int(counts[allowed].sum())  # nothing outside the set
            assert chisquare(counts[allowed].numpy(), _expected(allowed, 0.8, tokens.numel())).pvalue > 1e-4, case
            checked += tokens.numel()
    assert checked >= 60 * 13
    fixed = [i for i, p in enumerate(positions) if isinstance(p, int)]
    if fixed:
        assert torch.equal(state.canvas[:, fixed], torch.tensor([positions[i] for i in fixed]).expand(rows, -1))


def test_the_distribution_check_can_fail():
    """The chi-square check above rejects samples of the wrong temperature (so it tests something)."""
    sampler = RenoiseSampler(SamplerConfig(draws="fast", entropy_bound=1e9, t_max=0.8, t_min=0.4))
    state = sampler.init_state(60, 40, V, gens(60, 7))
    sampler.step(LOGITS.expand(60, 40, V).clone(), state)
    counts = torch.bincount(state.canvas.flatten(), minlength=V)
    assert chisquare(counts.numpy(), _expected(ALL, 0.8, counts.sum().item())).pvalue > 1e-4
    assert chisquare(counts.numpy(), _expected(ALL, 1.0, counts.sum().item())).pvalue < 1e-6


@pytest.mark.parametrize("case", list(_layout_cases()))
def test_fast_noise_is_uniform_over_the_allowed_set(case):
    positions = _layout_cases()[case]
    rows = 80
    template = CanvasTemplate.from_positions(V, positions) if case != "unconstrained" else None
    constraint = CanvasConstraint.from_templates([template] * rows) if template is not None else None
    state = RenoiseSampler(SamplerConfig(draws="fast")).init_state(rows, len(positions), V, gens(rows), constraint)
    for allowed in (ALL, SMALL, LARGE):
        where = _where(positions, allowed)
        if where:
            counts = torch.bincount(state.canvas[:, where].flatten(), minlength=V)
            assert int(counts.sum()) == int(counts[allowed].sum())
            assert chisquare(counts[allowed].numpy()).pvalue > 1e-4, (case, allowed)


# ---- the same statistics as the reference ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(_layout_cases()))
def test_fast_statistics_equal_the_reference(case):
    """One step on the same logits: the accepted positions, argmax canvas, mean entropy and self-conditioning logits of
    fast draws are the reference's (only the random draws differ)."""
    positions = _layout_cases()[case]
    rows, C = 5, len(positions)
    template = CanvasTemplate.from_positions(V, positions) if case != "unconstrained" else None
    logits = torch.randn(rows, C, V, generator=torch.Generator().manual_seed(1)) * 3
    outs = {}
    for draws in ("reference", "fast"):
        constraint = CanvasConstraint.from_templates([template] * rows) if template is not None else None
        sampler = RenoiseSampler(SamplerConfig(draws=draws, entropy_bound=0.5))
        state = sampler.init_state(rows, C, V, gens(rows), constraint)
        out = sampler.step(logits.clone(), state)
        outs[draws] = out, state
    (ref, ref_state), (fast, fast_state) = outs["reference"], outs["fast"]
    assert torch.equal(ref.accepted, fast.accepted)
    assert torch.equal(ref_state.argmax, fast_state.argmax)
    assert torch.allclose(ref.mean_entropy, fast.mean_entropy, rtol=1e-5, atol=1e-6)
    ref_sc, fast_sc = ref_state.self_conditioning, fast_state.self_conditioning
    finite = ref_sc.isfinite()  # (-inf where disallowed; a dense group of fast draws writes MASKED_OUT there)
    assert torch.equal(fast_sc[finite], ref_sc[finite]) and bool((fast_sc[~finite] <= MASKED_OUT).all())
    assert torch.equal(fast_sc.softmax(-1), ref_sc.softmax(-1))  # the signal the model reads from them
    # accepted positions hold a token of their set; the others noise within it; fixed ones their token
    for row in fast_state.canvas:
        assert (template.violations(row) if template is not None else []) == []


# ---- reproducibility: a row never depends on its batch --------------------------------------------------------------


def _row_logits(row_id: int, step: int, C: int) -> torch.Tensor:
    if row_id == 1:  # sharp and the same at every step: it converges and leaves the batch first
        logits = torch.full((C, V), -10.0)
        logits[torch.arange(C), torch.tensor(LARGE)[torch.arange(C) % len(LARGE)]] = 10.0
        return logits
    return torch.randn(C, V, generator=torch.Generator().manual_seed(1000 * row_id + step)) * 2


def _run(row_ids, templates, seeds, C):
    sampler = RenoiseSampler(SamplerConfig(draws="fast", max_denoising_steps=10, confidence_threshold=0.05))
    constraint = CanvasConstraint.from_templates(templates)
    state = sampler.init_state(len(row_ids), C, V, [torch.Generator().manual_seed(s) for s in seeds], constraint)
    canvases = {r: [state.canvas[j].tolist()] for j, r in enumerate(row_ids)}
    while not bool(state.done.all()):
        rows = state.active_rows()
        logits = torch.stack([_row_logits(row_ids[j], int(state.steps_taken[j]), C) for j in rows.tolist()])
        sampler.step(logits, state, rows)
        for j in rows.tolist():
            canvases[row_ids[j]].append(state.canvas[j].tolist())
    return {r: (canvases[r], state.argmax[j].tolist(), int(state.steps_taken[j])) for j, r in enumerate(row_ids)}


def test_a_row_gives_the_same_tokens_alone_and_in_any_batch():
    """Rows of every layout (compact, dense subset, dense everything, unconstrained), batched in different orders and
    leaving at different steps: each row's canvases, step by step, are those it has alone."""
    C = 16
    templates = {
        0: CanvasTemplate.from_positions(V, [SMALL if i % 3 else 2 for i in range(C)]),
        1: CanvasTemplate.from_positions(V, [LARGE if i % 2 else 9 for i in range(C)]),
        2: CanvasTemplate.from_positions(V, [LARGE] * C),
        3: CanvasTemplate.unconstrained(C, V),
        4: CanvasTemplate.from_positions(V, [SMALL] * C),
        5: CanvasTemplate.from_positions(V, [[2, 5] if i % 2 else 10 for i in range(C)]),  # compact, narrower
        6: CanvasTemplate.from_positions(V, [[2, 5] if i % 3 else SMALL for i in range(C)]),  # two widths in a row
    }
    seeds = {r: 50 + r for r in templates}
    alone = {r: _run([r], [templates[r]], [seeds[r]], C)[r] for r in templates}
    assert len({steps for _, _, steps in alone.values()}) > 1  # rows leave the batch at different steps
    for order in ([0, 1, 2, 3, 4, 5, 6], [4, 2, 0], [1, 4], [3, 0, 1], [5, 6, 4], [6, 0, 5, 2, 1]):
        batched = _run(order, [templates[r] for r in order], [seeds[r] for r in order], C)
        for r in order:
            assert batched[r] == alone[r], (order, r)


def test_first_max_is_torch_max_ties_and_nan_included():
    g = torch.Generator().manual_seed(1)
    for trial in range(600):
        rows, width = int(torch.randint(1, 40, (1,), generator=g)), int(torch.randint(1, 40, (1,), generator=g))
        x = torch.randint(-2, 2, (rows, width * (32 if trial % 2 else 1)), generator=g).float()  # (many ties)
        if trial % 5 == 0:
            x = torch.randn(x.shape, generator=g)
        if trial % 3 == 0:
            x[torch.rand(x.shape, generator=g) < 0.02] = float("nan")
        if trial % 7 == 0:
            x[torch.rand(x.shape, generator=g) < 0.05] = float("inf")
        if trial % 11 == 0:
            x[: rows // 2] = float("-inf")
        top, index = x.max(dim=1, keepdim=True)
        got_top, got_index = first_max(x)
        assert torch.equal(got_index, index.squeeze(1)) and torch.equal(got_top.isnan(), top.isnan())
        assert torch.equal(got_top.nan_to_num(), top.nan_to_num())


def test_fast_draws_keep_the_template_at_the_lowest_temperature(tiny_lm):
    """A nearly free canvas (fast draws: every position in one dense group, disallowed tokens biased by -1e30) at the
    schedule's lowest allowed temperature keeps its fixed tokens and sets."""
    template = CanvasTemplate.from_positions(tiny_lm.vocab_size, [7] * 5 + [{5, 6}] * 5)
    config = SamplerConfig(draws="fast", max_denoising_steps=2, t_max=2e-6, t_min=0.0)
    results = Engine(tiny_lm, config).generate_batch(
        [GenerationRequest("hi", seed=s, template=template, max_new_tokens=64) for s in range(4)])
    for result in results:
        assert template.violations(result.raw_tokens[:10]) == []


def test_successive_canvases_of_a_request_draw_new_numbers():
    """Keys come from the request's generator, so its next canvas (same generator, advanced) draws other numbers."""
    sampler = RenoiseSampler(SamplerConfig(draws="fast"))
    g = torch.Generator().manual_seed(5)
    first = sampler.init_state(1, 64, 1000, [g])
    second = sampler.init_state(1, 64, 1000, [g])
    again = sampler.init_state(1, 64, 1000, [torch.Generator().manual_seed(5)])
    assert not torch.equal(first.canvas, second.canvas) and torch.equal(first.canvas, again.canvas)


def test_engine_batches_equal_single_runs_with_fast_draws(tiny_lm):
    engine = Engine(tiny_lm, SamplerConfig(draws="fast"), max_batch_size=8)
    digits = tiny_lm.tokenizer.convert_tokens_to_ids(list("123456789"))
    grid = CanvasTemplate.from_positions(tiny_lm.vocab_size, [set(digits) if i % 4 else digits[0] for i in range(40)])
    requests = [
        GenerationRequest("a longer prompt here", seed=1, max_new_tokens=64),
        GenerationRequest("grid:", seed=2, template=grid),
        GenerationRequest([2, 50, 51], seed=3, template=grid),
        GenerationRequest("", seed=4, max_new_tokens=96),
    ]
    batched = engine.generate_batch(requests)
    for req, res in zip(requests, batched):
        single = engine.generate(req.prompt, seed=req.seed, template=req.template, max_new_tokens=req.max_new_tokens)
        assert res.raw_tokens == single.raw_tokens and res.steps == single.steps
    assert grid.violations(batched[1].raw_tokens) == [] and grid.violations(batched[2].raw_tokens) == []


# ---- the command line: fast draws by default where parity is not the point ------------------------------------------


def _cli(*args):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "diffreason.cli", *args], capture_output=True, text=True,
                          timeout=300, env=env)


def test_solve_sudoku_draws_fast_by_default_and_reference_on_request(tmp_path):
    from diffreason.tasks import sudoku as S

    model = tmp_path / "sudoku"
    S.build_sudoku_model("sudoku-tiny", seed=0).save(model)
    puzzle = S.to_string(S.generate("easy", 3).puzzle)
    runs = {}
    for args in ((), ("--draws", "fast"), ("--draws", "reference"), ("--draws", "fast", "--mode", "verified")):
        p = _cli("solve", "sudoku", "--model", str(model), "--steps", "3", "--json", *args, puzzle)
        assert p.returncode == 0, p.stderr
        runs[args] = json.loads(p.stdout)
        assert runs[args]["puzzle"] == puzzle and runs[args]["steps"] <= 3
    assert runs[()] == {**runs[("--draws", "fast")], "seconds": runs[()]["seconds"]}
    bad = _cli("solve", "sudoku", "--model", str(model), "--draws", "exact", puzzle)
    assert bad.returncode == 2 and "--draws must be one of reference, fast, got 'exact'" in bad.stderr
    both = _cli("generate", "--model", str(model), "--fast", "--draws", "reference", "x")
    assert both.returncode == 2 and "--fast and --draws reference contradict each other" in both.stderr


# ---- the commit: every slot's best path in one joint Viterbi pass ----------------------------------------------------


@pytest.mark.parametrize("ties", [False, True])
def test_joint_best_paths_equal_each_slots_own_best_path(ties):
    """A schema with required members (token automata) and optional ones (prefixed automata): over random
    log-probabilities, with ties (rounded logits) and with the pad favoured (members left out), the joint pass gives
    each slot's own `best_path` exactly; the commit writes them."""
    from transformers import AutoTokenizer

    from diffreason.model import EMBEDDED_JSON
    from diffreason.sampler import best_paths
    from diffreason.structured import constraint_template

    tokenizer = AutoTokenizer.from_pretrained(EMBEDDED_JSON)
    schema = {"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}},
        "email": {"type": "string", "format": "email"}, "nick": {"type": "string", "maxLength": 8},
        "ok": {"type": "boolean"}}, "required": ["name", "age", "tags"]}
    template, _ = constraint_template(tokenizer, 128, json_schema=schema)
    kinds = {type(slot.automaton).__name__ for slot in template.slots}
    assert kinds == {"TokenAutomaton", "PrefixedAutomaton"}
    g = torch.Generator().manual_seed(3)
    for trial in range(4):
        canvases = [template.canvas(k, 128) for k in range(template.num_canvases(128))]
        logits = torch.randn(len(canvases), 128, 1024, generator=g) * 3
        logits = logits.round() if ties else logits
        logits[..., tokenizer.pad_token_id] += 4.0 * (trial % 2)
        jobs = [(slot, torch.log_softmax(logits[k], -1)[slot.start : slot.start + slot.length])
                for k, canvas in enumerate(canvases) for slot in canvas.slots]
        assert best_paths(jobs) == [slot.automaton.best_path(lp, slot.backward) for slot, lp in jobs]
        # the commit: each slot of each row replaced by its path, the rest the argmax
        state = RenoiseSampler().init_state(len(canvases), 128, 1024, gens(len(canvases)))
        state.self_conditioning, state.argmax = logits, logits.argmax(-1)
        expected = logits.argmax(-1)
        for k, canvas in enumerate(canvases):
            for slot in canvas.slots:
                lp = torch.log_softmax(logits[k], -1)[slot.start : slot.start + slot.length]
                expected[k, slot.start : slot.start + slot.length] = torch.tensor(
                    slot.automaton.best_path(lp, slot.backward))
        assert torch.equal(RenoiseSampler.commit(state, canvases), expected)
