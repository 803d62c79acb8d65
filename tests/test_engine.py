"""Engine behaviour on a tiny checkpoint: templates hold, batches equal single runs, seeds decide, traces."""

import pytest
import torch

from diffreason import CanvasTemplate, ConfigError, Engine, GenerationRequest, SamplerConfig, TemplateError


def test_template_fixed_and_restricted_positions_hold_across_canvases(tiny_lm):
    C, V = tiny_lm.canvas_length, tiny_lm.vocab_size
    digits = tiny_lm.tokenizer.convert_tokens_to_ids(list("123456789"))
    positions = []
    for i in range(C + 10):  # spans two canvases
        positions.append(digits[i % 9] if i % 3 == 0 else set(digits))
    template = CanvasTemplate.from_positions(V, positions)
    for draws in ("reference", "fast"):
        res = Engine(tiny_lm, SamplerConfig(draws=draws)).generate("grid:", template=template, seed=3)
        assert len(res.steps) == 2
        assert template.violations(res.raw_tokens) == []
        assert set(res.raw_tokens[: len(template)]) <= set(digits)


def test_past_a_templates_final_eos_its_last_canvas_is_pad(tiny_lm):
    """A template ending in a fixed EOS mid-canvas: the rest of that canvas is fixed to pad while it denoises (not
    sampled, not in the stop rule); a template ending otherwise leaves it free."""
    C, V = tiny_lm.canvas_length, tiny_lm.vocab_size
    eos, pad = tiny_lm.tokenizer.eos_token_id, tiny_lm.tokenizer.pad_token_id
    body = [{10, 11, 12}] * (C + 4)
    for ending, expected in ((eos, pad), (13, -1)):
        template = CanvasTemplate.from_positions(V, body + [ending])
        for draws in ("reference", "fast"):
            seen = []  # each step's constraint: canvas 0's steps, then canvas 1's
            res = Engine(tiny_lm, SamplerConfig(draws=draws, max_denoising_steps=3)).generate(
                "x", template=template, seed=1, step_hook=lambda state, rows: seen.append(state.constraint.fixed[0]))
            assert res.steps == [3, 3] and template.violations(res.raw_tokens) == []
            assert bool((seen[0] == -1).all())  # canvas 0: the template's free positions
            last = seen[-1]
            assert int(last[4]) == ending and bool((last[5:] == expected).all())
            if ending == eos:
                assert res.raw_tokens[C + 5:] == [pad] * (C - 5)


def test_fixed_tokens_after_a_position_that_allows_eos_are_kept(tiny_lm):
    """(A position allowing EOS before fixed tokens: the model chose EOS and the fixed tokens were lost, every seed
    of 30: QA, 2026-12-07.) EOS is kept out there; a template that fixes EOS before them is refused."""
    eos, v = tiny_lm.tokenizer.eos_token_id, tiny_lm.vocab_size
    fixed = [40, 41, 42]
    template = CanvasTemplate.from_positions(v, [None, {eos, 5}, *fixed])
    for seed in range(4):
        r = Engine(tiny_lm).generate("x", template=template, seed=seed)
        assert r.raw_tokens[1:5] == [5, *fixed] and template.violations(r.raw_tokens) == [], r.raw_tokens[:8]
        assert eos not in r.raw_tokens[:5]
    with pytest.raises(TemplateError, match="position 3 allows only EOS"):
        Engine(tiny_lm).generate("x", template=CanvasTemplate.from_positions(v, [*fixed, eos, *fixed]))


def test_batch_results_equal_single_results(tiny_lm):
    engine = Engine(tiny_lm, max_batch_size=8)
    tmpl = CanvasTemplate.from_positions(tiny_lm.vocab_size, [{10, 11, 12}] * 8 + [None] * 4)
    requests = [
        GenerationRequest("a longer prompt here", seed=1, max_new_tokens=64),
        GenerationRequest("short", seed=2, max_new_tokens=32),
        GenerationRequest([2, 50, 51], seed=3, template=tmpl),
        GenerationRequest("", seed=4, max_new_tokens=96),
    ]
    batched = engine.generate_batch(requests)
    for req, res in zip(requests, batched):
        single = engine.generate(req.prompt, seed=req.seed, template=req.template, max_new_tokens=req.max_new_tokens)
        assert res.raw_tokens == single.raw_tokens
        assert res.steps == single.steps
    assert tmpl.violations(batched[2].raw_tokens) == []


