"""The SGLang runtime plugin on CPU: discovery, upstream parity, masks, validate_request messages, step reporting."""

import json
import re
import types

import pytest
import torch

pytest.importorskip("sglang")
from sglang.srt.dllm.algorithm.gemma4_renoise import Gemma4Renoise  # noqa: E402
from sglang.srt.dllm.config import DllmConfig  # noqa: E402
from sglang.srt.sampling.sampling_params import SamplingParams  # noqa: E402

from diffreason.backends import sglang_runtime as plugin  # noqa: E402
from diffreason.canvas import CanvasTemplate  # noqa: E402
from diffreason.tokenizer import train_byte_bpe  # noqa: E402

TOK = train_byte_bpe()
C, V, H = 24, len(TOK), 8


def make_algorithm(cls, steps=6):
    algo = cls(DllmConfig("Gemma4Renoise", {"max_denoising_steps": steps}, C, -1, 8))
    algo.vocab_size = V  # run() sets these from the model runner
    algo.embed_tokens = torch.nn.Embedding(V, H)
    algo.embed_tokens.weight.data = torch.randn(V, H, generator=torch.Generator().manual_seed(0))
    algo.embed_tokens.embed_scale = 2.0
    return algo


def forward_batch(rids):
    return types.SimpleNamespace(batch_size=len(rids), input_ids=torch.zeros(len(rids) * C, dtype=torch.long),
                                 rids=list(rids))


def fake_req(rid="r", **params):
    sp = SamplingParams(**params)
    logprob = types.SimpleNamespace(top_logprobs_num=0, token_ids_logprob=None)
    return types.SimpleNamespace(rid=rid, sampling_params=sp, tokenizer=TOK, return_logprob=False, logprob=logprob,
                                 return_flat_raw_top_logprobs=False, custom_logit_processor=None,
                                 return_sampling_mask=False)


def denoise(algo, rids, seed=0, steps=6):
    """Run algo's init/step over random logits; the input_ids and self-conditioning after every step."""
    fb = forward_batch(rids)
    states = algo.init_step_state(fb)
    g = torch.Generator().manual_seed(seed)
    trace = []
    for k in range(steps):
        logits = torch.randn(len(rids), C, V, generator=g) * (1 + 2 * k)
        done = algo.step(fb, logits.view(-1, V), states)
        sc = [s["self_conditioning"] for s in states]
        trace.append((fb.input_ids.clone(), list(done), [None if x is None else x.clone() for x in sc]))
        if all(done):
            break
    return trace


def test_entry_point_installs_the_subclass_under_the_upstream_name():
    from sglang.srt.dllm.algorithm import get_algorithm_cls
    from sglang.srt.plugins import load_plugins

    load_plugins()
    assert get_algorithm_cls("Gemma4Renoise") is plugin.DiffreasonRenoise
    from sglang.srt.managers.scheduler_components.output_streamer import SchedulerOutputStreamer

    assert SchedulerOutputStreamer.has_additional_customized_info  # (SGLang's extension point for output fields)


def test_unconstrained_requests_match_upstream_token_for_token():
    ours = denoise(make_algorithm(plugin.DiffreasonRenoise), ["a", "b", "c"])
    theirs = denoise(make_algorithm(Gemma4Renoise), ["a", "b", "c"])
    assert len(ours) == len(theirs)
    for (ids, done, sc), (ids2, done2, sc2) in zip(ours, theirs):
        assert torch.equal(ids, ids2) and done == done2
        for x, y in zip(sc, sc2):
            assert (x is None) == (y is None) and (x is None or torch.allclose(x, y, atol=1e-5))


