"""Checkpoints shaped like real ones: added special tokens past the base vocabulary, and an embedding table padded past
the tokenizer. Templates are over the model's embedding rows; ids no token names are never allowed where a template
restricts a position."""

import json
import re

import pytest
import torch

from diffreason.canvas import CanvasTemplate
from diffreason.tokenizer import train_byte_bpe

ROWS = 320  # the embedding's rows: past the tokenizer's 303 ids (300 base + 3 added special tokens)


@pytest.fixture(scope="module")
def padded_checkpoint(tmp_path_factory):
    from transformers import DiffusionGemmaForBlockDiffusion

    from diffreason.model import DiffusionLM, make_config, save_model
    from diffreason.sampler import SamplerConfig

    tok = train_byte_bpe(vocab_size=300)
    tok.add_special_tokens({"additional_special_tokens": ["<tool>", "</tool>", "<x>"]})
    config = make_config("tiny", tok)
    config.text_config.vocab_size = ROWS
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = DiffusionGemmaForBlockDiffusion(config).eval()
    path = tmp_path_factory.mktemp("padded") / "ckpt"
    save_model(DiffusionLM(model, tok, SamplerConfig(max_denoising_steps=8)), path)
    return path


def test_the_checkpoint_is_what_it_claims(padded_checkpoint):
    from diffreason.model import load_model

    lm = load_model(padded_checkpoint)
    assert len(lm.tokenizer) == 303 and lm.tokenizer.vocab_size == 300 and lm.vocab_size == ROWS
    assert lm.tokenizer.convert_tokens_to_ids("<x>") == 302


def test_structured_generation_on_a_padded_checkpoint(padded_checkpoint):
    from diffreason.model import load_model
    from diffreason.structured import generate
    from diffreason.tasks.json_schema import validator

    lm = load_model(padded_checkpoint)
    schema = {"type": "object", "required": ["a", "b"], "properties": {"a": {"type": "integer", "maximum": 99},
                                                                       "b": {"enum": ["x", "y"]}}}
    for seed in range(3):
        value, result = generate(lm, schema, "give", seed)
        validator(schema).validate(value)
        assert max(result.tokens) < len(lm.tokenizer)  # (no row past the tokenizer was committed)


def test_restricted_positions_never_allow_rows_no_token_names(padded_checkpoint):
    from diffreason import Engine
    from diffreason.model import load_model

    lm = load_model(padded_checkpoint)
    template = CanvasTemplate.from_regex(r"[a-f]{2,6}", lm.tokenizer, 8)
    assert template.vocab_size == 303
    seen = []
    result = Engine(lm).generate("x", template=template, seed=1, trace=True)
    for trace in result.trace:
        seen += list(trace.canvas[:8])
    assert seen and max(seen) < 303
    assert re.fullmatch(r"[a-f]{2,6}", lm.tokenizer.decode(result.tokens[:8], skip_special_tokens=True))


def test_sgl_programs_on_a_padded_checkpoint(padded_checkpoint):
    sgl = pytest.importorskip("sglang")
    from diffreason.backends.sglang_frontend import DiffusionBackend

    @sgl.function
    def program(s):
        s += "Code: " + sgl.gen("code", regex=r"[A-Z]{3}-[0-9]{3}", max_tokens=16)
        s += " " + sgl.gen("card", json_schema=json.dumps({"type": "object", "required": ["n"], "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 9}}}))
        s += " " + sgl.select("side", choices=["good", "evil"])

    state = program.run(backend=DiffusionBackend(str(padded_checkpoint), max_denoising_steps=8))
    assert re.fullmatch(r"[A-Z]{3}-[0-9]{3}", state["code"])
    assert 1 <= json.loads(state["card"])["n"] <= 9
    assert state["side"] in ("good", "evil")


def test_solve_sudoku_with_a_checkpoint_padded_past_the_sudoku_vocabulary(tmp_path):
    """The embedded Sudoku model with three added special tokens and its embedding padded by 64 rows: `solve` still
    recognises it, and the restricted cells never take the added ids."""
    import subprocess
    import sys

    from transformers import DiffusionGemmaForBlockDiffusion

    from diffreason.model import EMBEDDED_SUDOKU, DiffusionLM, load_model, save_model
    from diffreason.tasks import sudoku

    base = load_model(EMBEDDED_SUDOKU)
    tok = base.tokenizer
    tok.add_special_tokens({"additional_special_tokens": ["<a>", "<b>", "<c>"]})
    config = base.model.config.__class__.from_dict(base.model.config.to_dict())
    config.text_config.vocab_size = sudoku.VOCAB_SIZE + 64
    model = DiffusionGemmaForBlockDiffusion(config).eval()
    state = base.model.state_dict()
    for key, value in model.state_dict().items():
        if state[key].shape != value.shape:  # the embedding (tied): the old rows, then small random ones
            rows = state[key].shape[0]
            state[key] = torch.cat([state[key], 0.01 * torch.randn(value.shape[0] - rows, *value.shape[1:])])
    model.load_state_dict(state)
    save_model(DiffusionLM(model, tok, base.sampler_config), tmp_path / "padded")
    padded = load_model(tmp_path / "padded")
    assert len(padded.tokenizer) == sudoku.VOCAB_SIZE + 3 and padded.vocab_size == sudoku.VOCAB_SIZE + 64
    assert sudoku.is_sudoku_model(padded)
    puzzle = "6.58.37.9.237...6.97..5.3.273..6.....9.1.....15...942........1..4.2..5.......623."
    out = subprocess.run([sys.executable, "-m", "diffreason.cli", "solve", "sudoku", "--model", str(tmp_path / "padded"),
                          "--json", puzzle], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout.splitlines()[0])
    assert answer["solved"] and sudoku.verify(sudoku.parse(puzzle), [int(c) for c in answer["solution"]])
