"""Stage 2 of the constraint pipeline: a value regex → its character DFA (an interegular `FSM`).

interegular parses the regex; `diffreason.constrain.dfa` determinises the parse in one subset construction (what
interegular's own construction cannot do in time on JSON values' nested bounded repeats); patterns with constructs it
leaves alone (lookarounds, inline flags) fall back to interegular's construction, run with a linear-time crawl inside
a scope that undoes its patch. Regex syntax has no intersection and JSON Schema needs one (`pattern`, `format` and
`minLength` must all hold): `Intersections` name placeholders that stand for the product of several regexes'
automata, a part given as `Complement(regex)` for what regex does not match. `CharLevel` builds and caches character
DFAs and answers emptiness (`matches_nothing`) without building tokens.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import threading
from dataclasses import dataclass

from diffreason import limits
from diffreason.constrain import dfa
from diffreason.constrain.cache import BytesLRU
from diffreason.constrain.dfa import Numbering
from diffreason.constrain.regex import Choice
from diffreason.errors import TemplateError


def _state_key(state):
    """A hashable stand-in for an interegular crawl state (ints, tuples, sets, dicts, nested), equal iff they are."""
    if isinstance(state, dict):
        try:
            return ("dict", frozenset(state.items()))  # the usual case: values hash as they are
        except TypeError:
            return ("dict", frozenset((k, _state_key(v)) for k, v in state.items()))
    if isinstance(state, (set, frozenset)):
        try:
            return ("set", frozenset(state))
        except TypeError:
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

    def key_of(state):
        try:
            return state if hash(state) is not None else None  # most states hash as they are
        except TypeError:
            return _state_key(state)

    number = Numbering(key_of(initial), MAX_STATES, item=initial)
    states, finals, transitions = number.items, set(), {}
    i = 0
    while i < len(states):
        limits.check()
        state = states[i]
        if final(state):
            finals.add(i)
        transitions[i] = {}
        for symbol in alphabet.by_transition:
            try:
                nxt = follow(state, symbol)
            except OblivionError:
                continue
            transitions[i][symbol] = number(key_of(nxt), nxt)
        i += 1
    return FSM(alphabet=alphabet, states=range(len(states)), initial=0, finals=finals, map=transitions,
               __no_validation__=True)


_PARTS = threading.local()  # the sub-pattern FSMs of the regex being built (see _memoised_to_fsm)


def _memoised_to_fsm(to_fsm):
    """interegular builds a pattern's FSM from its parts' FSMs; JSON value regexes repeat parts (every string member
    has the same string pattern), so within one regex each distinct part is built once. Outside `interegular_patched`
    (no memo) it is interegular's own method."""

    def wrapper(self, alphabet=None, prefix_postfix=None, flags=None):
        memo = getattr(_PARTS, "memo", None)
        if memo is None or alphabet is None or prefix_postfix is None:
            return to_fsm(self, alphabet, prefix_postfix, flags) if flags is not None else to_fsm(
                self, alphabet, prefix_postfix)
        key = (self, id(alphabet), prefix_postfix, flags)  # one alphabet object per regex: its id is enough
        if key not in memo:
            memo[key] = to_fsm(self, alphabet, prefix_postfix, flags)
        return memo[key]

    wrapper.diffreason_memoised = True
    return wrapper


_PATCH_LOCK = threading.RLock()


@contextlib.contextmanager
def interegular_patched():
    """interegular with a linear-time crawl (`_indexed_crawl`) and its pattern nodes' `to_fsm` memoised within one
    regex (`_memoised_to_fsm`), for the duration of the block only: the library is restored on the way out. The
    patch is process-wide while it lasts, so builds under it hold a lock."""
    import interegular.fsm
    import interegular.patterns as patterns

    with _PATCH_LOCK:
        if interegular.fsm.crawl is _indexed_crawl:  # (re-entered: already in place)
            yield
            return
        saved = [(interegular.fsm, "crawl", interegular.fsm.crawl)]
        saved += [(cls, "to_fsm", cls.__dict__["to_fsm"]) for cls in (patterns._Repeated, patterns._Concatenation,
                                                                      patterns.Pattern)]
        interegular.fsm.crawl = _indexed_crawl
        for owner, _, method in saved[1:]:
            owner.to_fsm = _memoised_to_fsm(method)
        _PARTS.memo = {}
        try:
            yield
        finally:
            _PARTS.memo = None
            for owner, name, value in saved:
                setattr(owner, name, value)


