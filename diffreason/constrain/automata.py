"""Stage 3 of the constraint pipeline: a regex → its token automaton.

A leaf regex's character DFA (`diffreason.constrain.chardfa`) becomes a token automaton through outlines-core's
regex → token index, read over groups of tokens its alphabet treats alike; an enum's `Choice` is read straight off the
trie of its values' bytes; a structured `Rx` is composed from its parts' automata (`diffreason.constrain.compose`).
`TokenAutomata` builds and caches them for one tokenizer.
"""

from __future__ import annotations

import bisect
import functools
import itertools

import numpy as np
import torch

from diffreason import limits
from diffreason.constrain import compose
from diffreason.constrain.cache import BytesLRU
from diffreason.constrain import chardfa, utf8
from diffreason.constrain.chardfa import AutomatonTooLarge, CharLevel, Intersections, intersections_in, trie
from diffreason.constrain.regex import Choice, is_composite
from diffreason.constrain.tokens import TokenAutomaton, TokenClasses, TokenizerAdapter
from diffreason.errors import TemplateError


class TokenAutomata:
    """Token automata of regexes over one tokenizer, cached by (regex, intersections[, pad]).

    One per `Compiler`, which owns it; its character DFAs come from the compiler's `CharLevel`."""

    def __init__(self, tokenizer: TokenizerAdapter, chars: CharLevel):
        self.tokenizer = tokenizer
        self.chars = chars
        self.cache = BytesLRU(512 * 2**20, reweigh=True)

    def clear(self) -> None:
        self.cache.clear()

    def of(self, regex: str, intersections: Intersections = ()) -> TokenAutomaton:
        """The automaton of `regex`. `intersections`: (placeholder character, regexes) pairs; see `Intersections`."""
        intersections = tuple(intersections)
        return self.cache.get((regex, intersections), lambda: self.build(regex, intersections), lambda a: a.nbytes)

    def padded(self, regex: str, pad: int, intersections: Intersections = ()) -> TokenAutomaton:
        """`of(...).with_padding(pad)`. A composed regex's automaton is composed with its pad sink at once: only
        slots use it (compositions are built from leaves), so its unpadded form would be built, sorted and cached
        for nothing."""
        intersections = tuple(intersections)
        if not is_composite(regex):
            return self.of(regex, intersections).with_padding(pad)
        return self.cache.get((regex, intersections, pad), lambda: self.build(regex, intersections, pad),
                              lambda a: a.nbytes)

    def build(self, regex: str, intersections: Intersections = (), pad: int | None = None) -> TokenAutomaton:
        """`of` without the cache (its parts' automata still come from it). `pad`: for a composed regex, with a pad
        sink (see `padded`)."""
        tokenizer = self.tokenizer
        if is_composite(regex):  # built from its parts' automata (see diffreason.constrain.compose)
            def leaf(text: str) -> TokenAutomaton:
                return self.of(text, intersections_in(text, intersections))

            try:
                *moves, classes = compose.compose(regex, leaf, tokenizer.encode, len(tokenizer.tokenizer),
                                                   chardfa.MAX_STATES, pad)  # (read when called: tests lower it)
            except compose.CompositionTooLarge as exc:
                raise AutomatonTooLarge(f"the automaton of regex {str(regex)[:80]!r}... has {exc}") from None
            return TokenAutomaton.from_moves(*moves, classes)
        if isinstance(regex, Choice) and not intersections:
            return self.choice(regex.texts)
        limits.check()
        try:
            index, group, eos = self.token_index(regex, intersections)
        except (AutomatonTooLarge, limits.BudgetExceeded):
            raise
        except Exception as exc:  # interegular / outlines raise several types for unsupported constructs
            reason = " ".join(str(exc).split()) or f"{type(exc).__name__} (not a regex this parser supports)"
            raise TemplateError(f"cannot build an automaton for regex {regex!r}: {reason}") from None
        src, tok, dst = _moves(index.get_transitions())  # on groups of tokens
        # outlines marks acceptance by an EOS move into a final state; we end values with pads instead.
        labels = np.unique(np.concatenate([src, dst, [index.get_initial_state()]]))
        final = np.array([index.is_final_state(int(s)) for s in labels], dtype=bool)
        final[np.searchsorted(labels, src[tok == eos])] = True
        keep = tok != eos
        src, tok, dst = np.searchsorted(labels, src[keep]), tok[keep], np.searchsorted(labels, dst[keep])
        # groups that move alike from every state make one class (number eos, no group, has no moves)
        of_group, kept = TokenClasses.of_moves(src, tok, dst, eos + 1)
        classes = TokenClasses(of_group.of[group], of_group.count)
        return TokenAutomaton.from_moves(src[kept], of_group.of[tok[kept]], dst[kept], torch.from_numpy(final),
                                         int(np.searchsorted(labels, index.get_initial_state())), classes)

    def choice(self, texts: tuple[str, ...]) -> TokenAutomaton:
        """The token automaton of a finite set of strings (an enum's values) read straight off the trie of their UTF-8
        bytes: from each trie node, every token whose bytes are a path down from it moves to the path's end. The same
        language and the same allowed sets as outlines' index over the trie's character FSM, at a fraction of the cost
        (half a millisecond for a two-value enum, most of it spent on the FSM's alphabet and token groups, and enums are
        a tenth of a schema's compile)."""
        spelled, ordered = self.tokenizer.byte_spellings
        children, finals = trie(text.encode() for text in texts)
        src, tok, dst = [], [], []
        for start in range(len(children)):
            stack = [(start, b"")]
            while stack:
                node, path = stack.pop()
                for byte, child in children[node].items():
                    spelling = path + _BYTES[byte]
                    at = bisect.bisect_left(ordered, spelling)
                    if at == len(ordered) or not ordered[at].startswith(spelling):
                        continue  # no token spelled with this prefix
                    ids = spelled.get(spelling)
                    if ids is not None:
                        src += [start] * len(ids)
                        tok += ids
                        dst += [child] * len(ids)
                    stack.append((child, spelling))
        src, tok, dst = (np.array(x, dtype=np.int64) for x in (src, tok, dst))
        classes, keep = TokenClasses.of_moves(src, tok, dst, len(self.tokenizer.tokenizer))
        accepting = torch.zeros(len(children), dtype=torch.bool)
        accepting[finals] = True
        return TokenAutomaton.from_moves(src[keep], classes.of[tok[keep]], dst[keep], accepting, 0, classes)

    def token_index(self, regex: str, intersections: Intersections = ()):
        """(index, group of each token id, number of groups): outlines-core's regex → token index
        (`create_states_mapping`) over token groups, without its FSM minimisation: interegular's `reduce()` (two subset
        constructions over the reversed automaton) costs minutes on the bounded repeats JSON values are made of, and an
        unminimised DFA accepts the same language (the slot work below is linear in its moves either way)."""
        from outlines_core.fsm.regex import Index

        char_fsm = self.chars.char_fsm(regex, intersections)
        byte_fsm = byte_level_fsm(char_fsm)
        if byte_fsm is None:  # (an alphabet naming non-ASCII characters; outlines' conversion lost some of them)
            byte_fsm = utf8.byte_level_fsm(char_fsm)
        byte_fsm = valid_utf8_only(byte_fsm)
        # what outlines' create_fsm_index_tokenizer does, over one token per group of tokens that this FSM's alphabet
        # reads alike (a few thousand of a 32k vocabulary; see TokenizerAdapter.groups)
        info = byte_fsm.fsm_info
        live = set().union(*byte_fsm.map.values())
        group, vocabulary, count = self.tokenizer.groups(info.alphabet_symbol_mapping, info.alphabet_anything_value, live)
        return Index(info, vocabulary, count, frozenset()), group, count  # (EOS: the "no group" number, moving nowhere)


