"""Stage 1 of the constraint pipeline: value regexes that remember how they were put together.

A JSON value's regex is mostly structure — braces, member names, commas, optional members, repeated items — around a
few kinds of leaf values (strings, numbers, enums) that recur across members and schemas. An `Rx` is a `str` (the
regex text, exactly as the compiler writes it, so size limits and caches see no difference) that also holds its
structure: literals, sequences, alternatives and repeats down to leaf regexes. The token stage composes an `Rx`'s
automaton from its leaves' automata (`diffreason.constrain.compose`) instead of building the whole regex's; a
`Choice` is a leaf of literal texts (an enum's values) whose automaton is read off their trie.

    lit('{"a":') + leaf regexes → seq / alt / optional / repeat → Rx → (chardfa, tokens) → slot
"""

from __future__ import annotations

import re
import unicodedata

try:  # Python >= 3.11 names it re._parser; before, sre_parse
    from re import _constants as sre
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover
    import sre_constants as sre
    import sre_parse

# ("leaf", text) | ("lit", raw text) | ("seq", parts) | ("alt", parts) | ("rep", part, lo, hi or None)
Node = tuple


class Rx(str):
    """A regex's text plus its structure (`node`)."""

    node: Node

    def __new__(cls, text: str, node: Node) -> "Rx":
        out = super().__new__(cls, text)
        out.node = node
        return out


class Choice(str):
    """`(t1|t2|...)` for literal texts (an enum's values), written with re.escape, keeping the texts: its character
    automaton is built from them without parsing the regex (a long enum's regex was the costliest parse). A leaf."""

    texts: tuple[str, ...]

    def __new__(cls, texts) -> "Choice":
        texts = tuple(texts)
        out = super().__new__(cls, "(" + "|".join(re.escape(t) for t in texts) + ")")
        out.texts = texts
        return out


def node_of(regex: str) -> Node:
    return regex.node if isinstance(regex, Rx) else ("leaf", regex if isinstance(regex, Choice) else str(regex))


def lit(raw: str) -> Rx:
    """The literal text `raw`."""
    return Rx(re.escape(raw), ("lit", raw))


def seq(*parts: str) -> Rx:
    return Rx("".join(parts), ("seq", tuple(node_of(p) for p in parts)))


def group(part: str) -> Rx:
    """`(part)`: the same language, in parentheses."""
    return Rx(f"({part})", node_of(part))


def alt(parts: list[str]) -> Rx:
    """`((a)|(b)|...)`."""
    return Rx("(" + "|".join(f"({p})" for p in parts) + ")", ("alt", tuple(node_of(p) for p in parts)))


def optional(part: str) -> Rx:
    """`(part)?`."""
    return Rx(f"({part})?", ("rep", node_of(part), 0, 1))


def repeat(part: str, lo: int, hi: int | None) -> Rx:
    """`(part){lo,hi}`, or `(part){lo,}` when hi is None."""
    return Rx(f"({part}){{{lo},{'' if hi is None else hi}}}", ("rep", node_of(part), lo, hi))


def is_composite(regex: str) -> bool:
    return isinstance(regex, Rx) and regex.node[0] != "leaf"


def optional_prefixed(regex: str) -> tuple[str, str] | None:
    """(literal, rest) when `regex` is `(literal rest)?` — an optional object member, `(,"name":value)?` — else None.
    `rest` is the value's regex: its leaf text as it is, so it names the same cached automata and slots as the value
    written anywhere else."""
    if not isinstance(regex, Rx):
        return None
    node = regex.node
    if node[0] != "rep" or node[2:] != (0, 1) or node[1][0] != "seq":
        return None
    parts = flatten(node[1][1])
    if len(parts) < 2 or parts[0][0] != "lit":
        return None
    return parts[0][1], rx_of(parts[1:])


def rx_of(nodes: list[Node]) -> str:
    """A regex for a sequence of nodes: a lone leaf as its own text, anything else as an Rx (whose text, a cache
    key, is written the way the helpers above write it)."""
    if len(nodes) == 1 and nodes[0][0] == "leaf":
        return nodes[0][1]
    return Rx("".join(text_of(n) for n in nodes), ("seq", tuple(nodes)))


