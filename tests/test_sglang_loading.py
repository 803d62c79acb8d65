"""Checkpoints SGLang loads: SGLang's own loading code (server args, model config, the tokenizer manager's tokenizer
and processor) run on every checkpoint diffreason ships or writes, as far as it goes without CUDA."""

import asyncio

import pytest

pytest.importorskip("sglang")

from diffreason.model import EMBEDDED_CODE, EMBEDDED_JSON, EMBEDDED_SUDOKU  # noqa: E402

SHIPPED = [EMBEDDED_SUDOKU, EMBEDDED_JSON, EMBEDDED_CODE]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A checkpoint as `build-model` / `train` write it (save_model)."""
    from diffreason.model import build_model, save_model

    path = tmp_path_factory.mktemp("ckpt") / "tiny"
    save_model(build_model("tiny", seed=0), path)
    return path


def sglang_tokenizer_manager(path):
    """SGLang's TokenizerManager.init_tokenizer_and_processor for `path`, under a tokenizer process's runtime context
    (the manager's sockets and event loop are not needed for it)."""
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.managers.tokenizer_manager import TokenizerManager
    from sglang.srt.runtime_context import SpawnRanks, create_context, use_context
    from sglang.srt.server_args import ServerArgs

    args = ServerArgs(model_path=str(path), device="cpu")
    with use_context(create_context(args, role="tokenizer", ranks=SpawnRanks(world_rank=0))):
        manager = object.__new__(TokenizerManager)
        manager.server_args = args
        manager.model_config = ModelConfig.from_server_args(args)
        manager.init_tokenizer_and_processor()
    return manager


@pytest.mark.parametrize("which", ["sudoku-base", "json-small", "code-small", "written"])
def test_sglang_loads_the_checkpoint_up_to_the_device(which, written):
    import json

    from sglang.srt.multimodal.processors.diffusion_gemma import DiffusionGemmaSGLangProcessor
    from sglang.srt.runtime_context import SpawnRanks, create_context
    from sglang.srt.server_args import ServerArgs
    from transformers.models.gemma4 import Gemma4Processor

    from diffreason.model import load_model

    path = written if which == "written" else next(p for p in SHIPPED if p.name == which)
    config = json.loads((path / "config.json").read_text())
    # the Gemma4Renoise server refuses this machine at its device check, and at nothing before it
    args = ServerArgs(model_path=str(path), device="cpu", dllm_algorithm="Gemma4Renoise")
    with pytest.raises(ValueError, match="supports CUDA/ROCm GPU execution only"):
        create_context(args, role="tokenizer", ranks=SpawnRanks(world_rank=0))
    manager = sglang_tokenizer_manager(path)
    assert manager.model_config.is_multimodal and manager.model_config.hf_config.architectures == [
        "DiffusionGemmaForBlockDiffusion"]
    assert manager.model_config.vocab_size == config["text_config"]["vocab_size"]
    assert isinstance(manager.processor, Gemma4Processor)
    assert isinstance(manager.mm_processor, DiffusionGemmaSGLangProcessor)
    assert manager.mm_processor.mm_tokens.image_token_id == config["image_token_id"]
    assert manager.processor.image_token_id == config["image_token_id"]
    # SGLang's tokenizer is ours: the same ids, the same vocabulary (nothing past the model's embeddings)
    lm = load_model(path)
    ours = lm.tokenizer
    assert len(manager.tokenizer) == len(ours) == config["text_config"]["vocab_size"]
    text = "r1c1=5 r2c3=9" if which == "sudoku-base" else 'def f(x):\n    return {"a": [x, 1.5]}\n'
    assert manager.tokenizer.encode(text, add_special_tokens=False) == ours.encode(text, add_special_tokens=False)
    # a request's `text` as SGLang's tokenizer manager encodes it is the prompt the engine (and training) lays out:
    # BOS first (QA: the tokenizers added none, so SGLang's prompts lacked it)
    assert asyncio.run(manager._tokenize_texts(text))[0] == lm.encode_prompt(text)


def test_write_processor_refuses_a_tokenizer_without_image_markers(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from diffreason.errors import DiffreasonError
    from diffreason.model import write_processor

    tok = Tokenizer(models.WordLevel({"<pad>": 0, "<eos>": 1, "<unk>": 2, "a": 3}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                            unk_token="<unk>").save_pretrained(tmp_path)
    with pytest.raises(DiffreasonError, match="lacks the image markers"):
        write_processor(tmp_path)


def test_a_checkpoint_written_before_the_bos_post_processor_gets_it_when_saved_again(written, tmp_path):
    """(QA, 2026-12-07: only the shipped tokenizer.json files were patched; a user's earlier checkpoint gave SGLang no
    BOS, and saving it again — `train --init-from`, a resumed run — kept it so.)"""
    import shutil

    from tokenizers import Tokenizer
    from tokenizers.processors import TemplateProcessing

    from diffreason.model import load_model, save_model

    old = tmp_path / "old"
    shutil.copytree(written, old)
    vocab = Tokenizer.from_file(str(old / "tokenizer.json"))
    vocab.post_processor = TemplateProcessing(single="$A", pair="$A $B:1")  # (as written before 2026-12-07)
    vocab.save(str(old / "tokenizer.json"))
    lm = load_model(old)
    assert asyncio.run(sglang_tokenizer_manager(old)._tokenize_texts("a b"))[0] == lm.encode_prompt("a b")[1:]
    save_model(lm, tmp_path / "again")
    assert asyncio.run(sglang_tokenizer_manager(tmp_path / "again")._tokenize_texts("a b"))[0] == lm.encode_prompt("a b")
