"""`diffreason serve`: the local engine behind SGLang's `/generate` contract, so one client talks to it here and to a
plugin-enabled SGLang server on GPUs (SGLang refuses DiffusionGemma without CUDA).

    diffreason serve diffreason/weights/json-small --port 30000
    curl localhost:30000/generate -d '{"text": "a person", "sampling_params": {"json_schema": "{\"type\": \"integer\"}"}}'

The contract, as SGLang's server and the diffreason plugin answer it:
- `POST /generate` with `text` (a string, or a list: a list of answers) or `input_ids` (token ids, or a list of
  such lists), `sampling_params` (`max_new_tokens`,
  default 128; one constraint of `json_schema` (JSON text), `regex` or `custom_params.diffreason_template` — compiled
  by `diffreason.structured.constraint_template`, the plugin's function; `sampling_seed`, default 0) and `stream`;
  answers `{"text", "output_ids", "meta_info": {"id", "finish_reason", "prompt_tokens", "completion_tokens",
  "diffreason_steps"}}`. A stream sends one `data:` chunk per committed canvas (the text so far), then the full
  answer (every canvas's steps), then `data: [DONE]`.
- a request it cannot serve is HTTP 400 with `{"error": {"message": ...}}` (SGLang's shape), a finished JSON output
  that fails its schema HTTP 500 (a compiler bug, never passed on as valid; one jsonschema cannot finish checking in
  5 s — a pattern it backtracks on — is answered, with `meta_info.diffreason_unchecked` saying so); parameters
  upstream's Gemma4Renoise
  refuses (penalties, min_p, logit_bias, ebnf, structural tags, logprobs) are refused alike; others it ignores
  (temperature, top_p, top_k: the renoise schedule governs sampling) are ignored here too. `stop` (a string or a
  list) and `stop_token_ids` end an answer as SGLang ends it: the text stops before the first stop string or stop
  token, `finish_reason` is `{"type": "stop", "matched": ...}`, and `output_ids` end with the token that completed
  the stop string (before a stop token); an unconstrained answer's row leaves the batch at the canvas that holds the
  stop; a constrained output is checked against its schema whole, before the cut.
  `n` other than 1 is refused (send the text as a list, with other seeds).
- `GET /health`, `GET /get_model_info`.

Requests that arrive together run as one batch (`Engine.generate_batch`, up to `max_batch` rows, gathered for
`batch_wait` seconds): each row keeps its own seed's random stream, so an answer does not depend on what it was
batched with. A request whose client goes away (a closed stream, a dropped connection) is not run, or ends at its
next canvas; a batch runs to its end before the next starts. A constraint may take 10 s of CPU to compile.
Differences from SGLang: the seed is `sampling_seed` (SGLang's Gemma4Renoise seeds by request id and
refuses `sampling_seed`), so the same request gives the same tokens here every time.
"""

import asyncio
import json
import math
import queue
import threading
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from diffreason.client import cut_at_stop, settled_text
from diffreason.errors import ConfigError, DiffreasonError, TemplateError

DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's default
COMPILE_SECONDS = 10.0  # CPU time one request's constraint may take to compile (the SGLang plugin's bound)
OUTPUT_CHECK_SECONDS = 5.0  # how long jsonschema may take over one finished output (off the event loop)
REFUSED = {  # what upstream's Gemma4Renoise refuses, with the value that means "not used"
    "frequency_penalty": 0.0, "presence_penalty": 0.0, "repetition_penalty": 1.0, "min_new_tokens": 0, "min_p": 0.0,
    "logit_bias": None, "ebnf": None, "structural_tag": None,
}
REFUSED_REQUEST = ("return_logprob", "top_logprobs_num", "token_ids_logprob", "custom_logit_processor")
# SGLang's SamplingParams (0.5.23), which refuses any other key; these mean something the engine does not do, so any
# value but the default (given here) is refused too
SAMPLING_PARAMS = {"max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k", "min_p",
                   "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens", "n", "beam_width",
                   "json_schema", "regex", "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens",
                   "spaces_between_special_tokens", "no_stop_trim", "stream_interval", "logit_bias", "sampling_seed",
                   "custom_params", "watermark"}
