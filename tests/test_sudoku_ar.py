"""The autoregressive Sudoku baseline: equal size, the same data, decoding under the same template."""

import json
import re
import subprocess
import sys

import pytest
import torch

from diffreason.errors import ModelLoadError
from diffreason.tasks import sudoku as S
from diffreason.tasks import sudoku_ar as AR


@pytest.fixture(scope="module")
def tiny_ar():
    return AR.build_ar_model("sudoku-tiny", seed=0)


def test_the_baseline_has_the_diffusion_models_size_and_embeddings():
    ar = AR.build_ar_model("sudoku-small", seed=3)
    diffusion = S.build_sudoku_model("sudoku-small", seed=3)
    text = diffusion.config.text_config
    cfg = ar.model.config
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "num_experts",
                "top_k_experts", "vocab_size", "intermediate_size", "moe_intermediate_size"):
        assert getattr(cfg, key) == getattr(text, key), key
    body = sum(p.numel() for n, p in diffusion.model.named_parameters() if "vision" not in n)
    assert 0.9 * body <= AR.parameters(ar.model) <= body  # (the diffusion decoder adds its self-conditioning block)
    assert torch.equal(ar.model.get_input_embeddings().weight, diffusion.model.model.decoder.embed_tokens.weight)


def test_training_batches_read_the_puzzle_then_write_the_blanks():
    stream = S.SudokuStream(seed=1)
    batch = AR.ar_batches(stream)(4, 0.5)
    solutions, blanks = S.SudokuStream(seed=1).batch(4, 0.5)  # the same stream draws the same puzzles
    assert batch.input_ids.shape == (4, 1 + 2 * S.CELLS) and bool((batch.input_ids[:, 0] == S.BOS_ID).all())
    for b in range(4):
        for i in range(S.CELLS):
            d = int(solutions[b, i])
            prompt, written, label = (int(batch.input_ids[b, 1 + i]), int(batch.input_ids[b, AR.PROMPT_LEN + i]),
                                      int(batch.labels[b, AR.PROMPT_LEN + i]))
            if blanks[b, i]:
                assert prompt == AR.UNK_ID and written == label == S.free_token(i, d)
            else:
                assert prompt == written == S.given_token(i, d) and label == -100
    assert bool((batch.labels[:, : AR.PROMPT_LEN] == -100).all())


def test_cached_decoding_is_the_constrained_argmax_of_the_whole_sequence(tiny_ar):
    puzzles = [p.puzzle for p in S.generate_set("medium", 3, seed=5)]
    results = AR.solve_ar(tiny_ar, puzzles)
    masks = S.cell_masks()
    for p, r in zip(puzzles, results):
        assert r.solution is not None and r.steps == S.CELLS and r.mode == "autoregressive"
        cells = [int(c) for c in r.solution]
        assert all(c == g for c, g in zip(cells, p) if g)  # givens kept
        tokens = [S.given_token(i, g) if g else S.free_token(i, c) for i, (c, g) in enumerate(zip(cells, p))]
        prompt = AR.prompt_tokens(torch.tensor([p]))
        full = torch.cat([prompt, torch.tensor([tokens[:-1]])], 1)
        with torch.no_grad():
            logits = tiny_ar.model(input_ids=full).logits[0, AR.PROMPT_LEN - 1 :]
        for i, g in enumerate(p):
            if not g:  # the written digit is the argmax over the cell's own nine tokens, without the cache too
                assert int(logits[i].masked_fill(~masks[i], float("-inf")).argmax()) == tokens[i], i


def test_cli_trains_resumes_and_the_eval_reports_it_beside_the_model(tmp_path):
    run = tmp_path / "ar"
    train = [sys.executable, "-m", "diffreason.cli", "train", "sudoku-ar", "--run-dir", str(run), "--preset",
             "sudoku-tiny", "--batch-size", "8", "--save-every", "5", "--eval-every", "0"]
    first = subprocess.run([*train, "--steps", "10"], capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    changed = subprocess.run([*train, "--steps", "15", "--no-curriculum"], capture_output=True, text=True, timeout=600)
    assert changed.returncode == 2 and "curriculum true there, false now" in changed.stderr, changed.stderr
    second = subprocess.run([*train, "--steps", "15"], capture_output=True, text=True, timeout=600)
    assert second.returncode == 0 and "resuming from step 10" in second.stderr, second.stderr
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 16)) and AR.training_examples(run / "model") == 15 * 8
    loaded = AR.load_ar_model(run / "model")
    assert AR.parameters(loaded.model) == AR.parameters(AR.build_ar_model("sudoku-tiny").model)
    out = tmp_path / "eval"
    ev = subprocess.run([sys.executable, "-m", "diffreason.cli", "eval", "sudoku", "--n", "2", "--tiers", "easy",
                         "--modes", "model", "--budgets", "", "--baseline", str(run / "model"), "--out", str(out)],
                        capture_output=True, text=True, timeout=600)
    assert ev.returncode == 0, ev.stderr
    report = json.loads((out / "sudoku.json").read_text())
    assert list(report["tiers"]["easy"]["modes"]) == ["model", "autoregressive"]
    assert report["tiers"]["easy"]["modes"]["autoregressive"]["steps_mean"] == S.CELLS
    assert report["baseline"]["training_examples"] == 120
    assert "| easy | " in (out / "sudoku.md").read_text() and "| autoregressive |" in (out / "sudoku.md").read_text()
    # (a sudoku-tiny baseline beside the embedded sudoku-base was called one of "the diffusion model's width, depth":
    # QA, 2026-12-07)
    assert "float32 (not the diffusion model's sizes: hidden_size 32 against" in (out / "sudoku.md").read_text()
    # (a diffusion run on the baseline's run directory advised moving the trainer state away, to start over from
    # RUN/model's weights — the baseline's)
    diff = subprocess.run([sys.executable, "-m", "diffreason.cli", "train", "sudoku", "--run-dir", str(run), "--preset",
                           "sudoku-tiny", "--steps", "1"], capture_output=True, text=True, timeout=600)
    assert diff.returncode == 2 and "holds a gemma4_text model" in diff.stderr and "move it away" not in diff.stderr, (
        diff.stderr)


