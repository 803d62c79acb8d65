"""Stage 3 of the constraint pipeline (token level): token automata, the classes of tokens they move on, and the
tokenizer as outlines-core reads it.

A regular language becomes a token-level automaton (`diffreason.constrain.automata` builds it from a regex's character
DFA with outlines-core, or composes it from its parts' automata for a regex that keeps its structure,
`diffreason.constrain.compose`; nondeterministic where parts begin alike — everything below works on either).
On a diffusion canvas a value occupies a *fixed-length slot*: `length` positions, the value followed by pad tokens
(which decoding removes). For such a slot this module derives

- per-position allowed sets: token t may stand at position k iff some state reachable from the start in exactly k
  tokens moves on t to a state from which acceptance is reachable in exactly `length - k - 1` tokens (pads included);
- a constrained commit: the highest-scoring token sequence that is a complete path of the automaton (Viterbi over
  (position, state) on the final step's log-probabilities).

Moves are kept over classes of tokens the automaton treats alike (`TokenClasses`), found from outlines' token index;
the work above is linear in those moves, not in vocabulary × states.

Per-position sets alone are a relaxation (a sequence of individually allowed tokens need not be a path, e.g. `ab|ba`);
the commit makes the committed slot valid by construction, and the sets keep the denoising inside the slot's language
wherever position-wise constraints can.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import torch

from diffreason import limits
from diffreason.constrain.cache import BytesLRU
from diffreason.errors import TemplateError

if TYPE_CHECKING:
    from outlines_core.fsm.regex import Vocabulary


@dataclass(frozen=True, eq=False)
class TokenClasses:
    """A partition of the vocabulary into classes of tokens that an automaton treats alike: two tokens of one class
    move from every state to the same state (or from none). A JSON string's automaton over a 262k-token vocabulary
    moves on nearly every token from nearly every state, yet tells tokens apart only by their length in characters and
    whether they hold a quote, a backslash or a control character — so its moves are kept over a few dozen classes
    instead of every token (on the compile benchmark's sample: 6x fewer moves with a 492-token vocabulary)."""

    of: np.ndarray  # [V] int32: each token's class, 0..count-1
    count: int

    def __post_init__(self):  # int32: a 262k vocabulary's partition is 1 MB, and each optional member has its own
        object.__setattr__(self, "of", np.ascontiguousarray(self.of, dtype=np.int32))

    @property
    def vocab_size(self) -> int:
        return self.of.size

    @property
    def nbytes(self) -> int:
        members = self.__dict__.get("members")
        return self.of.nbytes + (0 if members is None else members[0].nbytes + members[1].nbytes)

    @cached_property
    def members(self) -> tuple[np.ndarray, np.ndarray]:
        """(indptr [count+1], tokens [V]): class c's tokens, ascending, are tokens[indptr[c]:indptr[c+1]]."""
        indptr = np.zeros(self.count + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.of, minlength=self.count), out=indptr[1:])
        return indptr, self.of.argsort(kind="stable").astype(np.int32)

    def tokens(self, c: int) -> np.ndarray:
        indptr, tokens = self.members
        return tokens[indptr[c] : indptr[c + 1]]

    @staticmethod
    def common(vocab_size: int, partitions: list["TokenClasses"], singletons=()) -> tuple["TokenClasses", list[np.ndarray]]:
        """The coarsest partition finer than every one of `partitions` that also has each token of `singletons` in a
        class of its own, and for each input partition its parent map ([count] → the input's class of each new class)."""
        if len(partitions) == 1 and not len(singletons):
            return partitions[0], [np.arange(partitions[0].count, dtype=np.int64)]
        parts = [(p.of, p.count) for p in partitions]
        singles = np.unique(np.asarray(singletons, dtype=np.int64))
        if singles.size:
            marks = np.zeros(vocab_size, dtype=np.int64)
            marks[singles] = np.arange(1, singles.size + 1)
            parts.append((marks, singles.size + 1))
        key, size = np.zeros(vocab_size, dtype=np.int64), 1
        for of, count in parts:
            if size > 2**31:  # renumber first: the product below stays within 63 bits
                _, key = np.unique(key, return_inverse=True)
                size = int(key.max()) + 1
            key, size = key * count + of, size * count
        _, first, of = np.unique(key, return_index=True, return_inverse=True)
        return TokenClasses(of.astype(np.int64), first.size), [p.of[first] for p in partitions]

    def split(self, tokens) -> tuple["TokenClasses", np.ndarray]:
        """(classes, parent): this partition with each of `tokens` in a class of its own, new classes numbered after
        the existing ones, which keep their numbers (so moves on them stay as they are); parent[r] is the class r
        was taken from. A class made only of `tokens` keeps its lowest token (no class is left empty)."""
        wanted = np.unique(np.asarray(tokens, dtype=np.int64))
        classes = self.of[wanted]
        order = classes.argsort(kind="stable")  # wanted tokens grouped by class, ascending within it
        grouped = classes[order]
        head = np.ones(grouped.size, dtype=bool)
        head[1:] = grouped[1:] != grouped[:-1]
        sizes = np.bincount(self.of, minlength=self.count)  # (not `members`: that sorts the whole vocabulary)
        whole = np.bincount(classes, minlength=self.count)[grouped] == sizes[grouped]
        keeps = np.zeros(wanted.size, dtype=bool)
        keeps[order[head & whole]] = True
        moved = wanted[~keeps]
        if not moved.size:
            return self, np.arange(self.count, dtype=np.int64)
        of = self.of.copy()
        of[moved] = np.arange(self.count, self.count + moved.size)
        return TokenClasses(of, self.count + moved.size), np.concatenate([np.arange(self.count), self.of[moved]])

    @staticmethod
    def of_moves(src: np.ndarray, tok: np.ndarray, dst: np.ndarray, vocab_size: int):
        """(classes, keep) for a deterministic automaton's moves on `vocab_size` tokens (outlines' token groups, or a
        whole vocabulary): tokens are alike when they have the same (source, target) pairs, told apart by those
        pairs' bytes (exact); the tokens that move nowhere make one class. Classes are numbered in order of their
        first token. `keep` selects the moves of one token (the lowest) per class. Only the tokens that move are
        looked at one by one (an enum's few dozen, not a 262k vocabulary)."""
        order = np.lexsort((src, tok))  # by token, then source: a token's column as one run of (source, target)
        moving, starts = np.unique(tok[order], return_index=True)
        pairs = np.ascontiguousarray(np.stack([src[order], dst[order]], axis=1))
        raw, width = pairs.tobytes(), pairs.itemsize * 2
        bounds = np.append(starts, order.size).tolist()
        signature = number_by_bytes([raw[a * width : b * width] for a, b in zip(bounds, bounds[1:])])
        heads = moving[first_appearances(signature)]  # each moving class's first token, ascending
        of = np.empty(vocab_size, dtype=np.int64)
        count = heads.size
        idle = np.ones(vocab_size, dtype=bool)
        idle[moving] = False
        if idle.any():  # the class of tokens that move nowhere takes its place in the order of first tokens
            place = int(np.searchsorted(heads, idle.argmax()))
            signature = signature + (signature >= place)
            of[idle] = place
            count += 1
        of[moving] = signature
        keep = np.zeros(vocab_size, dtype=bool)
        keep[heads] = True
        return TokenClasses(of, count), keep[tok]


