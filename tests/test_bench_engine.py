"""What `make bench`'s served table counts (diffreason.evals.bench_engine)."""

import pytest
from typer.testing import CliRunner

from diffreason import Engine, SamplerConfig
from diffreason.engine import GenerationRequest
from diffreason.evals.bench_engine import RowPasses, app, served_prompts


def test_the_served_batch_is_sixteen_different_prompts():
    prompts = served_prompts()
    assert len(prompts) == len(set(prompts)) == 16
    assert prompts[0] == "an object with id, customer, email, items, paid"


def test_row_passes_count_each_canvas_through_the_denoiser(tiny_lm):
    engine = Engine(tiny_lm, SamplerConfig(draws="fast", max_denoising_steps=6, confidence_threshold=0.5),
                    profile=True)
    requests = [GenerationRequest(p, seed=i, max_new_tokens=tiny_lm.canvas_length) for i, p in enumerate("abc")]
    with RowPasses(tiny_lm) as passes:
        results = engine.generate_batch(requests)
    assert passes.rows == engine.stats.canvas_steps == sum(r.steps[0] for r in results)
    counted = passes.rows
    engine.generate_batch(requests)  # the hook is gone once left
    assert passes.rows == counted


@pytest.mark.parametrize("args, message", [
    (["--draws", "bogus"], "Invalid value for --draws: 'bogus' (choose from reference, fast-whole, fast)"),
    (["--paths", "none"], "Invalid value for --paths: 'none'"),
    (["--threads", "x"], "Invalid value for --threads: 'x'"),
    (["--repeats", "0"], "Invalid value for --repeats: 0: at least 1 timed run"),
    (["--preset", "bogus"], "Invalid value for --preset: 'bogus' (choose from tiny, small)"),  # (a traceback)
])
def test_bad_options_are_refused_before_any_model_loads(args, message):
    """(`--draws bogus` ran reference draws under that label; `--threads x` was a traceback.)"""
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})  # (typer's error box, one line wide)
    assert result.exit_code == 2 and message in " ".join(result.output.replace("│", " ").split()), result.output


@pytest.mark.parametrize("args, message", [
    (["--steps", "0"], "--steps must be at least 1, got 0"), (["--repeats", "0"], "--repeats must be at least 1"),
    (["--rows", "0"], "--rows must be at least 1"), (["--vocab", "1000"], "--vocab must be at least 1100, got 1000"),
    (["--device", "tpu"], "--device must be cpu or cuda"),
])
def test_bench_plugin_refuses_bad_options_with_one_line(args, message):
    """(Each was a ZeroDivisionError, StatisticsError or torch error: QA, 2026-12-07.)"""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "diffreason.evals.bench_plugin", *args], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 2 and message in p.stderr.strip().splitlines()[-1], p.stderr
    assert "Traceback" not in p.stderr
