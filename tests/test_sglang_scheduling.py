"""The SGLang plugin under SGLang's own loops: `DllmAlgorithm.run()` in sync and FDFO mode (the default), batches that
mix new and carried rows, several canvases per request, several templates; then SGLang's output streamer and abort
path for step counts and cleanup.

Stand-ins, and only these: the model runner (a deterministic function of each row's own canvas and self-conditioning
signal: a DiffusionGemma forward needs a GPU under SGLang), and the scheduler's batching (`drive` forms batches as the
scheduler does: a finished canvas leaves, a new request joins, FDFO carries unfinished rows' states). Everything of
ours and of SGLang's algorithm (`run`, `_run_sync`, `_run_fdfo`, `prepare_inputs`, `ForwardBatch`) is real.
"""

import hashlib
import json
import re
import types

import pytest
import torch

pytest.importorskip("sglang")
from sglang.srt.dllm.algorithm.gemma4_renoise import Gemma4Renoise  # noqa: E402
from sglang.srt.dllm.config import DllmConfig  # noqa: E402
from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode  # noqa: E402
from sglang.srt.sampling.sampling_params import SamplingParams  # noqa: E402

from diffreason.backends import sglang_runtime as plugin  # noqa: E402
from diffreason.canvas import CanvasConstraint  # noqa: E402
from diffreason.tokenizer import train_byte_bpe  # noqa: E402

TOK = train_byte_bpe()
C, V, H, STEPS = 24, len(TOK), 8, 6


def ids_of(chars: str) -> list[int]:
    out = []
    for ch in chars:
        ids = TOK.encode(ch, add_special_tokens=False)
        assert len(ids) == 1
        out.append(ids[0])
    return out


DIGITS, LETTERS, DASH = ids_of("0123456789"), ids_of("abc"), ids_of("-")[0]
# a template over two canvases (40 positions, C = 24): 30 digits, a dash, 8 letters, EOS
TWO_CANVASES = [DIGITS] * 30 + [DASH] + [LETTERS] * 8 + [TOK.eos_token_id]
TWO_CANVASES_TOKENS = [DIGITS[3]] * 30 + [DASH] + [LETTERS[1]] * 8 + [TOK.eos_token_id]  # one string it allows


class StandInRunner:
    """In place of SGLang's ModelRunner: logits [B·C, V] from each row's own tokens (a fixed table), its
    self-conditioning (through `prepare_dllm_input_embeds`, as upstream's prepare_inputs feeds it) and a per-request
    target; a request whose id starts with "slow" is never sure and runs out of steps, the others converge."""

    def __init__(self):
        g = torch.Generator().manual_seed(1)
        self.table = torch.randn(V, V, generator=g)
        self.proj = torch.randn(H, V, generator=g)
        embed = torch.nn.Embedding(V, H)
        embed.weight.data = torch.randn(V, H, generator=g)
        embed.embed_scale = 2.0
        self.embed = embed
        self.model = types.SimpleNamespace(get_input_embeddings=lambda: embed,
                                           prepare_dllm_input_embeds=self.prepare)
        self.model_config = types.SimpleNamespace(
            hf_config=types.SimpleNamespace(text_config=types.SimpleNamespace(vocab_size=V)))

    def prepare(self, input_ids, signal):
        with torch.no_grad():
            e = self.embed(input_ids)
        return e if signal is None else e + signal.view_as(e)

    @staticmethod
    def target(rid: str) -> torch.Tensor:
        seed = int.from_bytes(hashlib.blake2b(rid.encode(), digest_size=4).digest(), "little")
        return torch.randint(V, (C,), generator=torch.Generator().manual_seed(seed))

    def forward(self, fb, pp_proxy_tensors=None):
        B = fb.batch_size
        ids = fb.input_ids.view(B, C)
        emb = fb.input_embeds.view(B, C, H)
        logits = 0.5 * self.table[ids] + 0.2 * (emb @ self.proj)
        for b, rid in enumerate(fb.rids):
            sharp = 1.0 if rid.startswith("slow") else 40.0
            logits[b, torch.arange(C), self.target(rid)] += sharp
        out = types.SimpleNamespace(full_logits=logits.reshape(B * C, V))
        return types.SimpleNamespace(logits_output=out, can_run_graph=False)


