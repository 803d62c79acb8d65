import os

import pytest
import torch

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(scope="session")
def tiny_lm():
    from diffreason import build_model

    return build_model("tiny", seed=0)


@pytest.fixture(scope="session")
def confident_lm():
    """A tiny random model that converges: embeddings scaled up (sharp logits) and a wide entropy budget (most
    positions accepted each step), so the argmax canvas settles and stops early after 7-30 steps."""
    from diffreason import SamplerConfig, build_model

    lm = build_model("tiny", seed=1, sampler_config=SamplerConfig(entropy_bound=50.0, confidence_threshold=0.2))
    with torch.no_grad():
        lm.model.model.decoder.embed_tokens.weight.mul_(30)
    return lm


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, tiny_lm):
    path = tmp_path_factory.mktemp("ckpt") / "tiny"
    tiny_lm.save(path)
    return path
