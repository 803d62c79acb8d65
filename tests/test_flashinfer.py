"""The FlashInfer attention path: on CPU its wiring (masks, causality, GQA) with a PyTorch twin kernel; on CUDA the
kernel itself against the twin. GPU tests skip cleanly without CUDA."""

import pytest
import torch

from diffreason import Engine, GenerationRequest, build_model
from diffreason import attention as fa

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def test_engine_tokens_equal_sdpa_through_the_flashinfer_path(monkeypatch):
    lm = build_model("tiny", seed=0)
    requests = [GenerationRequest("a longer prompt than the other one", seed=1, max_new_tokens=64),
                GenerationRequest("hi", seed=2, max_new_tokens=64)]
    reference = Engine(lm, attention="sdpa").generate_batch(requests)
    calls = []
    kernel = fa._kernel

    def spy(q, k, v, custom_mask, causal, sm_scale, logits_soft_cap):
        calls.append((q.shape[0], k.shape[0], custom_mask is not None, causal))
        return kernel(q, k, v, custom_mask, causal, sm_scale, logits_soft_cap)

    monkeypatch.setattr(fa, "_kernel", spy)
    engine = Engine(lm, attention="flashinfer")
    assert lm.model.config._attn_implementation == fa.NAME
    ours = engine.generate_batch(requests)
    for a, b in zip(reference, ours):
        assert a.tokens == b.tokens and a.steps == b.steps
    canvas = lm.canvas_length
    # padded rows get explicit masks; the canvas attends over [cache; canvas] (kv longer than q)
    assert any(masked for *_, masked, _ in calls)
    assert any(lq == canvas and lk > canvas for lq, lk, _, _ in calls)
    Engine(lm, attention="sdpa")
    assert lm.model.config._attn_implementation == "sdpa"


def test_layers_of_two_head_sizes_take_the_flashinfer_path_and_agree_with_sdpa():
    """Gemma 4's sliding and full layers have different head sizes (head_dim vs global_head_dim); transformers then
    refuses the config's global head_dim, so the path reads each layer's own."""
    preset = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=32, global_head_dim=64, sliding_window=16, num_experts=2,
                  top_k_experts=1, moe_intermediate_size=32, canvas_length=32)
    lm = build_model(preset, seed=0)
    assert fa.text_head_dims(lm.model) == {32, 64}
    assert fa.use_flashinfer(lm.model) == "sdpa"  # off CUDA, not forced: stays on SDPA
    requests = [GenerationRequest("two head sizes", seed=3, max_new_tokens=32)]
    reference = Engine(lm, attention="sdpa").generate_batch(requests)
    ours = Engine(lm, attention="flashinfer").generate_batch(requests)
    assert lm.model.config._attn_implementation == fa.NAME
    assert [r.tokens for r in ours] == [r.tokens for r in reference]


def test_bad_attention_choice_is_refused(tiny_lm):
    from diffreason.errors import ConfigError

    with pytest.raises(ConfigError, match="attention must be auto, flashinfer or sdpa"):
        Engine(tiny_lm, attention="triton")


def _random_case(lq, lk, hq, hk, d, dtype, device, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    q, k, v = (torch.randn(n, h, d, generator=g).to(device, dtype) for n, h in ((lq, hq), (lk, hk), (lk, hk)))
    return q, k, v


@cuda
@pytest.mark.gpu
@pytest.mark.parametrize("lq, lk, causal, masked, softcap", [
    (64, 64, True, False, None),  # prompt prefill
    (256, 320, False, False, None),  # canvas over [cache; canvas]
    (256, 300, False, True, None),  # canvas with padding in the cache
    (64, 64, True, False, 50.0),
])
def test_flashinfer_kernel_matches_the_twin(lq, lk, causal, masked, softcap):
    q, k, v = _random_case(lq, lk, 8, 2, 128, torch.bfloat16, "cuda", seed=lq + lk)
    mask = None
    if masked:
        mask = torch.ones(lq, lk, dtype=torch.bool, device="cuda")
        mask[:, : lk // 5] = False
    got = fa._kernel(q, k, v, mask, causal, 128 ** -0.5, softcap)
    want = fa._reference_kernel(q, k, v, mask, causal, 128 ** -0.5, softcap)
    assert (got.float() - want.float()).abs().max() < 2e-2


@cuda
@pytest.mark.gpu
def test_engine_on_cuda_uses_flashinfer_and_agrees_with_sdpa():
    preset = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=64, global_head_dim=128, sliding_window=64, num_experts=4,
                  top_k_experts=2, moe_intermediate_size=128, canvas_length=64)
    lm = build_model(preset, seed=0)
    lm.model.to("cuda", torch.bfloat16)
    ids = torch.tensor([[2, 10, 11, 12, 13]], device="cuda")
    canvas = torch.randint(0, lm.vocab_size, (1, 64), device="cuda")
    from transformers import DynamicCache

    def logits():
        cache = DynamicCache(config=lm.model.config.get_text_config(decoder=True))
        return lm.model(input_ids=ids, decoder_input_ids=canvas, past_key_values=cache).logits.float()

    lm.model.set_attn_implementation("sdpa")
    want = logits()
    assert Engine(lm).model.config._attn_implementation == fa.NAME
    got = logits()
    assert (got - want).abs().max() < 0.1 * want.abs().max()
