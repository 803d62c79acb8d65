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
unconstrained canvas reproduces `model.generate` token for token. `draws="fast"` samples only the accepted positions
(inverse CDF): the same distributions from fewer random numbers. `draws="sglang"` follows SGLang's Gemma4Renoise
stream, so the server plugin reproduces upstream exactly on unconstrained requests. Each canvas draws from its own
generator, so a request's result never depends on what else shares its batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator

from diffreason.canvas import CanvasConstraint, CanvasTemplate


class SamplerConfig(BaseModel):
    """Renoise sampler settings; the defaults are DiffusionGemma's released generation_config."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_denoising_steps: int = Field(48, ge=1, description="denoising steps per canvas at most")
    entropy_bound: float = Field(0.1, gt=0, description="entropy budget of the accepted set per step")
    t_max: float = Field(0.8, ge=0, description="temperature at the first step")
    t_min: float = Field(0.4, ge=0, description="temperature the schedule falls towards")
    stability_threshold: int = Field(1, ge=0, description="argmax canvas unchanged for this many steps to stop")
    confidence_threshold: float = Field(0.005, ge=0, description="mean entropy below this to stop; 0 disables")
    draws: Literal["reference", "fast", "sglang"] = Field(
        "reference",
        description="'reference': transformers' random stream (a sample at every position, token-identical to "
        "model.generate); 'fast': samples only where accepted (inverse CDF), same distribution, fewer draws; "
        "'sglang': SGLang Gemma4Renoise's stream (exponential race at every position), as the server plugin uses",
    )

    @model_validator(mode="after")
    def _schedule(self) -> "SamplerConfig":
        if self.t_max <= self.t_min:
            raise ValueError(f"t_max ({self.t_max}) must be greater than t_min ({self.t_min})")
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
    self_conditioning: torch.Tensor | None = None  # [B, C, V] tempered (masked) logits of the last step
    mean_entropy: torch.Tensor | None = None  # [B] last step's mean entropy over free positions

    @property
    def batch_size(self) -> int:
        return self.canvas.shape[0]

    def active_rows(self) -> torch.Tensor:
        return (~self.done).nonzero().flatten()


@dataclass
class StepOutput:
    rows: torch.Tensor  # which rows of the state this step advanced
    accepted: torch.Tensor  # [b, C] bool
    mean_entropy: torch.Tensor  # [b]
    stopped: torch.Tensor  # [b] bool: finished at this step
    probs: torch.Tensor | None = None  # [b, C, V] float32 tempered, masked probabilities of this step


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
        )

    # -- one step -------------------------------------------------------------------------------------------------

    def step(self, logits: torch.Tensor, state: DenoiseState, rows: torch.Tensor | None = None) -> StepOutput:
        """Advance `rows` of `state` (default: all unfinished rows) by one step, given their logits [b, C, V]."""
        if rows is None:
            rows = state.active_rows()
        whole = rows.numel() == state.batch_size
        constraint = state.constraint if (whole or state.constraint is None) else state.constraint.rows(rows)
        pick = (lambda t: t) if whole else (lambda t: t[rows])
        batch, length, vocab = logits.shape
        if batch != rows.numel():
            raise ValueError(f"logits for {batch} canvases, but {rows.numel()} rows to advance")

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
        if whole:
            state.canvas, state.argmax, state.history = canvas, argmax, history
            state.steps_left, state.steps_taken = steps_left, state.steps_taken + 1
            state.done, state.stopped_early = done, stop
            state.self_conditioning, state.mean_entropy = tempered, mean_entropy
        else:
            state.canvas[rows], state.argmax[rows], state.history[:, rows] = canvas, argmax, history
            state.steps_left[rows], state.steps_taken[rows] = steps_left, state.steps_taken[rows] + 1
            state.done[rows], state.stopped_early[rows] = done, stop
            if state.self_conditioning is None:
                state.self_conditioning = tempered.new_zeros((state.batch_size, length, vocab))
                state.mean_entropy = mean_entropy.new_zeros(state.batch_size)
            state.self_conditioning[rows], state.mean_entropy[rows] = tempered, mean_entropy
        return StepOutput(rows=rows, accepted=accepted, mean_entropy=mean_entropy, stopped=done, probs=probs)

    # -- commit ---------------------------------------------------------------------------------------------------

    @staticmethod
    def commit(state: DenoiseState, templates: list[CanvasTemplate | None] | None = None) -> torch.Tensor:
        """The canvases to commit: the last argmax, with every slot of row j's template replaced by the best complete
        path of its automaton under the last step's distribution, so a committed slot is always in its language."""
        committed = state.argmax
        slotted = [(j, t.slots) for j, t in enumerate(templates or []) if t is not None and t.slots]
        if slotted:
            committed = committed.clone()
            log_probs = torch.log_softmax(state.self_conditioning.float(), dim=-1)
            for j, slots in slotted:
                for slot in slots:
                    span = slice(slot.start, slot.start + slot.length)
                    path = slot.automaton.best_path(log_probs[j, span].cpu(), slot.backward)
                    committed[j, span] = torch.tensor(path, device=committed.device)
        return committed

    # -- random draws -----------------------------------------------------------------------------------------------

    def _samples(self, probs: torch.Tensor, accepted: torch.Tensor, gens: list[torch.Generator]) -> torch.Tensor:
        """One categorical sample per position (only accepted positions are used)."""
        if self.config.draws == "reference":
            # transformers draws a multinomial sample at every position; so do we, to stay on its random stream.
            return torch.stack([torch.multinomial(p, 1, generator=g).squeeze(-1) for p, g in zip(probs, gens)])
        if self.config.draws == "sglang":
            # SGLang's exponential race: argmax p / E with E ~ Exp(1) at every position is a categorical sample.
            return torch.stack([(p / torch.empty_like(p).exponential_(1.0, generator=g)).argmax(-1)
                                for p, g in zip(probs, gens)])
        samples = torch.zeros(accepted.shape, dtype=torch.long, device=probs.device)
        for i, g in enumerate(gens):
            where = accepted[i].nonzero().flatten()
            if where.numel() == 0:
                continue
            cdf = probs[i, where].double().cumsum(-1)
            u = torch.rand((where.numel(), 1), generator=g, device=probs.device, dtype=torch.float64)
            pick = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).squeeze(-1)
            # u * total may round up to total: fall back to the last token with mass.
            last = (probs[i, where] > 0).cumsum(-1).argmax(-1)
            samples[i, where] = torch.minimum(pick, last)
        return samples

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
