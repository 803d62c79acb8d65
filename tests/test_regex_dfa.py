"""The one-pass regex → DFA builder against interegular's own construction and Python's `re`."""

import itertools
import re

import pytest

from diffreason.constrain import Complement, chardfa
from diffreason.constrain import dfa as regex_dfa
from diffreason.constrain.regex import from_python
from diffreason.errors import TemplateError

CHARS = chardfa.CharLevel()

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
    return regex_dfa.build_fsm(CHARS.parse(regex, intersections), chardfa.special_nodes(), 10_000)


@pytest.mark.parametrize("regex", REGEXES)
def test_same_language_as_interegular_and_re(regex):
    fast = _fast(regex)
    assert fast.equivalent(CHARS.parse(regex, ()).to_fsm())
    # and, independently of interegular, the strings it accepts are Python's matches
    short_alphabet = sorted(set(re.sub(r"\\.|[^a-c.\"\\,x0-9{}\[\]:-]", "", regex) + "ab"))
    for s in _strings(5, "".join(short_alphabet[:6])):
        assert fast.accepts(s) == bool(re.fullmatch(regex, s)), (regex, s)


def test_intersections_and_complements():
    # strings of 1-4 a/b that contain "ab" but are not "abab"
    mark = "\U000f0000"
    parts = ("[ab]{1,4}", ".*ab.*", Complement("abab"))
    fast = _fast(f"<{mark}>", ((mark, parts),))
    assert fast.equivalent(CHARS.parse(f"<{mark}>", ((mark, parts),)).to_fsm())
    for s in _strings(6, "ab"):
        expected = 1 <= len(s) <= 4 and "ab" in s and s != "abab"
        assert fast.accepts(f"<{s}>") == expected, s
    # a complement also holds what its regex's alphabet never names (interegular's anything_else)
    assert _fast(mark, ((mark, (Complement("a*"),)),)).accepts("é")


def test_empty_language_and_state_limit():
    mark = "\U000f0000"
    assert _fast(f"x{mark}", ((mark, ("a+", "b+")),)).empty()
    with pytest.raises(regex_dfa.TooLarge):
        regex_dfa.build_fsm(CHARS.parse("[ab]*a[ab]{12}", ()), chardfa.special_nodes(), 1000)


def test_intersection_emptiness_is_searched_as_the_built_product_says():
    """matches_nothing searches an intersection's product instead of building it: the same verdict as the built
    automaton for every pair and triple of these parts (both verdicts occur)."""
    mark = "\U000f0000"
    parts = ["[ab]{1,4}", ".*ab.*", Complement("abab"), "a+", "b+", Complement("[ab]*"), "[a-c]{2}",
             Complement(".*c.*"), "(ab)*", Complement("")]
    verdicts = []
    for n in (2, 3):
        for chosen in itertools.combinations(parts, n):
            intersections = ((mark, chosen),)
            searched = CHARS.matches_nothing(mark, intersections)
            assert searched == _fast(mark, intersections).empty(), chosen
            verdicts.append(searched)
    assert set(verdicts) == {True, False}
    # lookarounds: the search leaves them to interegular's construction, which still decides
    assert CHARS.matches_nothing(mark, ((mark, ("(?=a)[ab]", "b")),))
    assert not CHARS.matches_nothing(mark, ((mark, ("(?=a)[ab]", "a")),))


def test_two_parts_that_exclude_each_other_settle_a_product_too_large_to_search(monkeypatch):
    """Strings of at most 35 and of at least 40 characters exclude each other: that pair settles the intersection,
    whose whole product (times the 32 states of the third part) exceeds the state limit."""
    from diffreason.tasks.json_schema import clear_compile_caches

    clear_compile_caches()
    monkeypatch.setattr(chardfa, "MAX_STATES", 200)
    mark = "\U000f0000"
    parts = ("(a|b)*a(a|b){4}", "[ab]{0,35}", "[ab]{40,}")
    with pytest.raises(regex_dfa.TooLarge):
        regex_dfa.intersection_empty([CHARS.part_dfa(p) for p in parts], 200)
    assert CHARS.matches_nothing(mark, ((mark, parts),))
    assert not CHARS.matches_nothing(mark, ((mark, parts[:2]),))
    clear_compile_caches()


