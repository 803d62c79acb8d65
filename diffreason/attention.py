"""FlashInfer attention for DiffusionGemma in transformers: causal for the prompt, bidirectional for the canvas.

DiffusionGemma attends two ways: the encoder (prompt, committed canvases) is causal; the denoiser's canvas attends
bidirectionally over [cached K; canvas K]. SGLang forces its triton backend for this model because FlashInfer's paged
prefill would run the canvas causally. Here each row runs FlashInfer's single-request prefill kernel with exactly the
mask transformers builds — `causal=True` only where transformers would be causal without a mask, otherwise the boolean
mask itself (`custom_mask`), so the canvas is bidirectional and padded or sliding positions stay hidden.

    from diffreason.attention import use_flashinfer
    use_flashinfer(model)            # on CUDA in half precision; Engine(..., attention="auto") does it by itself

The transformers hooks are `AttentionInterface` (the kernel call) and `AttentionMaskInterface` (boolean masks, as
for SDPA). Without CUDA the same entry point runs a plain PyTorch kernel over the same per-row inputs, which is what
the CPU tests compare against SDPA; `evals/gpu_checks.py` compares FlashInfer itself.

This is core (the engine picks its attention here); `flashinfer` itself is imported only where its kernel runs.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

# transformers treats any implementation name containing "flash" as flash-attention (unpadded varlen inputs).
NAME = "diffreason_fi"


def _reference_kernel(q, k, v, custom_mask, causal, sm_scale, logits_soft_cap):
    """PyTorch twin of flashinfer.single_prefill_with_kv_cache (NHD layout, GQA, bottom-right causal)."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.float(), k.float()) * sm_scale
    if logits_soft_cap:
        scores = torch.tanh(scores / logits_soft_cap) * logits_soft_cap
    if custom_mask is not None:
        scores = scores.masked_fill(~custom_mask[None], float("-inf"))
    elif causal:
        lq, lk = q.shape[0], k.shape[0]
        allowed = torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril(diagonal=lk - lq)
        scores = scores.masked_fill(~allowed[None], float("-inf"))
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a fully masked (padding) row attends to nothing
    return torch.einsum("hqk,khd->qhd", probs, v.float()).to(q.dtype)


def _kernel(q, k, v, custom_mask, causal, sm_scale, logits_soft_cap):
    if q.is_cuda:
        import flashinfer

        return flashinfer.single_prefill_with_kv_cache(
            q, k, v, custom_mask=custom_mask, causal=causal and custom_mask is None, kv_layout="NHD",
            sm_scale=sm_scale, logits_soft_cap=logits_soft_cap or None,
        )
    return _reference_kernel(q, k, v, custom_mask, causal, sm_scale, logits_soft_cap)


def flashinfer_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,  # [B, Hq, Lq, D]
    key: torch.Tensor,  # [B, Hkv, Lk, D]
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,  # bool [B, 1, Lq, Lk] (True = attend) or None
    dropout: float = 0.0,
    scaling: float | None = None,
    softcap: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' attention contract → per-row FlashInfer prefill; returns ([B, Lq, Hq, D], None)."""
    if dropout and module.training:
        raise ValueError("flashinfer attention is for inference (dropout > 0 in training mode)")
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", False))
    causal = causal and query.shape[2] > 1
    outs = []
    for b in range(query.shape[0]):
        mask = None
        if attention_mask is not None:  # it already holds causality, windows and padding
            row = attention_mask[b if attention_mask.shape[0] > 1 else 0, 0]
            row = row if row.dtype == torch.bool else row == 0  # additive masks: 0 = attend
            mask = None if row.all() else row
        q, k, v = (t[b].transpose(0, 1).contiguous() for t in (query, key, value))  # NHD
        outs.append(_kernel(q, k, v, mask, causal and attention_mask is None, scale, softcap))
    return torch.stack(outs), None


AttentionInterface.register(NAME, flashinfer_attention_forward)
AttentionMaskInterface.register(NAME, sdpa_mask)  # boolean masks, as SDPA gets them


def flashinfer_available() -> bool:
    if not torch.cuda.is_available():
        return False
    try:
        import flashinfer  # noqa: F401
    except Exception:
        return False
    return True


# Head sizes FlashInfer's prefill kernels are built for.
HEAD_DIMS = (64, 128, 256)


def text_head_dims(model) -> set[int]:
    """Head sizes of the language model's attention layers, read off the layers: sliding and full layers differ
    (head_dim vs global_head_dim), and transformers refuses a global `head_dim` on such a config."""
    return {m.head_dim for name, m in model.named_modules()
            if name.endswith("self_attn") and "vision" not in name and hasattr(m, "head_dim")}


def use_flashinfer(model, force: bool = False) -> str:
    """Switch `model` to this attention path when FlashInfer can run it (CUDA, half precision, head sizes it has
    kernels for) — or always with `force` (off CUDA the PyTorch twin kernel runs); returns the implementation now in
    use."""
    heads = text_head_dims(model)
    half = next(model.parameters()).dtype in (torch.float16, torch.bfloat16)
    if force or (model.device.type == "cuda" and half and heads <= set(HEAD_DIMS) and flashinfer_available()):
        model.set_attn_implementation(NAME)
    return model.config._attn_implementation