# Regex syntax has no intersection, and JSON Schema needs one: `pattern`, `format` and `minLength` must all hold.
# A caller writes a placeholder character where an intersection stands and passes, as `intersections`, pairs
# (placeholder, (regex, regex, ...)): the placeholder's leaf in the parsed regex is replaced by a node whose automaton
# is the product of its regexes' automata; a part given as Complement(regex) stands for what regex does not match
# (JSON Schema's `not`). A regex passed without intersections is read as written.
Intersections = tuple[tuple[str, tuple[str, ...]], ...]


class Complement(str):
    """An intersection part that stands for every string its regex does NOT match (JSON Schema's `not`)."""

    def __eq__(self, other):
        return type(other) is Complement and str.__eq__(self, other)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(("Complement", str(self)))

    def __repr__(self):
        return f"Complement({str.__repr__(self)})"


@functools.cache
def special_nodes():
    """(intersection node class, complement node class): the interegular pattern nodes this stage adds, made once
    (interegular is imported on first use)."""
    from interegular.fsm import FSM, Alphabet
    from interegular.patterns import REFlags, _Repeatable

    @dataclass(frozen=True)
    class _Intersection(_Repeatable):
        """The strings every part matches (an interegular pattern node, built into the parts' FSM product)."""

        parts: tuple
        __slots__ = ("parts",)

        def _get_alphabet(self, flags):
            return Alphabet.union(*(part.get_alphabet(flags) for part in self.parts))[0]

        def _get_prefix_postfix(self):
            return 0, 0

        def _get_lengths(self):
            highs = [part.lengths[1] for part in self.parts if part.lengths[1] is not None]
            return max(part.lengths[0] for part in self.parts), min(highs) if highs else None

        def to_fsm(self, alphabet=None, prefix_postfix=None, flags=REFlags(0)):
            alphabet = alphabet if alphabet is not None else self.get_alphabet(flags)
            return FSM.intersection(*(part.to_fsm(alphabet, (0, 0), flags) for part in self.parts))

        def simplify(self):
            return self

    @dataclass(frozen=True)
    class _Complement(_Repeatable):
        """The strings `part` does not match (an interegular pattern node, built as its FSM's complement)."""

        part: object
        __slots__ = ("part",)

        def _get_alphabet(self, flags):
            return self.part.get_alphabet(flags)

        def _get_prefix_postfix(self):
            return 0, 0

        def _get_lengths(self):
            return 0, None

        def to_fsm(self, alphabet=None, prefix_postfix=None, flags=REFlags(0)):
            alphabet = alphabet if alphabet is not None else self.get_alphabet(flags)
            return self.part.to_fsm(alphabet, (0, 0), flags).everythingbut()

        def simplify(self):
            return self

    return _Intersection, _Complement


def _substitute(node, leaves: dict):
    """`node` (a parsed regex) with every one-character leaf that is a key of `leaves` replaced by its value."""
    from interegular.patterns import _BasePattern, _CharGroup, _NonCapturing

    if isinstance(node, _CharGroup):
        if not node.negated and len(node.chars) == 1:
            return leaves.get(next(iter(node.chars)), node)
        return node
    changes = {}
    for field in dataclasses.fields(node):
        value = getattr(node, field.name)
        if isinstance(value, tuple):
            new = tuple(_substitute(v, leaves) if isinstance(v, (_BasePattern, _NonCapturing)) else v for v in value)
        elif isinstance(value, (_BasePattern, _NonCapturing)):
            new = _substitute(value, leaves)
        else:
            continue
        if new != value:
            changes[field.name] = new
    return dataclasses.replace(node, **changes) if changes else node


def _trie_fsm(texts: tuple[str, ...]):
    """The character DFA of a finite set of strings (an enum's values): their trie, which is what determinising
    `(t1|t2|...)` yields, built in one pass over the characters (a long enum's parse and subset construction took
    tens of milliseconds). Each character is a class of its own; `anything_else` moves nowhere."""
    from interegular.fsm import FSM, Alphabet, anything_else

    of_char: dict[str, int] = {}
    moves, ends = trie([of_char.setdefault(ch, len(of_char)) for ch in text] for text in texts)
    return FSM(alphabet=Alphabet({**of_char, anything_else: len(of_char)}), states=range(len(moves)), initial=0,
               finals=set(ends), map=dict(enumerate(moves)), __no_validation__=True)


