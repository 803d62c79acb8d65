"""The uniform-state renoise sampler, with constraints.

One implementation, shared by the local engine and the SGLang plugin: `RenoiseSampler.step(logits, state)` takes the
model's logits for the active canvases and advances their `DenoiseState` by one denoising step:

1. temperature T = t_min + (t_max - t_min) * steps_left / N (linear, N..1);
2. disallowed tokens are masked to -inf *before* any statistic, so entropies, samples, argmax and the
   self-conditioning signal all live inside the allowed sets;
3. per-position entropy of the tempered distribution; an `AcceptanceRule` picks positions (entropy bound);
4. accepted positions take a sample, all others are re-noised uniformly *within their allowed set*;
   fixed positions are clamped and excluded from acceptance and stop statistics;
5. a `StopRule` decides per canvas (stable argmax + confident); the argmax canvas is what gets committed.

The numerics follow transformers' `EntropyBoundSampler` / `StableAndConfidentStoppingCriteria`; with
`draws="reference"` so do the random draws (a multinomial sample at every position, randint noise), so an
unconstrained canvas reproduces `model.generate` token for token. `draws="sglang"` follows SGLang's Gemma4Renoise
stream, so the server plugin reproduces upstream exactly on unconstrained requests. Each canvas draws from its own
generator, so a request's draws never depend on what else shares its batch.

`draws="fast"` samples the same distributions at a fraction of the cost (`_FastPlan`): statistics only over the free
positions and, where every free position is restricted to a small set, only over the allowed ids (Sudoku: 9 of 1,465
tokens); a sample only where a position is accepted (inverse CDF); and its random numbers from a counter-based
generator (splitmix64 of the row's key, step and position, `counter_uniforms`), one uniform per position and step for
the whole batch at once. A row's key is drawn from its own generator when its canvas starts, so its draws still never
depend on its batch.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Literal, Protocol

import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from diffreason.canvas import CanvasConstraint, CanvasTemplate
from diffreason.constrain.slots import best_paths
from diffreason.errors import ConfigError


MIN_TEMPERATURE = 1e-6  # the lowest temperature a schedule may reach


class SamplerConfig(BaseModel):
    """Renoise sampler settings; the defaults are DiffusionGemma's released generation_config."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_denoising_steps: int = Field(48, ge=1, description="denoising steps per canvas at most")
    entropy_bound: float = Field(0.1, gt=0, allow_inf_nan=False, description="entropy budget of the accepted set per "
                                 "step")
    t_max: float = Field(0.8, ge=0, allow_inf_nan=False, description="temperature at the first step")
    t_min: float = Field(0.4, ge=0, allow_inf_nan=False, description="temperature the schedule falls towards")
    stability_threshold: int = Field(1, ge=0, description="argmax canvas unchanged for this many steps to stop")
    confidence_threshold: float = Field(0.005, ge=0, allow_inf_nan=False, description="mean entropy below this to "
                                        "stop; 0 disables")
    draws: Literal["reference", "fast", "sglang"] = Field(
        "reference",
        description="'reference': transformers' random stream (a sample at every position, token-identical to "
        "model.generate); 'fast': the same distributions from a counter-based stream, statistics over the allowed "
        "sets, samples only where accepted (inverse CDF) — the cheapest exact draws; "
        "'sglang': SGLang Gemma4Renoise's stream (exponential race at every position), as the server plugin uses. "
        "A choice made at run time: a checkpoint does not keep it (transformers' generation config, which holds the "
        "other fields, refuses unknown keys), so a loaded model draws 'reference' until told otherwise",
    )

    @field_validator("max_denoising_steps", "stability_threshold", mode="before")
    @classmethod
    def _not_bool(cls, value):  # (pydantic reads True as 1)
        if isinstance(value, bool):
            raise ValueError(f"an integer, not {value!r}")
        return value

    @model_validator(mode="after")
    def _schedule(self) -> "SamplerConfig":
        if self.t_max <= self.t_min:
            raise ValueError(f"t_max ({self.t_max}) must be greater than t_min ({self.t_min})")
        lowest = self.t_min + (self.t_max - self.t_min) / self.max_denoising_steps
        if lowest < MIN_TEMPERATURE:  # (below it logits / T leave float32's range: NaN statistics, and fast draws'
            # finite mask of -1e30 no longer keeps disallowed tokens out)
            raise ValueError(f"the schedule's last temperature, t_min + (t_max - t_min) / max_denoising_steps = "
                             f"{lowest:.3g}, must be at least {MIN_TEMPERATURE:g}")
        return self

    def temperature(self, steps_left: torch.Tensor) -> torch.Tensor:
        """Per-canvas temperature for int32 `steps_left` (N..1): float32 arithmetic as transformers does, or
        SGLang's (a float64 value rounded once) for `draws="sglang"`."""
        if self.draws == "sglang":
            return torch.tensor(
                [self.t_min + (self.t_max - self.t_min) * (int(s) / self.max_denoising_steps) for s in steps_left],
                dtype=torch.float32, device=steps_left.device,
            )
        return self.t_min + (self.t_max - self.t_min) * (steps_left / self.max_denoising_steps)


