"""The forward pass with the head and the self-conditioning signal at free positions only (diffreason.free_forward)
gives the model's own logits there, bit for bit, and the engine's tokens do not change with it."""

import pytest
import torch
from transformers import DynamicCache

from diffreason import CanvasTemplate, Engine, SamplerConfig, build_model, free_forward
from diffreason.engine import GenerationRequest


def _inputs(lm, batch: int, fixed_share: float, seed: int):
    """A prompt cache, canvases [b, C], their fixed tokens (-1 where free) and self-conditioning logits that are
    one-hot at fixed positions (as the sampler leaves them)."""
    g = torch.Generator().manual_seed(seed)
    V, C = lm.vocab_size, lm.canvas_length
    model = lm.model
    cache = DynamicCache(config=model.config.get_text_config(decoder=True))
    with torch.inference_mode():
        model(input_ids=torch.randint(0, V, (batch, 9), generator=g), decoder_input_ids=torch.zeros(batch, 1).long(),
              past_key_values=cache)
    canvas = torch.randint(0, V, (batch, C), generator=g)
    fixed = torch.where(torch.rand(batch, C, generator=g) < fixed_share, canvas, -1)
    sc = torch.randn(batch, C, V, generator=g) * 4
    one_hot = torch.arange(V) == fixed[..., None]
    sc = torch.where((fixed[..., None] >= 0) & ~one_hot, float("-inf"), sc).to(model.dtype)
    return cache, canvas, fixed, sc


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_free_positions_get_the_models_own_logits(dtype):
    lm = build_model("tiny", seed=0)  # (its own: casting the session's model would round its weights for good)
    model = lm.model.to(dtype)
    cache, canvas, fixed, sc = _inputs(lm, 3, 0.6, seed=1)
    where = free_forward.Positions.of(fixed)
    free = fixed < 0
    assert 0 < where.share < 0.9
    buffer = None
    with torch.inference_mode():
        for signal in (None, sc, sc * 0.5):  # the first step (no signal), then two steps into one buffer
            whole = model(decoder_input_ids=canvas, past_key_values=cache, self_conditioning_logits=signal).logits
            part = free_forward.forward(model, where, decoder_input_ids=canvas, past_key_values=cache,
                                        self_conditioning_logits=signal, out=buffer)
            buffer = part
            assert part.dtype == torch.float32 and part.shape == whole.shape
            assert torch.equal(part[free], whole[free].float())
            token = fixed.clamp(min=0)[..., None]
            own = part.gather(-1, token)[~free]
            torch.testing.assert_close(own, whole.float().gather(-1, token)[~free], atol=0.05, rtol=0.01)
            rest = part.scatter(-1, token, float("-inf"))[~free]
            assert bool(torch.isneginf(rest).all())


def test_a_fixed_positions_signal_is_its_tokens_embedding(tiny_lm):
    """The shortcut holds only because the sampler's logits are one-hot at fixed positions: with other logits there
    the model's signal differs, and so do the free positions' logits (the comparison above can fail)."""
    model = tiny_lm.model
    cache, canvas, fixed, sc = _inputs(tiny_lm, 2, 0.5, seed=2)
    dense = torch.randn(sc.shape, generator=torch.Generator().manual_seed(3))  # not one-hot anywhere
    where = free_forward.Positions.of(fixed)
    with torch.inference_mode():
        whole = model(decoder_input_ids=canvas, past_key_values=cache, self_conditioning_logits=dense).logits
        part = free_forward.forward(model, where, decoder_input_ids=canvas, past_key_values=cache,
                                    self_conditioning_logits=dense)
    assert not torch.equal(part[fixed < 0], whole[fixed < 0])


