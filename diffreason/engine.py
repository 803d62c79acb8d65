"""The local engine: DiffusionGemma block diffusion over canvas templates, on CPU or GPU.

Per batch of requests: one causal prefill of the prompts into a KV cache; then, canvas by canvas, denoising steps that
only read that cache (the decoder never writes it), the argmax canvas committed, encoded into the cache, and the next
canvas started. Requests stop independently: a canvas that has converged leaves the batch (the model no longer runs
on it), and a request whose canvas holds EOS leaves the cache.

Random draws come from one generator per request (seeded by the request), so a result depends only on its own
prompt, template and seed. For a single unconstrained request it equals `model.generate` of transformers under
`torch.manual_seed(seed)`, token for token (tests/test_parity.py).
"""

from __future__ import annotations

import contextlib
import copy
import numbers
import operator
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import torch
from transformers import DynamicCache

from diffreason import free_forward
from diffreason.canvas import CanvasConstraint, CanvasTemplate
from diffreason.errors import ConfigError, DiffreasonError, TemplateError
from diffreason.model import DiffusionLM
from diffreason.sampler import DenoiseState, RenoiseSampler, SamplerConfig, StepOutput


@dataclass
class GenerationRequest:
    prompt: str | Sequence[int] = ""
    template: CanvasTemplate | None = None
    seed: int = 0
    max_new_tokens: int | None = None


@dataclass
class StepTrace:
    """One denoising step of one request, for visualisation."""

    canvas_index: int
    step: int  # 1-based within the canvas
    canvas: list[int]  # the noisy canvas after the step (accepted samples + noise)
    argmax: list[int]  # the argmax canvas of the step (what would be committed now)
    accepted: list[bool]
    mean_entropy: float


@dataclass
class GenerationResult:
    prompt_ids: list[int]
    tokens: list[int]  # generated tokens up to, not including, the first EOS; at most the request's max_new_tokens
    raw_tokens: list[int]  # the committed canvases whole, as transformers returns them (pad after EOS)
    text: str
    steps: list[int]  # denoising steps used, per canvas
    stopped_early: list[bool]  # per canvas: the stop rule ended it (converged; it may be on the budget's last step)
    finished: bool  # an EOS was generated within max_new_tokens
    seconds: float
    trace: list[StepTrace] | None = None
    # choices the constraint's template made for the model (a JSON Schema's value too complex for one slot: a member
    # always written, one anyOf branch, ...; see CompiledSchema.fixed); empty when every choice stayed the model's
    fixed: tuple[str, ...] = ()

    def to_dict(self, with_trace: bool = False) -> dict:
        out = asdict(self)
        if not with_trace:
            out.pop("trace")
        return out


@dataclass
class EngineStats:
    """Wall time split of the last `generate` call (filled when the engine profiles)."""

    encode: float = 0.0
    forward: float = 0.0
    sampler: float = 0.0  # the sampler's steps (and step hooks)
    constraint: float = 0.0  # per canvas: the batch's constraint and first canvas, and the commit (slots' best paths)
    steps: int = 0  # denoising steps (each a forward over the canvases still running)
    canvas_steps: int = 0  # canvas-steps: the rows those steps advanced, summed


@dataclass
class _Batch:
    """One batch of B prepared requests on its way through `Engine._run`: what carries over from canvas to canvas.

    A of the B rows are alive (still generating); P is the longest prompt, C the canvas length, k the canvas index.
    Positions are shared ([1, ·]) when no prompt is padded, per row ([A, ·]) otherwise.
    """

    requests: list  # prepared requests (`Engine._prepare`): (prompt ids, template, seed, canvases)
    request_ids: Sequence[int]  # their indices in the caller's list
    prompt_lens: torch.Tensor  # [B], on the device
    prompt_len: int  # P
    padded: bool  # some prompt is shorter than P (left-padded)
    generators: list[torch.Generator]  # [B], each seeded by its request
    n_canvases: int  # the most canvases any request asks for
    cache: DynamicCache  # the alive rows' prompts and committed canvases: [A, heads, ≤ P + k·C, head_dim] per layer
    alive: list[int]  # the batch rows still generating (A)
    new_ids: torch.Tensor  # [A, L]: what the cache lacks (the prompts, L = P; then the last committed canvas, L = C)
    attention: torch.Tensor  # bool [A, P + k·C]: the cache's positions once new_ids are in (False: prompt padding)
    enc_pos: torch.Tensor  # int32 [A or 1, L]: the positions of new_ids
    out_tokens: list[list[int]]  # [B]: each row's committed canvases, concatenated
    steps: list[list[int]]  # [B]: denoising steps per canvas
    early: list[list[bool]]  # [B]: per canvas, converged before the step budget
    finished: list[bool]  # [B]: an EOS was committed
    traces: list[list[StepTrace]]  # [B]: the steps recorded (with `trace`)
    ended: set[int] = field(default_factory=set)  # rows `on_canvas` ended (their clients have gone)