def text_of(node: Node) -> str:
    kind = node[0]
    if kind == "leaf":
        return node[1]
    if kind == "lit":
        return re.escape(node[1])
    if kind == "seq":
        return "".join(text_of(p) for p in node[1])
    if kind == "alt":
        return "(" + "|".join(f"({text_of(p)})" for p in node[1]) + ")"
    _, part, lo, hi = node
    return f"({text_of(part)})?" if (lo, hi) == (0, 1) else f"({text_of(part)}){{{lo},{'' if hi is None else hi}}}"


def flatten(parts: tuple) -> list[Node]:
    """A sequence's parts with nested sequences spliced in."""
    out = []
    for p in parts:
        out += flatten(p[1]) if p[0] == "seq" else [p]
    return out


# --------------------------------------------------------------------------------------------------------------------
# A user's regex


_HEX_ESCAPES = {"u": 4, "U": 8}  # (\xHH, octal and the rest the parser reads itself)
_QUANTIFIER = re.compile(r"\{(?:\d+(?:,\d*)?|,\d*)\}")  # a "{" Python reads as a repeat; any other is a literal
_INLINE_FLAGS = re.compile(r"\(\?([aiLmsux]*)(?:-([imsx]*))?([:)])")
_GROUP_OPENED = re.compile(r"(?<!\\)\((?:\?(?::|P<\w+>|[aimsux]*(?:-[imsx]*)?:))?\Z")  # (text ending in a group's start)


def _folded_non_ascii(parsed) -> str | None:
    """A character with case that a regex (`parsed`: Python's parse of it) matches case-insensitively and is not
    ASCII (None: none): `re.ASCII` folds only ASCII letters, the parser every letter, so `(?i)é` would let through
    "É", which `re` refuses. A class range that reaches past ASCII counts as one (its characters are not walked)."""
    parser, c = sre_parse, sre

    def cased(code: int) -> bool:
        char = chr(code)
        return code >= 0x80 and (char.lower() != char or char.upper() != char)

    def walk(items, fold: bool) -> str | None:
        for op, av in items:
            if op in (c.LITERAL, c.NOT_LITERAL):
                if fold and cased(av):
                    return chr(av)
            elif op == c.IN:
                for item_op, item in av:
                    if fold and item_op == c.LITERAL and cased(item):
                        return chr(item)
                    if fold and item_op == c.RANGE and item[1] >= 0x80:
                        return f"{chr(item[0])}-{chr(item[1])}"
            elif op == c.SUBPATTERN:
                _, add, remove, sub = av
                found = walk(sub, (fold or bool(add & c.SRE_FLAG_IGNORECASE)) and not remove & c.SRE_FLAG_IGNORECASE)
                if found:
                    return found
            else:
                for part in av if isinstance(av, (tuple, list)) else (av,):
                    subs = part if isinstance(part, list) else [part]
                    for sub in subs:
                        if isinstance(sub, parser.SubPattern) and (found := walk(sub, fold)):
                            return found
        return None

    return walk(parsed, bool(parsed.state.flags & c.SRE_FLAG_IGNORECASE))


def _backtracking_control(parsed) -> str | None:
    """The first possessive quantifier (`a*+`) or atomic group (`(?>...)`) of a regex (`parsed`: Python's parse of
    it), which Python 3.11's re reads and an automaton cannot (they change which texts match), named; None without
    one."""
    names = [(getattr(sre, op, None), what) for op, what in (
        ("POSSESSIVE_REPEAT", "a possessive quantifier"), ("ATOMIC_GROUP", "an atomic group"))]
    stack: list = [parsed]
    while stack:
        node = stack.pop()
        if isinstance(node, sre_parse.SubPattern):
            stack.extend(node.data)
        elif isinstance(node, (list, tuple)):
            what = next((w for op, w in names if node and op is not None and node[0] is op), None)
            if what is not None:
                return what
            stack.extend(node)
    return None