def test_the_hook_is_gone_after_the_call_even_when_it_fails(tiny_lm):
    model = tiny_lm.model
    hooks = model.model.decoder.self_conditioning._forward_pre_hooks
    cache, canvas, fixed, sc = _inputs(tiny_lm, 2, 0.5, seed=4)
    where = free_forward.Positions.of(fixed)
    with torch.inference_mode():
        free_forward.forward(model, where, decoder_input_ids=canvas, past_key_values=cache, self_conditioning_logits=sc)
        assert len(hooks) == 0
        with pytest.raises(Exception):
            free_forward.forward(model, where, decoder_input_ids=canvas, past_key_values=cache,
                                 self_conditioning_logits=sc, decoder_position_ids=torch.zeros(5, 3).long())
    assert len(hooks) == 0
    # and the model's own forward is untouched afterwards: no signal means the zero signal again
    with torch.inference_mode():
        a = model(decoder_input_ids=canvas, past_key_values=cache).logits
        b = model(decoder_input_ids=canvas, past_key_values=cache, self_conditioning_logits=None).logits
    assert torch.equal(a, b)


def test_the_engine_gives_the_same_tokens_with_and_without_it(confident_lm, monkeypatch):
    """Fast draws over templates that fix a share of the canvas, rows leaving the batch at different steps: tokens
    and steps are those of the whole forward, and the free-position forward did run."""
    lm = confident_lm
    V, C = lm.vocab_size, lm.canvas_length
    digits = lm.tokenizer.convert_tokens_to_ids(list("123456789"))
    grid = CanvasTemplate.from_positions(V, [set(digits) if i % 3 else digits[i % 9] for i in range(C)])
    prose = CanvasTemplate.from_positions(V, [None if i % 4 else 7 for i in range(2 * C)])
    requests = [GenerationRequest("grid:", seed=s, template=grid) for s in range(3)]
    requests += [GenerationRequest("text", seed=9, template=prose), GenerationRequest("x", seed=4, max_new_tokens=C)]
    calls = []
    original = free_forward.forward
    monkeypatch.setattr(free_forward, "forward", lambda *a, **k: calls.append(1) or original(*a, **k))
    config = SamplerConfig(draws="fast", entropy_bound=50.0, confidence_threshold=0.2)
    whole = Engine(lm, config, free_logits=False).generate_batch(requests)
    assert not calls
    part = Engine(lm, config).generate_batch(requests)
    assert calls
    assert len({tuple(r.steps) for r in whole}) > 1  # rows leave at different steps
    for a, b in zip(whole, part):
        assert a.raw_tokens == b.raw_tokens and a.steps == b.steps


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_one_dense_group_hands_its_logits_over_and_gives_the_same_tokens(monkeypatch, dtype):
    """Free positions that allow most of the vocabulary around fixed tokens (one dense group): while every row steps,
    the free logits pass from the head to the sampler apart, and the softmax of the self-conditioning logits back to
    the next forward (float32), without the [b, C, V] buffers; after a row leaves, everything is written back. The
    tokens and steps are those of the whole forward."""
    from diffreason.sampler import RenoiseSampler

    lm = build_model("tiny", seed=1)  # (as the confident_lm fixture, in `dtype`)
    with torch.no_grad():
        lm.model.model.decoder.embed_tokens.weight.mul_(30)
    lm.model.to(dtype)
    V, C = lm.vocab_size, lm.canvas_length
    prose = CanvasTemplate.from_positions(V, [None if i % 4 else 7 for i in range(2 * C)])
    requests = [GenerationRequest("text", seed=s, template=prose) for s in (9, 3, 5)]
    handed = []
    step = RenoiseSampler.step
    monkeypatch.setattr(RenoiseSampler, "step", lambda self, logits, state, rows=None, free_logits=None: (
        handed.append(free_logits is not None) or step(self, logits, state, rows, free_logits)))
    config = SamplerConfig(draws="fast", entropy_bound=50.0, confidence_threshold=0.2)
    whole = Engine(lm, config, free_logits=False).generate_batch(requests)
    assert not any(handed)
    part = Engine(lm, config).generate_batch(requests)
    assert any(handed) and not all(handed)  # (after a row left, the others step without it)
    assert len({tuple(r.steps) for r in whole}) > 1
    for a, b in zip(whole, part):
        assert a.raw_tokens == b.raw_tokens and a.steps == b.steps


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.gpu
def test_on_cuda_free_positions_match_the_whole_forward():
    """On a GPU (bfloat16, FlashInfer where the engine picks it) a subset's products may take other kernels than the
    whole batch's, so the logits agree to bfloat16 rounding rather than bit for bit; the engine's constrained output
    stays valid and its fixed tokens in place."""
    preset = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=64, global_head_dim=128, sliding_window=64, num_experts=4,
                  top_k_experts=2, moe_intermediate_size=128, canvas_length=64)
    lm = build_model(preset, seed=0)
    lm.model.to("cuda", torch.bfloat16)
    V, C = lm.vocab_size, lm.canvas_length
    template = CanvasTemplate.from_positions(V, [{5, 6, 7} if i % 3 else 9 for i in range(C)])
    engine = Engine(lm, SamplerConfig(draws="fast", max_denoising_steps=6))
    result = engine.generate("x", template=template, seed=0)
    assert template.violations(result.raw_tokens[:C]) == []
    model = lm.model
    g = torch.Generator().manual_seed(0)
    canvas = torch.randint(0, V, (2, C), generator=g)
    fixed = torch.where(torch.rand(2, C, generator=g) < 0.6, canvas, -1)
    sc = torch.randn(2, C, V, generator=g)
    sc = torch.where((fixed[..., None] >= 0) & (torch.arange(V) != fixed[..., None]), float("-inf"), sc)
    canvas, fixed, sc = canvas.cuda(), fixed.cuda(), sc.to("cuda", torch.bfloat16)
    cache = DynamicCache(config=model.config.get_text_config(decoder=True))
    with torch.inference_mode():
        model(input_ids=torch.tensor([[2, 10, 11, 12]] * 2, device="cuda"), decoder_input_ids=canvas[:, :1],
              past_key_values=cache)
        whole = model(decoder_input_ids=canvas, past_key_values=cache, self_conditioning_logits=sc).logits.float()
        part = free_forward.forward(model, free_forward.Positions.of(fixed), decoder_input_ids=canvas,
                                    past_key_values=cache, self_conditioning_logits=sc)
    free = fixed < 0
    torch.testing.assert_close(part[free], whole[free], atol=0.1, rtol=0.05)


