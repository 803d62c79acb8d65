"""Token automata for fixed-length canvas slots.

A regular language (a regex; outlines turns JSON Schemas into regexes) becomes a token-level DFA with outlines-core.
On a diffusion canvas a value occupies a *fixed-length slot*: `length` positions, the value followed by pad tokens
(which decoding removes). For such a slot this module derives

- per-position allowed sets: token t may stand at position k iff some state reachable from the start in exactly k
  tokens moves on t to a state from which acceptance is reachable in exactly `length - k - 1` tokens (pads included);
- a constrained commit: the highest-scoring token sequence that is a complete path of the automaton (Viterbi over
  (position, state) on the final step's log-probabilities).

Per-position sets alone are a relaxation (a sequence of individually allowed tokens need not be a path, e.g. `ab|ba`);
the commit makes the committed slot valid by construction, and the sets keep the denoising inside the slot's language
wherever position-wise constraints can.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections import OrderedDict
from functools import cached_property

import torch

from diffreason.errors import TemplateError


@dataclass(frozen=True)
class TokenAutomaton:
    """A deterministic automaton over token ids: next_state[s, t] (-1: no move), accepting states."""

    next_state: torch.Tensor  # [S, V] long
    initial: int
    accepting: torch.Tensor  # [S] bool

    @property
    def num_states(self) -> int:
        return self.next_state.shape[0]

    @classmethod
    def from_regex(cls, regex: str, tokenizer) -> "TokenAutomaton":
        return _from_regex_cached(regex, _OutlinesTokenizer.wrap(tokenizer))

    @classmethod
    def from_transitions(
        cls, transitions: dict[int, dict[int, int]], initial: int, finals, vocab_size: int
    ) -> "TokenAutomaton":
        states = sorted(set(transitions) | {s for m in transitions.values() for s in m.values()} | {initial} | set(finals))
        index = {s: i for i, s in enumerate(states)}
        table = torch.full((len(states), vocab_size), -1, dtype=torch.long)
        rows = [index[s] for s, moves in transitions.items() for _ in moves]
        tokens = [t for moves in transitions.values() for t in moves]
        targets = [index[n] for moves in transitions.values() for n in moves.values()]
        if rows:
            table[torch.tensor(rows), torch.tensor(tokens)] = torch.tensor(targets)
        accepting = torch.zeros(len(states), dtype=torch.bool)
        accepting[[index[s] for s in finals if s in index]] = True
        return cls(table, index[initial], accepting)

    def with_padding(self, pad: int) -> "TokenAutomaton":
        """Add a pad sink: any accepting state moves on `pad` to an accepting PAD state that only takes pads."""
        S, V = self.next_state.shape
        table = torch.cat([self.next_state, torch.full((1, V), -1, dtype=torch.long)])
        table[: S][self.accepting, pad] = S
        table[S, pad] = S
        return TokenAutomaton(table, self.initial, torch.cat([self.accepting, torch.tensor([True])]))

    @cached_property
    def edges(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every move as (source state, token, target state): sparse, so slot work is linear in the moves."""
        src, tok = (self.next_state >= 0).nonzero(as_tuple=True)
        return src, tok, self.next_state[src, tok]

    @cached_property
    def state_pairs(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The moves grouped by (source, target) state pair: (sources [P], targets [P], tokens [P, V] bool).
        Reachability only depends on the pairs, of which there are far fewer than token moves."""
        src, tok, dst = self.edges
        S, V = self.next_state.shape
        pairs, inverse = torch.unique(src * S + dst, return_inverse=True)
        tokens = torch.zeros((pairs.numel(), V), dtype=torch.bool)
        tokens[inverse, tok] = True
        return pairs // S, pairs % S, tokens

    def slot_sets(self, length: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(allowed [L, V] bool, forward [L+1, S], backward [L+1, S]) for a slot of exactly `length` tokens.

        forward[k, s]: s reachable in k tokens; backward[k, s]: acceptance reachable from s in length - k tokens.
        """
        S, V = self.next_state.shape
        src, dst, pair_tokens = self.state_pairs
        forward = torch.zeros((length + 1, S), dtype=torch.bool)
        forward[0, self.initial] = True
        for k in range(length):
            forward[k + 1, dst[forward[k, src]]] = True
        backward = torch.zeros((length + 1, S), dtype=torch.bool)
        backward[length] = self.accepting
        for k in range(length - 1, -1, -1):
            backward[k, src[backward[k + 1, dst]]] = True
        if not bool((forward[0] & backward[0]).any()):
            raise TemplateError(f"no value of this type fits in exactly {length} tokens")
        # position k allows the tokens of the moves from a state reachable in k tokens to one that can still finish
        live = forward[:-1, src] & backward[1:, dst]  # [L, P]
        allowed = (live.float() @ pair_tokens.float()) > 0
        return allowed, forward, backward

    def best_path(self, log_probs: torch.Tensor, backward: torch.Tensor | None = None) -> list[int]:
        """The complete path of len(log_probs) tokens maximising the summed log-probabilities (Viterbi)."""
        length, V = log_probs.shape
        S = self.num_states
        if backward is None:
            backward = self.slot_sets(length)[2]
        src, tok, dst = self.edges
        lp = log_probs.double().nan_to_num(neginf=-1e30)
        neg = torch.tensor(float("-inf"), dtype=torch.float64)
        score = torch.full((S,), float("-inf"), dtype=torch.float64)
        score[self.initial] = 0.0
        back_edge = []
        for k in range(length):
            valid = backward[k + 1, dst] & torch.isfinite(score[src])
            cand = torch.where(valid, score[src] + lp[k, tok], neg)
            new = torch.full((S,), float("-inf"), dtype=torch.float64).scatter_reduce(
                0, dst, cand, reduce="amax", include_self=True
            )
            # an argmax edge into each state (the first one in edge order)
            hit = ((cand == new[dst]) & torch.isfinite(cand)).nonzero().flatten()
            best = torch.full((S,), -1, dtype=torch.long)
            best[dst[hit].flip(0)] = hit.flip(0)
            back_edge.append(best)
            score = new
        final = torch.where(self.accepting, score, neg)
        state = int(final.argmax())
        if not torch.isfinite(final[state]):
            raise TemplateError("no complete value fits the slot")
        tokens = []
        for k in range(length - 1, -1, -1):
            e = int(back_edge[k][state])
            tokens.append(int(tok[e]))
            state = int(src[e])
        return tokens[::-1]

    def accepts(self, tokens) -> bool:
        state = self.initial
        for t in tokens:
            state = int(self.next_state[state, int(t)])
            if state < 0:
                return False
        return bool(self.accepting[state])


class _OutlinesTokenizer:
    """The tokenizer interface outlines-core's index builder expects, over a transformers tokenizer (hashable)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.vocabulary = tokenizer.get_vocab()
        self.special_tokens = set(tokenizer.all_special_tokens)
        self.eos_token_id = tokenizer.eos_token_id
        self._key = (tokenizer.name_or_path, len(self.vocabulary), tuple(sorted(self.vocabulary.items())[:50]))

    _cache: dict = {}

    @classmethod
    def wrap(cls, tokenizer) -> "_OutlinesTokenizer":
        key = id(tokenizer)
        if key not in cls._cache:
            cls._cache[key] = cls(tokenizer)
        return cls._cache[key]

    def convert_token_to_string(self, token: str) -> str:
        string = self.tokenizer.convert_tokens_to_string([token])
        # byte-level BPE marks a leading space with Ġ; convert_tokens_to_string already maps it back
        return string

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, _OutlinesTokenizer) and self.tokenizer is other.tokenizer


def _state_key(state):
    """A hashable stand-in for an interegular crawl state (ints, tuples, sets, dicts, nested), equal iff they are."""
    if isinstance(state, dict):
        return ("dict", frozenset((k, _state_key(v)) for k, v in state.items()))
    if isinstance(state, (set, frozenset)):
        return ("set", frozenset(_state_key(v) for v in state))
    if isinstance(state, (list, tuple)):
        return (type(state).__name__, tuple(_state_key(v) for v in state))
    return state


MAX_STATES = 20_000  # per FSM operation: a few patterns (nested repeats of overlapping classes) blow up exponentially


class AutomatonTooLarge(TemplateError):
    """The regex's deterministic automaton would exceed MAX_STATES states."""


def _indexed_crawl(alphabet, initial, final, follow):
    """interegular's `crawl` (subset construction behind every FSM operation) with a dict from state to number
    instead of `list.index`: the same FSM, in linear rather than quadratic time in the number of states. Stops at
    MAX_STATES states, so a pathological regex fails in bounded time and memory."""
    from interegular.fsm import FSM, OblivionError

    try:
        first = initial if hash(initial) is not None else None
    except TypeError:
        first = _state_key(initial)
    states, numbers, finals, transitions = [initial], {first: 0}, set(), {}
    i = 0
    while i < len(states):
        state = states[i]
        if final(state):
            finals.add(i)
        transitions[i] = {}
        for symbol in alphabet.by_transition:
            try:
                nxt = follow(state, symbol)
            except OblivionError:
                continue
            try:
                key = nxt if hash(nxt) is not None else None  # most states hash as they are
            except TypeError:
                key = _state_key(nxt)
            j = numbers.get(key)
            if j is None:
                if len(states) >= MAX_STATES:
                    raise AutomatonTooLarge(f"its automaton exceeds {MAX_STATES} states")
                j = numbers[key] = len(states)
                states.append(nxt)
            transitions[i][symbol] = j
        i += 1
    return FSM(alphabet=alphabet, states=range(len(states)), initial=0, finals=finals, map=transitions,
               __no_validation__=True)


def _token_index(regex: str, tokenizer: _OutlinesTokenizer):
    """outlines-core's regex → token index (`create_states_mapping`) without its FSM minimisation: interegular's
    `reduce()` (two subset constructions over the reversed automaton) costs minutes on the bounded repeats JSON
    values are made of, and an unminimised DFA accepts the same language (the slot work below is linear in its
    moves either way)."""
    import interegular.fsm
    from outlines_core.fsm.regex import create_fsm_index_tokenizer, make_byte_level_fsm, make_deterministic_fsm

    interegular.fsm.crawl = _indexed_crawl  # same result, linear time (see _indexed_crawl)
    char_fsm = interegular.parse_pattern(regex).to_fsm()
    byte_fsm, _ = make_deterministic_fsm(make_byte_level_fsm(char_fsm, keep_utf8=True))
    index, _empty = create_fsm_index_tokenizer(byte_fsm, tokenizer)
    return index


class BytesLRU:
    """A least-recently-used cache bounded by the bytes its values hold, not by their count: a token automaton is a
    [states, vocab] table, so with a 262k-token vocabulary one entry can weigh hundreds of MB."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.items: OrderedDict = OrderedDict()
        self.bytes = 0

    def get(self, key, build, size):
        if key in self.items:
            self.items.move_to_end(key)
            return self.items[key][0]
        value = build()
        weight = size(value)
        if weight <= self.max_bytes:
            self.items[key] = (value, weight)
            self.bytes += weight
            while self.bytes > self.max_bytes:
                _, (_, dropped) = self.items.popitem(last=False)
                self.bytes -= dropped
        return value


_AUTOMATA = BytesLRU(512 * 2**20)


def _from_regex_cached(regex: str, tokenizer: _OutlinesTokenizer) -> TokenAutomaton:
    return _AUTOMATA.get((regex, tokenizer), lambda: _from_regex(regex, tokenizer),
                         lambda a: a.next_state.numel() * a.next_state.element_size())


def _from_regex(regex: str, tokenizer: _OutlinesTokenizer) -> TokenAutomaton:
    try:
        index = _token_index(regex, tokenizer)
    except AutomatonTooLarge:
        raise
    except Exception as exc:  # interegular / outlines raise several types for unsupported constructs
        reason = " ".join(str(exc).split()) or f"{type(exc).__name__} (not a regex this parser supports)"
        raise TemplateError(f"cannot build an automaton for regex {regex!r}: {reason}") from None
    transitions = index.get_transitions()
    eos = tokenizer.eos_token_id
    # outlines marks acceptance by an EOS move into a final state; we end values with pads instead.
    cleaned = {s: {t: n for t, n in moves.items() if t != eos} for s, moves in transitions.items()}
    states = set(transitions) | {n for moves in transitions.values() for n in moves.values()}
    accepting = {s for s in states if index.is_final_state(s)} | {s for s, m in transitions.items() if eos in m}
    return TokenAutomaton.from_transitions(
        cleaned, index.get_initial_state(), accepting, len(tokenizer.tokenizer)
    )