# SGLang's GenerateReqInput (0.5.23): the fields a /generate body may have (the ones the engine does not use are read
# as SGLang would leave them, or refused above); another key is a mistake this server names (SGLang drops it unread)
REQUEST_FIELDS = {
    "audio_data", "background", "bootstrap_host", "bootstrap_pair_key", "bootstrap_port", "bootstrap_room",
    "cache_salt", "conversation_id", "custom_labels", "custom_logit_processor", "data_parallel_rank", "decode_tp_size",
    "disagg_prefill_dp_rank", "encoder_urls", "external_trace_header", "extra_key", "http_worker_ipc", "image_data",
    "image_max_dynamic_patch", "images_config", "input_embeds", "input_ids", "kv_hints", "log_metrics",
    "logprob_start_len", "lora_id", "lora_path", "max_dynamic_patch", "max_thinking_tokens", "min_dynamic_patch",
    "mm_content_hashes", "mm_hashes", "mm_processor_kwargs", "modalities", "multi_item_delimiter_indices",
    "need_wait_for_mm_inputs", "no_logs", "num_items_assigned", "positional_embed_overrides", "priority",
    "received_time", "require_reasoning", "return_bytes", "return_entropy", "return_flat_raw_output_top_logprobs",
    "return_flat_raw_top_logprobs", "return_flat_raw_top_logprobs_b64", "return_hidden_states", "return_indexer_topk",
    "return_logprob", "return_prompt_token_ids", "return_routed_experts", "return_sampling_mask",
    "return_text_in_logprobs", "rid", "routed_dp_rank", "routed_experts_start_len", "routing_key",
    "sampling_logprobs_mode", "sampling_params", "session_id", "session_params", "stream", "text", "token_ids_logprob",
    "token_indices_to_pool", "top_logprobs_num", "use_audio_in_video", "video_config", "video_data",
    "video_max_dynamic_patch", "watermark",
}
NOT_DONE = {"skip_special_tokens": True, "spaces_between_special_tokens": True, "no_stop_trim": False,
            "beam_width": None, "watermark": None}


class RequestError(DiffreasonError):
    """A request the server cannot serve: HTTP 400 with this message."""


@dataclass
class Job:
    rid: str
    prompt: str | list[int]  # text, or token ids
    template: Any
    schema: Any
    seed: int
    max_new_tokens: int
    chunks: queue.Queue | None = None  # a stream's committed canvases (index, tokens so far)
    stop: tuple = ()  # stop strings
    stop_ids: tuple = ()  # stop token ids
    done: Future = field(default_factory=Future)
    gone: threading.Event = field(default_factory=threading.Event)  # its client has gone: end it at the next canvas


