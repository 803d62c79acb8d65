"""Token automata composed from a regex's parts (diffreason.constrain.compose): the same language as the regex text."""

import itertools
import json
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from diffreason.constrain import Compiler
from diffreason.canvas import CanvasTemplate
from diffreason.constrain.regex import Rx, alt, group, is_composite, lit, optional, repeat, seq
from diffreason.tokenizer import train_byte_bpe

BYTES = train_byte_bpe(vocab_size=200)  # no merges: every string has exactly one tokenization
TOK = train_byte_bpe()  # merges, as real tokenizers have
ALPHABET = "ab,"
STRINGS = ["".join(p) for n in range(6) for p in itertools.product(ALPHABET, repeat=n)]

LEAVES = st.sampled_from(["a", "b*", "(a|b)", "a?b", "[ab]{1,2}", ",?"])
LITERALS = st.sampled_from([",", "ab", "a,", ""]).map(lit)


def _repeat(args):
    part, lo, extra = args
    return repeat(part, lo, None if extra is None else lo + extra)


REGEXES = st.recursive(
    LEAVES | LITERALS,
    lambda parts: st.one_of(
        st.lists(parts, min_size=1, max_size=3).map(lambda ps: seq(*ps)),
        st.lists(parts, min_size=1, max_size=3).map(alt),
        parts.map(optional),
        parts.map(group),
        st.tuples(parts, st.integers(0, 2), st.none() | st.integers(0, 2)).map(_repeat),
    ),
    max_leaves=6,
)


@settings(max_examples=60, deadline=None)
@given(REGEXES)
def test_composed_automaton_accepts_exactly_the_strings_of_its_regex(regex):
    """Exhaustively over all strings of up to five characters: with one tokenization per string, the composed
    automaton's token language is the regex text's language."""
    automaton = Compiler.for_tokenizer(BYTES).automaton(regex)
    for s in STRINGS:
        assert automaton.accepts(BYTES.encode(s, add_special_tokens=False)) == bool(re.fullmatch(regex, s)), (
            str(regex), s)


@settings(max_examples=40, deadline=None)
@given(REGEXES)
def test_padded_composition_is_the_composition_with_padding(regex):
    """`TokenAutomata.padded` composes a pad sink in at once: the same language as `with_padding` on the unpadded
    composition (exhaustively over short strings, each followed by no, one or two pads), and the same slot sets."""
    pad = TOK.pad_token_id
    padded = Compiler.for_tokenizer(TOK).automata.padded(regex, pad)
    reference = Compiler.for_tokenizer(TOK).automaton(regex).with_padding(pad)
    for s in STRINGS:
        for pads in range(3):
            tokens = list(TOK.encode(s, add_special_tokens=False)) + [pad] * pads
            assert padded.accepts(tokens) == reference.accepts(tokens), (str(regex), s, pads)
    for length in (1, 4):
        try:
            expected = reference.slot_sets(length)[0]
        except Exception as exc:  # no value fits: the padded composition says the same
            with pytest.raises(type(exc)):
                padded.slot_sets(length)
            continue
        assert torch.equal(padded.slot_sets(length)[0], expected)


def test_rx_text_is_the_regex_the_compiler_wrote():
    member = optional(seq(lit(',"name":'), group(r'"[a-z]{0,3}"')))
    assert str(member) == r'(,"name":("[a-z]{0,3}"))?' and is_composite(member)
    items = repeat(seq(lit(","), group("[0-9]")), 0, None)
    assert str(seq(lit("["), optional(seq(group("[0-9]"), items)), lit("]"))) == r"\[(([0-9])(,([0-9])){0,})?\]"
    assert str(alt(["true", "null"])) == "((true)|(null))"
    assert not is_composite("[0-9]") and not is_composite(Rx("x", ("leaf", "x")))