def make_algorithm(cls, fdfo: bool):
    config = DllmConfig("Gemma4Renoise", {"max_denoising_steps": STEPS}, C, -1, 8, first_done_first_out_mode=fdfo)
    return cls(config)


def fake_req(rid, **params):
    sp = SamplingParams(**params)
    logprob = types.SimpleNamespace(top_logprobs_num=0, token_ids_logprob=None)
    return types.SimpleNamespace(rid=rid, sampling_params=sp, tokenizer=TOK, return_logprob=False, logprob=logprob,
                                 return_flat_raw_top_logprobs=False, custom_logit_processor=None,
                                 return_sampling_mask=False)


def forward_batch(rids):
    n = len(rids)
    return ForwardBatch(forward_mode=ForwardMode.DLLM_EXTEND, batch_size=n,
                        input_ids=torch.zeros(n * C, dtype=torch.long), req_pool_indices=torch.arange(n),
                        seq_lens=torch.full((n,), C), out_cache_loc=torch.zeros(n * C, dtype=torch.long),
                        seq_lens_sum=n * C, rids=list(rids))


def drive(algo, runner, arrivals: dict[int, list[tuple[str, int]]], fdfo: bool, on_forward=None):
    """The scheduler's part: requests (rid, canvases) join at their tick; each tick runs one `algo.run` over the
    requests present (new ones last, as SGLang appends them). Sync: `run` denoises a whole canvas of every row. FDFO:
    `run` is one step; a row that is done commits its canvas and leaves (its next canvas starts fresh the next tick),
    the others carry their states. Returns the committed canvases per request."""
    outputs: dict[str, list[list[int]]] = {}
    running: list[list] = []  # [rid, canvases wanted, carried state]
    tick = 0
    while running or any(t >= tick for t in arrivals):
        for rid, n in arrivals.get(tick, []):
            running.append([rid, n, None])
            outputs[rid] = []
        tick += 1
        if not running:
            continue
        fb = forward_batch([r[0] for r in running])
        if fdfo:
            _, tokens, accepted, states_out, _ = algo.run(runner, fb, [r[2] for r in running])
            for r, toks, acc, state in zip(running, tokens, accepted, states_out):
                if acc:
                    outputs[r[0]].append(list(toks))
                r[2] = state
        else:
            _, tokens, accepted, states_out, _ = algo.run(runner, fb)
            assert accepted is None and states_out is None
            for r, toks in zip(running, tokens):
                outputs[r[0]].append(toks.tolist())
        if on_forward is not None:
            on_forward(fb)
        running = [r for r in running if len(outputs[r[0]]) < r[1]]
    return outputs


# requests join while others are mid-canvas: "slow" ones take all STEPS steps, the others two
ARRIVALS = {
    0: [("slow-two", 2), ("free-a", 1)],
    1: [("slow-free", 3)],
    3: [("fast-regex", 1)],
    4: [("two-b", 2), ("free-c", 2)],
    7: [("slow-regex", 1)],
}
REGEX = r"[a-c]{2}-[0-9]{2}"


def submit_templates(algo):
    """validate_request (ours) for the constrained requests: two-canvas templates and regexes."""
    for rid in ("slow-two", "two-b"):
        req = fake_req(rid, custom_params={plugin.TEMPLATE_PARAM: json.dumps(TWO_CANVASES)}, max_new_tokens=2 * C)
        assert algo.validate_request(req) is None
    for rid in ("fast-regex", "slow-regex"):
        assert algo.validate_request(fake_req(rid, regex=REGEX, max_new_tokens=C)) is None


