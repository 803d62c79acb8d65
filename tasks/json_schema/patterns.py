"""A JSON Schema `pattern` → a regex over the *encoded* JSON string body that every generated string satisfies.

JSON Schema patterns are searched (`re.search`), and a string that is exactly one full match satisfies the search, so
we generate full matches of the pattern — but as JSON text: a quote must be written `\\"`, a backslash `\\\\`, a
newline `\\n`, a non-ASCII character `\\u00e9`. This module walks Python's own parse of the pattern (`re._parser`, the
parser `jsonschema` matches with) and writes a regex over those encodings that accepts a sound subset of the pattern's
full matches:

- literals are written in their JSON encoding, so any character of the pattern can be produced;
- character classes (`[a-z]`, `[^"]`, `\\w`, `\\S`, `.`) are narrowed to printable ASCII — lengths then count exactly
  and no partial UTF-8 sequence can ever be generated; quote and backslash become their escapes; the single
  characters a class names outside it (`[é😀]`, and `(é|😀)`, which Python parses as a class) are written encoded;
- `^` / `$` are dropped where nothing can precede / follow them in a full match, and refused elsewhere;
- runs of `.` stop at four characters (`.*` before characters it also matches blows the automaton up);
- what has no such subset — back-references, lookarounds, word boundaries, flags, possessive repeats — is refused
  with a one-line reason.
"""

from __future__ import annotations

import contextlib
import functools
import re

try:  # Python >= 3.11 names it re._parser; before, sre_parse
    from re import _constants as C
    from re import _parser as parser
except ImportError:  # pragma: no cover
    import sre_constants as C
    import sre_parse as parser

PRINTABLE = [chr(c) for c in range(0x20, 0x7F)]
# One generated character of '.': printable ASCII with quote and backslash written as escapes.
STRING_CHAR = r'([ !#-\[\]-~]|\\["\\])'
# One character of a string as patterns write it (what a length counts, as validators count code points): printable
# ASCII, an escape, a \uXXXX of the Basic Multilingual Plane or a surrogate pair's two (one character).
LENGTH_CHAR = (r'([ !#-\[\]-~]|\\["\\/bfnrt]|\\u([0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}'
               r'|[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}))')
MAX_DOT_RUN = 4
# Repeat counts past this are more than any slot holds: a `{m,n}` above it is capped at it (a subset of the matches),
# a minimum above it refused — the automaton would have that many states (`a{1000000000}`).
MAX_REPEAT = 1000
_META = set(".^$*+?{}[]\\|()")
_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


class PatternError(ValueError):
    """A pattern this module cannot translate; the message says why in a few words."""


class PatternLengthError(PatternError):
    """minLength / maxLength cannot be folded into the pattern."""


class PatternEmpty(PatternError):
    """No full match of the pattern can be written (an anchor that can hold at no place a match puts it)."""


class _Impossible(Exception):
    """This part of a pattern can never be on a full match (raised up to the branch or repeat that can do without)."""


def _regex_literal(text: str) -> str:
    """`text` as a regex that matches exactly it (only regex metacharacters escaped, as interegular expects)."""
    return "".join("\\" + c if c in _META else c for c in text)


def encoded_literal(char: str) -> str:
    """A regex matching the JSON encoding of one character; a surrogate (a pattern's `\\ud83d`) is none: a JSON
    text's escaped pair decodes to one character, and a lone one is no Unicode text."""
    if 0xD800 <= ord(char) <= 0xDFFF:
        raise PatternError(f"the pattern names the surrogate \\u{ord(char):04x}, which no Unicode string holds")
    if char in _JSON_ESCAPES:
        return _regex_literal(_JSON_ESCAPES[char])
    code = ord(char)
    if 0x20 <= code < 0x7F:
        return _regex_literal(char)
    if code <= 0xFFFF:
        return _regex_literal(f"\\u{code:04x}")
    hi, lo = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
    return _regex_literal(f"\\u{hi:04x}\\u{lo:04x}")


def _in_category(char: str, category) -> bool:
    digit, space, word = char.isdigit(), char in " \t\n\r\f\v", char.isalnum() or char == "_"
    return {
        C.CATEGORY_DIGIT: digit, C.CATEGORY_NOT_DIGIT: not digit,
        C.CATEGORY_SPACE: space, C.CATEGORY_NOT_SPACE: not space,
        C.CATEGORY_WORD: word, C.CATEGORY_NOT_WORD: not word,
    }[category]


