"""Everything that needs a GPU, in one script that finishes in under 8 minutes; prints what it found.

    python -m diffreason.evals.gpu_checks [--model DIR] [--skip-server]

1. the GPU tests (`pytest -m gpu` over the test files that hold them): FlashInfer kernel vs its PyTorch twin, the
   engine on FlashInfer vs SDPA;
2. the engine on CUDA: one Sudoku batch with the embedded model (puzzles/s; FlashInfer where its head sizes have
   kernels, else SDPA);
3. an SGLang server with the diffreason plugin, launched on a shipped checkpoint under each of SGLang's dLLM loops
   (FDFO, the default, and `--no-dllm-fdfo`), answering constrained /generate requests (json_schema and regex) with
   valid output and `diffreason_steps` in meta_info, a 400 for a bad schema, and a batch sent at once: a two-canvas
   template request beside unconstrained ones (every canvas of the template obeyed, one step count per canvas), and a
   streamed request whose last chunk lists every canvas's steps; diffreason's client against it (a program through
   `DiffusionBackend(url)`, the same seed twice giving the same tokens);
4. the plugin's step against upstream's at V = 262,144, C = 256 on the GPU (`diffreason.evals.bench_plugin`).
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


def server(model: Path, fdfo: bool = True) -> bool:
    section(f"SGLang server with the diffreason plugin on {model} ({'FDFO' if fdfo else '--no-dllm-fdfo'})")
    port = free_port()
    env = {**os.environ, "SGLANG_PLUGINS": "diffreason"}
    cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(model), "--dllm-algorithm",
           "Gemma4Renoise", "--port", str(port), "--mem-fraction-static", "0.3", "--disable-cuda-graph"]
    if not fdfo:
        cmd.append("--no-dllm-fdfo")
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
        good = good and status == 200
        ok = (good and mixed_batch(url, model) and streamed(f"http://127.0.0.1:{port}/generate")
              and remote_client(f"http://127.0.0.1:{port}"))
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return ok


def mixed_batch(url: str, model: Path) -> bool:
    """A two-canvas template request sent at once beside unconstrained ones (they share batches; rows join and leave
    mid-canvas under FDFO): every position of the template obeyed, one step count per canvas."""
    from concurrent.futures import ThreadPoolExecutor

    from diffreason.model import load_model

    tok = load_model(model).tokenizer
    canvas = json.loads((model / "config.json").read_text()).get("canvas_length", 256)
    digits = [tok.convert_tokens_to_ids(d) for d in "0123456789"]
    positions = [digits] * (canvas + 20) + [tok.eos_token_id]
    bodies = [{"text": "digits", "sampling_params": {"max_new_tokens": 2 * canvas, "custom_params": {
        "diffreason_template": json.dumps(positions)}}}] + [
        {"text": f"free {i}", "sampling_params": {"max_new_tokens": 2 * canvas}} for i in range(6)]
    with ThreadPoolExecutor(len(bodies)) as pool:
        answers = list(pool.map(lambda b: post(url, b, timeout=300), bodies))
    status, out = answers[0]
    if status != 200:
        print("two-canvas template:", status, str(out)[:300])
        return False
    ids = out.get("output_ids") or tok.encode(out["text"], add_special_tokens=False)
    obeyed = all(t in digits for t in ids[: canvas + 20])
    steps = out["meta_info"].get("diffreason_steps")
    print("two-canvas template:", "obeyed" if obeyed else "VIOLATED", "steps", steps,
          "| unconstrained beside it:", [s for s, _ in answers[1:]])
    return obeyed and isinstance(steps, list) and len(steps) == 2 and all(s == 200 for s, _ in answers[1:])


def streamed(url: str) -> bool:
    """A streamed two-canvas request: its last chunk's meta lists both canvases' steps."""
    body = {"text": "stream", "stream": True, "sampling_params": {"max_new_tokens": 512}}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    last = None
    with urllib.request.urlopen(request, timeout=300) as response:
        for line in response:
            line = line.decode().strip()
            if line.startswith("data:") and line != "data: [DONE]":
                last = json.loads(line[5:])
    steps = (last or {}).get("meta_info", {}).get("diffreason_steps")
    n = (last or {}).get("meta_info", {}).get("completion_tokens")
    print("streamed:", "completion_tokens", n, "steps", steps)
    return isinstance(steps, list) and len(steps) >= 1


def remote_client(base: str) -> bool:
    """diffreason's client against SGLang: a program through `DiffusionBackend(url)` (a schema gen, a select as a
    constrained gen), and a request sent twice with the same seed (SGLang seeds by the request id the client makes
    from it) giving the same tokens."""
    import sglang as sgl

    from diffreason.backends.sglang_frontend import DiffusionBackend
    from diffreason.client import Endpoints

    schema = json.dumps({"type": "object", "required": ["age"], "properties": {"age": {"type": "integer"}}})

    @sgl.function
    def card(s):
        s += "A person: " + sgl.gen("card", json_schema=schema, max_tokens=64)
        s += " Side: " + sgl.select("side", choices=["good", "evil"])

    state = card.run(backend=DiffusionBackend(base, seed=3))
    print("program:", repr(state.text()), state.get_meta_info("card")["steps"], state.get_meta_info("side")["steps"])
    endpoints = Endpoints(base)
    body = {"text": "free text", "sampling_params": {"max_new_tokens": 32}}
    first, second = (endpoints.post(body, seed=7) for _ in range(2))  # (one after the other: the same rid)
    same = first["output_ids"] == second["output_ids"]
    print("same seed twice, same tokens:", same, "; seeded by", "sampling_seed" if endpoints.seeded(base) else "rid")
    return state["side"] in ("good", "evil") and bool(state.get_meta_info("card")["steps"]) and same


def plugin_step_ratio() -> bool:
    section("the plugin's step vs upstream's, V = 262,144, C = 256, on the GPU")
    from diffreason.evals import bench_plugin

    result = bench_plugin.main(["--device", "cuda", "--rows", "8", "--steps", "8", "--repeats", "5"])
    return result["ratio"] <= 1.05


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
        results["server (--no-dllm-fdfo)"] = server(args.model or EMBEDDED_JSON, fdfo=False)
        results["plugin step ratio"] = plugin_step_ratio()
    section("summary")
    print(json.dumps(results))
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