def parse_request(body: Any, tokenizer, canvas_length: int, lm=None) -> tuple[list[Job], bool]:
    """The jobs of one /generate body (one per prompt), and whether its prompts came as a list (then a list of
    answers goes back, even of one); RequestError with a client-facing message. With `lm`, a prompt (and template)
    that would not fit the model's positions is refused here, before it reaches the batch."""
    from diffreason.structured import TEMPLATE_PARAM, constraint_template, template_from_positions

    if not isinstance(body, dict):
        raise RequestError("the body must be a JSON object")
    unknown = sorted(k for k in body if k not in REQUEST_FIELDS)
    if unknown:  # (a sampling_seed there was dropped unread, and seed 0 answered: QA, 2026-12-07)
        where = [k for k in unknown if k in SAMPLING_PARAMS]
        raise RequestError(f"unknown request field(s) {', '.join(map(repr, unknown))}"
                           + (f" ({', '.join(where)} belong(s) in sampling_params)" if where else ""))
    if body.get("input_ids") is not None:
        if body.get("text") is not None:
            raise RequestError("give text or input_ids, not both")
        texts = _prompt_ids(body["input_ids"], len(tokenizer))
        single = not isinstance(texts[0], list)
        texts = [texts] if single else texts
    else:
        texts = body.get("text", "")
        single = isinstance(texts, str)
        texts = [texts] if single else texts
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise RequestError("text must be a string or a non-empty list of strings")
        if any(not _unicode(t) for t in texts):
            raise RequestError("text holds a lone surrogate (not Unicode text)")
    params = body.get("sampling_params")
    params = {} if params is None else params
    if not isinstance(params, dict):
        raise RequestError("sampling_params must be an object")
    unknown = sorted(k for k in params if k not in SAMPLING_PARAMS)
    if unknown:
        raise RequestError(f"unknown sampling_params {', '.join(map(repr, unknown))} (SGLang refuses them too)")
    not_done = [k for k, default in NOT_DONE.items() if params.get(k, default) not in (default, None)]
    if not_done:
        raise RequestError(f"{', '.join(not_done)} other than the default is not supported")
    _check_sampling(params)
    refused = [k for k, unused in REFUSED.items() if params.get(k, unused) not in (unused, {}, [])]
    refused += [k for k in REFUSED_REQUEST if body.get(k)]
    if refused:
        raise RequestError("DiffusionGemma with Gemma4Renoise does not support request-level "
                           + ", ".join(refused) + "; sampling is governed by the renoise schedule.")
    if params.get("ignore_eos"):  # (they were ignored without a word: QA, 2026-12-07)
        raise RequestError("ignore_eos is not supported: the engine ends an answer at its EOS")
    if params.get("stop_regex"):
        raise RequestError("stop_regex is not supported; use stop strings")
    max_new = params.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
    if not isinstance(max_new, int) or isinstance(max_new, bool) or not 1 <= max_new <= 1_000_000:
        raise RequestError(f"max_new_tokens must be an integer in [1, 1000000], got {max_new!r}")
    seed = params.get("sampling_seed", 0)
    if seed is None:
        seed = 0
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**63:
        raise RequestError(f"sampling_seed must be an integer in [0, 2**63), got {seed!r}")
    n = params.get("n", 1)
    if n is not None and (n != 1 or isinstance(n, bool)):
        raise RequestError(f"n must be 1, got {n!r}: send the text as a list, with other sampling_seed values")
    stop = params.get("stop")
    stop = () if stop is None else (stop,) if isinstance(stop, str) else stop
    if not isinstance(stop, list | tuple) or not all(isinstance(x, str) and x and _unicode(x) for x in stop):
        raise RequestError(f"stop must be a non-empty string or a list of them, got {params.get('stop')!r}")
    stop_ids = params.get("stop_token_ids")
    stop_ids = () if stop_ids is None else stop_ids
    if not isinstance(stop_ids, list | tuple) or not all(
            isinstance(t, int) and not isinstance(t, bool) and 0 <= t < len(tokenizer) for t in stop_ids):
        raise RequestError(f"stop_token_ids must be a list of token ids in [0, {len(tokenizer)}), "
                           f"got {params.get('stop_token_ids')!r}")
    custom = params.get("custom_params")
    custom = {} if custom is None else custom
    if not isinstance(custom, dict):
        raise RequestError(f"custom_params must be an object, got {type(custom).__name__}")
    raw_template = custom.get(TEMPLATE_PARAM)
    given = [n for n, v in (("json_schema", params.get("json_schema")), ("regex", params.get("regex")),
                            (TEMPLATE_PARAM, raw_template)) if v is not None]
    if len(given) > 1:
        raise RequestError(f"give one constraint, not {' and '.join(given)}")
    template = schema = None
    try:
        if raw_template is not None:
            template = template_from_positions(raw_template, len(tokenizer), max_new)
        elif given:
            template, compiled = constraint_template(tokenizer, canvas_length, regex=params.get("regex"),
                                                     json_schema=params.get("json_schema"), max_tokens=max_new,
                                                     compile_seconds=COMPILE_SECONDS)
            schema = None if compiled is None else compiled.schema
    except DiffreasonError as exc:
        raise RequestError(str(exc)) from None
    if template is not None and max_new < len(template):
        raise RequestError(f"max_new_tokens={max_new} is shorter than the constrained output ({len(template)} tokens)")
    if lm is not None:  # (the engine cuts max_new_tokens to the positions left, as SGLang does)
        texts = [lm.encode_prompt(t) if isinstance(t, str) else t for t in texts]  # (encoded once, here)
        for ids in texts:
            try:
                lm.fit_to_context(max(1, len(ids)), max_new, len(template) if template is not None else 0)
            except DiffreasonError as exc:
                raise RequestError(str(exc)) from None
    rid = body.get("rid") if isinstance(body.get("rid"), str) else uuid.uuid4().hex
    if not _unicode(rid):
        raise RequestError("rid holds a lone surrogate (not Unicode text)")
    stream = bool(body.get("stream"))
    if stream and not single:
        raise RequestError("stream takes one text, not a list")
    return [Job(rid if single else f"{rid}-{i}", text, template, schema, seed, max_new,
                queue.Queue() if stream else None, tuple(stop), tuple(stop_ids)) for i, text in enumerate(texts)], \
        not single


