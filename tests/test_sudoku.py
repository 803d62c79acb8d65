"""Sudoku task: parsing, verifier, exact solver, generator tiers, template, training data, solving, CLI, training."""

import io
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from rich.console import Console

from diffreason import CanvasConstraint
from diffreason.tasks import sudoku as S

EASY = S.generate("easy", 0)


@pytest.fixture(scope="module")
def sudoku_lm():
    return S.build_sudoku_model("sudoku-tiny", seed=0)


@pytest.fixture(scope="module")
def sudoku_checkpoint(tmp_path_factory, sudoku_lm):
    path = tmp_path_factory.mktemp("sudoku") / "model"
    sudoku_lm.save(path)
    return path


def test_parse_formats():
    flat = S.to_string(EASY.puzzle)
    assert S.parse(flat) == EASY.puzzle
    assert S.parse(flat.replace(".", "0")) == EASY.puzzle
    assert S.parse(S.to_grid(EASY.puzzle)) == EASY.puzzle  # 9-line grid with separators
    assert S.parse(" ".join(flat)) == EASY.puzzle


@pytest.mark.parametrize(
    "text, message",
    [
        ("1" * 80, "80 cells, expected 81"),
        ("x" + "." * 80, "invalid character(s) 'x'"),
        ("11" + "." * 79, "contradictory givens: 1 at r1c1 and r1c2"),
        ("5" + "." * 8 + "5" + "." * 71, "contradictory givens: 5 at r1c1 and r2c1"),
        ("7" + "." * 9 + "7" + "." * 70, "contradictory givens: 7 at r1c1 and r2c2"),
    ],
)
def test_parse_errors(text, message):
    with pytest.raises(S.SudokuError) as info:
        S.parse(text)
    assert message in str(info.value)


def test_verifier():
    assert S.verify(EASY.puzzle, EASY.solution)
    wrong = list(EASY.solution)
    i = EASY.puzzle.index(0)
    wrong[i] = wrong[i] % 9 + 1
    assert not S.verify(EASY.puzzle, wrong)
    assert not S.verify(EASY.puzzle, None)
    other = S.generate("easy", 1).solution
    assert S.verify([0] * 81, other) and not S.verify(EASY.puzzle, other)
    # strings, as SolveResult holds them (a TypeError before)
    assert S.verify(S.to_string(EASY.puzzle), "".join(map(str, EASY.solution)))
    assert not S.verify(S.to_string(EASY.puzzle), "".join(map(str, wrong)))
    assert not S.verify(EASY.puzzle, "12x") and not S.verify("1" * 80, EASY.solution)


def test_exact_solver():
    solutions, stats = S.solve_exact(EASY.puzzle)
    assert solutions == [EASY.solution] and stats.nodes > 0
    assert S.solution_count([0] * 81) == 2  # capped at the limit
    blank_two = list(EASY.solution)
    # remove a "deadly pattern"-free pair: a puzzle with all but one cell given still has one solution
    blank_two[0] = 0
    assert S.solution_count(blank_two) == 1


@pytest.mark.parametrize("tier", list(S.TIERS))
def test_generator_tiers(tier):
    lo, hi, min_guesses, max_guesses = S.TIERS[tier]
    a, b = S.generate(tier, 7), S.generate(tier, 7)
    assert a.puzzle == b.puzzle  # deterministic
    assert S.generate(tier, 8).puzzle != a.puzzle
    assert S.solution_count(a.puzzle) == 1 and S.verify(a.puzzle, a.solution)
    assert lo <= a.givens <= hi and min_guesses <= a.guesses <= max_guesses
    rated = S.difficulty(a.puzzle)
    assert rated.givens == a.givens and (rated.singles or rated.guesses > 0)
    if tier == "diabolical":  # as hard as the public hard collections: singles do not crack it, search does
        assert not rated.singles and rated.guesses >= S.DIABOLICAL_GUESSES
    if tier in ("extreme", "diabolical"):  # minimal: removing any given breaks uniqueness
        for i in [i for i, d in enumerate(a.puzzle) if d][:10]:
            p = list(a.puzzle)
            p[i] = 0
            assert S.solution_count(p) == 2


def test_difficulty_counts_singles_then_search():
    easy = S.generate("easy", 3)
    rated = S.difficulty(easy.puzzle)
    assert rated.singles and rated.guesses == 0 and rated.naked + rated.hidden == 81 - easy.givens
    # a naked single: the last blank of a solved grid
    grid = list(easy.solution)
    grid[40] = 0
    assert S.difficulty(grid) == S.Difficulty(80, 1, 0, True, 0)
    rated = [S.difficulty(p.puzzle) for p in S.generate_set("hard", 12, seed=3)]
    assert any(r.hidden > 0 for r in rated)  # hidden singles place digits naked ones cannot
    assert all(r.naked + r.hidden == 81 - r.givens for r in rated if r.singles)
    public = S.parse("4.....8.5.3..........7......2.....6.....8.4......1.......6.3.7.5..2.....1.4......")  # top95 #1
    hard = S.difficulty(public)
    assert not hard.singles and hard.guesses > 10  # (a published hard puzzle: singles stall, search needs guesses)


def test_template_and_tokens():
    t = S.template(EASY.puzzle)
    assert len(t) == 81 and t.vocab_size == S.VOCAB_SIZE
    i_given = next(i for i, d in enumerate(EASY.puzzle) if d)
    i_blank = EASY.puzzle.index(0)
    assert t.allowed(i_given).tolist() == [S.given_token(i_given, EASY.puzzle[i_given])]
    assert t.allowed(i_blank).tolist() == [S.free_token(i_blank, d) for d in range(1, 10)]
    filled = [S.given_token(i, d) if EASY.puzzle[i] else S.free_token(i, d) for i, d in enumerate(EASY.solution)]
    assert t.violations(filled) == [] and S.decode(filled) == EASY.solution
    tok = S.make_tokenizer()
    assert tok.convert_ids_to_tokens(S.free_token(80, 9)) == "r9c9=9"
    assert tok.convert_ids_to_tokens(S.given_token(0, 3)) == "r1c1#3"
    assert S.decode([S.free_token(1, 2)] + filled[1:]) is None  # a token of the wrong cell is not a grid


