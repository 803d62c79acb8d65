"""Presets, save/load round trip, generation-config defaults, and one clear error per broken checkpoint."""

import json
import re
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

    # (QA: a missing or foreign tensor was filled at random or skipped, a NaN weight was a traceback mid-generation)
    from safetensors.torch import load_file, save_file

    weights = load_file(tiny_checkpoint / "model.safetensors")
    name = sorted(k for k in weights if "q_proj" in k)[0]
    for case, tensors, message in [
        ("missing", {k: v for k, v in weights.items() if k != name}, f"lack {re.escape(name)}"),
        ("unexpected", {**weights, "extra.weight": torch.zeros(2)}, "hold tensors the model does not have: "
         "extra.weight: not a whole checkpoint"),
        ("nan", {**weights, name: torch.full_like(weights[name], float("nan"))}, "are damaged: .*q_proj.weight holds "
         "NaN or infinite values"),
    ]:
        damaged = tmp_path / case
        shutil.copytree(tiny_checkpoint, damaged)
        save_file(tensors, damaged / "model.safetensors", metadata={"format": "pt"})
        with pytest.raises(ModelLoadError, match=message):
            load_model(damaged)
    narrow = tmp_path / "narrow"
    shutil.copytree(tiny_checkpoint, narrow)
    config = json.loads((narrow / "config.json").read_text())
    config["text_config"]["hidden_size"] //= 2
    (narrow / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match=r"hold tensors of other shapes: .* there, .* in the model\).* more: "
                       "config.json describes another model"):
        load_model(narrow)

    noweights = tmp_path / "noweights"
    shutil.copytree(tiny_checkpoint, noweights)
    (noweights / "model.safetensors").unlink()
    with pytest.raises(ModelLoadError, match="no weights"):
        load_model(noweights)


def test_grow_depth_keeps_the_function_and_adds_trainable_layers(tmp_path):
    from diffreason.model import grow_depth

    lm = build_model("tiny", num_hidden_layers=4, seed=3)
    assert lm.config.text_config.layer_types == ["sliding_attention"] * 3 + ["full_attention"]
    deep = grow_depth(lm, 6)
    text = deep.config.text_config
    assert text.num_hidden_layers == 6 and len(deep.model.model.encoder.language_model.layers) == 6
    # copies of sliding layers 0 and 2 sit right after them; the full-attention layer stays last
    assert text.layer_types == ["sliding_attention"] * 5 + ["full_attention"]
    layers = deep.model.model.encoder.language_model.layers
    for copy, source in ((1, 0), (4, 2)):
        assert torch.equal(layers[copy].self_attn.q_proj.weight, lm.model.model.encoder.language_model.layers[source]
                           .self_attn.q_proj.weight)
        assert not layers[copy].post_attention_layernorm.weight.any()
        assert not layers[copy].post_feedforward_layernorm.weight.any()
    assert layers[5].post_attention_layernorm.weight.any()
    # the same function: same logits, and the sampler draws the same canvas
    prompt = torch.tensor([[lm.tokenizer.bos_token_id, 40, 41]])
    canvas = torch.randint(10, 200, (1, lm.canvas_length), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        a = lm.model(input_ids=prompt, decoder_input_ids=canvas).logits
        b = deep.model(input_ids=prompt, decoder_input_ids=canvas).logits
    assert torch.allclose(a, b, atol=1e-6, rtol=0)
    assert Engine(lm).generate("deeper", seed=2).raw_tokens == Engine(deep).generate("deeper", seed=2).raw_tokens
    # it saves and loads like any checkpoint
    loaded = load_model(deep.save(tmp_path / "deep"))
    assert loaded.config.text_config.num_hidden_layers == 6
    with pytest.raises(ModelLoadError, match="has 4 layers already"):
        grow_depth(lm, 4)
    with pytest.raises(ModelLoadError, match="at most 3 layers"):
        grow_depth(lm, 8)
