"""`sgl.function` programs on diffusion canvases through DiffusionBackend: constraints hold whatever the model."""

import json
import re

import jsonschema
import pytest

sgl = pytest.importorskip("sglang")

from diffreason.backends.sglang_frontend import DiffusionBackend  # noqa: E402
from diffreason.errors import ConfigError, TemplateError  # noqa: E402

SCHEMA = {"type": "object", "required": ["n", "ok", "tag"], "properties": {
    "n": {"type": "integer", "minimum": 1, "maximum": 9}, "ok": {"type": "boolean"},
    "tag": {"enum": ["red", "blue"]}}}


@pytest.fixture(scope="module")
def backend(tiny_checkpoint):
    return DiffusionBackend(tiny_checkpoint, max_denoising_steps=4)


@sgl.function
def program(s, question):
    s += "Q: " + question + "\nA: "
    s += sgl.gen("code", regex=r"[A-Z]{2}-[0-9]{3}", max_tokens=16)
    s += "\nJSON: " + sgl.gen("obj", json_schema=json.dumps(SCHEMA))
    s += "\nN: " + sgl.gen("num", dtype=int, max_tokens=8)
    s += "\nside: " + sgl.select("side", choices=["good", "evil", "neutral"])
    s += "\nfree: " + sgl.gen("free", max_tokens=40, stop=["\n"])


def test_program_constraints_hold_and_steps_are_reported(backend):
    for question in ["hi", "what is the code?"]:
        state = program.run(question=question, backend=backend)
        assert re.fullmatch(r"[A-Z]{2}-[0-9]{3}", state["code"])
        jsonschema.validate(json.loads(state["obj"]), SCHEMA)
        assert re.fullmatch(r"[-+]?[0-9]+[ \n]*", state["num"])
        assert state["side"] in ("good", "evil", "neutral")
        assert "\n" not in state["free"]
        for name in ("code", "obj", "num", "side", "free"):
            steps = state.get_meta_info(name)["steps"]
            assert steps and all(1 <= k <= 4 for k in steps), (name, steps)
        assert len(state.get_meta_info("side")["scores"]) == 3
        # the program's text is the prompt of each later gen, and holds every answer
        assert state.text().startswith(f"Q: {question}\nA: {state['code']}\nJSON: {state['obj']}")


def test_unconstrained_text_ends_at_max_tokens_then_at_the_first_stop(backend):
    from sglang.lang.ir import SglSamplingParams

    tok = backend.lm.tokenizer
    tokens = tok.encode("alpha beta\ngamma delta epsilon", add_special_tokens=False)
    assert backend._text(tokens, None, SglSamplingParams(max_new_tokens=3))[0] == tok.decode(tokens[:3])
    text, hit = backend._text(tokens, None, SglSamplingParams(max_new_tokens=100, stop=["delta", "\n"]))
    assert (text, hit) == ("alpha beta", "\n")


def test_streaming_yields_canvases_that_add_up(backend):
    state = program.run(question="hi", backend=backend, stream=True)
    chunks = list(state.text_iter())
    assert len(chunks) >= 5 and "".join(chunks) == state.text()
    assert state.get_meta_info("free")["steps"]


def test_same_backend_seed_same_program_output(tiny_checkpoint):
    runs = [program.run(question="x", backend=DiffusionBackend(tiny_checkpoint, max_denoising_steps=3, seed=7))
            for _ in range(2)]
    assert runs[0].text() == runs[1].text()


def test_bad_options_and_constraints_fail_clearly(tiny_checkpoint, backend):
    with pytest.raises(ConfigError, match="unknown engine option 'temprature'"):
        DiffusionBackend(tiny_checkpoint, temprature=0.5)

    @sgl.function
    def bad_regex(s):
        s += sgl.gen("x", regex=r"(a)\1")

    # sglang's interpreter keeps a program's exception in state.error()
    state = bad_regex.run(backend=backend)
    state.sync()
    assert isinstance(state.error(), TemplateError) and "cannot build an automaton" in str(state.error())

    @sgl.function
    def too_long(s):
        s += sgl.gen("x", regex="a{100}", max_tokens=16)

    state = too_long.run(backend=backend)
    state.sync()
    assert isinstance(state.error(), TemplateError) and "fits in 15 tokens" in str(state.error())


def test_a_stop_string_ends_a_constrained_gen_too(backend):
    """As SGLang ends a constrained output at its stop strings: the regex forces a "b" second, so the text is the
    "a" before it, and finish_reason names the stop; a JSON gen whose max_tokens is shorter than its schema's
    scaffold is refused, as `diffreason serve` refuses it."""

    @sgl.function
    def stopped(s):
        s += "v: " + sgl.gen("x", regex="ab[a-c]{3}", max_tokens=16, stop="b")

    state = stopped.run(backend=backend)
    assert state["x"] == "a" and state.get_meta_info("x")["finish_reason"] == {"type": "stop", "matched": "b"}

    @sgl.function
    def too_short(s):
        s += "v: " + sgl.gen("x", json_schema='{"type": "integer"}', max_tokens=4)

    state = too_short.run(backend=backend)
    state.sync()
    assert isinstance(state.error(), TemplateError)
    assert "max_new_tokens=4 is shorter than the constrained output" in str(state.error())