def test_training_stream_is_valid_and_follows_the_curriculum():
    stream = S.SudokuStream(seed=3, pool_size=16)
    solutions, blanks = stream.batch(32, progress=0.0)
    assert all(S.verify([0] * 81, g.tolist()) for g in solutions)  # augmentation keeps grids valid
    lo, hi = stream.blanks_range(0.0)
    assert all(lo <= int(b.sum()) <= hi for b in blanks)
    assert stream.blanks_range(1.0)[1] > hi
    target, noise = S.training_tensors(solutions, blanks, torch.Generator().manual_seed(0))
    allowed = S.allowed_mask(blanks, target)
    assert bool(allowed.gather(2, target[..., None]).all()) and bool(allowed.gather(2, noise[..., None]).all())
    assert torch.equal(noise[~blanks], target[~blanks])
    assert (allowed.sum(-1) == torch.where(blanks, 9, 1)).all()
    # the stream state round-trips (resumable training)
    state = stream.state_dict()
    a = stream.batch(4, 0.5)
    stream.load_state_dict(state)
    b = stream.batch(4, 0.5)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_conflict_mask():
    tokens = torch.tensor([[S.free_token(i, d) for i, d in enumerate(EASY.solution)]])
    assert not bool(S.conflict_mask(tokens).any())
    bad = tokens.clone()
    bad[0, 0] = S.free_token(0, EASY.solution[1])  # repeats the digit of r1c2
    clash = S.conflict_mask(bad)[0]
    assert bool(clash[0]) and bool(clash[1])


@pytest.mark.parametrize("mode", S.MODES)
def test_solve_respects_givens_whatever_the_model(sudoku_lm, mode):
    puzzles = [S.generate("medium", k).puzzle for k in range(3)]
    results = S.solve(sudoku_lm, puzzles, mode=mode, max_steps=6)
    for p, r in zip(puzzles, results):
        assert r.mode == mode and 1 <= r.steps <= 6
        cells = [int(c) for c in r.solution]
        assert all(d == c for d, c in zip(p, cells) if d) and all(1 <= c <= 9 for c in cells)
        assert r.solved == S.verify(p, cells)


def test_verified_mode_keeps_conflicting_canvases_running(sudoku_lm):
    """An untrained model's grids conflict, so verified mode never lets them stop early."""
    results = S.solve(sudoku_lm, [EASY.puzzle], mode="verified", max_steps=5)
    assert results[0].steps == 5 or results[0].solved


def test_verified_hook_reopens_only_within_the_budget():
    """A conflicting grid that 'converged' is re-opened, except at its last step: the budget always ends it."""
    from diffreason import RenoiseSampler, SamplerConfig

    sampler = RenoiseSampler(SamplerConfig(max_denoising_steps=3))
    constraint = CanvasConstraint.from_templates([S.template(EASY.puzzle)] * 2)
    state = sampler.init_state(2, 81, S.VOCAB_SIZE, [torch.Generator().manual_seed(i) for i in range(2)], constraint)
    clashing = torch.tensor([S.free_token(i, 1) if not d else S.given_token(i, d) for i, d in enumerate(EASY.puzzle)])
    state.argmax = torch.stack([clashing, clashing])
    state.done[:] = True
    state.stopped_early[:] = True
    state.steps_left = torch.tensor([2, 0], dtype=torch.int32)
    S.verified_hook(sampler)(state, torch.arange(2))
    assert state.done.tolist() == [False, True]
    assert state.stopped_early.tolist() == [False, False]


def test_verified_hook_stops_a_solved_grid_at_once():
    """A conflict-free argmax grid is a solution: its row stops (early) whatever the model's confidence; a row with
    a conflict goes on."""
    from diffreason import RenoiseSampler, SamplerConfig

    sampler = RenoiseSampler(SamplerConfig(max_denoising_steps=8))
    constraint = CanvasConstraint.from_templates([S.template(EASY.puzzle)] * 2)
    state = sampler.init_state(2, 81, S.VOCAB_SIZE, [torch.Generator().manual_seed(i) for i in range(2)], constraint)
    tokens = lambda cells: torch.tensor([S.given_token(i, d) if d else S.free_token(i, c)  # noqa: E731
                                         for i, (d, c) in enumerate(zip(EASY.puzzle, cells))])
    clashing = list(EASY.solution)
    blank = EASY.puzzle.index(0)
    clashing[blank] = clashing[blank] % 9 + 1  # a digit its row already holds
    state.argmax = torch.stack([tokens(EASY.solution), tokens(clashing)])
    state.steps_left = torch.tensor([5, 5], dtype=torch.int32)
    S.verified_hook(sampler)(state, torch.arange(2))
    assert state.done.tolist() == [True, False]
    assert state.stopped_early.tolist() == [True, False]
    assert S.decode(state.argmax[0].tolist()) == list(EASY.solution)


def test_verified_mode_stops_when_the_grid_is_solved():
    """The shipped model on medium puzzles: verified mode takes fewer steps than model mode (it stops at the first
    solved grid, not when the model is sure; on 64 such puzzles about half), and what it returns as solved is."""
    from diffreason import load_model
    from diffreason.model import WEIGHTS_DIR

    lm = load_model(WEIGHTS_DIR / "sudoku-base")
    puzzles = [p.puzzle for p in S.generate_set("medium", 8, seed=3)]
    model, verified = (S.solve(lm, puzzles, mode=m) for m in ("model", "verified"))
    assert sum(r.solved for r in verified) > 0 and sum(r.solved for r in model) > 0
    assert all(S.verify(p, [int(c) for c in r.solution]) == r.solved for p, r in zip(puzzles, verified))
    assert sum(r.steps for r in verified) < sum(r.steps for r in model)


def test_solve_errors(sudoku_lm, tiny_lm):
    with pytest.raises(S.SudokuError, match="unknown mode"):
        S.solve(sudoku_lm, [EASY.puzzle], mode="magic")
    with pytest.raises(Exception, match="not a Sudoku model"):
        S.solve(tiny_lm, [EASY.puzzle])
    cells = list(EASY.puzzle)
    for kwargs, puzzle, message in [
        (dict(max_steps=0), cells, "max_steps must be an integer of at least 1, got 0"),
        (dict(max_steps=1.5), cells, "max_steps must be an integer of at least 1, got 1.5"),
        (dict(batch_size=-1), cells, "batch_size must be an integer of at least 1, got -1"),  # (answered nothing)
        (dict(batch_size=0), cells, "batch_size must be an integer of at least 1, got 0"),
        (dict(samples=2.5), cells, "samples must be an integer in [1, 256], got 2.5"),  # (reported 'model ×2.5')
        (dict(samples=True), cells, "samples must be an integer in [1, 256], got True"),
        ({}, cells[:80], "puzzle has 80 cells, expected 81"),
        ({}, [10] + cells[1:], "a puzzle's cells are digits 0-9 (0 blank), got 10"),
        ({}, [-1] + cells[1:], "got -1"),
        ({}, [1, 1] + [0] * 79, "contradictory givens: 1 at r1c1 and r1c2"),
    ]:
        with pytest.raises(S.SudokuError, match=re.escape(message)):
            S.solve(sudoku_lm, [puzzle], **kwargs)


def run_cli(*args, stdin=None):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "diffreason.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=300, env=env)


