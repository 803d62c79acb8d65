"""Canvas templates: what may stand at each position of the output.

A `CanvasTemplate` gives, per output position, either a fixed (clamped) token or a free position whose allowed tokens
are one of a few shared masks (`masks[mask_index[i]]`, or any token when `mask_index[i] == -1`). Templates are compact:
a Sudoku grid needs one mask (the nine digits) for 81 positions, not 81 vocabulary-sized masks. A template may be longer
than one canvas; the engine cuts it into canvases (`CanvasTemplate.canvas`) and leaves the rest of the last canvas
free (fixed to pad past a final EOS).

`CanvasConstraint` is the dense, batched form of one canvas of several templates that the sampler consumes: a
[B, C, V] allowed mask built once per canvas, so each denoising step costs one masked fill.
"""

from __future__ import annotations

import numbers
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from diffreason.constrain.compiler import Compiler
from diffreason.constrain.regex import from_python
from diffreason.constrain.slots import Slot
from diffreason.constrain.tokens import unique_rows
from diffreason.errors import TemplateError

ANY = -1  # mask_index of an unrestricted free position
FREE = -1  # fixed id of a free position


def _ids(values, what: str) -> torch.Tensor:
    """An integer tensor (a copy, flat) of `values`; TemplateError for anything else (floats were truncated)."""
    try:
        tensor = torch.as_tensor(values)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TemplateError(f"{what} must be integers: {exc}") from None
    if tensor.numel() and (tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool):
        raise TemplateError(f"{what} must be integers, not {str(tensor.dtype).removeprefix('torch.')}")
    return tensor.to(torch.long).flatten().clone()


