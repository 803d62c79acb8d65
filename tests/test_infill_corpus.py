"""tasks/infill/corpus.py: the code model's training data (HumanEval and held-out packages kept out, holes laid out
as inference lays them, a resumable stream) and `diffreason train code`."""

import json
import os
import random
import subprocess
import sys

import pytest
import torch

from diffreason.tasks.infill import corpus as C
from diffreason.tasks.infill.humaneval import default_task_files, load_tasks
from diffreason.tasks.infill.layout import encode, hole_text

PLAIN = '''
import os


def join_all(parts, sep=","):
    """Join the parts."""
    out = []
    for p in parts:
        if p:
            out.append(str(p))
    return sep.join(out)


class Box:
    def __init__(self, items):
        self.items = list(items)
        self.size = len(self.items)

    def largest(self):
        best = None
        for x in self.items:
            if best is None or x > best:
                best = x
        return best
'''


def _needs_humaneval():
    missing = [str(f) for f in default_task_files().values() if not f.is_file()]
    if missing:
        pytest.skip(f"{missing[0]} not present (the shared data lies beside the repository)")


@pytest.fixture(scope="module")
def humaneval():
    _needs_humaneval()
    return C.default_humaneval_filter()


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """Two roots (a 'stdlib' and a 'site-packages'): plain code, HumanEval's functions under their own and another
    name, and a held-out package."""
    _needs_humaneval()
    root = tmp_path_factory.mktemp("src")
    std, site = root / "lib", root / "site"
    (std / "pkga").mkdir(parents=True)
    (std / "pkga" / "plain.py").write_text(PLAIN)
    task = next(t for t in load_tasks(default_task_files()["SingleLineInfilling"]) if t.task_id.endswith("/0/L0"))
    program = task.prompt + task.canonical_solution + task.suffix
    (std / "pkga" / "leak.py").write_text(program + "\n\n" + program.replace(task.entry_point, "near_pair"))
    (std / "json").mkdir()
    (std / "json" / "__init__.py").write_text(
        PLAIN.replace("join_all", "json_join").replace("largest", "json_largest").replace("size", "count"))
    (std / "test").mkdir()  # test suites are skipped
    (std / "test" / "test_x.py").write_text("def test_thing():\n    assert 1 + 1 == 2\n")
    (site / "toolz").mkdir(parents=True)
    (site / "toolz" / "core.py").write_text(PLAIN.replace("join_all", "concat_all").replace("Box", "Bag"))
    (site / "toolz" / "broken.py").write_bytes(b"def f(:\n  pass\n\xff\xfe")
    return [std, site]


def test_corpus_keeps_humaneval_and_heldout_packages_out(sources, humaneval):
    assert len(humaneval.solutions) == 164 and "has_close_elements" in humaneval.entry_points
    corpus = C.build_corpus(sources, humaneval=humaneval)
    names = {fn.name for fn in corpus.train}
    assert {"join_all", "largest", "__init__", "concat_all"} <= names
    assert "has_close_elements" not in names and "near_pair" not in names  # by name, and by body
    assert corpus.stats["humaneval_name"] == 1 and corpus.stats["humaneval_body"] == 1
    assert "test_thing" not in names
    assert {fn.name for fn in corpus.heldout} == {"json_join", "__init__", "json_largest"}
    assert corpus.stats["duplicates"] == 2  # toolz's Bag methods are pkga's Box methods
    assert all(fn.package == "json" for fn in corpus.heldout) and "json" in C.HELDOUT_PACKAGES
    assert not any(fn.package in C.HELDOUT_PACKAGES for fn in corpus.train)
    assert next(fn for fn in corpus.train if fn.name == "largest").source.startswith("def largest(self):\n")


def test_examples_are_laid_out_as_inference_lays_them(sources, humaneval):
    from diffreason.tokenizer import train_byte_bpe

    corpus = C.build_corpus(sources, humaneval=humaneval)
    tok = train_byte_bpe([fn.source for fn in corpus.train], vocab_size=400)
    rng = random.Random(0)
    for _ in range(100):
        fn = rng.choice(corpus.train)
        lay = C.make_example(fn, tok, rng)
        assert lay is not None and len(lay.canvas) == C.CANVAS and lay.slot_length in C.SLOT_LENGTHS
        assert sum(lay.free) == lay.slot_length and all(lay.free[: lay.slot_length])
        text = tok.decode(lay.prompt_ids[1:]) + hole_text(lay.canvas[lay.slot], tok) + tok.decode(lay.suffix_ids)
        assert text == fn.source  # nothing cut in these short functions: the pieces are the function
        assert lay.hole_ids == encode(tok, hole_text(lay.canvas[lay.slot], tok))


