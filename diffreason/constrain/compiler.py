"""The constraint compiler of one tokenizer: the stages of this package behind one object that owns their caches.

    value regex (regex.Rx / str) ─ CharLevel ─→ character DFA ─ TokenAutomata ─→ token automaton ─ Slots ─→ slot sets

As xgrammar's `GrammarCompiler` is bound to one tokenizer and owns its grammar cache, a `Compiler` is bound to one
transformers tokenizer and owns every cache the stages keep (parsed patterns, character DFAs, emptiness verdicts,
token groups, token automata, slots) plus any a task layer asks it for (`cache`); `clear()` empties them all.
`Compiler.for_tokenizer(tokenizer)` returns the one compiler of a tokenizer object, made on first use.
"""

from __future__ import annotations

import threading

from diffreason.constrain.automata import TokenAutomata
from diffreason.constrain.cache import BytesLRU
from diffreason.constrain.chardfa import CharLevel, Intersections
from diffreason.constrain.slots import Slots, SlotSets
from diffreason.constrain.tokens import TokenAutomaton, TokenizerAdapter


class Compiler:
    """Regexes → token automata and slot sets for one tokenizer, with their caches."""

    _instances: dict[int, Compiler] = {}  # by id(tokenizer); each compiler keeps its tokenizer alive
    _lock = threading.Lock()

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.adapter = TokenizerAdapter(tokenizer)
        self.chars = CharLevel()
        self.automata = TokenAutomata(self.adapter, self.chars)
        self.slots = Slots(self.automata)
        self._caches: dict[str, BytesLRU] = {}

    @classmethod
    def for_tokenizer(cls, tokenizer) -> Compiler:
        """The compiler of `tokenizer` (one per tokenizer object, made on first use and kept)."""
        compiler = cls._instances.get(id(tokenizer))  # (the compiler keeps its tokenizer alive: ids are not reused)
        if compiler is None:
            with cls._lock:
                compiler = cls._instances.get(id(tokenizer))
                if compiler is None:
                    compiler = cls._instances[id(tokenizer)] = cls(tokenizer)
        return compiler

    @classmethod
    def clear_all(cls) -> None:
        """`clear()` every compiler made so far."""
        for compiler in list(cls._instances.values()):
            compiler.clear()

    # -- the stages ---------------------------------------------------------------------------------------------------

    def token_ids(self, text: str) -> tuple[int, ...]:
        """`tokenizer.encode(text, add_special_tokens=False)`, memoised (a compiler encodes the same member names and
        braces over and over)."""
        return self.adapter.encode(text)

    def matches_nothing(self, regex: str, intersections: Intersections = ()) -> bool:
        """Is the language of `regex` (with its intersections) empty? Decided on characters, without tokens."""
        return self.chars.matches_nothing(regex, tuple(intersections))

    def char_fsm(self, regex: str, intersections: Intersections = ()):
        """The character DFA of `regex` (an interegular `FSM`)."""
        return self.chars.char_fsm(regex, tuple(intersections))

    def automaton(self, regex: str, intersections: Intersections = ()) -> TokenAutomaton:
        """The token automaton of `regex` (no pad sink)."""
        return self.automata.of(regex, tuple(intersections))

    def slot(self, regex: str, length: int, intersections: Intersections = ()) -> SlotSets:
        """The allowed sets and automaton of a slot of exactly `length` tokens holding a string of `regex`, padded
        with the tokenizer's pad token (`CanvasTemplate.from_regex` makes it a template)."""
        return self.slots.of(regex, length, tuple(intersections))

    # -- caches -------------------------------------------------------------------------------------------------------

    def cache(self, name: str, max_bytes: int, reweigh: bool = False) -> BytesLRU:
        """A cache this compiler owns for a layer above it (e.g. compiled JSON schemas), made on first use;
        `clear()` empties it with the stages' own."""
        cache = self._caches.get(name)
        if cache is None:
            cache = self._caches[name] = BytesLRU(max_bytes, reweigh)
        return cache

    def clear(self) -> None:
        """Empty every cache of this compiler (the tokenizer's derived tables stay: they only depend on it)."""
        for stage in (self.chars, self.automata, self.slots):
            stage.clear()
        self.adapter.group_cache.clear()
        for cache in self._caches.values():
            cache.clear()
