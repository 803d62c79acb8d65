"""Stage 2 (character level): a parsed regex → its character DFA, in one subset construction.

interegular builds a pattern's automaton bottom up: each concatenation, alternation and repeat is a product
construction over its parts' automata, so a part nested d levels deep is crawled d times, and its alphabets are
merged at every level. JSON value regexes nest deeply (an array of objects of strings of bounded repeats); that
crawl was two thirds of a schema's compile time. Here the pattern interegular parsed becomes one Thompson NFA over
character classes and is determinised once. The result is an interegular `FSM`, so outlines-core takes it as before.

Covered: everything our compiler writes and most user patterns — character groups, `.`, alternation, concatenation,
bounded and unbounded repeats, and the intersection / complement nodes of `diffreason.constrain.chardfa`. Lookarounds and
inline flags raise `NotCovered`; the caller then uses interegular's own construction.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import math
from dataclasses import dataclass

import numpy as np

from diffreason import limits


@contextlib.contextmanager
def paused_gc():
    """No cyclic garbage collection inside: for work that builds many objects it keeps to the end (automata, their
    caches), where each collection would only walk them again. Nested use and a collector already off are kept as
    they are."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class NotCovered(Exception):
    """The pattern uses a construct this builder leaves to interegular."""


@dataclass
class DFA:
    """States 0..len(moves)-1, initial 0; moves[s] = {class: next state}, a missing class is a dead end."""

    moves: list[dict[int, int]]
    finals: set[int]


@functools.cache
def _node_types():
    from interegular import patterns

    return patterns, type(patterns._DOT), type(patterns._EMPTY)


class _Alphabet:
    """Character classes: characters every character group of the pattern treats alike share a class; the
    characters no group names are one more class, `anything_else` (non-ASCII among them)."""

    def __init__(self, root, special_nodes):
        patterns, dot_cls, _ = _node_types()
        groups: dict[frozenset, int] = {}

        def visit(node):
            if isinstance(node, patterns._CharGroup):
                groups.setdefault(node.chars, len(groups))
            elif isinstance(node, dot_cls):
                groups.setdefault(frozenset("\n"), len(groups))
            for child in _children(node, special_nodes):
                visit(child)

        visit(root)
        signature: dict[str, int] = {}
        for chars, bit in groups.items():
            for ch in sorted(chars):  # (a set's order follows the process's string hashing: classes numbered alike)
                signature[ch] = signature.get(ch, 0) | (1 << bit)
        class_of_signature: dict[int, int] = {}
        self.of_char = {ch: class_of_signature.setdefault(sig, len(class_of_signature)) for ch, sig in signature.items()}
        self.other = len(class_of_signature)  # anything_else
        self.size = self.other + 1
        self.all = frozenset(range(self.size))
        self._classes: dict[tuple[frozenset, bool], frozenset] = {}

    def classes(self, chars: frozenset, negated: bool) -> frozenset:
        found = self._classes.get((chars, negated))
        if found is None:
            named = frozenset(self.of_char[ch] for ch in chars)
            found = self._classes[chars, negated] = self.all - named if negated else named
        return found

    def interegular(self):
        from interegular.fsm import Alphabet, anything_else

        return Alphabet({**self.of_char, anything_else: self.other})


def _children(node, special_nodes):
    patterns, _, _ = _node_types()
    intersection, complement = special_nodes
    if isinstance(node, patterns.Pattern):
        return node.options
    if isinstance(node, patterns._Concatenation):
        return node.parts
    if isinstance(node, patterns._Repeated):
        return (node.base,)
    if isinstance(node, intersection):
        return node.parts
    if isinstance(node, complement):
        return (node.part,)
    if isinstance(node, patterns._NonCapturing):
        return (node.inner,)
    return ()


