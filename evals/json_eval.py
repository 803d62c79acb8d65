"""JSON-schema eval over jsonschemabench: coverage, validity, compile time, per collection.

For every schema file (`{"schema": ..., "tests": [...]}`): compile it (coverage, compile time per canvas position);
check that `jsonschema` agrees with the collection's labelled valid / invalid instances (the validator we trust);
then produce outputs and validate them — random fillings of the template as the engine commits them (no model), or,
with `--model`, real generations — validity must be 100 % of compiled schemas. Unsupported schemas are counted with
the first keyword that stopped them.

    diffreason eval json --schemas ../shared/jsonschemabench/schemas [--model DIR] [--limit N]
"""

from __future__ import annotations

import collections
import contextlib
import gc
import json
import re
import statistics
import time
from pathlib import Path

import jsonschema
import torch

from diffreason.errors import ContextTooLong, DiffreasonError
from diffreason.limits import ValidationTimeout, validate_json
from diffreason.tasks.json_corpus import collection_of
from diffreason.tasks.json_schema import SchemaError, compile_schema
from diffreason.tasks.json_schema.load import parse_json_text


def _leaves(value, path: str = ""):
    """(path, value) for every scalar of a JSON value; array positions read '*', so items compare by role."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, f"{path}/{key}")
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item, f"{path}/*")
    else:
        yield path, value


def _bigrams(text: str) -> set[str]:
    return {text[i : i + 2] for i in range(len(text) - 1)} or {text}


def plausibility(value, references: list) -> float | None:
    """How much `value` looks like the schema's real instances: over its leaves whose path occurs in a reference,
    the mean of the best similarity to a reference leaf there — 1 for an equal value, the character-bigram Dice
    overlap for two strings, else 0. None when no leaf path occurs in the references."""
    by_path = collections.defaultdict(list)
    for ref in references:
        for path, leaf in _leaves(ref):
            by_path[path].append(leaf)
    scores = []
    for path, leaf in _leaves(value):
        if path not in by_path:
            continue
        best = 0.0
        for ref in by_path[path]:
            if type(ref) is type(leaf) and ref == leaf:
                best = 1.0
                break
            if isinstance(ref, str) and isinstance(leaf, str):
                a, b = _bigrams(ref), _bigrams(leaf)
                best = max(best, 2 * len(a & b) / (len(a) + len(b)))
        scores.append(best)
    return statistics.mean(scores) if scores else None


def _random_value(compiled, tokenizer, seed: int):
    """A random filling of the template, as the engine commits one, parsed as JSON (ValueError if it does not parse)."""
    tokens = compiled.random_filling(torch.Generator().manual_seed(seed))
    return json.loads(tokenizer.decode(tokens, skip_special_tokens=True))


def run_eval(files, tokenizer, model=None, fillings: int = 2, seed: int = 0, progress=None,
             compile_timeout: float = 30.0, remote=None, freeze: bool = True) -> dict:
    """Per collection: compiled, valid / invalid outputs; the reasons schemas were not compiled; timings.

    A schema whose compilation takes more than `compile_timeout` seconds of CPU time counts as not compiled (its
    reason says so), so one pathological schema cannot stall a run over thousands. A file that cannot be read as a
    jsonschemabench file (not JSON, no "schema") is an error record of its own (`bad_files`); a compile that fails
    with anything but SchemaError is a crash (`crashes`: bugs); the other files are still evaluated. `freeze` False:
    the caller has frozen the collector's objects itself (a caller that evaluates one file at a time: `evals.suite`).
    """
    # What a long-running server does after start-up (SGLang's freeze_gc): the objects of the imports (torch,
    # transformers: ~500k) and the model leave the collector's generations, so a full collection triggered inside a
    # compile walks only what the run itself built (without it, 8 % of the compile time of Github_medium).
    if not freeze:
        return _run_eval(files, tokenizer, model, fillings, seed, progress, compile_timeout, remote)
    gc.collect()
    gc.freeze()
    try:
        return _run_eval(files, tokenizer, model, fillings, seed, progress, compile_timeout, remote)
    finally:
        gc.unfreeze()


def _run_eval(files, tokenizer, model, fillings: int, seed: int, progress, compile_timeout: float, remote) -> dict:
    from diffreason.structured import generate
    from diffreason.tasks.json_corpus import prompt_of

    commit = checkout_commit()  # taken now: the code may change while a long run goes on
    per = collections.defaultdict(lambda: collections.Counter())
    compile_us_per_pos, warm_us_per_pos, compile_ms, seconds_per_object, steps = [], [], [], [], []
    positions = 0  # canvas positions of all compiled schemas
    slowest = []  # (first-time compile ms, schema, positions)
    plausible, plausible_random = [], []  # outputs' similarity to the valid instances (model, random fillings)
    reasons = collections.Counter()
    validator_disagreements = 0
    invalid = []  # every invalid output: which schema, what, why (validity must be 100 %; these are bugs to fix)
    validator_timeouts = []  # outputs jsonschema did not judge within the time limit
    bad_files, crashes = [], []  # files that are no jsonschemabench file; compiles that failed with a bug
    refused = []  # requests a server would not serve (HTTP 400: e.g. its own compile failed), with its message
    too_long = []  # outputs the model could not hold: their template needs more positions than it has
    pending = []  # (collection, file name, schema, valid instances) whose outputs the servers make

    def produce(compiled, schema, k: int):
        """The k-th output of a compiled schema: a random filling, or the model's generation."""
        if model is None:
            return _random_value(compiled, tokenizer, seed + k)
        t = time.perf_counter()
        value, result = generate(model, schema, prompt=prompt_of(schema), seed=seed + k)
        seconds_per_object.append(time.perf_counter() - t)
        steps.append(sum(result.steps))
        return value

    def judge(coll: str, name: str, schema, references: list, output) -> None:
        """Count one output (`output()` gives its JSON value or raises) as valid, invalid or unjudged."""
        try:
            value = output()
        except ContextTooLong as exc:  # no output: the template is longer than the model's positions (no bug)
            per[coll]["too_long"] += 1
            too_long.append({"schema": name, "error": str(exc)[:300]})
            return
        except Exception as exc:
            unjudged = "unchecked" in str(exc)  # (generate() says so where jsonschema could not decide)
            per[coll]["unjudged" if unjudged else "invalid"] += 1
            if not unjudged:
                invalid.append({"schema": name, "error": " ".join(str(exc).split())[:300]})
            return
        try:
            # (time-limited: a schema pattern like ^((a+-?)+b/)?... backtracks exponentially in Python's re)
            error = validate_json(schema, value, compile_timeout)  # formats too
        except ValidationTimeout:
            per[coll]["unjudged"] += 1
            validator_timeouts.append(name)
            return
        except DiffreasonError:  # jsonschema itself fails on this schema: the output cannot be judged either way
            per[coll]["unjudged"] += 1
            return
        if error is not None:
            per[coll]["invalid"] += 1
            invalid.append({"schema": name, "output": value, "error": error[0][:300], "at": error[1]})
            return
        per[coll]["valid"] += 1
        if references and (score := plausibility(value, references)) is not None:
            (plausible if model is not None or remote is not None else plausible_random).append(score)

    for path in files:
        coll = collection_of(path.name)
        try:
            data = parse_json_text(path.read_bytes(), f"{path.name}")
            if not isinstance(data, dict) or "schema" not in data:
                raise DiffreasonError(f"{path.name} has no \"schema\" member")
        except (OSError, DiffreasonError) as exc:
            bad_files.append({"file": path.name, "error": str(exc)[:300]})
            if progress:
                progress()
            continue
        schema = data["schema"]
        per[coll]["schemas"] += 1
        for test in data.get("tests", []) if isinstance(data.get("tests"), list) else []:
            try:
                # (each schema under its own draft: draft-04's boolean exclusiveMinimum is not 2020-12's number)
                cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
                ok = cls(schema).is_valid(test["data"])
            except Exception:  # (a malformed test or schema: no verdict to compare)
                ok = None
            if ok is not None and ok != test.get("valid"):
                validator_disagreements += 1
        # CPU time of this thread: what the compile costs — not how busy the machine is, nor the CPU that torch's
        # worker threads burn spinning after a random filling (process time counted it: Github_easy 29 µs a position
        # against 17 in this thread)
        t = time.thread_time()
        reason = None
        try:
            compiled = compile_schema(schema, tokenizer, cpu_seconds=compile_timeout)
        except SchemaError as exc:
            reason = re.sub(r" at .*$", "", str(exc))[:90]
            if reason.startswith("compile budget exceeded"):
                reason = f"compile time limit ({compile_timeout:g} CPU s)"
        except Exception as exc:  # a bug: counted and named, and the run goes on
            crashes.append({"schema": path.name, "error": f"{type(exc).__name__}: {exc}"[:300]})
            reason = "crash (a bug)"
        if reason is not None:
            reasons[reason] += 1
            if progress:
                progress()
            continue
        elapsed = time.thread_time() - t
        per[coll]["compiled"] += 1
        per[coll]["fixed"] += bool(compiled.fixed)  # some choice fixed by the template (see CompiledSchema.fixed)
        compile_ms.append(1e3 * elapsed)
        compile_us_per_pos.append(1e6 * elapsed / max(1, len(compiled.template)))
        positions += len(compiled.template)
        per[coll]["compile_us"] += 1e6 * elapsed
        per[coll]["positions"] += len(compiled.template)
        slowest.append((1e3 * elapsed, path.name, len(compiled.template)))
        t = time.thread_time()
        compile_schema(schema, tokenizer)  # the same schema again: what a server pays per repeated request
        warm_us_per_pos.append(1e6 * (time.thread_time() - t) / max(1, len(compiled.template)))
        references = [test["data"] for test in data.get("tests", []) if test.get("valid")]
        # the baseline a model's values must beat: random fillings
        if references and (model is not None or remote is not None):
            with contextlib.suppress(ValueError):  # an unparsable filling is counted below, as an invalid output
                if (score := plausibility(_random_value(compiled, tokenizer, seed), references)) is not None:
                    plausible_random.append(score)
        if remote is not None:  # outputs come from the servers, all at once below
            pending.append((coll, path.name, schema, references))
        else:
            for k in range(fillings):
                judge(coll, path.name, schema, references, lambda k=k: produce(compiled, schema, k))
        if progress:
            progress()
    if remote is not None:
        _remote_outputs(remote, pending, fillings, seed, judge, seconds_per_object, steps, refused)
    total = collections.Counter()
    for c in per.values():
        total.update(c)
    return {
        "commit": commit,
        "collections": {k: dict(v) for k, v in sorted(per.items())},
        "total": dict(total),
        "validator_disagreements": validator_disagreements,
        "bad_files": bad_files,
        "crashes": crashes,
        "invalid_outputs": invalid,
        "too_long_for_the_model": too_long,
        "validator_timeouts": validator_timeouts,
        "compile_us_per_position_median": statistics.median(compile_us_per_pos) if compile_us_per_pos else None,
        "compile_ms_per_schema_median": statistics.median(compile_ms) if compile_ms else None,
        "cached_compile_us_per_position_median": statistics.median(warm_us_per_pos) if warm_us_per_pos else None,
        "compile_ms_per_schema_mean": statistics.mean(compile_ms) if compile_ms else None,
        # total first-time compile time over total positions: what a run over the whole collection paid per position
        "compile_us_per_position_amortised": 1e3 * sum(compile_ms) / positions if positions else None,
        "plausibility_mean": statistics.mean(plausible) if plausible else None,
        "plausibility_random_fillings_mean": statistics.mean(plausible_random) if plausible_random else None,
        "seconds_per_object_mean": statistics.mean(seconds_per_object) if seconds_per_object else None,
        "steps_mean": statistics.mean(steps) if steps else None,
        "slowest_compiles": [{"schema": name, "ms": ms, "positions": n} for ms, name, n in sorted(slowest)[::-1][:5]],
        "unsupported_top": reasons.most_common(15),
        "outputs": ("generations by " + ", ".join(remote.endpoints.urls) if remote is not None
                    else "model generations" if model is not None else "random fillings of the template"),
        "refused_by_server": refused,
    }


