"""Code infilling eval: HumanEval-infilling tasks through the infill search, in both modes, with and without the
template's constraints; pass rates decided by the tasks' tests in the sandbox.

    diffreason eval infill [--tasks FILE ...] [--limit N] [--samples K] [--mode model|verified|both] [--json]

Per task set (default: the shared single-line and multi-line sets):

1. the **harness** first: every evaluated task's canonical solution through the same check (`check_program`: the
   sandbox); they must all pass, which proves the harness;
2. per task, K samples (seeds `seed` .. `seed + K - 1`) × the slot lengths, one batch (`Searcher.search`), the hole
   read as HumanEval cuts it (whole lines; exactly one in a single-line set); each sample keeps one length — by score
   (model mode), or by (parses, score) (verified mode);
3. **pass@1, model mode**: sample 0 alone (what `infill(mode="model", samples=1)` returns) passes the tests; also
   the top-scoring of the K (`model_top_k`, what `infill(mode="model", samples=K)` returns);
   **pass@k, verified mode** (k = 1, 4, 16 up to K): some sample of the first k parses and passes (what
   `infill(mode="verified", samples=k)` returns then passes) — the outcome of the one run of k samples a user would
   make, not the Codex paper's estimator over n ≥ k samples (which averages over every k-subset: same expectation,
   less variance); `checked`: samples verified mode with K checked (the ranking up to the one returned, parsing
   or not, as `infill` counts them);
4. **parse rate** of the model-mode samples with the constraints and without them (the same model, seeds, lengths;
   the slot left free; the baseline runs the first `--baseline-samples` seeds, default 1, and its rate is set beside
   the constrained one of those seeds), of every candidate (all lengths) too, and of what verified mode returns;
5. **exact match** of sample 0 with the canonical solution (as written; and line by line without trailing space);
   **steps**: denoising steps of sample 0 (median / p90); **seconds per task**: the search (all K samples and
   lengths, constrained), the unconstrained baseline and the sandbox checks apart.

Writes infill.json (every task's candidates), infill.md and infill.png (pass rate against denoising steps and
against K) into the report directory. `--limit N` takes N tasks spread evenly over a set (every len/N-th: the first
N would be the lines of a handful of problems).
"""

from __future__ import annotations

import json
import math
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from diffreason.errors import DiffreasonError
from diffreason.tasks.infill.grammar import scan
from diffreason.tasks.infill.holes import parse_pair
from diffreason.tasks.infill.humaneval import (
    InfillTask, check_program, default_task_files, load_tasks, named_task_files, single_line_set,
)
from diffreason.tasks.infill.search import Candidate, Searcher, pick_length

K_POINTS = (1, 4, 16)