def test_constrained_request_honours_its_masks_and_matches_the_local_sampler():
    from diffreason.canvas import CanvasConstraint
    from diffreason.sampler import RenoiseSampler, SamplerConfig

    algo = make_algorithm(plugin.DiffreasonRenoise)
    req = fake_req("c1", regex=r"[a-c]{2}-[0-9]{2}", max_new_tokens=16)
    assert algo.validate_request(req) is None
    assert req.sampling_params.regex is None  # compiled by us; SGLang's grammar backend has nothing to do
    template = plugin.REQUESTS.get("c1").template
    trace = denoise(algo, ["free", "c1"])
    canvas_template = template.canvas(0, C, template.fill_after_end(TOK.eos_token_id, TOK.pad_token_id))
    allowed = CanvasConstraint.from_templates([canvas_template]).allowed[0]
    for ids, _, _ in trace:
        row = ids.view(2, C)[1]
        assert allowed[torch.arange(C), row].all()
    final = trace[-1][0].view(2, C)[1].tolist()
    assert final[len(template) - 1] == TOK.eos_token_id  # SGLang ends the output there
    assert re.fullmatch(r"[a-c]{2}-[0-9]{2}", TOK.decode(final[: len(template) - 1], skip_special_tokens=True))

    # the same request through the local sampler, with the plugin's generator seed: the same canvases
    sampler = RenoiseSampler(SamplerConfig(max_denoising_steps=6, draws="sglang"))
    gen = torch.Generator().manual_seed(algo._request_seed(forward_batch(["free", "c1"]), 1))
    state = sampler.init_state(1, C, V, [gen], CanvasConstraint.from_templates([canvas_template]))
    g = torch.Generator().manual_seed(0)
    for k, (ids, done, _) in enumerate(trace):
        logits = torch.randn(2, C, V, generator=g) * (1 + 2 * k)
        if not bool(state.done[0]):
            sampler.step(logits[1:2], state)
        expect = sampler.commit(state, [canvas_template])[0] if bool(state.done[0]) else state.canvas[0]
        assert torch.equal(ids.view(2, C)[1], expect)
    assert plugin.REQUESTS.take_steps("c1") == [len(trace)]


def test_a_template_longer_than_a_canvas_continues_on_the_next_one():
    algo = make_algorithm(plugin.DiffreasonRenoise)
    positions = [TOK.encode("x", add_special_tokens=False)[0]] * (C + 5) + [TOK.eos_token_id]
    req = fake_req("long", custom_params={plugin.TEMPLATE_PARAM: json.dumps(positions)}, max_new_tokens=2 * C)
    assert algo.validate_request(req) is None
    first = denoise(algo, ["long"])[-1][0]
    second = denoise(algo, ["long"])[-1][0]
    assert first.tolist() == positions[:C] and second[:6].tolist() == positions[C:]
    assert len(plugin.REQUESTS.take_steps("long")) == 2


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(json_schema=json.dumps({"type": "object", "required": ["a"], "properties": {"a": {"type": "array",
          "unevaluatedItems": {"const": 1}}}})), "diffreason: unsupported keyword 'unevaluatedItems' for type 'array' "
                                                 "at /properties/a/unevaluatedItems"),
        (dict(json_schema="{not json"), "diffreason: the schema is not valid JSON"),
        (dict(regex=r"(a)\1"), "diffreason: cannot build an automaton for regex"),
        (dict(regex="a", json_schema="{}"), "diffreason: give one constraint, not json_schema and regex"),
        (dict(custom_params={plugin.TEMPLATE_PARAM: "[1, true]"}), "position 1: expected a token id, null or a list"),
        (dict(custom_params={plugin.TEMPLATE_PARAM: "[99999]"}), "position 0: token 99999 is outside"),
        (dict(regex="a{40}", max_new_tokens=8), "diffreason: no text the constraint allows fits in 7 tokens"),
        (dict(json_schema=json.dumps({"type": "object", "required": ["a"], "properties": {"a": {"type": "string",
          "maxLength": 30}}}), max_new_tokens=4), "max_new_tokens=4 is shorter than the constrained output"),
        (dict(regex="a", frequency_penalty=0.5), "does not support request-level frequency_penalty"),
    ],
)
def test_validate_request_refuses_with_a_clear_message(params, message):
    assert message in (plugin.DiffreasonRenoise.validate_request(fake_req("bad", **params)) or "")


def test_unconstrained_validation_is_upstreams():
    assert plugin.DiffreasonRenoise.validate_request(fake_req("ok")) is None
    assert plugin.REQUESTS.get("ok").template is None


