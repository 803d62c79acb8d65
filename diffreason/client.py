"""A client for `/generate` servers: `diffreason serve`, or SGLang with the diffreason plugin on GPUs (one server, or
`sglang-router` in front of several). One `Endpoints` shards requests over the servers it is given with bounded
concurrency and retries; `RemoteEngine` answers `Engine.generate_batch`'s requests through it, so the evals and the
sgl frontend backend run against servers with the code they run locally.

    endpoints = Endpoints(["http://gpu-0:30000", "http://gpu-1:30000"], concurrency=8)
    results = RemoteEngine(endpoints).generate_batch([GenerationRequest("a person", template, seed=3)])

What crosses the wire (SGLang's `/generate` contract, as `diffreason.serve` documents it): `text` or `input_ids`;
`sampling_params.max_new_tokens`; one constraint — `json_schema`, `regex`, or a canvas template as
`custom_params.diffreason_template` (per position a token id, null or the allowed ids: templates without automata,
e.g. Sudoku's); the denoising steps per canvas come back in `meta_info.diffreason_steps`.

Seeds: `diffreason serve` takes `sampling_seed`, so a request gives the local engine's tokens for the same seed.
SGLang refuses `sampling_seed` (its Gemma4Renoise seeds each request from a hash of its request id), so there the
client sends no seed but a request id made from the seed and the request: the same request and seed give the same
tokens on the same server, not the local engine's tokens. `Endpoints.seeded` says which kind each server is.

Failures: a connection that cannot be made (refused, reset, a connect timeout) or HTTP 502 / 503 / 504 (a router or
a server starting or overloaded) is retried, on another server when there is one, with exponential backoff, up to
`retries` times; an answer the server gives (HTTP 400: a request it cannot serve; 500: an output that failed its
check) is final and becomes that request's `EndpointError`, so the other requests of a batch are still answered.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlparse

from diffreason.errors import ConfigError, DiffreasonError, TemplateError

RETRY_STATUS = (502, 503, 504)
STEPS_KEY = "diffreason_steps"


class EndpointError(DiffreasonError):
    """A request no server answered (after retries) or one a server refused; the message says which and why, and
    `status` the HTTP status of a refusal (None when no server answered)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status
        self.results: list | None = None  # (a batch's: every request's result or error, see generate_batch)


def parse_endpoints(spec: str | Sequence[str]) -> list[str]:
    """`http://host:port[,http://host:port...]` → base URLs (no trailing slash); DiffreasonError naming a bad one."""
    parts = spec.split(",") if isinstance(spec, str) else list(spec)
    urls = [p.strip().rstrip("/") for p in parts if p and p.strip()]
    if not urls:
        raise DiffreasonError("--endpoint names no server; give http://HOST:PORT[,http://HOST:PORT...]")
    for url in urls:
        try:
            parsed = urlparse(url)
            parsed.port  # noqa: B018 - (raises ValueError for a port out of range)
        except ValueError as exc:  # (an unclosed IPv6 bracket, a bad port)
            raise DiffreasonError(f"endpoint {url!r} is not an http(s)://HOST[:PORT] URL: {exc}") from None
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise DiffreasonError(f"endpoint {url!r} is not an http(s)://HOST[:PORT] URL")
    if len(set(urls)) != len(urls):
        raise DiffreasonError("an endpoint is named twice in --endpoint")
    return urls


class _Streak:
    """Failures of one kind in a row at one server, each outage counted once: a try taken before the last counted
    failure was already in flight (the tries of one wave that fail together count as one)."""

    def __init__(self):
        self.count, self.since = 0, float("-inf")

    def add(self, taken: float, now: float) -> bool:
        """Count a failure of a try taken at `taken`, unless it was in flight when the last one counted."""
        if taken < self.since:
            return False
        self.count, self.since = self.count + 1, now
        return True


DEAD_SECONDS = 30.0  # how long a server that refused `retries` + 1 tries in a row is left out before a new try


