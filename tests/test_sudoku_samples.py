"""Sudoku test-time compute: K chains per puzzle under random symmetries, the verifier's pick, the vote, the waves."""

import copy
import json
import random
import subprocess
import sys

import pytest

from diffreason.model import EMBEDDED_SUDOKU, load_model
from diffreason.tasks import sudoku as S


@pytest.fixture(scope="module")
def base_lm():
    return load_model(EMBEDDED_SUDOKU)


def test_symmetries_keep_puzzles_valid_and_map_back_exactly():
    transposed = 0
    for k in range(40):
        p = S.generate("hard", k)
        sym = S.random_symmetry(random.Random(k))
        moved = sym.apply(p.solution)
        assert S.verify(sym.apply(p.puzzle), moved)  # a solution of the transformed puzzle
        assert sym.invert(moved) == list(p.solution) and sym.invert(sym.apply(p.puzzle)) == list(p.puzzle)
        assert S.solution_count(sym.apply(p.puzzle)) == 1  # uniqueness survives
        assert sorted(sym.relabel[1:]) == list(range(1, 10)) and sym.relabel[0] == 0
        transposed += sym.source[1] % 9 == sym.source[0] % 9  # row 0's cells come from one column
    assert 5 < transposed < 35  # the transpose is drawn about half the time
    assert S.IDENTITY.apply(p.puzzle) == list(p.puzzle) and S.IDENTITY.invert(p.puzzle) == list(p.puzzle)


def test_waves_double_up_to_k():
    assert S.chain_waves(1) == [1]
    assert S.chain_waves(2) == [1, 1]
    assert S.chain_waves(16) == [1, 1, 2, 4, 8]
    assert S.chain_waves(5) == [1, 1, 2, 1] and sum(S.chain_waves(100)) == 100


def test_vote_takes_each_cells_majority_and_keeps_givens():
    p = S.generate("medium", 3)
    right = list(p.solution)
    wrong = list(right)
    blank = next(i for i, c in enumerate(p.puzzle) if c == 0)
    wrong[blank] = right[blank] % 9 + 1
    voted = S.vote(p.puzzle, [wrong, right, None, right])
    assert voted == right
    assert S.vote(p.puzzle, [wrong, right])[blank] == wrong[blank]  # a tie: the earliest chain
    assert S.vote(p.puzzle, [None, None]) is None


def test_k_chains_solve_what_one_chain_solves_the_same_way_and_more(base_lm):
    puzzles = [p.puzzle for p in S.generate_set("extreme", 12, seed=2026)]
    one = S.solve(base_lm, puzzles, seed=5)
    many = S.solve(base_lm, puzzles, seed=5, samples=8)
    for a, b, p in zip(one, many, puzzles):
        assert b.solved == S.verify(p, [int(c) for c in b.solution]) and b.mode == "model ×8"
        if a.solved:  # chain 0 is the one-chain run: solved in the first wave, nothing more spent
            assert (b.solution, b.steps, b.samples, b.voted) == (a.solution, a.steps, 1, False)
        else:
            assert 2 <= b.samples <= 8 and b.steps > a.steps
            assert b.voted == (not b.solved)
    assert sum(b.solved for b in many) > sum(a.solved for a in one)


def test_results_with_samples_do_not_depend_on_the_batch_size(base_lm):
    """A wave larger than the batch size still runs a puzzle's chains together (a split wave kept chains running
    that a sibling had settled: 71 steps at --batch-size 1 against 62 at 2 or 8 on a QA pair of puzzles)."""
    puzzles = [S.parse("8.....7....3.1...6..4857....472.....3.9.8...7........5...54.1.....1.25..21....96."),
               S.parse("..4....7....57.1..27.6....5...2.456.1...6...4.....3.......5.68.6.9..8.....24.6...")]
    lm = copy.copy(base_lm)  # (fast draws, as `solve sudoku` runs them)
    lm.sampler_config = base_lm.sampler_config.model_copy(update={"draws": "fast"})
    runs = [S.solve(lm, puzzles, samples=4, batch_size=b) for b in (1, 8)]
    assert any(r.samples > 2 for r in runs[-1])  # (a wave of two chains ran)
    for other in runs[:-1]:
        assert [(r.solution, r.steps, r.samples) for r in other] == [(r.solution, r.steps, r.samples) for r in runs[-1]]


def test_a_chain_that_solves_stops_its_siblings(base_lm):
    from diffreason.engine import Engine, GenerationRequest

    puzzle = S.generate("medium", 5).puzzle
    variants = [S.random_symmetry(random.Random(j)).apply(puzzle) for j in range(4)]
    requests = [GenerationRequest([S.BOS_ID], S.template(v), seed=j, max_new_tokens=S.CELLS)
                for j, v in enumerate(variants)]
    alone = Engine(base_lm).generate_batch(requests)
    together = Engine(base_lm).generate_batch(requests, step_hook=S.siblings_stop_hook(variants, 4))
    first = min(range(4), key=lambda j: alone[j].steps[0])
    assert S.verify(variants[first], S.decode(alone[first].raw_tokens))  # (the first to finish solved it)
    assert len({r.steps[0] for r in alone}) > 1  # the chains take different numbers of steps on their own
    assert [r.steps[0] for r in together] == [alone[first].steps[0]] * 4  # every sibling stopped with it
    assert together[first].raw_tokens == alone[first].raw_tokens


def test_cli_solve_with_samples(tmp_path):
    puzzles = tmp_path / "p.txt"
    puzzles.write_text("\n".join(S.to_string(p.puzzle) for p in S.generate_set("extreme", 3, seed=4)) + "\n")
    p = subprocess.run([sys.executable, "-m", "diffreason.cli", "solve", "sudoku", "--file", str(puzzles),
                        "--samples", "4", "--json"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    records = [json.loads(line) for line in p.stdout.splitlines()]
    assert [r["mode"] for r in records] == ["model ×4"] * 3 and all(1 <= r["samples"] <= 4 for r in records)
    bad = subprocess.run([sys.executable, "-m", "diffreason.cli", "solve", "sudoku", "--file", str(puzzles),
                          "--samples", "2", "--watch"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--watch shows one chain" in bad.stderr


def test_cli_eval_reports_each_k_as_its_own_mode(tmp_path):
    p = subprocess.run([sys.executable, "-m", "diffreason.cli", "eval", "sudoku", "--n", "4", "--tiers", "extreme",
                        "--modes", "model", "--budgets", "", "--samples", "2,4", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    report = json.loads((tmp_path / "sudoku.json").read_text())
    modes = report["tiers"]["extreme"]["modes"]
    assert list(modes) == ["model", "model ×2", "model ×4"] and report["samples"] == [1, 2, 4]
    assert [modes[m]["k"] for m in modes] == [1, 2, 4]
    assert modes["model ×4"]["solve_rate"] >= modes["model ×2"]["solve_rate"] >= modes["model"]["solve_rate"]
    assert modes["model ×4"]["wall_ratio"] > 0 and modes["model ×4"]["chains_mean"] <= 4
    md = (tmp_path / "sudoku.md").read_text()
    assert "| extreme |" in md and "| model ×4 |" in md and "sudoku_samples.png" in md
    assert (tmp_path / "sudoku_samples.png").read_bytes()[:4] == b"\x89PNG"
