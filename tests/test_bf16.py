"""bfloat16 denoising (`load_model(dtype=torch.bfloat16)`, `--dtype bfloat16`): the embedded Sudoku model still solves
easy puzzles, the sampler's statistics stay float32 while the self-conditioning fed back is in the model's dtype, and
the command line takes the option (a bad value: one `error: ` line, exit 2). float32 stays the default; the parity
tests (tests/test_parity.py) hold it to transformers' own generate."""

import json
import os
import subprocess
import sys

import pytest
import torch

from diffreason import Engine, load_model
from diffreason.engine import GenerationRequest
from diffreason.model import EMBEDDED_SUDOKU
from diffreason.tasks import sudoku as S

ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}


@pytest.fixture(scope="module")
def bf16_lm():
    return load_model(EMBEDDED_SUDOKU, dtype=torch.bfloat16)


def test_default_stays_float32():
    assert {p.dtype for p in load_model(EMBEDDED_SUDOKU).model.parameters()} == {torch.float32}


def test_bf16_model_solves_easy_puzzles(bf16_lm):
    assert {p.dtype for p in bf16_lm.model.parameters()} == {torch.bfloat16}
    bf16_lm.sampler_config = bf16_lm.sampler_config.model_copy(update={"draws": "fast"})
    puzzles = S.generate_set("easy", 8, seed=77)
    results = S.solve(bf16_lm, [p.puzzle for p in puzzles], mode="model")
    # float32 solves all of them (the eval: 100 % on easy); a broken dtype path solves none
    assert sum(r.solved for r in results) >= 6
    for r, p in zip(results, puzzles):
        assert r.solved == S.verify(p.puzzle, [int(c) for c in r.solution] if r.solution else None)


def test_sampler_sees_float32_logits_and_the_model_gets_its_own_dtype_back(bf16_lm):
    fed, seen = [], []
    hook = bf16_lm.model.register_forward_pre_hook(
        lambda module, args, kwargs: fed.append(kwargs.get("self_conditioning_logits")), with_kwargs=True)
    engine = Engine(bf16_lm, bf16_lm.sampler_config.model_copy(update={"draws": "reference"}))
    step = engine.sampler.step
    engine.sampler.step = lambda logits, *a, **k: (seen.append(logits.dtype), step(logits, *a, **k))[1]
    puzzle = S.generate_set("easy", 1, seed=3)[0].puzzle
    bos = bf16_lm.tokenizer.bos_token_id
    try:
        engine.generate_batch([GenerationRequest([bos], S.template(puzzle), seed=0, max_new_tokens=S.CELLS)])
    finally:
        hook.remove()
    assert seen and set(seen) == {torch.float32}
    assert fed[0] is None and {sc.dtype for sc in fed[1:] if sc is not None} == {torch.bfloat16}


def cli(*args):
    return subprocess.run([sys.executable, "-m", "diffreason.cli", *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300, env=ENV)


def test_cli_dtype_option():
    puzzle = S.to_string(S.generate("easy", 0).puzzle)
    p = cli("solve", "sudoku", puzzle, "--dtype", "bfloat16", "--json")
    assert p.returncode == 0, p.stderr
    record = json.loads(p.stdout.strip().splitlines()[-1])
    assert record["solved"] and S.verify(S.parse(puzzle), [int(c) for c in record["solution"]])
    bad = cli("solve", "sudoku", puzzle, "--dtype", "float16")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == ["error: --dtype must be float32 or bfloat16, got 'float16'"]