class Endpoints:
    """Servers that answer SGLang's `/generate`, used together: each request goes to the server with the fewest in
    flight (at most `concurrency` per server), failures of the connection are retried elsewhere."""

    def __init__(self, urls: str | Sequence[str], concurrency: int = 4, retries: int = 3, timeout: float = 600.0,
                 backoff: float = 0.5):
        self.urls = parse_endpoints(urls)
        if not 1 <= concurrency <= 1024:
            raise ConfigError(f"concurrency must be in [1, 1024], got {concurrency}")
        if not 0 <= retries <= 100:
            raise ConfigError(f"retries must be in [0, 100], got {retries}")
        self.concurrency = concurrency  # requests in flight per server
        self.retries = retries  # further rounds over all servers for a request whose connections failed
        self.timeout = timeout  # seconds one answer may take once connected (a canvas chain is one answer)
        self.backoff = backoff  # seconds before the first retry; doubles each time
        self._lock = threading.Condition()
        self._in_flight = dict.fromkeys(self.urls, 0)
        self._down_until = dict.fromkeys(self.urls, 0.0)
        self._failed = {u: _Streak() for u in self.urls}  # failures in a row (cool-downs)
        self._refused = {u: _Streak() for u in self.urls}  # refused connections in a row (a dead server)
        self._dead_until = dict.fromkeys(self.urls, 0.0)  # refused `retries` + 1 tries in a row: not tried until then
        self._rid_locks = [threading.Lock() for _ in range(4096)]
        self._info: dict[str, dict] = {}
        self._local = threading.local()  # one requests.Session per thread (a Session is not thread-safe)
        self.failures = 0  # connections that failed (each retried while tries are left), for reports

    # -- servers ----------------------------------------------------------------------------------------------------

    def _session(self):
        import requests

        if not hasattr(self._local, "session"):
            self._local.session = requests.Session()
        return self._local.session

    def info(self, url: str) -> dict:
        """The server's `/get_model_info` (cached); EndpointError when it cannot be reached."""
        import requests

        if url not in self._info:
            try:
                response = self._session().get(url + "/get_model_info", timeout=(10, 60))
                response.raise_for_status()
                self._info[url] = response.json()
            except (requests.RequestException, ValueError) as exc:
                status = getattr(getattr(exc, "response", None), "status_code", None)  # (it answered: busy, say)
                raise EndpointError(f"cannot reach {url}: {_reason(exc)}", status) from None
        return self._info[url]

    def check(self) -> list[dict]:
        """Every server's model info: one EndpointError naming all that cannot be reached, before any work starts."""
        infos, down = [], []
        for url in self.urls:
            try:
                infos.append(self.info(url))
            except EndpointError as exc:
                down.append(str(exc))
        if down:
            raise EndpointError("; ".join(down))
        return infos

    def seeded(self, url: str) -> bool:
        """Whether the server takes `sampling_seed` (diffreason serve); SGLang seeds by request id instead."""
        return self.info(url).get("server") == "diffreason"

    # -- requests ---------------------------------------------------------------------------------------------------

    def _acquire(self, avoid: set[str]) -> tuple[str, float] | None:
        """(the server with the fewest requests in flight among the live ones not in `avoid`, not cooling down after a
        failure, and under `concurrency`; when it was taken) — waits for one. None when every live server is in
        `avoid` (the request's round is over), or none is live."""
        with self._lock:
            while True:
                now = time.monotonic()
                live = [u for u in self.urls if self._dead_until[u] <= now]
                free = [u for u in live if u not in avoid and self._in_flight[u] < self.concurrency]
                if not any(u not in avoid for u in live):
                    return None
                up = [u for u in free if self._down_until[u] <= now]
                if up:
                    url = min(up, key=lambda u: self._in_flight[u])
                    self._in_flight[url] += 1
                    return url, now
                wake = min((self._down_until[u] for u in free), default=now + 1.0)
                self._lock.wait(timeout=max(0.01, wake - now))

    def _release(self, url: str, failed: bool | None, taken: float, refused: bool = False) -> None:
        """`failed`: the connection failed (`refused`) or the server was busy; False: it answered; None: no verdict (a
        read timeout). A failure of a try taken after the server's last cool-down began (not one already in flight
        when it failed) makes it cool down for `backoff` seconds, doubled for each such failure in a row. `retries` + 1
        refused connections in a row (no answer between them, not even a busy one) and it is dead for `DEAD_SECONDS`:
        the requests that have no other server fail at once instead of each waiting out its cool-downs; then it is
        tried again."""
        with self._lock:
            self._in_flight[url] -= 1
            now = time.monotonic()
            if failed and self._failed[url].add(taken, now):
                self._down_until[url] = now + self.backoff * 2 ** min(self._failed[url].count - 1, 8)
            if failed:
                self.failures += 1
            if failed is False:
                self._failed[url].count = 0
            if refused:
                if self._refused[url].add(taken, now) and self._refused[url].count > self.retries:
                    self._dead_until[url] = now + DEAD_SECONDS  # (tried again afresh when its time is up)
                    self._refused[url].count = self._failed[url].count = 0
            elif failed is not None:  # (it answered, if only that it is busy: it is up)
                self._refused[url].count = 0
            self._lock.notify_all()

    def post(self, body: dict, seed: int | None = None, stream: bool = False) -> Any:
        """One `/generate` request: its JSON answer (or, with `stream`, the open streaming response). `seed` goes as
        `sampling_seed` to servers that take it, else into the request id. A failed connection (or an answer cut
        short) is retried on a server this request has not failed on yet; it fails after `retries` + 1 rounds in
        which every live server failed it, or at once when no server is live."""
        import requests

        last, avoid, rounds = "", set(), 0
        while True:
            taken = self._acquire(avoid)
            if taken is None:  # every live server failed this request once: a round
                avoid, rounds = set(), rounds + 1
                with self._lock:
                    now = time.monotonic()
                    live = any(self._dead_until[u] <= now for u in self.urls)
                if not live:
                    raise EndpointError(f"no server answered: every one refused {self.retries + 1} tries in a row "
                                        f"(last: {last or 'another request'})")
                if rounds > self.retries:
                    raise EndpointError(f"no server answered after {rounds} tries of each (last: {last})")
                continue
            url, taken = taken
            failed: bool | None = True
            refused = False
            try:
                try:
                    sent = _seeded(body, seed, self.seeded(url))
                    with self._one_at_a_time(sent.get("rid")):
                        response = self._session().post(url + "/generate", json=sent, timeout=(10, self.timeout),
                                                        stream=stream)
                        if not stream:
                            response.content  # (read while held: the answer is complete)
                except EndpointError as exc:  # its model info could not be read: as a refused connection (or busy)
                    last, refused = str(exc), exc.status is None
                except (requests.ConnectionError, requests.ConnectTimeout) as exc:
                    last, refused = f"{url}: {_reason(exc)}", True
                except requests.Timeout:
                    failed = None
                    raise EndpointError(f"{url} did not answer within {self.timeout:g} s") from None
                except requests.RequestException as exc:  # (an answer cut short: it answered, then broke off)
                    last = f"{url}: {_reason(exc)}"
                else:
                    if response.status_code in RETRY_STATUS:
                        last = f"{url}: HTTP {response.status_code}"
                    else:
                        failed = False
                        return self._answer(url, response, stream)
            finally:
                self._release(url, failed, taken, refused)
            avoid.add(url)

    @contextlib.contextmanager
    def _one_at_a_time(self, rid: str | None):
        """Requests with the same id (the same request and seed, for a server seeding by id) run one after the other:
        SGLang keys a request's state by its id, so two in flight at once would collide."""
        if rid is None:
            yield
            return
        stripe = int(hashlib.sha256(rid.encode()).hexdigest()[:8], 16) % len(self._rid_locks)
        with self._rid_locks[stripe]:  # (striped: bounded memory; two ids rarely share a stripe)
            yield

    @staticmethod
    def _answer(url: str, response, stream: bool) -> Any:
        if response.status_code != 200:
            raise EndpointError(f"{url} refused the request (HTTP {response.status_code}): "
                                f"{_server_message(response)}", status=response.status_code)
        if stream:
            return response
        try:
            return response.json()
        except ValueError:
            raise EndpointError(f"{url} answered something that is not JSON: {response.text[:200]!r}") from None

    def map(self, bodies: Sequence[dict], seeds: Sequence[int | None] | None = None,
            progress: Callable[[], None] | None = None) -> list[Any]:
        """`post` for every body, `concurrency` per server at once; answers in input order, an EndpointError in place
        of a request that failed (the others are still answered)."""
        seeds = list(seeds) if seeds is not None else [None] * len(bodies)

        def one(i: int) -> Any:
            try:
                return self.post(bodies[i], seeds[i])
            except EndpointError as exc:
                return exc
            finally:
                if progress is not None:
                    progress()

        workers = max(1, min(len(bodies), self.concurrency * len(self.urls)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="diffreason-client") as pool:
            return list(pool.map(one, range(len(bodies))))

    def stream(self, body: dict, seed: int | None = None) -> Iterator[dict]:
        """The chunks of a streamed `/generate` (`data:` lines, up to `[DONE]`)."""
        import requests

        response = self.post({**body, "stream": True}, seed, stream=True)
        with response:
            try:
                for line in response.iter_lines(decode_unicode=True):
                    if not line or not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        return
                    chunk = json.loads(data)
                    if "error" in chunk:
                        raise EndpointError(f"the server failed the request: {_message(chunk)}")
                    yield chunk
            except (requests.RequestException, ValueError) as exc:  # (cut short, or not JSON)
                raise EndpointError(f"{response.url} broke off the stream: {_reason(exc)}") from None
        raise EndpointError(f"{response.url} ended the stream without [DONE]")


def _seeded(body: dict, seed: int | None, takes_seed: bool) -> dict:
    """The body as one server kind takes a seed: `sampling_seed`, or a request id made from the seed and request."""
    if seed is None:
        return body
    if takes_seed:
        return {**body, "sampling_params": {**body.get("sampling_params", {}), "sampling_seed": seed}}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    return {**body, "rid": f"diffreason-{seed}-{digest}"}


def _reason(exc: BaseException) -> str:
    text = str(exc)
    for marker in ("Connection refused", "Name or service not known", "timed out", "Connection reset"):
        if marker in text:
            return marker.lower()
    return " ".join(text.split())[:200] or type(exc).__name__


def _message(answer: Any) -> str:
    error = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(error, dict):
        return str(error.get("message", error))
    return str(error if error is not None else answer)[:500]


def _server_message(response) -> str:
    try:
        return _message(response.json())
    except ValueError:
        return response.text[:500]


class RemoteEngine:
    """`Engine.generate_batch` answered by servers: the same requests in, `GenerationResult`s out (steps per canvas
    from the server; `seconds` is each request's round trip, queueing included)."""

    def __init__(self, endpoints: Endpoints, default_max_new_tokens: int = 256):
        self.endpoints = endpoints
        self.default_max_new_tokens = default_max_new_tokens  # for unconstrained requests without a length

    def body(self, request) -> dict:
        """The `/generate` body of a `GenerationRequest`: a template compiled from a regex or a JSON Schema
        (`structured.constraint_template`) as that regex / schema, with the max_tokens it was compiled for (the
        server compiles it with the same function); any other template as its positions."""
        prompt = request.prompt
        body: dict = {"text": prompt} if isinstance(prompt, str) else {"input_ids": [int(t) for t in prompt]}
        params: dict = {}
        template, default = request.template, self.default_max_new_tokens
        if template is not None and request.max_new_tokens is not None and request.max_new_tokens < len(template):
            # (as the local engine refuses it)
            raise TemplateError(f"max_new_tokens={request.max_new_tokens} is shorter than the template "
                                f"({len(template)})")
        source = getattr(template, "source", None)
        if source is not None:
            from diffreason.tasks.json_schema.base import Budget

            kind, text, max_tokens = source
            params[kind] = text
            default = max_tokens or (len(template) if kind == "regex" else Budget.max_length)
        elif template is not None:
            params["custom_params"] = {"diffreason_template": json.dumps(template.to_positions())}
            default = len(template)
        params["max_new_tokens"] = int(request.max_new_tokens or default)
        body["sampling_params"] = params
        return body

    def generate_batch(self, requests: Sequence, callback=None, step_hook=None, on_canvas=None,
                       progress: Callable[[], None] | None = None, return_errors: bool = False) -> list:
        """Every request's result in input order. A request that failed (no server answered, or one refused it) is
        its EndpointError in the list with `return_errors`; without, one EndpointError once all are back, naming the
        first failure (its `status`) and holding every result in `results` (the failed ones as their errors), so
        the answered requests are never lost."""
        if callback is not None or step_hook is not None or on_canvas is not None:
            raise ConfigError("step callbacks and step hooks (e.g. Sudoku's verified mode) run inside the engine; "
                              "a server runs the plain sampler only")
        bodies: list = []
        for r in requests:  # (a request that cannot be sent is its own error; the others still go)
            try:
                bodies.append(self.body(r))
            except DiffreasonError as exc:
                bodies.append(EndpointError(f"the request cannot be sent: {exc}"))
        sendable = [i for i, b in enumerate(bodies) if not isinstance(b, EndpointError)]
        started = time.perf_counter()
        sent = self.endpoints.map([bodies[i] for i in sendable], [requests[i].seed for i in sendable], progress)
        answers = list(bodies)
        for i, answer in zip(sendable, sent):
            answers[i] = answer
        seconds = (time.perf_counter() - started) / max(1, len(sent))
        results = [a if isinstance(a, EndpointError) else _result_or_error(a, r.prompt, seconds)
                   for a, r in zip(answers, requests)]
        failed = [a for a in results if isinstance(a, EndpointError)]
        if failed and not return_errors:
            exc = EndpointError(f"{len(failed)} of {len(answers)} requests failed; the first: {failed[0]}",
                                failed[0].status)
            exc.results = results
            raise exc
        return results


def cut_at_stop(text: str, stop) -> tuple[str, str | None]:
    """(`text` up to its first stop string, that string or None): the contract's `stop` (a string or a list), as
    SGLang applies it to an answer's text; the earliest occurrence wins."""
    stops = [stop] if isinstance(stop, str) else list(stop or ())
    hits = [(text.find(s), s) for s in stops if s and s in text]
    if not hits:
        return text, None
    at, s = min(hits)
    return text[:at], s


def settled_text(text: str, stop) -> str:
    """The part of a growing answer's `text` that no later token can change, to stream: up to its first stop string,
    short of a tail that may still become one (a stop string's start, which may also begin before a stop found
    whole), and short of trailing U+FFFD (the bytes of a character that the next canvas may complete)."""
    stops = [stop] if isinstance(stop, str) else [s for s in stop or () if s]
    whole = text.rstrip("\ufffd")  # (a stop string begun may go on in the character those bytes start)
    end = min(len(cut_at_stop(text, stops)[0]), len(whole))
    for s in stops:
        for k in range(min(len(s) - 1, len(whole)), 0, -1):  # (longest first: the earliest start)
            if whole.endswith(s[:k]):
                end = min(end, len(whole) - k)
                break
    return text[:end].rstrip("\ufffd")


def steps_of(answer: Any) -> list[int]:
    """The denoising steps per canvas of a `/generate` answer; EndpointError when it carries none (a server without
    the diffreason plugin)."""
    steps = (answer.get("meta_info") or {}).get(STEPS_KEY) if isinstance(answer, dict) else None
    if not isinstance(steps, list):
        raise EndpointError(f"the server's answer has no meta_info.{STEPS_KEY}: is the diffreason plugin loaded "
                            "(SGLANG_PLUGINS=diffreason)?")
    return [int(s) for s in steps]


def _result_or_error(answer, prompt, seconds: float):
    """`result_of`, or its EndpointError as the value (one bad answer in a batch is that request's failure)."""
    try:
        return result_of(answer, prompt, seconds)
    except EndpointError as exc:
        return exc


def result_of(answer: dict, prompt: Any = "", seconds: float = 0.0):
    """A `GenerationResult` from a `/generate` answer; EndpointError when the answer carries no steps (a server
    without the diffreason plugin)."""
    from diffreason.engine import GenerationResult

    meta = answer.get("meta_info", {}) if isinstance(answer, dict) else {}
    steps = steps_of(answer)
    tokens = [int(t) for t in answer.get("output_ids", [])]
    return GenerationResult(
        prompt_ids=[] if isinstance(prompt, str) else [int(t) for t in prompt],
        tokens=tokens,
        raw_tokens=tokens,
        text=answer.get("text", ""),
        steps=steps,
        stopped_early=[],  # (not reported by servers)
        finished=(meta.get("finish_reason") or {}).get("type") == "stop",
        seconds=seconds,
    )