class _NFA:
    """A Thompson NFA: per state, character moves (classes, target) and epsilon moves."""

    def __init__(self, alphabet: _Alphabet, special_nodes, max_states: int):
        self.alphabet, self.special, self.max_states = alphabet, special_nodes, max_states
        self.moves: list[list[tuple[frozenset, int]]] = []
        self.eps: list[list[int]] = []

    def new(self) -> int:
        self.moves.append([])
        self.eps.append([])
        return len(self.moves) - 1

    def fragment(self, node) -> tuple[int, int]:
        """(start, end) states of a fresh sub-automaton for `node`."""
        patterns, dot_cls, empty_cls = _node_types()
        intersection, complement = self.special
        if isinstance(node, (patterns._CharGroup, dot_cls)):
            start, end = self.new(), self.new()
            classes = (self.alphabet.classes(node.chars, node.negated) if isinstance(node, patterns._CharGroup)
                       else self.alphabet.classes(frozenset("\n"), True))
            if classes:
                self.moves[start].append((classes, end))
            return start, end
        if isinstance(node, empty_cls):
            state = self.new()
            return state, state
        if isinstance(node, patterns.Pattern):
            if node.added_flags or node.removed_flags:
                raise NotCovered("inline flags")
            if len(node.options) == 1:  # a group
                return self.fragment(node.options[0])
            start, end = self.new(), self.new()
            for option in node.options:
                s, e = self.fragment(option)
                self.eps[start].append(s)
                self.eps[e].append(end)
            return start, end
        if isinstance(node, patterns._Concatenation):
            if any(isinstance(part, patterns._NonCapturing) for part in node.parts):
                raise NotCovered("lookaround")
            return self._chain([lambda part=part: self.fragment(part) for part in node.parts])
        if isinstance(node, patterns._Repeated):
            return self._repeat(node)
        if isinstance(node, (intersection, complement)):
            return self._embed(dfa_of(node, self.alphabet, self.special, self.max_states))
        raise NotCovered(type(node).__name__)

    def _chain(self, builders) -> tuple[int, int]:
        if not builders:
            state = self.new()
            return state, state
        start, end = builders[0]()
        for build in builders[1:]:
            s, e = build()
            self.eps[end].append(s)
            end = e
        return start, end

    def _repeat(self, node) -> tuple[int, int]:
        # {m,n}: m copies, then n-m nested optional copies (each may stop or go on), so after k characters the
        # NFA is in O(1) copies, not in every later one as with flat optional copies
        start, end = self._chain([lambda: self.fragment(node.base)] * node.min)
        if node.max is None:
            s, e = self.fragment(node.base)
            loop_end = self.new()
            self.eps[end] += [s, loop_end]
            self.eps[e] += [s, loop_end]
            return start, loop_end
        out = self.new()
        self.eps[end].append(out)
        for _ in range(node.max - node.min):
            s, e = self.fragment(node.base)
            self.eps[end].append(s)
            self.eps[e].append(out)
            end = e
        return start, out

    def _embed(self, dfa: DFA) -> tuple[int, int]:
        states = [self.new() for _ in dfa.moves]
        start, end = self.new(), self.new()
        self.eps[start].append(states[0])
        for s, row in enumerate(dfa.moves):
            by_target: dict[int, list[int]] = {}
            for c, t in row.items():
                by_target.setdefault(t, []).append(c)
            self.moves[states[s]] += [(frozenset(cs), states[t]) for t, cs in by_target.items()]
            if s in dfa.finals:
                self.eps[states[s]].append(end)
        return start, end

    def determinise(self, start: int, end: int) -> DFA:
        """Subset construction. A DFA state is the set of NFA states with character moves (plus `end`) that the
        input so far can reach; states reached only through epsilon moves are folded into their closures."""
        closures: dict[int, frozenset] = {}

        def closure(q: int) -> frozenset:
            found = closures.get(q)
            if found is None:
                seen, todo = {q}, [q]
                while todo:
                    for t in self.eps[todo.pop()]:
                        if t not in seen:
                            seen.add(t)
                            todo.append(t)
                found = closures[q] = frozenset(s for s in seen if self.moves[s] or s == end)
            return found

        number = Numbering(closure(start), self.max_states)
        sets, moves = number.items, []
        for current in sets:  # grows while it is walked
            limits.check()
            by_classes: dict[frozenset, set] = {}
            for q in current:
                for classes, t in self.moves[q]:
                    target = by_classes.get(classes)
                    if target is None:
                        by_classes[classes] = set(closure(t))
                    else:
                        target |= closure(t)
            if len(by_classes) > 1 and sum(map(len, by_classes)) != len(frozenset().union(*by_classes)):
                by_classes = _refine(by_classes)  # overlapping class sets: split them per class
            row: dict[int, int] = {}
            for classes, target in by_classes.items():
                row.update(dict.fromkeys(classes, number(frozenset(target))))
            moves.append(row)
        return DFA(moves, {i for i, s in enumerate(sets) if end in s})


