"""Robustness below the command line: lazy package imports, template ids, checkpoint checks, atomic checkpoints,
resuming after a crash, a diverging run, Ctrl-C inside the trainer, and --threads on every command that runs a model."""

import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from diffreason import CanvasTemplate, ModelLoadError, TemplateError, load_model
from diffreason.errors import DiffreasonError
from diffreason.tasks import sudoku as S


def test_importing_the_package_does_not_import_torch():
    code = (
        "import json, sys, diffreason; assert 'torch' not in sys.modules, 'imported eagerly'; "
        "assert diffreason.SamplerConfig().max_denoising_steps == 48 and 'torch' in sys.modules; "
        "from diffreason.constrain import regex; "  # a submodule still imports as one
        "assert set(diffreason.__all__) <= set(dir(diffreason)); "
        "print(json.dumps(sorted(diffreason.__all__)))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == sorted([
        "CanvasConstraint", "CanvasTemplate", "ConfigError", "DenoiseState", "DiffreasonError", "DiffusionLM", "Engine",
        "EntropyBoundAcceptance", "GenerationRequest", "GenerationResult", "ModelLoadError", "PRESETS",
        "RenoiseSampler", "SamplerConfig", "StableAndConfidentStop", "StepTrace", "TemplateError", "build_model",
        "generate", "infill", "load_model", "save_model",
    ])
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        import diffreason

        diffreason.nonexistent  # noqa: B018


@pytest.mark.parametrize("positions, message", [
    ([-1], "position 0 fixes token -1, outside the vocabulary [0, 10)"),
    ([3, True], "position 1 fixes True, which is not a token id"),
    ([1.0], "position 0 fixes 1.0, which is not a token id"),
    (["7"], "position 0 fixes '7', which is not a token id"),
    ([torch.tensor(2.0)], "which is not a token id"),
    ([None, [1, False]], "position 1 allows False, which is not a token id"),
    ([[2, -3]], "position 0 allows token -3, outside the vocabulary"),
    ([[1], 10], "position 1 fixes token 10, outside the vocabulary [0, 10)"),
])
def test_from_positions_refuses_what_is_not_a_token_id(positions, message):
    with pytest.raises(TemplateError) as info:
        CanvasTemplate.from_positions(10, positions)
    assert message in str(info.value)


@pytest.mark.parametrize("vocab, positions, message", [
    (-5, [None], "vocab_size must be a positive integer, got -5"),
    (True, [None], "vocab_size must be a positive integer, got True"),
    (10, None, "positions must be a list of positions, got NoneType"),
    (10, "12", "positions must be a list of positions, got str"),
])
def test_from_positions_refuses_a_bad_vocabulary_or_position_list(vocab, positions, message):
    with pytest.raises(TemplateError, match=f"^{message}$"):
        CanvasTemplate.from_positions(vocab, positions)


def test_from_positions_takes_ints_of_any_integer_type():
    t = CanvasTemplate.from_positions(10, [np.int64(3), torch.tensor(4), None, torch.tensor([1, 2]), {2, 1}])
    assert t.fixed.tolist() == [3, 4, -1, -1, -1] and t.allowed(3).tolist() == t.allowed(4).tolist() == [1, 2]


@pytest.fixture
def checkpoint(tmp_path, tiny_checkpoint):
    path = tmp_path / "ck"
    shutil.copytree(tiny_checkpoint, path)
    return path


@pytest.mark.parametrize("edit, message", [
    (lambda p: (p / "generation_config.json").write_text('{"t_max": '), "generation_config.json is not valid JSON"),
    (lambda p: (p / "generation_config.json").write_text("[1, 2]"), "generation_config.json must hold a JSON object"),
    (lambda p: (p / "generation_config.json").write_text('{"t_max": "hot"}'),
     "generation_config.json: t_max: Input should be a valid number"),
    (lambda p: (p / "generation_config.json").write_text('{"t_max": Infinity}'),
     "generation_config.json: t_max must be a finite number"),
    (lambda p: (p / "generation_config.json").write_text('{"t_max": 0.2, "t_min": 0.4}'),
     "generation_config.json: t_max (0.2) must be greater than t_min (0.4)"),
    (lambda p: (p / "config.json").write_text(json.dumps({**json.loads((p / "config.json").read_text()),
                                                          "canvas_length": 0})),
     "config.json: canvas_length must be a positive integer, got 0"),
])
def test_a_broken_checkpoint_file_is_a_load_error_naming_it(checkpoint, edit, message):
    edit(checkpoint)
    with pytest.raises(ModelLoadError) as info:
        load_model(checkpoint)
    assert message in str(info.value) and str(checkpoint) in str(info.value)


