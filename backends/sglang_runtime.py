"""SGLang runtime plugin: constrained renoising and step counts for DiffusionGemma servers.

Install diffreason next to SGLang and every server process picks this up through the `sglang.srt.plugins` entry
point (`SGLANG_PLUGINS=diffreason` whitelists it):

    sglang serve --model-path diffreason/weights/json-small --dllm-algorithm Gemma4Renoise

`register()` puts `DiffreasonRenoise` — a `Gemma4Renoise` subclass — under the same registry key (DiffusionGemma
insists on that name) and adds small hooks so step counts reach the client and outputs are checked. What changes:

- requests may carry `json_schema` or `regex` (standard sampling params), or a canvas template in
  `custom_params={"diffreason_template": "<JSON list: per position a token id, null, or a list of allowed ids>"}`;
  `validate_request` compiles the constraint once with `diffreason.structured.constraint_template` (the CLI's and the
  sgl backend's function) and answers HTTP 400 with a clear message when it cannot. A constraint is data (a
  `json_schema` string is JSON text, never a path on the server); its sizes are checked against the request's
  max_new_tokens before anything is built, and its compile is bounded in CPU time and memory, so one request can
  neither stall nor exhaust the server; a refused request leaves nothing behind;
- `step()` calls `RenoiseSampler.step` — the local engine's sampler, with SGLang's random stream
  (`draws="sglang"`) — once for all the batch's unfinished rows, so unconstrained requests are token-identical to
  upstream and constrained ones follow their masks; finished canvases commit slots through their automata exactly as
  the local engine does. Masks stay compact (a template's token classes, copied to the device once per request) and
  are expanded on the device per batch (rebuilt only when the batch's rows change); a step reads back from the device
  once; a carried row keeps its canvas, not its last [C, V] logits;
- the denoising steps of every canvas reach the client as `meta_info["diffreason_steps"]` (one entry per canvas:
  in a non-streamed response all of them; a stream carries each canvas's count with the first chunk after it, and
  SGLang's tokenizer manager accumulates them, so every chunk's meta holds the canvases so far — except under
  `--incremental-streaming-output`, where upstream slices accumulated meta by token offset);
- a request's progress through its template (the canvases it has finished) advances only when one of its canvases
  finishes in `step()`, never in `init_step_state` — SGLang's FDFO loop (the default) re-runs `init_step_state` for
  every row of a batch whenever any row is new and keeps the carried rows' old states;
- a request's entry (template, schema, unsent steps) is freed when its last output is streamed, and at once when
  SGLang reports it aborted (`send_abort_output`: aborted while queued, rejected, retracted);
- a finished JSON output is checked against its schema as the CLI checks one: one that does not validate (a compiler
  bug) finishes with an error (HTTP 500 and the reason), never as a value passed on as valid.

Upstream's other rules stay: penalties, logprobs, logit_bias, ebnf and structural tags are refused as before.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from http import HTTPStatus
from dataclasses import dataclass, field
from typing import Any

import torch
from sglang.srt.dllm.algorithm.gemma4_renoise import Gemma4Renoise
from sglang.srt.managers.schedule_batch import FINISH_ABORT

from diffreason.canvas import CanvasConstraint, CanvasTemplate, DeviceMasks
from diffreason.errors import DiffreasonError
from diffreason.sampler import DenoiseState, RenoiseSampler, SamplerConfig
from diffreason.structured import (
    TEMPLATE_PARAM,
    check_output,
    constraint_template,
    template_from_positions,
)

logger = logging.getLogger(__name__)

STEPS_KEY = "diffreason_steps"
MAX_TRACKED = 65536  # a safety net: requests held at once (oldest dropped first); entries are freed on finish/abort
OUTPUT_CHECK_SECONDS = 5.0  # how long the scheduler waits for jsonschema's verdict on one finished output
COMPILE_SECONDS = 10.0  # CPU time one request's constraint may take to compile in the scheduler
COMPILE_MEMORY = 2 * 2**30  # and how far it may grow the scheduler's memory


@dataclass
class _Request:
    template: CanvasTemplate | None = None
    schema: Any = None  # the JSON Schema its output is checked against when it finishes (None: no check)
    fill: int | None = None  # past a final EOS on the template's last canvas: pad (None: free)
    canvases_done: int = 0  # canvases finished in `step()`: the index of the canvas the request denoises now
    steps: list[int] = field(default_factory=list)  # per finished canvas, not yet sent to the client


class _Registry:
    """Per-request data shared by `validate_request` and the algorithm (both run in the scheduler process)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._items: OrderedDict[str, _Request] = OrderedDict()

    def get(self, rid: str) -> _Request:
        with self._lock:
            item = self._items.get(rid)
            if item is None:
                item = self._items[rid] = _Request()
                while len(self._items) > MAX_TRACKED:
                    self._items.popitem(last=False)
            return item

    def take_steps(self, rid: str) -> list[int]:
        with self._lock:
            item = self._items.get(rid)
            if item is None or not item.steps:
                return []
            steps, item.steps = item.steps, []
            return steps

    def drop(self, rid: str) -> None:
        with self._lock:
            self._items.pop(rid, None)

    def __contains__(self, rid: str) -> bool:
        with self._lock:
            return rid in self._items

    def schema_of(self, rid: str) -> tuple[Any, int]:
        """(the JSON Schema a request's output is checked against — None: no check —, its template's length)."""
        with self._lock:
            item = self._items.get(rid)
            if item is None or item.schema is None:
                return None, 0
            return item.schema, len(item.template)


