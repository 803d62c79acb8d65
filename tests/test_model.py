"""Presets, save/load round trip, generation-config defaults, and one clear error per broken checkpoint."""

import json
import shutil

import pytest
import torch

from diffreason import PRESETS, Engine, ModelLoadError, SamplerConfig, build_model, load_model


def test_presets_build_valid_diffusiongemma_configs(tiny_lm):
    cfg = tiny_lm.model.config
    assert type(tiny_lm.model).__name__ == "DiffusionGemmaForBlockDiffusion"
    assert cfg.text_config.num_experts == 4 and cfg.text_config.top_k_experts == 2
    assert cfg.vision_config is not None
    assert cfg.text_config.layer_types[-1] == "full_attention"
    assert cfg.text_config.vocab_size == len(tiny_lm.tokenizer)
    assert set(PRESETS) >= {"tiny", "small"}


def test_save_load_round_trip(tiny_lm, tiny_checkpoint):
    for name in ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json"):
        assert (tiny_checkpoint / name).is_file()
    loaded = load_model(tiny_checkpoint)
    for (n1, p1), (n2, p2) in zip(tiny_lm.model.state_dict().items(), loaded.model.state_dict().items()):
        assert n1 == n2 and torch.equal(p1, p2)
    assert loaded.sampler_config == SamplerConfig()
    a = Engine(tiny_lm).generate("round trip", seed=4)
    b = Engine(loaded).generate("round trip", seed=4)
    assert a.raw_tokens == b.raw_tokens
    assert loaded.tokenizer.decode(loaded.tokenizer.encode("héllo {json}", add_special_tokens=False)) == "héllo {json}"


def test_null_generation_fields_take_released_defaults(tmp_path, tiny_checkpoint):
    path = tmp_path / "ck"
    shutil.copytree(tiny_checkpoint, path)
    gc = json.loads((path / "generation_config.json").read_text())
    for key in ("max_denoising_steps", "t_min", "t_max", "stability_threshold", "confidence_threshold"):
        gc[key] = None
    gc["sampler_config"] = None
    (path / "generation_config.json").write_text(json.dumps(gc))
    assert load_model(path).sampler_config == SamplerConfig(
        max_denoising_steps=48, entropy_bound=0.1, t_max=0.8, t_min=0.4, stability_threshold=1, confidence_threshold=0.005
    )
    (path / "generation_config.json").unlink()
    assert load_model(path).sampler_config == SamplerConfig()


def test_custom_sampler_config_is_saved(tmp_path):
    lm = build_model("tiny", sampler_config=SamplerConfig(max_denoising_steps=12, entropy_bound=0.3))
    lm.save(tmp_path / "ck")
    assert load_model(tmp_path / "ck").sampler_config.max_denoising_steps == 12
    assert load_model(tmp_path / "ck").sampler_config.entropy_bound == pytest.approx(0.3)


def test_load_errors(tmp_path, tiny_checkpoint):
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_model(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ModelLoadError, match="is a file"):
        load_model(tmp_path / "file")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_model(tmp_path / "empty")

    bad = tmp_path / "badjson"
    shutil.copytree(tiny_checkpoint, bad)
    (bad / "config.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="not valid JSON"):
        load_model(bad)

    other = tmp_path / "llama"
    shutil.copytree(tiny_checkpoint, other)
    (other / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    with pytest.raises(ModelLoadError, match="holds a llama model .*LlamaForCausalLM"):
        load_model(other)

    corrupt = tmp_path / "corrupt"
    shutil.copytree(tiny_checkpoint, corrupt)
    (corrupt / "model.safetensors").write_bytes(b"\x00" * 100)
    with pytest.raises(ModelLoadError, match="could not load the weights"):
        load_model(corrupt)

    noweights = tmp_path / "noweights"
    shutil.copytree(tiny_checkpoint, noweights)
    (noweights / "model.safetensors").unlink()
    with pytest.raises(ModelLoadError, match="no weights"):
        load_model(noweights)