@pytest.mark.parametrize("path, kind", [(None, "NoneType"), (5, "int"), (b"/tmp", "bytes")])
def test_a_model_path_of_another_type_is_a_load_error(path, kind):
    with pytest.raises(ModelLoadError, match=f"a model path is a string or a path, not {kind}$"):
        load_model(path)


@pytest.mark.parametrize("prompt, what", [
    (None, "NoneType"), (5, "int"), ([1, "a"], "a list holding a str"), ([1.7], "a list holding a float")])
def test_a_prompt_of_another_type_is_a_config_error(tiny_lm, prompt, what):
    """(None and 5 were TypeErrors from iterating them; 1.7 was truncated to token 1.)"""
    from diffreason import ConfigError, Engine

    with pytest.raises(ConfigError, match=f"a prompt is a string or a sequence of integer token ids, not {what}$"):
        Engine(tiny_lm).generate(prompt, max_new_tokens=4)
    assert Engine(tiny_lm).generate((np.int64(2), torch.tensor(3)), max_new_tokens=4).raw_tokens  # (integer types)


def _api_calls(lm):
    """(call, error class, message) of the Python API given what it does not take (QA, 2026-12-07: each was an
    AttributeError, IndexError or torch error from deep inside, or was silently taken)."""
    from diffreason import ConfigError, Engine, EntropyBoundAcceptance, GenerationRequest, RenoiseSampler
    from diffreason import StableAndConfidentStop

    t = CanvasTemplate.from_positions(50, [1, 2, 3])
    return [
        (lambda: CanvasTemplate(50, [1.7, 2.2]), TemplateError, "fixed must be integers, not float32"),
        (lambda: CanvasTemplate(50, [float("nan")]), TemplateError, "fixed must be integers"),
        (lambda: CanvasTemplate(0, [-1]), TemplateError, "vocab_size must be an integer of at least 1, got 0"),
        (lambda: CanvasTemplate.unconstrained(-3, 50), TemplateError, "length must be an integer of at least 1"),
        (lambda: t.canvas(-1, 2), TemplateError, "the index must be at least 0"),
        (lambda: t.allowed(7), TemplateError, "position 7 is outside the template (3 positions)"),
        (lambda: t.violations("ab"), TemplateError, "tokens must be integers"),
        (lambda: EntropyBoundAcceptance(-1), ConfigError, "bound must be a finite number above 0, got -1"),
        (lambda: EntropyBoundAcceptance(float("nan")), ConfigError, "bound must be a finite number above 0"),
        (lambda: StableAndConfidentStop(stability=2.5), ConfigError, "stability must be an integer of at least 0"),
        (lambda: StableAndConfidentStop(confidence=-1), ConfigError, "confidence must be a finite number"),
        (lambda: RenoiseSampler({"draws": "fast"}), ConfigError, "config is a SamplerConfig, not a dict"),
        (lambda: Engine(lm, sampler="fast"), ConfigError, "sampler is a SamplerConfig or a RenoiseSampler, not a str"),
        (lambda: Engine(None), ConfigError, "lm is a DiffusionLM"),
        (lambda: Engine(lm).generate("hi", template="abc"), ConfigError, "template is a CanvasTemplate (or None)"),
        (lambda: Engine(lm).generate_batch(["hi"]), ConfigError, "a request is a GenerationRequest, not a str"),
        (lambda: Engine(lm).generate(b"hi"), ConfigError, "not bytes: decode it first"),
        (lambda: Engine(lm).generate("hi", max_new_tokens=3.5), ConfigError, "max_new_tokens must be an integer"),
        (lambda: Engine(lm).generate("hi", max_new_tokens=True), ConfigError, "max_new_tokens must be an integer"),
        (lambda: Engine(lm).generate_batch([GenerationRequest("a"), GenerationRequest([10**6])]), ConfigError,
         "requests[1]: prompt token 1000000 is outside the vocabulary"),
    ]