@pytest.fixture
def streamer():
    """SGLang's own SchedulerOutputStreamer (plugins loaded, a scheduler's runtime context for a shipped checkpoint),
    sending to a socket stand-in that keeps the payloads."""
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.managers.scheduler_components.output_streamer import SchedulerOutputStreamer
    from sglang.srt.plugins import load_plugins
    from sglang.srt.runtime_context import SpawnRanks, create_context, use_context
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    from diffreason.model import EMBEDDED_JSON

    load_plugins()
    args = ServerArgs(model_path=str(EMBEDDED_JSON), device="cpu")
    sent = []
    socket = types.SimpleNamespace(send_output=sent.append)
    out = SchedulerOutputStreamer(send_to_detokenizer=socket, tree_cache=None, server_args=args, is_generation=True,
                                  spec_algorithm=SpeculativeAlgorithm.NONE,
                                  disaggregation_mode=DisaggregationMode.NULL, enable_hicache_storage=lambda: False)
    with use_context(create_context(args, role="scheduler", ranks=SpawnRanks(world_rank=0))):
        yield out, sent


def sglang_req(rid, stream):
    from array import array

    from sglang.srt.managers.schedule_batch import Req

    return Req(rid, "prompt", array("q", [1, 2, 3]), SamplingParams(max_new_tokens=3 * C), stream=stream)


def test_steps_of_every_canvas_reach_streamed_and_unstreamed_responses(streamer):
    """Through SGLang's output streamer and its tokenizer manager's accumulation: a stream gets each canvas's count
    with the chunk after it (the meta of every chunk holds the canvases so far); a non-streamed response gets all."""
    from sglang.srt.managers.schedule_batch import FINISH_LENGTH
    from sglang.srt.managers.tokenizer_manager import TokenizerManager

    out, sent = streamer
    manager = object.__new__(TokenizerManager)  # (its meta accumulation needs none of its sockets)
    live, whole = sglang_req("st-live", True), sglang_req("st-whole", False)
    for rid in (live.rid, whole.rid):
        plugin.REQUESTS.drop(rid)
    metas = {live.rid: [], whole.rid: []}
    accumulated = {rid: types.SimpleNamespace(customized_info_accumulated={}, customized_info_reported_keys=set())
                   for rid in metas}
    for k, (a, b) in enumerate([(5, 9), (6, 10), (4, 11)]):  # three canvases each
        plugin.REQUESTS.get(live.rid).steps.append(a)  # (what step() records when a canvas finishes)
        plugin.REQUESTS.get(whole.rid).steps.append(b)
        for req in (live, whole):
            req.output_ids.extend([7] * C)
            if k == 2:
                req.finished_reason = FINISH_LENGTH(3 * C)
        out.stream_output([live, whole], False)
        live.send_token_offset = len(live.output_ids)
        payload = sent[-1]
        for i, rid in enumerate(payload.rids):
            meta = {}
            manager.update_request_meta_info(meta, accumulated[rid], payload.customized_info, i, None)
            metas[rid].append(list(meta[plugin.STEPS_KEY]))
    assert metas[live.rid] == [[5], [5, 6], [5, 6, 4]]
    assert metas[whole.rid] == [[9, 10, 11]]  # output once, when finished
    assert live.rid not in plugin.REQUESTS and whole.rid not in plugin.REQUESTS  # freed after the last output