def _class_members(items) -> list[str]:
    """The printable ASCII characters a parsed character class (`IN` items) matches."""
    negate = bool(items) and items[0][0] is C.NEGATE
    hits: set[str] = set()
    for op, av in items:
        if op is C.LITERAL:
            hits.add(chr(av))
        elif op is C.RANGE:
            hits.update(chr(c) for c in range(max(av[0], 0x20), min(av[1], 0x7E) + 1))
        elif op is C.CATEGORY:
            hits.update(ch for ch in PRINTABLE if _in_category(ch, av))
    return [ch for ch in PRINTABLE if (ch in hits) != negate]


def _class_regex(chars: list[str], more: tuple[str, ...] = ()) -> str:
    """A regex for one character out of `chars` (printable ASCII) or `more` (any others, each written encoded: what
    an alternation of single characters, `(é|😀)`, parses as), in JSON encoding."""
    plain = sorted(c for c in chars if c not in '"\\')
    parts = []
    i = 0
    while i < len(plain):  # contiguous runs become ranges
        j = i
        while j + 1 < len(plain) and ord(plain[j + 1]) == ord(plain[j]) + 1:
            j += 1
        a, b = (("\\" + c if c in "\\]^-[" else c) for c in (plain[i], plain[j]))
        parts.append(a if i == j else a + b if j == i + 1 else f"{a}-{b}")
        i = j + 1
    options = [f"[{''.join(parts)}]"] if parts else []
    options += [encoded_literal(c) for c in chars if c in '"\\'] + [encoded_literal(c) for c in more]
    if not options:
        raise PatternError("a character class matches no printable ASCII character")
    return options[0] if len(options) == 1 else "(" + "|".join(options) + ")"


def _translate(pattern, at_start: bool, at_end: bool, exact: bool = False) -> str:
    items = list(pattern)
    out = []
    for i, (op, av) in enumerate(items):
        zero_before = all(o is C.AT for o, _ in items[:i])
        zero_after = all(o is C.AT for o, _ in items[i + 1 :])
        if op is C.LITERAL:
            out.append(encoded_literal(chr(av)))
        elif op is C.NOT_LITERAL:
            out.append(_class_regex([ch for ch in PRINTABLE if ord(ch) != av]))
        elif op is C.ANY:
            out.append(STRING_CHAR)
        elif op is C.IN:
            negated = bool(av) and av[0][0] is C.NEGATE
            more = () if negated else tuple(dict.fromkeys(chr(v) for o, v in av if o is C.LITERAL and not
                                                          0x20 <= v <= 0x7E))
            out.append(_class_regex(_class_members(av), more))
        elif op is C.CATEGORY:
            out.append(_class_regex(_class_members([(C.CATEGORY, av)])))
        elif op is C.BRANCH:
            subs = []
            for p in av[1]:
                with contextlib.suppress(_Impossible):  # (an alternative no full match takes: left out)
                    subs.append(_translate(p, at_start and zero_before, at_end and zero_after, exact))
            if not subs:
                raise _Impossible()
            out.append("(" + "|".join(subs) + ")")
        elif op is C.SUBPATTERN:
            group, add_flags, del_flags, sub = av
            if add_flags & ~re.UNICODE or del_flags:
                raise PatternError("inline flags are not supported")
            out.append("(" + _translate(sub, at_start and zero_before, at_end and zero_after, exact) + ")")
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):  # laziness never changes whether a match exists
            lo, hi, sub = av
            if lo > MAX_REPEAT or (exact and hi != C.MAXREPEAT and hi > MAX_REPEAT):
                raise PatternError(f"a repeat of more than {MAX_REPEAT} (longer than any value written)")
            if hi != C.MAXREPEAT and hi > MAX_REPEAT:
                hi = max(lo, MAX_REPEAT)
            try:
                body = _translate(sub, False, False, exact)
            except _Impossible:  # a body no full match takes: only no repetition at all
                if lo > 0:
                    raise
                continue
            only_dots = all(o is C.ANY for o, _ in sub)
            if only_dots and (hi == C.MAXREPEAT or hi > MAX_DOT_RUN) and not exact:
                hi = max(lo, MAX_DOT_RUN)
            bound = (
                "*" if (lo, hi) == (0, C.MAXREPEAT) else "+" if (lo, hi) == (1, C.MAXREPEAT)
                else "?" if (lo, hi) == (0, 1) else f"{{{lo},}}" if hi == C.MAXREPEAT else f"{{{lo},{hi}}}"
            )
            out.append(f"({body}){bound}")
        elif op is C.AT:
            # an anchor where characters may precede (follow) it: a subset leaves out the ways through it, which
            # can only hold at the start (end); the exact language (a complement's) cannot
            if av in (C.AT_BEGINNING, C.AT_BEGINNING_STRING):
                if not (at_start and zero_before):
                    if exact:
                        raise PatternError("'^' where characters can precede it is not supported")
                    raise _Impossible()
            elif av in (C.AT_END, C.AT_END_STRING):
                if not (at_end and zero_after):
                    if exact:
                        raise PatternError("'$' where characters can follow it is not supported")
                    raise _Impossible()
            else:
                raise PatternError("word boundaries are not supported")
        elif op in (C.ASSERT, C.ASSERT_NOT):
            raise PatternError("lookarounds are not supported")
        elif op in (C.GROUPREF, C.GROUPREF_EXISTS):
            raise PatternError("back-references are not supported")
        else:
            raise PatternError(f"the regex construct {str(op).lower()} is not supported")
    return "".join(out)