REQUESTS = _Registry()
_DROP_AT_FINISH = False  # a finished request's entry is dropped when it finishes (no output hook drops it)
_canvas_length: int | None = None
_tokenizers: dict[str, Any] = {}


def _tokenizer(req):
    if getattr(req, "tokenizer", None) is not None:
        return req.tokenizer
    from sglang.srt.runtime_context import get_model
    from transformers import AutoTokenizer

    path = get_model().model_path
    if path not in _tokenizers:
        _tokenizers[path] = AutoTokenizer.from_pretrained(path)
    return _tokenizers[path]


def compile_request(req, canvas_length: int) -> tuple[CanvasTemplate | None, Any]:
    """(the request's canvas template, the JSON Schema its output must validate against) — (None, None) when it is
    unconstrained. The constraint is data: a `json_schema` string is JSON text, never a path on the server. Sizes
    are checked against the request's max_new_tokens before anything is built, and the compile is bounded in CPU time
    and memory (`constraint_template`). Raises DiffreasonError with a client-facing message."""
    sp = req.sampling_params
    custom = getattr(sp, "custom_params", None) or {}
    raw_template = custom.get(TEMPLATE_PARAM) if isinstance(custom, dict) else None
    given = [name for name, v in (("json_schema", sp.json_schema), ("regex", sp.regex), (TEMPLATE_PARAM, raw_template))
             if v is not None]
    if not given:
        return None, None
    if len(given) > 1:
        raise DiffreasonError(f"give one constraint, not {' and '.join(given)}")
    tokenizer = _tokenizer(req)
    compiled = None
    if raw_template is not None:
        template = template_from_positions(raw_template, len(tokenizer), sp.max_new_tokens)
    else:
        template, compiled = constraint_template(tokenizer, canvas_length, regex=sp.regex,
                                                 json_schema=sp.json_schema, max_tokens=sp.max_new_tokens,
                                                 compile_seconds=COMPILE_SECONDS, compile_memory=COMPILE_MEMORY)
    # (an EOS before a token the template requires would finish the request without it: kept out there)
    template = template.ending_at_its_end(tokenizer.eos_token_id, tokenizer.pad_token_id or 0)
    if sp.max_new_tokens is not None and sp.max_new_tokens < len(template):
        raise DiffreasonError(
            f"max_new_tokens={sp.max_new_tokens} is shorter than the constrained output ({len(template)} tokens)"
        )
    return template, None if compiled is None else compiled.schema