def _misread_construct(parsed) -> str | None:
    """A construct of a regex (`parsed`: Python's parse of it) that the parser would read as another language, named
    (None: none) — QA, 2026-12-07, a differential fuzz against `re.fullmatch`: a quantifier on a lookaround
    (`(?=b){1}` read as matching nothing), a class with two negated shorthands (`[\\S\\D]` read as their
    intersection) and a case-insensitive class with `\\W` beside other items (`(?i)[a\\W]` lost the letters). (A group
    that removes a flag directly around or inside another, `(?i)(?-i:(?:a))`, lost the removal: `from_python` sees it
    in the text, where the non-capturing group still is.)"""
    c = sre
    negated = {c.CATEGORY_NOT_SPACE, c.CATEGORY_NOT_DIGIT, c.CATEGORY_NOT_WORD}

    def has_assert(items) -> bool:
        for op, av in items:
            if op in (c.ASSERT, c.ASSERT_NOT):
                return True
            if op is c.SUBPATTERN and has_assert(av[3]):
                return True
        return False

    def walk(items, fold: bool) -> str | None:
        for op, av in items:
            if op in (c.MAX_REPEAT, c.MIN_REPEAT) and av[2].getwidth()[1] == 0 and has_assert(av[2].data):
                return "a quantifier on a lookaround"
            if op is c.IN:
                kinds = [x for k, x in av if k is c.CATEGORY and x in negated]
                if len(kinds) > 1:
                    return "a character class with two negated shorthands (\\S, \\D, \\W)"
                if fold and c.CATEGORY_NOT_WORD in kinds and len([k for k, _ in av if k is not c.NEGATE]) > 1:
                    return "a case-insensitive character class with \\W beside other items"
            if op is c.SUBPATTERN:
                _, add, remove, sub = av
                folds = c.SRE_FLAG_IGNORECASE
                found = walk(sub.data, (fold or bool(add & folds)) and not remove & folds)
            else:
                found = next((f for part in (av if isinstance(av, (tuple, list)) else (av,))
                              for sub in (part if isinstance(part, list) else [part])
                              if isinstance(sub, sre_parse.SubPattern) and (f := walk(sub.data, fold))), None)
            if found:
                return found
        return None

    return walk(parsed.data, bool(parsed.state.flags & c.SRE_FLAG_IGNORECASE))


