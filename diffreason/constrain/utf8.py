"""Character FSM → byte FSM for alphabets that name non-ASCII characters (`é`, `[é-ü]`, `[\\u0080-\\U0010ffff]`).

`automata.byte_level_fsm` converts the FSMs whose alphabet names ASCII characters only; outlines-core's
`make_byte_level_fsm`, which took the others, lost characters (its move for "any other character" overwrote the
explicit move on a shared lead byte: `.?ü` never wrote `ü`, `.+é` was refused) and ran minutes on a class of a
million characters, out of reach of the compile budget. Here a state's moves on non-ASCII characters become byte
paths through a decoder shared by all states:

1. the code points U+0080..U+10FFFF (less the surrogates) are cut into ranges that one alphabet key reads (the
   unnamed ones read as `anything_else`);
2. each range becomes UTF-8 byte-range sequences (`utf8_sequences`, as regex engines compile classes: `[é-ü]` is
   `C3 [A9-BC]`);
3. bytes 0x80-0xFF are cut into classes at every range boundary, and a decoder is built over them (each node: the
   sequences still possible after the bytes read; disjoint code points make every complete path end in one range);
4. each state instantiates the decoder's nodes its moves reach, shared between states whose keys below a node
   lead to the same targets; the last byte leads to the target of the key of the character read.

`valid_utf8_only` then narrows the result as it narrows outlines' (here every path is valid UTF-8 already).
"""

from __future__ import annotations

from diffreason import limits

MAX_CODE_POINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)


def utf8_sequences(lo: int, hi: int) -> list[tuple[tuple[int, int], ...]]:
    """The code points lo..hi (none a surrogate, all at least 0x80) as UTF-8 byte-range sequences: each a tuple of
    (first byte, last byte) per position, every combination of them one code point of the range, together all."""
    out, todo = [], [(lo, hi)]
    while todo:
        lo, hi = todo.pop()
        split = next((m for m in (0x7F, 0x7FF, 0xFFFF) if lo <= m < hi), None)
        if split is not None:  # (an encoded length each)
            todo += [(split + 1, hi), (lo, split)]
            continue
        n = len(chr(lo).encode())
        for i in range(1, n):  # (the last i bytes must cover all 64**i values, or be cut where they do not)
            m = (1 << (6 * i)) - 1
            if lo & ~m != hi & ~m:
                if lo & m:
                    todo += [((lo | m) + 1, hi), (lo, lo | m)]
                    break
                if hi & m != m:
                    todo += [(hi & ~m, hi), (lo, (hi & ~m) - 1)]
                    break
        else:
            out.append(tuple(zip(chr(lo).encode(), chr(hi).encode())))
    return out


def _ranges(mapping: dict, other) -> list[tuple[int, int, object]]:
    """(lo, hi, key) over U+0080..U+10FFFF less the surrogates: named characters by their key, the rest `other`."""
    named = sorted((ord(s), k) for s, k in mapping.items() if isinstance(s, str) and len(s) == 1 and ord(s) >= 0x80)
    out: list[list] = []
    at = 0x80
    for n, (cp, key) in enumerate(named):
        if not n % 4096:
            limits.check()
        if cp > at:
            out.append([at, cp - 1, other])
        if out and out[-1][2] == key and out[-1][1] == cp - 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp, key])
        at = cp + 1
    if at <= MAX_CODE_POINT:
        out.append([at, MAX_CODE_POINT, other])
    low, high = SURROGATES
    cut = []
    for lo, hi, key in out:  # (no UTF-8 text holds a surrogate)
        cut += [(a, b, key) for a, b in ((lo, min(hi, low - 1)), (max(lo, high + 1), hi)) if a <= b]
    return cut


def byte_level_fsm(fsm):
    """The byte FSM of a character FSM whose alphabet may name non-ASCII characters, over outlines' symbols (ASCII
    characters as themselves, byte B >= 0x80 as "\\x00BB"); see the module docstring."""
    from interegular.fsm import anything_else
    from outlines_core.fsm.regex import BetterAlphabet, BetterFSM, byte_symbol

    mapping = fsm.alphabet._symbol_mapping
    other = mapping[anything_else]
    ranges = _ranges(mapping, other)
    sequences = [(seq, key) for lo, hi, key in ranges for seq in utf8_sequences(lo, hi)]
    limits.check()
    # byte classes: 0x80..0xFF cut at every range's ends
    cuts = sorted({0x80, 0x100} | {b for seq, _ in sequences for a, z in seq for b in (a, z + 1)})
    classes = list(zip(cuts, cuts[1:]))  # [first, past the last)
    base = max(mapping.values()) + 1
    symbols = {s: k for s, k in mapping.items() if not (isinstance(s, str) and len(s) == 1 and ord(s) >= 0x80)}
    for c, (a, z) in enumerate(classes):
        symbols.update(dict.fromkeys(map(byte_symbol, range(a, z)), base + c))
    # the decoder: node (depth, sequences still possible) → per class, a child node or a completed key
    start = (0, tuple(range(len(sequences))))
    decoder: dict[tuple, dict[int, tuple]] = {}
    todo = [start]
    while todo:
        node = todo.pop()
        if node in decoder:
            continue
        limits.check()
        depth, alive = node
        row = decoder[node] = {}
        for c, (a, z) in enumerate(classes):
            fits = tuple(i for i in alive if sequences[i][0][depth][0] <= a and z - 1 <= sequences[i][0][depth][1])
            if not fits:
                continue
            if depth + 1 == len(sequences[fits[0]][0]):  # (disjoint code points: one sequence ends here)
                row[base + c] = ("key", sequences[fits[0]][1])
            else:
                child = (depth + 1, fits)
                row[base + c] = ("node", child)
                todo.append(child)
    # the keys each node's characters are read as (its leaves below): a state descends only where one of them moves
    below: dict[tuple, frozenset] = {}
    for node in sorted(decoder, key=lambda node: -node[0]):  # (deepest first: a child's set is there before)
        below[node] = frozenset().union(*(
            {what} if kind == "key" else below[what] for kind, what in decoder[node].values()))
    n = len(fsm.states)
    moves = {s: dict(fsm.map.get(s, {})) for s in range(n)}
    copies: dict[tuple, int] = {}  # (decoder node, its keys' targets) → its state, shared by the states alike there

    def follow(targets: dict, node: tuple) -> dict:
        """The byte moves from `node` for a row whose non-ASCII characters of key k lead to targets[k]."""
        nonlocal n
        row = {}
        for symbol, (kind, what) in decoder[node].items():
            if kind == "key":
                if what in targets:
                    row[symbol] = targets[what]
                continue
            mine = tuple(sorted(((k, t) for k, t in targets.items() if k in below[what]), key=str))
            if not mine:  # (its characters all lead nowhere from here: no move)
                continue
            state = copies.get((what, mine))
            if state is None:
                limits.check()
                state = copies[(what, mine)] = n
                n += 1
                moves[state] = follow(dict(mine), what)
            row[symbol] = state
        return row

    keys = frozenset(key for _, key in sequences)
    for s in range(len(fsm.states)):
        targets = {k: t for k, t in fsm.map.get(s, {}).items() if k in keys}
        if targets:
            moves[s].update(follow(targets, start))
    return BetterFSM(alphabet=BetterAlphabet(symbols), states=range(n), initial=fsm.initial, finals=fsm.finals,
                     map=moves, __no_validation__=True)