class DiffreasonRenoise(Gemma4Renoise):
    """Gemma4Renoise with diffreason constraints, sharing the local engine's sampler."""

    @classmethod
    def validate_request(cls, req) -> str | None:
        sp = req.sampling_params
        # Upstream refuses json_schema / regex outright; it judges everything else.
        saved = sp.json_schema, sp.regex
        sp.json_schema = sp.regex = None
        try:
            error = super().validate_request(req)
        finally:
            sp.json_schema, sp.regex = saved
        if error:
            return error
        REQUESTS.drop(req.rid)  # (an entry left under a reused id made its request skip its first canvas's template)
        try:
            template, schema = compile_request(req, _canvas_length or 256)
        except DiffreasonError as exc:
            return f"diffreason: {exc}"
        except Exception as exc:  # never let a malformed request take the scheduler down
            logger.exception("diffreason could not compile request %s", req.rid)
            return f"diffreason: cannot compile the constraint ({type(exc).__name__}: {exc})"
        if template is not None and getattr(sp, "ignore_eos", False):  # (its canvases past the EOS ran free)
            return "diffreason: ignore_eos is not supported with a constraint: its output ends at the template's end"
        if template is not None and not getattr(sp, "skip_special_tokens", True):  # (the text held the pads)
            return ("diffreason: skip_special_tokens=false is not supported with a constraint: the pad tokens that "
                    "end its slots early would be text")
        if template is not None:
            entry = REQUESTS.get(req.rid)
            entry.template, entry.schema = template, schema
            tokenizer = _tokenizer(req)
            entry.fill = template.fill_after_end(tokenizer.eos_token_id, tokenizer.pad_token_id or 0)
            # Compiled here: keep SGLang's grammar backend (xgrammar) from compiling it again for nothing.
            sp.json_schema = sp.regex = None
        return None

    def __init__(self, config):
        super().__init__(config)
        global _canvas_length
        _canvas_length = self.block_size
        self._masks: DeviceMasks | None = None  # device copies of the requests' mask tables
        self._constraint_for: tuple[list, CanvasConstraint | None] | None = None  # (last batch's templates, constraint)
        self.sampler = RenoiseSampler(
            SamplerConfig(
                max_denoising_steps=self.max_denoising_steps,
                entropy_bound=self.entropy_bound,
                t_max=self.t_max,
                t_min=self.t_min,
                stability_threshold=self.stability_threshold,
                confidence_threshold=self.confidence_threshold,
                draws="sglang",
            )
        )

    def init_step_state(self, forward_batch) -> list[Any]:
        """A fresh canvas per row, in the allowed sets of the canvas its request is on. No side effect: SGLang's FDFO
        loop calls this for every row of a batch whenever any row is new, and keeps the carried rows' old states."""
        device = forward_batch.input_ids.device
        states = []
        for index in range(forward_batch.batch_size):
            rid = forward_batch.rids[index] if forward_batch.rids else str(index)
            request = REQUESTS.get(rid)
            canvas_index = request.canvases_done  # (read only)
            template = None
            if request.template is not None and canvas_index < request.template.num_canvases(self.block_size):
                template = request.template.canvas(canvas_index, self.block_size, request.fill).with_vocab(
                    self.vocab_size)
            generator = torch.Generator(device=device)
            generator.manual_seed(self._request_seed(forward_batch, index))
            constraint = (CanvasConstraint.from_templates([template], device, self._device_masks(device))
                          if template is not None else None)
            denoise = self.sampler.init_state(1, self.block_size, self.vocab_size, [generator], constraint, device)
            denoise.constraint = None  # (the batch's constraint is built in step(), for the rows it advances)
            states.append({
                # the keys upstream's prepare_inputs reads
                "step": self.max_denoising_steps,
                "current": denoise.canvas[0],
                "self_conditioning": None,
                "finished": False,
                # ours
                "rid": rid,
                "denoise": denoise,
                "template": template,
            })
        return states

    def _device_masks(self, device) -> DeviceMasks:
        if self._masks is None or self._masks.device != torch.device(device):
            self._masks = DeviceMasks(device)
        return self._masks

    def _batch_constraint(self, templates: list, device) -> CanvasConstraint | None:
        """The constraint of the rows a step advances (its dense sets expanded on the device at the first step that
        reads them); kept while the rows stay the same."""
        cached = self._constraint_for
        if cached is not None and len(cached[0]) == len(templates) and all(
                a is b for a, b in zip(cached[0], templates)):
            return cached[1]
        parts = [t if t is not None else CanvasTemplate.unconstrained(self.block_size, self.vocab_size)
                 for t in templates]
        constraint = CanvasConstraint.from_templates(parts, device, self._device_masks(device))
        self._constraint_for = (list(templates), constraint)
        return constraint

    def step(self, forward_batch, full_logits: torch.Tensor, states: list[Any]) -> list[bool]:
        """One denoising step of every unfinished row, as one batch through the sampler (see the module docstring)."""
        logits = full_logits.view(forward_batch.batch_size, self.block_size, self.vocab_size)
        active = [i for i, s in enumerate(states) if not s["finished"]]
        if active:
            rows = [states[i] for i in active]
            if len(active) < len(states):
                logits = logits[torch.tensor(active, device=logits.device)]
            self._advance(logits, rows)
        self._write_input_ids(forward_batch, states)
        return [s["finished"] for s in states]

    def _advance(self, logits: torch.Tensor, rows: list[dict]) -> None:
        templates = [s["template"] for s in rows]
        batch = _stack([s["denoise"] for s in rows], self._batch_constraint(templates, logits.device))
        out = self.sampler.step(logits, batch)
        # the step's one read-back: which rows finished, their steps
        done, left, taken = torch.stack([batch.done.int(), batch.steps_left, batch.steps_taken]).tolist()
        committed = None
        if any(done):
            committed = self.sampler.commit(batch, [t if d else None for t, d in zip(templates, done)])
        going = [j for j, d in enumerate(done) if not d]
        embeds = None
        if going:
            # Self-conditioning as upstream feeds it: the step's probabilities @ embedding table (sharded-vocab aware).
            probs = out.probs if len(going) == len(rows) else out.probs[going]
            embeds = self._soft_embeddings(probs.reshape(-1, self.vocab_size)).view(len(going), self.block_size, -1)
        position = {j: k for k, j in enumerate(going)}
        for j, state in enumerate(rows):
            state["denoise"] = _row(batch, j)
            state["step"] = left[j]
            if done[j]:
                state["finished"] = True
                state["current"] = committed[j]
                state["self_conditioning"] = None
                request = REQUESTS.get(state["rid"])
                request.canvases_done += 1
                request.steps.append(taken[j])
            else:
                state["current"] = batch.canvas[j]
                state["self_conditioning"] = embeds[position[j]]