class TooLarge(Exception):
    """The DFA would exceed the state limit."""


class Numbering:
    """Numbers the states of a construction in the order they are found (0 first); past `limit` states, TooLarge.
    `items[i]` is what state i stands for."""

    def __init__(self, first, limit: int, item=None):
        self.numbers, self.items, self.limit = {first: 0}, [first if item is None else item], limit

    def __call__(self, key, item=None) -> int:
        j = self.numbers.get(key)
        if j is None:
            if len(self.items) >= self.limit:
                raise TooLarge(f"its automaton exceeds {self.limit} states")
            j = self.numbers[key] = len(self.items)
            self.items.append(key if item is None else item)
        return j


def _refine(by_classes: dict[frozenset, set]) -> dict[frozenset, set]:
    per_class: dict[int, set] = {}
    for classes, target in by_classes.items():
        for c in classes:
            per_class.setdefault(c, set()).update(target)
    return {frozenset((c,)): target for c, target in per_class.items()}


def _trim(dfa: DFA) -> DFA:
    """Drop the states from which no final state is reachable (and the moves into them); renumber from 0."""
    into: list[list[int]] = [[] for _ in dfa.moves]
    for s, row in enumerate(dfa.moves):
        for t in row.values():
            into[t].append(s)
    live, todo = set(dfa.finals), list(dfa.finals)
    while todo:
        for s in into[todo.pop()]:
            if s not in live:
                live.add(s)
                todo.append(s)
    if 0 not in live:
        return DFA([{}], set())
    order = sorted(live)
    number = {s: i for i, s in enumerate(order)}
    return DFA([{c: number[t] for c, t in dfa.moves[s].items() if t in live} for s in order],
               {number[s] for s in dfa.finals})


def minimise(dfa: DFA) -> DFA:
    """The minimal DFA of a trimmed `dfa`'s language (Moore's partition refinement, each round a few array operations
    over the dense table): states that no string tells apart merge, numbered in order of their first member (the
    initial state stays 0). Every later stage (token automaton, slot sets, the commit's Viterbi pass) is linear in
    states and moves."""
    n = len(dfa.moves)
    if n <= 1:
        return dfa
    classes = 1 + max((c for row in dfa.moves for c in row), default=0)
    table = _table(dfa, classes)
    table[table < 0] = n  # a dead state n: every missing move
    table = np.vstack([table, np.full((1, classes), n, dtype=table.dtype)])
    block = np.append(_finals(dfa), False).astype(np.int64)
    count = len(np.unique(block))
    while True:
        limits.check()
        signature = np.column_stack([block, block[table]])
        _, refined = np.unique(signature, axis=0, return_inverse=True)
        refined = refined.reshape(-1)
        if int(refined.max()) + 1 == count:  # (refinement only splits blocks: no new block, no change)
            break
        block, count = refined, int(refined.max()) + 1
    if count == n + 1:
        return dfa
    dead = block[n]
    number: dict[int, int] = {}
    first: list[int] = []
    for s in range(n):
        b = int(block[s])
        if b != dead and b not in number:
            number[b] = len(first)
            first.append(s)
    moves = [{c: number[int(block[t])] for c, t in dfa.moves[s].items() if block[t] != dead} for s in first]
    return DFA(moves, {number[int(block[s])] for s in dfa.finals})


