"""The one-pass regex → DFA builder against interegular's own construction and Python's `re`."""

import itertools
import re

import pytest

from diffreason import automaton, regex_dfa
from diffreason.automaton import Complement

# the shapes our compiler writes (strings with escapes, bounded repeats, optional members, arrays, numbers) and
# user-pattern constructs (classes, negated classes, dot, nested and unbounded repeats, empty alternatives)
REGEXES = [
    r'"([ab]|\\["\\]){0,3}"',
    r"-?(0|[1-9][0-9]*)(\.[0-9]{1,2})?",
    r'\{"a":(true|false)(,"b":("[ab]{1,2}"))?\}',
    r"\[((a|b)(,(a|b)){0,})?\]",
    r"(ab|ba)*c?",
    r"a{2,4}b{0,2}",
    r"[^ab]{1,2}.",
    r"(a|)(|b)x{0}",
    r"((a{1,2}){1,2}b)*",
    r"[a-c]+(\.[a-c]+)*",
    r"(?:a|b)+?c",
]
ALPHABET = "abc.\"\\,x-0123{}[]:"


def _strings(max_len: int, alphabet: str = ALPHABET):
    for n in range(max_len + 1):
        for chars in itertools.product(alphabet, repeat=n):
            yield "".join(chars)


def _fast(regex: str, intersections=()):
    return regex_dfa.build_fsm(automaton._parse(regex, intersections), automaton._intersection_node_cls(), 10_000)


@pytest.mark.parametrize("regex", REGEXES)
def test_same_language_as_interegular_and_re(regex):
    fast = _fast(regex)
    assert fast.equivalent(automaton._parse(regex, ()).to_fsm())
    # and, independently of interegular, the strings it accepts are Python's matches
    short_alphabet = sorted(set(re.sub(r"\\.|[^a-c.\"\\,x0-9{}\[\]:-]", "", regex) + "ab"))
    for s in _strings(5, "".join(short_alphabet[:6])):
        assert fast.accepts(s) == bool(re.fullmatch(regex, s)), (regex, s)


def test_intersections_and_complements():
    # strings of 1-4 a/b that contain "ab" but are not "abab"
    mark = "\U000f0000"
    parts = ("[ab]{1,4}", ".*ab.*", Complement("abab"))
    fast = _fast(f"<{mark}>", ((mark, parts),))
    assert fast.equivalent(automaton._parse(f"<{mark}>", ((mark, parts),)).to_fsm())
    for s in _strings(6, "ab"):
        expected = 1 <= len(s) <= 4 and "ab" in s and s != "abab"
        assert fast.accepts(f"<{s}>") == expected, s
    # a complement also holds what its regex's alphabet never names (interegular's anything_else)
    assert _fast(mark, ((mark, (Complement("a*"),)),)).accepts("é")


def test_empty_language_and_state_limit():
    mark = "\U000f0000"
    assert _fast(f"x{mark}", ((mark, ("a+", "b+")),)).empty()
    with pytest.raises(regex_dfa.TooLarge):
        regex_dfa.build_fsm(automaton._parse("[ab]*a[ab]{12}", ()), automaton._intersection_node_cls(), 1000)


@pytest.mark.parametrize("regex, yes, no", [(r"(?=a)[ab]", "a", "b"), (r"(?i)ab", "AB", "ac")])
def test_lookarounds_and_flags_are_left_to_interegular(regex, yes, no):
    with pytest.raises(regex_dfa.NotCovered):
        _fast(regex)
    fsm = automaton._char_fsm(regex)  # the automaton module falls back to interegular's construction
    assert fsm.accepts(yes) and not fsm.accepts(no)
