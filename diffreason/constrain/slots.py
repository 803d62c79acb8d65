"""Stage 4 of the constraint pipeline: a slot — where a regex becomes per-position allowed sets.

On a diffusion canvas a value occupies a *fixed-length slot*: `length` positions, the value followed by pad tokens
(which decoding removes). From the value's padded token automaton (`diffreason.constrain.automata`) a slot gets

- per-position allowed sets: token t may stand at position k iff some state reachable from the start in exactly k
  tokens moves on t to a state from which acceptance is reachable in exactly `length - k - 1` tokens
  (`TokenAutomaton.slot_masks`; equal sets share one mask);
- its automaton, which the engine asks at commit for the best complete path (`best_path`), so the committed value is
  in the language even where position-wise sets are a relaxation (`ab|ba`).

An optional object member `(,"name":value)?` reuses the slot of its value (shared by every member, here or in other
schemas, whose value has the same regex and length) behind its literal's tokens (`PrefixedAutomaton`).
`Slots` builds and caches them for one tokenizer; `diffreason.canvas.CanvasTemplate.from_regex` turns one into a
template.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from diffreason.constrain.automata import TokenAutomata
from diffreason.constrain.cache import BytesLRU
from diffreason.constrain.chardfa import Intersections, intersections_in
from diffreason.constrain.regex import optional_prefixed
from diffreason.constrain.tokens import TokenAutomaton, best_paths as token_best_paths
from diffreason.errors import TemplateError


@dataclass(frozen=True)
class Slot:
    """Positions [start, start + length) hold one value of a regular language (an automaton with a pad sink).

    The per-position allowed sets are in the template's masks; at commit the engine replaces the slot's argmax by the
    best complete path of the automaton, so the committed value is in the language.
    """

    start: int
    length: int
    automaton: TokenAutomaton | PrefixedAutomaton  # what the engine asks of it: `accepts`, `best_path`, `vocab_size`
    backward: "torch.Tensor" = field(repr=False, compare=False, default=None)  # for `best_path` (None: it derives it)

    def shifted(self, offset: int) -> "Slot":
        return Slot(self.start + offset, self.length, self.automaton, self.backward)  # (replace(): twice the cost)


@dataclass(frozen=True, eq=False)
class SlotSets:
    """One slot of `length` positions as a template holds it: every position free (`fixed` all -1), restricted to
    `masks[mask_index[k]]` ([R, vocab_size] bool; equal sets share a row), and the slot's automaton."""

    vocab_size: int
    fixed: torch.Tensor  # [L] long, all -1
    mask_index: torch.Tensor  # [L] long
    masks: torch.Tensor  # [R, V] bool
    slot: Slot

    @property
    def nbytes(self) -> int:
        """Memory held, as `CanvasTemplate.nbytes` counts it."""
        tensors = [self.fixed, self.mask_index, self.masks] + ([self.slot.backward] if self.slot.backward is not None
                                                               else [])
        return sum(t.numel() * t.element_size() for t in tensors) + self.slot.automaton.nbytes


class Slots:
    """Slots of regexes over one tokenizer, cached by (regex, length, intersections): JSON schemas repeat the same
    value types (strings, numbers, arrays of strings) across members and schemas, so each is built once. Their
    tensors are never modified in place. One per `Compiler`, which owns it."""

    def __init__(self, automata: TokenAutomata):
        self.automata = automata
        self.tokenizer = automata.tokenizer
        self.cache = BytesLRU(512 * 2**20)

    def clear(self) -> None:
        self.cache.clear()

    def of(self, regex: str, length: int, intersections: Intersections = ()) -> SlotSets:
        """The slot of exactly `length` tokens holding a string of `regex`, padded with the tokenizer's pad token."""
        intersections = tuple(intersections)
        return self.cache.get((regex, length, intersections), lambda: self._build(regex, length, intersections),
                              lambda t: t.nbytes)

    def _build(self, regex: str, length: int, intersections: Intersections) -> SlotSets:
        member = optional_prefixed(regex)
        if member is not None:
            sets = self._optional_prefixed(*member, length, intersections)
            if sets is not None:
                return sets
        tokenizer = self.tokenizer.tokenizer
        automaton = self.automata.padded(regex, tokenizer.pad_token_id, intersections)
        masks, index, backward = automaton.slot_masks(length)  # equal allowed sets share one mask
        return SlotSets(len(tokenizer), torch.full((length,), -1), index, masks, Slot(0, length, automaton, backward))

    def _optional_prefixed(self, literal: str, rest: str, length: int, intersections: Intersections) -> SlotSets | None:
        """The slot of `(literal rest)?` (an optional member `,"name":value`) from the slot of `rest` alone, which is
        cached and shared by every member, here or in other schemas, whose value has the same regex and length: the
        member's own part is its literal's tokens in front, and the all-pad path of leaving it out. Same language,
        same allowed sets and the same commit as composing the whole regex, without building one automaton per
        member name. None when `rest` does not fit what is left (the composed automaton handles that: only pads)."""
        ids = tuple(self.tokenizer.encode(literal))
        m, pad = len(ids), self.tokenizer.tokenizer.pad_token_id
        if not 0 < m < length:
            return None
        try:
            inner = self.of(rest, length - m, intersections_in(rest, intersections))
        except TemplateError:
            return None
        value = inner.slot
        V = value.automaton.vocab_size
        # numpy, not torch: a handful of small operations per member, where torch's per-call overhead dominated
        masks = np.zeros((m + inner.masks.shape[0], V), dtype=bool)
        masks[np.arange(m), ids] = True
        masks[m:] = inner.masks.numpy()
        masks[:, pad] = True
        mask_index = np.concatenate([np.arange(m), inner.mask_index.numpy() + m])
        automaton = PrefixedAutomaton(ids, pad, value.automaton, value.backward)
        return SlotSets(V, torch.full((length,), -1), torch.from_numpy(mask_index), torch.from_numpy(masks),
                        Slot(0, length, automaton))


