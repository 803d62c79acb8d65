"""The embedded JSON model: a real DiffusionGemma checkpoint (≤ 20 MB) that the CLI and generate() use by default."""

import json
import os
import subprocess
import sys
from typing import Literal

import jsonschema
from pydantic import BaseModel

from diffreason.model import EMBEDDED_JSON


def test_embedded_json_model_is_a_small_diffusiongemma_checkpoint():
    from diffreason.model import load_model

    files = {p.name for p in EMBEDDED_JSON.iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"} <= files
    assert sum(p.stat().st_size for p in EMBEDDED_JSON.iterdir()) <= 20 * 2**20
    lm = load_model(EMBEDDED_JSON)
    assert type(lm.model).__name__ == "DiffusionGemmaForBlockDiffusion"
    text = '{"name": "Zoë", "tags": ["ünï", "✓"], "n": -1.5e3}'
    assert lm.tokenizer.decode(lm.tokenizer.encode(text, add_special_tokens=False)) == text  # byte-level BPE


class Order(BaseModel):
    item: str
    quantity: int
    status: Literal["open", "shipped"]


def test_generate_with_the_embedded_model_validates():
    from diffreason import SamplerConfig, generate, load_model

    lm = load_model(EMBEDDED_JSON)
    order, result = generate(lm, Order, prompt="an order", seed=0, sampler=SamplerConfig(max_denoising_steps=8))
    assert isinstance(order, Order) and order.status in ("open", "shipped")
    assert result.steps and all(1 <= s <= 8 for s in result.steps)


def test_cli_generate_without_model_uses_the_embedded_one(tmp_path):
    schema = {"type": "object", "required": ["city", "population"], "properties": {
        "city": {"type": "string", "maxLength": 20}, "population": {"type": "integer", "minimum": 0}}}
    (tmp_path / "s.json").write_text(json.dumps(schema))
    p = subprocess.run([sys.executable, "-m", "diffreason.cli", "generate", "--schema", str(tmp_path / "s.json"),
                        "--steps", "6", "--json", "a city"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    jsonschema.validate(out["object"], schema)
    assert out["steps"] and all(1 <= s <= 6 for s in out["steps"])


def test_train_json_continues_from_the_embedded_model_and_resumes(tmp_path):
    from diffreason.model import load_model
    from diffreason.tasks.json_corpus import is_heldout

    schemas = tmp_path / "schemas"
    schemas.mkdir()
    for i in range(6):
        schema = {"title": f"item {i}", "type": "object", "properties": {"n": {"type": "integer"}}}
        tests = [{"data": {"n": i * 10 + k}, "valid": True} for k in range(3)] + [{"data": {"n": "x"}, "valid": False}]
        (schemas / f"S_{i}.json").write_text(json.dumps({"schema": schema, "tests": tests}))
    assert not all(is_heldout(f"S_{i}.json") for i in range(6))
    run = tmp_path / "run"
    command = [sys.executable, "-m", "diffreason.cli", "train", "json", "--schemas", str(schemas), "--run-dir",
               str(run), "--batch-size", "2", "--threads", "1", "--init-from", str(EMBEDDED_JSON)]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    p = subprocess.run(command + ["--steps", "2"], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    trained = load_model(run / "model")
    assert trained.tokenizer.get_vocab() == load_model(EMBEDDED_JSON).tokenizer.get_vocab()
    p = subprocess.run(command + ["--steps", "3"], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    assert "resuming from step 2" in p.stderr
    assert [json.loads(line)["step"] for line in (run / "log.jsonl").read_text().splitlines()] == [1, 2, 3]


def test_schema_files_sampled_per_collection_in_a_stable_order(tmp_path):
    """What `eval json` evaluates: at most --limit files per collection, by file-name hash (not the first names),
    only the named collections, only held-out schemas with --heldout."""
    from diffreason.tasks.json_corpus import collection_of, is_heldout, sample_schema_files

    names = [f"Github_easy---o{i}.json" for i in range(30)] + [f"BFCL_java_{i}.json" for i in range(30)]
    for name in names:
        (tmp_path / name).write_text("{}")
    assert collection_of("Github_easy---o12.json") == "Github_easy"
    assert collection_of("BFCL_java_3.json") == "BFCL_java"
    everything = sample_schema_files(tmp_path)
    assert sorted(f.name for f in everything) == sorted(names) and everything == sample_schema_files(tmp_path)
    two = sample_schema_files(tmp_path, limit=2)
    assert [collection_of(f.name) for f in two].count("BFCL_java") == 2 and len(two) == 4
    assert two == [f for f in everything if f in two]  # the first two of each collection in the hash order
    assert {collection_of(f.name) for f in sample_schema_files(tmp_path, collections=["BFCL_java"])} == {"BFCL_java"}
    assert {f.name for f in sample_schema_files(tmp_path, heldout=True)} == {n for n in names if is_heldout(n)}