def run_schedule(fdfo: bool, ours: bool = True):
    for rid, _ in (x for v in ARRIVALS.values() for x in v):
        plugin.REQUESTS.drop(rid)
    algo = make_algorithm(plugin.DiffreasonRenoise if ours else Gemma4Renoise, fdfo)
    runner = StandInRunner()
    masks_seen = []
    if ours:
        submit_templates(algo)

        def on_forward(fb):  # every row's canvas after every step obeys the canvas its request is on
            for b, rid in enumerate(fb.rids):
                template = plugin.REQUESTS.get(rid).template
                if template is not None:
                    masks_seen.append((rid, fb.input_ids.view(-1, C)[b].clone()))
    else:
        on_forward = None
    outputs = drive(algo, runner, ARRIVALS, fdfo, on_forward)
    steps = {rid: plugin.REQUESTS.take_steps(rid) for rid in outputs}
    return outputs, steps, masks_seen


def allowed(template, k):
    return CanvasConstraint.from_templates([template.canvas(k, C)]).allowed[0]


@pytest.mark.parametrize("fdfo", [False, True], ids=["sync", "fdfo"])
def test_every_canvas_of_every_request_follows_its_template(fdfo):
    outputs, steps, _ = run_schedule(fdfo)
    algo = make_algorithm(plugin.DiffreasonRenoise, fdfo)
    submit_templates(algo)
    for rid in ("slow-two", "two-b"):
        template = plugin.REQUESTS.get(rid).template
        assert len(outputs[rid]) == 2 == template.num_canvases(C)
        flat = outputs[rid][0] + outputs[rid][1]
        for p, ids in enumerate(TWO_CANVASES):
            assert flat[p] in (ids if isinstance(ids, list) else [ids]), (rid, p)
        text = TOK.decode(flat[: len(TWO_CANVASES) - 1])
        assert text[30] == "-" and text[:30].isdigit() and set(text[31:]) <= set("abc")
    for rid in ("fast-regex", "slow-regex"):
        out = outputs[rid][0]
        end = out.index(TOK.eos_token_id)
        text = TOK.decode(out[:end], skip_special_tokens=True)
        assert re.fullmatch(REGEX, text), (rid, text)
    # one step count per canvas; slow requests run out of steps, the others stop early
    assert {rid: len(s) for rid, s in steps.items()} == {rid: len(o) for rid, o in outputs.items()}
    assert steps["slow-two"] == [STEPS, STEPS] and steps["slow-free"] == [STEPS] * 3
    assert all(0 < s < STEPS for s in steps["free-a"] + steps["free-c"]), steps  # (masks keep the others unsure)


def test_fdfo_and_sync_give_the_same_tokens_and_canvas_states_obey_masks():
    sync_out, sync_steps, _ = run_schedule(False)
    fdfo_out, fdfo_steps, seen = run_schedule(True)
    assert fdfo_out == sync_out and fdfo_steps == sync_steps  # each canvas is seeded by its request, not its batch
    # every intermediate canvas of a constrained row, at every FDFO step, lies in the allowed sets of the canvas its
    # request is on (the k-th canvas it has started: rows that join mid-canvas must not move anyone's index)
    algo = make_algorithm(plugin.DiffreasonRenoise, True)
    submit_templates(algo)
    count: dict[str, int] = {}
    for rid, row in seen:
        template = plugin.REQUESTS.get(rid).template
        k = count.get(rid, 0)
        ok = allowed(template, k)[torch.arange(C), row].all()
        if not ok:  # the row moved on to its next canvas
            k = count[rid] = k + 1
            ok = allowed(template, k)[torch.arange(C), row].all()
        assert ok, (rid, k)
    assert count.get("slow-two") == 1 and count.get("two-b") == 1  # (each moved to its second canvas once)


@pytest.mark.parametrize("fdfo", [False, True], ids=["sync", "fdfo"])
def test_unconstrained_requests_are_token_identical_to_upstream_beside_constrained_ones(fdfo):
    ours, _, _ = run_schedule(fdfo)
    theirs, _, _ = run_schedule(fdfo, ours=False)
    for rid in ("free-a", "slow-free", "free-c"):
        assert ours[rid] == theirs[rid], rid
    assert ours["slow-two"] != theirs["slow-two"]  # (the constrained ones do differ: their masks apply)


