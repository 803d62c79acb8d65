"""Everything that needs a GPU, in one script that finishes in under 8 minutes; prints what it found.

    python -m diffreason.evals.gpu_checks [--model DIR] [--skip-server]

1. the GPU tests (`pytest -m gpu` over the test files that hold them): FlashInfer kernel vs its PyTorch twin, the
   engine on FlashInfer vs SDPA;
2. the engine on CUDA: one Sudoku batch with the embedded model (puzzles/s; FlashInfer where its head sizes have
   kernels, else SDPA);
3. an SGLang server with the diffreason plugin, launched on a shipped checkpoint, answering a constrained /generate
   (json_schema and regex) with valid output and `diffreason_steps` in meta_info, and a 400 for a bad schema.
Without CUDA it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def section(title: str) -> None:
    print(f"\n=== {title} ===", flush=True)


def post(url: str, body: dict, timeout: float = 120) -> tuple[int, dict | str]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_tests() -> bool:
    section("GPU tests (pytest -m gpu)")
    # only the files that hold GPU tests: collecting the rest needs every optional dependency (sglang, outlines, …)
    files = [str(f) for f in sorted((ROOT / "tests").glob("test_*.py")) if "mark.gpu" in f.read_text()]
    p = subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", *files], cwd=ROOT,
                       timeout=360)
    return p.returncode == 0


def engine_sudoku() -> bool:
    section("engine on CUDA: Sudoku, embedded model")
    import torch

    from diffreason.model import EMBEDDED_SUDOKU, load_model
    from diffreason.tasks import sudoku

    lm = load_model(EMBEDDED_SUDOKU)
    lm.model.to("cuda", torch.bfloat16)
    puzzles = sudoku.generate_set("medium", 64, seed=4242)
    t = time.perf_counter()
    results = sudoku.solve(lm, [p.puzzle for p in puzzles], mode="model", seed=0, batch_size=64)
    dt = time.perf_counter() - t
    solved = sum(r.solved for r in results)
    print(f"attention={lm.model.config._attn_implementation} medium solved {solved}/64, {64 / dt:.1f} puzzles/s")
    return True


def server(model: Path) -> bool:
    section(f"SGLang server with the diffreason plugin on {model}")
    port = free_port()
    env = {**os.environ, "SGLANG_PLUGINS": "diffreason"}
    cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(model), "--dllm-algorithm",
           "Gemma4Renoise", "--port", str(port), "--mem-fraction-static", "0.3", "--disable-cuda-graph"]
    print(" ".join(cmd), flush=True)
    log = open("/tmp/diffreason-sglang-server.log", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    ok = False
    try:
        deadline = time.time() + 240
        while time.time() < deadline:
            if proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except Exception:
                time.sleep(2)
        else:
            print("server did not come up in 240 s")
        if proc.poll() is not None:
            print("server exited:", proc.returncode)
            print(Path("/tmp/diffreason-sglang-server.log").read_text()[-4000:])
            return False
        url = f"http://127.0.0.1:{port}/generate"
        schema = {"type": "object", "required": ["name", "age"], "properties": {
            "name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 120}}}
        status, out = post(url, {"text": "a person", "sampling_params": {"json_schema": json.dumps(schema),
                                                                           "max_new_tokens": 256}})
        print("json_schema:", status, out if status != 200 else (out["text"], out["meta_info"].get("diffreason_steps")))
        import jsonschema

        good = status == 200
        if good:
            jsonschema.validate(json.loads(out["text"]), schema)
        status, out = post(url, {"text": "a code", "sampling_params": {"regex": "[A-Z]{3}-[0-9]{4}",
                                                                         "max_new_tokens": 32}})
        print("regex:", status, out if status != 200 else (out["text"], out["meta_info"].get("diffreason_steps")))
        good = good and status == 200
        status, out = post(url, {"text": "x", "sampling_params": {"json_schema": json.dumps(
            {"type": "object", "required": ["a"], "properties": {"a": {"type": "array",
                                                                    "unevaluatedItems": {"const": 1}}}})}})
        print("bad schema:", status, str(out)[:200])
        good = good and status == 400
        status, out = post(url, {"text": "free text", "sampling_params": {"max_new_tokens": 64}})
        print("unconstrained:", status, out if status != 200 else (out["text"][:80], out["meta_info"].get(
            "diffreason_steps")))
        ok = good and status == 200
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=None, help="checkpoint for the server (default: embedded JSON)")
    parser.add_argument("--skip-server", action="store_true")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check here")
        return 0
    print(torch.cuda.get_device_name(0))
    results = {"tests": run_tests(), "engine": engine_sudoku()}
    if not args.skip_server:
        from diffreason.model import EMBEDDED_JSON

        results["server"] = server(args.model or EMBEDDED_JSON)
    section("summary")
    print(json.dumps(results))
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