def test_batched_early_stop_is_per_request(confident_lm):
    engine = Engine(confident_lm)
    results = engine.generate_batch([GenerationRequest([2, 30 + s], seed=s, max_new_tokens=32) for s in range(6)])
    steps = [r.steps[0] for r in results]
    assert len(set(steps)) > 1  # rows stop independently


def test_seed_determinism(tiny_lm):
    engine = Engine(tiny_lm)
    a, b = engine.generate("x", seed=11), engine.generate("x", seed=11)
    c = engine.generate("x", seed=12)
    assert a.raw_tokens == b.raw_tokens and a.raw_tokens != c.raw_tokens


def test_eos_ends_generation_and_trims(tiny_lm):
    eos = tiny_lm.tokenizer.eos_token_id
    C = tiny_lm.canvas_length
    template = CanvasTemplate.from_positions(tiny_lm.vocab_size, [None] * 5 + [eos] + [None] * (C - 6))
    res = Engine(tiny_lm).generate("hi", template=template, max_new_tokens=3 * C, seed=0)
    assert res.finished and len(res.steps) == 1 and len(res.tokens) <= 5
    assert res.raw_tokens[6:] == [tiny_lm.tokenizer.pad_token_id] * (C - 6)


def test_trace_records_every_step(tiny_lm):
    seen = []
    res = Engine(tiny_lm, SamplerConfig(max_denoising_steps=6)).generate(
        "t", seed=0, max_new_tokens=tiny_lm.canvas_length, trace=True, callback=lambda i, tr: seen.append((i, tr.step))
    )
    assert [t.step for t in res.trace] == [1, 2, 3, 4, 5, 6] and res.steps == [6]
    assert seen == [(0, s) for s in range(1, 7)]
    assert all(len(t.canvas) == tiny_lm.canvas_length and any(t.accepted) for t in res.trace)
    assert res.trace[-1].argmax == res.raw_tokens[: tiny_lm.canvas_length] or res.finished


def test_engine_errors(tiny_lm):
    engine = Engine(tiny_lm)
    with pytest.raises(TemplateError, match=f"vocabulary of {tiny_lm.vocab_size + 1}"):  # (larger than the model's)
        engine.generate("x", template=CanvasTemplate.from_positions(tiny_lm.vocab_size + 1, [1]))
    with pytest.raises(TemplateError, match="shorter than the template"):
        engine.generate("x", template=CanvasTemplate.from_positions(tiny_lm.vocab_size, [4, 5, 6]), max_new_tokens=2)
    with pytest.raises(ConfigError, match="outside the vocabulary"):
        engine.generate([2, 10**6])
    with pytest.raises(ConfigError, match="at least 1"):
        engine.generate("x", max_new_tokens=0)
    limit = tiny_lm.context_length
    with pytest.raises(ConfigError, match=f"the prompt \\({limit} tokens\\) .* the model has {limit}"):
        engine.generate([2] * limit, max_new_tokens=1)  # (past the model's positions)
    for seed in (2**64, -1, 1.5, True, "3"):
        with pytest.raises(ConfigError, match=r"seed must be an integer in \[0, 2\*\*64\)"):
            engine.generate("x", seed=seed, max_new_tokens=2)
    assert engine.generate("x", seed=torch.tensor(3), max_new_tokens=2).tokens == engine.generate(
        "x", seed=3, max_new_tokens=2).tokens
    for size in (0, -1, 2.0, None):
        with pytest.raises(ConfigError, match="max_batch_size must be an integer of at least 1"):
            Engine(tiny_lm, max_batch_size=size)


def test_output_stops_at_max_new_tokens_while_canvases_come_whole(tiny_lm):
    """transformers commits whole canvases (raw_tokens keep them, for parity); the output is cut at max_new_tokens,
    and `finished` means an EOS within it."""
    C, eos = tiny_lm.canvas_length, tiny_lm.tokenizer.eos_token_id
    whole = Engine(tiny_lm).generate("cut", seed=4, max_new_tokens=C)
    for n in (1, 3, C - 1):
        cut = Engine(tiny_lm).generate("cut", seed=4, max_new_tokens=n)
        assert cut.raw_tokens == whole.raw_tokens and len(cut.raw_tokens) == C
        assert cut.tokens == whole.tokens[:n]
        assert cut.finished == (eos in whole.raw_tokens[:n])
        assert cut.text == tiny_lm.tokenizer.decode(cut.tokens, skip_special_tokens=True)