def test_product_search_stops_early_and_keeps_the_state_limit():
    a_then_bs = regex_dfa.DFA([{0: 1}, {1: 1}], {1})  # class 0 = a, 1 = b: ab*
    bs = regex_dfa.DFA([{1: 0}], {0})  # b*
    assert regex_dfa.product_empty([a_then_bs, bs], 10)  # a first, then b*: never both
    anything = regex_dfa.DFA([{0: 0, 1: 0}], {0})
    assert not regex_dfa.product_empty([a_then_bs, anything], 10)
    # a counter up to 30 against one up to 31: both final only at 0 mod 930; the search walks 930 states first
    count30 = regex_dfa.DFA([{0: (i + 1) % 30} for i in range(30)], {0})
    count31 = regex_dfa.DFA([{0: (i + 1) % 31} for i in range(31)], {1})
    assert not regex_dfa.product_empty([count30, count31], 1000)
    with pytest.raises(regex_dfa.TooLarge):
        regex_dfa.product_empty([count30, count31], 500)


@pytest.mark.parametrize("regex, yes, no", [(r"(?=a)[ab]", "a", "b"), (r"(?i)ab", "AB", "ac")])
def test_lookarounds_and_flags_are_left_to_interegular(regex, yes, no):
    with pytest.raises(regex_dfa.NotCovered):
        _fast(regex)
    fsm = CHARS.char_fsm(regex)  # the automaton module falls back to interegular's construction
    assert fsm.accepts(yes) and not fsm.accepts(no)


@pytest.mark.parametrize("regex", [r"(?=\d{3})\w{3,}", r"(?!ab)[a-z]{2}", r"(?=a)[ab]+", r"(?!a)[ab]{1,3}",
                                   r"[ab](?=b)b", r"(?=.*1)[a1]{2,3}"])
def test_lookarounds_within_the_match_keep_pythons_language(regex):
    """Every string of up to 4 characters over a small alphabet: in the slot's language exactly when re.fullmatch
    takes it."""
    fsm = CHARS.char_fsm(regex)
    for n in range(5):
        for chars in itertools.product("ab1xAB", repeat=n):
            text = "".join(chars)
            assert bool(fsm.accepts(text)) == bool(re.fullmatch(regex, text)), (regex, text)


@pytest.mark.parametrize("regex", [r"x(?=y)", r"[ab](?!a)", r"(?=a)", r"(?!x)", r"(?=\d{3})\w+", r"(?<=a)b"])
def test_lookarounds_that_reach_past_the_match_are_refused(regex):
    """interegular builds these as a search sees them (`x(?=y)` would let "xy" into the slot, though no string
    fullmatches it): refused, with the reason."""
    with pytest.raises(TemplateError, match="lookahead that reads past the regex's end, or a lookbehind"):
        CHARS.char_fsm(regex)


@pytest.mark.parametrize("regex, text", [("^abc$", "abc"), (r"\Aab\Z", "ab"), (r"\u00e9+", "é+"),
                                         (r"[\u0041-\u0043]", "[A-C]"), (r"\u002d", r"\x2d"),
                                         (r"[$^]x", "[$^]x"), (r"[]^]a$", r"[\]^]a"), (r"a\$", r"a\$"),
                                         (r"a\\$", r"a\\"), (r"\\u0041", r"\\u0041")])
def test_a_users_regex_is_read_as_python_reads_it(regex, text):
    assert from_python(regex) == text


@pytest.mark.parametrize("regex, message", [
    (None, "a regex is a string, not NoneType"), ("a{3,1}", "is not a valid Python regex: min repeat greater"),
    ("(a", "is not a valid Python regex"), ("", "matches only the empty string"), ("^$", "matches only the empty"),
    ("a$|b", "^ and \\A may only start it"), (r"\bfoo", "\\b and \\B are not supported"), ("(^a)", "may only start"),
    # (QA, 2026-12-07: possessive repeats were read as greedy ones, and `a*+a` produced "a", which re never matches)
    ("a*+a", "a possessive quantifier is not supported"), ("[ab]++b", "a possessive quantifier"),
    ("a{1,2}+a", "a possessive quantifier"), ("x(?:y?+)", "a possessive quantifier"),
    ("(?>ab)c", "an atomic group is not supported"),
    ("()", "matches only the empty string"), ("a{0}", "matches only the empty string"), ("(?:)", "only the empty"),
])
def test_a_users_regex_that_python_or_a_slot_cannot_take_is_refused(regex, message):
    with pytest.raises(TemplateError) as info:
        from_python(regex)
    assert message in str(info.value)