def test_the_python_api_refuses_what_it_does_not_take_with_one_clear_error(tiny_lm):
    for k, (call, error, message) in enumerate(_api_calls(tiny_lm)):
        with pytest.raises(error) as info:
            call()
        assert message in str(info.value), (k, str(info.value))


def test_a_batchs_good_requests_are_answered_beside_a_bad_one_with_return_errors(tiny_lm):
    from diffreason import ConfigError, Engine, GenerationRequest

    requests = [GenerationRequest("a", seed=1), GenerationRequest([10**6]), GenerationRequest("b", seed=2)]
    out = Engine(tiny_lm).generate_batch(requests, return_errors=True)
    assert isinstance(out[1], ConfigError) and "outside the vocabulary" in str(out[1])
    alone = Engine(tiny_lm).generate_batch([requests[0], requests[2]])
    assert [out[0].tokens, out[2].tokens] == [r.tokens for r in alone]


def test_saving_is_atomic_and_keeps_the_other_files(tiny_lm, tmp_path, monkeypatch):
    path = tmp_path / "ck"
    tiny_lm.save(path)
    (path / "README.md").write_text("my notes")
    before = (path / "model.safetensors").read_bytes()

    def crash(directory, **kwargs):  # half the weights written, then the process dies
        (directory / "model.safetensors").write_bytes(before[: len(before) // 2])
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(tiny_lm.model, "save_pretrained", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        tiny_lm.save(path)
    monkeypatch.undo()
    assert (path / "model.safetensors").read_bytes() == before and load_model(path).vocab_size == tiny_lm.vocab_size
    assert (tmp_path / ".ck.tmp").is_dir()  # the crashed save's leftover, cleared by the next save
    tiny_lm.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck"]
    assert (path / "README.md").read_text() == "my notes"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("...")
    with pytest.raises(DiffreasonError, match="holds files but no checkpoint; refusing to replace it"):
        tiny_lm.save(tmp_path / "mine")
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "..."


def _run(tmp_path, steps: int, lm=None, save_every: int = 2, batches=None):
    from diffreason.train import TrainConfig, train

    lm = lm or S.build_sudoku_model("sudoku-tiny", seed=1)
    stream = S.SudokuStream(seed=1, pool_size=8)
    batches = batches or S.sft_batches(stream, torch.Generator().manual_seed(1))
    cfg = TrainConfig(steps=steps, batch_size=2, eval_every=0, save_every=save_every)
    train(lm, batches, cfg, tmp_path, stream_state=(stream.state_dict, stream.load_state_dict))
    return lm


def _steps_logged(run) -> list[int]:
    return [json.loads(ln)["step"] for ln in (run / "log.jsonl").read_text().splitlines()]


def test_a_crash_while_saving_the_model_leaves_a_run_that_resumes(tmp_path, monkeypatch):
    from diffreason.train import resume_or_build

    lm = _run(tmp_path, steps=2)
    saved = {k: v.clone() for k, v in lm.model.state_dict().items()}
    real = lm.model.save_pretrained

    def crash(directory, **kwargs):
        real(directory, **kwargs)
        (directory / "model.safetensors").write_bytes(b"\0" * 100)  # torn mid-write
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(lm.model, "save_pretrained", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        _run(tmp_path, steps=4, lm=lm)
    monkeypatch.undo()
    # RUN/model is still the step-2 checkpoint, whole, and so is the trainer state (the model is saved first)
    on_disk = load_model(tmp_path / "model").model.state_dict()
    assert all(torch.equal(on_disk[k], saved[k]) for k in saved)
    assert torch.load(tmp_path / "trainer_state.pt", weights_only=False)["step"] == 2
    resumed = resume_or_build(tmp_path, lambda: S.build_sudoku_model("sudoku-tiny", seed=1))
    _run(tmp_path, steps=6, lm=resumed)
    assert _steps_logged(tmp_path) == [1, 2, 3, 4, 5, 6] and not (tmp_path / ".model.tmp").exists()


def test_a_finished_run_whose_model_went_missing_writes_it_again(tmp_path):
    """(A kill between the trainer state and the model left a finished run without RUN/model, and every rerun said
    "model written"; a save stopped between its two renames left the model only as .model.old.)"""
    from diffreason.train import resume_or_build

    lm = _run(tmp_path, steps=2)
    weights = {k: v.clone() for k, v in lm.model.state_dict().items()}
    shutil.rmtree(tmp_path / "model")
    _run(tmp_path, steps=2, lm=resume_or_build(tmp_path, lambda: S.build_sudoku_model("sudoku-tiny", seed=1)))
    on_disk = load_model(tmp_path / "model").model.state_dict()
    assert all(torch.equal(on_disk[k], weights[k]) for k in weights)
    (tmp_path / "model").rename(tmp_path / ".model.old")
    lm.save(tmp_path / "model")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".model", "model"))) == ["model"]
    assert oct((tmp_path / "model" / "model.safetensors").stat().st_mode & 0o044) == oct(0o044)  # (not 0600)


def test_a_run_json_that_cannot_be_read_stops_a_resume(tmp_path):
    """(A torn run.json switched the resume check off: another seed resumed the run.)"""
    from diffreason.train import TrainConfig, train

    _run(tmp_path, steps=2)
    (tmp_path / "run.json").write_text("garbage")
    lm = S.build_sudoku_model("sudoku-tiny", seed=1)
    with pytest.raises(DiffreasonError, match="run.json cannot be read, so a resume cannot be checked"):
        train(lm, None, TrainConfig(steps=4, batch_size=2, eval_every=0, save_every=2), tmp_path)
    (tmp_path / "run.json").unlink()  # (a run from before run.json: its train_config.json's seed is checked)
    with pytest.raises(DiffreasonError, match="holds another run"):
        train(lm, None, TrainConfig(steps=4, batch_size=2, eval_every=0, save_every=2, seed=5), tmp_path)


@pytest.mark.parametrize("first, then, differ", [
    ({"task": "json", "schemas": "/s", "init_from": None}, {"task": "code", "preset": "code-tiny", "init_from": None},
     'task "json" there, "code" now; schemas "/s" there, none now'),
    # (a run.json from before runs named their task: the other task's options tell them apart)
    ({"schemas": "/s", "init_from": None}, {"task": "code", "preset": "code-tiny", "init_from": None},
     'schemas "/s" there, none now'),
])
def test_a_run_of_another_task_is_not_resumed(tmp_path, first, then, differ):
    """(`train code` resumed a `train json` run and the other way round: only the options both keep were compared.)"""
    from diffreason.train import TrainConfig, train

    cfg = TrainConfig(steps=2, batch_size=2, eval_every=0, save_every=2)
    stream = S.SudokuStream(seed=1, pool_size=8)
    lm = S.build_sudoku_model("sudoku-tiny", seed=1)
    train(lm, S.sft_batches(stream, torch.Generator().manual_seed(1)), cfg, tmp_path, identity=first)
    if "task" not in first:
        (tmp_path / "run.json").write_text(json.dumps({"seed": 0, **first}))
    with pytest.raises(DiffreasonError, match=re.escape(f"holds another run ({differ})")):
        train(lm, None, cfg.model_copy(update={"steps": 4}), tmp_path, identity=then)


def test_a_tokenizer_larger_than_the_embedding_is_a_load_error(checkpoint):
    """(Its last ids indexed past the embedding: an IndexError traceback mid-generation.)"""
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(checkpoint)
    tok.add_tokens([f"extra{i}" for i in range(2000)])
    tok.save_pretrained(checkpoint)
    with pytest.raises(ModelLoadError, match="more than the model's .* embeddings: they are not one checkpoint's"):
        load_model(checkpoint)


def test_a_torn_model_file_does_not_block_a_resume_when_the_trainer_state_is_whole(tmp_path):
    """A half-written model.safetensors (a crash under the old, in-place save) with an intact trainer state."""
    from diffreason.train import resume_or_build

    _run(tmp_path, steps=2)
    (tmp_path / "model" / "model.safetensors").write_bytes(b"\0" * 100)
    with open(tmp_path / "log.jsonl", "a") as log:
        log.write('{"step": 3, "lo')  # a torn last record
    lm = resume_or_build(tmp_path, lambda: S.build_sudoku_model("sudoku-tiny", seed=1))
    _run(tmp_path, steps=4, lm=lm)
    assert _steps_logged(tmp_path) == [1, 2, 3, 4]
    assert load_model(tmp_path / "model").canvas_length == 81
    (tmp_path / "model" / "model.safetensors").write_bytes(b"\0" * 100)
    (tmp_path / "trainer_state.pt").unlink()  # without the state, the torn model is a clear error
    with pytest.raises(ModelLoadError, match="could not load the weights"):
        resume_or_build(tmp_path, lambda: S.build_sudoku_model("sudoku-tiny", seed=1))


def test_a_crash_while_saving_the_trainer_state_keeps_the_previous_one(tmp_path, monkeypatch):
    import diffreason.train as T

    _run(tmp_path, steps=2)
    real = T.torch.save

    def crash(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04 half a zip")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(T.torch, "save", crash)
    with pytest.raises(DiffreasonError, match="cannot write the checkpoint .*trainer_state.pt: No space left"):
        _run(tmp_path, steps=4)
    monkeypatch.setattr(T.torch, "save", real)
    assert torch.load(tmp_path / "trainer_state.pt", weights_only=False)["step"] == 2
    _run(tmp_path, steps=4)
    assert _steps_logged(tmp_path) == [1, 2, 3, 4]


def test_a_loss_that_stops_being_finite_ends_training_without_saving(tmp_path):
    from diffreason.train import TrainConfig

    stream = S.SudokuStream(seed=1, pool_size=8)
    make = S.sft_batches(stream, torch.Generator().manual_seed(1))
    lm = S.build_sudoku_model("sudoku-tiny", seed=1)
    calls = []

    def batches(size, progress):
        calls.append(1)
        if len(calls) == 3:  # poison the weights before step 3
            with torch.no_grad():
                next(lm.model.parameters()).fill_(float("nan"))
        return make(size, progress)

    with pytest.raises(DiffreasonError, match=r"training diverged at step 3: the loss is nan .* the checkpoint of step "
                                              r"2 .* is kept"):
        _run(tmp_path, steps=10, lm=lm, batches=batches)
    assert torch.load(tmp_path / "trainer_state.pt", weights_only=False)["step"] == 2
    assert all(bool(torch.isfinite(p).all()) for p in load_model(tmp_path / "model").model.parameters())
    for bad in ({"lr": float("inf")}, {"lr": float("nan")}, {"time_budget": float("inf")}):
        with pytest.raises(ValueError, match="finite number"):
            TrainConfig(**bad)


def test_ctrl_c_inside_the_trainer_says_which_checkpoint_is_kept(tmp_path):
    from diffreason.train import TrainingInterrupted

    stream = S.SudokuStream(seed=1, pool_size=8)
    make = S.sft_batches(stream, torch.Generator().manual_seed(1))
    calls = []

    def batches(size, progress):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return make(size, progress)

    with pytest.raises(TrainingInterrupted) as info:
        _run(tmp_path, steps=10, batches=batches)
    assert info.value.checkpoint_step == 2 and isinstance(info.value, KeyboardInterrupt)

    def interrupted_at_once(size, progress):
        raise KeyboardInterrupt

    with pytest.raises(TrainingInterrupted) as info:
        _run(tmp_path / "fresh", steps=10, batches=interrupted_at_once)
    assert info.value.checkpoint_step is None


@pytest.mark.parametrize("command", [
    ["generate"], ["solve", "sudoku"], ["eval", "sudoku"], ["eval", "json"], ["train", "sudoku"], ["train", "json"],
])
def test_every_command_that_runs_a_model_takes_threads_defaulting_to_one(command):
    import typer

    from diffreason.cli import app

    cmd = typer.main.get_command(app)
    for name in command:
        cmd = cmd.commands[name]
    threads = next(p for p in cmd.params if "--threads" in getattr(p, "opts", ()))
    assert threads.default == 1


def test_threads_are_applied_before_the_model_runs():
    from diffreason.cli import _runtime

    before = torch.get_num_threads()
    try:
        _runtime(1)
        assert torch.get_num_threads() == 1
        with pytest.raises(DiffreasonError, match="--threads must be at least 0"):
            _runtime(-2)
    finally:
        torch.set_num_threads(before)


def test_the_sudoku_eval_refuses_empty_tier_or_mode_lists():
    from diffreason.evals.sudoku_eval import run_eval

    lm = S.build_sudoku_model("sudoku-tiny", seed=0)
    for tiers, modes in (([], ["model"]), (["easy"], [])):
        with pytest.raises(S.SudokuError, match="at least one tier and one mode"):
            run_eval(lm, tiers, 1, modes, [2])


def test_ctrl_c_is_held_back_until_an_answer_is_printed_and_counted():
    import signal
    import time

    from diffreason.cli import _HeldInterrupt

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # (as a command starts; a test may differ)
    try:
        held, done = _HeldInterrupt(), []
        with pytest.raises(KeyboardInterrupt):
            with held.installed():
                with held:
                    # raise_signal: to this thread (os.kill may land on any of the process's threads — torch's, a
                    # test server's — and the main thread then runs the handler a little later, past the block)
                    signal.raise_signal(signal.SIGINT)
                    deadline = time.monotonic() + 10
                    while not held.pending and time.monotonic() < deadline:
                        time.sleep(0.001)  # (the handler runs in the main thread between bytecodes)
                    assert held.pending
                    done.append("printed")
                    done.append("counted")
                done.append("next answer")
        assert done == ["printed", "counted"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


def test_schema_checks_in_a_script_without_a_main_guard_run_it_once(tmp_path):
    """The pattern checks' worker was multiprocessing's spawn, which re-runs the caller's main script: a top-level
    script (as the README writes one) ran twice, its second run failed, and every later check with it."""
    out = _script_output(tmp_path, "import os\n"
                                   "from diffreason.limits import validate_json\n"
                                   "print('body', os.getpid(), flush=True)\n"
                                   "schema = {'type': 'string', 'pattern': '^[a-z]{3}$'}\n"
                                   "print(validate_json(schema, 'abc'), validate_json(schema, 'abcd')[2])\n")
    assert out.count("body") == 1 and out.splitlines()[-1] == "None pattern"


def _script_output(tmp_path, source: str) -> str:
    """The stdout of `source` run as a user's script (a file of its own, run by path), which must succeed."""
    script = tmp_path / "user.py"
    script.write_text(source)
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_schema_checks_hold_past_1024_descriptors_and_after_an_interrupted_wait(tmp_path):
    """The pattern-check worker's wait used select (ValueError past descriptor 1023, the worker then stuck), and a
    wait cut short (Ctrl-C, a caller's timer) left its answer to be read as the next request's: an invalid value
    judged valid. A child process, so the descriptors and the timer are its own."""
    out = _script_output(
        tmp_path,
        "import os, resource, signal\n"
        "from diffreason.limits import validate_json\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))\n"
        "held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]\n"
        "S = {'type': 'string', 'pattern': '^(a+)+$'}\n"
        "print(validate_json(S, 'a'))\n"
        "class Stop(Exception): pass\n"
        "def stop(*_): raise Stop()\n"
        "signal.signal(signal.SIGALRM, stop)\n"
        "signal.setitimer(signal.ITIMER_REAL, 0.3)\n"
        "try:\n"
        "    validate_json(S, 'a' * 28 + '!', 30)\n"
        "except Stop:\n"
        "    print('interrupted')\n"
        "print(validate_json(S, 'aaa'), validate_json(S, 'b')[2])\n")
    assert out.splitlines() == ["None", "interrupted", "None pattern"]