def _table(dfa: DFA, classes: int) -> np.ndarray:
    """The moves as a dense [states, classes] table, -1 where there is none."""
    table = np.full((len(dfa.moves), classes), -1, dtype=np.int32)
    sizes = np.fromiter(map(len, dfa.moves), np.int64, len(dfa.moves))
    rows = np.repeat(np.arange(len(dfa.moves)), sizes)
    cols = np.fromiter((c for row in dfa.moves for c in row), np.int64, int(sizes.sum()))
    table[rows, cols] = np.fromiter((t for row in dfa.moves for t in row.values()), np.int64, int(sizes.sum()))
    return table


def _finals(dfa: DFA) -> np.ndarray:
    out = np.zeros(len(dfa.moves), dtype=bool)
    out[list(dfa.finals)] = True
    return out


def _layers(tables: list[np.ndarray], max_states: int):
    """Breadth first over the product of DFAs given as dense tables over shared classes (start: every state 0),
    one layer of new product states at a time: yields (states [k, N], the moves into them: (sources [M], classes
    [M], targets [M]), as numbers of the states found so far, numbered in the order yielded). A product state is
    keyed by its states in mixed radix, so a layer is a few array operations, not a loop over states and classes
    (Handwritten allany14 searched 100k product states in Python). TooLarge when a layer passes `max_states`
    states (after it is yielded: a search that stops at it never passes the limit)."""
    sizes = [t.shape[0] for t in tables]
    strides = np.cumprod([1] + sizes[:-1], dtype=np.int64)
    seen = np.zeros(1, dtype=np.int64)  # keys of the states found, sorted
    numbers = np.zeros(1, dtype=np.int64)  # their numbers, aligned with seen
    frontier = np.zeros((len(tables), 1), dtype=np.int64)
    frontier_numbers = np.zeros(1, dtype=np.int64)
    yield frontier, (np.zeros(0, np.int64),) * 3
    count = 1
    while frontier.shape[1]:
        limits.check()
        targets = np.stack([t[s] for t, s in zip(tables, frontier)])  # [k, F, C]
        ok = (targets >= 0).all(axis=0)
        source, cls = np.nonzero(ok)
        targets = targets[:, source, cls]  # [k, M]
        keys = strides @ targets
        fresh, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        at = np.minimum(np.searchsorted(seen, fresh), seen.size - 1)
        new = seen[at] != fresh
        # the numbers of the moves' targets: old states keep theirs, new ones follow in key order
        number_of_fresh = numbers[at]
        number_of_fresh[new] = count + np.arange(int(new.sum()))
        states = targets[:, first[new]]
        yield states, (frontier_numbers[source], cls, number_of_fresh[inverse])
        if count + states.shape[1] > max_states:
            raise TooLarge(f"its automaton exceeds {max_states} states")
        order = np.argsort(np.concatenate([seen, fresh[new]]), kind="stable")
        seen = np.concatenate([seen, fresh[new]])[order]
        numbers = np.concatenate([numbers, number_of_fresh[new]])[order]
        count += states.shape[1]
        frontier, frontier_numbers = states, number_of_fresh[new]


def _fits(dfas) -> bool:
    """Do the product's state keys fit int64 (see `_layers`)?"""
    return math.prod(max(1, len(d.moves)) for d in dfas) < 2**62


