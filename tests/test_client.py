"""The remote client (`diffreason.client`), the frontend backend's remote mode and `diffreason eval --endpoint`,
against real `diffreason serve` processes (SGLang itself cannot serve DiffusionGemma without CUDA). The fault
injector below is a real HTTP server that answers 503; the client's own code is never stood in for."""

import json
import re
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jsonschema
import pytest

from conftest import serve_process
from diffreason.client import Endpoints, EndpointError, RemoteEngine, settled_text
from diffreason.engine import Engine, GenerationRequest
from diffreason.model import EMBEDDED_JSON, EMBEDDED_SUDOKU, load_model
from diffreason.tasks import sudoku

SCHEMA = {"type": "object", "required": ["age"], "properties": {"age": {"type": "integer", "minimum": 0}}}


@pytest.fixture(scope="module")
def sudoku_servers():
    with serve_process(EMBEDDED_SUDOKU) as a, serve_process(EMBEDDED_SUDOKU) as b:
        yield a, b


@pytest.fixture(scope="module")
def json_server():
    with serve_process(EMBEDDED_JSON) as base:
        yield base


def dead_url() -> str:
    with socket.socket() as s:  # a port nothing listens on once the socket closes
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


class InfoServer(BaseHTTPRequestHandler):
    """A server whose model info says it is diffreason's; tests add `do_POST`."""

    def do_GET(self):  # noqa: N802 (http.server's naming)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"server": "diffreason"}')

    def log_message(self, *args):
        pass


