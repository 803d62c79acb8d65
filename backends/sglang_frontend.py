"""SGLang frontend backend: run `sgl.function` programs on diffusion canvases with the local engine.

    import sglang as sgl
    from diffreason.backends.sglang_frontend import DiffusionBackend

    sgl.set_default_backend(DiffusionBackend("diffreason/weights/json-small"))

    @sgl.function
    def card(s, who):
        s += f"A character card for {who}: "
        s += sgl.gen("card", json_schema=CARD_SCHEMA, max_tokens=200)
        s += " Alignment: " + sgl.select("side", choices=["good", "evil"])

    state = card.run(who="a wizard")
    state["card"], state.get_meta_info("card")["steps"]

What each primitive means on a canvas:
- `gen`: the prompt is the program's text so far; `regex`, `json_schema` and `dtype` (int / float / bool / str, as
  SGLang's runtime maps them to regexes) become canvas templates through `diffreason.structured.constraint_template`,
  the same function the CLI and the server plugin use, so a constraint holds whatever the model. `max_tokens` bounds
  the canvases; `stop` strings cut the committed text (a canvas is denoised whole, so stops apply after; an
  unconstrained gen ends at the canvas that holds its stop). `temperature`
  scales the renoise schedule (1.0 = the checkpoint's t_max → t_min; 0 = nearly greedy).
- `select`: the choices become one slot whose language is exactly the choices; the canvas denoises into one of them.
  `meta_info` holds the steps and each choice's score (mean log-probability of its tokens under the model's first,
  fully-noised canvas), so `choices_method` is not used.
- streaming yields one chunk per committed canvas.
Every gen and select reports its denoising steps per canvas in `state.get_meta_info(name)["steps"]`.

Remote: `DiffusionBackend("http://host:30000")` sends the same programs to a server — `diffreason serve`, or SGLang
with the diffreason plugin (or `sglang-router` in front of several: give its URL, or several URLs comma-separated to
shard here) — through `diffreason.client.Endpoints`: `regex` / `json_schema` / `dtype` go as SGLang sampling params
(the server compiles them with the same function), `select` is a constrained gen whose regex is exactly the choices
(no logprob request, which DiffusionGemma servers refuse; so no `scores`), steps come from `meta_info`. The sampler is
the server's: engine options and `temperature` do not apply, and seeds reach SGLang through the request id (see
`diffreason.client`).
"""

from __future__ import annotations

import json
import math
import queue
import re
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from sglang.lang.backend.base_backend import BaseBackend
from sglang.lang.chat_template import get_chat_template
from sglang.lang.choices import ChoicesDecision
from sglang.lang.ir import REGEX_BOOL, REGEX_FLOAT, REGEX_INT, REGEX_STR

from diffreason.canvas import CanvasTemplate
from diffreason.client import STEPS_KEY, Endpoints, EndpointError, cut_at_stop, settled_text, steps_of
from diffreason.constrain.regex import Choice
from diffreason.engine import Engine, GenerationResult
from diffreason.errors import ConfigError
from diffreason.model import EMBEDDED_JSON, load_model
from diffreason.sampler import SamplerConfig
from diffreason.serve import REFUSED, cut_answer, holds_stop, stopped_answer
from diffreason.structured import constraint_template

DTYPE_REGEX = {"int": REGEX_INT, "float": REGEX_FLOAT, "bool": REGEX_BOOL, "str": REGEX_STR}


def _stop_strings(stop) -> tuple:
    """A gen's `stop` (None, a string or a list of them) as a tuple of strings."""
    return (stop,) if isinstance(stop, str) else tuple(stop or ())