def _product(dfas: list[DFA], max_states: int) -> DFA:
    if not _fits(dfas):
        return _product_by_dicts(dfas, max_states)
    classes = 1 + max((c for d in dfas for row in d.moves for c in row), default=-1)
    tables, finals = [_table(d, classes) for d in dfas], [_finals(d) for d in dfas]
    layers = list(_layers(tables, max_states))
    states = np.concatenate([layer for layer, _ in layers], axis=1)  # in number order
    src, cls, dst = (np.concatenate(x) for x in zip(*(moves for _, moves in layers)))
    order = np.lexsort((cls, src))
    src, cls, dst = src[order], cls[order].tolist(), dst[order].tolist()
    bounds = np.searchsorted(src, np.arange(states.shape[1] + 1)).tolist()
    moves = [dict(zip(cls[lo:hi], dst[lo:hi])) for lo, hi in zip(bounds, bounds[1:])]
    final = np.logical_and.reduce([f[s] for f, s in zip(finals, states)])
    return DFA(moves, set(np.flatnonzero(final).tolist()))


def _product_by_dicts(dfas: list[DFA], max_states: int) -> DFA:
    number = Numbering((0,) * len(dfas), max_states)
    states, moves = number.items, []
    for current in states:
        rows = [dfa.moves[s] for dfa, s in zip(dfas, current)]
        moves.append({c: number(tuple(r[c] for r in rows)) for c in set(rows[0]).intersection(*rows[1:])})
    finals = {i for i, key in enumerate(states) if all(s in dfa.finals for dfa, s in zip(dfas, key))}
    return DFA(moves, finals)


def product_empty(dfas: list[DFA], max_states: int) -> bool:
    """Does no string take every DFA to a final state? Breadth first over the product (`_layers`), stopping at the
    first layer with a state final in all of them: an intersection that has strings usually shows one within a few
    dozen states, where building the whole product walked thousands. Raises TooLarge past `max_states` states."""
    if not _fits(dfas):
        return _product_empty_by_dicts(dfas, max_states)
    classes = 1 + max((c for d in dfas for row in d.moves for c in row), default=-1)
    return _tables_product_empty([_table(d, classes) for d in dfas], [_finals(d) for d in dfas], max_states)


def _tables_product_empty(tables: list[np.ndarray], finals: list[np.ndarray], max_states: int) -> bool:
    for states, _ in _layers(tables, max_states):
        if np.logical_and.reduce([f[s] for f, s in zip(finals, states)]).any():
            return False
    return True


def _product_empty_by_dicts(dfas: list[DFA], max_states: int) -> bool:
    start = (0,) * len(dfas)
    finals = [dfa.finals for dfa in dfas]
    if all(0 in f for f in finals):
        return False
    seen, stack = {start}, [start]
    while stack:
        limits.check()
        rows = [dfa.moves[s] for dfa, s in zip(dfas, stack.pop())]
        for c in set(rows[0]).intersection(*rows[1:]):
            target = tuple(r[c] for r in rows)
            if target not in seen:
                if all(s in f for s, f in zip(target, finals)):
                    return False
                if len(seen) >= max_states:
                    raise TooLarge(f"its automaton exceeds {max_states} states")
                seen.add(target)
                stack.append(target)
    return True


def _complement(dfa: DFA, alphabet: _Alphabet) -> DFA:
    dead = len(dfa.moves)
    moves = [{c: row.get(c, dead) for c in alphabet.all} for row in dfa.moves]
    moves.append(dict.fromkeys(alphabet.all, dead))
    return DFA(moves, set(range(dead + 1)) - dfa.finals)


MINIMISE_FROM = 256  # states from which an intersection's product is minimised (see `dfa_of`)
MINIMISE_ANY_FROM = 4096  # ... and any other DFA


