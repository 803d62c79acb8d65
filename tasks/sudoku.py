"""Sudoku as a canvas template.

Puzzle text: 81 characters, digits for givens and `.` or `0` for blanks; whitespace, `|`, `-`, `+` and 9-line grids are
tolerated. The canvas is the 81 cells in row-major order. Tokens are *cell-aware*: "r3c7=5" (a free cell holding 5) and
"r3c7#5" (the given 5 at r3c7) are distinct tokens, so every token says which cell it belongs to. That is where the
task's inductive bias lives — the checkpoint stays a plain DiffusionGemma: the embedding table is initialised as
digit + row + column + box (+ given) vectors, and the template allows each free cell only its own nine tokens.

Also here: a verifier, an exact solver (solution count, uniqueness, difficulty as search effort), a deterministic
generator of uniquely solvable puzzles in four tiers, the training-batch sampler (on-the-fly puzzles with symmetry
augmentation) and `solve()` in two modes: `model` (the plain sampler over the template) and `verified` (cells whose
argmax breaks a row/column/box constraint are re-noised each step; a grid that breaks none stops).

Reading puzzles, the verifier and the exact solver need neither torch nor transformers (they are imported inside the
functions that use them), so the command line refuses a malformed puzzle file in a fraction of a second.
"""

from __future__ import annotations

import functools
import hashlib
import numbers
import random
import re
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from diffreason.errors import DiffreasonError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerFast

    from diffreason.canvas import CanvasTemplate

# ---- geometry -------------------------------------------------------------------------------------------------------

