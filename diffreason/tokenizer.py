"""A small byte-level BPE tokenizer, trained locally with `tokenizers`, for the tiny checkpoints we build and ship.

Special tokens follow Gemma's layout (pad 0, eos 1, bos 2) so that config defaults and SGLang's expectations hold.
Byte-level means every string round-trips, whatever the merges learned.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

PAD, EOS, BOS, UNK = "<pad>", "<eos>", "<bos>", "<unk>"
# Reserved ids for the multimodal markers that DiffusionGemmaConfig insists on (boi / eoi / image); never sampled in
# practice but they must exist inside the vocabulary of a tiny model.
IMAGE_MARKERS = ("<start_of_image>", "<end_of_image>", "<image_soft_token>")
SPECIAL_TOKENS = [PAD, EOS, BOS, UNK, *IMAGE_MARKERS]

# A small, fixed training corpus: the tokenizer of a tiny demo checkpoint only has to be deterministic and cover bytes.
_DEFAULT_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Diffusion language models denoise a whole canvas of tokens at once.",
    '{"name": "Ada", "age": 36, "tags": ["math", "engines"], "active": true, "score": 0.75, "note": null}',
    "def add(a: int, b: int) -> int:\n    return a + b\n",
    "Sudoku: every row, column and box holds the digits 1 to 9 exactly once.",
    "0123456789 .,;:!?-+*/=<>()[]{}'\"\n\t",
    "Hello, world! Solve the puzzle step by step and answer in JSON.",
]


def train_byte_bpe(texts: Iterable[str] | None = None, vocab_size: int = 512) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on `texts` (deterministic for a given corpus) and wrap it for transformers."""
    texts = list(texts) if texts is not None else _DEFAULT_CORPUS * 8
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return wrap(tok)


def wrap(tok: Tokenizer) -> PreTrainedTokenizerFast:
    """`tok` for transformers, adding BOS in front of a text when special tokens are added (`tokenizer(text)`, as
    SGLang encodes a request's `text`), as the engine and the training recipes lay a prompt out."""
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, eos_token=EOS, bos_token=BOS, unk_token=UNK, add_bos_token=True
    )


_LITERAL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # tokenizer -> its literal-reading Rust copy
_LITERAL_LOCK = threading.Lock()


def encode_literal(tokenizer, text: str) -> list[int]:
    """`text`'s token ids as plain text: no special token added, and none read from it ("<eos>" in it is those five
    characters) — what a schema's member names, code to infill and training canvases are. transformers'
    `split_special_tokens=True` would flip a flag the tokenizer shares with every other call (a prompt encoded in
    another thread meanwhile lost its special tokens: QA, 2026-12-07), so a fast tokenizer reads literals with a copy
    of its Rust tokenizer of its own, made once, whose flag is set for good."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:  # (a slow tokenizer splits per call)
        return list(tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True))
    with _LITERAL_LOCK:
        literal = _LITERAL.get(tokenizer)
        if literal is None:
            literal = Tokenizer.from_str(backend.to_str())
            literal.encode_special_tokens = True
            _LITERAL[tokenizer] = literal
    return literal.encode(text, add_special_tokens=False).ids