def from_python(regex) -> str:
    """A user's regex, read as Python's `re` reads it with `re.ASCII` (`\\d`, `\\w`, `\\s` are ASCII classes, as the
    parser has them) and matched whole, as `re.fullmatch` does → the pipeline's regex text. Refused (TemplateError),
    with the reason: what is no str, what Python rejects (`a{3,1}`), the empty regex (a slot holds some text). Written
    for the parser: `\\uXXXX` / `\\UXXXXXXXX` / `\\N{name}` escapes become their characters, a `{` that
    Python reads as a literal (`a{`, `a{}`, `{x}`) is escaped, the flags `m` and `a` are dropped (the regex is read with
    re.ASCII, and `^` / `$` only start and end it), and a `^` / `\\A` at the start and a `$` / `\\Z` at the end are
    dropped (matching the whole slot, they say nothing). The verbose flag `x` is refused."""
    from diffreason.errors import TemplateError

    if not isinstance(regex, str):
        raise TemplateError(f"a regex is a string, not {type(regex).__name__}")
    try:
        re.compile(regex, re.ASCII)
        parsed = sre_parse.parse(regex, re.ASCII)  # (read once: the checks below walk it)
        folded = _folded_non_ascii(parsed)
    except (re.error, OverflowError, RecursionError, ValueError) as exc:  # (ValueError: `(?u)` beside re.ASCII)
        raise TemplateError(f"regex {regex!r} is not a valid Python regex: {exc}") from None
    control = _backtracking_control(parsed)
    misread = _misread_construct(parsed)
    if misread is not None:
        raise TemplateError(f"regex {regex!r}: {misread} is not supported (the automaton would read another "
                            "language); rewrite it without")
    if control is not None:  # (`a*+a` was read as `a*a`: texts Python's re never matches)
        raise TemplateError(f"regex {regex!r}: {control} is not supported (the automata would read it as the plain "
                            "quantifier or group, a larger language); rewrite it without")
    if folded is not None:
        raise TemplateError(f"regex {regex!r}: case-insensitive matching of {folded!r} is not supported (re.ASCII "
                            "folds only ASCII letters; the parser would fold it too); spell out the cases you want")
    out, anchors, i, in_class, class_start, lead = [], [], 0, False, 0, ""

    def push(char: str) -> None:
        """Append a character; in a class, a range over the surrogates (which no UTF-8 text holds) is split around
        them, so that its characters can be spelled in bytes."""
        if in_class and len(out) - 2 > class_start and out[-1] == "-" and len(out[-2]) == 1:
            low, high = ord(out[-2]), ord(char)
            parts = [(a, b) for a, b in ((low, min(high, 0xD7FF)), (max(low, 0xE000), high)) if a <= b]
            if low <= 0xDFFF and high >= 0xD800 and parts:  # (surrogates alone: left for the parser to refuse)
                del out[-2:]
                out.extend(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in parts)
                return
        out.append(char)

    while i < len(regex):
        char = regex[i]
        if char == "\\" and i + 1 < len(regex):
            width = _HEX_ESCAPES.get(regex[i + 1])
            if regex[i + 1] == "N":  # \N{name} (re.compile checked the name)
                width = regex.index("}", i) - i - 1
                char = unicodedata.lookup(regex[i + 3:i + 1 + width])
            elif width is not None:  # (re.compile checked the digits)
                char = chr(int(regex[i + 2:i + 2 + width], 16))
            elif regex[i + 1] == "0" or not regex[i + 1].isascii():  # an octal \0NN, an escaped non-ASCII character:
                digits = re.match(r"0[0-7]{0,2}", regex[i + 1:i + 4])  # the parser refused both (QA, 2026-12-07)
                width = len(digits.group()) - 1 if digits else 0
                char = chr(int(digits.group(), 8)) if digits else regex[i + 1]
            if width is not None:
                push(f"\\x{ord(char):02x}" if ord(char) < 0x80 and not char.isalnum() else char)
                i += 2 + width
                continue
            if not in_class and regex[i + 1] in "AZbB":
                anchors.append(len(out))
            out.append(regex[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif regex.startswith("(?#", i):  # a comment, which re ignores (the parser took it for a group); it ends at
            i += 3  # the first ")" that is not escaped, as re reads it (`(?#\\)(b)c` is the regex "c")
            while regex[i] != ")":
                i += 2 if regex[i] == "\\" else 1
            i += 1
            continue
        elif char == "(" and (flags := _INLINE_FLAGS.match(regex, i)):
            on, off, end = flags.group(1), flags.group(2) or "", flags.group(3)
            if "x" in on + off:
                raise TemplateError(f"regex {regex!r}: the verbose flag (?x) is not supported; write the regex "
                                    "without it (no spaces or comments to ignore)")
            on, off = on.replace("m", "").replace("a", ""), off.replace("m", "")
            if off and end == ":" and (_GROUP_OPENED.search(regex, 0, i) or regex.startswith("(", flags.end())):
                raise TemplateError(f"regex {regex!r}: a group that removes a flag directly inside or around another "
                                    "group is not supported (the parser loses the removal); write it without the "
                                    "extra group")
            if end == ")":  # global flags (only at the start): one group, written before the rest below
                lead += "".join(flag for flag in on if flag not in lead)
            else:
                out.append(f"(?{on}{'-' + off if off else ''}:")
            i = flags.end()
            continue
        elif char == "{":
            quantifier = _QUANTIFIER.match(regex, i)
            out.append(quantifier.group() if quantifier else "\\{")
            i = quantifier.end() if quantifier else i + 1
            continue
        elif char == "[":
            in_class, class_start = True, len(out)
            start = regex[i + 1:i + 2] == "^"
            out.append(regex[i:i + 1 + start])  # ("[" or "[^"; a "]" first in a class is a literal: taken next,
            i += 1 + start  # escaped, since the parser would end the class there)
            if regex[i:i + 1] == "]":
                out.append("\\]")
                i += 1
            continue
        elif char in "^$":
            anchors.append(len(out))
        push(char)
        i += 1
    if out and out[-1] in ("$", "\\Z") and anchors and anchors[-1] == len(out) - 1:
        out.pop()
        anchors.pop()
    if out and out[0] in ("^", "\\A") and anchors and anchors[0] == 0:
        out.pop(0)
        anchors.pop(0)
    if anchors:
        raise TemplateError(f"regex {regex!r}: ^ and \\A may only start it and $ and \\Z only end it (a slot's text is "
                            "matched whole); \\b and \\B are not supported")
    text = (f"(?{lead})" if lead else "") + "".join(out)
    if not "".join(out) or parsed.getwidth()[1] == 0:  # (`()`, `a{0}`: the parser's own message)
        raise TemplateError(f"regex {regex!r} matches only the empty string: a slot's regex must match some text")
    return regex if text == regex else text  # (an `Rx` or a `Choice` keeps its structure)