@dataclass(frozen=True, eq=False)
class PrefixedAutomaton:
    """The language of an optional member's slot: all pads (the member left out), or its literal's tokens then a
    value of `value`'s padded language. A slot's automaton as far as the engine asks (`accepts`, `best_path`), without
    building the merged one: the member's tokens would each need a class of their own and every move of the shared
    value automaton a copy on them, for each member name."""

    literal: tuple[int, ...]
    pad: int
    value: TokenAutomaton  # padded: after a complete value only pads
    value_backward: torch.Tensor  # the value's slot's backward sets, for the positions after the literal

    @property
    def vocab_size(self) -> int:
        return self.value.vocab_size

    @property
    def nbytes(self) -> int:
        return self.value.nbytes + self.value_backward.numel() + 8 * len(self.literal)

    def accepts(self, tokens) -> bool:
        tokens = [int(t) for t in tokens]
        if all(t == self.pad for t in tokens):
            return True
        m = len(self.literal)
        return tuple(tokens[:m]) == self.literal and self.value.accepts(tokens[m:])

    def best_path(self, log_probs: torch.Tensor, backward: torch.Tensor | None = None) -> list[int]:
        """The better of the two ways to fill len(log_probs) positions (a tie leaves the member out; `backward`:
        ignored, the value's own is kept)."""
        return self.choose(log_probs, self.value.best_path(log_probs[len(self.literal):], self.value_backward))

    def choose(self, log_probs: torch.Tensor, value: list[int]) -> list[int]:
        """Writing the member (its literal, then the value's best path `value`) or leaving it out (pads), whichever
        scores higher (a tie leaves it out)."""
        lp = log_probs.double().nan_to_num(neginf=-1e30)  # scored as TokenAutomaton.best_path scores
        written = list(self.literal) + value
        at = torch.arange(len(log_probs))
        if float(lp[at, torch.tensor(written)].sum()) > float(lp[:, self.pad].sum()):
            return written
        return [self.pad] * len(log_probs)


def best_paths(jobs: list[tuple[Slot, torch.Tensor]]) -> list[list[int]]:
    """`slot.automaton.best_path(log_probs, slot.backward)` for every (slot, log_probs [L, V]) job, with the token
    automata's Viterbi passes run together (`tokens.best_paths`): a canvas's slots cost one pass over the longest slot
    instead of one per slot. An optional member's slot (`PrefixedAutomaton`) runs its value's pass with the others,
    then `choose`s between writing the member and leaving it out."""
    paths: list = [None] * len(jobs)
    viterbi = []  # (job, automaton, log-probabilities, backward sets)
    for i, (slot, log_probs) in enumerate(jobs):
        automaton = slot.automaton
        if isinstance(automaton, TokenAutomaton):
            viterbi.append((i, automaton, log_probs, slot.backward))
        elif isinstance(automaton, PrefixedAutomaton):
            viterbi.append((i, automaton.value, log_probs[len(automaton.literal):], automaton.value_backward))
        else:
            paths[i] = automaton.best_path(log_probs, slot.backward)
    for (i, _, _, _), value in zip(viterbi, token_best_paths([job[1:] for job in viterbi])):
        slot, log_probs = jobs[i]
        automaton = slot.automaton
        paths[i] = automaton.choose(log_probs, value) if isinstance(automaton, PrefixedAutomaton) else value
    return paths