def test_cli_solve_json_lines_in_input_order(sudoku_checkpoint, tmp_path):
    puzzles = [S.to_string(S.generate("easy", k).puzzle) for k in range(3)]
    f = tmp_path / "p.txt"
    f.write_text("\n".join([puzzles[0], "", "# a comment", puzzles[1], puzzles[2]]) + "\n")
    p = run_cli("solve", "sudoku", "--model", str(sudoku_checkpoint), "--steps", "3", "--json", "--file", str(f))
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert [r["puzzle"] for r in rows] == puzzles
    for r in rows:
        assert set(r) >= {"puzzle", "solution", "solved", "steps", "mode"} and r["mode"] == "model"
        assert len(r["solution"]) == 81 and r["steps"] <= 3
    p2 = run_cli("solve", "sudoku", "--model", str(sudoku_checkpoint), "--steps", "3", "--json", stdin=puzzles[0])
    assert json.loads(p2.stdout)["puzzle"] == puzzles[0]


def test_cli_solve_plain_and_watch(sudoku_checkpoint):
    puzzle = S.to_string(EASY.puzzle)
    p = run_cli("solve", "sudoku", "--model", str(sudoku_checkpoint), "--steps", "2", "--mode", "verified",
                "--watch", puzzle)
    assert p.returncode == 0, p.stderr
    assert "steps (mode verified)" in p.stdout and "step 2/2" in p.stderr


def test_a_step_callback_sees_puzzle_indices_over_every_batch(sudoku_lm):
    """`--watch` shows puzzle 0: the callback's index is the puzzle's, not its place in a later batch (where the
    watcher drew puzzle 3 over puzzle 0's givens)."""
    puzzles = [S.generate("easy", k).puzzle for k in range(4)]
    seen: dict[int, list] = {}
    results = S.solve(sudoku_lm, puzzles, max_steps=3, batch_size=1,
                      callback=lambda k, trace: seen.setdefault(k, []).append(list(trace.argmax[: S.CELLS])))
    assert sorted(seen) == [0, 1, 2, 3]
    for k, res in enumerate(results):
        assert len(seen[k]) == res.steps  # one trace a step, of this puzzle only
        final = [S.token_digit(t) for t in seen[k][-1]]
        assert all(final[i] == g for i, g in enumerate(puzzles[k]) if g)  # its own givens


def test_cli_plain_output_is_not_wrapped_at_the_terminal_width(sudoku_checkpoint):
    p = subprocess.run([sys.executable, "-m", "diffreason.cli", "solve", "sudoku", "--model", str(sudoku_checkpoint),
                        "--steps", "2", "--samples", "2", S.to_string(EASY.puzzle)], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHONWARNINGS": "ignore", "COLUMNS": "20"})
    assert p.returncode == 0, p.stderr
    verdict = p.stdout.splitlines()[11]
    assert verdict.startswith(("solved in ", "NOT solved in ")) and " chains" in verdict and verdict.endswith(")")
    assert len(verdict) > 20


@pytest.mark.parametrize(
    "args, message",
    [
        (["123"], "puzzle has 3 cells, expected 81"),
        (["--mode", "guess", "PUZZLE"], "--mode must be one of model, verified"),
        (["--file", "/nonexistent.txt"], "does not exist"),
        (["--steps", "0", "PUZZLE"], "--steps must be at least 1"),
        (["--t-max", "0.3", "PUZZLE"],
         "--t-max 0.3 leaves t_max (0.3) not above t_min (0.4) in the checkpoint's schedule"),
        (["--t-min", "-1", "PUZZLE"], "--t-min must lie in [0, 100], got -1"),
    ],
)
def test_cli_solve_errors(args, message, sudoku_checkpoint):
    args = [S.to_string(EASY.puzzle) if a == "PUZZLE" else a for a in args]
    p = run_cli("solve", "sudoku", "--model", str(sudoku_checkpoint), *args)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and message in lines[0], p.stderr


def test_cli_solve_rejects_a_non_sudoku_model(tiny_checkpoint):
    p = run_cli("solve", "sudoku", "--model", str(tiny_checkpoint), S.to_string(EASY.puzzle))
    assert p.returncode == 2 and "not a Sudoku model" in p.stderr


def test_cli_train_deepens_the_init_model(sudoku_checkpoint, tmp_path):
    run = tmp_path / "run"
    p = run_cli("train", "sudoku", "--init-from", str(sudoku_checkpoint), "--grow-to", "3", "--steps", "1",
                "--batch-size", "2", "--eval-every", "0", "--precision", "bf16", "--threads", "1", "--run-dir", str(run))
    assert p.returncode == 0, p.stderr
    from diffreason.model import load_model

    grown = load_model(run / "model")
    assert grown.config.text_config.num_hidden_layers == 3  # sudoku-tiny has 2
    assert json.loads((run / "train_config.json").read_text())["precision"] == "bf16"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--grow-to", "4"], "--grow-to deepens the --init-from model; give --init-from too"),
        (["--init-from", "CKPT", "--grow-to", "2"], "has 2 layers already"),
        (["--init-from", "CKPT", "--grow-to", "5"], "can add at most 1 layers"),
        (["--eval-tier", "insane"], "--eval-tier 'insane': choose one of easy, medium, hard, extreme"),
        (["--precision", "fp16"], "--precision must be fp32 or bf16, got 'fp16'"),
    ],
)
def test_cli_train_errors(args, message, sudoku_checkpoint, tmp_path):
    args = [str(sudoku_checkpoint) if a == "CKPT" else a for a in args]
    p = run_cli("train", "sudoku", "--steps", "1", "--run-dir", str(tmp_path / "run"), *args)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and message in lines[0], p.stderr
    assert not (tmp_path / "run" / "model").exists()


def test_cli_resume_refuses_another_run_and_says_changed_settings(tmp_path):
    # QA: --seed 2 or --preset sudoku-base on resume ran silently, mixing runs; --lr changes went unsaid
    run = ["train", "sudoku", "--preset", "sudoku-tiny", "--batch-size", "2", "--eval-every", "0",
           "--run-dir", str(tmp_path / "run")]
    assert run_cli(*run, "--steps", "2").returncode == 0
    for extra, what in ((["--seed", "2"], "seed 0 there, 2 now"),
                        (["--preset", "sudoku-small"], 'preset "sudoku-tiny" there, "sudoku-small" now')):
        p = run_cli(*run, "--steps", "3", *extra)
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert p.returncode == 2 and len(lines) == 1 and what in lines[0] and "another --run-dir" in lines[0], p.stderr
    p = run_cli(*run, "--steps", "3", "--lr", "0.002")
    assert p.returncode == 0 and "resuming with changed settings: steps 2 → 3, lr 0.001 → 0.002" in p.stderr, p.stderr
    history = [json.loads(x) for x in (tmp_path / "run" / "train_config_history.jsonl").read_text().splitlines()]
    assert [(h["until_step"], h["config"]["lr"]) for h in history] == [(2, 0.001)]
    assert json.loads((tmp_path / "run" / "train_config.json").read_text())["lr"] == 0.002