def spread(tasks: Sequence[InfillTask], limit: int | None) -> list[InfillTask]:
    """`limit` tasks spread evenly over the set (all of them without a limit)."""
    if not limit or limit >= len(tasks):
        return list(tasks)
    return [tasks[(i * len(tasks)) // limit] for i in range(limit)]


HELDOUT_SET = "HeldoutSingleLine"


def load_sets(files: Sequence[Path] | None = None, limit: int | None = None,
              heldout: int = 0) -> dict[str, tuple[Path | str, list]]:
    """{name: (file, tasks)} of the task files (default: both shared sets; names as `named_task_files` gives them,
    none taking the held-out set's), and `heldout` held-out spans."""
    paths = named_task_files(files or (), taken=(HELDOUT_SET,)) or default_task_files()
    sets: dict = {name: (path, spread(load_tasks(path), limit)) for name, path in paths.items()}
    if heldout:
        sets[HELDOUT_SET] = ("held-out packages (tasks/infill/corpus.py HELDOUT_PACKAGES)", heldout_spans(heldout))
    return sets


def heldout_spans(n: int, seed: int = 0) -> list[InfillTask]:
    """`n` whole-line holes in functions of the packages the code model never trained on
    (`tasks.infill.corpus.HELDOUT_PACKAGES`), one per function, functions and lines picked by a stable hash: no
    tests, so they measure parse rate, exact match and steps. (Only the held-out packages' files are read.)"""
    import ast
    import hashlib
    import random

    from diffreason.tasks.infill import corpus

    picked = []
    for root, f in corpus.source_files(corpus.default_sources()):
        package = corpus.package_of(f, root)
        if package not in corpus.HELDOUT_PACKAGES:
            continue
        try:
            text = f.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for fn, _ in corpus.functions_of(text, package, str(f.relative_to(root))):
            picked.append((hashlib.sha1(f"{seed}:{fn.path}:{fn.name}:{fn.source}".encode()).hexdigest(), fn))
    picked.sort(key=lambda hf: hf[0])
    tasks = []
    for key, fn in picked:
        if len(tasks) >= n:
            break
        lines = fn.source.splitlines(keepends=True)
        try:
            fdef = ast.parse(fn.source).body[0]
        except (SyntaxError, ValueError, IndexError):
            continue
        stmts = fdef.body[1:] if len(fdef.body) > 1 and isinstance(fdef.body[0], ast.Expr) and isinstance(
            getattr(fdef.body[0], "value", None), ast.Constant) else fdef.body  # (after a docstring)
        if isinstance(stmts[0], ast.Expr) and isinstance(getattr(stmts[0], "value", None), ast.Constant):
            continue  # a docstring alone
        body = [i for i in range(stmts[0].lineno - 1, len(lines)) if lines[i].strip()
                and not lines[i].strip().startswith("#")]
        if not body:
            continue
        rng = random.Random(key)
        rng.shuffle(body)
        starts = [sum(len(x) for x in lines[:i]) for i in body]
        inside = [scan(fn.source[:start]).quote is not None for start in starts]  # a docstring's line: not code
        choice = next((k for k, bad in enumerate(inside) if not bad), None)
        if choice is None:
            continue
        i, start = body[choice], starts[choice]
        tasks.append(InfillTask(task_id=f"{fn.package}:{fn.path}:{fn.name}:L{i}", entry_point=fn.name,
                                prompt=fn.source[:start], suffix=fn.source[start + len(lines[i]):],
                                canonical_solution=lines[i], test=""))
    return tasks


def percentile(values, q):
    """The nearest-rank q-quantile: the least value with a share q of the values at or below it (p90 of six values:
    the sixth; the index rounded from q (n - 1) read low on small sets: QA, 2026-12-07). None for no values."""
    values = sorted(values)
    if not values:
        return None
    return values[max(0, math.ceil(q * len(values) - 1e-9) - 1)]


def _same_lines(a: str, b: str) -> bool:
    def lines(text: str) -> list[str]:
        return [line.rstrip() for line in text.strip("\n").split("\n")]

    return lines(a) == lines(b)


def _cand(c: Candidate, passed: bool | None = None) -> dict:
    return {"length": c.length, "tokens": c.tokens, "text": c.text, "score": c.score, "parses": c.parses,
            "steps": sum(c.steps), "passed": passed}


class _Checks:
    """Sandboxed test runs of one task's candidates, each run once."""

    def __init__(self, task: InfillTask, timeout: float, isolation: str):
        self.task, self.timeout, self.isolation = task, timeout, isolation
        self.memo: dict[str, bool] = {}
        self.runs = 0
        self.seconds = 0.0

    def passes(self, c: Candidate) -> bool:
        if not c.parses:
            return False
        if c.text not in self.memo:
            t = time.perf_counter()
            self.memo[c.text] = check_program(self.task, c.text, timeout=self.timeout, isolation=self.isolation).passed
            self.seconds += time.perf_counter() - t
            self.runs += 1
        return self.memo[c.text]


def eval_task(task: InfillTask, single_line: bool, searcher: Searcher, free: Searcher | None, samples: int,
              max_hole_tokens: int, seed: int, modes: Sequence[str], timeout: float, isolation: str,
              baseline_samples: int = 1) -> dict:
    code = parse_pair(task.prompt, task.suffix)
    seeds = [seed + j for j in range(samples)]
    lens = searcher.lengths(code, 0, max_hole_tokens, None)
    fills = [[] for _ in seeds]
    found = searcher.search(code, 0, fills, seeds, lens, single_line=single_line)
    model = [pick_length(found.by_sample[j], False) for j in range(samples)]
    verified = [pick_length(found.by_sample[j], True) for j in range(samples)]
    checks = _Checks(task, timeout, isolation)
    tested = bool(task.test.strip())  # (held-out spans have no tests: parse rate, exact match and steps only)
    rec: dict = {"task_id": task.task_id, "tested": tested, "lengths": found.lengths,
                 "seconds_search": round(found.seconds, 3)}
    if "model" in modes and tested:
        rec["pass_model"] = checks.passes(model[0])
        ranked = sorted(range(samples), key=lambda j: (-model[j].score, j))
        rec["pass_model_top_k"] = checks.passes(model[ranked[0]])
        # model mode with k samples: the top-scoring of the first k
        rec["model_top_of_k"] = [checks.passes(model[min(range(k), key=lambda j: (-model[j].score, j))])
                                 for k in range(1, samples + 1)]
    if "verified" in modes:
        ranked = sorted(range(samples), key=lambda j: (-verified[j].score, j))
        walk = [j for j in ranked if verified[j].parses]
        if tested:
            first = next((j for j in range(samples) if checks.passes(verified[j])), None)
            rec["first_verified_pass"] = first  # pass@k (verified) = first < k
            returned = next((j for j in walk if checks.passes(verified[j])), None)
            # (as `infill(mode="verified")` counts them: every sample of the ranking up to the one returned)
            rec["verified_checked"] = (ranked.index(returned) + 1) if returned is not None else samples
        rec["verified_returned_parses"] = bool(walk)
    rec["exact"] = model[0].text == task.canonical_solution
    rec["exact_lines"] = _same_lines(model[0].text, task.canonical_solution)
    rec["steps"] = sum(model[0].steps)
    rec["steps_all"] = [sum(c.steps) for j in range(samples) for c in found.by_sample[j]]
    rec["parses_model"] = [m.parses for m in model]
    rec["parses_candidates"] = [c.parses for j in range(samples) for c in found.by_sample[j]]
    rec["samples"] = [{"seed": seeds[j], "model": _cand(model[j], checks.memo.get(model[j].text)),
                       "verified": _cand(verified[j], checks.memo.get(verified[j].text))} for j in range(samples)]
    if free is not None:  # the same seeds (the first `baseline_samples`) and lengths, the slot left free
        B = min(baseline_samples, samples)
        got = free.search(code, 0, fills[:B], seeds[:B], lens, single_line=single_line)
        free_model = [pick_length(got.by_sample[j], False) for j in range(B)]
        rec["seconds_free"] = round(got.seconds, 3)
        rec["parses_free"] = [m.parses for m in free_model]
        rec["parses_same_seeds"] = [m.parses for m in model[:B]]
        rec["parses_free_candidates"] = [c.parses for j in range(B) for c in got.by_sample[j]]
        rec["parses_same_seeds_candidates"] = [c.parses for j in range(B) for c in found.by_sample[j]]
        for j in range(B):
            rec["samples"][j]["free"] = _cand(free_model[j])
    rec["sandbox_runs"] = checks.runs
    rec["seconds_sandbox"] = round(checks.seconds, 3)
    return rec


def rate(values) -> float | None:
    """The share of true values, to 4 places (None values are not counted; None when none is left)."""
    values = [bool(v) for v in values if v is not None]
    return round(sum(values) / len(values), 4) if values else None


def summarise(records: list[dict], samples: int, modes: Sequence[str], max_steps: int) -> dict:
    n = len(records)
    tested = [r for r in records if r["tested"]]  # pass rates: over the tasks that have tests
    ks = sorted({k for k in K_POINTS if k <= samples} | {samples})
    out: dict = {"tasks": n, "tasks_with_tests": len(tested)}
    out["pass_at_1"] = out["model_top_k"] = out["pass_at_k"] = None
    if "model" in modes and tested:
        out["pass_at_1"] = rate(r["pass_model"] for r in tested)
        out["model_top_k"] = rate(r["pass_model_top_k"] for r in tested)
        out["model_top_of_k"] = [rate(r["model_top_of_k"][k - 1] for r in tested) for k in range(1, samples + 1)]
    if "verified" in modes:
        if tested:
            out["pass_at_k"] = {str(k): rate(r["first_verified_pass"] is not None and r["first_verified_pass"] < k
                                              for r in tested) for k in ks}
            out["pass_at_k_curve"] = [rate(r["first_verified_pass"] is not None and r["first_verified_pass"] < k
                                            for r in tested) for k in range(1, samples + 1)]
            out["verified_checked_mean"] = round(statistics.mean(r["verified_checked"] for r in tested), 3)
        out["verified_returned_parse_rate"] = rate(r["verified_returned_parses"] for r in records)
    out["parse_rate"] = rate(p for r in records for p in r["parses_model"])
    out["parse_rate_candidates"] = rate(p for r in records for p in r["parses_candidates"])
    if records and "parses_free" in records[0]:
        out["parse_rate_unconstrained"] = rate(p for r in records for p in r["parses_free"])
        out["parse_rate_same_seeds"] = rate(p for r in records for p in r["parses_same_seeds"])
        out["parse_rate_candidates_unconstrained"] = rate(p for r in records for p in r["parses_free_candidates"])
        out["parse_rate_candidates_same_seeds"] = rate(p for r in records
                                                        for p in r["parses_same_seeds_candidates"])
        out["seconds_per_task_unconstrained"] = round(statistics.mean(r["seconds_free"] for r in records), 3)
    out["exact_match"] = rate(r["exact"] for r in records)
    out["exact_match_lines"] = rate(r["exact_lines"] for r in records)
    steps = [r["steps"] for r in records]
    out["median_steps"] = statistics.median(steps) if steps else None
    out["p90_steps"] = percentile(steps, 0.9)
    out["mean_steps_all_candidates"] = round(statistics.mean(s for r in records for s in r["steps_all"]), 2) \
        if records else None
    out["seconds_per_task"] = round(statistics.mean(r["seconds_search"] for r in records), 3) if n else None
    out["sandbox_seconds_per_task"] = round(statistics.mean(r["seconds_sandbox"] for r in records), 3) if n else None
    if "model" in modes and tested:  # pass rate (model mode, sample 0) of the tasks done within s steps
        out["passed_within_steps"] = [rate(r["pass_model"] and r["steps"] <= s for r in tested)
                                      for s in range(1, max_steps + 1)]
    out["parsed_within_steps"] = [rate(r["parses_model"][0] and r["steps"] <= s for r in records)
                                  for s in range(1, max_steps + 1)]
    return out


def run_harness(sets: dict, timeout: float, isolation: str, progress: Callable[[], None] | None = None) -> dict:
    """Every evaluated task's canonical solution through the same check; the harness is proven when all pass."""
    out = {}
    for name, (_, tasks) in sets.items():
        t0 = time.perf_counter()
        failed = []
        tasks = [t for t in tasks if t.test.strip()]  # (held-out spans have no tests to run)
        if not tasks:
            continue
        for task in tasks:
            check = check_program(task, task.canonical_solution, timeout=timeout, isolation=isolation)
            if not check.passed:
                failed.append({"task_id": task.task_id, "status": check.status, "reason": check.result.reason})
            if progress:
                progress()
        out[name] = {"tasks": len(tasks), "passed": len(tasks) - len(failed), "failed": failed,
                     "seconds": round(time.perf_counter() - t0, 2)}
    return out


def run_eval(lm, sets: dict, samples: int = 4, modes: Sequence[str] = ("model", "verified"), seed: int = 0,
             max_hole_tokens: int = 64, baseline: bool = True, timeout: float = 10.0, isolation: str = "auto",
             progress: Callable[[str, int], None] | None = None, baseline_samples: int = 1, cost: int = 0) -> dict:
    """The eval of `sets` ({name: (file, tasks)}); `progress(stage, n)` after each task. The unconstrained baseline
    runs the first `baseline_samples` seeds (its parse rate is set beside the constrained one of the same seeds).
    `cost`: also time K = `cost` samples as one batch against as many separate runs (`batching_cost`)."""
    t0 = time.perf_counter()
    harness = run_harness(sets, timeout, isolation, (lambda: progress("harness", 1)) if progress else None)
    searcher = Searcher(lm)
    free = Searcher(lm, engine=searcher.engine, constrain=False) if baseline else None
    max_steps = searcher.engine.sampler.config.max_denoising_steps
    report: dict = {
        "model": _display(lm.path),
        "parameters": sum(p.numel() for p in lm.model.parameters()),
        "canvas_length": lm.canvas_length,
        "samples": samples,
        "modes": list(modes),
        "seed": seed,
        "max_hole_tokens": max_hole_tokens,
        "baseline": baseline,
        "baseline_samples": min(baseline_samples, samples) if baseline else 0,
        "sampler": searcher.engine.sampler.config.model_dump(),
        "machine": f"{platform.machine()}, torch threads {_threads()}",
        "harness": harness,
        "sets": {},
    }
    for name, (path, tasks) in sets.items():
        single = single_line_set(tasks)
        records, errors = [], []
        for task in tasks:
            try:
                records.append(eval_task(task, single, searcher, free, samples, max_hole_tokens, seed, modes,
                                         timeout, isolation, baseline_samples))
            except DiffreasonError as exc:  # (that task alone: the others are still evaluated and reported)
                errors.append({"task_id": task.task_id, "error": " ".join(str(exc).split())})
            if progress:
                progress(name, 1)
        report["sets"][name] = {"file": _display(path), "single_line": single,
                                "summary": {**summarise(records, samples, modes, max_steps), "errors": len(errors)},
                                "tasks": records, "errors": errors}
    report["summary"] = {**overall(report, samples, modes, max_steps),
                         "errors": sum(len(s["errors"]) for s in report["sets"].values())}
    if cost:
        name, (_, tasks) = next(iter(sets.items()))
        report["cost"] = {"set": name, **batching_cost(searcher, tasks[0], cost, max_hole_tokens, seed,
                                                       single_line_set(tasks))}
    report["seconds"] = round(time.perf_counter() - t0, 1)
    return report


def batching_cost(searcher: Searcher, task: InfillTask, k: int, max_hole_tokens: int, seed: int,
                  single_line: bool) -> dict:
    """Seconds per candidate of K samples (× the slot lengths) searched as one batch against K separate searches
    of one sample each (the same seeds, lengths and template: the regex is compiled before either is timed)."""
    code = parse_pair(task.prompt, task.suffix)
    lens = searcher.lengths(code, 0, max_hole_tokens, None)
    seeds = [seed + j for j in range(k)]
    searcher.search(code, 0, [[]], seeds[:1], lens[:1], single_line=single_line)  # (compiles the hole's regex)
    t = time.perf_counter()
    batched = searcher.search(code, 0, [[] for _ in seeds], seeds, lens, single_line=single_line)
    one_batch = time.perf_counter() - t
    t = time.perf_counter()
    for s in seeds:
        searcher.search(code, 0, [[]], [s], lens, single_line=single_line)
    separate = time.perf_counter() - t
    n = sum(len(c) for c in batched.by_sample.values())
    return {"task_id": task.task_id, "samples": k, "lengths": lens, "candidates": n,
            "seconds_per_candidate_batched": round(one_batch / n, 4),
            "seconds_per_candidate_separate": round(separate / n, 4), "ratio": round(one_batch / separate, 3),
            "device": str(searcher.lm.device)}


def overall(report: dict, samples: int, modes: Sequence[str], max_steps: int) -> dict:
    records = [r for s in report["sets"].values() for r in s["tasks"]]
    out = summarise(records, samples, modes, max_steps)
    out.pop("passed_within_steps", None)
    out.pop("parsed_within_steps", None)
    out["harness_passed"] = sum(h["passed"] for h in report["harness"].values())
    out["harness_tasks"] = sum(h["tasks"] for h in report["harness"].values())
    return out


def json_summary(report: dict) -> dict:
    """The one object `--json` prints: the whole run's summary, and each set's."""
    pick = lambda s: {k: v for k, v in s.items() if k not in ("passed_within_steps", "model_top_of_k",  # noqa: E731
                                                              "pass_at_k_curve", "parsed_within_steps")}
    return {**pick(report["summary"]), "mode": "+".join(report["modes"]), "samples": report["samples"],
            "model": report["model"], "seconds": report["seconds"],
            "sets": {name: pick(s["summary"]) for name, s in report["sets"].items()}}


def _display(path) -> str:
    if path is None:
        return "in-memory"
    if isinstance(path, str):
        return path
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def pct(x) -> str:
    """A fraction as a percentage with one decimal (— for None)."""
    return "—" if x is None else f"{100 * x:.1f} %"


def seconds(x) -> str:
    """Seconds with one decimal (— for None: not measured)."""
    return "—" if x is None else f"{x:.1f}"


def write_report(report: dict, out_dir: str | Path, command: str) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {**report, "command": command}
    json_path = out_dir / "infill.json"
    json_path.write_text(json.dumps(report, indent=1))
    K = report["samples"]
    ks = sorted({k for k in K_POINTS if k <= K} | {K})
    lines = [
        "# Code infilling eval (HumanEval-infilling)",
        "",
        f"Command: `{command}`  ",
        f"Model: `{report['model']}` ({report['parameters'] / 1e6:.2f}M parameters, canvas {report['canvas_length']}); "
        f"K = {K} samples per task (seeds {report['seed']}..{report['seed'] + K - 1}), holes of at most "
        f"{report['max_hole_tokens']} tokens; {report['machine']}; {report['seconds']:.0f} s in all.",
        "",
        "Sampler (the checkpoint's generation_config): "
        + ", ".join(f"{k} {v}" for k, v in report["sampler"].items()) + ".",
        "",
        "Harness: the canonical solutions through the same sandboxed check first — "
        + "; ".join(f"{name}: {h['passed']}/{h['tasks']} pass" for name, h in report["harness"].items()) + ".",
        "",
        "Pass rates are over the tasks with tests (the held-out spans have none). `pass@1 (model)`: sample 0 "
        "alone, model mode; `top of K (model)`: the best-scoring of the K samples; "
        "`pass@k (verified)`: verified mode with k samples returns code that passes (some sample of the first k "
        "parses and passes); parse rates of the model-mode samples with the template's constraints and without "
        "them (slot left free; same model, seeds and lengths); `verified answers`: the tasks where verified mode "
        "returns code (it returns only code that parses: none where no sample of K parses); exact match and "
        "steps of sample 0; seconds per task: the batched search of all K samples × lengths (constrained) / the "
        "unconstrained baseline / the sandbox checks.",
        "",
        "| set | tasks | pass@1 (model) | top of K (model) | "
        + " | ".join(f"pass@{k} (verified)" for k in ks)
        + " | parse (constrained, all K) | parse: constrained / free, same seeds | verified answers | exact | "
        "exact (lines) | median steps | p90 steps | s / task (search / free / sandbox) |",
        "|---|---:|---:|---:|" + "---:|" * len(ks) + "---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, s in [*report["sets"].items(), ("all", {"summary": report["summary"]})]:
        m = s["summary"]
        pak = m.get("pass_at_k") or {}
        lines.append(
            f"| {name} | {m['tasks']} | {pct(m.get('pass_at_1'))} | {pct(m.get('model_top_k'))} | "
            + " | ".join(pct(pak.get(str(k))) for k in ks)
            + f" | {pct(m['parse_rate'])} | {pct(m.get('parse_rate_same_seeds'))} / "
            f"{pct(m.get('parse_rate_unconstrained'))} | "
            f"{pct(m.get('verified_returned_parse_rate'))} | {pct(m['exact_match'])} | "
            f"{pct(m['exact_match_lines'])} | {m['median_steps']} | {m['p90_steps']} | "
            f"{m['seconds_per_task']:.1f} / {seconds(m.get('seconds_per_task_unconstrained'))} / "
            f"{m['sandbox_seconds_per_task']:.1f} |"
        )
    lines += [
        "",
        "Every candidate (all slot lengths): parse rate "
        + "; ".join(f"{name} {pct(s['summary']['parse_rate_candidates'])} constrained (all K), "
                    f"{pct(s['summary'].get('parse_rate_candidates_same_seeds'))} constrained / "
                    f"{pct(s['summary'].get('parse_rate_candidates_unconstrained'))} free on the baseline's seeds"
                    for name, s in report["sets"].items()) + f" (baseline: the first {report['baseline_samples']} "
        "seed(s) of each task).",
        "",
        *([f"Cost of batching ({report['cost']['set']}, {report['cost']['task_id']}, {report['cost']['device']}): "
           f"K = {report['cost']['samples']} samples × {len(report['cost']['lengths'])} slot lengths as one batch "
           f"{report['cost']['seconds_per_candidate_batched']:.3f} s per candidate, as {report['cost']['samples']} "
           f"separate searches {report['cost']['seconds_per_candidate_separate']:.3f} s (ratio "
           f"{report['cost']['ratio']:.2f}).", ""] if report.get("cost") else []),
        "![pass rate vs steps and vs K](infill.png)",
        "",
    ]
    errors = [(name, e) for name, s in report["sets"].items() for e in s.get("errors", [])]
    if errors:  # (tasks the eval could not run: left out of every figure above)
        lines += ["Tasks not evaluated (left out of the figures): "
                  + "; ".join(f"{name} {e['task_id']}: {e['error']}" for name, e in errors), ""]
    md_path = out_dir / "infill.md"
    md_path.write_text("\n".join(lines))
    png_path = out_dir / "infill.png"
    _plot(report, png_path)
    return [json_path, md_path, png_path]


def _plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    K = report["samples"]
    for name, s in report["sets"].items():
        m = s["summary"]
        within = m.get("passed_within_steps")
        color = None
        if within:
            (line,) = a.plot(range(1, len(within) + 1), [100 * v for v in within], label=f"{name}: passes")
            color = line.get_color()
        parsed = m.get("parsed_within_steps")
        if parsed:
            a.plot(range(1, len(parsed) + 1), [100 * v for v in parsed], linestyle=":", color=color,
                   label=f"{name}: parses")
        curve = m.get("pass_at_k_curve")
        if curve:
            (line,) = b.plot(range(1, K + 1), [100 * v for v in curve], marker="o", label=f"{name}: verified pass@k")
            top = m.get("model_top_of_k")
            if top:
                b.plot(range(1, K + 1), [100 * v for v in top], linestyle="--", color=line.get_color(),
                       label=f"{name}: model mode, top of k")
        elif m.get("model_top_of_k"):
            b.plot(range(1, K + 1), [100 * v for v in m["model_top_of_k"]], linestyle="--",
                   label=f"{name}: model mode, top of k")
    a.set_xlabel("denoising steps (sample 0)")
    a.set_ylabel("tasks done within that many steps (%)")
    a.set_title("model mode, sample 0: passes / parses vs steps")
    b.set_xlabel("K (samples)")
    b.set_ylabel("pass rate (%)")
    b.set_title("pass rate vs K")
    b.set_xscale("log", base=2)
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