_ONE_CHAR = {C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN, C.CATEGORY}


def _bound_lengths(parsed, min_length: int, max_length: float) -> None:
    """Fold minLength / maxLength into the pattern's one variable repeat, in place, where the pattern is a sequence
    of single characters and repeats of single characters (`^[A-Z][a-z0-9_]*$`): every full match then has a length
    within the bounds. Otherwise PatternLengthError."""
    items = [(op, av) for op, av in parsed if op is not C.AT]
    if any(op is C.AT and av not in (C.AT_BEGINNING, C.AT_BEGINNING_STRING, C.AT_END, C.AT_END_STRING)
           for op, av in parsed):
        raise PatternLengthError("minLength / maxLength beside this pattern are not supported")
    fixed, variable = 0, []
    for i, (op, av) in enumerate(items):
        if op in _ONE_CHAR:
            fixed += 1
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT) and len(av[2]) == 1 and av[2][0][0] in _ONE_CHAR:
            if av[0] == av[1]:
                fixed += av[0]
            else:
                variable.append(i)
        else:
            raise PatternLengthError("minLength / maxLength beside a pattern of this shape are not supported")
    if not variable:
        if min_length <= fixed <= max_length:
            return
        raise PatternLengthError(f"the pattern's matches have {fixed} characters, outside minLength / maxLength")
    if len(variable) > 1:  # the bounds hold only for some ways of sharing the length out: the caller intersects
        raise PatternLengthError("minLength / maxLength beside a pattern with several variable repeats")
    lo, hi, sub = items[variable[0]][1]
    lo = max(lo, min_length - fixed)
    hi = hi if max_length == float("inf") else min(hi, int(max_length) - fixed)
    if lo > hi:
        raise PatternLengthError("no match of the pattern has a length within minLength / maxLength")
    position = [k for k, (op, _) in enumerate(parsed.data) if op is not C.AT][variable[0]]
    parsed.data[position] = (items[variable[0]][0], (lo, hi, sub))


def pattern_to_json_regex(pattern: str, min_length: int = 0, max_length: float = float("inf"),
                          exact: bool = False) -> str:
    """The regex over encoded JSON string bodies (quotes excluded) for a JSON Schema `pattern` (see the module doc),
    with every match's length (in characters) within [min_length, max_length] where the pattern's shape allows
    (PatternLengthError where it does not). `exact`: runs of `.` are not capped, so among printable-ASCII strings
    the regex matches exactly the pattern's full matches (what a complement, `not pattern`, needs)."""
    if not isinstance(pattern, str):
        raise PatternError(f"a pattern must be a string, got {type(pattern).__name__}")
    return _pattern_to_json_regex(pattern, min_length, max_length, exact)


def _parse(pattern: str):
    """Python's parse of `pattern`, which must compile too: the parser takes a lookbehind of variable width, which
    re.compile (and so jsonschema's check of the pattern) refuses."""
    try:
        re.compile(pattern)
        return parser.parse(pattern)
    except re.error as exc:
        raise PatternError(f"not a regular expression Python accepts: {exc}") from None


@functools.lru_cache(maxsize=4096)  # schemas repeat patterns, and the compiler asks again for values it has seen
def _pattern_to_json_regex(pattern: str, min_length, max_length, exact: bool) -> str:
    parsed = _parse(pattern)
    if parsed.state.flags & ~(re.UNICODE | re.DEBUG):
        raise PatternError("inline flags are not supported")
    shortest, longest = parsed.getwidth()
    if shortest < min_length or longest > max_length:
        _bound_lengths(parsed, min_length, max_length)
    try:
        return _translate(parsed, True, True, exact)
    except _Impossible:
        raise PatternEmpty("no full match of the pattern can be written (its anchors hold nowhere)") from None