def _stack(rows: list[DenoiseState], constraint: CanvasConstraint | None) -> DenoiseState:
    """One DenoiseState for the rows a step advances (each row's own state is one canvas)."""
    return DenoiseState(
        canvas=torch.cat([r.canvas for r in rows]),
        argmax=torch.cat([r.argmax for r in rows]),
        history=torch.cat([r.history for r in rows], dim=1),
        steps_left=torch.cat([r.steps_left for r in rows]),
        steps_taken=torch.cat([r.steps_taken for r in rows]),
        done=torch.cat([r.done for r in rows]),
        stopped_early=torch.cat([r.stopped_early for r in rows]),
        constraint=constraint,
        generators=[g for r in rows for g in r.generators],
    )


def _row(batch: DenoiseState, j: int) -> DenoiseState:
    """Row j of a stepped batch as that row's own state, without the step's [C, V] logits (a carried row keeps only
    what the next step reads)."""
    one = slice(j, j + 1)
    return DenoiseState(
        canvas=batch.canvas[one], argmax=batch.argmax[one], history=batch.history[:, one],
        steps_left=batch.steps_left[one], steps_taken=batch.steps_taken[one], done=batch.done[one],
        stopped_early=batch.stopped_early[one], constraint=None, generators=[batch.generators[j]],
    )