class DiffusionBackend(BaseBackend):
    """A `BaseBackend` over the local diffreason engine (CPU or CUDA), for any DiffusionGemma checkpoint directory.

    `model_path`: a checkpoint directory, or the URL(s) of servers (`http://host:port[,http://host:port...]`).
    `engine_options`: any `SamplerConfig` field (max_denoising_steps, entropy_bound, draws, ...), `max_batch_size`,
    `seed` (the first gen's seed; each later gen uses the next one, in the order gens reach the backend: under
    `run_batch(num_threads > 1)` the threads decide that order, so a batch is reproducible with `num_threads=1`)
    and `chat_template` (an SGLang template name);
    for servers `seed`, `chat_template` and the client's `concurrency`, `retries`, `timeout` (see `Endpoints`).
    """

    def __init__(self, model_path: str | Path | None = None, **engine_options: Any):
        super().__init__()
        if model_path is None:
            model_path = EMBEDDED_JSON
        self.model_path = str(model_path)
        options = dict(engine_options)
        self.seed = options.pop("seed", 0)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**63:
            raise ConfigError(f"seed must be an integer in [0, 2**63), got {self.seed!r}")
        self._seed_lock = threading.Lock()  # (programs of a run_batch call gens from several threads)
        template_name = options.pop("chat_template", None)
        try:
            self.chat_template = get_chat_template(template_name or "default")
        except KeyError:
            raise ConfigError(f"unknown chat_template {template_name!r} (an SGLang chat template name)") from None
        self.is_chat_model = False
        self.endpoints: Endpoints | None = None
        if self.model_path.startswith(("http://", "https://")):
            client = {k: options.pop(k) for k in ("concurrency", "retries", "timeout") if k in options}
            if options:
                raise ConfigError(f"engine option {sorted(options)[0]!r} applies to a local checkpoint; a server runs "
                                  "its own sampler (options for servers: seed, chat_template, concurrency, retries, "
                                  "timeout)")
            self.endpoints = Endpoints(self.model_path, **client)
            self.endpoints.check()
            return
        self.lm = load_model(model_path)
        max_batch_size = int(options.pop("max_batch_size", 64))
        fields = set(SamplerConfig.model_fields)
        unknown = sorted(set(options) - fields)
        if unknown:
            raise ConfigError(f"unknown engine option {unknown[0]!r}; use SamplerConfig fields, max_batch_size, seed "
                              "or chat_template")
        try:
            self.sampler_config = SamplerConfig(**{**self.lm.sampler_config.model_dump(), **options})
        except ValueError as exc:
            raise ConfigError(" ".join(str(exc).split())) from None
        self.engine = Engine(self.lm, self.sampler_config, max_batch_size=max_batch_size)

    def get_model_name(self) -> str:
        return self.model_path

    # -- gen --------------------------------------------------------------------------------------------------------

    def _next_seed(self) -> int:
        with self._seed_lock:  # (one seed per gen, never two gens with one)
            self.seed += 1
            return self.seed - 1

    def _engine_for(self, temperature: float) -> Engine:
        if temperature == 1.0:
            return self.engine
        scale = max(float(temperature), 1e-3)
        cfg = self.sampler_config.model_copy(
            update={"t_max": self.sampler_config.t_max * scale, "t_min": self.sampler_config.t_min * scale}
        )
        return Engine(self.lm, cfg, max_batch_size=self.engine.max_batch_size)

    @staticmethod
    def _check_supported(sampling_params) -> None:
        """ConfigError for a gen option this backend cannot honour, instead of an answer that ignores it: what
        `diffreason serve` refuses (as upstream's Gemma4Renoise: penalties, min_p, min_tokens, logprobs), several
        samples, stop regexes, ignore_eos (a canvas ends at EOS) and a negative temperature. top_p and top_k are
        ignored, as the server and upstream ignore them (the renoise schedule governs sampling)."""
        p = sampling_params
        unused = {**{k: v for k, v in REFUSED.items() if hasattr(p, k)}, "n": 1, "ignore_eos": False,
                  "return_logprob": None, "top_logprobs_num": None, "logprob_start_len": None,
                  "return_text_in_logprobs": None}
        for name, default in unused.items():
            value = getattr(p, name, default)
            if value != default and not (default is None and value is False):
                raise ConfigError(f"gen option {name}={value!r} is not supported by the diffusion backend")
        if getattr(p, "stop_regex", ()):
            raise ConfigError("gen option stop_regex is not supported by the diffusion backend; use stop strings")
        if not isinstance(p.temperature, int | float) or not math.isfinite(p.temperature) or p.temperature < 0:
            raise ConfigError(f"temperature must be a non-negative finite number, got {p.temperature!r}")
        if not all(isinstance(x, str) and x for x in _stop_strings(p.stop)):
            raise ConfigError(f"stop must be a non-empty string or a list of them, got {p.stop!r}")

    @classmethod
    def _constraint(cls, sampling_params) -> tuple[str | None, Any, int]:
        """(regex, json_schema, max_tokens) of a gen: dtype as SGLang's runtime maps it to a regex."""
        cls._check_supported(sampling_params)
        regex, schema = sampling_params.regex, sampling_params.json_schema
        dtype = sampling_params.dtype
        if dtype is not None:
            name = dtype if isinstance(dtype, str) else getattr(dtype, "__name__", str(dtype))
            if name not in DTYPE_REGEX:
                raise ConfigError(f"unsupported dtype {dtype!r}; use int, float, bool or str")
            regex = DTYPE_REGEX[name]
        max_tokens = int(sampling_params.max_new_tokens)
        if not 1 <= max_tokens <= 1_000_000:  # (the bound of `diffreason serve`)
            raise ConfigError(f"max_tokens must be in [1, 1000000], got {max_tokens}")
        return regex, schema, max_tokens

    def _request(self, sampling_params) -> tuple[CanvasTemplate | None, int]:
        regex, schema, max_tokens = self._constraint(sampling_params)
        vocab = len(self.lm.tokenizer)
        bad = [t for t in sampling_params.stop_token_ids or () if not (isinstance(t, int) and 0 <= t < vocab)]
        if bad:
            raise ConfigError(f"stop_token_ids: {bad[0]!r} is not a token id in [0, {vocab})")
        if regex is None and schema is None:
            return None, max_tokens
        template, _ = constraint_template(
            self.lm.tokenizer, self.lm.canvas_length, regex=regex, json_schema=schema, max_tokens=max_tokens
        )
        return template, len(template)  # a template sets its own length

    def _meta(self, result: GenerationResult, stop_hit: str | None, max_new: int, stop_ids=(), stop=()) -> dict:
        """A gen's meta_info as a server's answer gives it (`diffreason.serve.answer`): the tokens cut at `max_new`
        (the max_tokens sent), then before the first stop token, then after the token that completes the first stop
        string; `finish_reason` with what matched (EOS, a stop token or string) or the length."""
        tokens, finish = cut_answer(result, max_new, self.lm.tokenizer.eos_token_id)
        stops = SimpleNamespace(stop=_stop_strings(stop), stop_ids=tuple(stop_ids or ()))
        text = self.lm.tokenizer.decode(tokens, skip_special_tokens=True)
        tokens, _, matched = stopped_answer(tokens, text, stops, self.lm.tokenizer)
        if matched is not None:
            finish = {"type": "stop", "matched": matched}
        return {
            "steps": result.steps,
            "stopped_early": result.stopped_early,
            "prompt_tokens": len(result.prompt_ids),
            "completion_tokens": len(tokens),
            "finish_reason": {"type": "stop", "matched": stop_hit} if stop_hit else finish,
            "seconds": result.seconds,
        }

    def _decoded(self, tokens: list[int], template, sampling_params) -> str:
        """The text of a gen's tokens: unconstrained gens end at max_tokens (canvases come whole)."""
        if template is None:
            tokens = tokens[: sampling_params.max_new_tokens]
        stop_ids = set(sampling_params.stop_token_ids or ())
        if stop_ids & set(tokens):  # (as the server ends it: before the first stop token)
            tokens = tokens[: next(i for i, t in enumerate(tokens) if t in stop_ids)]
        return self.lm.tokenizer.decode(tokens, skip_special_tokens=True)

    def _stops(self, tokens: list[int], sampling_params) -> bool:
        """Do an unconstrained gen's tokens so far hold a stop token or a stop string (then its row ends there)?"""
        return holds_stop(tokens[: sampling_params.max_new_tokens], _stop_strings(sampling_params.stop),
                          tuple(sampling_params.stop_token_ids or ()), self.lm.tokenizer)

    def _text(self, tokens: list[int], template, sampling_params) -> tuple[str, str | None]:
        """Committed text: every gen ends at its first stop string, constrained or not, as SGLang ends it (the text
        before a stop may then be short of its constraint's language)."""
        return cut_at_stop(self._decoded(tokens, template, sampling_params), sampling_params.stop)

    @staticmethod
    def _text_only(s) -> None:
        """ConfigError for a program that holds images or videos (`sgl.image`, `sgl.video`): the prompt is its text."""
        if getattr(s, "images_", None):
            raise ConfigError("sgl.image / sgl.video are not supported: the diffusion backend reads the program's "
                              "text only")

    def generate(self, s, sampling_params):
        self._text_only(s)
        if self.endpoints is not None:
            body = self._remote_body(s.text_, sampling_params)
            started = time.perf_counter()
            answer = self.endpoints.post(body, self._next_seed())
            return self._remote_answer(answer, sampling_params, time.perf_counter() - started)
        template, max_new = self._request(sampling_params)
        written: list[int] = []

        def on_canvas(_request, _k, tokens) -> bool:  # (an unconstrained gen ends at the canvas that holds its stop)
            written.extend(tokens)
            return template is None and self._stops(written, sampling_params)

        result = self._engine_for(sampling_params.temperature).generate(
            s.text_, template=template, seed=self._next_seed(), max_new_tokens=max_new, on_canvas=on_canvas
        )
        text, hit = self._text(result.tokens, template, sampling_params)
        return text, self._meta(result, hit, int(sampling_params.max_new_tokens), sampling_params.stop_token_ids,
                                sampling_params.stop)

    def generate_stream(self, s, sampling_params):
        """Yields (text, meta_info) once per committed canvas; the last meta_info has the final step counts. The
        chunks join to the text `generate` returns: a canvas's tail that the next may change (a stop string begun,
        a character's first bytes) waits for it (`settled_text`)."""
        self._text_only(s)
        if self.endpoints is not None:
            yield from self._remote_stream(s.text_, sampling_params)
            return
        template, max_new = self._request(sampling_params)
        engine, seed = self._engine_for(sampling_params.temperature), self._next_seed()
        eos = self.lm.tokenizer.eos_token_id
        chunks: queue.Queue = queue.Queue()
        outcome: dict = {}

        written: list[int] = []

        def on_canvas(_request, _k, tokens) -> bool:
            chunks.put(tokens)
            written.extend(tokens)
            return template is None and self._stops(written, sampling_params)

        def work():
            try:
                outcome["result"] = engine.generate(
                    s.text_, template=template, seed=seed, max_new_tokens=max_new, on_canvas=on_canvas
                )
            except BaseException as exc:  # re-raised in the caller's thread
                outcome["error"] = exc
            chunks.put(None)

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        tokens: list[int] = []
        sent, canvases = "", 0
        while (canvas := chunks.get()) is not None:
            tokens += canvas
            text = settled_text(self._decoded(tokens[: tokens.index(eos)] if eos in tokens else tokens, template,
                                              sampling_params), sampling_params.stop)
            canvases += 1
            if text != sent and text.startswith(sent):
                yield text[len(sent):], {"steps": None, "canvases": canvases}
                sent = text
        thread.join()
        if "error" in outcome:
            raise outcome["error"]
        result = outcome["result"]
        text, hit = self._text(result.tokens, template, sampling_params)
        yield text[len(sent):] if text.startswith(sent) else "", self._meta(
            result, hit, int(sampling_params.max_new_tokens), sampling_params.stop_token_ids, sampling_params.stop)

    # -- remote -----------------------------------------------------------------------------------------------------

    def _remote_body(self, prompt: str, sampling_params) -> dict:
        """The /generate body of a gen."""
        regex, schema, max_tokens = self._constraint(sampling_params)
        params: dict = {"max_new_tokens": max_tokens}
        if sampling_params.stop_token_ids:
            params["stop_token_ids"] = [int(t) for t in sampling_params.stop_token_ids]
        if sampling_params.stop:  # (the server cuts the text and its tokens, and ends the row early)
            params["stop"] = list(_stop_strings(sampling_params.stop))
        if regex is not None:
            params["regex"] = regex
        if schema is not None:
            params["json_schema"] = schema if isinstance(schema, str) else json.dumps(schema)
        return {"text": prompt, "sampling_params": params}

    def _remote_answer(self, answer: dict, sampling_params, seconds: float) -> tuple[str, dict]:
        steps, meta = steps_of(answer), answer.get("meta_info", {})
        text, hit = answer.get("text", ""), None
        if sampling_params is not None:  # (None: a select, whose language is its choices)
            text, hit = cut_at_stop(text, sampling_params.stop)
        return text, {
            "steps": steps,
            "prompt_tokens": meta.get("prompt_tokens"),
            "completion_tokens": meta.get("completion_tokens"),
            "finish_reason": {"type": "stop", "matched": hit} if hit else meta.get("finish_reason"),
            "seconds": seconds,
        }

    def _remote_stream(self, prompt: str, sampling_params):
        body = self._remote_body(prompt, sampling_params)
        started, sent = time.perf_counter(), ""
        for chunk in self.endpoints.stream(body, self._next_seed()):
            if STEPS_KEY in chunk.get("meta_info", {}):  # the final answer
                text, meta = self._remote_answer(chunk, sampling_params, time.perf_counter() - started)
                yield text[len(sent):] if text.startswith(sent) else "", meta
                return
            text = settled_text(chunk.get("text", ""), sampling_params.stop)
            if text != sent and text.startswith(sent):
                yield text[len(sent):], {"steps": None, "canvases": chunk["meta_info"].get("canvas", 0) + 1}
                sent = text
        raise EndpointError("the server's stream ended without a final answer")

    def _remote_select(self, prompt: str, choices: list[str]) -> ChoicesDecision:
        self._remote_choices_fit(prompt, choices)
        regex = "(" + "|".join(re.escape(c) for c in choices) + ")"
        longest = max(len(c.encode()) for c in choices)  # a byte-level vocabulary: at most one token per byte
        body = {"text": prompt, "sampling_params": {"regex": regex, "max_new_tokens": longest + 2}}
        started = time.perf_counter()
        answer = self.endpoints.post(body, self._next_seed())
        text, meta = self._remote_answer(answer, None, time.perf_counter() - started)
        if text not in choices:  # the server's slot language is exactly the choices
            raise EndpointError(f"the server's select answered {text!r}, not one of {choices!r}")
        return ChoicesDecision(decision=text, meta_info={**meta, "scores": None})

    def _remote_choices_fit(self, prompt: str, choices: list[str]) -> None:
        """The local check that every choice fits one canvas, against the server's tokenizer: a choice of more bytes
        than a canvas holds tokens is sent alone, and the server's refusal ("no text ... fits") is the ConfigError
        (a choice past the canvas would silently never be chosen). Servers that do not give their canvas length
        (SGLang's /get_model_info) are not asked."""
        canvas = self.endpoints.info(self.endpoints.urls[0]).get("canvas_length")
        if not isinstance(canvas, int):
            return
        for choice in choices:
            if len(choice.encode()) <= canvas - 1:  # (a byte-level vocabulary: at most one token per byte)
                continue
            body = {"text": prompt, "sampling_params": {"regex": re.escape(choice), "max_new_tokens": canvas}}
            try:
                self.endpoints.post(body, self.seed)
            except EndpointError as exc:
                if exc.status == 400 and "fits in" in str(exc):
                    raise ConfigError(f"select choice {choice[:30]!r}{'...' if len(choice) > 30 else ''} does not "
                                      f"fit one canvas ({canvas - 1} tokens): every choice must") from None
                raise

    # -- select -----------------------------------------------------------------------------------------------------

    def select(self, s, choices, temperature, choices_method=None):
        self._text_only(s)
        if not choices:
            raise ConfigError("select needs at least one choice")
        if self.endpoints is not None:
            return self._remote_select(s.text_, list(choices))
        regex = Choice(choices)
        room = self.lm.canvas_length - 1  # (a select is one slot of one canvas, EOS after it)
        for choice in choices:  # a choice past it would silently never be chosen (the slot holds the others)
            if len(self.lm.tokenizer.encode(choice, add_special_tokens=False)) > room:
                raise ConfigError(f"select choice {choice[:30]!r}{'...' if len(choice) > 30 else ''} does not fit "
                                  f"one canvas ({room} tokens): every choice must")
        longest = max(len(c.encode()) for c in choices)  # as for a server (at most one token per byte)
        template, _ = constraint_template(
            self.lm.tokenizer, self.lm.canvas_length, regex=regex, max_tokens=min(longest + 2, self.lm.canvas_length)
        )
        result = self._engine_for(temperature if temperature is not None else 1.0).generate(
            s.text_, template=template, seed=self._next_seed()
        )
        decision = result.text
        if decision not in choices:  # the slot's language is exactly the choices
            raise RuntimeError(f"internal error: select produced {decision!r}, not one of {choices!r}")
        meta = self._meta(result, None, longest + 2)
        meta["scores"] = self.score_choices(s.text_, choices)
        return ChoicesDecision(decision=decision, meta_info=meta)

    @torch.inference_mode()
    def score_choices(self, prompt: str, choices: list[str]) -> list[float]:
        """Mean log-probability of each choice's tokens (then EOS) at the canvas start, under a fully noised canvas."""
        lm, tok = self.lm, self.lm.tokenizer
        ids = torch.tensor([[tok.bos_token_id, *tok.encode(prompt, add_special_tokens=False)]], device=lm.model.device)
        g = torch.Generator().manual_seed(self.seed)
        noise = torch.randint(0, lm.vocab_size, (1, lm.canvas_length), generator=g).to(lm.model.device)
        from transformers import DynamicCache

        cache = DynamicCache(config=lm.model.config.get_text_config(decoder=True))
        log_probs = lm.model(input_ids=ids, decoder_input_ids=noise, past_key_values=cache).logits[0].float()
        log_probs = log_probs.log_softmax(-1)
        scores = []
        for c in choices:
            t = tok.encode(c, add_special_tokens=False)[: lm.canvas_length - 1] + [tok.eos_token_id]
            scores.append(float(log_probs[torch.arange(len(t)), torch.tensor(t)].mean()))
        return scores