@pytest.mark.parametrize("regex, alphabet", [
    ("a{}", "a{}"), ("a{", "a{"), ("x{2,", "x{2,"), ("a{1,2}{", "a{"), ("{x}", "{x}"), ("a{,}", "a"), ("[{]{2}", "{"),
    ("(?m)a$", "a\n"), ("(?mi)a", "aA"), ("(?im:a)b", "aAbB"), ("(?m:a)b", "ab"), ("(?a)\\w", "a_"),
    ("(?i)(?s)^a.", "aA\n"), ("(?i)^a$", "aA"), (r"\N{LATIN SMALL LETTER E WITH ACUTE}+", "eé"),
    (r"[\N{DIGIT ONE}-\N{DIGIT THREE}]", "0124"), (r"\N{LEFT CURLY BRACKET}a", "{a"),
    (r"a\0b", "ab\x00"), (r"\08", "8\x00"), (r"[\0]", "a\x00"), (r"\012", "a\n"), (r"\é+", "eé"),  # (were refused)
])
def test_literal_braces_named_characters_and_inline_flags_read_as_python_reads_them(regex, alphabet):
    """QA, 2026-12-07: `a{}` (Python: the text "a{}") was read as `a*`; `a{` and `\\N{...}` were refused as
    unparsable; `(?m)` was refused and `(?i)(?s)` kept only the last flag ("Aa" was refused)."""
    fsm = CHARS.char_fsm(from_python(regex))
    for text in _strings(4, alphabet):
        assert bool(fsm.accepts(text)) == bool(re.fullmatch(regex, text, re.ASCII)), (regex, text)


@pytest.mark.parametrize("regex, message", [
    ("a(?=b){1}b", "a quantifier on a lookaround is not supported"), ("(?=a){0}b", "a quantifier on a lookaround"),
    ("(?!-)(?#c){2}", "a quantifier on a lookaround"),
    ("[\\S\\D]", "a character class with two negated shorthands"), ("[^\\S\\D]", "two negated shorthands"),
    ("(?i)[a\\W]", "a case-insensitive character class with \\W beside other items"),
    ("(?i)(?-i:(?:a))", "a group that removes a flag directly inside or around another group"),
    ("(?i)x((?-i:a))", "removes a flag directly inside or around"), ("(?s)(?-s:(.))", "removes a flag directly"),
])
def test_constructs_the_parser_would_read_as_another_language_are_refused(regex, message):
    """QA, 2026-12-07 (a differential fuzz against re.fullmatch): `a(?=b){1}b` was read as matching nothing, `[\\S\\D]`
    as the shorthands' intersection, `(?i)[a\\W]` without its letters, `(?i)(?-i:(?:a))` without the removal."""
    with pytest.raises(TemplateError, match=re.escape(message)):
        CHARS.char_fsm(from_python(regex))
    for fine in ("(?i)(?-i:a)b", "(?i)[\\Sa]", "[\\W\\d]", "(?i)[^\\W]", "(?:(?=a)a)b"):
        fsm = CHARS.char_fsm(from_python(fine))
        for text in _strings(3, "aA 1b"):
            assert bool(fsm.accepts(text)) == bool(re.fullmatch(fine, text, re.ASCII)), (fine, text)


def test_a_comment_ends_at_its_first_unescaped_parenthesis():
    """QA, 2026-12-07: `(?#\\)(b)c` (re: the regex "c") was read as `(b)c`."""
    assert from_python("(?#\\)(b)c") == "c" and from_python("(?#a\\)b)c") == "c"