def test_training_stream_mixes_in_unique_puzzles_under_symmetries():
    stream = S.SudokuStream(seed=5, pool_size=8, puzzle_fraction=1.0, puzzle_pool_size=10)
    solutions, blanks = stream.batch(12, progress=0.0)
    for grid, blank in zip(solutions.tolist(), blanks.tolist()):
        puzzle = [0 if b else d for d, b in zip(grid, blank)]
        assert S.verify(puzzle, grid)
        assert S.solution_count(puzzle) == 1  # a symmetry of a unique puzzle is unique
    # the masks are the pool's puzzles (blank counts of hard / extreme puzzles), not random blanks
    assert {int(b.sum()) for b in blanks} <= {int(b.sum()) for b in stream.puzzle_blanks}
    # training puzzles come from seeds no eval set uses
    evals = {S.to_string(p.puzzle) for tier in ("medium", "hard") for p in S.generate_set(tier, 3, seed=0)}
    assert not evals & {S.to_string([0 if b else d for d, b in zip(g, m)])
                        for g, m in zip(stream.puzzles.tolist(), stream.puzzle_blanks.tolist())}
    with pytest.raises(S.SudokuError, match="puzzle_fraction"):
        S.SudokuStream(seed=0, pool_size=2, puzzle_fraction=1.5)


@pytest.mark.parametrize("device, precision", [
    ("cpu", "fp32"),
    ("cpu", "bf16"),
    pytest.param("cuda", "bf16", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")),
])
def test_training_runs_and_resumes(tmp_path, device, precision):
    from diffreason.train import TrainConfig, train

    lm = S.build_sudoku_model("sudoku-tiny", seed=1)
    lm.model.to(device)
    stream = S.SudokuStream(seed=1, pool_size=8)
    batches = S.sft_batches(stream, torch.Generator().manual_seed(1), device=device)
    cfg = TrainConfig(steps=3, batch_size=4, eval_every=0, save_every=2, precision=precision)
    train(lm, batches, cfg, tmp_path, stream_state=(stream.state_dict, stream.load_state_dict))
    log = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3] and all(np.isfinite(r["loss"]) for r in log)
    assert (tmp_path / "model" / "model.safetensors").is_file()
    # resume: a longer run continues from step 3 and the saved weights
    lm2 = S.build_sudoku_model("sudoku-tiny", seed=99)
    lm2.model.to(device)  # on CUDA the checkpoint's generator state comes back there: resuming must still work
    train(lm2, batches, cfg.model_copy(update={"steps": 5}), tmp_path,
          stream_state=(stream.state_dict, stream.load_state_dict))
    # an interrupted run (checkpoint at step 4, log up to 5) redoes step 5 without logging it twice
    log_path = tmp_path / "log.jsonl"
    log_path.write_text(log_path.read_text() + json.dumps({"step": 6, "loss": 0.0}) + "\n")
    train(lm2, batches, cfg.model_copy(update={"steps": 5}), tmp_path,
          stream_state=(stream.state_dict, stream.load_state_dict))
    log = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5]


def test_a_resumed_run_is_the_uninterrupted_run(tmp_path):
    # the noise tokens' generator is part of the stream's saved state (QA: losses differed from step 5 on)
    from diffreason.train import TrainConfig, train

    cfg = TrainConfig(steps=4, batch_size=4, eval_every=0, save_every=2, seed=1)

    class Killed(Exception):
        pass

    def run(run_dir, kill_at=None):  # (a fresh model and stream, as a new process has)
        lm = S.build_sudoku_model("sudoku-tiny", seed=1)
        stream = S.SudokuStream(seed=1, pool_size=8)
        make, calls = S.sft_batches(stream), []

        def batches(size, progress):
            calls.append(1)
            if len(calls) == kill_at:
                raise Killed  # (after the checkpoint of step 2)
            return make(size, progress)

        try:
            train(lm, batches, cfg, run_dir, stream_state=(stream.state_dict, stream.load_state_dict))
        except Killed:
            pass
        return [json.loads(x)["loss"] for x in (run_dir / "log.jsonl").read_text().splitlines()]

    whole = run(tmp_path / "whole")
    assert len(run(tmp_path / "cut", kill_at=4)) == 3
    assert run(tmp_path / "cut") == whole


def test_self_conditioning_pass_runs_only_for_the_examples_that_use_it(monkeypatch):
    from diffreason.train import TrainConfig, _forward, sft_loss

    model = S.build_sudoku_model("sudoku-tiny", seed=2).model
    batch = S.sft_batches(S.SudokuStream(seed=2, pool_size=8), torch.Generator().manual_seed(2))(8, 1.0)
    cfg = TrainConfig(self_conditioning_p=0.5)
    sizes, forward = [], model.forward
    monkeypatch.setattr(model, "forward", lambda **kw: sizes.append(kw["input_ids"].shape[0]) or forward(**kw))
    loss, _ = sft_loss(model, batch, cfg, torch.Generator().manual_seed(3))
    monkeypatch.undo()
    # the objective as written: pass 1 over the whole batch, its logits kept where the per-example draw says so
    g = torch.Generator().manual_seed(3)
    B, C = batch.target.shape
    t = cfg.t_min + (1 - cfg.t_min) * torch.rand(B, 1, generator=g)
    canvas = torch.where(batch.corruptible & (torch.rand(B, C, generator=g) < t), batch.noise, batch.target)
    sc_mask = torch.rand(B, generator=g) < cfg.self_conditioning_p
    assert 0 < int(sc_mask.sum()) < B and sizes == [int(sc_mask.sum()), B]
    with torch.no_grad():
        sc_logits = _forward(model, batch.prompt_ids, canvas).logits.masked_fill(~batch.allowed, float("-inf"))
        logits = _forward(model, batch.prompt_ids, canvas, sc_logits, sc_mask).logits
    ce = torch.nn.functional.cross_entropy(logits.masked_fill(~batch.allowed, float("-inf")).flatten(0, 1),
                                           batch.target.flatten(), reduction="none").view(B, C)
    weight = batch.corruptible.float()
    assert float(loss) == pytest.approx(float((ce * weight).sum() / weight.sum()), rel=1e-5)


