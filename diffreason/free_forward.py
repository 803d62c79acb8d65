"""The denoiser's forward pass with the vocabulary-sized work done only at a canvas's free positions.

A step of DiffusionGemma's denoiser does two [positions × vocabulary] products besides its layers: the
self-conditioning signal (the softmax of the previous step's logits times the embedding matrix) and the LM head (with
its tanh soft-capping). On a template many positions are fixed, and the sampler leaves a fixed position's
self-conditioning logits one finite value (its token's; the rest -inf), so its signal is its token's embedding row
(`forward` relies on that), and its logits are never read but at its token. `forward` computes the signal and the
head only where a position is free (a code hole's canvas: 16-64 of 128 positions; a Sudoku grid's blanks), and runs
the model's own decoder — its layers, norms and attention untouched — in between: the decoder is called without
self-conditioning logits and the signal is handed to its self-conditioning block by a forward pre-hook, registered
for the call only. The hook reads the signal of the thread that runs the forward (a thread-local), so calls that
share a model from several threads (an SGLang program batch) each get their own signal, and a forward without one
(the model's own, in another thread) is left alone.

Shapes: b canvas rows, C positions, V vocabulary, d hidden size; flat positions are row · C + c.

    logits = forward(model, Positions.of(constraint.fixed), decoder_input_ids=canvas [b, C], ...)
    # float32 [b, C, V]: the model's logits at free positions; at fixed ones -inf but at their token

The free positions' numbers are the model's own ops on a subset of rows (a softmax along each row, a matrix product
per row, the head and its soft-capping): on CPU they come out equal to the whole forward's, bit for bit
(`tests/test_free_forward.py`), which keeps fast draws' promise that a row's result never depends on its batch.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch

_THREAD = threading.local()  # .signal: the self-conditioning signal of this thread's forward in progress (or None)


@dataclass(frozen=True)
class Positions:
    """Where the vocabulary-sized work of b canvas rows lies."""

    shape: tuple[int, int]  # (b, C)
    free: torch.Tensor  # [N] flat free positions
    fixed: torch.Tensor  # [F] flat fixed positions
    tokens: torch.Tensor  # [F] their tokens

    @classmethod
    def of(cls, fixed: torch.Tensor) -> "Positions":
        """From the rows' fixed tokens [b, C] (-1 where free)."""
        flat = fixed.reshape(-1)
        free = flat < 0
        at = (~free).nonzero().flatten()
        return cls(tuple(fixed.shape), free.nonzero().flatten(), at, flat[at])

    @property
    def share(self) -> float:
        """The fraction of positions that are free."""
        return self.free.numel() / max(1, self.shape[0] * self.shape[1])


def soft_embeddings(decoder, self_conditioning_logits: torch.Tensor | None, where: Positions,
                    probs: torch.Tensor | None = None) -> torch.Tensor:
    """[b, C, d] the self-conditioning signal the decoder computes from `self_conditioning_logits` [b, C, V] (the
    softmax in float32, times the embedding matrix, times its scale), computed at free positions; a fixed position's
    softmax is one-hot, so its signal is its token's embedding times the scale. `probs` [N, V]: that softmax at the
    free positions, already computed (the sampler's, handed over: the logits there are then not read)."""
    weight = decoder.embed_tokens.weight
    scale = decoder.embed_tokens.embed_scale.to(weight.dtype)
    b, C = where.shape
    out = weight.new_empty(b * C, weight.shape[1])
    if where.free.numel():
        if probs is None:
            probs = self_conditioning_logits.reshape(b * C, -1).index_select(0, where.free).softmax(
                dim=-1, dtype=torch.float32)
        out.index_copy_(0, where.free, torch.matmul(probs.to(weight.dtype), weight) * scale)
    if where.fixed.numel():
        out.index_copy_(0, where.fixed, weight.index_select(0, where.tokens) * scale)
    return out.view(b, C, -1)


def head_logits(model, hidden: torch.Tensor, where: Positions, out: torch.Tensor | None = None,
                split: bool = False):
    """float32 [b, C, V] the model's soft-capped logits from its last hidden states [b, C, d] at free positions; at a
    fixed position -inf but at its token (its logit there). `out`: a [b, C, V] float32 buffer to write into, -inf
    wherever this writes nothing (one that held these positions' logits before qualifies). `split`: (out, [N, V] the
    free positions' logits), which are then not written into `out` (its free rows keep what they held)."""
    b, C = where.shape
    weight, cap = model.lm_head.weight, model.final_logit_softcapping
    flat = hidden.reshape(b * C, -1)
    if out is None:
        out = torch.full((b, C, weight.shape[0]), float("-inf"), device=hidden.device)
    logits = out.view(b * C, -1)
    free = None
    if where.free.numel():
        free = model.lm_head(flat.index_select(0, where.free)).to(torch.float32)
        free = torch.tanh(free / cap) * cap
        if not split:
            logits.index_copy_(0, where.free, free)
    if where.fixed.numel():
        own = (flat.index_select(0, where.fixed) * weight.index_select(0, where.tokens)).sum(-1).to(torch.float32)
        logits.view(-1).index_copy_(0, where.fixed * weight.shape[0] + where.tokens, torch.tanh(own / cap) * cap)
    return (out, free) if split else out


def forward(model, where: Positions, *, decoder_input_ids: torch.Tensor, past_key_values,
            self_conditioning_logits: torch.Tensor | None = None, self_conditioning_probs: torch.Tensor | None = None,
            out: torch.Tensor | None = None, split: bool = False, **decoder_kwargs):
    """float32 [b, C, V] logits of `model` (a DiffusionGemmaForBlockDiffusion) for canvases [b, C] over the cache, as
    `model(...).logits` at free positions (see the module docstring); `out`, `split`: as `head_logits`'s,
    `self_conditioning_probs`: as `soft_embeddings`' `probs`; `decoder_kwargs` go to the decoder (attention mask,
    positions)."""
    decoder = model.model.decoder
    handle = None
    if self_conditioning_logits is not None:
        _THREAD.signal = soft_embeddings(decoder, self_conditioning_logits, where, self_conditioning_probs)
        # (without logits the decoder passes a zero signal to its self-conditioning block; this hands it the signal)
        handle = decoder.self_conditioning.register_forward_pre_hook(_hand_signal)
    try:
        hidden = model.model(decoder_input_ids=decoder_input_ids, past_key_values=past_key_values,
                             **decoder_kwargs).last_hidden_state
    finally:
        if handle is not None:
            handle.remove()
            _THREAD.signal = None
    return head_logits(model, hidden, where, out, split)


def _hand_signal(module, args):
    """The pre-hook: the running thread's signal in place of the zero one (every thread's hooks run in every
    forward while they are registered, so each looks up its caller's); None leaves the arguments as they are."""
    signal = getattr(_THREAD, "signal", None)
    return None if signal is None else (args[0], signal)