def test_a_rerun_of_init_step_state_does_not_advance_a_request():
    """The bug SGLang's FDFO loop exposed: init_step_state had a side effect (canvas index += 1) and FDFO calls it
    for carried rows too."""
    algo = make_algorithm(plugin.DiffreasonRenoise, True)
    algo.vocab_size = V
    plugin.REQUESTS.drop("idem")
    req = fake_req("idem", custom_params={plugin.TEMPLATE_PARAM: json.dumps(TWO_CANVASES)}, max_new_tokens=2 * C)
    assert algo.validate_request(req) is None
    for _ in range(3):
        state = algo.init_step_state(forward_batch(["idem"]))[0]
        first = plugin.REQUESTS.get("idem").template.canvas(0, C)
        assert state["template"].violations(TWO_CANVASES_TOKENS[:C]) == []
        assert first.violations(TWO_CANVASES_TOKENS[:C]) == [] and state["template"].violations([DASH] * C) != []
    assert plugin.REQUESTS.get("idem").canvases_done == 0
    plugin.REQUESTS.drop("idem")


def test_a_step_is_one_batched_sampler_call_with_masks_built_once_per_batch(monkeypatch):
    """Item: vocabulary-scale masks. Every row a step advances goes through the sampler as one batch; the batch's
    constraint is expanded on the device only when its rows change; the templates' mask tables are copied to the
    device once; a carried row keeps no [C, V] logits."""
    algo = make_algorithm(plugin.DiffreasonRenoise, True)
    runner = StandInRunner()
    for rid in ("slow-two", "two-b"):
        plugin.REQUESTS.drop(rid)
    submit_templates(algo)
    calls, builds = [], []
    step = algo.sampler.step
    monkeypatch.setattr(algo.sampler, "step", lambda logits, state, *a: calls.append(logits.shape[0]) or step(
        logits, state, *a))
    build = CanvasConstraint.from_templates.__func__
    monkeypatch.setattr(CanvasConstraint, "from_templates",
                        classmethod(lambda cls, t, *a, **k: builds.append(len(t)) or build(cls, t, *a, **k)))
    rids = ["slow-two", "two-b", "slow-free"]
    fb = forward_batch(rids)
    _, _, _, states, _ = algo.run(runner, fb, [None] * 3)
    assert calls == [3] and builds == [1, 1, 3]  # (one per row for its first canvas, then the batch's)
    copies = len(algo._masks)
    # (on the CPU the tables are the device's own: none is copied, and none is held alive — the cache held each one,
    # whose weak reference then never died: QA, 2026-12-07; on a GPU, each table once)
    assert copies == (3 if algo._masks.device.type == "cuda" else 0)
    for _ in range(2):
        _, _, accepted, states, _ = algo.run(runner, fb, states)
        assert accepted == [0, 0, 0]
    assert calls == [3, 3, 3] and builds == [1, 1, 3]  # the same rows: the same constraint
    assert len(algo._masks) == copies  # (not copied again)
    assert all(s["denoise"].self_conditioning is None for s in states)
    for rid in ("slow-two", "two-b", "slow-free"):
        plugin.REQUESTS.drop(rid)


@pytest.mark.parametrize("fdfo", [True, False])
def test_past_a_json_templates_eos_its_canvas_holds_pad_as_the_engine_writes_it(fdfo):
    """(The positions after the EOS were left free: the model's tokens there stayed in SGLang's output_ids, where
    the output check and stop strings read them — every JSON request ending before its canvas was a 500.)"""
    rid = "json-short"
    plugin.REQUESTS.drop(rid)
    algo = make_algorithm(plugin.DiffreasonRenoise, fdfo)
    schema = {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}
    assert algo.validate_request(fake_req(rid, json_schema=json.dumps(schema), max_new_tokens=C)) is None
    n = len(plugin.REQUESTS.get(rid).template)
    assert n < C
    (canvas,) = drive(algo, StandInRunner(), {0: [(rid, 1)]}, fdfo)[rid]
    assert canvas[n - 1] == TOK.eos_token_id and canvas[n:] == [TOK.pad_token_id] * (C - n)
    json.loads(TOK.decode(canvas, skip_special_tokens=True))
    plugin.REQUESTS.drop(rid)