def test_stream_resumes_identically(sources, humaneval):
    from diffreason.tokenizer import train_byte_bpe

    corpus = C.build_corpus(sources, humaneval=humaneval)
    tok = train_byte_bpe([fn.source for fn in corpus.train], vocab_size=400)
    a = C.CodeStream(corpus.train, tok, seed=3)
    a.batch(4)
    state = a.state_dict()
    first = a.batch(5)
    b = C.CodeStream(corpus.train, tok, seed=99)
    b.load_state_dict(state)
    again = b.batch(5)
    for name in ("prompt_ids", "target", "noise", "corruptible"):
        assert torch.equal(getattr(first, name), getattr(again, name)), name
    assert first.corruptible.any(1).all()
    # only slot positions are corruptible: the fixed suffix and its pads never are
    for row, free in zip(first.target, first.corruptible):
        n = int(free.sum())
        assert free[:n].all() and not free[n:].any()


def test_train_code_tiny_runs_and_resumes(tmp_path, sources):
    from diffreason.model import load_model

    run = tmp_path / "run"
    command = [sys.executable, "-m", "diffreason.cli", "train", "code", "--run-dir", str(run), "--preset", "code-tiny",
               "--batch-size", "2", "--threads", "1", "--eval-every", "2", "--device", "cpu"]
    for s in sources:
        command += ["--source", str(s)]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    p = subprocess.run(command + ["--steps", "2"], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    assert "held out: json" in " ".join(p.stderr.split())
    lm = load_model(run / "model")
    assert type(lm.model).__name__ == "DiffusionGemmaForBlockDiffusion" and lm.canvas_length == C.CANVAS
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2] and "val_loss" in records[1]["eval"]
    p = subprocess.run(command + ["--steps", "3"], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    assert "resuming from step 2" in p.stderr
    assert [json.loads(line)["step"] for line in (run / "log.jsonl").read_text().splitlines()] == [1, 2, 3]


def test_embedded_code_model_is_a_small_diffusiongemma_checkpoint():
    from diffreason.model import EMBEDDED_CODE, load_model

    files = {p.name for p in EMBEDDED_CODE.iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"} <= files
    assert sum(p.stat().st_size for p in EMBEDDED_CODE.iterdir()) <= 20 * 2**20
    lm = load_model(EMBEDDED_CODE)
    assert type(lm.model).__name__ == "DiffusionGemmaForBlockDiffusion" and lm.canvas_length == C.CANVAS
    text = "def f(x):\n\treturn [y ** 2 for y in x if y != 'ünï']  # ✓\n"
    assert lm.tokenizer.decode(lm.tokenizer.encode(text, add_special_tokens=False)) == text  # byte-level BPE
    assert lm.sampler_config.max_denoising_steps == C.SAMPLER["max_denoising_steps"]
    # the layout runs on it: a hole's slot and the fixed suffix in one canvas
    from diffreason.tasks.infill.layout import infill_layout

    lay = infill_layout("def f(x):\n", None, "    return y\n", lm.tokenizer, lm.canvas_length, C.DEFAULT_SLOT,
                        C.PROMPT_TOKENS)
    with torch.no_grad():
        from transformers import DynamicCache

        out = lm.model(input_ids=torch.tensor([lay.prompt_ids]), decoder_input_ids=torch.tensor([lay.canvas]),
                       past_key_values=DynamicCache(config=lm.config.get_text_config(decoder=True)))
    assert out.logits.shape[:2] == (1, C.CANVAS)


def test_every_folder_named_is_read_whole_and_only_installed_environments_are_sampled(tmp_path):
    """(A second --source was capped at 40 files a package and lost its private modules, as site-packages is.)"""
    mine, site = tmp_path / "mine", tmp_path / "env" / "site-packages"
    for root in (mine, site):
        (root / "big").mkdir(parents=True)
        for k in range(C.FILES_PER_PACKAGE + 5):
            (root / "big" / f"m{k}.py").write_text(f"def f{k}():\n    return {k}\n")
        (root / "_private.py").write_text("def hidden():\n    return 0\n")
    first = tmp_path / "first"
    first.mkdir()
    (first / "one.py").write_text("def one():\n    return 1\n")
    files = [f for _, f in C.source_files([first, mine, site])]
    assert sum(f.parent == mine / "big" for f in files) == C.FILES_PER_PACKAGE + 5
    assert mine / "_private.py" in files
    assert sum(f.parent == site / "big" for f in files) == C.FILES_PER_PACKAGE
    assert site / "_private.py" not in files


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_pipe_or_device_named_py_is_skipped_not_read(tmp_path):
    """(A fifo named p.py blocked the corpus build forever; a link to /dev/zero read until memory ran out.)"""
    (tmp_path / "ok.py").write_text("def ok():\n    return 1\n")
    os.mkfifo(tmp_path / "p.py")
    (tmp_path / "z.py").symlink_to("/dev/zero")
    corpus = C.build_corpus([tmp_path], humaneval=C.HumanEvalFilter(frozenset(), ()), heldout_packages=())
    assert [fn.name for fn in corpus.train] == ["ok"] and corpus.stats["files"] == 1
