"""`diffreason.evals.code_progress`: the code model's held-out curve read from a training log, and its fits."""

import json
import math

import pytest

from diffreason.evals.code_progress import main, read_run, summarise


def _run(tmp_path, points, batch=8):
    run = tmp_path / "run"
    run.mkdir()
    (run / "train_config.json").write_text(json.dumps({"batch_size": batch, "lr": 1e-3}))
    lines = []
    for step, loss, exact in points:
        lines.append(json.dumps({"step": step - 1, "loss": 2.0}))  # (training records carry no eval)
        lines.append(json.dumps({"step": step, "loss": 2.0, "eval": {"val_loss": loss, "val_slot_exact": exact}}))
    (run / "log.jsonl").write_text("\n".join(lines) + "\n")
    return run


def test_the_fits_recover_power_laws_and_the_report_says_so(tmp_path, capsys):
    # inexact slots = 1.5 * examples^-0.1 and loss = 3 * examples^-0.2, exactly, at batch 8
    steps = [100, 200, 400, 800, 1600]
    points = [(s, 3 * (8 * s) ** -0.2, 1 - 1.5 * (8 * s) ** -0.1) for s in steps]
    run = _run(tmp_path, points)
    rows = read_run(run, 64)
    assert [r["examples"] for r in rows] == [8 * s for s in steps]
    summary = summarise(rows, 0.5)
    assert summary["miss_fit"][1] == pytest.approx(-0.1) and summary["loss_fit"][1] == pytest.approx(-0.2)
    assert summary["examples_for_target"] == pytest.approx(3 ** 10)  # 1.5 n^-0.1 = 0.5
    assert summary["loss_at_10x"] == pytest.approx(3 * (10 * 8 * 1600) ** -0.2)
    main([str(run), "--out", str(tmp_path / "out")])
    md = (tmp_path / "out" / "progress.md").read_text()
    assert "examples^-0.100" in md and "examples^-0.200" in md and "| 1,600 | 12,800 |" in md
    assert (tmp_path / "out" / "progress.png").stat().st_size > 0
    saved = json.loads((tmp_path / "out" / "progress.json").read_text())
    assert len(saved["rows"]) == 5 and math.isclose(saved["fits"]["examples_for_target"], 3 ** 10, rel_tol=1e-6)


def test_a_flat_curve_gives_no_estimate(tmp_path):
    run = _run(tmp_path, [(100, 0.9, 0.2), (200, 0.9, 0.2), (300, 0.9, 0.2)])
    summary = summarise(read_run(run, 64), 0.5)
    assert summary["examples_for_target"] is None
    main([str(run), "--out", str(tmp_path / "out")])
    assert "does not fall" in (tmp_path / "out" / "progress.md").read_text()


@pytest.mark.parametrize("setup, message", [
    (lambda p: p / "missing", "not found"),
    (lambda p: _run(p, [(100, 0.9, 0.1)]), "holds 1 evaluation record(s)"),
])
def test_a_run_it_cannot_read_is_one_line_and_exit_code_2(tmp_path, capsys, setup, message):
    with pytest.raises(SystemExit) as exit_:
        main([str(setup(tmp_path)), "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