def test_slot_of_a_composed_regex_commits_valid_json_whatever_the_scores():
    """Nondeterministic where optional members begin alike (each starts with ','): slot sets and the Viterbi
    commit work on it, and every commit spells a string of the regex."""
    value = r'"[a-z]{0,4}"'
    members = [optional(seq(lit(f',"{k}":'), group(value))) for k in ("a", "b", "c")]
    regex = seq(lit("{"), lit('"id":'), group("[0-9]{1,3}"), *members, lit("}"))
    slot = CanvasTemplate.from_regex(regex, TOK, 40)
    automaton = slot.slots[0].automaton
    for seed in range(12):
        lp = torch.randn((40, len(TOK)), generator=torch.Generator().manual_seed(seed)).log_softmax(-1)
        path = automaton.best_path(lp, slot.slots[0].backward)
        assert automaton.accepts(path) and not slot.violations(path)
        text = TOK.decode([t for t in path if t != TOK.pad_token_id])
        assert re.fullmatch(regex, text), text
        assert set(json.loads(text)) <= {"id", "a", "b", "c"}


def test_literals_are_tokenized_on_their_own():
    """A literal keeps the tokenizer's own spelling of it; a token spanning a literal and a value (which this
    tokenizer, trained on such objects, uses for the whole text) is not a path."""
    tok = train_byte_bpe(['{"name":"Ada"}'] * 20, vocab_size=300)
    regex = seq(lit('{"name":'), group('"(Ada|Bo)"'), lit("}"))
    automaton = Compiler.for_tokenizer(tok).automaton(regex)
    apart = [t for piece in ('{"name":', '"Ada"', "}") for t in tok.encode(piece, add_special_tokens=False)]
    whole = tok.encode('{"name":"Ada"}', add_special_tokens=False)
    assert whole != apart  # (the tokenizer merges across the boundaries)
    assert automaton.accepts(apart) and not automaton.accepts(whole)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([",", "ab", "a,", ',"key":']), REGEXES, st.integers(1, 7), st.sampled_from([BYTES, TOK]))
def test_optional_member_slot_is_the_composed_slot(prefix, rest, length, tokenizer):
    """An optional member's slot, built from its value's (shared) slot, has exactly the allowed sets, language and
    commits of the slot of the whole composed regex."""
    member = optional(seq(lit(prefix), group(rest)))
    template = CanvasTemplate.from_regex(member, tokenizer, length)
    composed = Compiler.for_tokenizer(tokenizer).automaton(member).with_padding(tokenizer.pad_token_id)
    allowed, _, backward = composed.slot_sets(length)
    assert torch.equal(torch.stack([template.masks[i] for i in template.mask_index]), allowed)
    slot = template.slots[0]
    pad = [tokenizer.pad_token_id]
    for s in STRINGS:
        tokens = tokenizer.encode(s, add_special_tokens=False)
        if len(tokens) <= length:
            padded = tokens + pad * (length - len(tokens))
            assert slot.automaton.accepts(padded) == composed.accepts(padded), (str(member), s)
    generator = torch.Generator().manual_seed(length)
    for _ in range(3):
        scores = torch.randn(length, len(tokenizer), generator=generator).log_softmax(-1)
        assert slot.automaton.best_path(scores, slot.backward) == composed.best_path(scores, backward)


def test_optional_member_slot_is_built_from_its_value_slot():
    """(what the test above compares, when the member fits: not the composed automaton again)"""
    from diffreason.constrain.slots import PrefixedAutomaton

    template = CanvasTemplate.from_regex(optional(seq(lit(',"key":'), group("[a-z]{1,3}"))), TOK, 9)
    assert isinstance(template.slots[0].automaton, PrefixedAutomaton)
    pad = lambda ids: ids + [TOK.pad_token_id] * (9 - len(ids))  # noqa: E731
    assert template.violations(pad(TOK.encode(',"key":ab', add_special_tokens=False))) == []
    assert template.violations(pad(TOK.encode(',"kez":ab', add_special_tokens=False))) == list(range(9))
    assert template.violations(pad([])) == []