Algorithm = DiffreasonRenoise


# -- hooks: step counts into meta_info, cleanup -----------------------------------------------------------------------


def _steps_into_output(original, streamer, reqs, *args, **kwargs):
    """SGLang's extension point for per-request output fields (`build_additional_customized_info`, called with the
    requests of one output batch): each gets the step counts of its canvases finished since its last output (a
    non-streamed request is output once, when it finishes, so it gets all of them). A finished request's entry is
    freed here, after its last output."""
    out = original(streamer, reqs, *args, **kwargs)
    out = dict(out or {})
    out[STEPS_KEY] = [REQUESTS.take_steps(req.rid) for req in reqs]
    for req in reqs:
        if req.finished():
            REQUESTS.drop(req.rid)
    return out


def _free_aborted(original, scheduler, abort_req, req, *args, **kwargs):
    """A request SGLang ends outside the output stream (aborted while queued, rejected, retracted) frees its entry."""
    try:
        return original(scheduler, abort_req, req, *args, **kwargs)
    finally:
        REQUESTS.drop(req.rid)


def _check_finished_output(original, scheduler, req, *args, **kwargs):
    """When a request with a JSON Schema finishes at its template's end, its output (through the EOS that ends it) is
    checked against the schema as the CLI checks one (the template makes it valid; a failure is a bug): an output
    that does not validate, or that the check cannot decide in time, finishes the request with an error (HTTP 500
    with the reason) instead of a value passed on as valid. An output the request's own stop string, stop token or
    length cut earlier is a prefix the client asked for, not checked (its canvases after the cut never ran)."""
    out = original(scheduler, req, *args, **kwargs)
    if req.finished() and not isinstance(req.finished_reason, FINISH_ABORT):
        schema, length = REQUESTS.schema_of(req.rid)
        if _DROP_AT_FINISH:  # (no output hook takes the steps and drops the entry under the Rust server)
            REQUESTS.drop(req.rid)
        visible = list(req.output_ids_through_stop)
        if schema is not None and len(visible) >= length:
            text = _tokenizer(req).decode(visible, skip_special_tokens=True)
            try:
                check_output(schema, text, OUTPUT_CHECK_SECONDS)
            except DiffreasonError as exc:
                logger.error("diffreason: request %s: %s", req.rid, exc)
                req.finished_reason = FINISH_ABORT(f"diffreason: {exc}", HTTPStatus.INTERNAL_SERVER_ERROR,
                                                   "InternalServerError")
    return out


def register() -> None:
    """The `sglang.srt.plugins` entry point: called once in every SGLang process."""
    from sglang.srt.dllm import algorithm
    from sglang.srt.environ import envs
    from sglang.srt.managers.scheduler_components.output_streamer import SchedulerOutputStreamer
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    global _DROP_AT_FINISH
    algorithm.algo_name_to_cls["Gemma4Renoise"] = DiffreasonRenoise
    if envs.SGLANG_RUST_SERVER.get():  # (its egress takes no additional output fields)
        logger.warning("diffreason: SGLANG_RUST_SERVER is on: step counts are not reported")
        _DROP_AT_FINISH = True
    else:
        SchedulerOutputStreamer.has_additional_customized_info = True
        HookRegistry.register(
            "sglang.srt.managers.scheduler_components.output_streamer.SchedulerOutputStreamer"
            ".build_additional_customized_info", _steps_into_output, HookType.AROUND,
        )
    HookRegistry.register("sglang.srt.managers.scheduler.Scheduler.send_abort_output", _free_aborted,
                          HookType.AROUND)
    HookRegistry.register(
        "sglang.srt.dllm.mixin.scheduler.SchedulerDllmMixin._finish_dllm_request_if_needed",
        _check_finished_output, HookType.AROUND,
    )
    logger.info("diffreason: Gemma4Renoise now accepts json_schema / regex / %s", TEMPLATE_PARAM)