@dataclass
class _Canvas:
    """Canvas k of the A alive rows while it is denoised."""

    index: int  # k
    templates: list[CanvasTemplate]  # [A]: each row's template part on this canvas (C positions)
    state: DenoiseState  # the noisy canvas [A, C], its argmax, self-conditioning logits, per-row stops
    attention: torch.Tensor  # bool [A, P + k·C + C]: what the decoder sees of [cache; canvas]
    positions: torch.Tensor  # int32 [A or 1, C]
    mask: dict  # the decoder's attention masks over [cache; canvas] (per layer type), all A rows


StepCallback = Callable[[int, StepTrace], None]  # (request index, trace of its step)
# (request index, canvas index, committed tokens) -> True to end that request there (its client has gone)
CanvasCallback = Callable[[int, int, list], bool | None]
# Called after every sampler step with the state and the rows it advanced; may edit the canvas (task-aware modes).
StepHook = Callable[[DenoiseState, torch.Tensor], None]


class Engine:
    """Runs the renoise sampler of `sampler` (default: the checkpoint's) with `lm` over prompts and templates."""

    def __init__(
        self,
        lm: DiffusionLM,
        sampler: RenoiseSampler | SamplerConfig | None = None,
        max_batch_size: int = 64,
        profile: bool = False,
        attention: str = "auto",
        free_logits: bool = True,
        forward_context: Callable[[], contextlib.AbstractContextManager] | None = None,
    ):
        """`attention`: "auto" (FlashInfer on CUDA in half precision, else the model's own — SDPA), "flashinfer"
        (the FlashInfer path; its PyTorch twin kernel off CUDA) or "sdpa". `free_logits`: with fast draws, a canvas
        whose template fixes at least 15 % of its positions gets its LM head and self-conditioning signal computed
        at free positions only (`diffreason.free_forward`: the same logits there, bit for bit; a fixed position's are
        its token's logit and -inf elsewhere, all the sampler's mask leaves of them). `forward_context`: called for a
        context manager entered around every denoising forward (a profiler, a FLOP counter)."""
        if not isinstance(lm, DiffusionLM):
            raise ConfigError(f"lm is a DiffusionLM (diffreason.load_model(path)), not a {type(lm).__name__}")
        if sampler is not None and not isinstance(sampler, (RenoiseSampler, SamplerConfig)):
            raise ConfigError(f"sampler is a SamplerConfig or a RenoiseSampler, not a {type(sampler).__name__}")
        self.lm = lm
        if attention not in ("auto", "flashinfer", "sdpa"):
            raise ConfigError(f"attention must be auto, flashinfer or sdpa, got {attention!r}")
        if attention != "sdpa" and (attention == "flashinfer" or lm.model.device.type == "cuda"):
            from diffreason.attention import use_flashinfer

            use_flashinfer(lm.model, force=attention == "flashinfer")
        elif attention == "sdpa":
            lm.model.set_attn_implementation("sdpa")
        if sampler is None or isinstance(sampler, SamplerConfig):
            sampler = RenoiseSampler(sampler or lm.sampler_config)
        self.sampler = sampler
        if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int) or max_batch_size < 1:
            raise ConfigError(f"max_batch_size must be an integer of at least 1, got {max_batch_size!r}")
        self.max_batch_size = max_batch_size
        self.profile = profile
        self.free_logits = free_logits
        self.forward_context = forward_context or contextlib.nullcontext
        self.stats = EngineStats()

    @property
    def model(self):
        return self.lm.model

    @property
    def device(self) -> torch.device:
        return self.lm.model.device

    # -- public API -------------------------------------------------------------------------------------------------

    def generate(
        self,
        prompt: str | Sequence[int] = "",
        *,
        template: CanvasTemplate | None = None,
        seed: int = 0,
        max_new_tokens: int | None = None,
        trace: bool = False,
        callback: StepCallback | None = None,
        step_hook: StepHook | None = None,
        on_canvas: CanvasCallback | None = None,
    ) -> GenerationResult:
        request = GenerationRequest(prompt, template, seed, max_new_tokens)
        return self.generate_batch(
            [request], trace=trace, callback=callback, step_hook=step_hook, on_canvas=on_canvas
        )[0]

    def generate_batch(
        self,
        requests: Sequence[GenerationRequest],
        trace: bool = False,
        callback: StepCallback | None = None,
        step_hook: StepHook | None = None,
        on_canvas: CanvasCallback | None = None,
        return_errors: bool = False,
    ) -> list[GenerationResult]:
        """Results in request order. Requests run in batches of `max_batch_size`, longest prompts together.

        `on_canvas(request index, canvas index, tokens)` is called as each canvas is committed (streaming); when it
        returns True the request ends there, as after an EOS (a server's client that has gone).
        A request that cannot run (a bad prompt, seed or template) is, with `return_errors`, its DiffreasonError in
        the list while the others run; without, that error, naming the request (`requests[i]: ...`), before any
        runs.
        """
        self.stats = EngineStats()
        prepared: list = []
        for i, r in enumerate(requests):
            try:
                if not isinstance(r, GenerationRequest):
                    raise ConfigError(f"a request is a GenerationRequest, not a {type(r).__name__}")
                prepared.append(self._prepare(r))
            except DiffreasonError as exc:
                if not return_errors:
                    raise type(exc)(f"requests[{i}]: {exc}" if len(requests) > 1 else str(exc)) from None
                prepared.append(exc)
        runs = [i for i, p in enumerate(prepared) if not isinstance(p, DiffreasonError)]
        order = sorted(runs, key=lambda i: -len(prepared[i][0]))
        results: list = [p if isinstance(p, DiffreasonError) else None for p in prepared]
        for start in range(0, len(order), self.max_batch_size):
            chunk = order[start : start + self.max_batch_size]
            batch = [prepared[i] for i in chunk]
            for i, res in zip(chunk, self._run(batch, chunk, trace, callback, step_hook, on_canvas)):
                results[i] = res
        return results

    # -- internals --------------------------------------------------------------------------------------------------

    def _prepare(self, r: GenerationRequest) -> tuple[list[int], CanvasTemplate | None, int, int, int]:
        """(prompt ids, template, seed, canvases, max_new_tokens) of a request, checked."""
        tok = self.lm.tokenizer
        if isinstance(r.prompt, str):
            ids = self.lm.encode_prompt(r.prompt)
        elif isinstance(r.prompt, (bytes, bytearray)):  # (its bytes would read as token ids)
            raise ConfigError("a prompt is a string or a sequence of integer token ids, not bytes: decode it first")
        else:
            try:  # (token ids: ints, numpy's or 0-d tensors, never a float or string to be truncated or parsed)
                ids = [operator.index(t) for t in r.prompt]
            except TypeError:
                try:
                    odd = next(t for t in r.prompt if not isinstance(t, numbers.Integral))
                    what = f"a {type(r.prompt).__name__} holding a {type(odd).__name__}"
                except (TypeError, StopIteration):
                    what = type(r.prompt).__name__
                raise ConfigError(f"a prompt is a string or a sequence of integer token ids, not {what}") from None
            if not ids:
                ids = [tok.bos_token_id]
            bad = [t for t in ids if not 0 <= t < self.lm.vocab_size]
            if bad:
                raise ConfigError(f"prompt token {bad[0]} is outside the vocabulary [0, {self.lm.vocab_size})")
        canvas = self.lm.canvas_length
        default = getattr(self.model.generation_config, "max_new_tokens", None) or 256
        template = r.template
        if template is not None and not isinstance(template, CanvasTemplate):
            raise ConfigError(f"template is a CanvasTemplate (or None), not a {type(template).__name__}")
        if r.max_new_tokens is not None and (isinstance(r.max_new_tokens, bool) or not isinstance(
                r.max_new_tokens, numbers.Integral)):
            raise ConfigError(f"max_new_tokens must be an integer of at least 1, got {r.max_new_tokens!r}")
        if template is not None:
            if template.vocab_size > self.lm.vocab_size:
                raise TemplateError(
                    f"template is over a vocabulary of {template.vocab_size}, the model's has {self.lm.vocab_size}"
                )
            # a template over the tokenizer's ids on a model whose embedding has more rows (padded past the
            # tokenizer): the rows no token id names are never allowed where the template restricts a position
            template = template.with_vocab(self.lm.vocab_size)
            if r.max_new_tokens is not None and r.max_new_tokens < len(template):
                raise TemplateError(f"max_new_tokens={r.max_new_tokens} is shorter than the template ({len(template)})")
            # (an EOS before a token the template requires would end the output without it: kept out there)
            template = template.ending_at_its_end(tok.eos_token_id, self._pad_id())
            default = len(template)
        max_new = r.max_new_tokens if r.max_new_tokens is not None else default
        if max_new < 1:
            raise ConfigError(f"max_new_tokens must be at least 1, got {max_new}")
        seed = r.seed
        if isinstance(seed, torch.Tensor) and seed.ndim == 0 and not seed.is_floating_point():
            seed = int(seed)
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**64:
            raise ConfigError(f"seed must be an integer in [0, 2**64), got {r.seed!r}")  # (torch's generators')
        max_new = self.lm.fit_to_context(len(ids), max_new, len(template) if template is not None else 0)
        return ids, template, int(seed), -(-max_new // canvas), max_new

    @torch.inference_mode()
    def _run(self, batch, request_ids, trace, callback, step_hook, on_canvas=None) -> list[GenerationResult]:
        """One batch of B prepared requests (`_prepare`), in the stages of transformers' `DiffusionGemma.generate`:

        0. `_start`: the prompts left-padded to [B, P], one generator per request, an empty KV cache;
        then canvas by canvas (k = 0, 1, ...), over the A rows still generating:
        1. `_encode`: what the cache lacks — the prompts [A, P], then the last committed canvas [A, C] — into it;
        2. `_denoise`: a fresh canvas [A, C], constrained by the templates, denoised over the cache until every row
           has stopped (each step `_denoising_step`);
        3. `_commit`: the argmax canvas [A, C] to the results and as the cache's next input; rows that are done leave
           the batch and the cache;
        4. `_results`: one GenerationResult per request, in batch order.
        """
        t0 = time.perf_counter()
        run = self._start(batch, request_ids)
        for k in range(run.n_canvases):
            self._encode(run)
            canvas = self._denoise(run, k, trace, callback, step_hook)
            if not self._commit(run, canvas, on_canvas):
                break
        return self._results(run, time.perf_counter() - t0, trace)

    def _pad_id(self) -> int:
        pad = self.lm.tokenizer.pad_token_id
        return pad if pad is not None else 0

    def _start(self, batch, request_ids) -> _Batch:
        """0. The inputs of B prepared requests: prompt ids left-padded to [B, P] (P: the longest prompt) with their
        attention [B, P] (False at padding) and positions — shared [1, P] as transformers' without padding, per row
        [B, P] skipping the pads with it; one generator per request, seeded by it; an empty KV cache."""
        model, device = self.model, self.device
        B = len(batch)
        lens = torch.tensor([len(b[0]) for b in batch])
        P = int(lens.max())
        padded = bool((lens != P).any())
        input_ids = torch.full((B, P), self._pad_id(), dtype=torch.long)
        attention = torch.zeros((B, P), dtype=torch.bool)
        for i, (ids, *_) in enumerate(batch):
            input_ids[i, P - len(ids) :] = torch.tensor(ids)
            attention[i, P - len(ids) :] = True
        input_ids, attention, lens = input_ids.to(device), attention.to(device), lens.to(device)
        if padded:
            enc_pos = (attention.cumsum(-1) - 1).clamp(min=0).to(torch.int32)
        else:
            enc_pos = torch.arange(P, dtype=torch.int32, device=device)[None]
        generators = []
        for _, _, seed, *_ in batch:
            g = torch.Generator(device=device)
            g.manual_seed(seed)
            generators.append(g)
        return _Batch(
            requests=list(batch),
            request_ids=request_ids,
            prompt_lens=lens,
            prompt_len=P,
            padded=padded,
            generators=generators,
            n_canvases=max(b[3] for b in batch),
            cache=DynamicCache(config=model.config.get_text_config(decoder=True)),
            alive=list(range(B)),
            new_ids=input_ids,
            attention=attention,
            enc_pos=enc_pos,
            out_tokens=[[] for _ in range(B)],
            steps=[[] for _ in range(B)],
            early=[[] for _ in range(B)],
            finished=[False] * B,
            traces=[[] for _ in range(B)],
        )

    def _encode(self, run: _Batch) -> None:
        """1. Encode what the cache lacks — `run.new_ids` [A, L] (the prompts, L = P; later the last committed canvas,
        L = C) at positions `run.enc_pos` [A or 1, L] — into `run.cache`, causally, under `run.attention`
        [A, P + k·C] (the cache's positions once these are in; False at prompt padding)."""
        model = self.model
        t = self._tick()
        enc_mask = model.model.encoder.create_masks_for_generate(
            config=model.config,
            inputs_embeds=torch.empty(
                (len(run.alive), run.new_ids.shape[1], 0), dtype=model.dtype, device=self.device
            ),
            attention_mask=run.attention,
            past_key_values=run.cache,
            position_ids=run.enc_pos,
        )
        model.model.encoder(
            input_ids=run.new_ids, attention_mask=enc_mask, past_key_values=run.cache, position_ids=run.enc_pos
        )
        self.stats.encode += self._tock(t)

    def _denoise(self, run: _Batch, k: int, trace, callback, step_hook) -> _Canvas:
        """2. Canvas k of the A alive rows: a fresh canvas [A, C] per row, constrained by its template's part on
        canvas k (`_canvas_part`: past a final EOS, pad — neither sampled nor counted by the stop rule), its decoder
        attention [A, P + k·C + C] over [cache; canvas] and positions [A or 1, C]; denoised (`_denoising_step`)
        until every row has stopped — converged, or out of steps. The cache is only read."""
        lm, model, device = self.lm, self.model, self.device
        C, V = lm.canvas_length, lm.vocab_size
        templates = [self._canvas_part(run.requests[i][1], k) for i in run.alive]
        t = self._tick()
        constraint = CanvasConstraint.from_templates(templates, device=device)
        state = self.sampler.init_state(
            len(run.alive), C, V, [run.generators[i] for i in run.alive], constraint, device
        )
        self.stats.constraint += self._tock(t)
        attention = torch.nn.functional.pad(run.attention, (0, C), value=True)
        arange_c = torch.arange(C, dtype=torch.int32, device=device)
        if run.padded:
            positions = (run.prompt_lens[run.alive, None] + k * C + arange_c).to(torch.int32)
        else:
            positions = (run.prompt_len + k * C + arange_c)[None]
        mask = model.model.decoder.create_diffusion_decoder_attention_mask(
            config=model.config,
            inputs_embeds=state.canvas.unsqueeze(-1),
            past_key_values=run.cache,
            decoder_attention_mask=attention,
        )
        canvas = _Canvas(index=k, templates=templates, state=state, attention=attention, positions=positions, mask=mask)
        views: dict = {}  # the active rows -> (cache, masks, positions, free positions), while they stay the same
        while not bool(state.done.all()):
            self._denoising_step(run, canvas, views, trace, callback, step_hook)
        return canvas

    def _canvas_part(self, template: CanvasTemplate | None, k: int) -> CanvasTemplate:
        """A row's template on canvas k (unconstrained without one). Past the end of a template whose last position
        fixes EOS, pad: what the commit turns those positions into anyway."""
        C, eos = self.lm.canvas_length, self.lm.tokenizer.eos_token_id
        if template is None:
            return CanvasTemplate.unconstrained(C, self.lm.vocab_size)
        return template.canvas(k, C, template.fill_after_end(eos, self._pad_id()))

    def _denoising_step(self, run: _Batch, canvas: _Canvas, views: dict, trace, callback, step_hook) -> None:
        """2.a One step of the R rows of `canvas` still denoising (R ≤ A): the decoder's logits [R, C, V] over
        [cache; canvas rows] with the rows' self-conditioning logits, then the sampler's acceptance and re-noising
        (and `step_hook`) in place on `canvas.state`; traced / reported per row when asked."""
        state = canvas.state
        rows = state.active_rows()
        t = self._tick()
        whole = rows.numel() == state.batch_size
        key = None if whole else tuple(rows.tolist())
        if key not in views:  # (memoised while the active rows stay the same; subsets only shrink)
            views.clear()
            view = (run.cache, canvas.mask, canvas.positions) if whole else self._rows_view(
                rows, state.batch_size, run.cache, canvas.mask, canvas.positions)
            free = self._free_positions(canvas, rows, whole)
            # the free positions' logits come apart when the sampler takes them (`takes_free_logits`); the softmax
            # of their self-conditioning logits, pending from the last step, is then fed as it is (float32)
            handoff = free is not None and self.sampler.takes_free_logits(state, rows, *free[1].shape[1:])
            views[key] = (*view, free, handoff)
        step_cache, mask, pos, free, handoff = views[key]
        if not (handoff and self.model.dtype == torch.float32):
            state.settle()
        sc_probs = state.pending[2] if state.pending is not None else None
        sc = state.self_conditioning  # None at the first step: the model then uses a zero signal
        if sc is not None:  # fed back in the model's dtype, as transformers does (a bfloat16 model: rounded)
            sc = (sc if whole else sc[rows]).to(self.model.dtype)
        inputs = dict(decoder_input_ids=state.canvas if whole else state.canvas[rows], past_key_values=step_cache,
                      self_conditioning_logits=sc, decoder_attention_mask=mask, decoder_position_ids=pos)
        with self.forward_context():
            free_logits = None
            if free is None:  # the sampler's statistics are float32 whatever the model's dtype
                logits = self.model(**inputs).logits.float()
            elif handoff:
                logits, free_logits = free_forward.forward(self.model, free[0], out=free[1], split=True,
                                                           self_conditioning_probs=sc_probs, **inputs)
            else:
                logits = free_forward.forward(self.model, free[0], out=free[1], **inputs)
        self.stats.forward += self._tock(t)
        t = self._tick()
        out = self.sampler.step(logits, state, rows, free_logits=free_logits)
        if step_hook is not None:
            step_hook(state, rows)
        self.stats.sampler += self._tock(t)
        self.stats.steps += 1
        self.stats.canvas_steps += rows.numel()
        if trace or callback is not None:
            self._record(
                state, out, canvas.index, run.alive, run.request_ids, run.traces if trace else None, callback
            )

    def _commit(self, run: _Batch, canvas: _Canvas, on_canvas: CanvasCallback | None) -> bool:
        """3. Commit canvas k: the argmax canvas [A, C] — each slot as the best complete path of its automaton — with,
        as transformers does, the tokens after EOS turned into pad, appended to each row's results (`on_canvas` told).
        Rows that are done (an EOS, or all their canvases) leave the batch and the cache; the others' committed
        canvases [A', C] become what the cache lacks (`_encode` next). False when no canvas follows."""
        device, eos, pad = self.device, self.lm.tokenizer.eos_token_id, self._pad_id()
        state, k = canvas.state, canvas.index
        t = self._tick()
        committed = self.sampler.commit(state, canvas.templates)
        self.stats.constraint += self._tock(t)
        is_eos = committed == eos if eos is not None else torch.zeros_like(committed, dtype=torch.bool)
        eos_seen = is_eos.cumsum(-1)
        after_eos = (eos_seen > 0) & ~((eos_seen == 1) & is_eos)
        committed = committed.masked_fill(after_eos, pad)
        has_eos = is_eos.any(-1).tolist()
        for j, i in enumerate(run.alive):
            run.out_tokens[i].extend(committed[j].tolist())
            run.steps[i].append(int(state.steps_taken[j]))
            run.early[i].append(bool(state.stopped_early[j]))
            run.finished[i] = has_eos[j]
            if on_canvas is not None and on_canvas(run.request_ids[i], k, committed[j].tolist()):
                run.ended.add(i)

        keep = [j for j, i in enumerate(run.alive)
                if not run.finished[i] and i not in run.ended and k + 1 < run.requests[i][3]]
        if not keep or k + 1 == run.n_canvases:
            return False
        if len(keep) < len(run.alive):
            run.cache.batch_select_indices(torch.tensor(keep, device=device))
        keep_t = torch.tensor(keep, device=device)
        run.alive = [run.alive[j] for j in keep]
        run.new_ids = committed[keep_t]
        run.attention = canvas.attention[keep_t]
        run.enc_pos = canvas.positions[keep_t] if run.padded else canvas.positions
        return True

    def _results(self, run: _Batch, seconds: float, trace: bool) -> list[GenerationResult]:
        """4. One result per request of the batch, in batch order: its committed tokens up to the first EOS and at most
        its max_new_tokens (canvases come whole), decoded, beside the raw canvases (pad after EOS, as transformers
        returns them) and the steps each canvas took."""
        eos = self.lm.tokenizer.eos_token_id
        results = []
        for i, (ids, *_rest, max_new) in enumerate(run.requests):
            raw = run.out_tokens[i]
            end = raw.index(eos) if eos is not None and eos in raw else len(raw)
            tokens = raw[: min(end, max_new)]
            results.append(
                GenerationResult(
                    prompt_ids=list(ids),
                    tokens=tokens,
                    raw_tokens=raw,
                    text=self.lm.tokenizer.decode(tokens, skip_special_tokens=True),
                    steps=run.steps[i],
                    stopped_early=run.early[i],
                    finished=run.finished[i] and end < max_new,
                    seconds=seconds,
                    trace=run.traces[i] if trace else None,
                )
            )
        return results

    def _free_positions(self, canvas: _Canvas, rows, whole: bool):
        """(free_forward.Positions, a logits buffer) of the canvas rows `rows` when their forward skips fixed
        positions (fast draws, `free_logits`, at least 15 % of the positions fixed; the reference draws keep the
        model's own forward, for parity), else None. The buffer, -inf where nothing is written, serves every step of
        these rows."""
        constraint = canvas.state.constraint
        if not self.free_logits or self.sampler.config.draws != "fast" or constraint is None:
            return None
        where = free_forward.Positions.of(constraint.fixed if whole else constraint.fixed[rows])
        if where.share > 0.85:  # (code-small, 8 canvases: even at about 85-90 % free)
            return None
        b, C = where.shape
        return where, torch.full((b, C, self.lm.vocab_size), float("-inf"), device=self.device)

    @staticmethod
    def _rows_view(rows, batch_size, cache, full_mask, dec_pos):
        """Cache, masks and positions for the subset `rows` of the canvas batch."""
        sub = copy.copy(cache)
        sub.layers = []
        for layer in cache.layers:
            layer = copy.copy(layer)
            if getattr(layer, "keys", None) is not None and layer.keys.numel():
                layer.keys, layer.values = layer.keys[rows], layer.values[rows]
            sub.layers.append(layer)
        mask = {
            name: (m[rows] if isinstance(m, torch.Tensor) and m.shape[0] == batch_size else m)
            for name, m in full_mask.items()
        }
        pos = dec_pos[rows] if dec_pos.shape[0] == batch_size and batch_size > 1 else dec_pos
        return sub, mask, pos

    def _record(self, state: DenoiseState, out: StepOutput, k, alive, request_ids, traces, callback) -> None:
        for j, row in enumerate(out.rows.tolist()):
            i = alive[row]
            st = StepTrace(
                canvas_index=k,
                step=int(state.steps_taken[row]),
                canvas=state.canvas[row].tolist(),
                argmax=state.argmax[row].tolist(),
                accepted=out.accepted[j].tolist(),
                mean_entropy=float(out.mean_entropy[j]),
            )
            if traces is not None:
                traces[i].append(st)
            if callback is not None:
                callback(request_ids[i], st)

    def _tick(self) -> float:
        if self.profile and self.device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()

    def _tock(self, t: float) -> float:
        if self.profile and self.device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t
