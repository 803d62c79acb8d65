"""The engine against transformers' own `generate`: same checkpoint, prompt and seed → the same tokens and steps."""

import pytest
import torch

from diffreason import CanvasTemplate, Engine


def reference(lm, ids, seed, max_new_tokens):
    torch.manual_seed(seed)
    out = lm.model.generate(torch.tensor([ids]), max_new_tokens=max_new_tokens)
    tokens = out.sequences[0, len(ids) :].tolist()
    # tokens_per_forward = non-pad tokens / decoder passes → the reference's total step count.
    valid = sum(t != lm.tokenizer.pad_token_id for t in tokens)
    passes = round(valid / float(out.tokens_per_forward[0]))
    return tokens, passes


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parity_single_canvas(tiny_lm, seed):
    ids = [tiny_lm.tokenizer.bos_token_id] + tiny_lm.tokenizer.encode("Hello diffusion", add_special_tokens=False)
    ref, passes = reference(tiny_lm, ids, seed, tiny_lm.canvas_length)
    res = Engine(tiny_lm).generate(ids, seed=seed, max_new_tokens=tiny_lm.canvas_length)
    assert res.raw_tokens == ref
    assert sum(res.steps) == passes
    assert len(res.steps) == 1


@pytest.mark.parametrize("seed", [3, 4])
def test_parity_multi_canvas(tiny_lm, seed):
    ids = [2, 17, 40, 41]
    ref, passes = reference(tiny_lm, ids, seed, 3 * tiny_lm.canvas_length)
    res = Engine(tiny_lm).generate(ids, seed=seed, max_new_tokens=3 * tiny_lm.canvas_length)
    assert res.raw_tokens == ref
    assert sum(res.steps) == passes


@pytest.mark.parametrize("seed", range(6))
def test_parity_with_early_stop(confident_lm, seed):
    """A sharp model converges before the budget; the stop step and the tokens must match the reference."""
    ids = [2, 30 + seed]
    ref, passes = reference(confident_lm, ids, seed, 2 * confident_lm.canvas_length)
    res = Engine(confident_lm).generate(ids, seed=seed, max_new_tokens=2 * confident_lm.canvas_length)
    assert res.raw_tokens == ref
    assert sum(res.steps) == passes


def test_parity_early_stop_happens(confident_lm):
    """Guard for the test above: the confident model really does stop early on some seeds."""
    engine = Engine(confident_lm)
    results = [engine.generate([2, 30 + s], seed=s, max_new_tokens=64) for s in range(6)]
    assert any(any(r.stopped_early) for r in results)
    assert any(min(r.steps) < confident_lm.sampler_config.max_denoising_steps for r in results)


def test_parity_unconstrained_template_is_a_no_op(tiny_lm):
    ids = [2, 9]
    ref, _ = reference(tiny_lm, ids, 5, tiny_lm.canvas_length)
    template = CanvasTemplate.unconstrained(tiny_lm.canvas_length, tiny_lm.vocab_size)
    res = Engine(tiny_lm).generate(ids, seed=5, template=template)
    assert res.raw_tokens == ref