# --------------------------------------------------------------------------------------------------------------------
# Swappable rules


class AcceptanceRule(Protocol):
    def __call__(self, entropy: torch.Tensor, free: torch.Tensor | None) -> torch.Tensor:
        """entropy [B, C] → accepted [B, C] (bool). `free` marks non-fixed positions (None: all free)."""


@dataclass(frozen=True)
class EntropyBoundAcceptance:
    """Accept the lowest-entropy positions while sum(H) - max(H) <= bound; the lowest is always accepted.

    Fixed positions count as entropy 0: they consume no budget and never displace the lowest free position
    (its running sum is still 0), and they are clamped anyway.
    """

    bound: float = 0.1

    def __post_init__(self):  # (a negative or NaN bound accepted no position ever: QA, 2026-12-07)
        if isinstance(self.bound, bool) or not isinstance(self.bound, numbers.Real) or not self.bound > 0 or \
                not math.isfinite(self.bound):
            raise ConfigError(f"EntropyBoundAcceptance bound must be a finite number above 0, got {self.bound!r}")

    def __call__(self, entropy: torch.Tensor, free: torch.Tensor | None) -> torch.Tensor:
        if free is not None:
            entropy = entropy.masked_fill(~free, 0.0)
        sorted_entropy, order = torch.sort(entropy, dim=-1)
        selected = torch.cumsum(sorted_entropy, dim=-1) - sorted_entropy <= self.bound
        return torch.zeros_like(selected).scatter(-1, order, selected)