def _remote_outputs(remote, pending: list, fillings: int, seed: int, judge, seconds_per_object: list, steps: list,
                    refused: list) -> None:
    """The outputs of the compiled schemas by the servers of `remote` (a `diffreason.client.RemoteEngine`), every
    request at once (sharded, bounded in flight), each judged as a local output is. A request a server refuses
    (HTTP 400: e.g. a schema its own compile cannot write) is listed apart; a server's HTTP 500 (an output that failed
    its own check) and a request no server answered count as invalid (the report names them)."""
    from diffreason.client import EndpointError, result_of
    from diffreason.tasks.json_corpus import prompt_of
    from diffreason.tasks.json_schema.base import Budget

    jobs = [(item, k) for item in pending for k in range(fillings)]
    longest = Budget.max_length  # the compiler's longest template: the server's compile is held to the same
    bodies = [{"text": prompt_of(schema), "sampling_params": {"json_schema": json.dumps(schema),
                                                              "max_new_tokens": longest}}
              for (_, _, schema, _), _ in jobs]
    t = time.perf_counter()
    answers = remote.endpoints.map(bodies, [seed + k for _, k in jobs])
    if jobs:
        seconds_per_object.append((time.perf_counter() - t) / len(jobs))  # throughput: concurrent requests overlap
    for ((coll, name, schema, references), _), answer in zip(jobs, answers):
        if isinstance(answer, EndpointError) and answer.status == 400:
            refused.append({"schema": name, "error": " ".join(str(answer).split())[:300]})
            continue

        def output(answer=answer, schema=schema):
            if isinstance(answer, EndpointError):
                raise answer
            result = result_of(answer)
            steps.append(sum(result.steps))
            return json.loads(result.text)  # (judged below against the schema, as a local output is)

        judge(coll, name, schema, references, output)