def _unicode(text: str) -> bool:
    """Is `text` Unicode text (no lone surrogate, which JSON's `\\ud800` escape can carry)?"""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_sampling(params: dict) -> None:
    """The sampling parameters the renoise schedule ignores, checked as SGLang checks them (`SamplingParams.verify`):
    a request it would refuse is refused here too."""
    def number(key: str, default: float, ok, what: str) -> None:
        value = params.get(key, default)
        value = default if value is None else value
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not ok(value):
            raise RequestError(f"{key} must be {what}, got {params.get(key)!r}")

    number("temperature", 1.0, lambda t: t >= 0, "a non-negative finite number")
    number("top_p", 1.0, lambda p: 0 < p <= 1, "in (0, 1]")
    number("min_p", 0.0, lambda p: 0 <= p <= 1, "in [0, 1]")
    number("top_k", -1, lambda k: k == int(k) and (k == -1 or k >= 1), "-1 (disable) or an integer of at least 1")


def _prompt_ids(value: Any, vocab_size: int) -> list:
    """`input_ids` as SGLang takes them: one prompt (a non-empty list of token ids) or a non-empty list of them."""
    def is_id(t: Any) -> bool:
        return isinstance(t, int) and not isinstance(t, bool)

    prompts = value if isinstance(value, list) and value and isinstance(value[0], list) else [value]
    for prompt in prompts:
        if not isinstance(prompt, list) or not prompt or not all(is_id(t) for t in prompt):
            raise RequestError("input_ids must be a non-empty list of token ids, or a non-empty list of such lists")
        bad = [t for t in prompt if not 0 <= t < vocab_size]
        if bad:
            raise RequestError(f"input_ids: token {bad[0]} is outside the vocabulary [0, {vocab_size})")
    return value


class Batcher:
    """One worker thread that runs the jobs that arrive together as one engine batch."""

    def __init__(self, engine, max_batch: int = 16, batch_wait: float = 0.01):
        self.engine, self.max_batch, self.batch_wait = engine, max_batch, batch_wait
        self.jobs: queue.Queue[Job] = queue.Queue()
        self.batches: list[int] = []  # the size of every batch run (for tests and logs)
        threading.Thread(target=self._work, name="diffreason-batcher", daemon=True).start()

    def submit(self, job: Job) -> Future:
        self.jobs.put(job)
        return job.done

    def _work(self) -> None:
        from diffreason.engine import GenerationRequest

        while True:
            batch = [self.jobs.get()]
            deadline = time.monotonic() + self.batch_wait
            while len(batch) < self.max_batch:
                try:
                    batch.append(self.jobs.get(timeout=max(0.0, deadline - time.monotonic())))
                except queue.Empty:
                    break
            started = []
            for job in batch:  # (a job whose client left while it waited is not run)
                if job.done.set_running_or_notify_cancel() and not job.gone.is_set():
                    started.append(job)
                elif not job.done.done():
                    job.done.set_exception(RequestError("the client has gone"))
            if not started:
                continue
            batch = started
            self.batches.append(len(batch))
            requests = [GenerationRequest(j.prompt, j.template, j.seed, j.max_new_tokens) for j in batch]
            written: list[list[int]] = [[] for _ in batch]

            def on_canvas(index: int, canvas: int, tokens: list) -> bool:
                job = batch[index]
                if job.chunks is not None:
                    job.chunks.put((canvas, list(tokens)))
                written[index] += tokens
                # (its row ends here: no one reads the rest, or a stop has come — unless a constraint's output
                # must be checked whole)
                return job.gone.is_set() or (job.template is None and holds_stop(
                    written[index][:job.max_new_tokens], job.stop, job.stop_ids, self.engine.lm.tokenizer))

            try:  # (a job the engine refuses gets its error; the others are answered)
                results = self.engine.generate_batch(requests, on_canvas=on_canvas, return_errors=True)
            except Exception as exc:  # (never lose the worker: every job of the batch gets the error)
                for job in batch:
                    job.done.set_exception(exc)
                continue
            for job, result in zip(batch, results):
                if isinstance(result, Exception):
                    job.done.set_exception(result)
                else:
                    job.done.set_result(result)