def test_the_verbose_flag_is_refused_with_the_reason():
    for regex in ("(?x) a b", "(?x:a b)"):
        with pytest.raises(TemplateError, match=re.escape("the verbose flag (?x) is not supported")):
            from_python(regex)


def test_a_comment_in_a_regex_is_ignored_as_re_ignores_it():
    """(`(?#c)ab` was refused with "'NoneType' object has no attribute 'simplify'": QA, 2026-12-07.)"""
    assert from_python("(?#a note)ab(?#another)c") == "abc"
    assert from_python("[(?#]x") == "[(?#]x"  # (inside a class it is three characters)


@pytest.mark.parametrize("regex, texts", [
    (r"[^]]", ["a", "]", "é"]), (r"x[^]]y", ["x1y", "x]y"]), (r"[]a]", ["]", "a", "b"]),
    (r"(?i)ab[c-e]", ["ABd", "aBC", "abf"]), (r"(?i)a(?-i:é)", ["Aé", "AÉ"]), (r"(?i:a)b", ["Ab", "AB"]),
])
def test_a_class_led_by_a_bracket_and_ascii_case_folding_read_as_python_reads_them(regex, texts):
    """(`[^]]` was read as `[^]` then "]": it refused every character Python takes.)"""
    fsm = CHARS.char_fsm(from_python(regex))
    for text in texts:
        assert bool(fsm.accepts(text)) == bool(re.fullmatch(regex, text, re.ASCII)), (regex, text)


@pytest.mark.parametrize("regex, message", [
    (r"(?i)é", "case-insensitive matching of 'é' is not supported"),
    (r"(?i)[^é]", "case-insensitive matching of 'é'"),
    (r"(?i)[à-þ]", "case-insensitive matching of 'à-þ'"),
    (r"a(?i:ü)", "case-insensitive matching of 'ü'"),
    (r"(?u)\w", "is not a valid Python regex: ASCII and UNICODE flags are incompatible"),
])
def test_case_folding_past_ascii_and_unicode_flags_are_refused(regex, message):
    """re.ASCII folds ASCII letters only; the parser folds every letter (`(?i)é` let "É" through, which `re`
    refuses); `(?u)` beside re.ASCII was a ValueError, not a TemplateError."""
    with pytest.raises(TemplateError, match=re.escape(message)):
        from_python(regex)
    assert from_python(r"(?i)€x") == r"(?i)€x"  # (a character without case folds to itself either way)


def test_shorthand_classes_are_ascii_as_re_ascii_reads_them():
    """`\S` and `[^\s]` take a no-break space and an em space, as `re` does with re.ASCII (and not without)."""
    for regex in (r"\S", r"[^\s]", r"\D", r"\W"):
        fsm = CHARS.char_fsm(from_python(regex))
        for char in ("\xa0", "\u2003", "\u0663", "é"):
            assert bool(fsm.accepts(char)) == bool(re.fullmatch(regex, char, re.ASCII)), (regex, char)


def _same_token_language(a, b) -> bool:
    """Two token DFAs accept the same sequences: walk them in step from their initial states; every pair of states
    reached must agree on acceptance and on the tokens they move on."""
    seen, todo = {(a.initial, b.initial)}, [(a.initial, b.initial)]
    while todo:
        sa, sb = todo.pop()
        if bool(a.accepting[sa]) != bool(b.accepting[sb]):
            return False
        ma, mb = a.moves_from(sa), b.moves_from(sb)
        if ma.keys() != mb.keys():
            return False
        for token in ma:
            pair = (ma[token], mb[token])
            if pair not in seen:
                seen.add(pair)
                todo.append(pair)
    return True


@pytest.mark.parametrize("regex", [r'"([ !#-\[\]-~]|\\["\\]){0,6}"', r"-?(0|[1-9][0-9]*)(\.[0-9]{1,3})?",
                                   r'"[^"\\]{1,4}"', r"a.{0,3}b", r'\{"k":(true|null)\}'])