def checkout_commit() -> str:
    """The checkout's commit (with '+' when it has changes), so a report says which code produced it."""
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=10)
        return head.stdout.strip() + ("+" if dirty.stdout.strip() else "") if head.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def write_report(report: dict, out_dir: str | Path, command: str) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {**report, "command": command}
    (out_dir / "json.json").write_text(json.dumps(report, indent=2))
    lines = [
        "# JSON-schema eval (jsonschemabench)",
        "",
        f"Command: `{command}` (commit {report['commit']})  ",
        f"Outputs checked: {report['outputs']}. Validator disagreements with the labelled instances: "
        f"{report['validator_disagreements']}.",
        "",
        "| collection | schemas | compiled (coverage) | of which with a fixed choice | outputs valid "
        "| compile CPU µs / position (amortised) |",
        "|---|---|---|---|---|---|",
    ]
    for name, c in report["collections"].items():
        compiled, n = c.get("compiled", 0), c["schemas"]
        outputs = c.get("valid", 0) + c.get("invalid", 0)
        validity = f"{100 * c.get('valid', 0) / outputs:.1f} %" if outputs else "—"
        cost = f"{c['compile_us'] / c['positions']:.1f}" if c.get("positions") else "—"
        lines.append(f"| {name} | {n} | {compiled} ({100 * compiled / n:.1f} %) | {c.get('fixed', 0)} | {validity} "
                     f"| {cost} |")
    unjudged = report["total"].get("unjudged", 0)
    if unjudged:
        timeouts = report.get("validator_timeouts", [])
        lines += ["", f"{unjudged} output(s) could not be judged: jsonschema itself fails on their schema (e.g. a $ref "
                      "into something that is not a schema)"
                      + (f", or did not finish within the time limit ({', '.join(timeouts)}: a pattern Python's re "
                         "backtracks on exponentially)" if timeouts else "")
                      + "; they count neither as valid nor as invalid."]
    if report.get("crashes"):
        lines += ["", f"Compiles that crashed (bugs: a schema the compiler cannot write must fail with SchemaError): "
                      f"{len(report['crashes'])}", ""]
        lines += [f"- `{x['schema']}`: {x['error']}" for x in report["crashes"][:20]]
    if report.get("bad_files"):
        lines += ["", f"Files skipped (not jsonschemabench files): {len(report['bad_files'])}", ""]
        lines += [f"- `{x['file']}`: {x['error']}" for x in report["bad_files"][:20]]
    if report.get("too_long_for_the_model"):
        lines += ["", f"Outputs not generated (the template needs more positions than the model has; counted neither "
                      f"valid nor invalid): {len(report['too_long_for_the_model'])}", ""]
        lines += [f"- `{x['schema']}`: {x['error']}" for x in report["too_long_for_the_model"][:20]]
    if report.get("refused_by_server"):
        lines += ["", f"Requests the servers refused (HTTP 400; counted neither valid nor invalid): "
                      f"{len(report['refused_by_server'])}", ""]
        lines += [f"- `{x['schema']}`: {x['error']}" for x in report["refused_by_server"][:20]]
    if report.get("invalid_outputs"):
        lines += ["", "Invalid outputs (bugs: every compiled template must only produce valid values):", ""]
        lines += [f"- `{x['schema']}`: {x['error']}" + (f" at `{x['at']}`" if x.get("at") else "")
                  for x in report["invalid_outputs"][:20]]
    med = report["compile_us_per_position_median"]
    if med:
        lines += ["", f"Compile CPU time (the compiling thread; first time a schema is seen): median {med:.0f} µs per "
                      "canvas position; per schema "
                      f"median {report['compile_ms_per_schema_median']:.0f} ms, mean "
                      f"{report['compile_ms_per_schema_mean']:.0f} ms. The same schema again (cached): median "
                      f"{report['cached_compile_us_per_position_median']:.1f} µs per position."]
        if report.get("compile_us_per_position_amortised") is not None:
            lines += [f"Amortised over the run (all first-time compile time / all positions, caches shared across "
                      f"schemas): {report['compile_us_per_position_amortised']:.0f} µs per position."]
        if report.get("slowest_compiles"):
            lines += ["Slowest first-time compiles: " + ", ".join(
                f"{x['schema']} {x['ms']:.0f} ms ({x['positions']} positions)" for x in report["slowest_compiles"]) + "."]
    if report.get("plausibility_random_fillings_mean") is not None:
        model_part = (f"model outputs {report['plausibility_mean']:.2f}, " if report.get("plausibility_mean") is not None
                      else "")
        lines += ["", "Plausibility (over the schemas with valid instances: each output leaf's best similarity to an "
                      "instance's leaf at the same path — 1 if equal, character-bigram overlap for strings, else 0 — "
                      f"averaged): {model_part}random fillings of the same templates "
                      f"{report['plausibility_random_fillings_mean']:.2f}."]
    if report.get("steps_mean") is not None:
        lines += [f"Model outputs: mean {report['steps_mean']:.1f} denoising steps per object (all canvases), "
                  f"{report['seconds_per_object_mean']:.2f} s per object."]
    lines += ["", "A fixed choice: a value too complex for one slot (an optional member holding objects, an array of "
                  "objects, anyOf over objects, a type list, a non-empty map) gets a scaffold that always writes the "
                  "member, a fixed number of items, one branch, one type or one member; an anyOf branch or if / then "
                  "/ else case this compiler cannot write, an optional member whose value it cannot write and "
                  "optional members beyond maxProperties are never written. Outputs still always validate.",
              "", "Most frequent reasons a schema is not compiled:", ""]
    lines += [f"- {count} × {reason}" for reason, count in report["unsupported_top"]]
    (out_dir / "json.md").write_text("\n".join(lines) + "\n")
    return [out_dir / "json.json", out_dir / "json.md"]
