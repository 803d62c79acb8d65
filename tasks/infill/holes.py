"""Code with holes: the `<|hole|>` markers of a file, or a (prefix, suffix) pair as HumanEval-infilling gives it.

    parse_code("def f(x):\\n    <|hole|>\\n")      # one whole-line hole, its first line at 4 spaces
    parse_code("x = <|hole|>  # the answer\\n")     # one inline hole (inside a line: no newline)
    parse_pair(prefix, suffix)                      # one hole between them (HumanEval-infilling's layout)

The marker is `<|hole|>` (`tasks.infill.layout.HOLE`), no real code contains it; `<|hole:N|>` also bounds that hole
to at most N tokens. Every other text that begins like a marker (`<|hole` without its `|>`, a marker inside another,
`<|/hole|>`) is an `InfillInputError` naming its line and column, as are a file with no hole and a bound that is not
a positive integer.

Two kinds of hole, read off where the marker stands:

- **whole-line** — the marker alone on its line (only indentation before it, the end of the line after it): the hole
  is one or more whole lines, each ending with a newline, that replace the marker's line; its first line starts at the
  marker's indentation. A (prefix, suffix) pair whose prefix ends at a line start is whole-line too (HumanEval's
  holes are), its indentation read off the code around it (`tasks.infill.grammar`). `single_line=True` makes
  whole-line holes exactly one line (HumanEval's single-line set).
- **inline** — anywhere else: the hole is text inside one line, with no newline.

Nothing here imports torch: the command line checks a file with these before loading a model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diffreason.errors import DiffreasonError
from diffreason.tasks.infill.layout import HOLE

MARKER_START = HOLE[:-2]  # "<|hole": what every marker begins with
_MARKER = re.compile(r"<\|hole(?::([^|<>\n]{1,12}))?\|>")  # (N as written, checked to be a count by parse_code)


class InfillInputError(DiffreasonError):
    """Code, markers or tests an infill cannot take (one line that says where and why)."""


@dataclass(frozen=True)
class Hole:
    """One hole of the code: where its marker was, what it may hold."""

    index: int
    line: int  # 1-based line of the marker in the original text (0 for a (prefix, suffix) pair)
    column: int  # 1-based column of the marker
    whole_line: bool  # replaces whole lines (ends with a newline); else inside one line (no newline)
    indent: str | None  # whole-line holes from a marker: the marker's indentation, where the first line starts
    max_tokens: int | None  # `<|hole:N|>`: at most N tokens
    newline: str | None = None  # the line end of the marker's line as given (\r\n, \r, \n); None: the code's


@dataclass(frozen=True)
class InfillCode:
    """The code around its holes: `segments[i]` is the text before hole i, `segments[-1]` the text after the last.
    Lines end with `\n` inside (`\r\n` and a lone `\r` are read as Python reads source; a leading byte order mark
    is dropped); `given_segments` are the same stretches as they were given (line ends, mixed or not, and the mark
    kept), which `written` puts back around the fills; `newline` is the code's main line end, which a fill's lines
    take where its hole has none of its own (`Hole.newline`)."""

    segments: tuple[str, ...]
    holes: tuple[Hole, ...]
    newline: str = "\n"
    given_segments: tuple[str, ...] | None = None  # None: as `segments`

    def __post_init__(self):
        if len(self.segments) != len(self.holes) + 1:
            raise ValueError("an InfillCode has one more segment than holes")
        if self.given_segments is not None and len(self.given_segments) != len(self.segments):
            raise ValueError("an InfillCode's given segments are its segments as given: as many")

    def fill(self, texts) -> str:
        """The code with hole i replaced by texts[i] (holes past the texts given keep their markers)."""
        texts = list(texts)
        out = [self.segments[0]]
        for i, hole in enumerate(self.holes):
            if i < len(texts):
                out.append(texts[i])
            else:
                out.append((hole.indent or "") + HOLE + ("\n" if hole.whole_line else ""))
            out.append(self.segments[i + 1])
        return "".join(out)

    def given(self, text: str, hole: int) -> str:
        """`text`, a fill of hole `hole`, with its lines ended as the hole's line was (the code's main line end where
        the hole's line had none)."""
        newline = self.holes[hole].newline or self.newline
        return text if newline == "\n" else text.replace("\n", newline)

    def written(self, texts) -> str:
        """The code with hole i filled with texts[i], written as it was given: every character outside the holes as
        it came (line ends, a byte order mark), each fill's lines ended as its hole's line was."""
        texts = list(texts)
        if len(texts) != len(self.holes):
            raise ValueError(f"{len(self.holes)} fills needed, got {len(texts)}")
        around = self.given_segments or self.segments
        return around[0] + "".join(self.given(t, i) + around[i + 1] for i, t in enumerate(texts))

    def prefix(self, i: int, texts) -> str:
        """The code before hole i, holes before it filled with texts[:i]."""
        texts = list(texts)[:i]
        return "".join(s + t for s, t in zip(self.segments[:i], texts)) + self.segments[i]

    def suffix(self, i: int) -> str:
        """The code after hole i up to the next hole (what hole i's canvas shows: a later hole is not known yet)."""
        return self.segments[i + 1]