def number_by_bytes(keys: list[bytes]) -> np.ndarray:
    """The byte strings `keys` numbered 0, 1, ... in order of first appearance (equal strings, equal numbers): dicts
    in C, cheaper than np.unique's sort."""
    number = {key: i for i, key in enumerate(dict.fromkeys(keys))}  # (a dict keeps first appearances in order)
    return np.fromiter(map(number.__getitem__, keys), dtype=np.int64, count=len(keys))


def number_rows(rows: np.ndarray) -> tuple[np.ndarray, int]:
    """(numbers [m], count): the rows of a 2-d array numbered 0, 1, ... in order of first appearance (equal rows,
    equal numbers), by their bytes, taken as one list in C (no Python loop per row: a vocabulary's spellings are tens
    of thousands of rows)."""
    m, n = rows.shape
    if n == 0:
        return np.zeros(m, dtype=np.int64), min(m, 1)
    rows = np.ascontiguousarray(rows)
    numbers = number_by_bytes(rows.view(np.dtype((np.void, rows.dtype.itemsize * n))).reshape(-1).tolist())
    return numbers, int(numbers.max(initial=-1)) + 1


def first_of_each(numbers: np.ndarray) -> np.ndarray:
    """The first position of each number 0..max in `numbers`."""
    return np.unique(numbers, return_index=True)[1]


def first_appearances(numbers: np.ndarray) -> np.ndarray:
    """`first_of_each` for numbers given in order of first appearance (as `number_by_bytes` gives them): where
    each is the largest so far for the first time, found without a sort."""
    if not numbers.size:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.concatenate([[True], numbers[1:] > np.maximum.accumulate(numbers)[:-1]]))


def unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows of a bool matrix in order of first appearance, each row's index among them)."""
    inverse, _ = number_rows(np.packbits(rows, axis=1))
    return rows[first_appearances(inverse)], inverse


def expand_moves(src, tok, dst, parent: np.ndarray):
    """Moves over a partition re-written over a finer one whose class r lies in the coarser class parent[r]: each
    move on a coarse class becomes one move on each of its finer classes."""
    count = int(tok.max(initial=-1)) + 1
    children = parent.argsort(kind="stable")
    sizes = np.bincount(parent, minlength=count)
    starts = np.concatenate([[0], np.cumsum(sizes)])[:-1]
    reps = sizes[tok]
    if reps.size and (reps == 1).all():
        return src, children[starts[tok]], dst
    total = int(reps.sum())
    offsets = np.arange(total) - (reps.cumsum() - reps).repeat(reps)
    return src.repeat(reps), children[starts[tok].repeat(reps) + offsets], dst.repeat(reps)


try:  # y |= A x over booleans, in C: scipy's own CSR kernels (bool data: += is OR, * is AND)
    from scipy.sparse._sparsetools import csr_matvec as _csr_matvec, csr_matvecs as _csr_matvecs
except ImportError:  # (a private module: should a scipy move it, the numpy steps below do the same work)
    _csr_matvec = _csr_matvecs = None