def byte_level_fsm(fsm):
    """outlines-core's `make_byte_level_fsm` for a character FSM whose alphabet names only ASCII characters (every
    FSM our compiler writes), without its per-move linear scans of the state list: ASCII characters are bytes as
    they are; a move on `anything_else` also takes every multi-byte UTF-8 sequence — a lead byte, then one to three
    continuation bytes through intermediate states shared per target, keyed as outlines keys them. None for other
    FSMs (`diffreason.constrain.utf8` converts them)."""
    from interegular.fsm import anything_else
    from outlines_core.fsm.regex import BetterAlphabet, BetterFSM

    mapping = fsm.alphabet._symbol_mapping
    n = len(fsm.states)
    if fsm.map.keys() != set(range(n)) or any(s is not anything_else and ord(s) >= 0x80 for s in mapping):
        return None
    other = mapping[anything_else]
    cont, lead2, lead3, lead4 = range(max(mapping.values()) + 1, max(mapping.values()) + 5)
    symbols = dict(mapping)
    for names, key in zip(_utf8_byte_symbols(), (cont, lead2, lead3, lead4)):
        symbols.update(dict.fromkeys(names, key))
    moves = {s: dict(row) for s, row in fsm.map.items()}
    chains: dict[int, tuple[int, int, int]] = {}  # target → states 1, 2, 3 continuation bytes before it
    for row in list(moves.values()):
        target = row.get(other)
        if target is None:
            continue
        if target not in chains:
            chains[target] = (n, n + 1, n + 2)
            moves[n], moves[n + 1], moves[n + 2] = {cont: target}, {cont: n}, {cont: n + 1}
            n += 3
        row[lead2], row[lead3], row[lead4] = chains[target]
    return BetterFSM(alphabet=BetterAlphabet(symbols), states=range(n), initial=fsm.initial, finals=fsm.finals,
                     map=moves, __no_validation__=True)


# UTF-8's byte grammar (RFC 3629, table 3-7 of the Unicode standard): per byte its class, and per state (0: between
# characters, the only accepting one) where each class leads. Continuation bytes come in three classes, since what
# may follow E0, ED, F0 and F4 is narrower (no overlong forms, surrogates or code points past U+10FFFF).
_CHAR, _C80, _C90, _CA0, _L2, _E0, _L3, _ED, _F0, _L4, _F4, _BAD = range(12)
_UTF8_CLASS = ([_C80] * 16 + [_C90] * 16 + [_CA0] * 32 + [_BAD] * 2 + [_L2] * 30 + [_E0] + [_L3] * 12 + [_ED]
               + [_L3] * 2 + [_F0] + [_L4] * 3 + [_F4] + [_BAD] * 11)  # bytes 0x80 to 0xFF