def test_byte_level_conversion_matches_outlines(regex, monkeypatch):
    """Our byte-level FSMs (ASCII alphabets, `anything_else` spelled as multi-byte UTF-8; and the general one of
    `constrain.utf8`) give outlines' token index where outlines' conversion is right (ASCII alphabets). The tokenizer
    has tokens for every byte, so multi-byte sequences are reachable."""
    from outlines_core.fsm.regex import make_byte_level_fsm, make_deterministic_fsm

    from diffreason.constrain import Compiler, automata, utf8
    from diffreason.tokenizer import train_byte_bpe

    tokenizer = train_byte_bpe()
    build = Compiler.for_tokenizer(tokenizer).automata.build
    ours = build(regex)
    monkeypatch.setattr(automata, "byte_level_fsm", lambda fsm: None)
    general = Compiler.for_tokenizer(tokenizer).automata.build(regex)
    monkeypatch.setattr(utf8, "byte_level_fsm", lambda fsm: make_deterministic_fsm(make_byte_level_fsm(
        fsm, keep_utf8=True))[0])  # outlines' own conversion
    theirs = Compiler.for_tokenizer(tokenizer).automata.build(regex)
    assert _same_token_language(ours, theirs) and _same_token_language(general, theirs)
    assert not _same_token_language(ours, build(regex + "x?"))  # the check can tell languages apart


@pytest.mark.parametrize("regex", [r".?ü", r"café|.{4}", r"\D?é", r"[^x]é", r"(?:.|é)x", r".+é", r"\S+😀", r"[^é]",
                                   r"[é-ü]+", r"[\u0080-\u07ff€]?.", r"x[^\n]?[é-ü]"])
def test_byte_level_conversion_of_non_ascii_characters_keeps_pythons_language(regex):
    """(outlines' conversion, used for alphabets naming non-ASCII characters, lost them where a wildcard read the
    same lead byte: `.?ü` never wrote "ü", `.+é` was refused as empty: QA, 2026-12-07.) Every text of up to 3
    characters over a mixed alphabet: the byte FSM accepts its UTF-8 exactly when re.fullmatch does."""
    from outlines_core.fsm.regex import byte_symbol

    from diffreason.constrain import utf8
    from diffreason.constrain.automata import valid_utf8_only

    fsm = valid_utf8_only(utf8.byte_level_fsm(chardfa.CharLevel().char_fsm(from_python(regex))))

    def accepts(text: str) -> bool:
        state = fsm.initial
        for b in text.encode():
            state = fsm.map.get(state, {}).get(fsm.alphabet[chr(b) if b < 0x80 else byte_symbol(b)])
            if state is None:
                return False
        return state in fsm.finals

    alphabet = ["a", "x", "\n", "é", "ü", "ä", "ó", "€", "😀", "ߠ"]
    for n in range(4):
        for chars in itertools.product(alphabet, repeat=n):
            text = "".join(chars)
            assert accepts(text) == (re.fullmatch(regex, text, re.ASCII) is not None), (regex, text)


def test_a_byte_fsm_instantiates_only_the_decoder_paths_a_state_moves_on():
    """(Every state instantiated the whole shared decoder: an alternation of 1,000 CJK words took 200 s.) Its states
    stay within the words' UTF-8 bytes, as a trie of them would."""
    import random

    from diffreason.constrain import utf8

    rng = random.Random(0)
    words = list(dict.fromkeys("".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(rng.randrange(1, 4)))
                               for _ in range(300)))
    fsm = chardfa.CharLevel().char_fsm(from_python("(" + "|".join(words) + ")"))
    assert len(utf8.byte_level_fsm(fsm).states) <= len(fsm.states) + sum(len(w.encode()) for w in words)


def test_utf8_sequences_spell_every_code_point_of_a_range_once():
    from diffreason.constrain.utf8 import utf8_sequences

    for lo, hi in [(0x80, 0x900), (0xE9, 0xFC), (0x7F0, 0x812), (0xFFF0, 0x10010), (0xE000, 0xE000), (0xD000, 0xD7FF)]:
        spelled = [ord(bytes(code).decode()) for seq in utf8_sequences(lo, hi)
                   for code in itertools.product(*(range(a, b + 1) for a, b in seq))]
        assert sorted(spelled) == list(range(lo, hi + 1))