def test_time_budget_ends_the_schedule_and_resumes_with_the_time_spent(tmp_path, monkeypatch):
    import diffreason.train as T

    clock = iter(range(0, 10_000, 10))  # every perf_counter call: 10 more seconds
    monkeypatch.setattr(T.time, "perf_counter", lambda: float(next(clock)))
    lm = S.build_sudoku_model("sudoku-tiny", seed=1)
    stream = S.SudokuStream(seed=1, pool_size=8)
    batches = S.sft_batches(stream, torch.Generator().manual_seed(1))
    cfg = T.TrainConfig(steps=1000, batch_size=2, eval_every=0, save_every=1000, warmup=1, time_budget=60)
    out = io.StringIO()
    T.train(lm, batches, cfg, tmp_path, stream_state=(stream.state_dict, stream.load_state_dict),
            console=Console(file=out, width=150))
    # the bar reports the real step count, not "1000/1000" once the time is up
    assert "100%" in out.getvalue() and "step 6 " in out.getvalue() and "/1000" not in out.getvalue()
    log = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    # 10 s a step under a 60 s budget: 6 steps (far short of 1000), the last at the schedule's floor
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6] and log[-1]["elapsed"] == 60
    lrs = [r["lr"] for r in log]
    assert lrs[0] == cfg.lr and all(a > b for a, b in zip(lrs, lrs[1:]))
    assert T.lr_at(6, cfg, 1.0) == pytest.approx(cfg.lr * cfg.min_lr_ratio)
    assert (tmp_path / "model" / "model.safetensors").is_file()
    # a rerun with a bigger budget resumes from the 60 s already spent
    T.train(lm, batches, cfg.model_copy(update={"time_budget": 80}), tmp_path,
            stream_state=(stream.state_dict, stream.load_state_dict))
    log = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 9)) and log[-1]["elapsed"] == 80


def test_schedule_without_a_time_budget_is_warmup_then_cosine_over_steps():
    from diffreason.train import TrainConfig, lr_at

    cfg = TrainConfig(steps=300, warmup=100, lr=1e-3, min_lr_ratio=0.1)
    assert lr_at(0, cfg) == pytest.approx(1e-5) and lr_at(99, cfg) == pytest.approx(1e-3)
    assert lr_at(100, cfg) == pytest.approx(1e-3)
    assert lr_at(200, cfg) == pytest.approx(1e-3 * (0.1 + 0.9 * 0.5))
    assert lr_at(300, cfg) == pytest.approx(1e-4)


def test_sft_loss_learns_on_a_fixed_batch():
    """A few optimiser steps on one batch lower the loss: the objective and its gradients are wired right."""
    from diffreason.train import TrainConfig, sft_loss

    lm = S.build_sudoku_model("sudoku-tiny", seed=2)
    stream = S.SudokuStream(seed=2, pool_size=4)
    batch = S.sft_batches(stream, torch.Generator().manual_seed(2))(8, 0.0)
    cfg = TrainConfig(self_conditioning_p=0.5)
    opt = torch.optim.AdamW(lm.model.parameters(), lr=3e-3)
    lm.model.train()
    losses = []
    for k in range(15):
        loss, _ = sft_loss(lm.model, batch, cfg, torch.Generator().manual_seed(k))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < losses[0] * 0.9