def test_solve_ar_reads_puzzles_as_solve_does(tiny_ar):
    """(A list's -1 or 1.5 was taken as a cell and "solved", 10 gave no solution without a word, 80 cells was a torch
    error: QA, 2026-12-07.)"""
    p = list(S.generate("easy", 0).puzzle)
    for bad, message in (([-1] + p[1:], "got -1"), ([1.5] + p[1:], "got 1.5"), ([10] + p[1:], "got 10"),
                         (p[:80], "puzzle has 80 cells, expected 81")):
        with pytest.raises(S.SudokuError, match=re.escape(message)):
            AR.solve_ar(tiny_ar, [bad])
    with pytest.raises(S.SudokuError, match="batch_size must be an integer of at least 1, got 0"):
        AR.solve_ar(tiny_ar, [p], batch_size=0)


def test_training_examples_count_each_batch_size_for_its_steps(tmp_path):
    """(A resume that changed --batch-size counted every step at the last size: 20 × 32 = 640 for 400: QA,
    2026-12-07.)"""
    run = tmp_path / "run"
    run.mkdir()
    (run / "train_config.json").write_text(json.dumps({"batch_size": 32}))
    (run / "log.jsonl").write_text("".join(json.dumps({"step": k}) + "\n" for k in range(1, 21)))
    assert AR.training_examples(run / "model") == 20 * 32
    (run / "train_config_history.jsonl").write_text(json.dumps({"until_step": 10, "config": {"batch_size": 8}}) + "\n")
    assert AR.training_examples(run / "model") == 10 * 8 + 10 * 32


def test_a_diffusion_checkpoint_is_not_a_baseline(tmp_path):
    from diffreason.model import EMBEDDED_SUDOKU

    with pytest.raises(ModelLoadError, match="is not an autoregressive Sudoku baseline"):
        AR.load_ar_model(EMBEDDED_SUDOKU)
    bad = subprocess.run([sys.executable, "-m", "diffreason.cli", "eval", "sudoku", "--baseline", str(tmp_path),
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "is not a checkpoint directory" in bad.stderr, bad.stderr


@pytest.mark.parametrize("damage, message", [
    (lambda d: (d / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes()[:100]), "cannot load"),
    (lambda d: (d / "config.json").write_text("[1]"), "is not an autoregressive Sudoku baseline (model_type None)"),
    (lambda d: (d / "config.json").write_text(json.dumps(
        {**json.loads((d / "config.json").read_text()), "hidden_size": 24})), "hold tensors of other shapes"),
])
def test_a_broken_baseline_is_one_load_error_and_a_torn_run_resumes(tiny_ar, tmp_path, damage, message):
    """(A truncated file, a config of another shape or a list as config were tracebacks, exit 1.)"""
    from diffreason.errors import DiffreasonError
    from diffreason.train import STATE_FILE

    model = tiny_ar.save(tmp_path / "run" / "model")
    damage(model)
    with pytest.raises(ModelLoadError, match=message.replace("(", r"\(").replace(")", r"\)")):
        AR.load_ar_model(model)
    with pytest.raises(DiffreasonError, match="holds another model"):  # no trainer state: nothing to resume from
        AR.resume_or_build_ar(tmp_path / "run", "sudoku-tiny", 0)
    (tmp_path / "run" / STATE_FILE).write_bytes(b"")
    if "autoregressive" in message:  # another kind of model: still refused
        with pytest.raises(DiffreasonError, match="holds another model"):
            AR.resume_or_build_ar(tmp_path / "run", "sudoku-tiny", 0)
    else:  # weights torn by a crash: rebuilt, the trainer state fills them in
        assert isinstance(AR.resume_or_build_ar(tmp_path / "run", "sudoku-tiny", 0), AR.ARSudoku)
