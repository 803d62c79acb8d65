"""Training data for the JSON model: (prompt, object) pairs from jsonschemabench's valid instances.

Each schema file holds a schema and labelled instances; the valid ones are real-world objects, so a model trained on
them writes plausible values, not only valid ones. The prompt is what a user would say — the schema's title and
description, else its property names. The canvas is laid out the way compiled templates lay it out: the scaffold in
compact JSON, each scalar value followed by pad tokens (a slot's unused tail, which decoding removes; up to the
compiler's default slot budget), then EOS, then pads. Objects that do not fit one canvas are left out. A stable
hash of the file name holds out 10 % of the schemas for evaluation.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from diffreason.errors import DiffreasonError
from diffreason.tokenizer import encode_literal

CANVAS = 128
PROMPT_TOKENS = 48
MODEL_PRESET = dict(
    hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
    head_dim=32, global_head_dim=32, sliding_window=64, num_experts=4, top_k_experts=2, moe_intermediate_size=64,
    canvas_length=CANVAS,
)


def is_heldout(name: str) -> bool:
    return int(hashlib.sha1(name.encode()).hexdigest(), 16) % 10 == 0


def collection_of(name: str) -> str:
    """The jsonschemabench collection a schema file belongs to, read off its name ("Github_easy---o12345.json" ->
    "Github_easy")."""
    return re.sub(r"(_\d+|---.*|_[0-9a-f]{8,}.*)$", "", Path(name).stem)


def sample_schema_files(schemas_dir: str | Path, limit: int = 0, collections: Iterable[str] = (),
                        heldout: bool = False) -> list[Path]:
    """The schema files (*.json) of a jsonschemabench-style directory to evaluate, in a stable pseudo-random order
    (by file-name hash): only the named `collections` (none named: all), only held-out schemas with `heldout`, and at
    most `limit` per collection (0: all) — a sample, not the first files."""
    wanted = set(collections)
    files, counts = [], {}
    order = sorted(Path(schemas_dir).glob("*.json"), key=lambda f: hashlib.sha1(f.name.encode()).hexdigest())
    for f in order:
        c = collection_of(f.name)
        skip = (wanted and c not in wanted) or (heldout and not is_heldout(f.name))
        if skip or (limit and counts.get(c, 0) >= limit):
            continue
        counts[c] = counts.get(c, 0) + 1
        files.append(f)
    return files


def prompt_of(schema: dict | bool) -> str:
    if not isinstance(schema, dict):  # (true / false: a boolean schema says nothing to prompt with)
        return "a JSON value"
    words = " ".join(str(schema.get(k, "")) for k in ("title", "description") if isinstance(schema.get(k), str))
    if not words.strip() and isinstance(schema.get("properties"), dict):
        words = "an object with " + ", ".join(list(schema["properties"])[:8])
    return " ".join(words.split())[:240] or "a JSON value"


def load_pairs(schemas_dir: str | Path, heldout: bool = False) -> list[tuple[str, Any]]:
    """(prompt, valid instance) pairs of the training (or held-out) schemas."""
    files = sorted(Path(schemas_dir).glob("*.json"))
    if not files:
        raise DiffreasonError(f"no schema files (*.json) in {str(schemas_dir)!r}")
    pairs = []
    for f in files:
        if is_heldout(f.name) != heldout:
            continue
        try:
            data = json.loads(f.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if not isinstance(data, dict) or not isinstance(data.get("schema"), dict):
            continue
        prompt = prompt_of(data["schema"])
        pairs += [(prompt, t["data"]) for t in data.get("tests", []) if isinstance(t, dict) and t.get("valid")]
    return pairs


# Slot budgets in characters, as the compiler's default `Budget` gives them: a value's slot is this long, and what
# the value does not use is pad. Training draws the pad run uniformly up to the slot's slack.
SLOT_CHARS = {"string": 24, "number": 16, "boolean": 5, "null": 4}


def pieces(value: Any) -> list[str | tuple[str, int]]:
    """Compact JSON as text pieces; each scalar is (text, slot budget) — the caller pads it as a slot would be."""
    if isinstance(value, dict):
        out: list[str | tuple[str, int]] = ["{"]
        for i, (k, v) in enumerate(value.items()):
            out.append(("," if i else "") + json.dumps(k, ensure_ascii=False) + ":")
            out += pieces(v)
        return out + ["}"]
    if isinstance(value, list):
        out = ["["]
        for i, v in enumerate(value):
            if i:
                out.append(",")
            out += pieces(v)
        return out + ["]"]
    kind = ("boolean" if isinstance(value, bool) else "number" if isinstance(value, (int, float))
            else "null" if value is None else "string")
    return [(json.dumps(value, ensure_ascii=False, separators=(",", ":")), SLOT_CHARS[kind])]


def canvas_tokens(value: Any, tokenizer, rng: random.Random, length: int = CANVAS) -> list[int] | None:
    """The canvas of one object (values padded as slots leave them, EOS, pads), or None if it does not fit."""
    ids: list[int] = []
    for p in pieces(value):
        if isinstance(p, tuple):
            text, budget = p
            value_ids = encode_literal(tokenizer, text)  # (the text as the template writes it: "<pad>" is text)
            ids += value_ids + [tokenizer.pad_token_id] * rng.randint(0, max(0, budget - len(value_ids)))
        else:
            ids += encode_literal(tokenizer, p)
        if len(ids) >= length:
            return None
    ids.append(tokenizer.eos_token_id)
    return ids + [tokenizer.pad_token_id] * (length - len(ids))


def make_tokenizer(pairs: list[tuple[str, Any]], vocab_size: int = 1024):
    """A byte-level BPE trained on the prompts and compact objects of the training pairs."""
    from diffreason.tokenizer import train_byte_bpe

    texts = [p for p, _ in pairs[::3]] + [json.dumps(v, ensure_ascii=False, separators=(",", ":")) for _, v in pairs]
    return train_byte_bpe(texts, vocab_size=vocab_size)


class JsonStream:
    """SFT batches: random pairs, prompt = BOS + prompt tokens, canvas = the object's layout; resumable RNG."""

    def __init__(self, pairs: list[tuple[str, Any]], tokenizer, seed: int = 0):
        self.tokenizer = tokenizer
        self.rng = random.Random(seed)
        self.generator = torch.Generator().manual_seed(seed)  # the noise tokens' (`batches`), saved with the rng
        layout_rng = random.Random(f"layout:{seed}")
        self.examples = []
        for prompt, value in pairs:
            canvas = canvas_tokens(value, tokenizer, layout_rng)
            if canvas is not None:
                ids = tokenizer.encode(prompt, add_special_tokens=False)[: PROMPT_TOKENS - 1]
                self.examples.append(([tokenizer.bos_token_id, *ids], canvas))
        if not self.examples:
            raise DiffreasonError("no training object fits one canvas")

    def state_dict(self) -> dict:
        return {"rng": self.rng.getstate(), "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        if "generator" in state:  # (checkpoints before it was saved: the noise restarts, as it did then)
            self.generator.set_state(state["generator"])

    def batches(self, generator: torch.Generator | None = None):
        """The batch maker; noise tokens from `generator`, by default the stream's own (saved in its state: a
        resumed run goes on as an uninterrupted one would)."""
        from diffreason.train import SFTBatch

        generator = generator if generator is not None else self.generator

        vocab = len(self.tokenizer)

        def make(size: int, progress: float) -> SFTBatch:
            picked = [self.examples[self.rng.randrange(len(self.examples))] for _ in range(size)]
            width = max(len(p) for p, _ in picked)
            # Left-pad prompts so every row's last prompt token sits at the same place (the engine does the same).
            prompts = torch.tensor([[self.tokenizer.pad_token_id] * (width - len(p)) + p for p, _ in picked])
            target = torch.tensor([c for _, c in picked])
            noise = torch.randint(0, vocab, target.shape, generator=generator)
            return SFTBatch(prompts, target, noise, torch.ones_like(target, dtype=torch.bool))

        return make


def build_json_model(tokenizer, seed: int = 0):
    from diffreason.model import build_model

    return build_model(dict(MODEL_PRESET), tokenizer=tokenizer, seed=seed)