def test_cli_eval_writes_json_markdown_and_png(sudoku_checkpoint, sudoku_lm, tmp_path):
    p = run_cli("eval", "sudoku", "--model", str(sudoku_checkpoint), "--n", "2", "--tiers", "easy,extreme",
                "--budgets", "2,4", "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr
    report = json.loads((tmp_path / "sudoku.json").read_text())
    assert set(report["tiers"]) == {"easy", "extreme"}
    own = sudoku_lm.sampler_config.max_denoising_steps  # the headline run: the checkpoint's own schedule
    assert report["budget"] == own and own not in (2, 4)
    for entry in report["tiers"].values():
        assert set(entry["modes"]) == {"model", "verified"}
        for m in entry["modes"].values():
            assert 0 <= m["solve_rate"] <= 1 and set(m["solve_rate_at_budget"]) == {"2", "4"}
            assert 1 <= m["steps_median"] <= own and len(m["solved_within"]) == own
            assert m["solve_rate"] + m["unsolved_ran_out"] + m["unsolved_stopped"] == pytest.approx(1)
    md = (tmp_path / "sudoku.md").read_text()
    assert "| easy |" in md and "verified" in md and "diffreason eval sudoku" in md and "out of steps / stopped" in md
    assert f"checkpoint's own {own}-step schedule" in md and "| @2 | @4 |" in md
    assert (tmp_path / "sudoku.png").read_bytes()[:4] == b"\x89PNG"
    bad = run_cli("eval", "sudoku", "--model", str(sudoku_checkpoint), "--tiers", "impossible")
    assert bad.returncode == 2 and "unknown tier or mode 'impossible'" in bad.stderr


def test_embedded_checkpoint_is_a_small_diffusiongemma_that_solves_easy_puzzles():
    from diffreason import load_model
    from diffreason.model import EMBEDDED_SUDOKU

    files = list(EMBEDDED_SUDOKU.iterdir())
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"} <= {f.name for f in files}
    assert sum(f.stat().st_size for f in files) <= 20 * 2**20
    # stored in bfloat16 (that is what fits 6.7M parameters in 20 MB); loading upcasts to float32 for the CPU
    assert json.loads((EMBEDDED_SUDOKU / "config.json").read_text())["dtype"] == "bfloat16"
    lm = load_model(EMBEDDED_SUDOKU)
    assert type(lm.model).__name__ == "DiffusionGemmaForBlockDiffusion" and lm.canvas_length == 81
    assert {p.dtype for p in lm.model.parameters()} == {torch.float32}
    puzzles = S.generate_set("easy", 12, seed=77)
    results = S.solve(lm, [p.puzzle for p in puzzles], mode="model")
    # the eval measures 100 % on easy puzzles; a broken checkpoint or sampler solves none
    assert sum(r.solved for r in results) >= 8
    assert all(r.solution == "".join(map(str, p.solution)) for r, p in zip(results, puzzles) if r.solved)


def test_temperature_sweep_reports_every_schedule_and_restores_the_sampler(sudoku_lm, tmp_path):
    from diffreason.evals.sudoku_sweep import sweep, write

    before = sudoku_lm.sampler_config
    rows = sweep(sudoku_lm, [(0.8, 0.4, None), (1.5, 0.4, 3, 0.05)], ["easy"], n=2, seed=0)
    assert sudoku_lm.sampler_config is before
    budget = before.max_denoising_steps
    assert [(r["t_max"], r["max_steps"], r["entropy_bound"], r["tier"]) for r in rows] == [
        (0.8, budget, before.entropy_bound, "easy"), (1.5, 3, 0.05, "easy")]
    assert all(0 <= r["solve_rate"] <= 1 and 1 <= r["steps_median"] <= r["max_steps"] for r in rows)
    write(rows, tmp_path, "cmd", "tiny", 2, 0)
    md = (tmp_path / "sweep.md").read_text()
    assert f"| 0.8 → 0.4 | {budget} | {before.entropy_bound:g} |" in md and "| 1.5 → 0.4 | 3 | 0.05 |" in md
    assert (tmp_path / "sweep.png").stat().st_size > 0


@pytest.mark.parametrize("schedules, message", [("1.5", "must look like"), ("1.5:0.4:x", "must look like"),
                                                 ("1.5:0.4:0", "greater than or equal to 1"),
                                                 ("1.5:0.4:20:-1", "schedule 1.5:0.4:20:-1: Input should be greater")])
def test_sweep_refuses_malformed_schedules(schedules, message, capsys):
    from diffreason.evals.sudoku_sweep import main

    with pytest.raises(SystemExit) as exc:
        main(["--schedules", schedules])
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_plot_training_draws_runs_that_evaluate_different_tiers(tmp_path):
    from diffreason.evals.plot_training import main as plot_training

    for name, tier in (("first", "medium"), ("second", "hard")):
        run = tmp_path / name
        run.mkdir()
        records = [{"step": s, "loss": 1.0 / s, **({"eval": {f"{tier}_solved": s / 10}} if s % 2 == 0 else {})}
                   for s in range(1, 7)]
        (run / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        (run / "train_config.json").write_text(json.dumps({"batch_size": 8}))
    out = tmp_path / "curve.png"
    plot_training(str(out), str(tmp_path / "first"), str(tmp_path / "second"))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_progress_fit_recovers_a_power_law_and_the_puzzles_it_needs():
    from diffreason.evals.sudoku_progress import power_law_fit, puzzles_for, wilson

    # unsolved = 2 · puzzles^-0.25: 50 % solved at 16 puzzles, 75 % at 256; 95 % at 40^4 = 2,560,000
    puzzles = [16, 256, 4096]
    rates = [1 - 2 * d ** -0.25 for d in puzzles]
    a, b = power_law_fit(puzzles, rates)
    assert b == pytest.approx(-0.25) and a == pytest.approx(math.log(2))
    assert puzzles_for((a, b), 0.95) == pytest.approx(2_560_000)
    assert puzzles_for((a, 0.1), 0.95) is None  # an unsolved fraction that grows reaches no target
    assert power_law_fit([10, 10], [0.5, 0.6]) is None and power_law_fit([10, 20], [1.0, 1.0]) is None
    lo, hi = wilson(5, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.2366, 0.7634)
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == 1.0


def test_progress_evaluates_each_checkpoint_alike_and_reports(sudoku_checkpoint, tmp_path):
    from diffreason.evals.sudoku_progress import evaluate, summarise, write

    rows = evaluate([(str(sudoku_checkpoint), 1000), (str(sudoku_checkpoint), 2000)], ["easy"], (1.0, 0.4, 3),
                    n=2, seed=0)
    assert [(r["puzzles"], r["tier"], r["n"]) for r in rows] == [(1000, "easy", 2), (2000, "easy", 2)]
    assert rows[0]["solved"] == rows[1]["solved"]  # the same weights, puzzles and seed: the same result
    assert all(r["interval"][0] <= r["solve_rate"] <= r["interval"][1] and r["steps_median"] <= 3 for r in rows)
    summary = summarise(rows, 0.95)
    assert summary["easy"]["points"] == 2
    write(rows, summary, 0.95, tmp_path, "cmd", 2, 0, (1.0, 0.4, 3))
    md = (tmp_path / "progress.md").read_text()
    assert "1 → 0.4 over 3 steps" in md and md.count("| easy |") == 2
    assert (tmp_path / "progress.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args, message", [
    (["--checkpoints", "a_dir"], "must look like DIR=640512"),
    (["--checkpoints", "a=1", "--schedule", "1.2:0.4"], "--schedule must look like"),
    (["--checkpoints", "a=1", "--target", "1.5"], "--target must lie between 0 and 1"),
    (["--checkpoints", "no_such_dir=1"], "model directory 'no_such_dir' does not exist"),
])
def test_progress_refuses_bad_arguments(args, message, capsys):
    from diffreason.evals.sudoku_progress import main

    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_read_puzzles_keeps_every_puzzle_with_its_line_and_each_error():
    """Lines of 81 cells and 9-line grids mix; a header or trailing comment, a blank line between grids and a bad
    puzzle are each handled on their own: two grids never merge into '162 cells', one bad line hides nothing."""
    a, b, c = (S.generate("easy", k).puzzle for k in range(3))
    text = "\n".join([
        "# a header above a grid",  # 1
        S.to_grid(a),  # 2-12: nine rows and two separator rows
        "",  # 13
        S.to_grid(b),  # 14-24
        S.to_string(c) + "  # a trailing comment",  # 25
        "   # an indented comment",  # 26
        "1" * 80,  # 27
        "1 2 3 | 4 5 6 | 7 8 9",  # 28: a grid that stops after one row
        "",  # 29
        "11" + "." * 79,  # 30
        "12x" + "." * 78,  # 31
    ])
    entries = S.read_puzzles(text)
    assert [(e.line, e.cells) for e in entries[:3]] == [(2, a), (14, b), (25, c)]
    assert all(e.error is None for e in entries[:3]) and entries[2].text == S.to_string(c)
    errors = [(e.line, e.error) for e in entries[3:]]
    assert [line for line, _ in errors] == [27, 28, 30, 31] and all(e.cells is None for e in entries[3:])
    assert "80 cells, expected 81" in errors[0][1]
    assert "grid has 1 row" in errors[1][1]
    assert "contradictory givens: 1 at r1c1 and r1c2" in errors[2][1]
    assert "invalid character(s) 'x'" in errors[3][1]


def test_a_grid_with_a_damaged_row_is_one_error_and_its_neighbours_are_read():
    a, b, c = (S.generate("easy", k).puzzle for k in range(3))
    rows = S.to_grid(b).splitlines()  # (11 lines: the rows of cells and two separator rows)
    rows[5] = rows[5][:-1]  # the 5th row of cells a cell short (the grid's 6th line: the file's 18th)
    entries = S.read_puzzles("\n\n".join([S.to_grid(a), "\n".join(rows), S.to_grid(c)]))
    assert [(e.cells is not None, e.error) for e in entries] == [
        (True, None), (False, "grid row 5 (line 18) has 8 cells, expected 9"), (True, None)]
    assert [entries[0].cells, entries[2].cells] == [a, c]


def test_read_puzzles_takes_the_puzzle_out_of_a_line_with_notes_or_csv_fields():
    a, b = (S.generate("hard", k) for k in range(2))
    dotted = S.to_string(a.puzzle).replace("0", ".")
    answer = "".join(map(str, a.solution))
    text = "\n".join([
        f"{dotted} // from a forum list",
        f"{S.to_string(b.puzzle)}  3.2",  # a trailing rating
        "source,question,answer,rating",  # a CSV header: not a puzzle, skipped
        f"forum,{dotted},{answer},7",  # the question, not the answer
        f"forum,{dotted[:-1]},{answer},7",  # a question a cell short: its error, never the answer in its place
        f"forum,{dotted}x,{answer},7",
        f"{dotted[1:]} {answer}",
    ])
    entries = S.read_puzzles(text)
    assert [(e.line, e.cells) for e in entries] == [(1, a.puzzle), (2, b.puzzle), (4, a.puzzle), (5, None),
                                                    (6, None), (7, None)]
    assert [e.error for e in entries[3:]] == ["puzzle has 80 cells, expected 81", "puzzle has invalid character(s) 'x'; "
                                              "use digits 1-9 and '.' or '0' for blanks", "puzzle has 80 cells, expected 81"]


def test_read_puzzles_skips_headings_headers_and_borders():
    """(Project Euler's `Grid 01` headings opened grids — every puzzle of such a file was lost —, and a CSV header or
    a `*-----*` border was a bad puzzle, so a good file exited 1.)"""
    a, b = (S.generate("easy", k).puzzle for k in range(2))
    rows = [S.to_string(p).replace(".", "0") for p in (a, b)]
    euler = "".join(f"Grid 0{k + 1}\n" + "\n".join(r[9 * i: 9 * i + 9] for i in range(9)) + "\n"
                    for k, r in enumerate(rows))
    assert [(e.line, e.cells, e.error) for e in S.read_puzzles(euler)] == [(2, a, None), (12, b, None)]
    boxed = "*-----------*\n" + "\n".join("|" + "|".join(rows[0][9 * i + 3 * j: 9 * i + 3 * j + 3] for j in range(3))
                                            + "|" for i in range(9)) + "\n*-----------*\n"
    assert [(e.cells, e.error) for e in S.read_puzzles(boxed)] == [(a, None)]
    kaggle = "quizzes,solutions\n" + "\n".join(f"{r},{r}" for r in rows)
    assert [(e.line, e.cells) for e in S.read_puzzles(kaggle)] == [(2, a), (3, b)]
    # lines of fewer than 17 cells outside a grid are not puzzles: page numbers, ratings, dates, ids
    assert S.read_puzzles("Puzzle 1\n- 12 -\n3.4\n2023-10-15\n") == []


@pytest.mark.parametrize("heading", ["2023-10-15", "15.10.2023", "1234567", "Puzzle 123"])
def test_a_heading_above_a_whole_grid_is_not_its_first_row(heading):
    """(A date or an id of 7-12 cells above a grid was read as its damaged first row: the grid was lost.)"""
    a, b = (S.to_string(S.generate("easy", k).puzzle).replace(".", "0") for k in range(2))
    text = "".join(f"{heading}\n" + "\n".join(p[9 * i: 9 * i + 9] for i in range(9)) + "\n" for p in (a, b))
    assert [(e.line, e.error) for e in S.read_puzzles(text)] == [(2, None), (12, None)]
    typo = "\n".join(["4x" + a[2:9]] + [a[9 * i: 9 * i + 9] for i in range(1, 9)])  # (a damaged first row stays one)
    assert [(e.line, e.error) for e in S.read_puzzles(typo)] == [
        (1, "puzzle has invalid character(s) 'x'; use digits 1-9 and '.' or '0' for blanks")]


def test_a_field_named_as_the_puzzle_is_read_not_the_solution():
    """(A JSON line or a CSV whose solution came first was read as the solution, scored solved.)"""
    k = S.generate("easy", 3)
    puzzle, solution = S.to_string(k.puzzle).replace(".", "0"), "".join(map(str, k.solution))
    for text in (f'{{"solution": "{solution}", "puzzle": "{puzzle}"}}',
                 f'{{"solution_grid": "{solution}", "puzzle_grid": "{puzzle}"}}',
                 f"solutions,quizzes\n{solution},{puzzle}\n",
                 f"solved_grid,grid\n{solution},{puzzle}\n",
                 f"puzzle_id,puzzle,solution\n7,{puzzle},{solution}\n",  # (not the id's column)
                 f"id,givens,puzzle,solution\n7,30,{puzzle},{solution}\n",
                 f"0f8fad5b-d9cb-469f-a165-70867728950e,{puzzle},{solution}\n",  # (an id of fewer than 41 cells)
                 f"1234567890123456789 {puzzle}\n",
                 f"solution: {solution}\npuzzle: {puzzle}\n"):  # (a line with a solution alone is no puzzle)
        assert [e.cells for e in S.read_puzzles(text)] == [k.puzzle], text


def test_a_footer_under_a_grid_is_skipped_and_an_extra_digit_row_is_an_error_not_a_guess():
    a, b = (S.to_string(S.generate("easy", k).puzzle).replace(".", "0") for k in range(2))
    grid = "\n".join(a[9 * i: 9 * i + 9] for i in range(9))
    assert [(e.line, e.cells is not None) for e in S.read_puzzles(f"{grid}\nBeginner 1\n\n{b}\n")] == [
        (1, True), (12, True)]
    entries = S.read_puzzles(f"100000000\n{grid}\n\n{b}\n")  # (an id, or a row too many: unclear which)
    assert [(e.line, e.cells is not None) for e in entries] == [(1, False), (12, True)]
    assert entries[0].error == "10 rows of 9 cells follow each other from here: grids have 9, so one of them is not " \
        "a grid's row"


def test_cli_eval_reads_puzzle_files_as_sets_with_their_difficulty(tmp_path):
    puzzles = [S.generate("hard", k).puzzle for k in range(3)]
    f = tmp_path / "my-set.txt"
    f.write_text("# three hard puzzles and a bad line\n" + "\n".join(S.to_string(p) for p in puzzles)
                 + "\n11" + "." * 79 + "\n")
    p = run_cli("eval", "sudoku", "--tiers", "", "--puzzles", str(f), "--n", "2", "--modes", "model", "--budgets", "",
                "--out", str(tmp_path / "out"))
    assert p.returncode == 0, p.stderr
    assert "line 5: contradictory givens" in p.stderr and "(skipped)" in p.stderr
    report = json.loads((tmp_path / "out" / "sudoku.json").read_text())
    entry = report["tiers"]["my-set"]
    assert entry["source"] == "file" and entry["n"] == 2  # the first --n answerable puzzles
    rated = [S.difficulty(x) for x in puzzles[:2]]
    assert entry["singles_solved"] == sum(r.singles for r in rated) / 2
    assert entry["guesses_median"] == sorted(r.guesses for r in rated)[0] / 2 + sorted(r.guesses for r in rated)[1] / 2
    assert "| my-set | file | 2 |" in (tmp_path / "out" / "sudoku.md").read_text()
    missing = run_cli("eval", "sudoku", "--puzzles", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "o2"))
    assert missing.returncode == 2 and "--puzzles" in missing.stderr and "does not exist" in missing.stderr
    # a file named as a tier beside it is its own set, not that tier's row (its results were lost: QA, 2026-12-06)
    (tmp_path / "easy.txt").write_text(f.read_text())
    p = run_cli("eval", "sudoku", "--tiers", "easy", "--puzzles", str(tmp_path / "easy.txt"), "--n", "1", "--modes",
                "model", "--budgets", "", "--out", str(tmp_path / "o3"))
    assert p.returncode == 0, p.stderr
    tiers = json.loads((tmp_path / "o3" / "sudoku.json").read_text())["tiers"]
    assert (tiers["easy"]["source"], tiers["easy.txt"]["source"]) == ("generator", "file")


def test_read_puzzles_grids_with_comment_lines_and_a_damaged_first_row():
    rows = [S.to_string(EASY.puzzle)[9 * r: 9 * r + 9] for r in range(9)]
    text = "# a grid\n" + "\n".join(rows[:3]) + "\n  # the middle band\n" + "\n".join(rows[3:]) + "\n"
    assert [(e.line, e.cells, e.error) for e in S.read_puzzles(text)] == [(2, EASY.puzzle, None)]
    for k in (0, 5):  # one error naming the damaged row, the first as any other (was two wrong errors for row 1)
        damaged = rows[:k] + [rows[k] + "1"] + rows[k + 1:]
        assert [(e.line, e.error) for e in S.read_puzzles("\n".join(damaged))] == [
            (1, f"grid row {k + 1} (line {k + 1}) has 10 cells, expected 9")]


def test_read_puzzles_reads_bytes_line_by_line():
    """A byte order mark, CRLF endings, a Latin-1 comment and a line that is not UTF-8: the good puzzles survive."""
    flat = S.to_string(EASY.puzzle).encode()
    data = b"\xef\xbb\xbf" + flat + b"\r\n# caf\xe9\r\nr\xe9sum\xe9\r\n" + flat + b"\r\n"
    entries = S.read_puzzles(data)
    assert [(e.line, e.cells is not None) for e in entries] == [(1, True), (3, False), (4, True)]
    assert entries[1].error == "not UTF-8 text (byte 0xe9 at column 2)"


def test_exact_solver_stops_at_its_node_budget():
    solutions, stats = S.solve_exact([0] * 81, limit=10**6, max_nodes=50)
    assert not stats.complete and stats.nodes <= 51 and len(solutions) < 10**6
    solutions, stats = S.solve_exact(EASY.puzzle, max_nodes=10**6)
    assert stats.complete and solutions == [EASY.solution]


def test_token_layout_constant_matches_the_special_tokens():
    """N_SPECIAL is written out (so that reading puzzles needs no transformers import); it must stay their count."""
    from diffreason.tokenizer import SPECIAL_TOKENS

    assert S.N_SPECIAL == len(SPECIAL_TOKENS) and len(S.make_tokenizer()) == S.VOCAB_SIZE


def test_puzzle_input_token_digits_and_solution_counts_are_library_functions(tmp_path, monkeypatch):
    """What `solve sudoku` calls: the PUZZLE argument, --file or stdin read into entries; the exact solver's count per
    entry (an unsolvable one gets its error); a cell token's digit, free or given."""
    puzzle = S.generate("easy", 0)
    entries, source = S.read_puzzle_input(S.to_string(puzzle.puzzle), None)
    assert source is None and entries[0].cells == list(puzzle.puzzle)
    f = tmp_path / "p.txt"
    f.write_text("# two\n" + S.to_string(puzzle.puzzle) + "\n12x" + "." * 60 + "\n")
    entries, source = S.read_puzzle_input(None, f)
    assert source == str(f) and [e.line for e in entries] == [2, 3] and entries[1].error is not None
    assert S.count_solutions(entries) == {0: 1}
    # a search cut short: after one solution it cannot say whether the puzzle is unique (None), after two it can
    two = S.parse(".3.6.8.1.6.2.9.3.8.9.3.2.6.8.9.6.4.3.2.8.3.9.7.3.2.8.6.6.5.7.8.2.7.1.6.5.4.2.6.7.")
    assert len(S.solve_exact(two, limit=5)[0]) == 2
    budgets = {len(S.solve_exact(two, limit=2, max_nodes=n)[0]): n for n in range(400, 0, -1)
               if not S.solve_exact(two, limit=2, max_nodes=n)[1].complete}
    assert S.count_solutions(S.read_puzzles(S.to_string(two)), max_nodes=budgets[1]) == {0: None}
    assert S.count_solutions(S.read_puzzles(S.to_string(two))) == {0: 2}
    with pytest.raises(S.DiffreasonError, match="give a PUZZLE or --file, not both"):
        S.read_puzzle_input("1", f)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\n")))
    with pytest.raises(S.DiffreasonError, match="no puzzle found in stdin: it is empty"):
        S.read_puzzle_input(None, None)
    for dash in (("-", None), (None, Path("-"))):  # `-` names stdin, as PUZZLE or as --file
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(S.to_string(puzzle.puzzle).encode())))
        entries, source = S.read_puzzle_input(*dash)
        assert source == "stdin" and entries[0].cells == list(puzzle.puzzle)
    assert [S.token_digit(S.free_token(5, d)) for d in range(1, 10)] == list(range(1, 10))
    assert [S.token_digit(S.given_token(80, d)) for d in range(1, 10)] == list(range(1, 10))