CELLS = 81
ROW = [i // 9 for i in range(CELLS)]
COL = [i % 9 for i in range(CELLS)]
BOX = [(i // 27) * 3 + (i % 9) // 3 for i in range(CELLS)]
PEERS = [
    sorted({j for j in range(CELLS) if j != i and (ROW[i] == ROW[j] or COL[i] == COL[j] or BOX[i] == BOX[j])})
    for i in range(CELLS)
]
UNITS = [[i for i in range(CELLS) if ROW[i] == u] for u in range(9)]
UNITS += [[i for i in range(CELLS) if COL[i] == u] for u in range(9)]
UNITS += [[i for i in range(CELLS) if BOX[i] == u] for u in range(9)]


class SudokuError(DiffreasonError):
    """A puzzle that cannot be read, or whose givens contradict each other."""


# ---- parsing and printing -------------------------------------------------------------------------------------------


def parse(text: str) -> list[int]:
    """81 cells (0 = blank) from a puzzle string; one clear SudokuError for anything else."""
    body = re.sub(r"[\s|+\-]", "", text)
    bad = sorted({ch for ch in body if ch not in "0123456789."})
    if bad:
        raise SudokuError(f"puzzle has invalid character(s) {''.join(bad)!r}; use digits 1-9 and '.' or '0' for blanks")
    if len(body) != CELLS:
        raise SudokuError(f"puzzle has {len(body)} cells, expected 81")
    cells = [0 if ch in "0." else int(ch) for ch in body]
    clash = first_conflict(cells)
    if clash is not None:
        i, j = clash
        raise SudokuError(
            f"contradictory givens: {cells[i]} at r{ROW[i] + 1}c{COL[i] + 1} and r{ROW[j] + 1}c{COL[j] + 1}"
        )
    return cells


@dataclass
class PuzzleEntry:
    """One puzzle of a file: where it starts, what was written, and its cells — or why it cannot be read."""

    line: int  # 1-based line of its (first) row
    text: str  # as written, comments stripped (a grid: its rows joined by newlines)
    cells: list[int] | None = None  # None: it cannot be read
    error: str | None = None  # why it cannot be answered (set whenever cells is None; a caller may add one)


_SEPARATORS = re.compile(r"[\s|+\-]")


def read_puzzles(data: bytes | str) -> list[PuzzleEntry]:
    """Every puzzle of a text in order, each with its line number; a bad one is an entry with an error (the message
    `parse` gives), never an exception, so it hides none of the others.

    A puzzle is one line of 81 cells, or a 9-line grid: nine consecutive rows of 9 cells, with box separators (`|`,
    `------+-------+------` rows) allowed. Blank lines separate grids. A line whose first non-blank character is `#`
    is a comment, skipped (within a grid too), and `# ...` after a puzzle is stripped; so are lines without a cell
    (digit or `.`: borders of any characters) and, outside a grid, lines of fewer than `FIELD_CELLS` cells (a
    heading such as `Grid 01`, a date, a page number, a rating, a CSV header — a line with text or a damaged row
    above nine rows of 9 cells is never their grid's first row; ten rows of 9 digits in a row are an error: one is
    not a row, but which is unclear). Nine lines of 9 characters each (besides separators) are a grid whatever they
    hold (a blank written `_` is an error naming it, not a skipped line), and so are nine rows of 9 cells each
    followed by a note (`6.5 8.3 7.9 row 1`), read without the notes. A line that holds more than a puzzle (CSV
    fields, a puzzle and its solution, a rating, a `// note`) reads its puzzle field (`puzzle_field`: the column a
    CSV header names, the field after a `puzzle` key, else the first of at least `GRID_FIELD_CELLS` cells): a
    damaged puzzle there is an error, never passed over for the solution after it. Bytes are read as UTF-8 line by
    line (a line that is not UTF-8 is an entry with an error; a byte order mark is dropped); lines end at \n, \r\n
    or \r.
    """
    if isinstance(data, str):  # (as bytes, so that lines end where they do in bytes: not at \f or \x1c)
        data = data.encode("utf-8", "surrogatepass")
    raw_lines = data.removeprefix(b"\xef\xbb\xbf").splitlines()
    entries: list[PuzzleEntry] = []
    grid: list[tuple[int, str, int]] = []  # the rows of an open grid: (line number, text, cells)

    def close_grid() -> None:
        if not grid:
            return
        first, text = grid[0][0], "\n".join(row for _, row, _ in grid)
        damaged = [(k, n, c) for k, (n, _, c) in enumerate(grid, 1) if c != 9]
        if damaged:  # (one error for the grid, naming its first damaged row)
            k, n, c = damaged[0]
            entries.append(PuzzleEntry(first, text, error=f"grid row {k} (line {n}) has {c} cells, expected 9"))
        elif len(grid) < 9:
            rows = f"{len(grid)} row{'s' if len(grid) > 1 else ''}"
            entries.append(PuzzleEntry(first, text, error=f"grid has {rows} of 9 cells, expected 9 rows"))
        else:
            entries.append(_entry(first, text))
        grid.clear()

    # (line number, text or None (not UTF-8), cells, raw bytes, where its UTF-8 breaks)
    lines: list[tuple[int, str | None, int, bytes, int]] = []
    for n, raw in enumerate(raw_lines, 1):
        if raw.lstrip().startswith(b"#"):  # a comment line, inside a grid or not
            continue
        raw = raw.split(b"#", 1)[0]
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            lines.append((n, None, 0, raw, exc.start))
            continue
        lines.append((n, line, len(_SEPARATORS.sub("", line)), raw, 0))

    def next_row_cells(i: int) -> int:
        """Cells of the next line after lines[i] that is not a separator row (0: none)."""
        for _, line, cells, _, _ in lines[i + 1:]:
            if line is None or not line or cells:
                return cells if line else 0
        return 0

    def rows_from(i: int) -> tuple[int, int]:
        """(how many rows of 9 cells follow each other from lines[i] on — lines without a cell between them skipped;
        after lines[i], a line with text (`_TEXT`) ends them —, the index of the line after the last)."""
        rows, end = 0, i
        for j in range(i, len(lines)):
            _, line, cells, _, _ = lines[j]
            if line is None or not line or cells != 9 and _CELL.search(line) or j > i and _TEXT.search(line):
                break
            if cells == 9:
                rows, end = rows + 1, j + 1
        return rows, end

    def loose_grids(i: int) -> tuple[list[tuple[int, str]], int]:
        """Grids the rules above would not read, from lines[i] on: a run of 9 (18, ...) lines, each 9 characters
        besides separators (blanks written `_`, `x`, `*`, `-`: the parser refuses them) or 9 cells before a note,
        with at least one such line. ([(line number, grid text)], the index of the line after them; [] when none.)"""
        rows, loose, end = [], False, i
        for j in range(i, len(lines)):
            n, line, cells, _, _ = lines[j]
            if not line:
                break
            if not cells:  # (a separator row)
                continue
            dashed = cells != 9 and len(re.sub(r"[\s|+]", "", line)) == 9  # (blanks written `-`)
            noted = _NOTED_ROW.fullmatch(line) if cells != 9 and not dashed else None
            if cells != 9 and not dashed and noted is None:
                break
            rows.append((n, noted.group(1) if noted else line))
            loose, end = loose or dashed or noted is not None or bool(_TEXT.search(line)), j + 1
        if not loose or not rows or len(rows) % 9:
            return [], i
        return [(rows[k][0], "\n".join(row for _, row in rows[k:k + 9])) for k in range(0, len(rows), 9)], end

    column = None  # (delimiter, index) of the puzzle's column, named by a CSV header
    skip_to = 0
    for i, (n, line, cells, raw, bad_at) in enumerate(lines):
        if i < skip_to:
            continue
        if line and not grid and (found := loose_grids(i))[0]:
            entries.extend(_entry(first, text) for first, text in found[0])
            skip_to = found[1]
            continue
        if line is None:
            close_grid()
            entries.append(PuzzleEntry(n, raw.decode("utf-8", "replace").strip(),
                                       error=f"not UTF-8 text (byte 0x{raw[bad_at]:02x} at column {bad_at + 1})"))
            continue
        if not line:
            close_grid()
            continue
        cell_count = len(_CELL.findall(line))
        if not cell_count:  # a border or a separator row, a CSV header
            column = header_column(line) or column
            continue
        row = cells == 9 or 0 < cells < 18 and (grid or abs(cells - 9) <= 3 and next_row_cells(i) == 9)
        if row and not grid and cells != 9 and rows_from(i + 1)[0] >= 9:
            row = False  # (a line above nine rows of 9 cells: a heading, a date, an id, not their grid's first row)
        if row and not grid and cells == 9:
            count, end = rows_from(i)
            if count % 9 == 1 and _TEXT.search(line):  # (a heading of 9 characters above whole grids, or none)
                row = False
            elif count % 9 == 1 and count > 1:  # (an id, or a row too many: which is not a row is unclear)
                entries.append(PuzzleEntry(n, line, error=f"{count} rows of 9 cells follow each other from here: "
                                                          "grids have 9, so one of them is not a grid's row"))
                skip_to = end
                continue
        if row:
            # a grid's row (within a grid, or just before a row of 9: one of a few cells too many or too few, damaged)
            grid.append((n, line, cells))
            if len(grid) == 9:
                close_grid()
        elif cell_count < FIELD_CELLS:  # a heading, a page number, a rating, a CSV header: not a puzzle
            close_grid()
            column = header_column(line) or column
        else:
            close_grid()
            text = puzzle_field(line, column) if cells > CELLS else line
            if text is not None:  # (None: the line holds a solution alone)
                entries.append(_entry(n, text))
    close_grid()
    return entries


FIELD_CELLS = 17  # cells (digits and `.`) a line needs to be read as a puzzle, whole or damaged; fewer: an id, a rating
GRID_FIELD_CELLS = 41  # cells a field of a longer line needs to be its puzzle (an id, a hash or a count has fewer)
_CELL = re.compile(r"[0-9.]")
_TEXT = re.compile(r"[^0-9.\s|+\-]")  # what no row of cells holds: letters, `/`, `:`, `#`...
_NOTED_ROW = re.compile(r"((?:[0-9.][ \t|+\-]*){8}[0-9.])[ \t|]*\s[^\s0-9.].*")  # a row of 9 cells, then a note
_FIELD_DELIMITERS = re.compile(r"[\s,;:=\"']+")
_PUZZLE_WORDS = {"puzzle", "puzzles", "quiz", "quizzes", "question", "questions", "problem", "problems", "grid",
                 "grids", "board", "boards", "sudoku", "sudokus", "unsolved"}
_SOLUTION_WORDS = {"solution", "solutions", "solved", "answer", "answers", "output"}
_OTHER_WORDS = _SOLUTION_WORDS | {"id", "count", "number", "num", "rating", "difficulty", "level", "clues", "givens"}


def _names_puzzle(name: str) -> bool:
    words = set(re.findall(r"[a-z]+", name.lower()))
    return bool(words & _PUZZLE_WORDS) and not words & _OTHER_WORDS


def _names_solution(name: str) -> bool:
    return bool(set(re.findall(r"[a-z]+", name.lower())) & _SOLUTION_WORDS)


def header_column(line: str) -> tuple[str, int] | None:
    """(delimiter, index) of the column a CSV header names as the puzzle's (`quizzes`, `puzzle`; not `puzzle_id`,
    `solved_grid`), or None."""
    for delimiter in (",", ";", "\t"):
        names = line.split(delimiter)
        if len(names) > 1:
            return next(((delimiter, k) for k, name in enumerate(names) if _names_puzzle(name)), None)
    return None


def puzzle_field(line: str, column: tuple[str, int] | None = None) -> str | None:
    """The puzzle of a line that holds more: the column a CSV header named (`header_column`); else, of its fields
    (delimited by white space, `,`, `;`, `:`, `=` or quotes) of at least GRID_FIELD_CELLS cells, the one after a key
    that names a puzzle (`"puzzle": ...`), else the first not after a key that names a solution — a CSV's question
    before its answer, a puzzle before its rating or note —; None when every such field is a solution's; else the
    whole line (cells written apart, one field each)."""
    if column is not None and len(fields := line.split(column[0])) > column[1]:
        return fields[column[1]].strip().strip("\"'")
    first, label, solution = None, "", False
    for part in _FIELD_DELIMITERS.split(line):
        if len(_CELL.findall(part)) >= GRID_FIELD_CELLS:
            if _names_puzzle(label):
                return part
            if _names_solution(label):
                solution = True
            elif first is None:
                first = part
            label = ""
        elif part:
            label = part
    if first is not None:
        return first
    return None if solution else line


def _entry(line: int, text: str) -> PuzzleEntry:
    try:
        return PuzzleEntry(line, text, cells=parse(text))
    except SudokuError as exc:
        return PuzzleEntry(line, text, error=str(exc))


def read_puzzle_input(puzzle: str | None, file: Path | None, option: str = "--file"
                      ) -> tuple[list[PuzzleEntry], str | None]:
    """(the puzzles given, where they come from: the file's name, 'stdin', or None for `puzzle`) — the command line's
    PUZZLE argument, its --file, or else stdin (the messages name them so); `-` for either reads stdin.

    A source with no puzzle at all is a DiffreasonError; a bad puzzle — `puzzle` itself, or one of a file's — is an
    entry with an error (`read_puzzles`), so that a file's good ones are still answered and `--json` prints a record
    for each.
    """
    if puzzle is not None and file is not None:
        raise DiffreasonError("give a PUZZLE or --file, not both")
    if puzzle is not None and puzzle.strip() == "-" or file is not None and str(file) == "-":
        puzzle = file = None  # (stdin, as the Unix convention names it)
    if puzzle is not None:
        try:
            return [PuzzleEntry(1, puzzle.strip(), cells=parse(puzzle))], None
        except SudokuError as exc:  # (--json printed no record for it, as it does for a file's: QA, 2026-12-07)
            return [PuzzleEntry(1, puzzle.strip(), error=str(exc))], None
    if file is not None:
        source = str(file)
        if not file.exists():
            raise DiffreasonError(f"{option} {source!r} does not exist")
        if file.is_dir():
            raise DiffreasonError(f"{option} {source!r} is a directory; give a file of puzzles")
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise DiffreasonError(f"cannot read {option} {source!r}: {exc.strerror or exc}") from None
    else:
        source, stdin = "stdin", sys.stdin
        try:
            interactive = stdin is not None and stdin.isatty()
        except ValueError:  # closed
            stdin = None
        if stdin is None or interactive:
            closed = " (stdin is closed)" if stdin is None else ""
            raise DiffreasonError(f"no puzzle: give PUZZLE, --file F (one per line) or puzzles on stdin{closed}")
        data = stdin.buffer.read() if hasattr(stdin, "buffer") else stdin.read()
    if isinstance(data, bytes) and b"\0" in data:
        raise DiffreasonError(f"{source} is not a text file of puzzles (it holds NUL bytes)")
    entries = read_puzzles(data)
    if not entries:
        raise DiffreasonError(f"no puzzle found in {source}" + ("" if data.strip() else ": it is empty"))
    return entries, source


def to_string(cells: Sequence[int]) -> str:
    return "".join(str(c) if c else "." for c in cells)


def to_grid(cells: Sequence[int]) -> str:
    """A 9-line grid with box separators."""
    lines = []
    for r in range(9):
        if r and r % 3 == 0:
            lines.append("------+-------+------")
        row = [str(cells[r * 9 + c]) if cells[r * 9 + c] else "." for c in range(9)]
        lines.append(" | ".join(" ".join(row[k : k + 3]) for k in (0, 3, 6)))
    return "\n".join(lines)


def first_conflict(cells: Sequence[int]) -> tuple[int, int] | None:
    for i in range(CELLS):
        if cells[i]:
            for j in PEERS[i]:
                if j > i and cells[j] == cells[i]:
                    return i, j
    return None


def verify(puzzle: Sequence[int] | str, solution: Sequence[int] | str | None) -> bool:
    """True iff `solution` is a complete valid grid that agrees with every given of `puzzle` (cells, or 81-character
    strings as `SolveResult` gives them)."""
    puzzle, solution = _as_cells(puzzle), _as_cells(solution)
    if puzzle is None or solution is None or len(solution) != CELLS or any(not 1 <= d <= 9 for d in solution):
        return False
    if any(p and p != s for p, s in zip(puzzle, solution)):
        return False
    return all(len({solution[i] for i in unit}) == 9 for unit in UNITS)


def _as_cells(grid):
    """A grid's cells: a string of 81 cells (`.` or 0 blank) read, anything else as it is (None: not a grid)."""
    if isinstance(grid, str):
        if len(grid) != CELLS or any(ch not in "0123456789." for ch in grid):
            return None
        return [0 if ch in "0." else int(ch) for ch in grid]
    return grid


# ---- exact solver ---------------------------------------------------------------------------------------------------


@dataclass
class SolveStats:
    nodes: int = 0
    guesses: int = 0  # branch points with more than one candidate (the difficulty measure)
    complete: bool = True  # False: the search stopped at its node budget, so fewer solutions may have been found


def solve_exact(cells: Sequence[int], limit: int = 2, rng: random.Random | None = None, max_nodes: int | None = None):
    """Backtracking with minimum-remaining-values; returns (solutions up to `limit`, SolveStats).

    With `rng`, digits are tried in random order (used to draw random full grids). With `max_nodes`, the search gives
    up after that many nodes (`stats.complete` is then False): generated and real puzzles need a few thousand, but a
    contrived puzzle can take this search very long.
    """
    grid = list(cells)
    rows, cols, boxes = [0] * 9, [0] * 9, [0] * 9
    for i, d in enumerate(grid):
        if d:
            bit = 1 << d
            if rows[ROW[i]] & bit or cols[COL[i]] & bit or boxes[BOX[i]] & bit:
                return [], SolveStats()
            rows[ROW[i]] |= bit
            cols[COL[i]] |= bit
            boxes[BOX[i]] |= bit
    empties = [i for i in range(CELLS) if not grid[i]]
    solutions: list[list[int]] = []
    stats = SolveStats()

    def search() -> None:
        stats.nodes += 1
        if max_nodes is not None and stats.nodes > max_nodes:
            stats.complete = False
            return
        best, best_cand, best_n = -1, 0, 10
        for i in empties:
            if grid[i]:
                continue
            cand = ~(rows[ROW[i]] | cols[COL[i]] | boxes[BOX[i]]) & 0x3FE
            n = cand.bit_count()
            if n < best_n:
                best, best_cand, best_n = i, cand, n
                if n <= 1:
                    break
        if best < 0:
            solutions.append(list(grid))
            return
        if best_n == 0:
            return
        if best_n > 1:
            stats.guesses += 1
        digits = [d for d in range(1, 10) if best_cand >> d & 1]
        if rng is not None:
            rng.shuffle(digits)
        r, c, b = ROW[best], COL[best], BOX[best]
        for d in digits:
            bit = 1 << d
            grid[best] = d
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
            search()
            rows[r] ^= bit
            cols[c] ^= bit
            boxes[b] ^= bit
            grid[best] = 0
            if len(solutions) >= limit or not stats.complete:
                return

    search()
    return solutions, stats


# Search nodes per puzzle before `solve sudoku` trusts the model alone (real puzzles need a few thousand).
EXACT_SOLVER_NODES = 200_000


def count_solutions(entries: Sequence[PuzzleEntry], max_nodes: int = EXACT_SOLVER_NODES) -> dict[int, int | None]:
    """Entry index -> its solutions by the exact solver (0, 1, or 2 for several; None when the search was cut short),
    for the readable entries; one with none gets its error here, so that no model time goes to it."""
    counts: dict[int, int | None] = {}
    for i, e in enumerate(entries):
        if e.cells is not None:
            solutions, stats = solve_exact(e.cells, limit=2, max_nodes=max_nodes)
            # (a search cut short after one solution cannot say whether another exists: not known to be unique)
            counts[i] = len(solutions) if stats.complete or len(solutions) >= 2 else None
            if counts[i] == 0:
                e.error = "puzzle has no solution (no two givens conflict, but no grid completes them)"
    return counts


def skipped_lines(source: str, entries: Sequence[PuzzleEntry], shown: int = 5) -> list[str]:
    """Warning lines for the entries of `source` that cannot be answered (their errors): the first `shown`, then how
    many more."""
    bad = [e for e in entries if e.error is not None]
    lines = [f"warning: {source} line {e.line}: {e.error} (skipped)" for e in bad[:shown]]
    if len(bad) > shown:
        lines.append(f"warning: {source}: {len(bad) - shown} more puzzles skipped")
    return lines


def solution_count(cells: Sequence[int], limit: int = 2) -> int:
    return len(solve_exact(cells, limit)[0])


def rating(cells: Sequence[int]) -> int:
    """Difficulty as search effort: guesses the exact solver makes to find the (first) solution."""
    return solve_exact(cells, limit=1)[1].guesses


UNITS_OF = [[u for u, unit in enumerate(UNITS) if i in unit] for i in range(CELLS)]


@dataclass
class Difficulty:
    """What a solver needs for a puzzle: naked and hidden singles first (the placements a person makes by looking),
    then search. `singles`: singles alone solve it; `guesses`: the exact solver's guesses on what singles leave."""

    givens: int
    naked: int  # placements by naked singles (a cell with one candidate)
    hidden: int  # placements by hidden singles (a digit with one place in a row, column or box)
    singles: bool
    guesses: int


def difficulty(cells: Sequence[int]) -> Difficulty:
    """Rate a puzzle (assumed consistent): apply naked and hidden singles until neither places a digit, then count
    the exact solver's search guesses on the rest (0 when singles solved it)."""
    grid = list(cells)
    naked = hidden = 0
    while True:
        cand = _candidates(grid)
        placed = False
        for i in range(CELLS):  # naked singles
            if not grid[i] and cand[i].bit_count() == 1:
                grid[i] = cand[i].bit_length() - 1
                naked += 1
                placed = True
        if placed:
            continue
        for unit in UNITS:  # hidden singles
            for d in range(1, 10):
                where = [i for i in unit if not grid[i] and cand[i] >> d & 1]
                if len(where) == 1 and d not in (grid[i] for i in unit):
                    grid[where[0]] = d
                    hidden += 1
                    placed = True
                    break
            if placed:
                break
        if not placed:
            break
    solved = all(grid)
    guesses = 0 if solved else solve_exact(grid, limit=1)[1].guesses
    return Difficulty(sum(1 for c in cells if c), naked, hidden, solved, guesses)


def _candidates(grid: Sequence[int]) -> list[int]:
    """Per cell a bitmask of the digits (bit d) its row, column and box still allow (0 for a filled cell)."""
    used = [0] * len(UNITS)
    for u, unit in enumerate(UNITS):
        for i in unit:
            if grid[i]:
                used[u] |= 1 << grid[i]
    return [0 if grid[i] else ~(used[a] | used[b] | used[c]) & 0x3FE for i, (a, b, c) in enumerate(UNITS_OF)]


def random_grid(rng: random.Random) -> list[int]:
    return solve_exact([0] * CELLS, limit=1, rng=rng)[0][0]


# ---- generator ------------------------------------------------------------------------------------------------------

# tier: (min givens, max givens, min guesses, max guesses); extreme puzzles are minimal (no given can be removed).
TIERS: dict[str, tuple[int, int, int, int]] = {
    "easy": (36, 45, 0, 0),
    "medium": (30, 35, 0, 10**9),
    "hard": (25, 29, 1, 10**9),
    "extreme": (17, 27, 3, 10**9),
    # minimal puzzles that naked and hidden singles do not crack and whose rest needs DIABOLICAL_GUESSES search
    # guesses or more: as hard as the public hard collections (top95: median 197 after singles; extreme: 2.5)
    "diabolical": (17, 27, 3, 10**9),
}
DIABOLICAL_GUESSES = 100

# The mix of tiers in a training stream's pool of uniquely solvable puzzles (`SudokuStream(puzzle_fraction=...)`).
TRAINING_TIERS = {"medium": 0.2, "hard": 0.45, "extreme": 0.25, "diabolical": 0.1}


@dataclass
class Puzzle:
    puzzle: list[int]
    solution: list[int]
    tier: str
    givens: int = field(init=False)
    guesses: int = 0

    def __post_init__(self):
        self.givens = sum(1 for c in self.puzzle if c)


def generate(tier: str, seed: int) -> Puzzle:
    """A uniquely solvable puzzle of `tier`, fully determined by (tier, seed)."""
    if tier not in TIERS:
        raise SudokuError(f"unknown tier {tier!r}; choose one of {', '.join(TIERS)}")
    lo, hi, min_guesses, max_guesses = TIERS[tier]
    rng = random.Random(f"{tier}:{seed}")
    while True:
        solution = random_grid(rng)
        puzzle = list(solution)
        target = lo if tier in ("extreme", "diabolical") else rng.randint(lo, hi)
        order = list(range(CELLS))
        rng.shuffle(order)
        givens = CELLS
        for i in order:
            if givens <= target:
                break
            keep = puzzle[i]
            puzzle[i] = 0
            if solution_count(puzzle) != 1:
                puzzle[i] = keep
            else:
                givens -= 1
        if not lo <= givens <= hi:
            continue
        guesses = rating(puzzle)
        if not min_guesses <= guesses <= max_guesses:
            continue
        if tier == "diabolical":  # (about 1 minimal puzzle in 80 qualifies: ~4 s each)
            rated = difficulty(puzzle)
            if rated.singles or rated.guesses < DIABOLICAL_GUESSES:
                continue
        return Puzzle(puzzle, solution, tier, guesses)


def generate_set(tier: str, n: int, seed: int = 0) -> list[Puzzle]:
    """`n` puzzles of a tier. Eval sets use seeds from 10**6 on; training never draws from this generator."""
    return [generate(tier, seed * 100_003 + k) for k in range(n)]


# ---- tokens ---------------------------------------------------------------------------------------------------------

# The special tokens come first (`diffreason.tokenizer.SPECIAL_TOKENS`: pad, eos, bos, unk and the three image
# markers); the Sudoku token ids below are baked into every Sudoku checkpoint, the embedded one included, so their
# count is a format constant here rather than read from that module (whose import pulls in transformers).
N_SPECIAL = 7
BOS_ID = 2  # the prompt of every puzzle
FREE_BASE = N_SPECIAL  # "r{r}c{c}={d}": token FREE_BASE + 9 * cell + (d - 1)
GIVEN_BASE = FREE_BASE + 9 * CELLS  # "r{r}c{c}#{d}"
VOCAB_SIZE = GIVEN_BASE + 9 * CELLS


def free_token(cell: int, digit: int) -> int:
    return FREE_BASE + 9 * cell + digit - 1


def given_token(cell: int, digit: int) -> int:
    return GIVEN_BASE + 9 * cell + digit - 1


def token_digit(token: int) -> int:
    """The digit 1-9 a cell token holds, free or given alike (GIVEN_BASE - FREE_BASE is a multiple of 9)."""
    return (token - FREE_BASE) % 9 + 1


def make_tokenizer() -> PreTrainedTokenizerFast:
    """A word-level tokenizer over the cell-aware tokens (what SGLang / transformers load with the checkpoint)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from diffreason.tokenizer import BOS, EOS, PAD, SPECIAL_TOKENS, UNK

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for cell in range(CELLS):
        for d in range(1, 10):
            vocab[f"r{ROW[cell] + 1}c{COL[cell] + 1}={d}"] = free_token(cell, d)
            vocab[f"r{ROW[cell] + 1}c{COL[cell] + 1}#{d}"] = given_token(cell, d)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, eos_token=EOS, bos_token=BOS, unk_token=UNK,
                                   add_bos_token=True)  # (BOS first, as `wrap` adds it)


def is_sudoku_model(lm) -> bool:
    """Whether a checkpoint's vocabulary starts with the cell-aware Sudoku one (tokens added after it, and embedding
    rows past the tokenizer, are allowed: templates never allow them)."""
    names = lm.tokenizer.convert_ids_to_tokens([free_token(0, 1), free_token(80, 9), GIVEN_BASE + 9 * CELLS - 1])
    return lm.vocab_size >= VOCAB_SIZE and len(lm.tokenizer) >= VOCAB_SIZE and names == ["r1c1=1", "r9c9=9", "r9c9#9"]


def check_vocabulary(lm) -> None:
    if not is_sudoku_model(lm):
        raise DiffreasonError(
            f"{lm.path or 'this model'} is not a Sudoku model (its vocabulary lacks the cell-aware Sudoku tokens)"
        )


@functools.cache
def cell_masks() -> torch.Tensor:
    """[81, V] bool: mask i allows the nine digit tokens of cell i."""
    import torch

    masks = torch.zeros((CELLS, VOCAB_SIZE), dtype=torch.bool)
    for i in range(CELLS):
        masks[i, FREE_BASE + 9 * i : FREE_BASE + 9 * i + 9] = True
    return masks


def template(cells: Sequence[int]) -> CanvasTemplate:
    """Givens fixed (as given-tokens); each blank allows only its own nine cell-aware digit tokens.

    Every Sudoku template shares one mask table, so a batch's constraint holds 81 masks, not 81 per puzzle.
    """
    import torch

    from diffreason.canvas import CanvasTemplate

    fixed = torch.full((CELLS,), -1, dtype=torch.long)
    masks = cell_masks()
    mask_index = torch.arange(CELLS)
    for i, d in enumerate(cells):
        if d:
            fixed[i] = given_token(i, d)
            mask_index[i] = -1
    return CanvasTemplate(VOCAB_SIZE, fixed, mask_index, masks)


def decode(tokens: Sequence[int]) -> list[int] | None:
    """Cells from canvas tokens; None if any position holds something other than its own cell's digit."""
    out = []
    for i, t in enumerate(tokens[:CELLS]):
        for base in (FREE_BASE, GIVEN_BASE):
            k = t - base - 9 * i
            if 0 <= k < 9:
                out.append(k + 1)
                break
        else:
            return None
    return out if len(out) == CELLS else None


def structured_embeddings(hidden: int, generator: torch.Generator, std: float = 0.02) -> torch.Tensor:
    """Initial embedding table: token (cell, digit[, given]) = digit + row + column + box (+ given) vectors.

    Cells of one row/column/box share a component, so attention can find a cell's peers from step one.
    """
    import torch

    def vecs(n):
        return torch.randn(n, hidden, generator=generator) * std

    table = vecs(VOCAB_SIZE)
    digit, row, col, box, given = vecs(9), vecs(9), vecs(9), vecs(9), vecs(1)[0]
    for cell in range(CELLS):
        base = row[ROW[cell]] + col[COL[cell]] + box[BOX[cell]]
        table[free_token(cell, 1) : free_token(cell, 9) + 1] = digit + base
        table[given_token(cell, 1) : given_token(cell, 9) + 1] = digit + base + given
    return table


# ---- training data --------------------------------------------------------------------------------------------------


class SudokuStream:
    """On-the-fly training puzzles: random full grids (a seeded pool) under random symmetries, blanks at random.

    Symmetries: digit relabelling, row permutations within bands, column permutations within stacks, band and stack
    permutations, transpose. Blank counts follow a curriculum from many givens to few.

    With `puzzle_fraction` > 0, that share of each batch are uniquely solvable puzzles (a pool drawn once from the
    generator, at seeds the eval sets never use, mostly hard and extreme), under the same symmetries, which keep a
    puzzle uniquely solvable. Random blanks at 27 givens leave many completions, so their target is one arbitrary
    completion; a unique puzzle's target follows from its givens — the deduction the eval asks for.
    """

    def __init__(self, seed: int = 0, pool_size: int = 2048, puzzle_fraction: float = 0.0,
                 puzzle_pool_size: int = 2000, progress=None):
        import torch

        if not 0.0 <= puzzle_fraction <= 1.0:
            raise SudokuError(f"puzzle_fraction must lie in [0, 1], got {puzzle_fraction}")
        self.rng = np.random.default_rng(seed)
        self.generator = torch.Generator().manual_seed(seed)  # the noise tokens' (`sft_batches`), saved with the rng
        pool_rng = random.Random(f"train-pool:{seed}")
        self.pool = np.array([random_grid(pool_rng) for _ in range(pool_size)], dtype=np.int64)  # [N, 81] 1..9
        self.puzzle_fraction = puzzle_fraction
        self.puzzles = self.puzzle_blanks = None
        if puzzle_fraction > 0:
            self.puzzles, self.puzzle_blanks = training_puzzles(puzzle_pool_size, seed, progress)

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state, "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
        if "generator" in state:  # (checkpoints before it was saved: the noise restarts, as it did then)
            self.generator.set_state(state["generator"])

    def _augment(self, grids: np.ndarray, blanks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A random symmetry per grid, applied to the grid and its blank mask (vectorised over the batch)."""
        rng, n = self.rng, len(grids)
        perm = lambda *shape: np.argsort(rng.random((n, *shape)), axis=-1)  # noqa: E731 - random permutations
        relabel = np.concatenate([np.zeros((n, 1), dtype=grids.dtype), perm(9) + 1], axis=1)
        # rows: a permutation of the bands, then one of the rows inside each band (columns likewise)
        rows = (perm(3)[:, :, None] * 3 + perm(3, 3)).reshape(n, 9)
        cols = (perm(3)[:, :, None] * 3 + perm(3, 3)).reshape(n, 9)
        source = rows[:, :, None] * 9 + cols[:, None, :]  # cell (r, c) of the result comes from cell source[r, c]
        flip = rng.random(n) < 0.5
        source[flip] = source[flip].transpose(0, 2, 1)
        source = source.reshape(n, CELLS)
        out = np.take_along_axis(relabel, np.take_along_axis(grids, source, axis=1), axis=1)
        return out, np.take_along_axis(blanks, source, axis=1)

    def blanks_range(self, progress: float) -> tuple[int, int]:
        """Curriculum: blanks from ~[10, 40] at the start to [25, 64] after 60 % of training."""
        p = min(1.0, progress / 0.6)
        hi = int(round(40 + 24 * p))
        return max(10, hi - 35), hi

    def batch(self, size: int, progress: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(solutions [B, 81] digits, blank mask [B, 81] bool)."""
        import torch

        grids = self.pool[self.rng.integers(0, len(self.pool), size)]
        lo, hi = self.blanks_range(progress)
        counts = self.rng.integers(lo, hi + 1, size)
        order = np.argsort(self.rng.random((size, CELLS)), axis=1)
        blanks = np.zeros((size, CELLS), dtype=bool)
        for k in range(size):
            blanks[k, order[k, : counts[k]]] = True
        if self.puzzles is not None:
            chosen = np.flatnonzero(self.rng.random(size) < self.puzzle_fraction)
            picks = self.rng.integers(0, len(self.puzzles), len(chosen))
            grids[chosen], blanks[chosen] = self.puzzles[picks], self.puzzle_blanks[picks]
        grids, blanks = self._augment(grids, blanks)
        return torch.from_numpy(grids), torch.from_numpy(blanks)


def training_puzzles(n: int, seed: int = 0, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """(solutions [n, 81], blank masks [n, 81]) of `n` uniquely solvable puzzles in `TRAINING_TIERS` shares, from
    negative generator seeds: `generate_set` (every eval and held-out set) only uses seeds >= 0."""
    solutions, blanks = [], []
    for tier, share in TRAINING_TIERS.items():
        for k in range(round(n * share)):
            p = generate(tier, -1 - (seed * 1_000_003 + k))
            solutions.append(p.solution)
            blanks.append([c == 0 for c in p.puzzle])
            if progress:
                progress()
    return np.array(solutions, dtype=np.int64), np.array(blanks, dtype=bool)


def grid_tokens(solutions: torch.Tensor, blanks: torch.Tensor) -> torch.Tensor:
    """[B, 81] digits → each cell's token: `r{r}c{c}={d}` where blank, `r{r}c{c}#{d}` where given."""
    import torch

    cells = torch.arange(CELLS, device=solutions.device)
    return torch.where(blanks, FREE_BASE + 9 * cells + solutions - 1, GIVEN_BASE + 9 * cells + solutions - 1)


def training_tensors(solutions: torch.Tensor, blanks: torch.Tensor, generator: torch.Generator):
    """Canvas targets, uniform noise within each cell's allowed set, and the allowed mask, for the SFT trainer."""
    import torch

    cells = torch.arange(CELLS)
    target = grid_tokens(solutions, blanks)
    random_digits = torch.randint(0, 9, solutions.shape, generator=generator)
    noise = torch.where(blanks, FREE_BASE + 9 * cells + random_digits, target)
    return target, noise


def allowed_mask(blanks: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """[B, 81, V]: blanks allow their cell's nine free tokens, givens only themselves."""
    import torch

    batch, device = blanks.shape[0], blanks.device
    allowed = torch.zeros((batch, CELLS, VOCAB_SIZE), dtype=torch.bool, device=device)
    cells = torch.arange(CELLS, device=device)
    free_ids = FREE_BASE + 9 * cells[:, None] + torch.arange(9, device=device)  # [81, 9]
    b, c = blanks.nonzero(as_tuple=True)
    allowed[b[:, None], c[:, None], free_ids[c]] = True
    b, c = (~blanks).nonzero(as_tuple=True)
    allowed[b, c, target[b, c]] = True
    return allowed


# ---- solving --------------------------------------------------------------------------------------------------------

MODES = ("model", "verified")


def conflict_mask(argmax: torch.Tensor) -> torch.Tensor:
    """[B, 81] cells whose digit (any token kind) repeats within one of their units."""
    import torch

    digits = (argmax - FREE_BASE) % 9  # free and given tokens alike: digit - 1 (GIVEN_BASE - FREE_BASE = 729)
    onehot = torch.nn.functional.one_hot(digits, 9)  # [B, 81, 9]
    units = torch.tensor(UNITS, device=argmax.device)  # [27, 9]
    per_unit = onehot[:, units].sum(dim=2)  # [B, 27, 9] digit counts per unit
    clash = torch.zeros(argmax.shape, dtype=torch.bool, device=argmax.device)
    for u in range(27):
        cells = units[u]
        clash[:, cells] |= per_unit[:, u].gather(1, digits[:, cells]) > 1
    return clash


def verified_hook(sampler):
    """Task-aware step hook: re-noise cells whose argmax breaks a constraint; a canvas with conflicts cannot stop,
    and one without stops at once: its argmax is a full grid (every blank allows only digits) with the givens fixed,
    so no conflict means a solution, which the commit (the argmax) keeps, where the model's own stop rule would
    wait until the model is also sure."""

    def hook(state, rows) -> None:
        clash = conflict_mask(state.argmax[rows])
        constraint = state.constraint.rows(rows)
        clash &= constraint.free
        solved = ~clash.any(-1) & ~state.done[rows]
        if bool(solved.any()):
            state.done[rows[solved]] = True
            state.stopped_early[rows[solved]] = True
        if not bool(clash.any()):
            return
        gens = [state.generators[int(r)] for r in rows]
        state.canvas[rows] = sampler.constrain_noise(state.canvas[rows], constraint, gens, keep=~clash)
        has_clash = clash.any(-1)
        # a conflicting grid may not stop early — but the step budget still ends it
        reopen = has_clash & state.stopped_early[rows] & (state.steps_left[rows] > 0)
        state.done[rows] = state.done[rows] & ~reopen
        state.stopped_early[rows] = state.stopped_early[rows] & ~has_clash

    return hook


@dataclass
class SolveResult:
    puzzle: str
    solution: str | None  # 81 digits, or None when the canvas is not a grid
    solved: bool  # the verifier's verdict
    steps: int  # denoising steps spent, summed over the chains (`samples`)
    mode: str  # "model" / "verified", with " ×K" when K > 1 chains ran (`mode_label`)
    seconds: float
    samples: int = 1  # chains run for this puzzle (each under its own symmetry), at most the K asked for
    voted: bool = False  # no chain's grid was accepted: the solution is the chains' per-cell vote

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def solve(
    lm,
    puzzles: Iterable[Sequence[int] | str],
    mode: str = "model",
    seed: int = 0,
    max_steps: int | None = None,
    batch_size: int = 64,
    callback=None,
    progress=None,
    engine=None,
    samples: int = 1,
) -> list[SolveResult]:
    """Solve puzzles with a Sudoku checkpoint; results in input order. `engine`: where the canvases run instead of a
    local engine over `lm` (a `diffreason.client.RemoteEngine`: model mode, the server's schedule). `samples` K > 1:
    test-time compute (`solve_batches`)."""
    results = []
    for chunk in solve_batches(lm, puzzles, mode, seed, max_steps, batch_size, callback, engine, samples):
        results += chunk
        if progress is not None:
            progress(len(chunk))
    return results


def solve_batches(
    lm,
    puzzles: Iterable[Sequence[int] | str],
    mode: str = "model",
    seed: int = 0,
    max_steps: int | None = None,
    batch_size: int = 64,
    callback=None,
    engine=None,
    samples: int = 1,
) -> Iterator[list[SolveResult]]:
    """`solve`, one batch of results at a time as each finishes (input order), so that a caller can print answers as
    they come and keep them when interrupted. Puzzle k (from 0) is drawn with seed `seed + k` whatever the batching.

    `samples` K > 1 is test-time compute with the verifier: each puzzle runs up to K chains, chain 0 as it is (the
    K = 1 run, same seed) and chain j under a random symmetry of the puzzle (`random_symmetry`, seeded by seed, puzzle
    and j), each chain's grid mapped back; the answer is the first grid the verifier accepts. Chains run in waves of
    1, 1, 2, 4, ... (`chain_waves`), each wave one batch over the puzzles no chain has solved yet, so a puzzle solved
    early costs one chain; inside a wave, a chain that finishes on an accepted grid stops its siblings at once (they
    cost the steps they took). When no chain's grid is accepted the answer is the per-cell majority of the chains'
    grids (`voted`). `steps` sums every chain's steps; `seconds` is the batch's time over its puzzles. `callback(k,
    trace)` sees every denoising step of puzzle k (k counted from 0 over all batches; with `samples` 1 only)."""
    from diffreason.engine import Engine, GenerationRequest

    if mode not in MODES:
        raise SudokuError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= MAX_SAMPLES:
        raise SudokuError(f"samples must be an integer in [1, {MAX_SAMPLES}], got {samples!r}")
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
        raise SudokuError(f"max_steps must be an integer of at least 1, got {max_steps!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise SudokuError(f"batch_size must be an integer of at least 1, got {batch_size!r}")
    grids = [parse(p if isinstance(p, str) else cells_text(p)) for p in puzzles]
    if engine is None:
        check_vocabulary(lm)
        config = lm.sampler_config if max_steps is None else lm.sampler_config.model_copy(
            update={"max_denoising_steps": max_steps}
        )
        # (a puzzle's chains of one wave run in one engine batch, however small `batch_size`: the siblings-stop
        # hook groups rows by puzzle, so a split wave would let chains run on that a sibling has settled)
        engine = Engine(lm, config, max_batch_size=max(batch_size, *chain_waves(samples)))
        bos = lm.tokenizer.bos_token_id
    elif mode != "model" or max_steps is not None or samples > 1:
        raise SudokuError("a server runs the plain sampler on its own schedule: model mode only, one sample, no step "
                          "budgets")
    else:
        bos = BOS_ID
    for start in range(0, len(grids), batch_size):
        chunk = grids[start : start + batch_size]
        t = time.perf_counter()
        backs: list[list] = [[] for _ in chunk]  # per puzzle, every chain's grid mapped back (None: not a grid)
        steps = [0] * len(chunk)
        accepted: list = [None] * len(chunk)
        first = 0
        for wave in chain_waves(samples):
            todo = [p for p in range(len(chunk)) if accepted[p] is None]
            if not todo:
                break
            chains = [(p, chain_symmetry(seed, start + p, j), chain_seed(seed, start + p, j))
                      for p in todo for j in range(first, first + wave)]
            variants = [sym.apply(chunk[p]) for p, sym, _ in chains]
            requests = [GenerationRequest([bos], template(v), seed=s, max_new_tokens=CELLS)
                        for v, (_, _, s) in zip(variants, chains)]
            outs = []
            per_batch = max(1, batch_size // wave) * wave  # whole puzzles per engine batch (the hook's groups)
            for b in range(0, len(requests), per_batch):
                hooks = [verified_hook(engine.sampler)] if mode == "verified" else []
                if wave > 1:
                    hooks.append(siblings_stop_hook(variants[b : b + per_batch], wave))
                # (the callback's request index is the puzzle's, counted over every batch)
                watch = None if callback is None or samples > 1 else (
                    lambda r, trace, base=start + b: callback(base + r, trace))
                outs += engine.generate_batch(requests[b : b + per_batch], callback=watch, step_hook=_compose(hooks))
            for (p, sym, _), out in zip(chains, outs):
                cells = decode(out.raw_tokens)
                back = None if cells is None else sym.invert(cells)
                backs[p].append(back)
                steps[p] += sum(out.steps)
                if accepted[p] is None and verify(chunk[p], back):
                    accepted[p] = back
            first += wave
        seconds = (time.perf_counter() - t) / len(chunk)
        results = []
        for p, g in enumerate(chunk):
            voted = accepted[p] is None and samples > 1
            cells = accepted[p] if accepted[p] is not None else (vote(g, backs[p]) if voted else backs[p][0])
            results.append(SolveResult(
                puzzle=to_string(g), solution=None if cells is None else "".join(map(str, cells)),
                solved=verify(g, cells), steps=steps[p], mode=mode_label(mode, samples), seconds=seconds,
                samples=len(backs[p]), voted=voted,
            ))
        yield results


def cells_text(cells) -> str:
    """A puzzle given as cells, as `parse` reads puzzles (so that it checks them alike): 0-9 each, else SudokuError."""
    cells = list(cells)
    bad = [c for c in cells if isinstance(c, bool) or not isinstance(c, numbers.Integral) or not 0 <= c <= 9]
    if bad:
        raise SudokuError(f"a puzzle's cells are digits 0-9 (0 blank), got {bad[0]!r}")
    return "".join(map(str, cells))


def chain_waves(samples: int) -> list[int]:
    """Chains per wave for up to `samples` chains: 1, 1, 2, 4, ... (each wave as many as all before it)."""
    waves, total = [1], 1
    while total < samples:
        waves.append(min(total, samples - total))
        total += waves[-1]
    return waves


MAX_SAMPLES = 256  # chains per puzzle


def mode_label(mode: str, samples: int) -> str:
    """A mode's name in every report: `model`, `verified`, `model ×K`, `verified ×K`."""
    return mode if samples == 1 else f"{mode} ×{samples}"


def chain_seed(seed: int, puzzle: int, chain: int) -> int:
    """The sampler seed of chain `chain` of puzzle `puzzle`: chain 0 is the one-sample run's `seed + puzzle`."""
    if chain == 0:
        return seed + puzzle
    digest = hashlib.sha256(f"chain:{seed}:{puzzle}:{chain}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def chain_symmetry(seed: int, puzzle: int, chain: int) -> "Symmetry":
    return IDENTITY if chain == 0 else random_symmetry(random.Random(f"symmetry:{seed}:{puzzle}:{chain}"))


@dataclass(frozen=True)
class Symmetry:
    """A validity-preserving transformation of grids: cell i of the result is cell `source[i]` of the original with
    its digit d written `relabel[d]` (0, a blank, stays 0)."""

    source: tuple[int, ...]
    relabel: tuple[int, ...]

    def apply(self, cells: Sequence[int]) -> list[int]:
        return [self.relabel[cells[s]] for s in self.source]

    def invert(self, cells: Sequence[int]) -> list[int]:
        back = [0] * 10
        for d, e in enumerate(self.relabel):
            back[e] = d
        out = [0] * CELLS
        for i, s in enumerate(self.source):
            out[s] = back[cells[i]]
        return out


IDENTITY = Symmetry(tuple(range(CELLS)), tuple(range(10)))


def random_symmetry(rng: random.Random) -> Symmetry:
    """Digit relabelling, a permutation of the bands and of the rows inside each, of the stacks and of the columns
    inside each, and a transpose half the time: the group the training stream draws from (`SudokuStream._augment`)."""

    def lines() -> list[int]:
        bands = rng.sample(range(3), 3)
        return [3 * b + r for b in bands for r in rng.sample(range(3), 3)]

    rows, cols = lines(), lines()
    source = [rows[r] * 9 + cols[c] for r in range(9) for c in range(9)]
    if rng.random() < 0.5:
        source = [source[c * 9 + r] for r in range(9) for c in range(9)]
    return Symmetry(tuple(source), (0, *rng.sample(range(1, 10), 9)))


def vote(puzzle: Sequence[int], grids: Sequence[Sequence[int] | None]) -> list[int] | None:
    """Per blank cell, the digit most chains wrote (ties: the earliest chain's); givens kept. None if no chain made a
    grid."""
    made = [g for g in grids if g is not None]
    if not made:
        return None
    out = list(puzzle)
    for i in range(CELLS):
        if out[i] == 0:
            counts: dict[int, int] = {}
            for g in made:
                counts[g[i]] = counts.get(g[i], 0) + 1
            out[i] = max(counts, key=counts.get)  # (dicts keep insertion order: the earliest chain wins ties)
    return out


def siblings_stop_hook(variants: Sequence[Sequence[int]], samples: int):
    """Step hook over a batch of puzzles × `samples` chains (row r is chain r % K of puzzle r // K, `variants[r]` its
    puzzle as that chain sees it): once a chain has finished on a grid the verifier accepts, its siblings stop."""
    settled: set[int] = set()

    def hook(state, rows) -> None:
        finished = rows[state.done[rows]]
        open_rows = [i for i, r in enumerate(finished.tolist()) if r // samples not in settled]
        if not open_rows:
            return
        finished = finished[open_rows]
        for r, tokens in zip(finished.tolist(), state.argmax[finished].tolist()):  # (one read-back per step)
            group = r // samples
            if group not in settled and verify(variants[r], decode(tokens)):
                settled.add(group)
                state.done[group * samples : (group + 1) * samples] = True

    return hook


def _compose(hooks: list):
    if not hooks:
        return None
    if len(hooks) == 1:
        return hooks[0]

    def hook(state, rows) -> None:
        for h in hooks:
            h(state, rows)

    return hook


# ---- model and training glue ----------------------------------------------------------------------------------------

MODEL_PRESETS = {
    # for tests: every code path, no skill
    "sudoku-tiny": dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
        head_dim=16, global_head_dim=16, sliding_window=128, num_experts=2, top_k_experts=1, moe_intermediate_size=16,
    ),
    # ~1.3M parameters: small enough to train for real on two CPU cores, a 6 MB checkpoint.
    "sudoku-small": dict(
        hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        head_dim=32, global_head_dim=32, sliding_window=128, num_experts=4, top_k_experts=2, moe_intermediate_size=64,
    ),
    # 6.7M parameters: trained on a GPU, shipped in bfloat16 (13 MB; 27 MB in float32) as the embedded model.
    "sudoku-base": dict(
        hidden_size=256, intermediate_size=512, num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=4,
        head_dim=32, global_head_dim=32, sliding_window=128, num_experts=4, top_k_experts=2, moe_intermediate_size=128,
    ),
}


def build_sudoku_model(preset: str = "sudoku-small", seed: int = 0):
    """A fresh DiffusionGemma for Sudoku: cell-aware vocabulary, 81-token canvas, structured embedding init."""
    import torch

    from diffreason.model import build_model

    if preset not in MODEL_PRESETS:
        raise SudokuError(f"unknown Sudoku model preset {preset!r}; choose one of {', '.join(MODEL_PRESETS)}")
    lm = build_model(dict(MODEL_PRESETS[preset], canvas_length=CELLS), tokenizer=make_tokenizer(), seed=seed)
    embed = lm.model.model.decoder.embed_tokens
    with torch.no_grad():
        embed.weight.copy_(structured_embeddings(embed.weight.shape[1], torch.Generator().manual_seed(seed)))
    return lm


def sft_batches(stream: SudokuStream, generator: torch.Generator | None = None, curriculum: bool = True,
                device="cpu"):
    """SFT batches for `diffreason.train.train`: prompt = BOS, canvas = the solution under the puzzle's template.
    The noise tokens come from `generator`, by default the stream's own (saved in its state: a resumed run goes on
    as an uninterrupted one would).

    Without `curriculum` every batch has the final blank range (for fine-tuning a model that already learnt the easy end).
    Batches are built on `device`: the allowed mask is [B, 81, V] (60 MB at batch 512), cheaper made there than moved.
    """
    import torch

    from diffreason.tokenizer import BOS, SPECIAL_TOKENS
    from diffreason.train import SFTBatch

    generator = generator if generator is not None else stream.generator

    def make(size: int, progress: float) -> SFTBatch:
        solutions, blanks = stream.batch(size, progress if curriculum else 1.0)
        target, noise = (t.to(device) for t in training_tensors(solutions, blanks, generator))
        blanks = blanks.to(device)
        bos = SPECIAL_TOKENS.index(BOS)
        return SFTBatch(
            prompt_ids=torch.full((size, 1), bos, dtype=torch.long, device=device),
            target=target,
            noise=noise,
            corruptible=blanks,
            allowed=allowed_mask(blanks, target),
        )

    return make


def heldout_evaluator(n: int = 48, tier: str = "medium", max_steps: int = 24):
    """A fixed held-out set (generator seeds no training batch uses) and a solve-rate function for training logs."""
    puzzles = generate_set(tier, n, seed=999)

    def evaluate(lm) -> dict:
        results = solve(lm, [p.puzzle for p in puzzles], mode="model", max_steps=max_steps)
        return {
            f"{tier}_solved": sum(r.solved for r in results) / len(results),
            "mean_steps": sum(r.steps for r in results) / len(results),
        }

    return evaluate