class CanvasTemplate:
    """Fixed tokens and per-position allowed sets for an output of `len(template)` tokens."""

    def __init__(
        self,
        vocab_size: int,
        fixed: torch.Tensor | Sequence[int],
        mask_index: torch.Tensor | Sequence[int] | None = None,
        masks: torch.Tensor | None = None,
        slots: Sequence[Slot] = (),
    ):
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, numbers.Integral) or vocab_size < 1:
            raise TemplateError(f"vocab_size must be an integer of at least 1, got {vocab_size!r}")
        self.vocab_size = int(vocab_size)
        self.slots = tuple(slots)
        # the constraint it was compiled from, as a server takes it (`structured.constraint_template`): ("regex" or
        # "json_schema", the text, max_tokens or None); None for any other template (and any template made from it)
        self.source: tuple[str, str, int | None] | None = None
        self.fixed = _ids(fixed, "fixed")
        n = self.fixed.numel()
        self.mask_index = torch.full((n,), ANY, dtype=torch.long) if mask_index is None else _ids(mask_index,
                                                                                                  "mask_index")
        self.masks = (
            torch.zeros((0, self.vocab_size), dtype=torch.bool) if masks is None else torch.as_tensor(masks).bool()
        )
        self._validate()

    @classmethod
    def from_parts(cls, vocab_size: int, fixed: torch.Tensor, mask_index: torch.Tensor | None = None,
                   masks: torch.Tensor | None = None, slots: Sequence[Slot] = ()) -> "CanvasTemplate":
        """A template from parts that are consistent by construction (slot sets, token ids, other templates' tensors,
        as the constraint pipeline and the task compilers make them): no copies, no checks — the caller vouches for
        the shapes and ids (`CanvasTemplate(...)` checks them). A JSON schema's template is joined from hundreds of
        parts, where checking each one cost a fifth of the compile."""
        self = cls.__new__(cls)
        self.vocab_size, self.fixed, self.slots, self.source = vocab_size, fixed, tuple(slots), None
        self.mask_index = torch.full(fixed.shape, ANY, dtype=torch.long) if mask_index is None else mask_index
        self.masks = torch.zeros((0, vocab_size), dtype=torch.bool) if masks is None else masks
        return self

    def with_vocab(self, vocab_size: int) -> "CanvasTemplate":
        """The same template over a larger vocabulary (a model whose embedding table is padded past its tokenizer):
        the extra ids are never allowed at restricted positions, and slots commit over the tokenizer's ids."""
        if vocab_size == self.vocab_size:
            return self
        if vocab_size < self.vocab_size:
            raise TemplateError(f"cannot shrink a template over {self.vocab_size} tokens to {vocab_size}")
        pad = torch.zeros((self.masks.shape[0], vocab_size - self.vocab_size), dtype=torch.bool)
        return CanvasTemplate(vocab_size, self.fixed, self.mask_index, torch.cat([self.masks, pad], 1), self.slots)

    # -- construction -----------------------------------------------------------------------------------------------

    @classmethod
    def unconstrained(cls, length: int, vocab_size: int) -> "CanvasTemplate":
        if isinstance(length, bool) or not isinstance(length, numbers.Integral) or length < 1:
            raise TemplateError(f"a template's length must be an integer of at least 1, got {length!r}")
        return cls(vocab_size, torch.full((length,), FREE, dtype=torch.long))

    @classmethod
    def from_regex(cls, regex: str, tokenizer, length: int, intersections=(), *, python: bool = True
                   ) -> "CanvasTemplate":
        """A slot of `length` tokens holding a string of `regex`, padded with the tokenizer's pad token. `regex` is
        read as Python's `re` reads it with `re.ASCII` and matched whole (`re.fullmatch`; see
        `diffreason.constrain.regex.from_python`); `python=False` takes the pipeline's own regex text as its
        compilers write it, with `intersections`: placeholders in it standing for intersections of regexes
        (`diffreason.constrain.Intersections`). Built by the tokenizer's `diffreason.constrain.Compiler`, which caches
        it (the returned template shares its tensors: templates are never modified in place)."""
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise TemplateError(f"a regex slot's length is a number of tokens, at least 1: got {length!r}")
        if python:
            regex = from_python(regex)
        sets = Compiler.for_tokenizer(tokenizer).slot(regex, length, tuple(intersections))
        return cls.from_parts(sets.vocab_size, sets.fixed, sets.mask_index, sets.masks, (sets.slot,))

    @classmethod
    def from_positions(cls, vocab_size: int, positions: Iterable[int | Iterable[int] | None]) -> "CanvasTemplate":
        """Each position is an int (fixed token), None (any token) or an iterable of allowed token ids.

        Equal allowed sets share one mask. Token ids are ints (numpy integers and 0-d integer tensors too) in
        [0, vocab_size): a negative id, a bool (True is not token 1) or any other type is a TemplateError naming the
        position — -1 would otherwise read as "free".
        """

        def token_id(value, i: int, what: str) -> int:
            is_tensor = isinstance(value, torch.Tensor)
            integral = (isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))) or (
                is_tensor and value.ndim == 0 and not value.dtype.is_floating_point and not value.dtype.is_complex
                and value.dtype != torch.bool
            )
            if not integral:
                raise TemplateError(f"position {i} {what} {value!r}, which is not a token id (an int)")
            if not 0 <= int(value) < vocab_size:
                raise TemplateError(f"position {i} {what} token {int(value)}, outside the vocabulary [0, {vocab_size})")
            return int(value)

        if isinstance(vocab_size, (bool, np.bool_)) or not isinstance(vocab_size, (int, np.integer)) or vocab_size < 1:
            raise TemplateError(f"vocab_size must be a positive integer, got {vocab_size!r}")
        if not isinstance(positions, Iterable) or isinstance(positions, (str, bytes)):
            raise TemplateError(f"positions must be a list of positions, got {type(positions).__name__}")
        fixed, mask_index, masks, seen = [], [], [], {}
        for i, pos in enumerate(positions):
            if pos is None:
                fixed.append(FREE)
                mask_index.append(ANY)
            elif not isinstance(pos, Iterable) or isinstance(pos, (str, bytes)) or (
                isinstance(pos, torch.Tensor) and pos.ndim == 0
            ):
                fixed.append(token_id(pos, i, "fixes"))
                mask_index.append(ANY)
            else:
                key = frozenset(token_id(t, i, "allows") for t in pos)
                if not key:
                    raise TemplateError(f"position {i} has an empty allowed set")
                if key not in seen:
                    seen[key] = len(masks)
                    mask = torch.zeros(vocab_size, dtype=torch.bool)
                    mask[list(key)] = True
                    masks.append(mask)
                fixed.append(FREE)
                mask_index.append(seen[key])
        stacked = torch.stack(masks) if masks else None
        return cls(vocab_size, fixed, mask_index, stacked)

    def _validate(self) -> None:
        n, v = self.fixed.numel(), self.vocab_size
        if n == 0:
            raise TemplateError("a template needs at least one position")
        if self.mask_index.numel() != n:
            raise TemplateError(f"length mismatch: {n} positions but {self.mask_index.numel()} mask indices")
        if self.masks.ndim != 2 or self.masks.shape[1] != v:
            raise TemplateError(f"masks must have shape [K, {v}] (the vocabulary size), got {list(self.masks.shape)}")
        out = ((self.fixed < FREE) | (self.fixed >= v)).nonzero()
        if out.numel():
            i = int(out[0])
            raise TemplateError(f"position {i} fixes token {int(self.fixed[i])}, outside the vocabulary [0, {v})")
        k = self.masks.shape[0]
        bad = ((self.mask_index < ANY) | (self.mask_index >= k)).nonzero()
        if bad.numel():
            i = int(bad[0])
            raise TemplateError(f"position {i} refers to mask {int(self.mask_index[i])}, but there are {k} masks")
        empty = (~self.masks.any(dim=1)).nonzero()
        if empty.numel():
            used = (self.mask_index == int(empty[0])).nonzero()
            where = f" (used at position {int(used[0])})" if used.numel() else ""
            raise TemplateError(f"mask {int(empty[0])} allows no token{where}: an empty allowed set")
        for slot in self.slots:
            if slot.start < 0 or slot.start + slot.length > n:
                raise TemplateError(f"slot [{slot.start}, {slot.start + slot.length}) lies outside the template ({n})")
            if slot.automaton.vocab_size > v:  # (fewer: the template's was widened past the tokenizer, `with_vocab`)
                raise TemplateError("a slot's automaton is over a larger vocabulary than the template")
        both = ((self.fixed >= 0) & (self.mask_index >= 0)).nonzero()
        if both.numel():
            i = int(both[0])
            if not self.masks[self.mask_index[i], self.fixed[i]]:
                raise TemplateError(f"position {i} fixes token {int(self.fixed[i])}, which its allowed set excludes")

    # -- queries ----------------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.fixed.numel()

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(fixed, mask_index, masks) as numpy arrays sharing the tensors' memory, made once: a cached slot's
        template is joined into many schemas' templates (templates are never modified in place)."""
        arrays = self.__dict__.get("_numpy")
        if arrays is None:
            arrays = self._numpy = (self.fixed.numpy(), self.mask_index.numpy(), self.masks.numpy())
        return arrays

    def __repr__(self) -> str:
        n_fixed = int((self.fixed >= 0).sum())
        n_restricted = int(((self.fixed < 0) & (self.mask_index >= 0)).sum())
        return (
            f"CanvasTemplate(length={len(self)}, fixed={n_fixed}, restricted={n_restricted}, "
            f"free={len(self) - n_fixed - n_restricted}, masks={self.masks.shape[0]}, vocab={self.vocab_size})"
        )

    @property
    def nbytes(self) -> int:
        """Memory held (an upper bound: automata that slots share are counted once per slot)."""
        tensors = [self.fixed, self.mask_index, self.masks] + [s.backward for s in self.slots if s.backward is not None]
        return sum(t.numel() * t.element_size() for t in tensors) + sum(s.automaton.nbytes for s in self.slots)

    @property
    def is_unconstrained(self) -> bool:
        return not self.slots and bool(((self.fixed < 0) & (self.mask_index < 0)).all())

    def num_canvases(self, canvas_length: int) -> int:
        return -(-len(self) // canvas_length)

    def fill_after_end(self, eos: int | None, pad: int) -> int | None:
        """What the positions past the template's end on its last canvas hold: `pad` when its last position fixes
        EOS (what a commit turns them into anyway, so they are neither sampled nor left for a stop string to reach),
        else None (free: the output may go on)."""
        return pad if eos is not None and len(self) > 0 and int(self.fixed[-1]) == eos else None

    def ending_at_its_end(self, eos: int | None, pad: int) -> "CanvasTemplate":
        """This template with EOS kept out of every position before the last one that can hold neither `pad` nor
        EOS: an EOS there would end the output (a commit turns what follows it into pad) and drop the tokens the
        template requires after it. Itself when no position needs it; TemplateError when a position before it
        allows EOS only (fixes it, or a set of EOS alone). Made once per template (templates are never modified):
        the requests that share a template share the result, and so its mask table in a batch."""
        memo = self.__dict__.get("_ending")
        if memo is None or memo[0] != (eos, pad):
            memo = self._ending = ((eos, pad), self._without_early_eos(eos, pad))
        return memo[1]

    def _without_early_eos(self, eos: int | None, pad: int) -> "CanvasTemplate":
        if eos is None or eos == pad:
            return self
        fixed, index, masks = self.fixed, self.mask_index, self.masks

        def allows(token: int) -> torch.Tensor:
            in_mask = masks[:, token][index.clamp(min=0)] if masks.shape[0] else torch.zeros_like(fixed, dtype=bool)
            return (fixed == token) | ((fixed < 0) & ((index < 0) | in_mask))

        ends = allows(eos)
        required = (~(allows(pad) | ends)).nonzero()
        if not required.numel():
            return self
        last = int(required[-1])
        hit = ends & (torch.arange(len(self)) < last)
        if not hit.any():
            return self
        # an EOS-free copy of each allowed set used at those positions (the last kind: any token)
        kind = torch.where(index < 0, masks.shape[0], index)
        free = hit & (fixed < 0)
        kinds = torch.unique(kind[free])
        rows = torch.cat([masks, torch.ones((1, self.vocab_size), dtype=torch.bool)])[kinds]
        rows[:, eos] = False
        row_of = torch.searchsorted(kinds, kind[free])
        alone = hit & (fixed >= 0)  # (fixed there, and allowing EOS: fixed to it)
        alone[free] = ~rows.any(1)[row_of]
        if alone.any():
            i = int(alone.nonzero()[0])
            raise TemplateError(f"position {i} allows only EOS ({eos}) but position {last} after it must hold a token "
                                f"other than pad or EOS: the output would end at the EOS and lose it")
        new_index = index.clone()
        new_index[free] = masks.shape[0] + row_of
        out = CanvasTemplate.from_parts(self.vocab_size, fixed, new_index, torch.cat([masks, rows]), self.slots)
        out.source = self.source
        return out

    def allowed(self, position: int) -> torch.Tensor | None:
        """Allowed token ids at `position` (None: any token)."""
        if not -len(self) <= position < len(self):
            raise TemplateError(f"position {position} is outside the template ({len(self)} positions)")
        if self.fixed[position] >= 0:
            return self.fixed[position : position + 1].clone()
        if self.mask_index[position] < 0:
            return None
        return self.masks[self.mask_index[position]].nonzero().flatten()

    def to_positions(self) -> list[int | list[int] | None]:
        """The inverse of `from_positions` (what a client sends as `custom_params.diffreason_template`): per position
        its fixed id, None (any) or the sorted allowed ids. A template with slots (regex / schema automata) loses its
        automata this way, so it is refused: send the regex or the schema instead."""
        if self.slots:
            raise TemplateError("a template with slots (a regex or a schema) cannot be sent as positions: its automata "
                                "would be lost; send the regex or json_schema itself")
        rows = [m.nonzero().flatten().tolist() for m in self.masks]
        fixed, index = self.fixed.tolist(), self.mask_index.tolist()
        return [f if f >= 0 else (None if k < 0 else rows[k]) for f, k in zip(fixed, index)]

    def violations(self, tokens: Sequence[int] | torch.Tensor) -> list[int]:
        """Positions where `tokens` break the template (a shorter output counts its missing positions: check a
        result's `raw_tokens` against a template that ends in EOS, as `tokens` stop before the EOS)."""
        tokens = _ids(tokens, "tokens")
        n = min(len(self), tokens.numel())
        t, fixed, mi = tokens[:n], self.fixed[:n], self.mask_index[:n]
        bad = (fixed >= 0) & (t != fixed)
        restricted = (fixed < 0) & (mi >= 0)
        if restricted.any():
            ok = self.masks[mi.clamp(min=0), t.clamp(0, self.vocab_size - 1)] & (t >= 0) & (t < self.vocab_size)
            bad |= restricted & ~ok
        for slot in self.slots:
            end = slot.start + slot.length
            if end <= n and not slot.automaton.accepts(tokens[slot.start : end].tolist()):
                bad[slot.start : end] = True
        return bad.nonzero().flatten().tolist() + list(range(n, len(self)))

    def canvas(self, index: int, canvas_length: int, fill: int | None = None) -> "CanvasTemplate":
        """The part of the template on canvas `index`, padded to `canvas_length` with unrestricted positions, or with
        positions fixed to token `fill`."""
        if index < 0 or canvas_length < 1:
            raise TemplateError(f"canvas {index} of length {canvas_length}: the index must be at least 0 and the "
                                "length at least 1")
        start, stop = index * canvas_length, (index + 1) * canvas_length
        fixed = torch.full((canvas_length,), FREE if fill is None else fill, dtype=torch.long)
        mask_index = torch.full((canvas_length,), ANY, dtype=torch.long)
        part = slice(start, min(stop, len(self)))
        n = max(0, part.stop - part.start)
        fixed[:n], mask_index[:n] = self.fixed[part], self.mask_index[part]
        slots = []
        for slot in self.slots:
            if slot.start < stop and slot.start + slot.length > start:
                if slot.start < start or slot.start + slot.length > stop:
                    raise TemplateError(
                        f"slot [{slot.start}, {slot.start + slot.length}) crosses a canvas boundary "
                        f"(canvas length {canvas_length}); a value must fit in one canvas"
                    )
                slots.append(slot.shifted(-start))
        return CanvasTemplate(self.vocab_size, fixed, mask_index, self.masks, slots)

    def align_slots(self, canvas_length: int, pad: int) -> "CanvasTemplate":
        """Insert fixed pad tokens before any slot that would cross a canvas boundary (pads decode to nothing)."""
        for slot in self.slots:
            if slot.length > canvas_length:
                raise TemplateError(f"a slot of {slot.length} tokens cannot fit a canvas of {canvas_length}")
        offset = 0
        fixed, mask_index, slots = [], [], []
        cursor = 0
        for slot in sorted(self.slots, key=lambda s: s.start):
            fixed.append(self.fixed[cursor : slot.start])
            mask_index.append(self.mask_index[cursor : slot.start])
            pos = slot.start + offset
            if pos // canvas_length != (pos + slot.length - 1) // canvas_length:
                gap = canvas_length - pos % canvas_length
                fixed.append(torch.full((gap,), pad, dtype=torch.long))
                mask_index.append(torch.full((gap,), ANY, dtype=torch.long))
                offset += gap
            slots.append(slot.shifted(offset))
            cursor = slot.start
        fixed.append(self.fixed[cursor:])
        mask_index.append(self.mask_index[cursor:])
        return CanvasTemplate(self.vocab_size, torch.cat(fixed), torch.cat(mask_index), self.masks, slots)

    def __add__(self, other: "CanvasTemplate") -> "CanvasTemplate":
        return CanvasTemplate.join([self, other])

    @classmethod
    def join(cls, parts: Sequence["CanvasTemplate"]) -> "CanvasTemplate":
        """Concatenate templates in one pass (repeated `+` would copy the growing masks each time); equal masks
        are stored once (of more than two parts: `+` skips that pass)."""
        if not parts:
            raise TemplateError("a template needs at least one position")
        vocab = parts[0].vocab_size
        arrays = [part._arrays() for part in parts]
        slots, shifts, lengths = [], [], []
        offset = shift = 0
        for part, (fixed, _, masks) in zip(parts, arrays):
            if part.vocab_size != vocab:
                raise TemplateError(f"cannot join templates over vocabularies {vocab} and {part.vocab_size}")
            if part.slots:
                slots += [s.shifted(offset) for s in part.slots]
            shifts.append(shift)
            lengths.append(fixed.size)
            offset += fixed.size
            shift += masks.shape[0]
        # numpy, not torch: torch's per-call overhead, and its ops going parallel (on a busy CPU their threads wait
        # for milliseconds). Each part's mask numbers move past the masks of the parts before it (one vectorised shift)
        fixed, index, stacked = (np.concatenate(x) for x in zip(*arrays))
        moved = np.repeat(np.asarray(shifts, dtype=np.int64), lengths)
        index = np.where(index >= 0, index + moved, index)
        if len(parts) > 2 and stacked.shape[0] > 1:
            stacked, inverse = unique_rows(stacked)
            index = np.where(index >= 0, inverse[np.maximum(index, 0)], index)
        out = cls.from_parts(vocab, torch.from_numpy(fixed), torch.from_numpy(index), torch.from_numpy(stacked),
                             slots)  # (parts: checked)
        out._numpy = (fixed, index, stacked)
        return out


@dataclass
class CanvasConstraint:
    """The constraint of one canvas for a batch of rows, as the sampler consumes it: compact parts, and the dense
    allowed sets [B, C, V] expanded from them on first use (drawing noise needs only the compact parts)."""

    fixed: torch.Tensor  # [B, C] long, -1 = free
    free: torch.Tensor  # [B, C] bool
    restricted: torch.Tensor  # [B, C] bool: free, with a restricted allowed set
    masks: torch.Tensor  # [1 + K, V] bool: row 0 any token, then the batch's masks (on the constraint's device)
    table: torch.Tensor  # [K, M] long: allowed ids per mask, padded
    counts: torch.Tensor  # [K] long
    table_index: torch.Tensor  # [B, C] long index into `table` (0 where unrestricted)
    row_restricted: list[bool]

    @property
    def allowed(self) -> torch.Tensor:
        """[B, C, V] bool: the mask where restricted, a single token where fixed, any token elsewhere (expanded once,
        where the constraint lives: at V = 262,144 and C = 256 it is 67 MB per row)."""
        cached = self.__dict__.get("_allowed")
        if cached is None:
            allowed = self.masks[torch.where(self.restricted, self.table_index + 1, 0)]
            fixed = ~self.free
            if bool(fixed.any()):
                allowed &= self.free[..., None]
                b, c = fixed.nonzero(as_tuple=True)
                allowed[b, c, self.fixed[b, c]] = True
            cached = self.__dict__["_allowed"] = allowed
        return cached

    @property
    def disallowed(self) -> torch.Tensor:
        """~allowed [B, C, V], computed once (the sampler masks every step's logits with it)."""
        cached = self.__dict__.get("_disallowed")
        if cached is None:
            cached = self.__dict__["_disallowed"] = ~self.allowed
        return cached

    @classmethod
    def from_templates(
        cls, templates: Sequence[CanvasTemplate], device: torch.device | str = "cpu",
        mask_cache: "DeviceMasks | None" = None,
    ) -> "CanvasConstraint | None":
        """Stack same-length canvas templates; None when no row constrains anything.

        Built where it is used: only the templates' compact parts (fixed tokens and mask indices [C], each distinct
        mask table [K, V] once, through `mask_cache` when given) go to `device`; `allowed` is expanded there when
        first read."""
        if all(t.is_unconstrained for t in templates):
            return None
        vocab = templates[0].vocab_size
        # Templates that share a mask table (the same tensor) share its rows in the batch table.
        offsets, masks, seen, total = [], [], {}, 0
        for t in templates:
            if id(t.masks) not in seen:
                seen[id(t.masks)] = total
                masks.append(t.masks)
                total += t.masks.shape[0]
            offsets.append(seen[id(t.masks)])
        to_device = mask_cache.get if mask_cache is not None else (lambda m: m.to(device))
        all_masks = (torch.cat([to_device(m) for m in masks]) if total
                     else torch.zeros((0, vocab), dtype=torch.bool, device=device))
        fixed = torch.stack([t.fixed for t in templates]).to(device)
        mask_index = torch.stack(
            [torch.where(t.mask_index >= 0, t.mask_index + off, t.mask_index) for t, off in zip(templates, offsets)]
        ).to(device)
        free = fixed < 0
        restricted = free & (mask_index >= 0)
        counts = all_masks.sum(dim=1) if total else torch.zeros(1, dtype=torch.long, device=device)
        width = max(1, int(counts.max()) if counts.numel() else 1)
        table = torch.zeros((max(1, total), width), dtype=torch.long, device=device)
        if total:  # each mask's ids, in order, padded: ranks of the allowed ids along the vocabulary
            k, v = all_masks.nonzero(as_tuple=True)
            rank = all_masks.long().cumsum(dim=1)[k, v] - 1
            table[k, rank] = v
        counts = counts.clamp(min=1) if total else torch.ones(1, dtype=torch.long, device=device)
        return cls(
            fixed=fixed,
            free=free,
            restricted=restricted,
            masks=torch.cat([torch.ones((1, vocab), dtype=torch.bool, device=device), all_masks]),
            table=table,
            counts=counts,
            table_index=mask_index.clamp(min=0),
            row_restricted=restricted.any(dim=1).tolist(),
        )

    def rows(self, rows: torch.Tensor) -> "CanvasConstraint":
        idx = rows.tolist()
        out = CanvasConstraint(
            fixed=self.fixed[rows],
            free=self.free[rows],
            restricted=self.restricted[rows],
            masks=self.masks,
            table=self.table,
            counts=self.counts,
            table_index=self.table_index[rows],
            row_restricted=[self.row_restricted[i] for i in idx],
        )
        for name in ("_allowed", "_disallowed"):  # (what is expanded already is sliced, not expanded again)
            if name in self.__dict__:
                out.__dict__[name] = self.__dict__[name][rows]
        if "_noise_table" in self.__dict__:
            out.__dict__["_noise_table"] = self.__dict__["_noise_table"]
        return out

    def noise_table(self) -> torch.Tensor:
        """[V + K * M] long: every token id in order, then `table` flattened — so one lookup draws an unrestricted
        position (base 0, V choices), a restricted one (base V + k * M, counts[k] choices) and a fixed one (base its
        token, 1 choice) alike. Made once per constraint (its row selections share it)."""
        cached = self.__dict__.get("_noise_table")
        if cached is None:
            vocab = torch.arange(self.masks.shape[1], dtype=torch.long, device=self.table.device)
            cached = self.__dict__["_noise_table"] = torch.cat([vocab, self.table.flatten()])
        return cached

    def draw(self, u: torch.Tensor) -> torch.Tensor:
        """Map uniforms u ∈ [0, 1) [B, C] to a uniformly chosen allowed token per position."""
        counts = self.counts[self.table_index]
        slot = torch.minimum((u * counts).long(), counts - 1)
        return self.table[self.table_index, slot]


class DeviceMasks:
    """Device copies of templates' mask tables [K, V], made once per table while the table lives (a constrained
    request's masks are reused by every canvas step; a server keeps one of these per device)."""

    def __init__(self, device: torch.device | str):
        self.device = torch.device(device)
        self._copies: dict[int, tuple[weakref.ref, torch.Tensor]] = {}

    def get(self, masks: torch.Tensor) -> torch.Tensor:
        key = id(masks)
        hit = self._copies.get(key)
        if hit is not None and hit[0]() is masks:
            return hit[1]
        copy = masks.to(self.device)
        if copy is masks:  # (already there: a copy held here would keep the table alive, and its entry, for ever)
            return masks
        self._copies = {k: v for k, v in self._copies.items() if v[0]() is not None}  # (forget dead tables)
        self._copies[key] = (weakref.ref(masks), copy)
        return copy

    def __len__(self) -> int:
        return sum(1 for ref, _ in self._copies.values() if ref() is not None)