def answer(job: Job, result, tokenizer) -> dict:
    """SGLang's /generate answer for a finished job (RequestError-free: a failed schema check raises
    DiffreasonError, HTTP 500; a check jsonschema cannot finish is said in `meta_info.diffreason_unchecked`)."""
    from diffreason.structured import OutputUnchecked, check_output

    tokens, finish = cut_answer(result, job.max_new_tokens, tokenizer.eos_token_id)
    text = tokenizer.decode(tokens, skip_special_tokens=True)
    unchecked = None
    if job.schema is not None:
        try:
            check_output(job.schema, text, OUTPUT_CHECK_SECONDS)
        except OutputUnchecked as exc:  # (a pattern jsonschema backtracks on: the output is the template's)
            unchecked = exc.reason
    tokens, text, matched = stopped_answer(tokens, text, job, tokenizer)
    if matched is not None:
        finish = {"type": "stop", "matched": matched}
    meta = {"id": job.rid, "finish_reason": finish, "prompt_tokens": len(result.prompt_ids),
            "completion_tokens": len(tokens), "diffreason_steps": list(result.steps)}
    if unchecked is not None:
        meta["diffreason_unchecked"] = unchecked
    return {"text": text, "output_ids": tokens, "meta_info": meta}


def cut_answer(result, max_new_tokens: int, eos: int | None) -> tuple[list[int], dict]:
    """A finished result's tokens as an answer keeps them — cut at `max_new_tokens` (canvases come whole; SGLang
    cuts there too) — and its finish_reason before any stop: the EOS, or the length."""
    tokens = list(result.tokens[:max_new_tokens])
    if result.finished and len(tokens) == len(result.tokens):
        return tokens, {"type": "stop", "matched": eos}
    return tokens, {"type": "length", "length": len(tokens)}


def holds_stop(tokens: list[int], stop, stop_ids, tokenizer) -> bool:
    """Do an answer's tokens so far hold one of `stop_ids` or, decoded, one of the `stop` strings? (An unconstrained
    row that does ends at the canvas that holds it: the server's rows, the SGLang frontend's local gens.)"""
    if any(t in stop_ids for t in tokens):
        return True
    return bool(stop) and cut_at_stop(tokenizer.decode(tokens, skip_special_tokens=True), stop)[1] is not None


def stopped_answer(tokens: list[int], text: str, job: Job, tokenizer) -> tuple[list[int], str, Any]:
    """(tokens, text, what matched or None): an answer cut at its first stop token (left out) and then at its first
    stop string (the text ends before it; the tokens end with the one that completed it)."""
    matched = None
    at = next((i for i, t in enumerate(tokens) if t in job.stop_ids), None)
    if at is not None:
        tokens, matched = tokens[:at], tokens[at]
        text = tokenizer.decode(tokens, skip_special_tokens=True)
    text, hit = cut_at_stop(text, job.stop)
    if hit is not None:
        matched = hit
        low, high = 1, len(tokens)  # the fewest tokens whose text holds the stop string (it grows with them)
        while low < high:
            mid = (low + high) // 2
            if matched in tokenizer.decode(tokens[:mid], skip_special_tokens=True):
                high = mid
            else:
                low = mid + 1
        tokens = tokens[:high]
    return tokens, text, matched