def test_concurrent_gens_never_share_a_seed(tiny_checkpoint):
    """`run_batch` calls gens from several threads: each gets a seed of its own (the seeds handed out are the next
    ones, each once), and with fast draws each output is what its own seed gives alone."""
    import threading

    be = DiffusionBackend(tiny_checkpoint, max_denoising_steps=3, draws="fast", seed=10)
    seeds, lock = [], threading.Lock()
    next_seed = be._next_seed

    def record():
        seed = next_seed()
        with lock:
            seeds.append(seed)
        return seed

    be._next_seed = record

    @sgl.function
    def word(s, i):
        s += f"item {i}: " + sgl.gen("w", regex="[a-z]{4}", max_tokens=8)

    states = word.run_batch([{"i": i} for i in range(6)], backend=be, num_threads=6)
    assert sorted(seeds) == list(range(10, 16))
    from diffreason.structured import constraint_template

    template, _ = constraint_template(be.lm.tokenizer, be.lm.canvas_length, regex="[a-z]{4}", max_tokens=8)
    for i, state in enumerate(states):
        alone = {be.engine.generate(f"item {i}: ", template=template, seed=s).text for s in range(10, 16)}
        assert state["w"] in alone, (i, state["w"])


@pytest.mark.parametrize("split_in", ["END", "é"])
def test_streamed_chunks_join_to_the_answer_when_a_canvas_splits_a_stop_or_a_character(tiny_checkpoint, split_in):
    """A canvas may end inside a stop string or inside a character's bytes: the streamed chunks (SGLang joins them
    into the state) must still make the answer `generate` gives. The engine stands in here (its canvases are cut
    where the test says: the model decides where they end); SGLang's interpreter runs the program."""
    from types import SimpleNamespace

    backend = DiffusionBackend(tiny_checkpoint, max_denoising_steps=2)
    tok = backend.lm.tokenizer
    ids = tok.encode("hello é END tail", add_special_tokens=False)
    text_of = [tok.decode(ids[:k]) for k in range(len(ids) + 1)]
    cut = next(k for k in range(1, len(ids)) if split_in == "END" and text_of[k].endswith(" EN")
               or split_in == "é" and text_of[k].endswith("\ufffd"))

    class Canvases:
        def generate(self, prompt, template=None, seed=0, max_new_tokens=0, on_canvas=None):
            for k, canvas in enumerate([ids[:cut], ids[cut:]]):
                if on_canvas is not None:
                    on_canvas(0, k, canvas)
            return SimpleNamespace(tokens=ids, steps=[2, 2], stopped_early=False, prompt_ids=[0], finished=True,
                                   seconds=0.0)

    backend._engine_for = lambda temperature: Canvases()

    @sgl.function
    def stopped(s):
        s += "v: " + sgl.gen("x", max_tokens=64, stop=["END"])

    plain = stopped.run(backend=backend)
    # The chunks are read as the backend yields them: SGLang's `text_iter("x")` yields "" when the program ends
    # before the iterator first looks (a race of its own, which this instant engine lost on a CI run).
    chunks, stream = [], backend.generate_stream
    backend.generate_stream = lambda s, sampling_params: (
        chunks.append(text) or (text, meta) for text, meta in stream(s, sampling_params))
    streamed = stopped.run(backend=backend, stream=True)
    streamed.sync()
    assert len(chunks) >= 2
    assert plain["x"] == streamed["x"] == "".join(chunks) == "hello é "


def test_a_select_whose_choice_does_not_fit_a_canvas_is_refused(backend):
    """(It silently always chose the choice that fits, while `scores` still listed the other.)"""
    long = "zq" * 150

    @sgl.function
    def pick(s):
        s += "pick: " + sgl.select("c", choices=[long, "b"])

    state = pick.run(backend=backend)
    state.sync()
    assert isinstance(state.error(), ConfigError)
    assert str(state.error()) == "select choice 'zqzqzqzqzqzqzqzqzqzqzqzqzqzqzq'... does not fit one canvas (" \
        f"{backend.lm.canvas_length - 1} tokens): every choice must"