def _lf(text: str, bom: bool = True) -> tuple[str, list[int]]:
    """`text` with its line ends as `\n`, as Python reads source, and (`bom`: it starts a file) a leading byte order
    mark dropped; with, for each of its positions and its end, the position in `text`."""
    out, where = [], []
    i = 1 if bom and text.startswith("\ufeff") else 0
    n = len(text)
    while i < n:
        c = text[i]
        where.append(i)
        if c == "\r":
            out.append("\n")
            i += 2 if text.startswith("\r\n", i) else 1
        else:
            out.append(c)
            i += 1
    where.append(n)
    return "".join(out), where


def _newline_of(text: str) -> str:
    """The line end `text` is mostly written with (\r\n, \r or \n; \n when it has none)."""
    crlf = text.count("\r\n")
    counts = {"\r\n": crlf, "\r": text.count("\r") - crlf, "\n": text.count("\n") - crlf}
    return max(counts, key=lambda k: (counts[k], k == "\n"))


def _where(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def parse_code(text: str, max_marker_tokens: int | None = None) -> InfillCode:
    """The holes of `text`, marked with `<|hole|>` (or `<|hole:N|>`); see the module docstring."""
    if not isinstance(text, str):
        raise InfillInputError(f"the code must be text, not {type(text).__name__}")
    given, line_end = text, _newline_of(text)
    text, where = _lf(text)
    bounds = []  # (start, end) of each segment in `text`

    def add_segment(a: int, b: int) -> None:
        bounds.append((a, b))
        segments.append(text[a:b])
    for bad, what in (("<|/hole", "a closing marker"),):
        pos = text.find(bad)
        if pos >= 0:
            line, col = _where(text, pos)
            raise InfillInputError(f"line {line} column {col}: {what} {bad}...; a hole is one {HOLE} marker, "
                                   "with nothing to close")
    segments, holes = [], []
    start = 0  # where the current segment begins
    pos = text.find(MARKER_START)
    while pos >= 0:
        line, col = _where(text, pos)
        m = _MARKER.match(text, pos)
        if m is None:
            end = text.find("|>", pos)
            inner = text.find(MARKER_START, pos + 1)
            if end >= 0 and 0 <= inner < end:
                raise InfillInputError(f"line {line} column {col}: a hole marker nested in another; write each hole "
                                       f"as one {HOLE}")
            shown = text[pos: pos + 16].split("\n")[0]
            raise InfillInputError(f"line {line} column {col}: unbalanced hole marker {shown!r}: write {HOLE} "
                                   "(or <|hole:N|> for at most N tokens)")
        bound = None
        if m.group(1) is not None:
            if not (m.group(1).isascii() and m.group(1).isdecimal()):  # (-3, 2.5, ten; "٣" is no ASCII digit)
                raise InfillInputError(f"line {line} column {col}: {m.group(0)}: N must be a whole number of "
                                       "tokens, at least 1")
            bound = int(m.group(1))
            if bound < 1:
                raise InfillInputError(f"line {line} column {col}: {m.group(0)} bounds the hole to no token; give N "
                                       "of at least 1")
            if max_marker_tokens is not None and bound > max_marker_tokens:
                raise InfillInputError(f"line {line} column {col}: {m.group(0)} asks for a hole of {bound} tokens, "
                                       f"longer than the canvas allows ({max_marker_tokens})")
        line_start = text.rfind("\n", 0, pos) + 1
        before = text[line_start:pos]
        after_end = m.end()
        rest_of_line = text[after_end: (text.find("\n", after_end) if "\n" in text[after_end:] else len(text))]
        whole = before.strip(" \t") == "" and rest_of_line.strip(" \t") == ""
        if whole:
            add_segment(start, line_start)
            newline = text.find("\n", after_end)
            start = len(text) if newline < 0 else newline + 1
            ending = None if newline < 0 else given[where[newline]:where[newline + 1]]
            holes.append(Hole(len(holes), line, col, True, before, bound, ending))
        else:
            add_segment(start, pos)
            start = after_end
            holes.append(Hole(len(holes), line, col, False, None, bound))
        pos = text.find(MARKER_START, after_end)
    if not holes:
        raise InfillInputError(f"the code has no hole: mark each one with {HOLE}")
    add_segment(start, len(text))
    given_segments = tuple(given[0 if a == 0 else where[a]:where[b]] for a, b in bounds)
    return InfillCode(tuple(segments), tuple(holes), line_end, given_segments)


def parse_pair(prefix: str, suffix: str, max_tokens: int | None = None) -> InfillCode:
    """One hole between `prefix` and `suffix` (HumanEval-infilling's layout): whole-line when the prefix ends at a
    line start (its text then ends with a newline), inline otherwise."""
    for name, part in (("prefix", prefix), ("suffix", suffix)):
        if not isinstance(part, str):
            raise InfillInputError(f"the {name} must be text, not {type(part).__name__}")
        if MARKER_START in part:
            raise InfillInputError(f"the {name} holds a hole marker; give either a (prefix, suffix) pair or code with "
                                   "markers")
    newline = _newline_of(prefix + suffix)
    given = (prefix, suffix)
    prefix, suffix = _lf(prefix)[0], _lf(suffix, bom=False)[0]
    whole = prefix == "" or prefix.endswith("\n")
    ending = None
    if whole and given[0]:
        ending = "\r\n" if given[0].endswith("\r\n") else given[0][-1]
    return InfillCode((prefix, suffix), (Hole(0, 0, 0, whole, None, max_tokens, ending),), newline, given)


def read_code_file(path, keep_bom: bool = False) -> str:
    """A file's text: UTF-8, a byte order mark dropped (`keep_bom`: kept, for `parse_code`, which reads past it and
    `InfillCode.written` writes it back), or one InfillInputError saying why not."""
    from pathlib import Path

    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InfillInputError(f"{str(path)!r}: no such file") from None
    except IsADirectoryError:
        raise InfillInputError(f"{str(path)!r} is a directory, not a file") from None
    except OSError as exc:
        raise InfillInputError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8" if keep_bom else "utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InfillInputError(
            f"{str(path)!r} is not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line})") from None
    if "\x00" in text:
        raise InfillInputError(f"{str(path)!r} holds NUL bytes: not a source file")
    return text


def check_tests(tests: str, where: str = "the tests") -> None:
    """Tests are Python code run after the filled program; they must parse (checked with `ast`, never run here)."""
    import ast

    if not isinstance(tests, str):
        raise InfillInputError(f"{where} must be Python source text, not {type(tests).__name__}")
    try:
        ast.parse(tests)
    except SyntaxError as exc:
        raise InfillInputError(f"{where} do not parse: {exc.msg} (line {exc.lineno})") from None
    except ValueError as exc:  # (NUL bytes)
        raise InfillInputError(f"{where} do not parse: {exc}") from None