def test_an_aborted_request_frees_its_state_at_once():
    """SGLang's Scheduler.send_abort_output (aborted while queued, rejected, retracted) as the plugin wraps it."""
    from sglang.srt.managers.scheduler import Scheduler
    from sglang.srt.plugins import load_plugins

    load_plugins()
    schema = json.dumps({"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}})
    assert plugin.DiffreasonRenoise.validate_request(fake_req("gone", json_schema=schema, max_new_tokens=64)) is None
    assert "gone" in plugin.REQUESTS and plugin.REQUESTS.get("gone").template is not None
    told = []
    scheduler = types.SimpleNamespace(rust_server=None, ipc_channels=types.SimpleNamespace(
        send_to_tokenizer=types.SimpleNamespace(send_output=lambda abort, req: told.append(req.rid))))
    Scheduler.send_abort_output(scheduler, object(), types.SimpleNamespace(rid="gone"))
    assert told == ["gone"] and "gone" not in plugin.REQUESTS


# ---- safe to serve: constraints are data, bounded, and refused requests leave nothing behind -----------------------


def refusal(rid, **params):
    """validate_request's answer for a request, checking that a refused one left no state in the plugin."""
    answer = plugin.DiffreasonRenoise.validate_request(fake_req(rid, **params))
    if answer is not None:
        assert rid not in plugin.REQUESTS
    return answer


def test_a_json_schema_string_is_never_read_as_a_path(tmp_path):
    secret = tmp_path / "server-config.json"
    secret.write_text(json.dumps({"minimum": "sk-LIVE-1234"}))
    answers = [refusal(f"path{i}", json_schema=text) for i, text in enumerate(
        [str(secret), str(tmp_path / "missing.json"), "/etc/passwd", str(tmp_path)])]
    for answer in answers:
        assert answer is not None and "not valid JSON" in answer
        assert "sk-LIVE" not in answer and "does not exist" not in answer and "directory" not in answer
    # the same answer whether the path exists or not (beyond the quoted text): no existence oracle
    assert len({a.split(":")[1] for a in answers}) == 1
    assert refusal("true", json_schema="true", max_new_tokens=32) is None  # the boolean schema true is valid
    assert plugin.REQUESTS.schema_of("true") == (True, len(plugin.REQUESTS.get("true").template))


@pytest.mark.parametrize("params, message", [
    (dict(json_schema=json.dumps({"type": "array", "minItems": 10**9}), max_new_tokens=64),
     "minItems 1000000000 is more than this compiler writes (a template of 64 tokens holds 32 at most)"),
    (dict(json_schema=json.dumps({"type": "object", "minProperties": 10**9})), "minProperties 1000000000"),
    (dict(json_schema=json.dumps({"type": "string", "minLength": 10**9})), "minLength 1000000000"),
    (dict(json_schema=json.dumps({"type": "string", "pattern": "^x{1000000000}$"})), "a repeat of more than"),
    (dict(json_schema=json.dumps({"type": "integer", "minimum": 5, "maximum": 3})), "diffreason:"),
    (dict(json_schema="[1, 2]"), "must be a JSON object or a boolean"),
    (dict(json_schema='{"maximum": NaN}'), "NaN or Infinity"),
    (dict(regex="(?=a)b"), "diffreason:"),  # a lookahead that nothing satisfies
    (dict(regex=r"a\bb"), "diffreason:"),
    (dict(regex="[^\\x00-\\U0010ffff]"), "diffreason:"),  # matches nothing
    (dict(custom_params={plugin.TEMPLATE_PARAM: "[-1]"}), "position 0: token -1 is outside"),
    (dict(regex="[a-z]{3}", ignore_eos=True), "diffreason: ignore_eos is not supported with a constraint"),
    # (QA, 2026-12-07: the text of a constrained output held its slots' pad tokens, and was no JSON)
    (dict(regex="[a-z]{3}", skip_special_tokens=False), "diffreason: skip_special_tokens=false is not supported"),
    # (an EOS fixed before fixed tokens finished the request without them: QA, 2026-12-07)
    (dict(custom_params={plugin.TEMPLATE_PARAM: json.dumps([40, TOK.eos_token_id, 41])}),
     f"diffreason: position 1 allows only EOS ({TOK.eos_token_id}) but position 2 after it must hold"),
])
def test_bad_constraints_are_a_400_and_leave_no_state(params, message):
    answer = refusal("bad-constraint", **params)
    assert answer is not None and message in answer, answer


def test_a_template_longer_than_max_new_tokens_is_refused_before_it_is_built(monkeypatch):
    """(QA, 2026-12-07: a 30 KiB body of distinct one-token sets took 2 GiB of masks before its length was checked.)"""
    def never(*args):
        raise AssertionError("the template was built")

    monkeypatch.setattr(CanvasTemplate, "from_positions", never)  # (what builds the masks)
    body = json.dumps([[i] for i in range(10, 4010)])
    answer = refusal("long-template", custom_params={plugin.TEMPLATE_PARAM: body}, max_new_tokens=128)
    assert answer == "diffreason: max_new_tokens=128 is shorter than the constrained output (4000 tokens)"


def test_a_reused_request_id_starts_afresh():
    """(QA, 2026-12-07: an entry left under an id — the client's ids are deterministic — made the request start on its
    second canvas, without its template.)"""
    stale = plugin.REQUESTS.get("reused")
    stale.canvases_done, stale.steps = 1, [6]
    try:
        assert plugin.DiffreasonRenoise.validate_request(fake_req("reused", regex="[a-c]{2}")) is None
        entry = plugin.REQUESTS.get("reused")
        assert (entry.canvases_done, entry.steps) == (0, []) and entry.template is not None
    finally:
        plugin.REQUESTS.drop("reused")


def test_a_compile_over_its_budget_is_refused_and_the_next_request_is_served(monkeypatch):
    import time

    monkeypatch.setattr(plugin, "COMPILE_SECONDS", 0.5)
    big = {"type": "object", "required": [f"p{i}" for i in range(2000)], "properties": {
        f"p{i}": {"type": "string", "pattern": f"^y{i}[a-z]{{2,5}}$"} for i in range(2000)}}
    start = time.thread_time()
    answer = refusal("slow", json_schema=json.dumps(big), max_new_tokens=100000)
    assert answer is not None and "compile budget exceeded" in answer and time.thread_time() - start < 5
    ok = {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}
    assert refusal("after-slow", json_schema=json.dumps(ok), max_new_tokens=64) is None
    assert plugin.REQUESTS.get("after-slow").template is not None


def _finished(rid: str, value: str, tail: int = 5, upto: int | None = None, **params):
    """SGLang's own Req for a validated JSON request whose last canvas holds the template with its slot filled by
    `value`'s tokens (then pads), then `tail` pads — or only the first `upto` tokens of that, as if its first canvas
    ended there —, after SGLang's own finish check (EOS, stop strings, length) and the plugin's output check (as its
    hook runs it; the hook's original, SGLang's `_finish_dllm_request_if_needed`, only releases the request's KV cache
    and stands in as a no-op: there is no cache pool without a GPU runner)."""
    from array import array

    from sglang.srt.managers.schedule_batch import Req

    sp = SamplingParams(**params)
    sp.normalize(TOK)
    req = Req(rid, "prompt", array("q", [2, 10]), sp, eos_token_ids={TOK.eos_token_id}, vocab_size=len(TOK))
    TOK.additional_stop_token_ids = None  # (as SGLang's get_tokenizer leaves the tokenizers it serves with)
    req.tokenizer = TOK
    assert plugin.DiffreasonRenoise.validate_request(req) is None
    template = plugin.REQUESTS.get(rid).template
    ids, (slot,) = template.fixed.tolist(), template.slots
    written = TOK.encode(value, add_special_tokens=False)
    ids[slot.start : slot.start + slot.length] = written + [TOK.pad_token_id] * (slot.length - len(written))
    assert min(ids) >= 0 and ids[-1] == TOK.eos_token_id
    req.output_ids.extend((ids + [TOK.pad_token_id] * tail)[:upto])
    req.update_finish_state(new_accepted_len=len(req.output_ids))
    plugin._check_finished_output(lambda scheduler, r: None, object(), req)
    return req


def test_a_finished_output_that_does_not_validate_is_an_error_not_a_value():
    """Checked through the EOS that ends the template (SGLang keeps the whole canvas in output_ids, past it)."""
    from sglang.srt.managers.schedule_batch import FINISH_ABORT, FINISH_MATCHED_TOKEN

    schema = json.dumps({"type": "object", "required": ["a"], "properties": {"a": {"type": "integer", "maximum": 5}}})
    good, bad = (_finished(rid, value, json_schema=schema, max_new_tokens=64) for rid, value in (("good", "4"),
                                                                                               ("bad", "7")))
    assert isinstance(good.finished_reason, FINISH_MATCHED_TOKEN)
    assert TOK.decode(list(good.output_ids_through_stop), skip_special_tokens=True) == '{"a":4}'
    assert isinstance(bad.finished_reason, FINISH_ABORT)
    assert bad.finished_reason.status_code == 500 and "does not validate" in bad.finished_reason.message


def test_an_output_cut_by_the_requests_own_stop_is_answered_not_an_error():
    """(A stop string that ended the output before the template's end made every such request a 500: the cut
    output is not JSON. The client asked for the cut; the canvases after it never ran.)"""
    from sglang.srt.managers.schedule_batch import FINISH_MATCHED_STR

    schema = json.dumps({"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}})
    req = _finished("cut", "42", json_schema=schema, max_new_tokens=64, stop=['":'], upto=len('{"a":'))
    assert isinstance(req.finished_reason, FINISH_MATCHED_STR)
    assert TOK.decode(list(req.output_ids_through_stop), skip_special_tokens=True).startswith('{"a":')
