"""Stage 3 (token level): the token automaton of an `Rx`, composed from its parts' automata.

Building the token automaton of a whole regex with outlines-core pays a subset construction over all of it, for every
distinct regex (and each member name makes one distinct). Composing it from its leaves' automata, each built once and
cached by its text, costs a few array concatenations. The composed automaton accepts the same strings. Each leaf keeps
every tokenization of its own text; each literal is tokenized on its own, so no token crosses a part's boundary — as in
the fixed scaffold around slots, and as the JSON model's training canvases are tokenized
(`diffreason.tasks.json_corpus`: "{", '"name":', the value, ',"next":', ...). Where parts begin alike (two optional
members both start with ',') the automaton is nondeterministic: slot sets, the commit (Viterbi) and `accepts` work on
such automata as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from diffreason.constrain.regex import Node, Rx, flatten
from diffreason.constrain.tokens import TokenClasses, expand_moves


@dataclass
class _Nfa:
    """Moves (source, token, target) over states 0..len(accepting)-1, without epsilon moves."""

    src: np.ndarray
    tok: np.ndarray
    dst: np.ndarray
    accepting: np.ndarray
    initial: int

    @property
    def size(self) -> int:
        return self.accepting.size

    @cached_property
    def first(self) -> tuple[np.ndarray, np.ndarray]:
        """(tokens, targets) of the moves out of the initial state."""
        out = self.src == self.initial
        return self.tok[out], self.dst[out]

    @cached_property
    def ends(self) -> np.ndarray:
        """The accepting states."""
        return self.accepting.nonzero()[0]

    @cached_property
    def later_ends(self) -> np.ndarray:
        """The accepting states other than the initial one."""
        return self.ends[self.ends != self.initial]

    @cached_property
    def reentered(self) -> bool:
        """Does some move lead back into the initial state?"""
        return bool((self.dst == self.initial).any())


def _chain(tokens: list[int]) -> _Nfa:
    n = len(tokens)
    accepting = np.zeros(n + 1, dtype=bool)
    accepting[n] = True
    states = np.arange(n, dtype=np.int64)
    return _Nfa(states, np.asarray(tokens, dtype=np.int64), states + 1, accepting, 0)


def _concat(parts: list[_Nfa]) -> _Nfa:
    """The parts one after another: every state where the prefix may end takes the next part's first moves. A part's
    initial state that no move enters is left behind (unreachable), so it does not carry ends forward."""
    src, tok, dst, shift = [], [], [], []  # move blocks, and what each block's states are shifted by
    firsts = [parts[0].first]  # the moves out of the initial state, known without scanning the result
    ends = None  # states (global numbers) where the parts so far may end
    initial_ends = bool(parts[0].accepting[parts[0].initial])  # the initial state is one of them
    offset = 0
    for part in parts:
        first_tok, first_dst = part.first
        if ends is not None:
            if ends.size == 1:  # (the usual case: np.tile is a slow Python function)
                src.append(np.full(first_tok.size, ends[0]))
                tok.append(first_tok)
                dst.append(first_dst + offset)
            else:
                src.append(ends.repeat(first_tok.size))
                tok.append(np.broadcast_to(first_tok, (ends.size, first_tok.size)).ravel())
                dst.append(np.broadcast_to(first_dst + offset, (ends.size, first_tok.size)).ravel())
            shift.append(0)
            if initial_ends:
                firsts.append((first_tok, first_dst + offset))
                initial_ends = bool(part.accepting[part.initial])
        src.append(part.src)
        tok.append(part.tok)
        dst.append(part.dst)
        shift.append(offset)
        # (a part's initial state that no move enters is reached only through the moves copied above)
        own = (part.ends if ends is None or part.reentered else part.later_ends) + offset
        ends = own if ends is None else np.concatenate([own, ends] if part.accepting[part.initial] else [own])
        offset += part.size
    # one shift for all blocks (a few C calls, not three per part)
    shifts = np.repeat(np.asarray(shift, dtype=np.int64), [block.size for block in src])
    accepting = np.zeros(offset, dtype=bool)
    accepting[ends] = True
    out = _Nfa(np.concatenate(src) + shifts, np.concatenate(tok), np.concatenate(dst) + shifts, accepting,
               parts[0].initial)
    # (a later part's moves all lead past the first part's states: only the first part can re-enter the initial)
    first = firsts[0] if len(firsts) == 1 else tuple(np.concatenate(x) for x in zip(*firsts))
    out.__dict__.update(first=first, reentered=parts[0].reentered)
    return out


def _union(parts: list[_Nfa]) -> _Nfa:
    """A new initial state that takes every part's first moves."""
    src, tok, dst, accepting = [], [], [], [np.array([any(p.accepting[p.initial] for p in parts)])]
    firsts = []
    offset = 1
    for part in parts:
        first_tok, first_dst = part.first
        src += [np.zeros(first_tok.size, dtype=np.int64), part.src + offset]
        tok += [first_tok, part.tok]
        dst += [first_dst + offset, part.dst + offset]
        firsts.append((first_tok, first_dst + offset))
        accepting.append(part.accepting)
        offset += part.size
    out = _Nfa(np.concatenate(src), np.concatenate(tok), np.concatenate(dst), np.concatenate(accepting), 0)
    out.__dict__.update(first=tuple(np.concatenate(x) for x in zip(*firsts)), reentered=False)  # (all lead past 0)
    return out