def make_app(lm, max_batch: int = 16, batch_wait: float = 0.01):
    """The FastAPI app of `diffreason serve` over a loaded model (see the module docstring)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, StreamingResponse

    from diffreason.engine import Engine

    engine = Engine(lm)
    batcher = Batcher(engine, max_batch, batch_wait)
    tokenizer = lm.tokenizer
    app = FastAPI(title="diffreason serve")
    app.state.batcher = batcher

    def error(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": {"message": message, "code": status}}, status_code=status)

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.get("/get_model_info")
    async def model_info():
        return {"model_path": str(lm.path), "is_generation": True, "canvas_length": lm.canvas_length,
                "vocab_size": lm.vocab_size, "server": "diffreason",
                "max_denoising_steps": lm.sampler_config.max_denoising_steps, "batches": list(batcher.batches[-100:])}

    @app.post("/generate")
    async def generate(request: Request):  # (FastAPI reads this annotation: no `from __future__ import annotations`)
        try:
            body = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # (JSON's, an integer of 4,300+ digits,
            return error(400, f"the body is not JSON: {exc}")              # nesting past Python's recursion limit)
        try:
            jobs, as_list = await asyncio.to_thread(parse_request, body, tokenizer, lm.canvas_length, lm)
        except RequestError as exc:
            return error(400, str(exc))
        futures = [batcher.submit(job) for job in jobs]
        if jobs[0].chunks is not None:
            return StreamingResponse(_stream(jobs[0], futures[0], tokenizer), media_type="text/event-stream")
        waiting = asyncio.gather(*(asyncio.wrap_future(f) for f in futures))
        while not (await asyncio.wait({waiting}, timeout=0.5))[0]:
            if await request.is_disconnected():  # (its rows end at their next canvas)
                for job in jobs:
                    job.gone.set()
                return error(499, "the client has gone")
        try:
            results = waiting.result()
        except (ConfigError, TemplateError) as exc:  # (the engine refused what the request gave)
            return error(400, str(exc))
        try:
            # (off the event loop: a schema check may take seconds, and the server's other clients wait for none)
            answers = await asyncio.to_thread(lambda: [answer(j, r, tokenizer) for j, r in zip(jobs, results)])
        except DiffreasonError as exc:
            return error(500, str(exc))
        return answers if as_list else answers[0]

    return app


async def _stream(job: Job, future: Future, tokenizer):
    """One `data:` chunk per committed canvas (the text so far that no later canvas changes), then the full answer,
    then `[DONE]`."""
    try:
        async for chunk in _chunks(job, future, tokenizer):
            yield chunk
    finally:  # (the client has gone before the end: its row ends at its next canvas)
        if not future.done():
            job.gone.set()


async def _chunks(job: Job, future: Future, tokenizer):
    so_far: list[int] = []
    while not future.done() or not job.chunks.empty():
        try:
            canvas, tokens = await asyncio.to_thread(job.chunks.get, True, 0.05)
        except queue.Empty:
            continue
        so_far += tokens
        if tokenizer.eos_token_id in so_far:
            so_far = so_far[: so_far.index(tokenizer.eos_token_id)]
        so_far = so_far[: job.max_new_tokens]
        _, text, _ = stopped_answer(so_far, tokenizer.decode(so_far, skip_special_tokens=True), job, tokenizer)
        # (short of a tail the next canvas may change: each chunk's text starts with the one before, and the final
        # answer's with every chunk's)
        text = settled_text(text, job.stop)
        chunk = {"text": text, "meta_info": {
            "id": job.rid, "canvas": canvas, "finish_reason": None}}
        yield f"data: {json.dumps(chunk)}\n\n"
    try:
        final = await asyncio.to_thread(answer, job, future.result(), tokenizer)
    except DiffreasonError as exc:
        final = {"error": {"message": str(exc), "code": 500}}
    yield f"data: {json.dumps(final)}\n\n"
    yield "data: [DONE]\n\n"