_ANY_CONT = (_C80, _C90, _CA0)
_UTF8_MOVES = (
    {_CHAR: 0, _L2: 1, _L3: 2, _L4: 3, _E0: 4, _ED: 5, _F0: 6, _F4: 7},  # between characters
    dict.fromkeys(_ANY_CONT, 0), dict.fromkeys(_ANY_CONT, 1), dict.fromkeys(_ANY_CONT, 2),  # 1, 2, 3 bytes to go
    {_CA0: 1}, {_C80: 1, _C90: 1}, {_C90: 2, _CA0: 2}, {_C80: 2},  # after E0, ED, F0, F4
)


def valid_utf8_only(fsm):
    """A byte-level FSM (outlines' symbols: characters, and "\x00XX" for the bytes of multi-byte characters) narrowed
    to the byte strings that are valid UTF-8: its product with UTF-8's byte grammar, over pairs (its key, the
    symbol's class). Both byte-level conversions (`byte_level_fsm`, outlines') read any lead byte in C0-F7 and then
    any continuation bytes as one character, so a slot of `.` could spell bytes no decoder reads as one (F5 B3 BA
    BE, F0 85 ..., a lone F8 token taken for a whole character): four U+FFFD where the regex allowed one character.
    The FSM as it is when it reads no multi-byte byte and has no `anything_else` move (nothing to narrow)."""
    from interegular.fsm import anything_else
    from outlines_core.fsm.regex import BetterAlphabet, BetterFSM

    from outlines_core.fsm.regex import byte_symbol

    mapping = fsm.alphabet._symbol_mapping
    any_key = mapping[anything_else]
    byte_keys = {k for name, k in mapping.items() if name is not anything_else and len(name) == 3}
    moving = set().union(*fsm.map.values())
    if not moving & (byte_keys | {any_key}):
        return fsm
    named = {name: (key, _CHAR if name is anything_else or len(name) == 1 else _UTF8_CLASS[int(name[1:], 16) - 0x80])
             for name, key in mapping.items()}
    for b in range(0x80, 0x100):  # (a byte outlines leaves unnamed reads as anything_else)
        named.setdefault(byte_symbol(b), (any_key, _UTF8_CLASS[b - 0x80]))
    pair_key: dict[tuple[int, int], int] = {}
    for pair in named.values():
        pair_key.setdefault(pair, len(pair_key))
    pairs_of: dict[int, list[tuple[int, int]]] = {}  # an FSM key → (its pair's key, class) pairs
    for (key, cls), k in pair_key.items():
        pairs_of.setdefault(key, []).append((k, cls))
    number = {(fsm.initial, 0): 0}
    moves: dict[int, dict[int, int]] = {}
    todo = [(fsm.initial, 0)]
    while todo:
        state, u = todo.pop()
        row = moves.setdefault(number[(state, u)], {})
        grammar = _UTF8_MOVES[u]
        for key, target in fsm.map.get(state, {}).items():
            for k, cls in pairs_of.get(key, ()):
                v = grammar.get(cls)
                if v is None:
                    continue
                nxt = (target, v)
                if nxt not in number:
                    number[nxt] = len(number)
                    todo.append(nxt)
                row[k] = number[nxt]
    symbols = {name: pair_key[pair] for name, pair in named.items()}
    finals = {n for (state, u), n in number.items() if u == 0 and state in fsm.finals}
    for n in range(len(number)):
        moves.setdefault(n, {})
    return BetterFSM(alphabet=BetterAlphabet(symbols), states=range(len(number)), initial=0, finals=finals, map=moves,
                     __no_validation__=True)


@functools.cache
def _utf8_byte_symbols() -> tuple[tuple[str, ...], ...]:
    """outlines' names of the non-ASCII bytes: continuation bytes, then lead bytes of 2-, 3- and 4-byte sequences."""
    from outlines_core.fsm.regex import byte_symbol

    return tuple(tuple(map(byte_symbol, range(lo, hi))) for lo, hi in ((0x80, 0xC0), (0xC0, 0xE0), (0xE0, 0xF0),
                                                                         (0xF0, 0xF8)))


_BYTES = [bytes([b]) for b in range(256)]


def _moves(transitions: dict[int, dict[int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """{state: {token: next state}} as three arrays (source, token, target), each filled by one C-speed pass."""
    sizes = np.fromiter(map(len, transitions.values()), np.int64, len(transitions))
    total = int(sizes.sum())
    src = np.repeat(np.fromiter(transitions.keys(), np.int64, len(transitions)), sizes)
    tok = np.fromiter(itertools.chain.from_iterable(transitions.values()), np.int64, total)
    dst = np.fromiter(itertools.chain.from_iterable(m.values() for m in transitions.values()), np.int64, total)
    return src, tok, dst