def trie(words) -> tuple[list[dict], list[int]]:
    """The trie of `words` (sequences of symbols): each node's {symbol: child node} (the root is node 0), and the
    node each word ends at. AutomatonTooLarge past MAX_STATES nodes."""
    children: list[dict] = [{}]
    ends = []
    for word in words:
        node = 0
        for symbol in word:
            row = children[node]
            node = row.get(symbol, -1)
            if node < 0:
                node = row[symbol] = len(children)
                children.append({})
        ends.append(node)
    if len(children) > MAX_STATES:
        raise AutomatonTooLarge(f"its automaton exceeds {MAX_STATES} states")
    return children, ends


def shortest_strings(fsm, count: int) -> list[list]:
    """The first `count` strings of interegular's `fsm.strings()` — by length, then at each position by (transition,
    symbol) — without walking every shorter string as its breadth-first search does: per length, a depth-first
    search that enters only states a final state is exactly that many moves from. (For `"...ab..."` over printable
    ASCII the breadth-first search walked 95^3 strings before its fourth character: 14 s for one name.)"""
    moves = {s: sorted(row.items()) for s, row in fsm.map.items()}
    symbols = {t: sorted(chars) for t, chars in fsm.alphabet.by_transition.items()}
    ends = [set(fsm.finals)]  # ends[r]: the states with a path of exactly r moves to a final state
    out: list[list] = []
    for length in range(len(fsm.states) * (count + 1) + 1):  # (an infinite language has a string every |S|)
        if length:
            ends.append({s for s, row in moves.items() if any(t in ends[length - 1] for _, t in row)})
        if not ends[length]:
            break  # (and every longer length too)
        if fsm.initial not in ends[length]:
            continue
        # the strings of this length in order: a stack of (state, remaining moves, prefix) expansions, last first
        stack = [(fsm.initial, length, [])]
        while stack:
            state, left, prefix = stack.pop()
            if not left:
                out.append(prefix)
                if len(out) == count:
                    return out
                continue
            stack += reversed([(target, left - 1, prefix + [char]) for t, target in moves.get(state, ())
                               if target in ends[left - 1] for char in symbols[t]])
    return out


def intersections_in(text: str, intersections: Intersections) -> Intersections:
    """The intersections whose placeholders `text` holds — with those their parts hold in turn."""
    found, todo = set(), [text]
    while todo:
        part = todo.pop()
        for mark, parts in intersections:
            if mark in part and mark not in found:
                found.add(mark)
                todo.extend(parts)
    return tuple(x for x in intersections if x[0] in found)