@pytest.mark.parametrize("options, message", [
    ({"return_logprob": True}, "gen option return_logprob=True is not supported by the diffusion backend"),
    ({"n": 3}, "gen option n=3 is not supported"),
    ({"frequency_penalty": 0.5}, "gen option frequency_penalty=0.5 is not supported"),
    ({"ignore_eos": True}, "gen option ignore_eos=True is not supported"),
    ({"temperature": -1}, "temperature must be a non-negative finite number, got -1"),
    # (QA, 2026-12-07: a NaN temperature failed inside torch; an empty stop string and an unknown token id passed)
    ({"temperature": float("nan")}, "temperature must be a non-negative finite number, got nan"),
    ({"stop": ""}, "stop must be a non-empty string or a list of them"),
    ({"stop": ["a", ""]}, "stop must be a non-empty string or a list of them"),
    ({"stop_token_ids": [10**7]}, "stop_token_ids: 10000000 is not a token id"),
])
def test_gen_options_the_backend_cannot_honour_are_refused(backend, options, message):
    """(They were ignored: the answer read as if they held, and the logprobs a caller asked for were missing.)"""

    @sgl.function
    def asking(s):
        s += "v: " + sgl.gen("x", max_tokens=8, **options)

    state = asking.run(backend=backend)
    state.sync()
    assert isinstance(state.error(), ConfigError) and message in str(state.error())


def test_a_gens_meta_counts_the_tokens_its_stop_string_leaves(backend):
    """QA, 2026-12-07: completion_tokens counted the tokens before the stop string's cut (27 against the server's 8)
    — here the tokens up to the one that completes it, as `diffreason serve` counts them."""

    @sgl.function
    def free(s):
        s += "v: " + sgl.gen("x", max_tokens=40)

    @sgl.function
    def stopped(s, marker):
        s += "v: " + sgl.gen("x", max_tokens=40, stop=marker)

    fresh = DiffusionBackend(backend.model_path, max_denoising_steps=4)
    ids = fresh.engine.generate("v: ", seed=0, max_new_tokens=40).tokens  # (the first gen's seed is 0)
    whole = free.run(backend=fresh)
    assert len(whole["x"]) > 6 and whole.get_meta_info("x")["completion_tokens"] == len(ids), whole["x"]
    stop = whole["x"][3:5]
    state = stopped.run(marker=stop, backend=DiffusionBackend(backend.model_path, max_denoising_steps=4))
    tok = backend.lm.tokenizer
    meta = state.get_meta_info("x")
    assert state["x"] == whole["x"][: whole["x"].index(stop)] and meta["finish_reason"]["matched"] == stop
    assert stop in tok.decode(ids[: meta["completion_tokens"]]) and stop not in tok.decode(
        ids[: meta["completion_tokens"] - 1])


def test_an_unconstrained_gen_stops_denoising_at_the_canvas_that_holds_its_stop(tiny_checkpoint):
    """QA, 2026-12-07: the text was cut, but the gen ran its canvases on to EOS or max_tokens."""

    @sgl.function
    def free(s, marker):
        s += "v: " + sgl.gen("x", max_tokens=300, stop=marker)

    whole = free.run(marker=None, backend=DiffusionBackend(tiny_checkpoint, max_denoising_steps=3))
    steps = whole.get_meta_info("x")["steps"]
    assert len(steps) > 1 and len(whole["x"]) > 6, (steps, whole["x"])
    stop = whole["x"][2:4]
    state = free.run(marker=stop, backend=DiffusionBackend(tiny_checkpoint, max_denoising_steps=3))
    assert state["x"] == whole["x"][: whole["x"].index(stop)] and state.get_meta_info("x")["steps"] == steps[:1]


def test_programs_with_images_are_refused_and_bad_backend_options_are_config_errors(tiny_checkpoint, backend,
                                                                                     tmp_path):
    """QA, 2026-12-07: the image was dropped without a word; an unknown chat template was a KeyError."""
    image = tmp_path / "red.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n")

    @sgl.function
    def look(s, path):
        s += sgl.user(sgl.image(path) + "What colour?")
        s += sgl.assistant(sgl.gen("a", max_tokens=8))

    state = look.run(path=str(image), backend=backend)
    state.sync()
    assert isinstance(state.error(), ConfigError) and "sgl.image / sgl.video are not supported" in str(state.error())
    with pytest.raises(ConfigError, match="unknown chat_template 'nonexistent'"):
        DiffusionBackend(tiny_checkpoint, chat_template="nonexistent")
    with pytest.raises(ConfigError, match="seed must be an integer"):
        DiffusionBackend(tiny_checkpoint, seed="x")


def test_max_tokens_past_the_servers_bound_is_refused(backend):
    """QA, 2026-12-07: 10**7 ran locally, where `diffreason serve` refuses it (its bound: 1,000,000)."""

    @sgl.function
    def huge(s):
        s += "v: " + sgl.gen("x", max_tokens=10**7)

    state = huge.run(backend=backend)
    state.sync()
    assert isinstance(state.error(), ConfigError) and "max_tokens must be in [1, 1000000], got 10000000" in str(
        state.error())


def test_stop_token_ids_end_a_gen_before_the_token(backend):
    from sglang.lang.ir import SglSamplingParams

    tok = backend.lm.tokenizer
    tokens = tok.encode("alpha beta gamma", add_special_tokens=False)
    params = SglSamplingParams(max_new_tokens=100, stop_token_ids=[tokens[2]])
    assert backend._text(tokens, None, params)[0] == tok.decode(tokens[:2])
