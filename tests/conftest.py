import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request

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


@contextlib.contextmanager
def serve_process(model, *args):
    """A real `diffreason serve` process for `model` on a free port; yields its base URL once /health answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "diffreason.cli", "serve", str(model), "--port", str(port), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 300
        while time.time() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"the server exited: {proc.stdout.read()[-2000:]}")
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail("the server did not come up in 300 s")
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