def dfa_of(node, alphabet: _Alphabet, special_nodes, max_states: int) -> DFA:
    """The trimmed DFA of `node` over `alphabet`'s classes; minimal where it is an intersection's product of at least
    MINIMISE_FROM states, or any DFA of at least MINIMISE_ANY_FROM. A product multiplies its parts' states, many of
    which no string tells apart (a code hole's shape × bracket product had 1.3-2.6x the states it needs), and so does
    a regex that repeats a large part in several places (a multi-line hole's last statement: 6,011 states, 2,581
    minimal). Smaller DFAs are left as the subset construction built them: a JSON value's are near minimal, and
    Moore's refinement takes a round per state of a bounded repeat's chain (minimising every DFA made a schema's
    compile 1.6x slower, those of 256 states or more 1.1x)."""
    intersection, complement = special_nodes
    if isinstance(node, intersection):
        product = _trim(_product([dfa_of(p, alphabet, special_nodes, max_states) for p in node.parts], max_states))
        return minimise(product) if len(product.moves) >= MINIMISE_FROM else product
    if isinstance(node, complement):
        built = _trim(_complement(dfa_of(node.part, alphabet, special_nodes, max_states), alphabet))
    else:
        nfa = _NFA(alphabet, special_nodes, max_states)
        built = _trim(nfa.determinise(*nfa.fragment(node)))
    return minimise(built) if len(built.moves) >= MINIMISE_ANY_FROM else built


@dataclass
class ClassedDFA:
    """A DFA over its own character classes: `of_char[ch]` for the characters its pattern names, `other` for every
    other character (interegular's anything_else)."""

    of_char: dict[str, int]
    other: int
    dfa: DFA

    @functools.cached_property
    def table(self) -> np.ndarray:
        """The moves as a dense [states, own classes] table (-1: none), for products (`intersection_empty`)."""
        return _table(self.dfa, max(self.other, *self.of_char.values(), 0) + 1)

    @functools.cached_property
    def finals(self) -> np.ndarray:
        return _finals(self.dfa)


def classed_dfa(node, special_nodes, max_states: int) -> ClassedDFA:
    """The trimmed DFA of a parsed pattern over its own classes (see `build_fsm` for `special_nodes`)."""
    alphabet = _Alphabet(node, special_nodes)
    with paused_gc():
        return ClassedDFA(alphabet.of_char, alphabet.other, dfa_of(node, alphabet, special_nodes, max_states))


def intersection_empty(parts: list[ClassedDFA], max_states: int) -> bool:
    """Is no string accepted by every part? Each part's own classes are refined to the classes all parts share
    (characters every part treats alike), so a part's DFA is built once however many intersections it is in, and
    the product is searched (`product_empty`), not built."""
    signatures = {tuple(p.of_char.get(ch, p.other) for p in parts) for ch in set().union(*(p.of_char for p in parts))}
    signatures = sorted(signatures | {tuple(p.other for p in parts)})  # (+ the characters no part names)
    if not _fits([p.dfa for p in parts]):
        relabelled = []
        for k, part in enumerate(parts):
            # each shared class j moves as the part's own class signatures[j][k]
            own = [sig[k] for sig in signatures]
            relabelled.append(DFA([{j: row[c] for j, c in enumerate(own) if c in row} for row in part.dfa.moves],
                                  part.dfa.finals))
        return _product_empty_by_dicts(relabelled, max_states)
    columns = np.array(signatures, dtype=np.int64).T  # [part, shared class]: the part's own class
    return _tables_product_empty([p.table[:, own] for p, own in zip(parts, columns)], [p.finals for p in parts],
                                 max_states)


def build_fsm(pattern, special_nodes, max_states: int):
    """The interegular FSM of a parsed `pattern` (which may hold `special_nodes`: the intersection and complement
    node classes). Raises NotCovered for what only interegular builds, TooLarge past `max_states` states."""
    from interegular.fsm import FSM

    alphabet = _Alphabet(pattern, special_nodes)
    with paused_gc():  # the construction allocates hundreds of thousands of small lists and frees none of them early
        dfa = dfa_of(pattern, alphabet, special_nodes, max_states)
    return FSM(alphabet=alphabet.interegular(), states=range(len(dfa.moves)), initial=0, finals=dfa.finals,
               map=dict(enumerate(dfa.moves)), __no_validation__=True)