def test_threads_sharing_the_model_each_get_their_own_signal(tiny_lm):
    """Two threads run the free-positions forward on one model at once (as an SGLang program batch does), both
    inside the decoder with both hooks registered (a barrier in the embedding's forward holds them there): each gets
    the logits its own signal gives alone, and a third thread's plain forward in the same window gets the model's."""
    import threading

    model = tiny_lm.model
    cache, canvas, fixed, sc = _inputs(tiny_lm, 2, 0.5, seed=5)
    where = free_forward.Positions.of(fixed)
    signals = [sc, sc * 0.25]
    with torch.inference_mode():
        alone = [free_forward.forward(model, where, decoder_input_ids=canvas, past_key_values=cache,
                                      self_conditioning_logits=s) for s in signals]
        plain_alone = model(decoder_input_ids=canvas, past_key_values=cache).logits
    assert not torch.equal(alone[0], alone[1])
    barrier = threading.Barrier(3, timeout=30)

    def wait(*args):  # (a forward hook's return value would replace the output)
        barrier.wait()

    hold = model.model.decoder.embed_tokens.register_forward_hook(wait)
    got, errors = {}, []

    def run(i):
        try:
            with torch.inference_mode():
                if i < 2:
                    got[i] = free_forward.forward(model, where, decoder_input_ids=canvas, past_key_values=cache,
                                                  self_conditioning_logits=signals[i])
                else:
                    got[i] = model(decoder_input_ids=canvas, past_key_values=cache).logits
        except Exception as error:  # (reported below, not lost in the thread)
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        hold.remove()
    assert not errors, errors
    assert torch.equal(got[0], alone[0]) and torch.equal(got[1], alone[1])
    assert torch.equal(got[2], plain_alone)
