"""The one layout of a code infilling example, shared by training (tasks/infill/corpus.py) and inference.

An example is (prefix, hole, suffix): the code before the hole, the hole's text (None at inference, where it is what
the model writes), and the code after it. The model sees

- the **prompt** (the causal pass, encoded into the KV cache): BOS, then the prefix's last `max_prompt_tokens - 1`
  tokens (the code right before the hole; what does not fit is cut from the front);
- the **canvas** (the bidirectional pass), `canvas_length` positions:

      [ slot: slot_length positions | suffix tokens (fixed, as many as fit) | pad ... pad (fixed) ]

  The slot comes first. In training it holds the hole's tokens then pad tokens up to `slot_length`; pads in the slot's
  tail mean "the hole ends here" (as a JSON value's slot ends early with pads), so `hole_text` cuts a slot at its
  first pad. At inference the slot holds pads (anything: those positions are free, and the sampler starts them from
  uniform noise). After the slot come the suffix's tokens as fixed (clean, never denoised, not in the loss)
  positions, the first ones that fit (the rest is cut from the end and counted in `suffix_cut`), then fixed pads.
- `free`: True exactly on the slot.

Tokenization never merges across a hole's edges: prefix, hole and suffix are tokenized separately, each on its own
(`tokenizer.encode(text, add_special_tokens=False)`), so the tokens at an edge are the same whether the hole is
known (training) or not (inference). A byte-level BPE spells any split of the text, so nothing is lost by this; the
concatenated decodings are the original text.

In a file, the hole is marked with `HOLE` (`split_hole`).
"""

from __future__ import annotations

from dataclasses import dataclass

HOLE = "<|hole|>"


@dataclass(frozen=True)
class InfillLayout:
    prompt_ids: list[int]  # BOS + the prefix's last tokens: the causal prompt
    canvas: list[int]  # [canvas_length] ids: slot, suffix tokens, pads
    free: list[bool]  # [canvas_length]: True exactly on the slot (positions 0 .. slot_length - 1)
    slot_length: int
    hole_ids: list[int] | None  # the hole's tokens (training), None at inference
    suffix_ids: list[int]  # the suffix tokens placed on the canvas (after the slot)
    prefix_cut: int  # prefix tokens dropped from the front (did not fit the prompt)
    suffix_cut: int  # suffix tokens dropped from the end (did not fit the canvas)

    @property
    def slot(self) -> slice:
        return slice(0, self.slot_length)


def encode(tokenizer, text: str) -> list[int]:
    """One piece of text on its own (no special tokens, and a special token's text in the code, such as "<eos>" in a
    string, is plain text): how prefix, hole and suffix are each tokenized."""
    from diffreason.tokenizer import encode_literal

    return encode_literal(tokenizer, text) if text else []


def infill_layout(prefix: str, hole: str | None, suffix: str, tokenizer, canvas_length: int, slot_length: int,
                  max_prompt_tokens: int) -> InfillLayout:
    """Lay out one infilling example (see the module docstring).

    `hole` is the hole's text for training (its tokens must fit the slot: a ValueError otherwise — a training example
    with a cut hole would teach a wrong end), or None for inference (the slot is then all pads). Prefix, hole and
    suffix are tokenized separately: no token spans a hole's edge.
    """
    if not 1 <= slot_length <= canvas_length:
        raise ValueError(f"slot_length must be in [1, canvas_length={canvas_length}], got {slot_length}")
    if max_prompt_tokens < 1:
        raise ValueError(f"max_prompt_tokens must be at least 1 (the BOS), got {max_prompt_tokens}")
    pad = tokenizer.pad_token_id
    prefix_ids = encode(tokenizer, prefix)
    keep = max_prompt_tokens - 1
    kept = prefix_ids[-keep:] if keep else []  # (a slice from -0 would keep everything)
    prompt_ids = [tokenizer.bos_token_id, *kept]
    hole_ids = None
    if hole is None:
        slot = [pad] * slot_length
    else:
        hole_ids = encode(tokenizer, hole)
        if len(hole_ids) > slot_length:
            raise ValueError(f"the hole is {len(hole_ids)} tokens, longer than the slot ({slot_length})")
        slot = hole_ids + [pad] * (slot_length - len(hole_ids))
    suffix_all = encode(tokenizer, suffix)
    room = canvas_length - slot_length
    suffix_ids = suffix_all[:room]
    canvas = slot + suffix_ids + [pad] * (room - len(suffix_ids))
    free = [True] * slot_length + [False] * room
    return InfillLayout(prompt_ids, canvas, free, slot_length, hole_ids, suffix_ids,
                        len(prefix_ids) - len(kept), len(suffix_all) - len(suffix_ids))


def hole_text(slot_ids, tokenizer) -> str:
    """The text a slot holds: its tokens up to the first pad (pads end the hole), decoded."""
    ids = [int(t) for t in slot_ids]
    pad = tokenizer.pad_token_id
    if pad in ids:
        ids = ids[: ids.index(pad)]
    return tokenizer.decode(ids, skip_special_tokens=False) if ids else ""


def split_hole(text: str, marker: str = HOLE) -> tuple[str, str]:
    """(prefix, suffix) of a file with exactly one hole marker; a ValueError when it has none or several."""
    n = text.count(marker)
    if n != 1:
        raise ValueError(f"expected exactly one {marker} in the text, found {n}")
    prefix, suffix = text.split(marker)
    return prefix, suffix