def _csr(rows: np.ndarray, columns: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The (row, column) pairs as a CSR matrix without data: (indptr [n_rows + 1], column indices), int32 (what
    scipy's kernels take); grouped by a stable sort, radix on 16-bit row numbers."""
    order = (rows.astype(np.uint16) if n_rows <= 2**16 else rows).argsort(kind="stable")
    indptr = np.zeros(n_rows + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
    return indptr, columns[order].astype(np.int32)


def _or_product(indptr: np.ndarray, indices: np.ndarray, x: np.ndarray) -> np.ndarray:
    """y[r] = OR of the rows x[indices[indptr[r]:indptr[r+1]]]: a boolean sparse [R, N] matrix in CSR form (int32
    indptr and column indices, no data) times a boolean [N, K] one. scipy's public product would convert both to
    numbers and check them first, several times the work on these sizes."""
    y = np.zeros((indptr.size - 1, x.shape[1]), dtype=bool)
    if _csr_matvecs is not None:
        _csr_matvecs(y.shape[0], x.shape[0], x.shape[1], indptr, indices, np.ones(indices.size, dtype=bool), x, y)
    else:
        filled = np.flatnonzero(np.diff(indptr))  # (reduceat would copy a row where a row of the matrix is empty)
        if filled.size:
            y[filled] = np.logical_or.reduceat(x[indices], indptr[filled], axis=0)
    return y


class _Sweep:
    """Rows 0, 1, ... of a reachability table: row k + 1 holds the targets of the (source, target) pairs whose
    source is in row k. Rows are computed when first asked for, in blocks of 32, and stop at a fixed point."""

    def __init__(self, first: np.ndarray, sources: np.ndarray, targets: np.ndarray):
        self.table = np.zeros((32, first.size), dtype=bool)
        self.table[0] = first
        self.sources, self.targets = sources, targets
        self.done, self.fixed = 1, False  # rows computed; row done - 1 repeats the one before it
        if _csr_matvec is not None:  # the pairs as a boolean [target, source] CSR matrix: one C call a row
            self.indptr, self.indices = _csr(targets, sources, first.size)
            self.data = np.ones(sources.size, dtype=bool)

    @property
    def nbytes(self) -> int:
        csr = (self.indptr.nbytes + self.indices.nbytes + self.data.nbytes) if hasattr(self, "indptr") else 0
        return self.table.nbytes + csr

    def _next(self, k: int) -> None:
        """Fill row k (all False) from row k - 1: 4 µs a row with numpy, 1 µs with the CSR kernel."""
        table = self.table
        if _csr_matvec is None:
            table[k, self.targets[table[k - 1, self.sources]]] = True
        else:
            n = table.shape[1]
            _csr_matvec(n, n, self.indptr, self.indices, self.data, table[k - 1], table[k])

    def rows(self, n: int) -> np.ndarray:
        table = self.table
        if table.shape[0] < n:
            table = self.table = np.concatenate([table, np.zeros((-(-n // 32) * 32 - table.shape[0], table.shape[1]),
                                                                 dtype=bool)])
        if self.done < n:
            k = self.done
            if not self.fixed:
                if _csr_matvec is None:
                    step = self._next
                else:  # (the kernel called directly: per row, the call overhead is most of the cost)
                    size, indptr, indices, data = table.shape[1], self.indptr, self.indices, self.data

                    def step(k):
                        _csr_matvec(size, size, indptr, indices, data, table[k - 1], table[k])
                before = table[k - 1].tobytes()
                while k < n:
                    step(k)
                    row = table[k].tobytes()
                    k += 1
                    if row == before:
                        self.fixed = True
                        break
                    before = row
            if self.fixed:
                table[k:] = table[k - 1]
                k = table.shape[0]
            self.done = k
        return table[:n]


@dataclass(frozen=True, eq=False)
class TokenAutomaton:
    """A deterministic automaton over token ids, kept as its moves (source state, token class, target state), sorted
    by (source, class), over a partition of the vocabulary into classes of tokens it treats alike (`TokenClasses`;
    its vocabulary is the partition's). Sparse on purpose: a real vocabulary has 262k tokens and a JSON value's
    automaton hundreds of states, so a dense [states, vocab] table would take gigabytes where the moves take
    megabytes — and over token classes, far less. Everything public speaks tokens: `step`, `moves_from`,
    `accepts`, `slot_sets`, `best_path`."""

    src: torch.Tensor  # [E] long
    tok: torch.Tensor  # [E] long: a token class
    dst: torch.Tensor  # [E] long
    accepting: torch.Tensor  # [S] bool
    initial: int
    classes: TokenClasses

    @property
    def vocab_size(self) -> int:
        return self.classes.vocab_size

    @property
    def num_classes(self) -> int:
        return self.classes.count

    @property
    def num_states(self) -> int:
        return self.accepting.numel()

    @property
    def edges(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.src, self.tok, self.dst

    @property
    def nbytes(self) -> int:
        """Memory held now: the moves, the partition, and what has been derived from them so far (`_keys`,
        `state_pairs`, the reachability tables, the padded copies). They grow with use, so the automata cache weighs an
        entry again each time it hands it out (an upper bound on what they might grow to would be several times
        what they hold, and the cache would evict what fits)."""
        held = sum(t.numel() * t.element_size() for t in (self.src, self.tok, self.dst, self.accepting))
        held += self.classes.nbytes
        derived = self.__dict__
        if "_keys" in derived:
            held += 8 * self.src.numel()
        if "state_pairs" in derived:
            sources, targets, (indptr, pairs) = derived["state_pairs"]
            held += sources.nbytes + targets.nbytes + indptr.nbytes + pairs.nbytes
        for sweep in derived.get("_reach_sweeps", ()):
            held += sweep.nbytes
        return held + sum(padded.nbytes for padded in derived.get("_padded", {}).values())

    @classmethod
    def from_moves(cls, src, tok, dst, accepting: torch.Tensor, initial: int, classes: TokenClasses) -> "TokenAutomaton":
        """From unsorted moves on the token classes of `classes`; states are 0..len(accepting)-1."""
        src, tok, dst = (np.asarray(x, dtype=np.int64) for x in (src, tok, dst))
        # numpy, not torch: torch's per-call overhead dominated on these sizes. Stable (timsort): composed moves come
        # as a few runs already sorted (each part's), which it merges in linear time
        order = (src * classes.count + tok).argsort(kind="stable")
        return cls(*(torch.from_numpy(x[order]) for x in (src, tok, dst)), torch.as_tensor(accepting), initial, classes)

    def refined(self, classes: TokenClasses, parent: np.ndarray) -> "TokenAutomaton":
        """The same automaton over a finer partition whose class r lies in this one's class parent[r]."""
        src, tok, dst = expand_moves(*(t.numpy() for t in self.edges), parent)
        return TokenAutomaton.from_moves(src, tok, dst, self.accepting, self.initial, classes)

    def with_own_classes(self, tokens) -> "TokenAutomaton":
        """The same automaton with each of `tokens` a class of its own (to add moves on them alone)."""
        classes, parent = self.classes.split(tokens)
        if classes is self.classes:
            return self
        moving = np.zeros(self.classes.count, dtype=bool)
        moving[self.tok.numpy()] = True
        if not moving[parent[self.classes.count:]].any():  # no moves to copy: only the labels change
            return dataclasses.replace(self, classes=classes)
        return self.refined(classes, parent)

    def with_padding(self, pad: int) -> "TokenAutomaton":
        """Add a pad sink: any accepting state moves on `pad` to an accepting PAD state that only takes pads.
        Kept with the automaton: slots of one value at many lengths share it and what is derived from it."""
        padded = self.__dict__.setdefault("_padded", {})  # (frozen: cached_property writes __dict__ the same way)
        if pad not in padded:
            padded[pad] = self._with_padding(pad)
        return padded[pad]

    def _with_padding(self, pad: int) -> "TokenAutomaton":
        me = self.with_own_classes([pad])
        S = me.num_states
        pad_class = int(me.classes.of[pad])
        sources = np.concatenate([me.accepting.numpy().nonzero()[0], [S]])
        # the moves stay sorted by (source, class): each pad move goes where its key belongs (no new sort; np.insert
        # does the same in a dozen numpy calls per array)
        at = me._keys.numpy().searchsorted(sources * me.num_classes + pad_class) + np.arange(sources.size)
        old = np.ones(me.src.numel() + sources.size, dtype=bool)
        old[at] = False
        src, tok, dst = (np.empty(old.size, dtype=np.int64) for _ in range(3))
        for out, t, new in ((src, me.src, sources), (tok, me.tok, pad_class), (dst, me.dst, S)):
            out[old] = t.numpy()
            out[at] = new
        return TokenAutomaton(torch.from_numpy(src), torch.from_numpy(tok), torch.from_numpy(dst),
                              torch.cat([me.accepting, torch.tensor([True])]), me.initial, me.classes)

    def step(self, state: int, token: int) -> int:
        """The state after `token` from `state`, or -1 when there is no such move (of a deterministic automaton:
        a regex's; a composed one may have several, see `accepts`)."""
        keys, c = self._keys, self.class_of(token)
        if c < 0:
            return -1
        key = state * self.num_classes + c
        i = int(torch.searchsorted(keys, key))
        return int(self.dst[i]) if i < keys.numel() and int(keys[i]) == key else -1

    def moves_from(self, state: int) -> dict[int, int]:
        """{token: next state} for every move out of `state`."""
        lo, hi = (int(torch.searchsorted(self.src, s)) for s in (state, state + 1))
        moves = zip(self.tok[lo:hi].tolist(), self.dst[lo:hi].tolist())
        return {int(t): d for c, d in moves for t in self.classes.tokens(c)}

    def class_of(self, token: int) -> int:
        """The class `token` belongs to (what the moves are on); -1 for an id outside the vocabulary."""
        if not 0 <= int(token) < self.vocab_size:
            return -1
        return int(self.classes.of[token])

    @cached_property
    def _keys(self) -> torch.Tensor:
        return self.src * self.num_classes + self.tok

    @cached_property
    def state_pairs(self) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """The moves grouped by (source, target) state pair: (sources [P], targets [P], token class → pairs as a
        boolean [classes, P] CSR matrix without data: (indptr, pair numbers)). Reachability only depends on the pairs,
        of which there are far fewer than token moves."""
        S = self.num_states
        src, tok, dst = (t.numpy() for t in self.edges)
        keys = src * S + dst
        if S * S <= 8 * keys.size + 2**16:  # a table over all pairs is cheaper than sorting the moves
            used = np.bincount(keys, minlength=S * S) > 0
            pairs = used.nonzero()[0]
            number = np.zeros(S * S, dtype=np.int64)
            number[pairs] = np.arange(pairs.size)
            inverse = number[keys]
        else:
            pairs, inverse = np.unique(keys, return_inverse=True)
        # (a composed automaton may repeat a (class, pair) entry, which an OR does not mind)
        return pairs // S, pairs % S, _csr(tok, inverse, self.num_classes)

    def slot_sets(self, length: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(allowed [L, V] bool, forward [L+1, S], backward [L+1, S]) for a slot of exactly `length` tokens.

        forward[k, s]: s reachable in k tokens; backward[k, s]: acceptance reachable from s in length - k tokens.
        numpy, not torch: these are many small operations, where torch's per-call overhead dominated.
        """
        allowed, forward, backward = self._class_sets(length)
        allowed = allowed[:, self.classes.of]  # [L, classes] → [L, V]
        return torch.from_numpy(allowed), torch.from_numpy(forward), torch.from_numpy(backward)

    def slot_masks(self, length: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(masks [R, V], index [L], backward [L+1, S]): `slot_sets`' allowed sets, each distinct one once (in order of
        first appearance) and the one of each position — told apart over token classes, before they are spread
        over the vocabulary (a mask of a 262k vocabulary is 262k bytes)."""
        allowed, _, backward = self._class_sets(length)
        masks, index = unique_rows(allowed)
        return torch.from_numpy(masks[:, self.classes.of]), torch.from_numpy(index), torch.from_numpy(backward)

    def _class_sets(self, length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`slot_sets` over token classes, as numpy arrays."""
        src, dst, class_pairs = self.state_pairs
        reached, finishing = self._reach(length)
        forward = reached[: length + 1].copy()  # (the shared tables stay private to the automaton)
        backward = np.ascontiguousarray(finishing[length::-1])  # backward[k] = finishing[length - k]
        if not (forward[0] & backward[0]).any():
            raise TemplateError(f"no text the constraint allows fits in {length} tokens")
        # position k allows the tokens of the moves from a state reachable in k tokens to one that can still finish
        # ([P, L], gathered as rows of the tables' transposes: a pair's positions are one contiguous copy)
        live = np.ascontiguousarray(forward[:-1].T)[src] & np.ascontiguousarray(backward[1:].T)[dst]
        allowed = _or_product(*class_pairs, live)  # [C, P] @ [P, L]: linear in moves
        return np.ascontiguousarray(allowed.T), forward, backward

    def _reach(self, length: int) -> tuple[np.ndarray, np.ndarray]:
        """(reached [length+1, S], finishing [length+1, S]): reached[k, s] — s is reachable from the start in exactly
        k tokens; finishing[j, s] — acceptance is reachable from s in exactly j tokens. Neither depends on a slot's
        length, so slots of one value at several lengths share them: kept with the automaton, grown on demand, each
        row computed once. Each row is a function of the row before it, so once a row repeats its predecessor every
        later row is the same (the usual case: past the value's longest spelling only the pad sink is reached, and
        every state that can finish at all can finish in any number of tokens): the sweep stops there and copies it."""
        src, dst, _ = self.state_pairs
        sweeps = self.__dict__.get("_reach_sweeps")
        if sweeps is None:
            sweeps = self.__dict__["_reach_sweeps"] = [_Sweep(self._start_row(), src, dst),
                                                       _Sweep(self.accepting.numpy(), dst, src)]
        return sweeps[0].rows(length + 1), sweeps[1].rows(length + 1)

    def _start_row(self) -> np.ndarray:
        row = np.zeros(self.num_states, dtype=bool)
        row[self.initial] = True
        return row

    def shortest_length(self, limit: int) -> int | None:
        """The fewest tokens of an accepted sequence, or None when none has at most `limit` tokens."""
        reached, _ = self._reach(limit)
        hits = np.flatnonzero((reached[: limit + 1] & self.accepting.numpy()).any(axis=1))
        return int(hits[0]) if hits.size else None

    def best_path(self, log_probs: torch.Tensor, backward: torch.Tensor | None = None) -> list[int]:
        """The complete path of len(log_probs) tokens maximising the summed log-probabilities (Viterbi). Columns past
        the automaton's vocabulary (a model's embedding rows past its tokenizer's) are never on a path."""
        return best_paths([(self, log_probs, backward)])[0]

    def accepts(self, tokens) -> bool:
        """Does some path spell `tokens` (composed automata may be nondeterministic: the set of states is followed)?"""
        keys, dst = self._keys, self.dst
        states = {self.initial}
        for t in tokens:
            c = self.class_of(t)
            if c < 0:
                return False
            wanted = torch.tensor([s * self.num_classes + c for s in states])
            lo, hi = torch.searchsorted(keys, wanted), torch.searchsorted(keys, wanted, right=True)
            states = {int(d) for a, b in zip(lo.tolist(), hi.tolist()) for d in dst[a:b].tolist()}
            if not states:
                return False
        return bool(self.accepting[list(states)].any())


PRUNED_WORK = 1 << 18  # moves × positions from which a job's Viterbi pass runs alone, pruned (`pruned_best_path`)
BEAM_WIDTH = 16  # states per position of the beam whose path bounds the pruned pass (`_beam_score`)


def best_paths(jobs: list[tuple[TokenAutomaton, torch.Tensor, torch.Tensor | None]]) -> list[list[int]]:
    """The Viterbi pass of `TokenAutomaton.best_path` for each (automaton, log_probs [L, V], backward [L+1, S] or
    None). A class scores as its best token, which stands for it on the path; a state's argmax move is the first of its
    job's moves in order; the best final state is the first of the best. Small jobs (the many slots of a JSON canvas)
    run together (`joint_best_paths`); a job of at least `PRUNED_WORK` moves × positions (a code hole's automaton has
    hundreds of thousands of moves) runs alone, pruned (`pruned_best_path`): the same paths. Raises the TemplateError
    of a job with no complete path."""
    paths: list = [None] * len(jobs)
    small = []
    for i, (automaton, log_probs, backward) in enumerate(jobs):
        if len(automaton.src) * log_probs.shape[0] >= PRUNED_WORK:
            paths[i] = pruned_best_path(automaton, log_probs, backward)
        else:
            small.append(i)
    for i, path in zip(small, joint_best_paths([jobs[i] for i in small])):
        paths[i] = path
    return paths


def pruned_best_path(automaton: TokenAutomaton, log_probs: torch.Tensor,
                     backward: torch.Tensor | None = None) -> list[int]:
    """One job of `best_paths`, pruned by bounds, with the joint pass's path. A narrow beam search (`_beam_score`:
    the `BEAM_WIDTH` best states per position, each move's target still able to finish) gives a complete path, so a
    lower bound `low` of the best score; the best class score at each position left, summed, bounds what a prefix
    can still gain (`upper[k]`). A state whose score at position k is below `low - upper[k]` is on no path as good
    as the beam's, so it is dropped, and a step only visits the moves out of the states kept (the moves are sorted by
    source). Every move into a state on a best path comes from a kept state (its score plus `upper[k]` is at least
    the best), so the argmax moves and the final state the joint pass picks are kept with it. A model that is sure of
    a path keeps a handful of states per position: 5 to 50 times faster than the joint pass on code holes' automata
    (thousands of states, 60k-650k moves). The tighter `low`, the fewer states kept: a greedy walk (a beam of one)
    was often forced onto a token the model all but rules out, and kept nearly every state (docs/engine.md)."""
    log_probs = log_probs[:, : automaton.vocab_size]
    length = log_probs.shape[0]
    if backward is None:
        backward = torch.from_numpy(automaton._class_sets(length)[2])
    finishing = backward.numpy() if isinstance(backward, torch.Tensor) else np.asarray(backward)
    lp = log_probs.double().nan_to_num(neginf=-1e30)
    class_score, class_token = (t.numpy() for t in class_scores(lp, torch.from_numpy(automaton.classes.of).long(),
                                                                 automaton.classes.count))
    src, tok, dst = automaton.src.numpy(), automaton.tok.numpy(), automaton.dst.numpy()
    states, moves = automaton.num_states, len(src)
    offsets = np.searchsorted(src, np.arange(states + 1))  # the moves out of state s: offsets[s] .. offsets[s + 1]
    upper = np.concatenate([np.cumsum(class_score.max(axis=1)[::-1])[::-1], [0.0]])
    low = _beam_score(automaton.initial, offsets, tok, dst, class_score, finishing)
    if np.isnan(upper).any():  # (NaN scores: no bound holds, nothing is pruned)
        low = float("-inf")
    slack = 1e-9 * (1.0 + abs(low) + abs(upper[0])) if np.isfinite(low) else 0.0
    score = np.full(states, -np.inf)
    score[automaton.initial] = 0.0
    kept = np.array([automaton.initial])
    back = []
    for k in range(length):
        limits.check()
        if np.isfinite(low):
            kept = kept[score[kept] >= low - upper[k] - slack]
        edge, _ = _moves_out(offsets, kept)
        edge = edge[finishing[k + 1][dst[edge]]]
        cand = score[src[edge]] + class_score[k, tok[edge]]
        finite = np.isfinite(cand)
        edge, cand = edge[finite], cand[finite]
        target = dst[edge]
        score = np.full(states, -np.inf)
        np.maximum.at(score, target, cand)
        hit = cand == score[target]
        best = np.full(states, moves, dtype=np.int64)
        np.minimum.at(best, target[hit], edge[hit])  # the first (lowest-numbered) move reaching the best score
        back.append(best)
        kept = np.unique(target)
    final = np.where(automaton.accepting.numpy(), score, -np.inf)
    state = int(final.argmax())
    if not np.isfinite(final[state]):
        raise TemplateError("no complete value fits the slot")
    tokens = []
    for k in range(length - 1, -1, -1):
        e = int(back[k][state])
        tokens.append(int(class_token[k, tok[e]]))
        state = int(src[e])
    return tokens[::-1]


def _moves_out(offsets: np.ndarray, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the numbers of every move out of `states`, state by state; how many leave each): moves sorted by source,
    those of state s numbered offsets[s] .. offsets[s + 1] - 1."""
    starts, counts = offsets[states], offsets[states + 1] - offsets[states]
    return np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum())), counts


def _beam_score(initial: int, offsets, tok, dst, class_score, finishing, width: int = BEAM_WIDTH) -> float:
    """The best score of a beam search (-inf when the slot has no complete path): at each position every move out of
    the beam's states whose target can still finish, then the `width` best targets (each at its best score) form the
    next beam. Every path it follows can finish, so its best final score is that of a complete path."""
    if not finishing[0][initial]:
        return float("-inf")
    states, scores = np.array([initial]), np.array([0.0])
    for k in range(class_score.shape[0]):
        edge, counts = _moves_out(offsets, states)
        owner = np.repeat(np.arange(states.size), counts)
        live = finishing[k + 1][dst[edge]]
        edge, owner = edge[live], owner[live]
        cand = scores[owner] + class_score[k, tok[edge]]
        order = np.argsort(-cand, kind="stable")  # best first, so np.unique's first index is a target's best
        target, cand = dst[edge][order], cand[order]
        _, first = np.unique(target, return_index=True)
        first = np.sort(first)[:width]  # (sorted positions in best-first order: the `width` best targets)
        states, scores = target[first], cand[first]
        if not states.size or not np.isfinite(scores[0]):
            return float("-inf")
    return float(scores[0])


def joint_best_paths(jobs: list[tuple[TokenAutomaton, torch.Tensor, torch.Tensor | None]]) -> list[list[int]]:
    """`best_paths` run together over the disjoint union of the automata: states, token classes and moves numbered
    one job after another, each position k a step of every job still that long (a shorter job's scores then stay as
    they are). Raises the TemplateError of the first job with no complete path."""
    if not jobs:
        return []
    parts, states, classes, moves = [], 0, 0, 0
    for automaton, log_probs, backward in jobs:
        log_probs = log_probs[:, : automaton.vocab_size]
        length = log_probs.shape[0]
        if backward is None:
            backward = torch.from_numpy(automaton._class_sets(length)[2])
        lp = log_probs.double().nan_to_num(neginf=-1e30)
        score, token = class_scores(lp, torch.from_numpy(automaton.classes.of).long(), automaton.classes.count)
        parts.append((automaton, length, backward, score, token, states, classes, moves))
        states, classes, moves = states + automaton.num_states, classes + automaton.classes.count, moves + len(
            automaton.src)
    longest = max(part[1] for part in parts)
    src = np.concatenate([a.src.numpy() + s0 for a, _, _, _, _, s0, _, _ in parts])
    tok = np.concatenate([a.tok.numpy() + c0 for a, _, _, _, _, _, c0, _ in parts])
    dst = np.concatenate([a.dst.numpy() + s0 for a, _, _, _, _, s0, _, _ in parts])
    scores = np.full((longest, classes), -np.inf)
    backward = np.zeros((longest + 1, states), dtype=bool)
    running = np.zeros((longest, states), dtype=bool)
    score = np.full(states, -np.inf)
    for a, length, bw, class_score, _, s0, c0, _ in parts:
        scores[:length, c0 : c0 + a.classes.count] = class_score.numpy()
        backward[: length + 1, s0 : s0 + a.num_states] = bw.numpy() if isinstance(bw, torch.Tensor) else bw
        running[:length, s0 : s0 + a.num_states] = True
        score[s0 + a.initial] = 0.0
    # the moves grouped by target (in move order within a target), so a target's best is one segment's reduction
    edge = np.argsort(dst, kind="stable")
    targets, starts, counts = np.unique(dst[edge], return_index=True, return_counts=True)
    from_state = src[edge]
    # per position, each move's score gain where its target can still finish (-inf elsewhere), gathered once
    gain = np.where(backward[1:, dst[edge]], scores[:, tok[edge]], -np.inf)  # [longest, E]
    back = np.full((longest, states), len(src), dtype=np.int64)  # (len(src): no move; never on a path that finishes)
    for k in range(longest):
        limits.check()
        new = np.full(states, -np.inf)
        if len(edge):  # (reduceat needs a segment)
            cand = score[from_state] + gain[k]
            best = np.maximum.reduceat(cand, starts)
            # the argmax move into each target: the first (lowest-numbered) of those reaching its best score
            hit = (cand == np.repeat(best, counts)) & np.isfinite(cand)
            back[k, targets] = np.minimum.reduceat(np.where(hit, edge, len(src)), starts)
            new[targets] = best
        score = np.where(running[k], new, score)
    paths = []
    for a, length, _, _, token, s0, c0, _ in parts:
        final = np.where(a.accepting.numpy(), score[s0 : s0 + a.num_states], -np.inf)
        state = int(final.argmax())
        if not np.isfinite(final[state]):
            raise TemplateError("no complete value fits the slot")
        token = token.numpy()
        tokens, state = [], state + s0
        for k in range(length - 1, -1, -1):
            e = int(back[k, state])
            tokens.append(int(token[k, tok[e] - c0]))
            state = int(src[e])
        paths.append(tokens[::-1])
    return paths


def class_scores(lp: torch.Tensor, of: torch.Tensor, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """([L, classes] each class's best token score, [L, classes] that token — the lowest id among equals)."""
    L, V = lp.shape
    index = of.expand(L, V)
    best = torch.full((L, count), float("-inf"), dtype=lp.dtype).scatter_reduce(1, index, lp, "amax")
    ids = torch.where(lp == best.gather(1, index), torch.arange(V).expand(L, V), V)
    token = torch.full((L, count), V, dtype=torch.long).scatter_reduce(1, index, ids, "amin")
    return best, token


class TokenizerAdapter:
    """The tokenizer interface outlines-core's index builder expects, over a transformers tokenizer (hashable), with
    what this package derives from the vocabulary: outlines' spellings, token groups per symbol partition, byte
    spellings, memoised encodings. One per `Compiler` (it owns the group cache)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.vocabulary = tokenizer.get_vocab()
        # every special token, the added ones too (image markers): decoding drops them, so none may spell a value
        self.special_tokens = set(tokenizer.all_special_tokens) | {
            t.content for t in getattr(tokenizer, "added_tokens_decoder", {}).values() if t.special
        }
        self.eos_token_id = tokenizer.eos_token_id
        self._vocabulary = None
        self._encoded: dict[str, tuple[int, ...]] = {}
        self._key = (tokenizer.name_or_path, len(self.vocabulary), tuple(sorted(self.vocabulary.items())[:50]))
        self.group_cache = BytesLRU(128 * 2**20)  # token groups by partition of the symbols (see `groups`)

    @property
    def outlines_vocabulary(self):
        """outlines-core's Rust vocabulary of this tokenizer, built on first use."""
        if self._vocabulary is None:
            from outlines_core.fsm.regex import Vocabulary

            self._vocabulary = Vocabulary.from_dict(self.reduced_vocabulary)
        return self._vocabulary

    @cached_property
    def reduced_vocabulary(self) -> dict[str, list[int]]:
        """outlines' spelling of each token ({spelling: token ids}; special and empty tokens left out)."""
        from outlines_core.fsm.regex import reduced_vocabulary

        return reduced_vocabulary(self)[0]

    @cached_property
    def symbols(self) -> tuple[list[str], list[tuple[np.ndarray, np.ndarray]], np.ndarray, list[str]]:
        """(spellings [n], buckets, spelling of each token id [V] (-1: none), symbol names): each spelling as outlines
        reads it — one symbol a character or a "\\x00XX" byte, numbered —, bucketed by length up to 1, 2, 4, 8, ...
        symbols: (spelling indices [m], their symbols [m, width] int32, padded with the number len(names), which
        names no symbol, so spellings of different lengths never read alike). A few spellings are hundreds of
        symbols long; one table per length was a dozen tables for every token grouping."""
        spellings = list(self.reduced_vocabulary)
        names: dict[str, int] = {}
        rows = [[names.setdefault(symbol, len(names)) for symbol in outlines_symbols(text)] for text in spellings]
        by_width: dict[int, list[int]] = {}
        for i, row in enumerate(rows):
            by_width.setdefault(1 << (len(row) - 1).bit_length() if row else 0, []).append(i)
        pad = len(names)
        buckets = [(np.array(ids, dtype=np.int64),
                    np.array([rows[i] + [pad] * (width - len(rows[i])) for i in ids], dtype=np.int32).reshape(len(ids),
                                                                                                              width))
                   for width, ids in sorted(by_width.items())]
        of_token = np.full(len(self.tokenizer), -1, dtype=np.int64)
        for i, text in enumerate(spellings):
            of_token[self.reduced_vocabulary[text]] = i
        return spellings, buckets, of_token, list(names)

    def groups(self, mapping: dict, anything: int, live=None) -> tuple[np.ndarray, "Vocabulary", int]:
        """Tokens grouped by the transition keys an FSM alphabet (`mapping`, `anything`: its fsm_info's) reads them
        as — tokens of one group move alike in every FSM over that alphabet: (group of each token id [V], G for
        tokens outlines leaves out), outlines' vocabulary of one token per group, whose ids are the group numbers,
        and G. `live`: the keys some state of the FSM moves on (None: all); a token holding any other key moves from
        no state, so it is left out too (a JSON string's FSM reads no byte of a multi-byte character: a BPE's
        tokens that hold one stop being thousands of groups). Kept per partition of the symbols (JSON values of one
        kind share it, whatever their keys' numbers)."""
        _, _, _, names = self.symbols
        keys = np.array([mapping.get(name, anything) for name in names], dtype=np.int64)
        dead = np.zeros(keys.size, dtype=bool) if live is None else ~np.isin(keys, np.fromiter(live, dtype=np.int64))
        keys[dead] = -1
        partition, _ = number_rows(keys[:, None])  # keys renumbered by first appearance: equal iff the partitions are
        dead_class = int(partition[dead.argmax()]) if dead.any() else -1
        return self.group_cache.get((partition.tobytes(), dead_class), lambda: self._groups(partition, dead_class),
                                    lambda g: g[0].nbytes + 100 * g[2])  # (~100 bytes a token of outlines' vocabulary)

    def _groups(self, partition: np.ndarray, dead_class: int):
        from outlines_core.fsm.regex import Vocabulary

        spellings, buckets, of_token, _ = self.symbols
        # (the padding symbol reads as -2: no key, and not the dead one)
        classes = np.append(partition, -2).astype(np.int16 if partition.max(initial=0) < 2**15 else np.int32)
        group = np.full(len(spellings), -1, dtype=np.int64)  # -1: holds a symbol no state moves on
        count = 0  # spellings in different buckets are never alike: each bucket numbers its own after the last
        for ids, table in buckets:
            rows = classes[table]
            if dead_class >= 0:
                alive = ~(rows == dead_class).any(axis=1)
                ids, rows = ids[alive], rows[alive]
            numbers, found = number_rows(rows)
            group[ids] = numbers + count
            count += found
        if count == 0:  # (no token moves anywhere: one group stands for all, so outlines' vocabulary is not empty)
            group[:] = 0
            count = 1
        spelled = np.flatnonzero(group >= 0)
        first = spelled[first_of_each(group[spelled])]
        vocabulary = Vocabulary.from_dict({spellings[i]: [g] for g, i in enumerate(first.tolist())})
        of_group = np.full(of_token.size, count, dtype=np.int64)
        has = of_token >= 0
        of_group[has] = group[of_token[has]]
        of_group[of_group < 0] = count
        return of_group, vocabulary, count

    @cached_property
    def byte_spellings(self) -> tuple[dict[bytes, list[int]], list[bytes]]:
        """Each token's bytes ({bytes: token ids}; outlines writes a byte that is no whole character as a "\\x00XX"
        symbol) and those byte strings sorted: what an enum's trie is read with (`TokenAutomata.choice`)."""
        spelled: dict[bytes, list[int]] = {}
        for text, ids in self.reduced_vocabulary.items():
            raw = b"".join(bytes.fromhex(symbol[1:]) if len(symbol) == 3 and symbol[0] == "\x00" else symbol.encode()
                           for symbol in outlines_symbols(text))
            spelled.setdefault(raw, []).extend(ids)
        return spelled, sorted(spelled)

    def encode(self, text: str) -> tuple[int, ...]:
        """Token ids of `text` (a literal: a special token's text in it, such as "<eos>", is plain text), memoised (a
        tuple: callers share it): member names recur across schemas."""
        if text not in self._encoded:
            from diffreason.tokenizer import encode_literal

            self._encoded[text] = tuple(encode_literal(self.tokenizer, text))
        return self._encoded[text]

    def convert_token_to_string(self, token: str) -> str:
        string = self.tokenizer.convert_tokens_to_string([token])
        # byte-level BPE marks a leading space with Ġ; convert_tokens_to_string already maps it back
        return string

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, TokenizerAdapter) and self.tokenizer is other.tokenizer


def outlines_symbols(text: str) -> list[str]:
    """The symbols outlines-core reads a spelling as (its get_token_transition_keys): a NUL that two more
    characters follow starts a three-character byte symbol ("\\x00C3"); every other character is itself."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\x00" and i + 2 < len(text):
            out.append(text[i : i + 3])
            i += 3
        else:
            out.append(text[i])
            i += 1
    return out