class StopRule(Protocol):
    def init_history(self, batch: int, length: int, device: torch.device) -> torch.Tensor: ...

    def __call__(
        self, history: torch.Tensor, argmax: torch.Tensor, mean_entropy: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """→ (stop [B] bool, updated history)."""


@dataclass(frozen=True)
class StableAndConfidentStop:
    """Stop when the argmax canvas equals each of the last `stability` argmax canvases and mean entropy < threshold."""

    stability: int = 1
    confidence: float = 0.005

    def __post_init__(self):
        if isinstance(self.stability, bool) or not isinstance(self.stability, numbers.Integral) or self.stability < 0:
            raise ConfigError(f"StableAndConfidentStop stability must be an integer of at least 0, got "
                              f"{self.stability!r}")
        if isinstance(self.confidence, bool) or not isinstance(self.confidence, numbers.Real) or \
                not self.confidence >= 0 or not math.isfinite(self.confidence):
            raise ConfigError(f"StableAndConfidentStop confidence must be a finite number of at least 0, got "
                              f"{self.confidence!r}")

    def init_history(self, batch: int, length: int, device: torch.device) -> torch.Tensor:
        return torch.full((self.stability, batch, length), -1, dtype=torch.long, device=device)

    def __call__(self, history, argmax, mean_entropy):
        if self.stability == 0:
            stable = torch.ones(argmax.shape[0], dtype=torch.bool, device=argmax.device)
        else:
            stable = (history == argmax[None]).all(dim=-1).all(dim=0)
            history = torch.cat([history[1:], argmax[None]], dim=0)
        return stable & (mean_entropy < self.confidence), history


# --------------------------------------------------------------------------------------------------------------------
# State


@dataclass
class DenoiseState:
    """Everything that changes while a batch of canvases denoises. Row b is one canvas of one request."""

    canvas: torch.Tensor  # [B, C] current noisy canvas, fed to the model
    argmax: torch.Tensor  # [B, C] argmax of the last step (what gets committed)
    history: torch.Tensor  # [S, B, C] recent argmax canvases for the stop rule
    steps_left: torch.Tensor  # [B] int32, N..1 while running
    steps_taken: torch.Tensor  # [B] int32 decoder passes so far
    done: torch.Tensor  # [B] bool
    stopped_early: torch.Tensor  # [B] bool: stopped by the stop rule, not by the step budget
    constraint: CanvasConstraint | None  # batched masks; None = unconstrained
    generators: list[torch.Generator]
    # [B, C, V] tempered (masked) logits of the last step; fast draws update it in place where a canvas is constrained
    self_conditioning: torch.Tensor | None = None
    mean_entropy: torch.Tensor | None = None  # [B] last step's mean entropy over free positions
    keys: torch.Tensor | None = None  # [B] int64: each row's counter-stream key (fast draws; drawn from its generator)
    uniforms: tuple[int, torch.Tensor] | None = None  # fast draws: (first counter, [B, W, C] uniforms of W steps)
    plans: dict = field(default_factory=dict, repr=False)  # fast draws: `_FastPlan` per set of active rows
    # fast draws with the free logits handed over (`RenoiseSampler.step`): (flat positions [N], masked logits [N, V],
    # their softmax [N, V]) not yet written into self_conditioning; the next forward reads the softmax as it is
    pending: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = field(default=None, repr=False)

    @property
    def batch_size(self) -> int:
        return self.canvas.shape[0]

    def settle(self) -> None:
        """Write the pending self-conditioning logits into `self_conditioning` (before anything else reads it)."""
        if self.pending is not None:
            items, masked, _ = self.pending
            sc = self.self_conditioning
            sc.view(-1, sc.shape[-1]).index_copy_(0, items, masked.to(sc.dtype))
            self.pending = None

    def active_rows(self) -> torch.Tensor:
        return (~self.done).nonzero().flatten()


@dataclass
class StepOutput:
    rows: torch.Tensor  # which rows of the state this step advanced
    accepted: torch.Tensor  # [b, C] bool
    mean_entropy: torch.Tensor  # [b]
    stopped: torch.Tensor  # [b] bool: finished at this step
    # [b, C, V] float32 tempered, masked probabilities of this step (reference and sglang draws; None with fast draws,
    # which compute them only where positions are free, over the allowed sets)
    probs: torch.Tensor | None = None


# --------------------------------------------------------------------------------------------------------------------
# Fast draws: a counter-based random stream, the first maximum, and where a step's work lies


MASKED_OUT = -1e30  # a dense group's bias at disallowed tokens: softmax gives them 0, as -inf would, and 0 × it is 0
_GOLDEN = 0x9E3779B97F4A7C15 - 2**64  # splitmix64's increment and multipliers, as int64 (products wrap mod 2**64)
_MIX1 = 0xBF58476D1CE4E5B9 - 2**64
_MIX2 = 0x94D049BB133111EB - 2**64


def row_keys(generators: list[torch.Generator], device) -> torch.Tensor:
    """[B] int64: one key per row, drawn from the row's own generator when its canvas starts — so a row's stream
    depends on its request's seed and on the canvases that request drew before, never on its batch."""
    keys = [torch.randint(-(2**63), 2**63 - 1, (1,), generator=g, device=g.device) for g in generators]
    return torch.cat(keys).to(device) if keys else torch.zeros(0, dtype=torch.long, device=device)


def counter_uniforms(keys: torch.Tensor, counters: torch.Tensor, length: int) -> torch.Tensor:
    """[b, length] float64 uniforms in [0, 1 - 2**-53]: u[i, c] is output number `counters[i] * 2**32 + c` of the
    splitmix64 stream seeded with `keys[i]`, its top 53 bits over 2**53. Pure integer arithmetic on the batch at once
    (int64 products wrap; shifts are made logical by masking), identical on every device."""
    index = counters.long()[:, None] * 2**32 + torch.arange(length, dtype=torch.long, device=keys.device)
    z = index.mul_(_GOLDEN).add_(keys[:, None])
    z = z.bitwise_xor_(z.bitwise_right_shift(30).bitwise_and_(2**34 - 1)).mul_(_MIX1)
    z = z.bitwise_xor_(z.bitwise_right_shift(27).bitwise_and_(2**37 - 1)).mul_(_MIX2)
    z = z.bitwise_xor_(z.bitwise_right_shift(31).bitwise_and_(2**33 - 1))
    return z.bitwise_right_shift_(11).bitwise_and_(2**53 - 1).double().mul_(2.0**-53)


def first_max(x: torch.Tensor, block: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """(max [N, 1], its first index [N]) of each row of x [N, V]: `x.max(dim=1, keepdim=True)`, in two cheaper
    passes where V is a multiple of `block`: the rows' block maxima (a vectorised `amax`; CPU's max with indices is
    not), the first block holding the row's maximum, then the first index in it — the same values and indices,
    ties and NaN included (a NaN is every reduction's maximum, at its first place)."""
    n, v = x.shape
    if v % block or v < 4 * block or not x.is_contiguous():
        top, first = x.max(dim=1, keepdim=True)
        return top, first.squeeze(1)
    cells = x.view(n, v // block, block)
    top, first = cells.amax(dim=2).max(dim=1, keepdim=True)
    first = first.squeeze(1)
    return top, cells[torch.arange(n, device=x.device), first].argmax(dim=1).add_(first * block)


@dataclass
class _Group:
    """Free positions whose statistics run together in one layout (`_FastPlan`)."""

    items: torch.Tensor | None  # [N] their flat positions (None: every position of every row)
    item_row: torch.Tensor | None  # [N] their rows
    ids: torch.Tensor | None  # [N, K] compact: each position's allowed ids (None: dense, [N, V])
    gather: torch.Tensor | None  # [N * K] compact: items * V + ids, into the step's flattened logits
    bias: torch.Tensor | None  # [N, K] / [N, V] float: -inf where masked (padding; disallowed), else 0 (None: none)
    sc_items: torch.Tensor | None  # [N] dense: the positions' flat positions in the whole state (self-conditioning)
    sc_gather: torch.Tensor | None  # [N * K] compact: their entries in the whole state's flattened logits


@dataclass
class _FastPlan:
    """Where a fast step's work lies, for one canvas's constraint and one set of b active rows (flat positions are
    row * C + c). Built when a canvas starts and again when its active rows change.

    Fixed positions cost nothing per step: their argmax is their token, their entropy 0, their noise their token.
    A row whose free positions are all restricted to sets of at most half the vocabulary is "compact": its statistics
    run over the allowed ids only ([N, K]: K the row's widest set, shorter sets repeating their first id, masked out;
    rows of one width share a group). The other rows are "dense": over the vocabulary ([N, V], disallowed tokens
    masked), every position of theirs when nearly all are free. A position's numbers are reduced along its own row of
    K or V entries, which CPU kernels compute alike wherever the row lies (along columns they do not: the vectorised
    and the leftover columns round differently), and a row's layout and K depend on its own constraint only: so a
    row's statistics — like its draws — never depend on its batch."""

    groups: list[_Group]
    free: torch.Tensor | None  # [b, C] bool, for the acceptance rule (None: every position free)
    free_count: torch.Tensor | None  # [b] free positions per row, at least 1 (None: every position free)
    fixed_argmax: torch.Tensor | None  # [b * C] the fixed tokens, 0 at free positions (None: one group, all positions)
    fixed_gather: torch.Tensor | None  # [F] fixed positions * V + token, not in a group (None: none)
    fixed_row: torch.Tensor | None  # [F]
    sc_fixed: torch.Tensor | None  # [F] their index in the whole state's flattened self-conditioning logits
    noise_table: torch.Tensor | None  # the constraint's `noise_table` (None: noise over the vocabulary)
    noise_base: torch.Tensor | None  # [b * C] where each position's choices start in it
    noise_count: torch.Tensor | float  # [b * C] float64 how many (1 at fixed positions), or V
    noise_last: torch.Tensor | int  # noise_count - 1, as long
    handoff: bool = False  # one dense group of exactly the free positions: their logits may come as [N, V] alone

    @classmethod
    def build(cls, constraint: CanvasConstraint | None, rows: torch.Tensor | None, batch: int, length: int,
              vocab: int) -> "_FastPlan":
        """The plan of `rows` (None: all `batch` rows) of a state with this constraint."""
        if constraint is None:
            everything = _Group(None, None, None, None, None, None, None)
            return cls([everything], None, None, None, None, None, None, None, None, float(vocab), vocab - 1)
        device = constraint.free.device
        if rows is not None:
            constraint = constraint.rows(rows)
        else:
            rows = torch.arange(batch, device=device)
        b = rows.numel()
        free, restricted = constraint.free.reshape(-1), constraint.restricted.reshape(-1)
        index, fixed = constraint.table_index.reshape(-1), constraint.fixed.reshape(-1)
        width = constraint.table.shape[1]
        count = torch.where(free, torch.where(restricted, constraint.counts[index], vocab), 1)
        position = torch.arange(b * length, device=device)
        in_state = rows.repeat_interleave(length) * length + position % length  # [b * C] flat positions in the state
        # a row is compact when each of its free positions allows at most half the vocabulary; K: its widest set
        narrow = torch.where(free, torch.where(restricted & (2 * count <= vocab), 1, 0), 1).view(b, length)
        compact_row = narrow.all(dim=1) & constraint.free.any(dim=1)
        row_width = torch.where(free, count, 0).view(b, length).amax(dim=1)
        items = free.nonzero().flatten()
        in_compact = compact_row[items // length]
        groups, fixed_at = [], (~free).nonzero().flatten()
        neg_inf, masked_out = torch.tensor(float("-inf"), device=device), torch.tensor(MASKED_OUT, device=device)
        for k in sorted(set(row_width[compact_row].tolist())):
            at = items[in_compact & (row_width[items // length] == k)]
            ids = constraint.table[index[at], :k]
            pad = torch.arange(k, device=device) >= count[at][:, None]
            ids = torch.where(pad, ids[:, :1], ids)
            groups.append(_Group(at, at // length, ids, (at[:, None] * vocab + ids).flatten(),
                                 torch.where(pad, neg_inf, 0.0) if bool(pad.any()) else None, None,
                                 (in_state[at][:, None] * vocab + ids).flatten()))
        dense = items[~in_compact]
        if dense.numel() and 10 * dense.numel() >= 9 * b * length:  # (nearly) all positions: all, fixed ones one-hot
            bias = None
            if dense.numel() < b * length or bool(restricted.any()):
                bias = torch.where(constraint.allowed.reshape(b * length, vocab), 0.0, masked_out)
            groups.append(_Group(None, None, None, None, bias, None, None))
            fixed_at = fixed_at[:0]
        elif dense.numel():
            bias = None
            if bool(restricted[dense].any()):
                allowed = constraint.masks[torch.where(restricted[dense], index[dense] + 1, 0)]
                bias = torch.where(allowed, 0.0, masked_out)
            groups.append(_Group(dense, dense // length, None, None, bias, in_state[dense], None))
        every = items.numel() == b * length
        return cls(
            groups=groups,
            free=None if every else constraint.free,
            free_count=None if every else constraint.free.sum(-1).clamp(min=1).float(),
            fixed_argmax=None if len(groups) == 1 and groups[0].items is None else fixed.clamp(min=0),
            fixed_gather=fixed_at * vocab + fixed[fixed_at] if fixed_at.numel() else None,
            fixed_row=fixed_at // length,
            sc_fixed=in_state[fixed_at] * vocab + fixed[fixed_at],
            noise_table=constraint.noise_table(),
            noise_base=torch.where(free, torch.where(restricted, vocab + index * width, 0), fixed.clamp(min=0)),
            noise_count=count.double(),
            noise_last=count - 1,
            handoff=len(groups) == 1 and groups[0].items is not None and groups[0].ids is None,
        )

    def noise(self, u: torch.Tensor) -> torch.Tensor:
        """[b * C] tokens from uniforms u [b, C]: uniform over each position's allowed set; the fixed token where
        fixed."""
        slot = (u.view(-1) * self.noise_count).long()
        if self.noise_table is None:
            return slot.clamp_(max=self.noise_last)
        return self.noise_table[torch.minimum(slot, self.noise_last).add_(self.noise_base)]


# --------------------------------------------------------------------------------------------------------------------
# Sampler


class RenoiseSampler:
    """DiffusionGemma's renoise sampler over constrained canvases. Stateless: all state lives in `DenoiseState`."""

    def __init__(
        self,
        config: SamplerConfig | None = None,
        acceptance: AcceptanceRule | None = None,
        stop: StopRule | None = None,
    ):
        if config is not None and not isinstance(config, SamplerConfig):
            raise ConfigError(f"config is a SamplerConfig, not a {type(config).__name__}")
        self.config = config or SamplerConfig()
        self.acceptance = acceptance or EntropyBoundAcceptance(self.config.entropy_bound)
        self.stop = stop or StableAndConfidentStop(self.config.stability_threshold, self.config.confidence_threshold)

    # -- initial canvas -------------------------------------------------------------------------------------------

    def init_state(
        self,
        batch: int,
        canvas_length: int,
        vocab_size: int,
        generators: list[torch.Generator],
        constraint: CanvasConstraint | None = None,
        device: torch.device | str = "cpu",
    ) -> DenoiseState:
        """A fresh batch of canvases: uniform random tokens (within allowed sets), fixed tokens clamped."""
        if len(generators) != batch:
            raise ValueError(f"need one generator per canvas: {len(generators)} for {batch}")
        keys = plan = None
        if self.config.draws == "fast":
            keys = row_keys(generators, device)
            plan = _FastPlan.build(constraint, None, batch, canvas_length, vocab_size)
            canvas = plan.noise(counter_uniforms(keys, torch.zeros_like(keys), canvas_length)).view(batch, -1)
        else:
            canvas = torch.stack([self._uniform_tokens(vocab_size, canvas_length, g, device) for g in generators])
            if constraint is not None:
                canvas = self.constrain_noise(canvas, constraint, generators)
        return DenoiseState(
            canvas=canvas,
            argmax=canvas.clone(),
            history=self.stop.init_history(batch, canvas_length, canvas.device),
            steps_left=torch.full((batch,), self.config.max_denoising_steps, dtype=torch.int32, device=canvas.device),
            steps_taken=torch.zeros(batch, dtype=torch.int32, device=canvas.device),
            done=torch.zeros(batch, dtype=torch.bool, device=canvas.device),
            stopped_early=torch.zeros(batch, dtype=torch.bool, device=canvas.device),
            constraint=constraint,
            generators=list(generators),
            keys=keys,
            plans={} if plan is None else {None: plan},
        )

    # -- one step -------------------------------------------------------------------------------------------------

    def step(self, logits: torch.Tensor, state: DenoiseState, rows: torch.Tensor | None = None,
             free_logits: torch.Tensor | None = None) -> StepOutput:
        """Advance `rows` of `state` (default: all unfinished rows) by one step, given their logits [b, C, V].
        `free_logits` [N, V]: the logits at the free positions, handed over apart (then not read from `logits`;
        fast draws, all rows, a plan that `takes_free_logits`); their self-conditioning logits are then left
        `pending` for the next forward."""
        if rows is None:
            rows = state.active_rows()
        whole = rows.numel() == state.batch_size
        batch, length, vocab = logits.shape
        if batch != rows.numel():
            raise ValueError(f"logits for {batch} canvases, but {rows.numel()} rows to advance")
        if free_logits is not None and not self.takes_free_logits(state, rows, length, vocab):
            raise ValueError("free logits handed over for rows whose plan does not take them")
        if free_logits is None:
            state.settle()
        if self.config.draws == "fast":
            return self._fast_step(logits, state, rows, whole, free_logits)
        constraint = state.constraint if (whole or state.constraint is None) else state.constraint.rows(rows)
        pick = (lambda t: t) if whole else (lambda t: t[rows])

        # 1-2. temperature, then constraints: every statistic below sees only allowed tokens.
        temperature = self.config.temperature(pick(state.steps_left))
        tempered = logits / temperature[:, None, None]
        if constraint is not None:
            tempered = tempered.masked_fill_(constraint.disallowed, float("-inf"))

        # 3. statistics: probabilities, argmax, entropy (log-probabilities as torch.distributions.Categorical
        # normalises them).
        if self.config.draws == "sglang":  # SGLang's statistics: one log-softmax, exponentiated
            log_probs = torch.log_softmax(tempered, dim=-1, dtype=torch.float32)
            probs = log_probs.exp()
        else:
            probs = torch.softmax(tempered, dim=-1, dtype=torch.float32)
            log_probs = tempered - tempered.logsumexp(dim=-1, keepdim=True)
        argmax = tempered.argmax(dim=-1)
        if constraint is None:
            entropy = -(log_probs * probs).sum(-1)
        else:  # (a masked token's -inf * 0 is NaN, and must count 0)
            entropy = -torch.nansum(log_probs * probs, dim=-1)
        free = constraint.free if constraint is not None else None

        # 4. acceptance, samples for accepted positions, re-noising of the rest; fixed positions stay clamped.
        accepted = self.acceptance(entropy, free)
        gens = [state.generators[int(r)] for r in rows]
        samples = self._samples(probs, accepted, gens)
        noise = torch.stack([self._uniform_tokens(vocab, length, g, logits.device) for g in gens])
        canvas = torch.where(accepted, samples, noise)
        if constraint is not None:
            canvas = self.constrain_noise(canvas, constraint, gens, keep=accepted)

        # 5. stopping, on free positions only.
        if free is None:
            mean_entropy = entropy.mean(dim=-1)
        else:
            mean_entropy = (entropy * free).sum(-1) / free.sum(-1).clamp(min=1)
        stop, history = self.stop(state.history[:, rows] if not whole else state.history, argmax, mean_entropy)
        steps_left = pick(state.steps_left) - 1
        done = stop | (steps_left <= 0)

        # write back
        self._write_back(state, rows, whole, canvas, argmax, history, steps_left, done, stop, mean_entropy)
        if whole:
            state.self_conditioning = tempered
        else:
            if state.self_conditioning is None:
                state.self_conditioning = tempered.new_zeros((state.batch_size, length, vocab))
            state.self_conditioning[rows] = tempered
        return StepOutput(rows=rows, accepted=accepted, mean_entropy=mean_entropy, stopped=done, probs=probs)

    def takes_free_logits(self, state: DenoiseState, rows: torch.Tensor, length: int, vocab: int) -> bool:
        """May `step` get these rows' free logits apart (fast draws, all rows, one dense group of the free ones)?"""
        whole = rows.numel() == state.batch_size
        return self.config.draws == "fast" and whole and self._plan(state, rows, whole, length, vocab).handoff

    def _fast_step(self, logits: torch.Tensor, state: DenoiseState, rows: torch.Tensor, whole: bool,
                   free_logits: torch.Tensor | None = None) -> StepOutput:
        """`step` with fast draws: the work of `_FastPlan` (free positions only, over their allowed sets), one counter
        uniform per position (`counter_uniforms`) serving the sample where accepted and the noise elsewhere."""
        batch, length, vocab = logits.shape
        plan = self._plan(state, rows, whole, length, vocab)
        if state.keys is None:
            state.keys = row_keys(state.generators, logits.device)
        pick = (lambda t: t) if whole else (lambda t: t[rows])
        steps_left, steps_taken = pick(state.steps_left), pick(state.steps_taken)
        temperature = self.config.temperature(steps_left)
        flat = logits.reshape(batch * length, vocab)

        # 1-3. per group: the tempered logits over the allowed sets (masked: -inf or MASKED_OUT where disallowed),
        # probabilities, argmax and entropy H = log S - sum p (t - max), S the softmax's sum (= 1 / p_max)
        stats = [self._group_stats(group, logits, flat, temperature, free_logits) for group in plan.groups]
        if plan.fixed_argmax is None:
            entropy, argmax = stats[0][0], stats[0][1]
        else:
            entropy = flat.new_zeros(batch * length, dtype=torch.float32)
            argmax = plan.fixed_argmax.clone()
            for group, (item_entropy, item_argmax, *_) in zip(plan.groups, stats):
                entropy.index_copy_(0, group.items, item_entropy)
                argmax.index_copy_(0, group.items, item_argmax)
        entropy, argmax = entropy.view(batch, length), argmax.view(batch, length)

        # 4. acceptance; one uniform per position: the sample where accepted, the noise elsewhere
        accepted = self.acceptance(entropy, plan.free)
        u = self._uniforms(state, rows, whole, steps_taken, length)
        canvas = plan.noise(u)
        for group, group_stats in zip(plan.groups, stats):
            self._group_samples(group, group_stats, accepted, u, canvas)
        canvas = canvas.view(batch, length)

        # 5. stopping, on free positions only (fixed ones have entropy 0)
        mean_entropy = entropy.mean(dim=-1) if plan.free_count is None else entropy.sum(-1) / plan.free_count
        stop, history = self.stop(state.history[:, rows] if not whole else state.history, argmax, mean_entropy)
        steps_left = steps_left - 1
        done = stop | (steps_left <= 0)

        # self-conditioning: the masked tempered logits [B, C, V], written where they change
        sc = state.self_conditioning
        if sc is None and (plan.fixed_argmax is not None or not whole):
            sc = torch.full((state.batch_size, length, vocab), float("-inf"), device=logits.device)
        for group, (*_, masked, tempered) in zip(plan.groups, stats):
            if group.items is None:  # (`masked` is this step's own tensor)
                if whole:
                    sc = masked.view(batch, length, vocab)
                else:
                    sc[rows] = masked.view(batch, length, vocab)
            elif group.ids is not None:  # (padding repeats an allowed id with its own value)
                sc.view(-1).index_copy_(0, group.sc_gather, tempered.reshape(-1).to(sc.dtype))
            elif free_logits is not None:  # (written when read: the next forward takes their softmax as it is)
                state.pending = group.sc_items, masked, stats[0][4]
            else:
                sc.view(-1, vocab).index_copy_(0, group.sc_items, masked.to(sc.dtype))
        if plan.fixed_gather is not None:
            fixed = flat.view(-1).index_select(0, plan.fixed_gather) / temperature[plan.fixed_row]
            sc.view(-1).index_copy_(0, plan.sc_fixed, fixed.to(sc.dtype))
        self._write_back(state, rows, whole, canvas, argmax, history, steps_left, done, stop, mean_entropy)
        state.self_conditioning = sc
        return StepOutput(rows=rows, accepted=accepted, mean_entropy=mean_entropy, stopped=done)

    @staticmethod
    def _write_back(state: DenoiseState, rows, whole: bool, canvas, argmax, history, steps_left, done, stop,
                    mean_entropy) -> None:
        """A step's results into `state` (all rows, or `rows`); self-conditioning is the caller's."""
        if whole:
            state.canvas, state.argmax, state.history = canvas, argmax, history
            state.steps_left, state.steps_taken = steps_left, state.steps_taken + 1
            state.done, state.stopped_early = done, stop
            state.mean_entropy = mean_entropy
            return
        state.canvas[rows], state.argmax[rows], state.history[:, rows] = canvas, argmax, history
        state.steps_left[rows], state.steps_taken[rows] = steps_left, state.steps_taken[rows] + 1
        state.done[rows], state.stopped_early[rows] = done, stop
        if state.mean_entropy is None:
            state.mean_entropy = mean_entropy.new_zeros(state.batch_size)
        state.mean_entropy[rows] = mean_entropy

    @staticmethod
    def _group_stats(group: _Group, logits: torch.Tensor, flat: torch.Tensor, temperature: torch.Tensor,
                     free_logits: torch.Tensor | None = None) -> tuple:
        """(entropy [N], argmax token [N], p_max [N], argmax rank [N], probs, masked, tempered) of a group's N
        positions; their tensors are [N, K] (compact) or [N, V] (dense). `free_logits`: the group's [N, V] logits,
        handed over (a plan's one dense group)."""
        if free_logits is not None and group.bias is not None:  # (bias + logits / T at once: the same rounding)
            tempered = torch.addcdiv(group.bias, free_logits, temperature[group.item_row, None])
        elif free_logits is not None:
            tempered = free_logits / temperature[group.item_row, None]
        elif group.ids is not None:
            tempered = (flat.view(-1).index_select(0, group.gather).view(group.ids.shape)
                        / temperature[group.item_row, None])
        elif group.items is None:
            tempered = (logits / temperature[:, None, None]).view(flat.shape)
        else:
            tempered = flat.index_select(0, group.items) / temperature[group.item_row, None]
        if group.bias is None or free_logits is not None:
            masked = tempered
        elif group.ids is None:  # (dense: a finite bias, so masked - top is finite where probs are 0)
            masked = tempered = tempered.add_(group.bias)
        else:  # (compact: the padding's -inf bias; self-conditioning takes `tempered`)
            masked = tempered + group.bias
        probs = torch.softmax(masked, dim=1, dtype=torch.float32)
        top, rank = first_max(masked)  # (the first maximal index, as argmax)
        top_prob = probs.gather(1, rank[:, None]).squeeze(1)  # (exp(0) / S: the largest probability)
        entropy = -top_prob.log() - (tempered - top).mul_(probs).sum(dim=1)  # (one [N, K] temporary, not two)
        argmax = group.ids.gather(1, rank[:, None]).squeeze(1) if group.ids is not None else rank
        return entropy, argmax, top_prob, rank, probs, masked, tempered

    @staticmethod
    def _group_samples(group: _Group, stats: tuple, accepted: torch.Tensor, u: torch.Tensor,
                       canvas: torch.Tensor) -> None:
        """Write a sample into `canvas` [b * C] at the group's accepted positions: inverse CDF with the argmax first
        (u < p_max takes it; most accepted positions are nearly certain), the others' cumulative probabilities
        searched only for the positions that need them."""
        _, argmax, top_prob, rank, probs, _, _ = stats
        chosen = accepted.view(-1) if group.items is None else accepted.view(-1).index_select(0, group.items)
        where = chosen.nonzero().flatten()
        if not where.numel():
            return
        at = where if group.items is None else group.items[where]
        v = u.view(-1)[at] - top_prob[where]
        canvas[at] = argmax[where]
        rest = (v >= 0).nonzero().flatten()
        if rest.numel():
            others, at = where[rest], at[rest]
            p = probs[others].double()
            cdf = p.scatter_(1, rank[others, None], 0.0).cumsum(-1)
            hit = torch.searchsorted(cdf, v[rest, None], right=True).squeeze(1)
            # (v can pass the others' total by a rounding error of the probabilities: the last one with mass)
            hit = torch.minimum(hit, (p > 0).long().cumsum(-1).argmax(-1))
            canvas[at] = group.ids[others, hit] if group.ids is not None else hit

    def _uniforms(self, state: DenoiseState, rows: torch.Tensor, whole: bool, steps_taken: torch.Tensor,
                  length: int) -> torch.Tensor:
        """[b, C] this step's uniforms of the rows (counter: steps taken + 1; 0 drew the initial canvas). Rows step
        together, so the uniforms of the canvas's next steps are made at once (a window of at most 2**20)."""
        counters = steps_taken.long() + 1
        low, high = counters.aminmax()
        low, high = int(low), int(high)
        if low != high:  # (rows out of step)
            return counter_uniforms(state.keys[rows], counters, length)
        first, window = state.uniforms if state.uniforms is not None else (0, None)
        if window is None or not first <= low < first + window.shape[1]:
            batch = state.batch_size
            span = max(1, min(self.config.max_denoising_steps, 2**20 // max(1, batch * length)))
            steps = torch.arange(low, low + span, device=counters.device).repeat(batch)
            window = counter_uniforms(state.keys.repeat_interleave(span), steps, length).view(batch, span, length)
            state.uniforms, first = (low, window), low
        return (window[:, low - first] if whole else window[rows, low - first]).contiguous()

    @staticmethod
    def _plan(state: DenoiseState, rows: torch.Tensor, whole: bool, length: int, vocab: int) -> "_FastPlan":
        """The state's plan for these rows, built when they change (subsets only shrink: older plans are dropped)."""
        key = None if whole else tuple(rows.tolist())
        plan = state.plans.get(key)
        if plan is None:
            build = _FastPlan.build
            if None not in state.plans:  # (a state made without init_state)
                state.plans[None] = build(state.constraint, None, state.batch_size, length, vocab)
            if key is not None:
                state.plans = {None: state.plans[None], key: build(state.constraint, rows, state.batch_size, length,
                                                                   vocab)}
            plan = state.plans[key]
        return plan

    # -- commit ---------------------------------------------------------------------------------------------------

    @staticmethod
    def commit(state: DenoiseState, templates: list[CanvasTemplate | None] | None = None) -> torch.Tensor:
        """The canvases to commit: the last argmax, with every slot of row j's template replaced by the best complete
        path of its automaton under the last step's distribution, so a committed slot is always in its language."""
        committed = state.argmax
        state.settle()
        jobs = [(j, slot) for j, t in enumerate(templates or []) if t is not None for slot in t.slots]
        if jobs:
            committed = committed.clone()
            log_probs = torch.log_softmax(state.self_conditioning.float(), dim=-1).cpu()
            paths = best_paths([(slot, log_probs[j, slot.start : slot.start + slot.length]) for j, slot in jobs])
            rows = torch.tensor([j for j, slot in jobs for _ in range(slot.length)])
            columns = torch.tensor([c for _, slot in jobs for c in range(slot.start, slot.start + slot.length)])
            committed[rows.to(committed.device), columns.to(committed.device)] = torch.tensor(
                [t for path in paths for t in path], device=committed.device)
        return committed

    # -- random draws -----------------------------------------------------------------------------------------------

    def _samples(self, probs: torch.Tensor, accepted: torch.Tensor, gens: list[torch.Generator]) -> torch.Tensor:
        """One categorical sample per position, on the reference or SGLang stream (fast draws: `_group_samples`)."""
        if self.config.draws == "reference":
            # transformers draws a multinomial sample at every position; so do we, to stay on its random stream.
            return torch.stack([torch.multinomial(p, 1, generator=g).squeeze(-1) for p, g in zip(probs, gens)])
        # SGLang's exponential race: argmax p / E with E ~ Exp(1) at every position is a categorical sample.
        return torch.stack([(p / torch.empty_like(p).exponential_(1.0, generator=g)).argmax(-1)
                            for p, g in zip(probs, gens)])

    # -- noise ------------------------------------------------------------------------------------------------------

    @staticmethod
    def _uniform_tokens(vocab: int, length: int, generator: torch.Generator, device) -> torch.Tensor:
        return torch.randint(0, vocab, (length,), generator=generator, device=device)

    @staticmethod
    def constrain_noise(
        canvas: torch.Tensor,
        constraint: CanvasConstraint,
        generators: list[torch.Generator],
        keep: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Re-draw the noise of restricted positions uniformly from their allowed sets; clamp fixed positions.

        Unrestricted positions keep the vocabulary-wide draw, so unconstrained canvases consume exactly the random
        numbers of the reference sampler.
        """
        if any(constraint.row_restricted):
            # Only rows that have restricted positions draw, so a row's stream never depends on its batch.
            u = torch.stack(
                [
                    torch.rand(canvas.shape[1], generator=g, device=canvas.device)
                    if restricted
                    else torch.zeros(canvas.shape[1], device=canvas.device)
                    for g, restricted in zip(generators, constraint.row_restricted)
                ]
            )
            redraw = constraint.restricted if keep is None else constraint.restricted & ~keep
            canvas = torch.where(redraw, constraint.draw(u), canvas)
        return torch.where(constraint.fixed >= 0, constraint.fixed, canvas)
