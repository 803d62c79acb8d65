"""What a hole may hold, as a regular language: the regex of a hole's slot (`CanvasTemplate.from_regex`).

The template says what a regular language can say about a hole in its surroundings, read off the code around it
(a light scanner of Python's strings, comments and brackets; nothing is executed):

- **lines**: an inline hole holds no newline; a whole-line hole is whole lines, each ending with a newline (exactly
  one line with `single_line`).
- **indentation** (whole-line holes, in the file's indentation character; a file that mixes tabs and spaces gets no
  rule): the first line starts at one of the indentation levels open after the code before the hole (the previous
  statement's, or an enclosing block's — an `else:` goes back a level), or deeper than the previous statement when
  that opens a block with `:`; with a marker, exactly at the marker's indentation. Every later line starts at least
  as deep as the body of the enclosing top-level statement (a `def`, a `class`) while the code after the hole is
  still in that body (as deep as the next statement otherwise). Blank lines, continuation lines inside brackets and
  after a backslash are free.
- **brackets**: (), [] and {} are balanced within the hole, each closed by its own kind, to a nesting depth of at
  most `depth` (default 4: 99.6 % of HumanEval's lines nest no deeper), outside strings and comments. Where the code
  before the hole leaves brackets open and the code after it closes them, the hole may close some of those and open
  the ones the suffix goes on to close (at most 3 either way); where they do not match, the hole is balanced on its
  own.
- **tokens of code**: outside strings and comments only printable ASCII (no tab in a file indented with spaces);
  strings are one-line '...' or "..." with escapes (a triple-quoted string within a line reads as adjacent ones; one
  that spans lines cannot be in a hole — it would make the automaton ambiguous and large), holding any character but
  control characters; a comment runs to the end of its line, and an inline hole with code after it on its line holds
  none (the code would become comment text). That `""` then `"a"` is a triple quote to Python, which the template
  cannot see without a much larger automaton, the check sees (`tasks.infill.search.reads_as_written`).
- **not blank**: a hole holds at least one character other than spaces, tabs and newlines.
- a hole inside a string (the code before it ends inside one) only gets the line rule, and holds neither the
  string's quote character nor a backslash that escapes nothing (either would end the string elsewhere).
- **the line's shape** (a single whole line whose next statement is known — the code after it up to the end, or up
  to a later hole when a statement comes first): it opens a block (a block keyword, code, then `:`) exactly when
  the next statement is deeper; `elif` / `else` / `except` / `finally` open one only after what they continue at
  their level, and `try` only where its `except` / `finally` follows its body; otherwise it does not start with
  `in`, `is`, `and`, `or`, nor with a block keyword unless it is a compound statement on one line (`if x: y`); a
  comment alone only where the next statement's level stays right;
  after a block opener, its body's first line lies between the opener's depth and the next statement's. The shape
  is a flat regex intersected with the hole's (`hole_language`): the slot's automaton is their product, 2-5x the
  states of the hole's regex alone, and so its build time. A simple statement's code ends with neither `:` nor an
  operator.
- **the last statement** of a multi-line hole whose next statement is known (`_block_regex`): it opens a block (its
  code starts with a block keyword's first letter and ends with `:`) exactly when the next statement is deeper than
  the line it starts on; otherwise its code ends with no operator either. Read at the hole's last newline outside
  brackets, so continuation lines are free. Comments alone only where the next statement needs no statement before
  it (not where it would be a missing block's body).

Only tokens the tokenizer can spell enter a slot: the slot's automaton is built over the tokenizer's tokens from
this language (special tokens never match; byte tokens only where they complete characters), and pads end it.

Checked against HumanEval-infilling: the canonical fill of every task matches its hole's regex except the 19 (of
6,848) whose brackets nest deeper than 4 (tests/test_infill.py). What a regular language cannot say — that the
code parses as a whole, or passes its tests — the checks decide (`tasks.infill.search`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

OPENERS = {"(": ")", "[": "]", "{": "}"}
CLOSERS = {")": "(", "]": "[", "}": "{"}
MAX_OPEN = 3  # brackets the hole may close of the prefix's, or open for the suffix


@dataclass
class Scan:
    """The state at the end of a text scanned as Python: open brackets, an unfinished string, closers without an
    opener (a suffix closes what its prefix opened), and the logical lines (start, indentation, code without
    comments) that begin at bracket depth 0 outside strings."""

    stack: list[str]
    quote: str | None
    unmatched: list[str]
    mismatched: bool
    lines: list[tuple[int, str, str]]


def scan(text: str) -> Scan:
    stack: list[str] = []
    unmatched: list[str] = []
    mismatched = False
    quote = None
    lines: list[tuple[int, str, str]] = []
    code: list[str] = []  # the current logical line without comments
    line_start = 0
    i, n = 0, len(text)

    def close_line(end: int) -> None:
        first = text[line_start:end].split("\n", 1)[0]
        indent = first[: len(first) - len(first.lstrip(" \t"))]
        lines.append((line_start, indent, "".join(code)))

    while i < n:
        c = text[i]
        if quote is not None:
            if c == "\\":
                code.append(text[i: i + 2])
                i += 2
                continue
            if text.startswith(quote, i):
                code.append(quote)
                i += len(quote)
                quote = None
                continue
            if c == "\n" and len(quote) == 1:  # an unterminated one-line string ends with its line (a syntax error)
                quote = None
                continue
            code.append(c)
            i += 1
            continue
        if c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if c in "'\"":
            quote = c * 3 if text.startswith(c * 3, i) else c
            code.append(quote)
            i += len(quote)
            continue
        if c in OPENERS:
            stack.append(c)
        elif c in CLOSERS:
            if stack and stack[-1] == CLOSERS[c]:
                stack.pop()
            elif stack:
                mismatched = True
                stack.pop()
            else:
                unmatched.append(c)
        if c == "\n" and not stack:
            if not (code and code[-1] == "\\"):  # (a backslash continues the logical line)
                close_line(i)
                code = []
                line_start = i + 1
                i += 1
                continue
        code.append(c)
        i += 1
    if line_start < n or not lines:
        close_line(n)
    return Scan(stack, quote, unmatched, mismatched, lines)


def _statements(lines: list[tuple[int, str, str]]) -> list[tuple[str, str]]:
    """(indentation, code) of the logical lines that hold code (not blank, not only a comment)."""
    return [(indent, code.strip()) for _, indent, code in lines if code.strip()]


def _first_word(code: str) -> str:
    m = re.match(r"[A-Za-z_]\w*", code)
    return m.group(0) if m else ""


@dataclass(frozen=True)
class HoleContext:
    """What the code around a hole says about it (see the module docstring)."""

    whole_line: bool
    single_line: bool
    in_string: bool = False
    unit: str | None = " "  # the indentation character; None: the file mixes tabs and spaces (no rule)
    first_indent: str | None = None  # exactly this indentation on the first line (a marker's)
    first_levels: tuple[int, ...] = ()  # else exactly one of these many units on the first line ...
    first_deeper: int | None = None  # ... or at least this many (after a line that opens a block)
    block: int = 0  # every later line at depth 0 at least this many units
    open_before: tuple[str, ...] = ()  # brackets the prefix leaves open
    closed_after: tuple[str, ...] = ()  # closers of the suffix without an opener in it
    next_known: bool = False  # the statement after the hole is known (or known to be none): `next_indent` applies
    next_indent: int | None = None  # its indentation in units (None: the code ends after the hole)
    heads: tuple[tuple[int, str], ...] = ()  # (level, first word of the last statement at that level) per open level
    comment_alone: bool = True  # a hole of comments only leaves the next statement where it may stand (False: it
    # would need a statement before it: it is deeper than every open level, or the code ends after an opened block)
    try_levels: tuple[int, ...] | None = None  # where a `try:` that ends the hole is followed by its `except` /
    # `finally` (the first statement after its body at its level or shallower is one, at its level); None: any level
    line_start: bool = False  # an inline hole with only the line's indentation before it (outside brackets and
    # continuations): it starts the statement, so its first character is not blank (an "unexpected indent")
    code_after: bool = False  # an inline hole with code after it on its line: it holds no comment (which would
    # turn that code into comment text)
    quote: str | None = None  # in a string: the quote that opened it (the hole never holds it)


def _unit(*texts: str) -> str | None:
    tabs = spaces = False
    for text in texts:
        for line in text.split("\n"):
            lead = line[: len(line) - len(line.lstrip(" \t"))]
            if not line.strip():
                continue
            tabs |= "\t" in lead
            spaces |= " " in lead
    if tabs and spaces:
        return None
    return "\t" if tabs else " "


def _levels(widths: list[int]) -> list[int]:
    """The indentation levels open after statements of these indentations (Python's indentation stack)."""
    stack = [0]
    for w in widths:
        if w > stack[-1]:
            stack.append(w)
        else:
            while len(stack) > 1 and stack[-1] > w:
                stack.pop()
    return stack


def _dedents_fit(stack: list[int], nexts: list[tuple[str, str]]) -> bool:
    """Do the statements after the first of `nexts` go back only to levels open (`stack`: Python's indentation stack
    at the first, its own level last)? (A hole of comments alone leaves that stack; `def f():` then a deeper body
    that dedents to where the hole stood needs the hole to open a block.)"""
    stack = list(stack)
    for (_, before), (indent, _) in zip(nexts, nexts[1:]):
        w = len(indent)
        if w > stack[-1]:
            if not before.endswith(":"):
                return False
            stack.append(w)
            continue
        while stack[-1] > w:
            stack.pop()
        if stack[-1] != w:
            return False
    return True


def _try_levels(nexts: list[tuple[str, str]], cut: bool) -> tuple[int, ...] | None:
    """The indentations (below the next statement's) at which a `try:` ending the hole would have its `except` or
    `finally`: the first statement after the next one (the `try`'s body) at that indentation or shallower is one of
    them, at that indentation. `cut`: the code after it stops at a later hole, which may hold it when no statement
    decides."""
    if not nexts:
        return None
    later = [(len(ind), _first_word(code)) for ind, code in nexts[1:]]
    out = []
    for w in range(len(nexts[0][0])):
        first = next(((width, word) for width, word in later if width <= w), None)
        if (first is None and cut) or (first is not None and first[0] == w and first[1] in ("except", "finally")):
            out.append(w)
    return tuple(out)


def hole_context(prefix: str, suffix: str, whole_line: bool, indent: str | None = None,
                 single_line: bool = False, suffix_ends_at_hole: bool = False) -> HoleContext:
    """The context of a hole between `prefix` and `suffix` (see `tasks.infill.holes` for the two kinds).

    Indentation of a whole-line hole, in units of the file's indentation character: its first line starts at one of
    the levels open after the prefix (the previous statement's, or an enclosing block's: an `else:` goes back one), or
    deeper than the previous statement when that opens a block — or exactly at a marker's indentation. Its other lines
    stay inside the block the hole is in: at least as deep as the body of the enclosing top-level statement (a `def`,
    a `class`) while the code after the hole is still in that body (as deep as the next statement otherwise).

    `suffix_ends_at_hole`: the suffix stops at a later hole (whose text is not known), so when it holds no statement
    the one after this hole is not known."""
    before = scan(prefix)
    if before.quote is not None:
        return HoleContext(whole_line, single_line or not whole_line, in_string=True, quote=before.quote)
    after = scan(suffix)
    opened = tuple(before.stack) if not before.mismatched else ()
    closed = tuple(after.unmatched) if after.quote is None else ()
    if not whole_line:
        lines = prefix.split("\n")
        start = not opened and not lines[-1].strip(" \t") and not (len(lines) > 1 and lines[-2].endswith("\\"))
        rest = suffix.split("\n", 1)[0].strip(" \t\r\f")
        return HoleContext(False, True, open_before=opened, closed_after=closed, line_start=start,
                           code_after=bool(rest) and not rest.startswith("#"))
    unit = _unit(prefix, suffix, indent or "")
    if indent is not None and unit is not None and indent.strip(unit):
        unit = None  # the marker's indentation mixes characters the file does not use
    if unit is None or prefix.endswith("\\\n"):  # (after a backslash the first line continues a statement)
        return HoleContext(True, single_line, unit=None, open_before=opened, closed_after=closed)
    statements = _statements(before.lines)
    nexts = _statements(after.lines)
    widths = [len(ind) for ind, _ in statements]
    nxt = len(nexts[0][0]) if nexts else None
    top = max((i for i, w in enumerate(widths) if w == 0), default=-1)
    inside_top = 0 <= top and statements[top][1].endswith(":")
    body = min(widths[top + 1:], default=0) if inside_top else 0  # the enclosing top-level block's body
    block = 0 if nxt is None else min(body, nxt)
    levels = [w for w in _levels(widths) if w >= block]
    deeper = widths[-1] + 1 if statements and statements[-1][1].endswith(":") else None
    if deeper is not None:  # a comment alone: the next statement is the opened block's body
        alone = nxt is not None and nxt >= deeper and _dedents_fit([*_levels(widths), nxt], nexts)
    else:
        alone = nxt is None or (nxt in levels and _dedents_fit([w for w in _levels(widths) if w <= nxt], nexts))
    if deeper is not None:  # a block was opened: its body comes first
        levels = []
    known = not opened and not closed and after.quote is None and (bool(nexts) or not suffix_ends_at_hole)
    heads = tuple((w, _first_word(next(c for i, c in reversed(statements) if len(i) == w)))
                  for w in _levels(widths) if w in widths)
    following = dict(next_known=known, next_indent=nxt, heads=heads, comment_alone=alone or not known,
                     try_levels=_try_levels(nexts, suffix_ends_at_hole) if known else None)
    if indent is not None:
        return HoleContext(True, single_line, unit=unit, first_indent=indent, block=min(block, len(indent)),
                           open_before=opened, closed_after=closed, **following)
    return HoleContext(True, single_line, unit=unit, first_levels=tuple(levels), first_deeper=deeper, block=block,
                       open_before=opened, closed_after=closed, **following)


# -- the regex --------------------------------------------------------------------------------------------------------

_CONTROL = r"\x00-\x08\x0b-\x1f\x7f"  # control characters (but tab and newline): no source holds them
_BREAKS = "\x85\u2028\u2029"  # what str.splitlines (and so an editor or a line-based reader) breaks lines at too


def _ascii_class(excluded: str) -> str:
    """A character class of tab and printable ASCII but `excluded`: code outside strings and comments (a non-ASCII
    identifier is legal Python but rare; inside strings and comments any character but a control one goes)."""
    return "[" + _class("".join(chr(c) for c in [9, *range(0x20, 0x7F)] if chr(c) not in excluded)) + "]"


def _class(chars: str) -> str:
    """`chars` escaped for a character class."""
    return "".join("\\" + c if c in "\\]^-[" else c for c in chars)


_PLAIN = _ascii_class("()[]{}'\"#\\")  # code: no bracket, quote, comment sign or backslash
_PLAIN_NO_TAB = _ascii_class("()[]{}'\"#\\\t")  # ... nor a tab (in a file indented with spaces)
_SOLID = _ascii_class("()[]{}'\"#\\ \t")  # ... nor blank
_STRINGS = tuple(rf"{q}(?:[^{q}\\\n{_CONTROL}]|\\[^\n{_CONTROL}])*{q}" for q in "'\"")
_COMMENT = rf"#[^\n{_CONTROL}]*"
_CONTINUATION = r"\\\n"  # a backslash that continues the line (multi-line holes)


def _first_indent(ctx: HoleContext) -> str:
    """The first line's indentation (what follows it is not blank)."""
    if ctx.first_indent is not None:
        return re.escape(ctx.first_indent)
    if ctx.unit is None:
        return r"[ \t]*"
    u = re.escape(ctx.unit)
    options = [f"{u}{{{w}}}" if w else "" for w in ctx.first_levels]
    if ctx.first_deeper is not None:
        options.append(f"{u}{{{ctx.first_deeper}}}{u}*")
    if not options:
        return f"{u}*"
    return "(?:" + "|".join(options) + ")"


class _Builder:
    def __init__(self, ctx: HoleContext, depth: int):
        self.ctx, self.depth = ctx, depth
        self.multiline = ctx.whole_line and not ctx.single_line
        self._content: dict[tuple[int, bool], str] = {}

    def newline(self, inside: bool) -> str | None:
        if not self.multiline:
            return None
        if inside or self.ctx.unit is None:
            return r"\n"
        u = re.escape(self.ctx.unit)
        return rf"\n(?:{u}*\n)*" + (f"{u}{{{self.ctx.block}}}" if self.ctx.block else "")

    def atoms(self, depth: int, inside: bool, solid: bool = False) -> list[str]:
        atoms = [_SOLID if solid else (_PLAIN_NO_TAB if self.ctx.unit == " " else _PLAIN), *_STRINGS]
        if self.multiline and not solid:
            atoms.append(_CONTINUATION)
        nl = self.newline(inside)
        if nl is not None:
            # a comment runs to the end of its line: one atom with the newline that ends it (a comment that could
            # stop anywhere would let the automaton read its rest as code too, and its states multiply)
            atoms.append(_COMMENT + nl)
            if not solid:
                atoms.append(nl)
        return atoms + self.brackets(depth)

    def brackets(self, depth: int) -> list[str]:
        """(), [] and {} around balanced content, nested at most `depth` deep (none at depth 0)."""
        if depth <= 0:
            return []
        inner = self.content(depth - 1, True)
        return [rf"\({inner}\)", rf"\[{inner}\]", rf"\{{{inner}\}}"]

    def content(self, depth: int, inside: bool) -> str:
        key = (depth, inside)
        if key not in self._content:
            self._content[key] = "(?:" + "|".join(self.atoms(depth, inside)) + ")*"
        return self._content[key]

    def solid_start(self, depth: int, inside: bool, lead: bool = True) -> str:
        """Blank space (unless not `lead`), then something that is not blank, then anything: a non-blank span."""
        start = r"[ \t]*" if lead else ""
        return start + "(?:" + "|".join(self.atoms(depth, inside, solid=True)) + ")" + self.content(depth, inside)

    def sequence(self, k: int, opens: tuple[str, ...], lead: bool = True) -> str:
        """Close k of the prefix's open brackets, then open `opens`, with balanced content between."""
        level = len(self.ctx.open_before)
        depth = self.depth
        parts = []
        if k + len(opens) == 0:
            parts.append(self.solid_start(depth, level > 0, lead))
        else:
            parts.append(self.content(depth, level > 0))
        for j in range(k):
            closer = OPENERS[self.ctx.open_before[level - 1 - j]]
            parts.append(re.escape(closer) + self.content(depth, level - 1 - j > 0))
        for j, opener in enumerate(opens):
            parts.append(re.escape(opener) + self.content(depth, True))
        return "".join(parts)


def _choices(ctx: HoleContext) -> list[tuple[int, tuple[str, ...]]]:
    """The (k, opened) pairs that take the prefix's open brackets to the ones the suffix closes."""
    P, Q = list(ctx.open_before), list(ctx.closed_after)
    if len(P) > 8 or len(Q) > 8:
        return [(0, ())]
    out = []
    for k in range(0, min(len(P), MAX_OPEN) + 1):
        rest = P[: len(P) - k]
        r = len(Q) - len(rest)
        if r < 0 or r > MAX_OPEN:
            continue
        opened = tuple(CLOSERS[q] for q in reversed(Q[:r]))  # the last opened is closed first
        stack = rest + list(opened)
        if all(OPENERS[stack[-1 - i]] == q for i, q in enumerate(Q)):
            out.append((k, opened))
    return out or [(0, ())]


# A block opener's keyword: those that take code before the colon, then those that take none (`except` may), and
# the keywords that continue the block of the statement before them at their level (which must be one of these).
_OPENERS = ("if", "for", "while", "with", "def", "class", "async", "match", "case", "elif")
_BARE = ("else", "try", "finally")
_CONTINUES = {"elif": ("if", "elif"), "else": ("if", "elif", "for", "while", "try", "except", "async"),
              "except": ("try", "except"), "finally": ("try", "except", "else")}
_KEYWORD_INITIALS = "".join(sorted({k[0] for k in (*_OPENERS, *_BARE, "except")}))
_NOT_FIRST = ("and", "in", "is", "or")  # words no statement starts with
# A line that does not open a block starts with one of these only as a compound statement on one line (`if x: y`)
_COMPOUND = ("if", "elif", "else", "for", "while", "with", "def", "class", "try", "except", "finally", "async")


def _bare_openers(continues: Sequence[str], try_ok: bool) -> list[str]:
    """The block keywords that take no code before their colon, of `_BARE`: `else` and `finally` only where they
    continue a statement (`continues`), `try` only where `try_ok`."""
    return [k for k in _BARE if (k not in _CONTINUES or k in continues) and (k != "try" or try_ok)]


@dataclass(frozen=True)
class _Shape:
    indent: str  # the line's indentation, a regex
    opens: bool  # the line opens a block (else it is a statement that does not end with `:`)
    continues: tuple[str, ...]  # of elif / else / except / finally, those that may start it
    comment: bool  # a comment alone may be the line
    try_ok: bool = True  # a block opener here may be `try:` (its `except` / `finally` follows: `try_levels`)


def _line_shapes(ctx: HoleContext) -> list[_Shape] | None:
    """The shapes a single whole line may take, read off the statement after it: it opens a block (ends with `:`)
    exactly when that statement is deeper; a simple statement (or a comment alone) leaves the next statement at a
    level that is open; `elif`, `else`, `except`, `finally` only follow what they continue at their level; a
    deeper line after a block opener that the next statement would dedent past is out. None: no rule."""
    if not (ctx.whole_line and ctx.single_line and ctx.next_known and ctx.unit is not None) or ctx.open_before:
        return None
    u, nxt, heads = re.escape(ctx.unit), ctx.next_indent, dict(ctx.heads)
    levels = set(ctx.first_levels)  # (the open levels at or past the block's: the next statement's is past it)
    if ctx.first_deeper is not None:
        d = ctx.first_deeper
        if nxt is None or nxt < d:  # (the next statement dedents below the new block: the line is its body)
            return [_Shape(f"{u}{{{d}}}{u}*", False, (), False)]
        widths = list(range(d, nxt + 1))
    elif ctx.first_indent is not None:
        widths = [len(ctx.first_indent)]
    elif ctx.first_levels:
        widths = list(ctx.first_levels)
    else:
        return None
    shapes = []
    for w in widths:
        opens = nxt is not None and nxt > w
        if not opens and nxt is not None and nxt != w and nxt not in levels and ctx.first_indent is None:
            continue  # a statement here would leave the next one at a level that is not open
        continues = tuple(k for k, after in _CONTINUES.items() if heads.get(w) in after)
        try_ok = ctx.try_levels is None or w in ctx.try_levels
        shapes.append(_Shape(f"{u}{{{w}}}" if w else "", opens, continues, ctx.comment_alone, try_ok))
    return shapes or None  # (none: the code around the hole cannot parse whatever it holds; no rule then)


def _word_not_in(words: Sequence[str]) -> str:
    """A regex of the (ASCII) identifiers other than `words`: a trie of them, left at any other letter."""
    import string

    first = string.ascii_letters + "_"
    ident = first + string.digits

    def node(prefix: str) -> str:
        nexts = sorted({w[len(prefix)] for w in words if w.startswith(prefix) and len(w) > len(prefix)})
        away = "".join(c for c in (ident if prefix else first) if c not in nexts)
        options = [f"[{away}][{ident}]*"] + [f"{c}{node(prefix + c)}" for c in nexts]
        if prefix and prefix not in words:
            options.append("")
        return "(?:" + "|".join(options) + ")"

    return node("")


def hole_regex(ctx: HoleContext, depth: int = 4) -> str:
    """The regex of everything the hole may hold (see the module docstring)."""
    if ctx.in_string:  # (any character but a control one or a line break: \r would end the line too; not the
        # string's quote, which would end it, and a backslash only with the character it escapes)
        q = re.escape(ctx.quote[0])
        text = f"(?:[^{q}\\\\\n{_CONTROL}{_BREAKS}]|\\\\[^\n{_CONTROL}{_BREAKS}])"
        solid = f"(?:[^ \t{q}\\\\\n{_CONTROL}{_BREAKS}]|\\\\[^\n{_CONTROL}{_BREAKS}])"
        if ctx.whole_line:
            line = rf"{text}*{solid}{text}*\n"
            return line if ctx.single_line else rf"(?:{text}*\n)*{line}(?:{text}*\n)*"
        return rf"{text}*{solid}{text}*"
    b = _Builder(ctx, depth)
    if b.multiline and ctx.next_known and ctx.unit is not None and not ctx.open_before and not ctx.closed_after:
        return _block_regex(ctx, b)
    # a whole-line hole's first line starts with its indentation (`_first_indent`), then code
    lead = not (ctx.whole_line and ctx.unit is not None and not ctx.open_before) and not ctx.line_start
    body = "|".join(f"(?:{b.sequence(k, opened, lead)})" for k, opened in _choices(ctx))
    # the last line may end with a comment, or be one
    blank = r"[ \t]*" if lead else ""
    if not ctx.code_after:
        body = f"(?:(?:{body})(?:{_COMMENT})?|{blank}{_COMMENT})"
    if not ctx.whole_line:
        return body
    first = "" if ctx.open_before else _first_indent(ctx)
    return f"{first}{body}\\n"


_BAD_ENDS = ":=+-/%&|^<>~@!"  # no simple statement's code (brackets closed) ends with one of these


def _rest_of_line(excluded: str, hash_first: bool, colon_first: bool = True) -> str:
    """A simple statement's line from a character not in `excluded` (a character class body) to its end: its code
    does not end with `:` or an operator, unless the line holds a `#` (a comment may end with anything; the flat
    regex cannot tell a comment's `#` from a string's, so any `#` lifts the rule). `hash_first`, `colon_first`: the
    first character may be `#`, `:`."""
    bad, good_end = _class(_BAD_ENDS), f"[^\\n#{_class(_BAD_ENDS)} \\t]"
    bad_first = _BAD_ENDS if colon_first else _BAD_ENDS.replace(":", "")
    options = [f"[^{excluded}#{bad}](?:[^\\n#]*{good_end})?[ \\t]*",
               f"[{_class(bad_first)}][^\\n#]*{good_end}[ \\t]*",
               f"[^{excluded}#][^\\n]*#[^\\n]*"]
    if hash_first:
        options.append("#[^\\n]*")
    return "(?:" + "|".join(options) + ")"


def _widths(ctx: HoleContext) -> list[tuple[int, int | None]]:
    """The first line's indentations as (least, most) widths (most None: no bound)."""
    if ctx.first_indent is not None:
        return [(len(ctx.first_indent), len(ctx.first_indent))]
    out = [(w, w) for w in ctx.first_levels]
    if ctx.first_deeper is not None:
        out.append((ctx.first_deeper, None))
    return out


def _indent_between(u: str, low: int, high: int | None) -> str | None:
    """Indentation of `low` to `high` (None: any more) units; None when empty."""
    if high is not None and high < low:
        return None
    if high == low:
        return f"{u}{{{low}}}" if low else ""
    return f"{u}{{{low},{'' if high is None else high}}}"


def _block_regex(ctx: HoleContext, b: "_Builder") -> str:
    """A multi-line hole whose next statement is known: the hole's regex (code, brackets, lines at the block's
    depth), with its last statement — the code after its last newline outside brackets, before any comment lines —
    opening a block (code that starts with a block keyword's first letter and ends with `:`) exactly when the next
    statement is deeper than it starts; a statement that does not open one does not end its code with an operator
    either (`_BAD_ENDS`). A hole of comments only where the next statement's indentation is right without a
    statement before it. A statement's code ends outside brackets, as the hole leaves none open here.

    Only the keyword's first letter: whole keywords (as `_shape_regex` has them) split the letters into a dozen
    classes and the tokenizer's tokens into many more groups, and the automaton's build grew tens of times slower
    (docs/code-model.md); the first letter is cheap, and still keeps `return:`, `pass:` and `x = y:` out."""
    u, depth, block, nxt = re.escape(ctx.unit), b.depth, ctx.block, ctx.next_indent
    newline = b.newline(False)
    outside = {newline, _COMMENT + newline}
    segment = "(?:" + "|".join(a for a in b.atoms(depth, False) if a not in outside) + ")*"
    solid = "(?:" + "|".join(a for a in b.atoms(depth, False, solid=True) if a not in outside) + ")"
    ends_well = "(?:" + "|".join([_ascii_class("()[]{}'\"#\\ \t" + _BAD_ENDS), *_STRINGS, *b.brackets(depth)]) + ")"
    opener = f"[{_KEYWORD_INITIALS}]{segment}:[ \\t]*"
    simple = f"(?:{ends_well}|{solid}{segment}{ends_well})[ \\t]*"

    def last(low: int, high: int | None, written: int = 0) -> list[str]:
        """The last statement at an indentation of `low` to `high` units (`written` of them already read): an opener
        where it is shallower than the next statement, a simple statement where it is not."""
        options = []
        if nxt is not None:
            shallow = _indent_between(u, low - written, (nxt - 1 if high is None else min(high, nxt - 1)) - written)
            if shallow is not None:
                options.append(shallow + opener)
        deep = _indent_between(u, (low if nxt is None else max(low, nxt)) - written,
                               None if high is None else high - written)
        if deep is not None:
            options.append(deep + simple)
        return options

    alone = [x for low, high in _widths(ctx) or [(0, None)] for x in last(low, high)]  # one statement
    after = last(block, None, block)  # after earlier lines (a newline outside brackets, then `block` units)
    # earlier lines: code, then a newline outside brackets (or a comment's); or a comment line alone
    earlier = (f"{_first_indent(ctx)}(?:{b.solid_start(depth, False, lead=False)}{b.content(depth, False)}"
               f"(?:{newline}|{_COMMENT}{newline})|{_COMMENT}{newline})")
    body = "|".join([*alone, f"{earlier}(?:{'|'.join(after)})"])
    comment_lines = rf"(?:\n(?:{u}*\n)*{u}{{{block}}}[ \t]*{_COMMENT})*"
    only = [f"{_first_indent(ctx)}{_COMMENT}{comment_lines}"] if ctx.comment_alone else []
    return "(?:" + "|".join([f"(?:{body})(?:[ \\t]*{_COMMENT})?{comment_lines}", *only]) + ")\\n"


def _shape_regex(shapes: list[_Shape]) -> str:
    """The lines of `shapes` as a flat regex (no brackets, strings or comments read: the hole's regex says those, and
    the slot is the intersection of both): a block opener is a block keyword, code (not none: `if :` is out), `:`,
    then at most a comment; any other line starts with a word a statement may start with (not `in`, `and`, ...,
    nor a block keyword unless something follows its colon: `if x: y`), or with no word, and its code does not end
    with `:` or an operator (`_rest_of_line`)."""
    any_, blank = r"[^\n]", r"[ \t]"
    kinds: dict[tuple[bool, tuple[str, ...], bool], list[str]] = {}
    for shape in shapes:
        kinds.setdefault((shape.opens, shape.continues, shape.try_ok), []).append(shape.indent)

    def at(indents: list[str]) -> str:
        return "(?:" + "|".join(indents) + ")"

    # Each kind of line starts its own way; the rest of the line is one regex shared by every kind (so that the
    # automaton's states after the first word are shared, and its product with the hole's regex stays small).
    with_code, bare, words, symbols, one_liners = [], [], [], [], []
    for (opens, continues, try_ok), indents in kinds.items():
        if opens:
            with_code.append(at(indents) + "(?:" + "|".join(k for k in _OPENERS if k != "elif" or k in continues)
                             + ")")
            keywords = _bare_openers(continues, try_ok)
            if keywords:
                bare.append(at(indents) + "(?:" + "|".join(keywords) + ")")
            if "except" in continues:
                with_code.append(at(indents) + "except")
                bare.append(at(indents) + "except")
        else:
            words.append(at(indents) + _word_not_in([*_NOT_FIRST, *_COMPOUND]))
            symbols.extend(indents)
            one_liners.append(at(indents) + "(?:" + "|".join(k for k in _COMPOUND if k not in _CONTINUES
                                                               or k in continues) + ")")
    out = []
    if with_code or bare:
        # a keyword that takes code: then some code (`if :` is out)
        code = rf"(?:{blank}+[^ \t\n:#]|[(\[{{'\"]){any_}*"
        starts = [f"(?:{'|'.join(with_code)}){code}"] if with_code else []
        starts += [f"(?:{'|'.join(bare)})"] if bare else []
        out.append(f"(?:{'|'.join(starts)}){blank}*:{blank}*(?:#{any_}*)?")
    if words:
        after_word, after_symbol = _rest_of_line(r"\w\n", True), _rest_of_line(r"A-Za-z_ :#\n\t", False, False)
        body = _rest_of_line(r" \t\n#", False)
        out.append(rf"(?:{'|'.join(words)})(?:{after_word})?|{at(symbols)}{after_symbol}")
        out.append(rf"(?:{'|'.join(one_liners)})[^\w\n]{any_}*:{blank}*{body}")  # `if x: y`
    commented = [shape.indent for shape in shapes if shape.comment]
    if commented:
        out.append(f"{at(commented)}#{any_}*")
    return "(?:" + "|".join(out) + ")\\n"


@dataclass(frozen=True)
class HoleLanguage:
    """What a hole may hold: `regex`, whose placeholders stand for intersections of regexes (`diffreason.constrain`'s
    `Intersections`), as `CanvasTemplate.from_regex` takes them."""

    regex: str
    intersections: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def fullmatch(self, text: str) -> bool:
        """Does `text` belong to the language? (Python's `re`, for tests and checks.)"""
        parts = dict(self.intersections)
        return all(re.fullmatch(p, text) for p in parts.get(self.regex, (self.regex,)))


SHAPE_PLACEHOLDER = chr(0xF0000)  # (Unicode's private use plane 15: no hole regex holds it)


def hole_language(ctx: HoleContext, depth: int = 4) -> HoleLanguage:
    """The hole's regex (`hole_regex`), intersected with the shape of a single whole line where the statement after
    it is known (`_line_shapes`)."""
    regex = hole_regex(ctx, depth)
    shapes = _line_shapes(ctx)
    if shapes is None or ctx.in_string:
        return HoleLanguage(regex)
    return HoleLanguage(SHAPE_PLACEHOLDER, ((SHAPE_PLACEHOLDER, (regex, _shape_regex(shapes))),))