def test_state_limit_holds_on_interegulars_construction_too(monkeypatch):
    """A lookahead goes to interegular; its crawl numbers states with the same limit, and the error says so."""
    monkeypatch.setattr(chardfa, "MAX_STATES", 500)
    with pytest.raises(chardfa.AutomatonTooLarge, match="exceeds 500 states"):
        CHARS.char_fsm(r"(?=x)x[ab]*a[ab]{10}")


def test_a_choice_of_literals_is_built_without_parsing_as_its_regex_would_be():
    """An enum's `Choice` (literal texts kept) builds the character automaton its regex text parses to: specials,
    escapes, non-ASCII and a literal that prefixes another included."""
    import json

    from diffreason.constrain.regex import Choice

    values = [["a", "ab", "a.b", "(x|y)*", "\\", "é€", "", "\n\t"], 0, -1.5, 1e300, None, True, {"k": [1, "]"]}]
    for texts in ([json.dumps(v, ensure_ascii=False) for v in values], ['"x"'], ["null", "nul"]):
        choice = Choice(texts)
        assert choice == "(" + "|".join(re.escape(t) for t in texts) + ")" and choice.texts == tuple(texts)
        parsed = CHARS.parse(str(choice), ()).to_fsm()
        assert not isinstance(str(choice), Choice)
        trie = CHARS.build_char_fsm(choice)  # the trie of the texts
        assert len(trie.states) == 1 + len({t[:i] for t in texts for i in range(1, len(t) + 1)})
        fast = regex_dfa.build_fsm(CHARS.parse(choice, ()), chardfa.special_nodes(), 10_000)
        for fsm in (trie, fast):
            assert fsm.equivalent(parsed)
            for t in texts:
                assert fsm.accepts(t) and not fsm.accepts(t + "q")


def test_a_choice_too_large_for_the_state_limit_fails_clearly(monkeypatch):
    from diffreason.constrain.regex import Choice

    monkeypatch.setattr(chardfa, "MAX_STATES", 10)
    CHARS.build_char_fsm(Choice(["abcd", "abce"]))  # 6 states
    with pytest.raises(chardfa.AutomatonTooLarge, match="exceeds 10 states"):
        CHARS.build_char_fsm(Choice(["abcdef", "ghijk"]))


@pytest.mark.parametrize("regex", ['"[a-c]{0,3}x?"', '"(key[0-9]|x)"', "(ab|ba)*c?", "a{2,4}b{0,2}", "[^ab]{1,2}.",
                                   "[ab]{3}", "a*", "ab|", "(ab)+c"])
def test_shortest_strings_are_interegulars_first_strings(regex):
    """Member names are drawn from a pattern's shortest strings: the same strings, in the same order, as
    interegular's breadth-first `strings()`, which walked every shorter string."""
    fsm = CHARS.char_fsm(regex)
    for count in (1, 4, 30):
        assert chardfa.shortest_strings(fsm, count) == list(itertools.islice(fsm.strings(), count))


def test_shortest_strings_skip_what_cannot_end():
    """A string with 'ab' somewhere among printable ASCII, four characters long: interegular's search walks ~95^3
    strings first; this one goes straight to them (and stops where the language does)."""
    mark = "\U000f0000"
    fsm = CHARS.char_fsm(mark, ((mark, ('"[ -~]*ab[ -~]*"', '"[ -~]{4}"')),))
    names = ["".join(chars) for chars in chardfa.shortest_strings(fsm, 5)]
    assert len(set(names)) == 5 and all(len(n) == 6 and "ab" in n[1:-1] and fsm.accepts(n) for n in names)
    assert chardfa.shortest_strings(CHARS.char_fsm("a|bc"), 10) == [["a"], ["b", "c"]]


def _random_dfa(rng, states: int, classes: int) -> regex_dfa.DFA:
    moves = [{c: rng.randrange(states) for c in range(classes) if rng.random() < 0.6} for _ in range(states)]
    return regex_dfa.DFA(moves, {s for s in range(states) if rng.random() < 0.3})


def _accepts(dfa: regex_dfa.DFA, word) -> bool:
    state = 0
    for c in word:
        state = dfa.moves[state].get(c)
        if state is None:
            return False
    return state in dfa.finals