@functools.lru_cache(maxsize=1024)
def lookaround_parts(pattern: str) -> tuple[str, tuple[str, ...], tuple[str, ...]] | None:
    """A pattern with lookaheads at its start or lookbehinds at its end (`^(?=.*\\d)(?!.*\\s).{8,}$`) as regexes over
    encoded string bodies, for strings that start with a match of the rest (a subset of the strings the pattern is
    found in): (the rest, regexes the whole body must match, regexes it must not match — each exact, for its
    complement). A lookahead at the start of a match that spans the whole string
    reads the whole string; a lookbehind at its end, too. None when the pattern has no lookaround; PatternError for
    lookarounds anywhere else, or ones with lookarounds or anchors inside."""
    if not isinstance(pattern, str):
        raise PatternError(f"a pattern must be a string, got {type(pattern).__name__}")
    parsed = _parse(pattern)
    items = list(parsed)
    if not any(op in (C.ASSERT, C.ASSERT_NOT) for op, _ in items):
        return None
    start = 1 if items and items[0] in ((C.AT, C.AT_BEGINNING), (C.AT, C.AT_BEGINNING_STRING)) else 0
    end = len(items) - (1 if len(items) > start and items[-1] in ((C.AT, C.AT_END), (C.AT, C.AT_END_STRING)) else 0)
    ahead, behind = start, end
    while ahead < end and items[ahead][0] in (C.ASSERT, C.ASSERT_NOT) and items[ahead][1][0] == 1:
        ahead += 1
    while behind > ahead and items[behind - 1][0] in (C.ASSERT, C.ASSERT_NOT) and items[behind - 1][1][0] == -1:
        behind -= 1
    rest = items[:start] + items[ahead:behind] + items[end:]
    if any(op in (C.ASSERT, C.ASSERT_NOT) for op, _ in rest):
        raise PatternError("lookarounds other than at the pattern's start (ahead) or end (behind) are not supported")
    try:
        return _lookaround_regexes(parsed, items, start, ahead, behind, end, rest)
    except _Impossible:
        raise PatternEmpty("no full match of the pattern can be written (its anchors hold nowhere)") from None


def _lookaround_regexes(parsed, items, start: int, ahead: int, behind: int, end: int, rest) -> tuple:
    any_chars = f"{STRING_CHAR}*"
    required, forbidden = [], []
    ends = ((C.AT, C.AT_END), (C.AT, C.AT_END_STRING))
    begins = ((C.AT, C.AT_BEGINNING), (C.AT, C.AT_BEGINNING_STRING))
    for op, (direction, sub) in items[start:ahead] + items[behind:end]:
        # a lookahead that ends with `$` reads to the string's end (`(?!\\s*$)`: not blank), as a lookbehind that
        # starts with `^` reads from its start
        whole = bool(len(sub)) and (sub[-1] in ends if direction == 1 else sub[0] in begins)
        body = _translate(sub, direction == -1 and whole, direction == 1 and whole,
                          exact=op is C.ASSERT_NOT)  # (a complement needs the exact language)
        text = f"({body})" if whole else f"({body}){any_chars}" if direction == 1 else f"{any_chars}({body})"
        (required if op is C.ASSERT else forbidden).append(text)
    # the match starts the string (where the lookaheads look from); it ends it where the pattern is anchored there or
    # lookbehinds look back from its end — else any characters may follow it
    after = "" if end < len(items) or behind < end else any_chars
    body = _translate(parser.SubPattern(parsed.state, rest), True, True) + after
    return body, tuple(required), tuple(forbidden)


@functools.lru_cache(maxsize=4096)  # oneOf / not checks ask for the same patterns many times (Github_hard o3895: 828)
def searched_json_regex(pattern: str) -> str:
    """The printable-ASCII JSON strings (quotes included) that `pattern` is found in (`re.search`), exactly — what a
    complement (`not pattern`) needs, where a value regex may be a subset. Anchors are read only at the very start and
    end of the pattern; anywhere else, PatternError."""
    body = pattern_to_json_regex(pattern, exact=True)  # (refuses what is no pattern Python accepts)
    parsed = parser.parse(pattern)

    def anchors(sub) -> int:
        count = 0
        for op, av in sub:
            if op is C.AT:
                count += 1
            elif op is C.SUBPATTERN:
                count += anchors(av[3])
            elif op is C.BRANCH:
                count += sum(anchors(p) for p in av[1])
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
                count += anchors(av[2])
        return count

    items = list(parsed)
    starts = bool(items) and items[0] in ((C.AT, C.AT_BEGINNING), (C.AT, C.AT_BEGINNING_STRING))
    ends = len(items) > starts and items[-1] in ((C.AT, C.AT_END), (C.AT, C.AT_END_STRING))
    if anchors(parsed) != starts + ends:
        raise PatternError("anchors inside the pattern")
    any_chars = f"{STRING_CHAR}*"
    return f'"{"" if starts else any_chars}({body}){"" if ends else any_chars}"'