def _star(part: _Nfa) -> _Nfa:
    """Zero or more times: every end of the part also takes its first moves again."""
    first_tok, first_dst = part.first
    ends = part.ends
    looped = _Nfa(
        np.concatenate([part.src, ends.repeat(first_tok.size)]),
        np.concatenate([part.tok, np.broadcast_to(first_tok, (ends.size, first_tok.size)).ravel()]),
        np.concatenate([part.dst, np.broadcast_to(first_dst, (ends.size, first_tok.size)).ravel()]),
        part.accepting, part.initial,
    )
    return _union([looped, _chain([])])


class CompositionTooLarge(Exception):
    """The composed automaton would pass its state limit (the caller reports it as a value too complex for a slot)."""


def compose(regex: Rx, leaf, encode, vocab_size: int, max_states: int, pad: int | None = None):
    """(src, tok, dst, accepting, initial, classes) of the automaton of `regex`, from `leaf(text)` (a TokenAutomaton,
    unpadded) for its leaf regexes and `encode(text)` (token ids) for its literals. Its moves are on token classes
    (`classes`): the coarsest partition finer than each leaf's, with every literal token a class of its own.
    With `pad`, a pad sink too, as `TokenAutomaton.with_padding` adds one (pad a class of its own).
    Raises CompositionTooLarge past `max_states` states."""
    leaves, literal_tokens = {}, set()

    def gather(node: Node) -> None:
        kind = node[0]
        if kind == "leaf":
            if node[1] not in leaves:
                leaves[node[1]] = leaf(node[1])
        elif kind == "lit":
            literal_tokens.update(encode(node[1]))
        elif kind == "rep":
            gather(node[1])
        else:
            for p in node[1]:
                gather(p)

    gather(regex.node)
    if pad is not None:
        literal_tokens.add(pad)
    classes, parents = TokenClasses.common(vocab_size, [a.classes for a in leaves.values()], sorted(literal_tokens))
    nfas = {}
    for (text, a), parent in zip(leaves.items(), parents):
        src, tok, dst = expand_moves(a.src.numpy(), a.tok.numpy(), a.dst.numpy(), parent)
        nfas[text] = _Nfa(src, tok, dst, a.accepting.numpy(), a.initial)

    def states(n: _Nfa) -> _Nfa:
        if n.size > max_states:
            raise CompositionTooLarge(f"more than {max_states} states")
        return n

    def build(node: Node) -> _Nfa:
        kind = node[0]
        if kind == "leaf":
            return nfas[node[1]]
        if kind == "lit":
            return _chain(classes.of[list(encode(node[1]))])
        if kind == "alt":
            return states(_union([build(p) for p in node[1]]))
        if kind == "rep":
            _, part, lo, hi = node
            one = build(part)
            parts = [one] * lo + ([_star(one)] if hi is None else [_union([one, _chain([])])] * (hi - lo))
            return states(_concat(parts)) if parts else _chain([])
        # seq: each literal is tokenized on its own, as the compiler split them (as the JSON model's training
        # canvases split them: "{", then each '"name":' / ',"name":', then "}")
        parts = [build(p) for p in flatten(node[1])]
        return states(_concat(parts)) if parts else _chain([])

    # (parts' initial states that composition left behind stay, unreachable: slot sets and the commit only follow
    # live states, and a pass to drop them would cost more than they do)
    nfa = build(regex.node)
    if pad is not None:  # every accepting state moves on pad to an accepting state that only takes pads
        sink = nfa.size
        sources = np.concatenate([nfa.ends, [sink]])
        moves = sources, np.full(sources.size, classes.of[pad]), np.full(sources.size, sink)
        nfa = _Nfa(*(np.concatenate([old, new]) for old, new in zip((nfa.src, nfa.tok, nfa.dst), moves)),
                   np.append(nfa.accepting, True), nfa.initial)
    return (torch.from_numpy(nfa.src), torch.from_numpy(nfa.tok), torch.from_numpy(nfa.dst),
            torch.from_numpy(nfa.accepting), nfa.initial, classes)