def test_the_product_by_layers_is_the_product_by_dicts():
    """The vectorised breadth-first product (and its emptiness search) against the state-by-state construction:
    the same language (every word of up to 6 classes), the same number of states, the same verdicts."""
    import random

    rng = random.Random(7)
    verdicts = set()
    for _ in range(60):
        dfas = [_random_dfa(rng, rng.randint(1, 5), 3) for _ in range(rng.randint(2, 3))]
        layered, by_dicts = regex_dfa._product(dfas, 1000), regex_dfa._product_by_dicts(dfas, 1000)
        assert len(layered.moves) == len(by_dicts.moves)
        for n in range(7):
            for word in itertools.product(range(3), repeat=n):
                assert _accepts(layered, word) == _accepts(by_dicts, word) == all(_accepts(d, word) for d in dfas)
        empty = regex_dfa.product_empty(dfas, 1000)
        assert empty == regex_dfa._product_empty_by_dicts(dfas, 1000) == (not regex_dfa._trim(layered).finals)
        verdicts.add(empty)
    assert verdicts == {True, False}
    big = [regex_dfa.DFA([{0: (i + 1) % n} for i in range(n)], {0}) for n in (30, 31)]
    with pytest.raises(regex_dfa.TooLarge):
        regex_dfa._product(big, 900)
    assert len(regex_dfa._product(big, 930).moves) == 930


@pytest.mark.parametrize("regex", REGEXES + [r"(a|ab|abc)(c|bc|)", r"(x[ab]{0,3}|y[ab]{0,3})z"])
def test_minimise_gives_the_minimal_dfa(regex):
    """As many states as interegular's minimal DFA (`reduce()`: Brzozowski's double reversal), with the language
    kept."""
    from interegular.fsm import FSM

    fast = _fast(regex)
    small = regex_dfa.minimise(regex_dfa.DFA([dict(fast.map[s]) for s in range(len(fast.states))], set(fast.finals)))
    assert len(small.moves) == len(CHARS.parse(regex, ()).to_fsm().reduce().states)
    as_fsm = FSM(alphabet=fast.alphabet, states=range(len(small.moves)), initial=0, finals=small.finals,
                 map=dict(enumerate(small.moves)), __no_validation__=True)
    assert as_fsm.equivalent(CHARS.parse(regex, ()).to_fsm())


def test_a_large_intersections_product_is_minimal(monkeypatch):
    mark = "\U000f0000"
    parts = ("x[ab]{0,300}|y[ab]{0,300}", "[abxy]*b")  # two chains the subset construction keeps apart
    minimal = len(CHARS.parse(mark, ((mark, parts),)).to_fsm().reduce().states)
    assert len(_fast(mark, ((mark, parts),)).states) == minimal
    monkeypatch.setattr(regex_dfa, "MINIMISE_FROM", 10**6)  # (below the threshold the product stays as built)
    assert len(_fast(mark, ((mark, parts),)).states) > minimal


def test_minimise_merges_states_no_string_tells_apart():
    # a(b|c) written so the subset construction keeps the two branches' states apart: 0 -a-> 1 -b-> 3, 0 -x-> 2 -b-> 4
    d = regex_dfa.DFA([{0: 1, 1: 2}, {2: 3}, {2: 4}, {}, {}], {3, 4})
    m = regex_dfa.minimise(d)
    assert m.moves == [{0: 1, 1: 1}, {2: 2}, {}] and m.finals == {2}
    assert regex_dfa.minimise(m) == m


def test_any_dfa_from_the_large_threshold_is_minimal(monkeypatch):
    regex = "x[ab]{0,100}|y[ab]{0,100}"  # two chains of 101 states as built; the start, then one chain, minimal
    monkeypatch.setattr(regex_dfa, "MINIMISE_ANY_FROM", 150)
    assert len(_fast(regex).states) == 102
    assert _fast(regex).accepts("y" + "ab" * 50) and not _fast(regex).accepts("x" + "a" * 101)
    monkeypatch.setattr(regex_dfa, "MINIMISE_ANY_FROM", 10**6)
    assert len(_fast(regex).states) > 200