def test_a_grid_written_with_other_blanks_is_an_error_and_one_with_row_notes_is_read():
    """(Nine rows with `_`, `x`, `*` or `-` blanks, or with a note after each row, were skipped without a word: the
    puzzle was lost and the file exited 0.)"""
    a, b = (S.to_string(S.generate("easy", k).puzzle) for k in range(2))
    rows = [a[9 * i: 9 * i + 9] for i in range(9)]
    for blank in "_x*-":
        text = f"{b}\n\n" + "\n".join(" ".join(r[j: j + 3] for j in (0, 3, 6)).replace(".", blank) for r in rows)
        entries = S.read_puzzles(text + "\n\n" + b)
        assert [(e.line, e.cells is not None) for e in entries] == [(1, True), (3, False), (13, True)], blank
        assert blank in entries[1].error or "cells, expected 81" in entries[1].error
    noted = "\n".join(f"{r[:3]} {r[3:6]} {r[6:]}   row {k + 1}" for k, r in enumerate(rows))
    assert [(e.line, e.cells) for e in S.read_puzzles(noted + "\n\n" + noted)] == [
        (1, S.parse(a)), (11, S.parse(a))]


def test_skipped_puzzles_are_named_in_warnings():
    a = S.to_string(S.generate("easy", 0).puzzle)
    entries = S.read_puzzles("\n".join([a, a[:-1]] + ["x" + a[1:]] * 6))
    lines = S.skipped_lines("p.txt", entries)
    assert lines[0] == "warning: p.txt line 2: puzzle has 80 cells, expected 81 (skipped)"
    assert len(lines) == 6 and lines[-1] == "warning: p.txt: 2 more puzzles skipped"