@pytest.fixture
def busy_url():
    """A real HTTP server that answers every request 503 (a router whose workers are all busy)."""

    class Busy(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's naming)
            self.send_response(503)
            self.end_headers()

        do_POST = do_GET

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Busy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def sglang_like(json_server):
    """A real HTTP server in front of `json_server` that behaves as SGLang towards seeds: its model info does not say
    "diffreason", it refuses `sampling_seed` (HTTP 400, as Gemma4Renoise does) and records every request id and how
    many requests with that id were in flight at once."""
    import urllib.request

    seen, in_flight, lock = [], {}, threading.Lock()

    class Proxy(BaseHTTPRequestHandler):
        def reply(self, status, payload: bytes):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self):  # noqa: N802
            self.reply(200, json.dumps({"model_path": "served", "is_generation": True}).encode())

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if "sampling_seed" in body.get("sampling_params", {}):
                return self.reply(400, b'{"error": {"message": "does not support request-level sampling_seed"}}')
            rid = body.get("rid")
            with lock:
                in_flight[rid] = in_flight.get(rid, 0) + 1
                seen.append((rid, in_flight[rid]))
            try:
                request = urllib.request.Request(json_server + "/generate", json.dumps(body).encode(),
                                                 {"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=300) as r:
                    self.reply(r.status, r.read())
            finally:
                with lock:
                    in_flight[rid] -= 1

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()


def test_a_server_that_seeds_by_request_id_gets_ids_made_from_the_seed(sglang_like):
    url, seen = sglang_like
    endpoints = Endpoints([url], concurrency=4)
    assert not endpoints.seeded(url)
    body = {"text": "a person", "sampling_params": {"json_schema": json.dumps(SCHEMA)}}
    answers = endpoints.map([body] * 4 + [{**body, "text": "someone"}], seeds=[3, 3, 3, 4, 3])
    assert all(isinstance(a, dict) for a in answers), answers
    rids = [rid for rid, _ in seen]
    assert len(set(rids)) == 3 and all(rid.startswith(("diffreason-3-", "diffreason-4-")) for rid in rids)
    assert max(n for _, n in seen) == 1  # the three requests with one id never ran at the same time


def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "diffreason.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def sudoku_requests(n, seed=0):
    puzzles = sudoku.generate_set("easy", n, seed=11)
    return [GenerationRequest([sudoku.BOS_ID], sudoku.template(p.puzzle), seed=seed + k, max_new_tokens=sudoku.CELLS)
            for k, p in enumerate(puzzles)]


def test_requests_sharded_over_two_servers_get_the_local_engines_tokens(sudoku_servers):
    requests = sudoku_requests(6)
    endpoints = Endpoints(list(sudoku_servers), concurrency=2)
    remote = RemoteEngine(endpoints).generate_batch(requests)
    local = Engine(load_model(EMBEDDED_SUDOKU)).generate_batch(requests)
    assert [r.tokens for r in remote] == [r.tokens for r in local]
    assert [r.steps for r in remote] == [r.steps for r in local]
    for url in sudoku_servers:  # both servers did some of the work
        info = json.loads(endpoints._session().get(url + "/get_model_info").text)
        assert sum(info["batches"]) > 0, url


def test_a_dead_or_busy_server_is_retried_on_another(sudoku_servers, busy_url):
    requests = sudoku_requests(4, seed=20)
    endpoints = Endpoints([dead_url(), busy_url, sudoku_servers[0]], concurrency=2, backoff=0.05)
    remote = RemoteEngine(endpoints).generate_batch(requests)
    local = Engine(load_model(EMBEDDED_SUDOKU)).generate_batch(requests)
    assert [r.tokens for r in remote] == [r.tokens for r in local]
    assert endpoints.failures >= 2  # (the first requests went to the dead and the busy one)


def test_when_no_server_answers_the_error_says_why_after_the_retries(busy_url):
    endpoints = Endpoints([dead_url(), busy_url], retries=1, backoff=0.01)
    with pytest.raises(EndpointError, match=r"no server answered after 2 tries of each \(last: .*"):
        endpoints.post({"text": "x"})
    with pytest.raises(EndpointError, match="cannot reach .*: connection refused"):
        Endpoints([dead_url()]).check()


def test_a_server_that_stops_mid_run_fails_the_waiting_requests_at_once():
    """(Every concurrent refusal doubled the server's cool-down, and each waiting request then waited it out before
    its own tries: an eval against a server that stopped hung for an hour.) After `retries` + 1 refused tries in a
    row the server is dead: the requests still waiting fail without a try of their own."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), InfoServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoints = Endpoints(f"http://127.0.0.1:{server.server_address[1]}", concurrency=4, retries=2, backoff=0.05)
    endpoints.check()
    server.shutdown()
    server.server_close()
    answers = endpoints.map([{"text": "x"}] * 40, seeds=list(range(40)))
    assert all(isinstance(a, EndpointError) for a in answers)
    assert "every one refused 3 tries in a row" in str(answers[-1])
    assert endpoints.failures < 40  # (each of the 40 used to make its own 3 tries)


def test_an_answer_cut_short_is_retried_and_a_busy_server_is_not_dead(json_server):
    """(A server that closed the connection mid-answer aborted the whole batch with a raw requests exception; a
    request whose only other server was found dead while it waited hung for ever; a server that was busy, then
    refused one connection, was declared dead for good.)"""

    class Flaky(InfoServer):
        posts = 0

        def do_POST(self):  # noqa: N802
            Flaky.posts += 1
            self.rfile.read(int(self.headers["Content-Length"]))
            if Flaky.posts % 3 == 1:  # headers, then the body cut short
                self.send_response(200)
                self.send_header("Content-Length", "1000")
                self.end_headers()
                self.wfile.write(b'{"text": "')
            elif Flaky.posts % 3 == 2:
                self.send_response(503)
                self.end_headers()
            else:
                self.close_connection = True  # (no answer at all)
                self.connection.shutdown(socket.SHUT_RDWR)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    flaky = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        endpoints = Endpoints([flaky, json_server], concurrency=1, retries=1, backoff=0.01)
        bodies = [{"text": f"item {i}", "sampling_params": {"regex": "[0-9]{3}"}} for i in range(6)]
        answers = endpoints.map(bodies, seeds=list(range(6)))
        assert [re.fullmatch("[0-9]{3}", a["text"]) is not None for a in answers] == [True] * 6
        assert Flaky.posts >= 1 and endpoints.failures >= 1
    finally:
        server.shutdown()


def test_a_stream_cut_short_is_an_endpoint_error():
    """(A server that went away mid-stream raised requests' own exception into the program's stream.)"""

    class Cut(InfoServer):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b'data: {"text": "ab", "meta_info": {}}\n\n')

    server = ThreadingHTTPServer(("127.0.0.1", 0), Cut)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoints = Endpoints(f"http://127.0.0.1:{server.server_address[1]}", retries=0)
        with pytest.raises(EndpointError, match="broke off the stream"):
            list(endpoints.stream({"text": "x"}))
    finally:
        server.shutdown()


def test_a_refused_request_fails_alone_and_the_others_are_answered(json_server):
    endpoints = Endpoints([json_server])
    bodies = [{"text": "a person", "sampling_params": {"json_schema": json.dumps(SCHEMA)}},
              {"text": "x", "sampling_params": {"regex": "a", "json_schema": "{}"}},
              {"text": "a person", "sampling_params": {"regex": "[0-9]{4}"}}]
    answers = endpoints.map(bodies, seeds=[1, 2, 3])
    assert isinstance(answers[1], EndpointError) and "(HTTP 400): give one constraint" in str(answers[1])
    jsonschema.validate(json.loads(answers[0]["text"]), SCHEMA)
    assert len(answers[2]["text"]) == 4 and answers[2]["text"].isdigit()
    assert endpoints.failures == 0  # (a refusal is an answer, not a connection failure: never retried)


def test_a_batch_with_a_refused_request_keeps_the_answered_ones(json_server):
    """(RemoteEngine.generate_batch raised for the batch and dropped the answers that came back; status None.)"""
    from diffreason.engine import GenerationRequest

    engine = RemoteEngine(Endpoints([json_server]))
    requests = [GenerationRequest("a person", seed=1, max_new_tokens=8), GenerationRequest("x" * 20000, seed=2),
                GenerationRequest("another", seed=3, max_new_tokens=8)]
    results = engine.generate_batch(requests, return_errors=True)
    assert isinstance(results[1], EndpointError) and results[1].status == 400
    assert all(r.steps and r.raw_tokens for r in (results[0], results[2]))
    with pytest.raises(EndpointError, match="^1 of 3 requests failed; the first: ") as info:
        engine.generate_batch(requests)
    assert info.value.status == 400 and [type(r).__name__ for r in info.value.results] == [
        "GenerationResult", "EndpointError", "GenerationResult"]


def test_regex_and_schema_templates_travel_as_their_constraint_and_give_the_local_tokens(json_server):
    """(A template compiled from a regex or a schema could not be sent: every batch holding one raised a TemplateError
    and nothing was answered.) The server samples with reference draws: the local engine does too here."""
    from diffreason import Engine
    from diffreason.canvas import CanvasTemplate
    from diffreason.engine import GenerationRequest
    from diffreason.structured import constraint_template

    lm = load_model(EMBEDDED_JSON)
    regex, _ = constraint_template(lm.tokenizer, lm.canvas_length, regex="[A-Z]{3}-[0-9]{2}")
    schema, _ = constraint_template(lm.tokenizer, lm.canvas_length, json_schema=SCHEMA)
    requests = [GenerationRequest("a code", template=regex, seed=4), GenerationRequest("a person", template=schema,
                                                                                      seed=5)]
    remote = RemoteEngine(Endpoints([json_server])).generate_batch(requests)
    local = Engine(lm).generate_batch(requests)
    assert [r.tokens for r in remote] == [r.tokens for r in local] and [r.steps for r in remote] == [
        r.steps for r in local]
    assert re.fullmatch("[A-Z]{3}-[0-9]{2}", remote[0].text)
    jsonschema.validate(json.loads(remote[1].text), SCHEMA)
    # a template with slots but no source (made by hand) cannot travel: that request alone fails
    hand = CanvasTemplate.from_regex("[a-z]{2}", lm.tokenizer, 4)
    results = RemoteEngine(Endpoints([json_server])).generate_batch(
        [GenerationRequest("x", template=hand, seed=1), requests[0]], return_errors=True)
    assert isinstance(results[0], EndpointError) and "cannot be sent" in str(results[0])
    assert results[1].tokens == remote[0].tokens
    # a max_new_tokens shorter than the template: refused as the local engine refuses it (a server recompiled it)
    short = GenerationRequest("a code", template=regex, seed=4, max_new_tokens=4)
    results = RemoteEngine(Endpoints([json_server])).generate_batch([short], return_errors=True)
    assert str(results[0]) == f"the request cannot be sent: max_new_tokens=4 is shorter than the template " \
        f"({len(regex)})"


def test_a_program_runs_on_a_server_as_it_runs_locally(json_server):
    import sglang as sgl

    from diffreason.backends.sglang_frontend import DiffusionBackend

    @sgl.function
    def card(s, who):
        s += f"A card for {who}: "
        s += sgl.gen("card", json_schema=json.dumps(SCHEMA), max_tokens=64)
        s += " Side: " + sgl.select("side", choices=["good (#1)", "evil & ~x-y"], temperature=1.0)  # (a server: 1)
        s += " Number: " + sgl.gen("n", dtype=int, max_tokens=8)
        s += " Free: " + sgl.gen("free", max_tokens=12)

    remote = card.run(who="a wizard", backend=DiffusionBackend(json_server, seed=5))
    local = card.run(who="a wizard", backend=DiffusionBackend(EMBEDDED_JSON, seed=5))
    assert remote.text() == local.text()
    assert remote["side"] in ("good (#1)", "evil & ~x-y")
    jsonschema.validate(json.loads(remote["card"]), SCHEMA)
    for name in ("card", "side", "n", "free"):  # (finish_reason and the token count differed: QA, 2026-12-07)
        for key in ("steps", "finish_reason", "completion_tokens", "prompt_tokens"):
            assert remote.get_meta_info(name)[key] == local.get_meta_info(name)[key], (name, key)
    assert local.get_meta_info("free")["finish_reason"] == {"type": "length", "length": 12}
    streamed = card.run(who="a wizard", backend=DiffusionBackend(json_server, seed=5), stream=True)
    assert "".join(streamed.text_iter()) == remote.text()
    assert streamed.get_meta_info("free")["steps"] == remote.get_meta_info("free")["steps"]


def test_a_select_choice_that_fits_no_canvas_is_refused_on_a_server_as_locally(json_server):
    """(A server's select silently never chose it: the local backend refuses it.)"""
    import sglang as sgl

    from diffreason.backends.sglang_frontend import DiffusionBackend
    from diffreason.errors import ConfigError

    @sgl.function
    def pick(s, long):
        s += "Pick: " + sgl.select("c", choices=[long, "y"], temperature=1.0)

    errors = []
    for where in (json_server, EMBEDDED_JSON):
        state = pick.run(long="zq" * 150, backend=DiffusionBackend(where))
        state.sync()
        errors.append(state.error())
    assert all(isinstance(e, ConfigError) for e in errors) and str(errors[0]) == str(errors[1]), errors
    fits = pick.run(long=" the" * 40, backend=DiffusionBackend(json_server))  # (160 bytes in 40 tokens: it fits)
    assert fits.error() is None and fits["c"] in (" the" * 40, "y")


def test_engine_options_are_refused_for_a_server(json_server):
    from diffreason.backends.sglang_frontend import DiffusionBackend
    from diffreason.errors import ConfigError

    with pytest.raises(ConfigError, match="'max_denoising_steps' applies to a local checkpoint"):
        DiffusionBackend(json_server, max_denoising_steps=4)


def test_eval_sudoku_on_endpoints_reports_what_the_local_eval_reports(sudoku_servers, tmp_path):
    args = ["eval", "sudoku", "--n", "6", "--tiers", "easy,hard", "--seed", "5"]
    remote = cli(*args, "--endpoint", ",".join(sudoku_servers), "--concurrency", "3", "--out", str(tmp_path / "r"))
    assert remote.returncode == 0, remote.stderr
    # (the servers sample with the checkpoint's draws, transformers' reference stream; the local eval's default is fast)
    local = cli(*args, "--modes", "model", "--budgets", "", "--draws", "reference", "--out", str(tmp_path / "l"))
    assert local.returncode == 0, local.stderr
    r, loc = (json.loads((tmp_path / d / "sudoku.json").read_text()) for d in ("r", "l"))
    for tier in ("easy", "hard"):
        a, b = r["tiers"][tier]["modes"]["model"], loc["tiers"][tier]["modes"]["model"]
        for key in ("solve_rate", "steps_mean", "steps_p90", "solved_within", "unsolved_ran_out"):
            assert a[key] == b[key], (tier, key)
    assert r["budget"] == loc["budget"] and "sampling_seed" in (tmp_path / "r" / "sudoku.md").read_text()


def test_eval_json_on_an_endpoint_validates_the_servers_outputs(json_server, tmp_path):
    folder = tmp_path / "schemas"
    folder.mkdir()
    for name, schema in (("Test_a.json", SCHEMA), ("Test_b.json", {"type": "array", "items": {"enum": ["x", "y"]},
                                                                   "minItems": 1, "maxItems": 3})):
        (folder / name).write_text(json.dumps({"schema": schema, "tests": []}))
    args = ["eval", "json", "--schemas", str(folder), "--fillings", "2", "--model", str(EMBEDDED_JSON)]
    remote = cli(*args, "--endpoint", json_server, "--out", str(tmp_path / "r"))
    assert remote.returncode == 0, remote.stderr
    local = cli(*args, "--draws", "reference", "--out", str(tmp_path / "l"))  # (the server's draws)
    assert local.returncode == 0, local.stderr
    r, loc = (json.loads((tmp_path / d / "json.json").read_text()) for d in ("r", "l"))
    counts = ("schemas", "compiled", "valid", "invalid", "unjudged")
    assert r["total"]["valid"] == 4 and [r["total"].get(k) for k in counts] == [loc["total"].get(k) for k in counts]
    assert r["steps_mean"] == loc["steps_mean"] and r["outputs"] == f"generations by {json_server}"


@pytest.mark.parametrize("args, message", [
    (["sudoku", "--endpoint", "localhost:1"], "endpoint 'localhost:1' is not an http(s)://HOST[:PORT] URL"),
    (["sudoku", "--endpoint", "http://[::1"], "endpoint 'http://[::1' is not an http(s)://HOST[:PORT] URL: Invalid IPv6"),
    (["sudoku", "--endpoint", "http://h:99999"], "URL: Port out of range"),
    (["sudoku", "--endpoint", "{dead}"], "cannot reach http://127.0.0.1:"),
    (["sudoku", "--endpoint", "{dead}", "--t-max", "1"], "--t-max applies to a local model"),
    (["sudoku", "--endpoint", "{dead}", "--concurrency", "0"], "--concurrency must be"),
    (["json", "--schemas", ".", "--endpoint", "{dead},{dead}"], "an endpoint is named twice"),
])
def test_bad_endpoint_options_are_one_error_line(args, message, tmp_path):
    dead = dead_url()
    proc = cli("eval", *[a.replace("{dead}", dead) for a in args], "--out", str(tmp_path), timeout=120)
    assert proc.returncode != 0 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_eval_sudoku_refuses_verified_mode_on_endpoints(sudoku_servers, tmp_path):
    proc = cli("eval", "sudoku", "--endpoint", sudoku_servers[0], "--modes", "verified", "--out", str(tmp_path))
    assert proc.returncode != 0 and "with --endpoint use --modes model" in proc.stderr, proc.stderr


@pytest.mark.parametrize("text, stop, settled", [
    ("hello EN", ["END"], "hello "),  # a stop string begun: it waits for the next canvas
    ("hello END tail", ["END"], "hello "),  # found whole: cut there
    ("abc \ufffd", (), "abc "),  # a character's first bytes
    ("abc", ["abcdef", "c"], ""),  # a longer stop may begin before the one found whole
    ("xy", "yz", "x"),  # one stop string
    ("plain", None, "plain"),
    ("ab</r\ufffd", ["</réponse>"], "ab"),  # a stop begun, going on in a character whose first byte came
    ("abX\ufffd", ["Xé"], "ab"),
])
def test_settled_text_keeps_back_what_a_later_canvas_may_change(text, stop, settled):
    assert settled_text(text, stop) == settled