class CharLevel:
    """Character DFAs of regexes (with their intersections), cached; emptiness of a language without building it.

    One per `Compiler`, which owns it: its caches are attributes, and `clear()` empties them."""

    def __init__(self):
        self.patterns = BytesLRU(64 * 2**20)  # interegular's parse of a regex (immutable nodes), by its text
        self.char_fsms = BytesLRU(128 * 2**20)  # character FSMs by (regex, intersections)
        self.empty_intersections = BytesLRU(16 * 2**20)  # matches_nothing's verdicts by the intersected regexes
        self.part_dfas = BytesLRU(64 * 2**20)  # intersection parts' DFAs over their own classes

    def clear(self) -> None:
        for cache in (self.patterns, self.char_fsms, self.empty_intersections, self.part_dfas):
            cache.clear()

    def parse(self, regex: str, intersections: Intersections):
        """interegular's parse of `regex`, with each intersection's placeholder replaced by its product node."""
        import interegular

        if isinstance(regex, Choice) and not intersections:  # the pattern interegular would parse: a group a char
            from interegular.patterns import Pattern, _CharGroup, _Concatenation

            return Pattern(tuple(_Concatenation(tuple(_CharGroup(frozenset(c), False) for c in text))
                                 for text in regex.texts))
        text = str(regex)
        pattern = self.patterns.get(text, lambda: interegular.parse_pattern(text), lambda _: 1024 + 200 * len(text))
        present = tuple((mark, parts) for mark, parts in intersections if mark in text)
        if present:
            node, complement = special_nodes()
            # (a part may hold another intersection's placeholder: parsed with the others, it is substituted too)
            others = tuple(x for x in intersections if x[0] not in dict(present))
            leaves = {mark: node(tuple(complement(self.parse(part, others)) if isinstance(part, Complement)
                                       else self.parse(part, others) for part in parts))
                      for mark, parts in present}
            pattern = _substitute(pattern, leaves)
        return pattern

    def char_fsm(self, regex: str, intersections: Intersections = ()):
        """The character FSM of `regex`. Cached by bytes: a slot with intersections is first checked for emptiness,
        then built, and `not` / anyOf over patterns ask again for the same intersections (Handwritten allany19: 132
        builds of 81 distinct FSMs, each a product of several automata)."""
        return self.char_fsms.get((regex, intersections), lambda: self.build_char_fsm(regex, intersections),
                                  lambda fsm: 1024 + 100 * sum(map(len, fsm.map.values())))  # ~100 bytes an entry

    def build_char_fsm(self, regex: str, intersections: Intersections = ()):
        """`char_fsm` without the cache."""
        if isinstance(regex, Choice) and not intersections:
            return _trie_fsm(regex.texts)
        pattern = self.parse(regex, intersections)
        try:
            return dfa.build_fsm(pattern, special_nodes(), MAX_STATES)
        except dfa.TooLarge as exc:
            raise AutomatonTooLarge(str(exc)) from None
        except dfa.NotCovered:
            pass  # lookarounds, inline flags: interegular's own construction
        if pattern.prefix_postfix != (0, 0):
            # (interegular then builds the text with what its lookarounds read beyond it, as a search would see it;
            # a slot holds the whole match: `x(?=y)` would let `xy` through, though no string matches it whole)
            raise TemplateError("a lookahead that reads past the regex's end, or a lookbehind before its start, is "
                                "not supported (lookarounds must stay within the match)")
        with interegular_patched():
            try:
                return pattern.to_fsm()
            except dfa.TooLarge as exc:  # (from _indexed_crawl)
                raise AutomatonTooLarge(str(exc)) from None

    def matches_nothing(self, regex: str, intersections: Intersections = ()) -> bool:
        """Is the language of `regex` (with its intersections) empty? Character-level, so cheaper than an automaton.
        A regex that is one intersection (what the compiler checks before it writes a value) is searched, not built:
        Handwritten allany14 checks 958 intersections of eight patterns each, and building their products took 16 s."""
        built = (regex, intersections) in self.char_fsms
        if not built and len(intersections) == 1 and intersections[0][0] == regex:
            empty = self.intersection_empty(intersections[0][1])
            if empty is not None:
                return empty
        try:
            return self.char_fsm(regex, intersections).empty()
        except AutomatonTooLarge:
            return False  # the automaton build reports it

    def intersection_empty(self, parts: tuple[str, ...]) -> bool | None:
        """Is no string matched by every part (a Complement part: not matched)? None where the search cannot say
        (lookarounds, inline flags: interegular's construction decides). Cached by the parts."""
        return self.empty_intersections.get(parts, lambda: self._search_intersection(parts),
                                            lambda _: 64 + sum(map(len, parts)))  # (the key's text is the weight)

    def _search_intersection(self, parts: tuple[str, ...]) -> bool | None:
        if len(parts) > 2:  # two parts that exclude each other (cheap, and cached) settle it without the whole product
            if any(self.intersection_empty(pair) for pair in itertools.combinations(parts, 2)):
                return True
        try:
            return dfa.intersection_empty([self.part_dfa(part) for part in parts], MAX_STATES)
        except dfa.TooLarge:
            return False  # the automaton build reports it
        except dfa.NotCovered:
            return None

    def part_dfa(self, part: str):
        """An intersection part's DFA over its own classes, cached: `not` / anyOf over patterns intersect the same
        few patterns in many combinations (Handwritten allany14: 378 intersections of 8 out of about 20)."""

        def build():
            special = special_nodes()
            node = special[1](self.parse(part, ())) if isinstance(part, Complement) else self.parse(part, ())
            return dfa.classed_dfa(node, special, MAX_STATES)

        # ~100 bytes a dict entry, and 4 a state and class for the dense table a product search makes of it
        return self.part_dfas.get(part, build, lambda d: 1024 + sum(100 * len(row) + 4 * (len(d.of_char) + 1)
                                                                   for row in d.dfa.moves))
