"""One eval suite: Sudoku tiers and puzzle files, JSON schemas and code infilling in one resumable run, one report.

    diffreason eval suite quick --out evals/reports/suite-quick
    diffreason eval suite --suite-file my_suite.toml --out runs/my-suite

A suite is a list of entries (`Entry`: task, set, mode, n, options), named in `SUITES` or read from a TOML / JSON
file (`load_suite_file`). Each entry's items (puzzles, schema files, infilling tasks) are evaluated by the per-task
eval code — `tasks.sudoku.solve` / `tasks.sudoku_ar.solve_ar` (as `eval sudoku` runs them), `evals.json_eval.run_eval`
on one schema file, `evals.infill_eval.eval_task` on one task — in chunks of fixed item indices, and every finished
item is one JSON line appended to `<out>/results.jsonl` (after a header line: the definition, seed and models). A
run that stops (Ctrl-C, a kill, a crash) continues where it stopped when started again with the same definition;
a chunk is written in one write, so it is there whole or not at all, and is re-run whole when it is not.

Deterministic for a seed: item k of an entry is sampled with seed `item_seed(seed, task, set, k)` (its samples /
chains / fillings: that and the following seeds, as the per-task code numbers them), never from the order things
ran in; the chunks' boundaries are fixed by the entry's `chunk` option, so an item is always batched with the same
others. Modes of one set share the seeds (paired: the model and verified runs of a puzzle start alike).

The report (`suite.json`, `suite.md`, `suite.png`) is rebuilt from results.jsonl alone (`write_report`).
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from diffreason.errors import DiffreasonError

FORMAT = 1  # of results.jsonl's header
RECORD_KEYS = ("task", "set", "mode", "item")  # what every result line has
TASKS = {
    "sudoku": ("model", "verified", "autoregressive"),
    "json": ("model", "random"),
    "infill": ("model", "verified", "unconstrained"),
}
# the modes that are a baseline for the model's: the autoregressive Sudoku model, random fillings of the JSON
# template (no model), the code model with the hole's slot left free (no template constraints)
BASELINE_MODES = ("autoregressive", "random", "unconstrained")
MAX_N = 100_000
MAX_CHUNK = 4096
DEFAULT_GENERATOR_SEED = 2026  # `eval sudoku`'s: the published reports' puzzles

_INT, _FLOAT, _BOOL, _PATH = "an integer", "a number", "true or false", "a path"
# option: (kind, lowest, highest)
OPTIONS = {
    "sudoku": {"samples": (_INT, 1, 256), "steps": (_INT, 1, 4096), "chunk": (_INT, 1, MAX_CHUNK),
               "file": (_PATH, None, None), "generator_seed": (_INT, 0, 2**62)},
    "json": {"fillings": (_INT, 1, 1000), "schemas": (_PATH, None, None), "heldout": (_BOOL, None, None),
             "per_collection": (_INT, 0, 10**9), "compile_timeout": (_FLOAT, 0.0, 86400.0)},
    "infill": {"samples": (_INT, 1, 256), "max_hole_tokens": (_INT, 1, 4096), "file": (_PATH, None, None),
               "timeout": (_FLOAT, 0.0, 3600.0)},
}


class SuiteError(DiffreasonError):
    """A suite that cannot run: unknown name, unreadable file, bad entry, a results file of another definition."""


@dataclass(frozen=True)
class Entry:
    """One row of a suite: `n` items of `set` of `task`, evaluated in `mode`.

    sudoku: set a tier (`tasks.sudoku.TIERS`, puzzles from the generator) or, with option `file`, any name for the
    puzzles of that file (one per line or 9-line grids; its first n answerable ones, n 0: all); modes model,
    verified, autoregressive (the baseline checkpoint given to the suite); options samples K (test-time compute:
    `model ×K`), steps (a fixed step budget: `model @S`), chunk (puzzles per batch, default 16), generator_seed.
    json: set a jsonschemabench collection or `all`; modes model (generations of the JSON model), random (random
    fillings of the template: the baseline); n schema files (0: all selected); options fillings (outputs per schema,
    default 1), schemas (the directory), heldout (only schemas the model never trained on), per_collection (at most
    that many per collection), compile_timeout.
    infill: set a HumanEval-infilling set (SingleLineInfilling, MultiLineInfilling) or, with option `file`, any name
    for that task file; modes model (pass@1; top of K with samples K), verified (pass@K), unconstrained (the slot left
    free: parse rate); n tasks spread evenly over the set (0: all); options samples, max_hole_tokens, timeout."""

    task: str
    set: str
    mode: str
    n: int
    options: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The mode as reports name it: `model`, `verified ×4`, `model @24`."""
        label = self.mode
        if self.options.get("samples", 1) > 1:
            label += f" ×{self.options['samples']}"
        if self.options.get("steps"):
            label += f" @{self.options['steps']}"
        return label

    @property
    def key(self) -> tuple[str, str, str]:
        return self.task, self.set, self.label

    @property
    def chunk(self) -> int:
        return self.options.get("chunk", 16) if self.task == "sudoku" else 1

    def to_dict(self) -> dict:
        return {"task": self.task, "set": self.set, "mode": self.mode, "n": self.n, "options": dict(self.options)}


@dataclass
class Suite:
    name: str
    entries: list[Entry]
    description: str = ""


def _quick(baseline: bool) -> Suite:
    sudoku = []
    for tier in ("easy", "hard"):
        sudoku += [Entry("sudoku", tier, "model", 8, {"chunk": 8}),
                   Entry("sudoku", tier, "model", 8, {"samples": 4, "chunk": 8})]
        if baseline:
            sudoku.append(Entry("sudoku", tier, "autoregressive", 8, {"chunk": 8}))
    json_ = [Entry("json", "all", mode, 3, {"heldout": True, "per_collection": 1}) for mode in ("model", "random")]
    infill = [Entry("infill", "SingleLineInfilling", "model", 2), Entry("infill", "MultiLineInfilling", "model", 1)]
    return Suite("quick", sudoku + json_ + infill, "a few minutes on one CPU thread: 8 easy and 8 hard puzzles "
                 "(model, model ×4; autoregressive with --baseline), 3 held-out JSON schemas (model, random "
                 "fillings), 3 infilling tasks (model)")


def _full(baseline: bool) -> Suite:
    entries = []
    for tier in ("easy", "medium", "hard", "extreme", "diabolical"):
        entries += [Entry("sudoku", tier, "model", 100, {"chunk": 64}),
                    Entry("sudoku", tier, "verified", 100, {"chunk": 64}),
                    Entry("sudoku", tier, "model", 100, {"samples": 16, "chunk": 64})]
        if baseline:
            entries.append(Entry("sudoku", tier, "autoregressive", 100, {"chunk": 64}))
    entries += [Entry("json", "all", mode, 0, {"heldout": True, "per_collection": 6}) for mode in ("model", "random")]
    for name in ("SingleLineInfilling", "MultiLineInfilling"):
        entries += [Entry("infill", name, "model", 16), Entry("infill", name, "verified", 16, {"samples": 16}),
                    Entry("infill", name, "unconstrained", 16)]
    return Suite("full", entries, "the published reports' sets: Sudoku tiers easy..diabolical, 100 puzzles each "
                 "(model, verified, model ×16; autoregressive with --baseline); the held-out JSON schemas, 6 per "
                 "collection (model, random fillings); HumanEval single- and multi-line infilling, 16 tasks each "
                 "(model, verified ×16, unconstrained)")


SUITES: dict[str, Callable[[bool], Suite]] = {"quick": _quick, "full": _full}


def named_suite(name: str, baseline: bool) -> Suite:
    """A suite of `SUITES`; `baseline`: whether an autoregressive Sudoku checkpoint is given (its entries need one)."""
    if name not in SUITES:
        raise SuiteError(f"unknown suite {name!r}; the named suites are {', '.join(SUITES)} (or --suite-file FILE)")
    suite = SUITES[name](baseline)
    check_suite(suite, baseline)
    return suite


# ---- suite files ------------------------------------------------------------------------------------------------


def load_suite_file(path: Path, baseline: bool) -> Suite:
    """A suite from a TOML or JSON file: `name` (default: the file's stem), `description`, and `entries`, each a table
    with task, set, mode, n and `options` (see `Entry`). Relative paths in options are read from the file's folder."""
    path = Path(path)
    where = f"suite file {str(path)!r}"
    data = _suite_data(path, where)
    entries = data.get("entries")
    if not isinstance(entries, list) or not entries:
        raise SuiteError(f"{where} has no `entries` (a list of tables with task, set, mode, n, options)")
    suite = Suite(_name_of(data, path, where), [_entry(e, i, where, path.parent) for i, e in enumerate(entries, 1)],
                  str(data.get("description", "")))
    check_suite(suite, baseline, where)
    return suite


def suite_file_name(path: Path) -> str:
    """A suite file's `name` (default: the file's stem): its reports' default folder is evals/reports/suite-NAME."""
    path = Path(path)
    where = f"suite file {str(path)!r}"
    return _name_of(_suite_data(path, where), path, where)


def _name_of(data: dict, path: Path, where: str) -> str:
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not name.strip():
        raise SuiteError(f"{where}: `name` must be a non-empty string")
    return name


def items_of(suite: Suite, where: str) -> list["Items"]:
    """Every entry's items; a file an entry names that cannot be read is one SuiteError naming the entry."""
    out = []
    for i, entry in enumerate(suite.entries, 1):
        try:
            out.append(Items(entry))
        except DiffreasonError as exc:
            raise SuiteError(f"{where}: entry {i}: {exc}") from None
    return out


def _suite_data(path: Path, where: str) -> dict:
    """A suite file's table, its fields checked (not its entries)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SuiteError(f"{where} cannot be read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
        if path.suffix.lower() == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:  # (tomllib.TOMLDecodeError and JSONDecodeError are ValueErrors)
        kind = "TOML" if path.suffix.lower() == ".toml" else "JSON"
        raise SuiteError(f"{where} is not {kind}: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise SuiteError(f"{where} must hold a table with `entries`")
    unknown = sorted(set(data) - {"name", "description", "entries"})
    if unknown:
        raise SuiteError(f"{where}: unknown field {unknown[0]!r} (known: name, description, entries)")
    return data


def _entry(data, i: int, where: str, folder: Path) -> Entry:
    at = f"{where}: entry {i}"
    if not isinstance(data, dict):
        raise SuiteError(f"{at} must be a table with task, set, mode, n (and options)")
    unknown = sorted(set(data) - {"task", "set", "mode", "n", "options"})
    if unknown:
        raise SuiteError(f"{at}: unknown field {unknown[0]!r} (known: task, set, mode, n, options)")
    for key in ("task", "set", "mode", "n"):
        if key not in data:
            raise SuiteError(f"{at} has no `{key}`")
    for key in ("task", "set", "mode"):
        if not isinstance(data[key], str) or not data[key].strip():
            raise SuiteError(f"{at}: `{key}` must be a non-empty string, got {data[key]!r}")
    options = data.get("options", {})
    if not isinstance(options, dict):
        raise SuiteError(f"{at}: `options` must be a table, got {options!r}")
    options = dict(options)
    for key in ("file", "schemas"):  # relative to the suite file
        if isinstance(options.get(key), str) and options[key] and not Path(options[key]).is_absolute():
            options[key] = str((folder / options[key]).resolve())
    entry = Entry(data["task"].strip(), data["set"].strip(), data["mode"].strip(), data["n"], options)
    check_entry(entry, at)
    return entry


def check_entry(entry: Entry, at: str) -> None:
    """One clear error for a field or option the entry's task does not take, or a value out of range."""
    if entry.task not in TASKS:
        raise SuiteError(f"{at}: unknown task {entry.task!r} (known: {', '.join(TASKS)})")
    if entry.mode not in TASKS[entry.task]:
        raise SuiteError(f"{at}: unknown {entry.task} mode {entry.mode!r} (known: {', '.join(TASKS[entry.task])})")
    if isinstance(entry.n, bool) or not isinstance(entry.n, int) or not 0 <= entry.n <= MAX_N:
        raise SuiteError(f"{at}: `n` must be an integer from 0 to {MAX_N}, got {entry.n!r}")
    specs = OPTIONS[entry.task]
    for key, value in entry.options.items():
        if key not in specs:
            raise SuiteError(f"{at}: unknown {entry.task} option {key!r} (known: {', '.join(specs)})")
        kind, lo, hi = specs[key]
        ok = {_INT: isinstance(value, int) and not isinstance(value, bool),
              _FLOAT: isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value),
              _BOOL: isinstance(value, bool), _PATH: isinstance(value, str) and bool(value)}[kind]
        if not ok:
            raise SuiteError(f"{at}: option {key!r} must be {kind}, got {value!r}")
        if kind == _FLOAT and not lo < value <= hi:  # (seconds: none is no time at all, as the CLI's options say)
            raise SuiteError(f"{at}: option {key!r} must lie in ({lo:g}, {hi:g}], got {value!r}")
        if lo is not None and not lo <= value <= hi:
            raise SuiteError(f"{at}: option {key!r} must lie in [{lo!r}, {hi!r}], got {value!r}")
    if entry.task == "sudoku":
        from diffreason.tasks.sudoku import TIERS

        if "file" not in entry.options and entry.set not in TIERS:
            raise SuiteError(f"{at}: sudoku set {entry.set!r} is no tier ({', '.join(TIERS)}); a puzzle file's set "
                             "needs option `file`")
        if "file" not in entry.options and entry.n == 0:
            raise SuiteError(f"{at}: a generated tier needs `n` of at least 1")
        if entry.mode == "autoregressive" and ("samples" in entry.options or "steps" in entry.options):
            raise SuiteError(f"{at}: the autoregressive baseline decodes once, cell by cell: no samples or steps")
    if entry.task == "infill":
        from diffreason.tasks.infill.humaneval import TASK_SETS

        if "file" not in entry.options and entry.set not in TASK_SETS:
            raise SuiteError(f"{at}: infill set {entry.set!r} is none of {', '.join(TASK_SETS)}; another task file's "
                             "set needs option `file`")
        if entry.mode == "unconstrained" and entry.options.get("samples", 1) != 1:
            raise SuiteError(f"{at}: the unconstrained baseline runs one sample per task (no `samples`)")


def check_suite(suite: Suite, baseline: bool, where: str | None = None) -> None:
    where = where or f"suite {suite.name!r}"
    seen = {}
    for i, entry in enumerate(suite.entries, 1):
        check_entry(entry, f"{where}: entry {i}")
        if entry.key in seen:
            raise SuiteError(f"{where}: entries {seen[entry.key]} and {i} are both {' / '.join(entry.key)}")
        seen[entry.key] = i
        if entry.mode == "autoregressive" and not baseline:
            raise SuiteError(f"{where}: entry {i} runs the autoregressive baseline; give its checkpoint with "
                             "--baseline DIR")


def models_used(suite: Suite) -> set[str]:
    """Which checkpoints the suite needs: sudoku, baseline, json, code."""
    used = set()
    for e in suite.entries:
        used.add({"sudoku": "baseline" if e.mode == "autoregressive" else "sudoku", "json": "json",
                  "infill": "code"}[e.task])
    return used


# ---- items ------------------------------------------------------------------------------------------------------


def item_seed(seed: int, task: str, set_name: str, index: int) -> int:
    """The sampler seed of item `index` of a set (< 2**62 + index): what the item's results depend on, with the
    model and the chunk it is batched in, and nothing else."""
    digest = hashlib.sha256(f"suite:{seed}:{task}:{set_name}".encode()).digest()
    return (int.from_bytes(digest[:8], "little") >> 2) + index


_GENERATED: dict[tuple[str, int, int], tuple[str, list[int]]] = {}  # (tier, generator seed, k): (id, puzzle)


class Items:
    """The items of one entry: `len()` of them, `get(k)` (id, payload) each, computed when first asked for (a
    diabolical puzzle takes seconds to generate)."""

    def __init__(self, entry: Entry):
        self.entry = entry
        self._list = None
        self._n = None
        o = entry.options
        if entry.task == "sudoku" and "file" not in o:
            self._n = entry.n
        elif entry.task == "sudoku":
            self._list = _puzzle_file(Path(o["file"]), entry.n)
        elif entry.task == "json":
            self._list = _schema_files(entry)
        else:
            self._list = _infill_tasks(entry)

    def __len__(self) -> int:
        return self._n if self._list is None else len(self._list)

    @property
    def from_files(self) -> bool:
        return self._list is not None

    def get(self, k: int) -> tuple[str, object]:
        if self._list is not None:
            return self._list[k]
        gseed = self.entry.options.get("generator_seed", DEFAULT_GENERATOR_SEED)
        key = (self.entry.set, gseed, k)
        if key not in _GENERATED:  # (shared by the entries of a tier: a diabolical puzzle takes seconds)
            from diffreason.tasks import sudoku

            grid = sudoku.generate(self.entry.set, gseed * 100_003 + k).puzzle  # (= `generate_set`'s puzzle k)
            _GENERATED[key] = (sudoku.to_string(grid), grid)
        return _GENERATED[key]


def _puzzle_file(path: Path, n: int) -> list[tuple[str, list[int]]]:
    from diffreason.tasks import sudoku

    entries, source = sudoku.read_puzzle_input(None, path, option="option `file`")
    counts = sudoku.count_solutions(entries)
    good = [e.cells for i, e in enumerate(entries) if e.error is None and counts.get(i) != 0]
    for line in sudoku.skipped_lines(source, entries):
        print(line, file=sys.stderr)
    if not good:
        raise SuiteError(f"puzzle file {str(path)!r} holds no puzzle that can be answered")
    return [(sudoku.to_string(g), g) for g in (good[:n] if n else good)]


def default_schemas_dir() -> Path:
    from diffreason.tasks.infill.humaneval import SHARED_DIR

    return SHARED_DIR.parent / "jsonschemabench" / "schemas"


def _schema_files(entry: Entry) -> list[tuple[str, Path]]:
    from diffreason.tasks.json_corpus import sample_schema_files

    o = entry.options
    folder = Path(o.get("schemas") or default_schemas_dir())
    if not folder.is_dir():
        raise SuiteError(f"schema directory {str(folder)!r} does not exist (option `schemas`)")
    files = sample_schema_files(folder, o.get("per_collection", 0), [] if entry.set == "all" else [entry.set],
                                o.get("heldout", False))
    files = files[: entry.n] if entry.n else files
    if not files:
        raise SuiteError(f"no schema file of set {entry.set!r} in {str(folder)!r}")
    return [(f.name, f) for f in files]


def _infill_tasks(entry: Entry) -> list[tuple[str, object]]:
    from diffreason.evals.infill_eval import spread
    from diffreason.tasks.infill.humaneval import TaskFileError, default_task_files, load_tasks

    path = Path(entry.options["file"]) if "file" in entry.options else default_task_files()[entry.set]
    try:
        tasks = spread(load_tasks(path), entry.n or None)
    except TaskFileError as exc:
        raise SuiteError(str(exc)) from None
    if not tasks:
        raise SuiteError(f"task file {str(path)!r} holds no task")
    return [(t.task_id, t) for t in tasks]


# ---- results.jsonl ------------------------------------------------------------------------------------------------


def items_digest(items: Items) -> str | None:
    """A digest of what an entry's items are when they come from files (puzzles, schema files' contents, tasks);
    None for generated puzzles, which the entry and the seed define."""
    if not items.from_files:
        return None
    h = hashlib.sha256()
    for item_id, payload in items._list:
        h.update(json.dumps(item_id).encode())
        if isinstance(payload, Path):  # a schema file: its contents
            h.update(hashlib.sha256(payload.read_bytes()).digest())
        elif hasattr(payload, "__dataclass_fields__"):  # an infill task: every field
            h.update(json.dumps(payload.__dict__, sort_keys=True).encode())
        else:
            h.update(json.dumps(payload).encode())
    return h.hexdigest()[:16]


WHOLE_FILE_DIGEST = 64 * 1024 * 1024  # checkpoint files up to this size are digested whole; larger: size and mtime


def model_digest(path: str | Path) -> str:
    """A digest of a checkpoint directory: its small files' contents (config, generation config, tokenizer, weights
    of the project's sizes), the size and modification time of larger ones."""
    h = hashlib.sha256()
    root = Path(path)
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        st = f.stat()
        h.update(str(f.relative_to(root)).encode() + b"\0")
        if st.st_size <= WHOLE_FILE_DIGEST:
            with open(f, "rb") as fh:
                h.update(hashlib.file_digest(fh, "sha256").digest())
        else:
            h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def header(suite: Suite, seed: int, models: dict, command: str, items: list[Items]) -> dict:
    """results.jsonl's first line: what the results are of (`items`: each entry's, for their counts and, for file
    sets, the digest of what they hold; `models` by role, each digested too)."""
    return {"format": FORMAT, "suite": suite.name, "description": suite.description, "seed": seed,
            "models": models, "model_digests": {role: model_digest(p) for role, p in models.items()},
            "entries": [e.to_dict() for e in suite.entries], "counts": [len(i) for i in items],
            "items": [items_digest(i) for i in items], "command": command}


def _differs(old: dict, new: dict) -> str | None:
    """What makes two headers different runs (None: the same definition; the command does not count). A header
    written before digests were recorded is compared without them."""
    for key, what in (("format", "file format"), ("suite", "suite name"), ("entries", "entries"), ("seed", "seed"),
                      ("models", "models"), ("counts", "item counts (a puzzle, schema or task file changed?)"),
                      ("model_digests", "checkpoints"), ("items", "items")):
        if key in ("model_digests", "items") and key not in old:
            continue
        if json.loads(json.dumps(old.get(key))) != json.loads(json.dumps(new.get(key))):
            if key == "items":
                i = next(i for i, (x, y) in enumerate(zip(old[key], new[key])) if x != y)
                return f"the items of entry {i + 1} differ (a puzzle, schema or task file changed?)"
            if key == "model_digests":
                roles = sorted(r for r in new[key] if old[key].get(r) != new[key][r])
                return (f"the {' and '.join(roles)} checkpoint's contents differ (retrained or replaced at the same "
                        "path?)")
            if key == "entries":
                a, b = old.get("entries") or [], new.get("entries") or []
                i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                return f"the entries differ (from entry {i + 1}; {len(a)} there, {len(b)} now)"
            verb = "differ" if what.split(" (")[0].endswith("s") else "differs"
            return f"the {what} {verb} ({json.dumps(old.get(key))} there, {json.dumps(new.get(key))} now)"
    return None


class Results:
    """`<out>/results.jsonl`: the header line, then one line per finished item."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def read(self, repair: bool = False) -> tuple[dict | None, list[dict]]:
        """(header, item lines). A last line without its newline (a write cut off) is dropped — and with `repair`,
        cut from the file too, so that appending goes on after the last whole line."""
        if not self.path.exists():
            return None, []
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            raise SuiteError(f"{str(self.path)!r} cannot be read: {exc.strerror or exc}") from None
        whole = data[: data.rfind(b"\n") + 1]
        if repair and len(whole) != len(data):
            with open(self.path, "r+b") as f:
                f.truncate(len(whole))
        lines = []
        for i, raw in enumerate(whole.decode("utf-8", "replace").split("\n"), 1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                raise SuiteError(f"{str(self.path)!r} line {i} is not JSON; pass --restart to start the suite "
                                 "afresh") from None
            if lines and not (isinstance(line, dict) and all(k in line for k in RECORD_KEYS)
                              and isinstance(line["item"], int)):
                raise SuiteError(f"{str(self.path)!r} line {i} is not a result record (no "
                                 f"{', '.join(RECORD_KEYS)}); pass --restart to start the suite afresh") from None
            lines.append(line)
        if not lines:
            return None, []
        if not isinstance(lines[0], dict) or not isinstance(lines[0].get("header"), dict):
            raise SuiteError(f"{str(self.path)!r} has no suite header on its first line; pass --restart to start the "
                             "suite afresh, or another --out")
        return lines[0]["header"], lines[1:]

    def lock(self) -> None:
        """Hold the results file for this process (released when it exits): a second suite writing to the same
        --out at once would append every item twice."""
        import fcntl

        if getattr(self, "_lock", None) is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.path.parent / ".results.lock", "a")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            self._lock = None
            raise SuiteError(f"another suite is writing to {str(self.path.parent)!r} now; wait for it, or give "
                             "another --out") from None

    def start(self, new: dict, restart: bool) -> list[dict]:
        """The item lines to continue from (none with `restart` or a new file); a file of another definition is an
        error unless `restart`. Locks the file for this process first (`lock`)."""
        self.lock()
        old, lines = (None, []) if restart else self.read(repair=True)
        if old is not None:
            why = _differs(old, new)
            if why:
                raise SuiteError(f"{str(self.path)!r} holds results of another suite definition: {why}; pass "
                                 "--restart to discard them, or another --out")
            return lines
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({"header": new}) + "\n")
        return []

    def append(self, lines: list[dict]) -> None:
        """Lines in one write, flushed to disk: a chunk is in the file whole or not at all."""
        if not lines:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write("".join(json.dumps(line) + "\n" for line in lines))
            f.flush()
            os.fsync(f.fileno())


# ---- running ------------------------------------------------------------------------------------------------------


class Models:
    """The checkpoints, loaded when an entry first needs one: `paths` by role (sudoku, baseline, json, code)."""

    def __init__(self, paths: dict, device: str):
        self.paths, self.device = paths, device
        self._loaded: dict = {}

    def get(self, role: str):
        if role not in self._loaded:
            if role == "baseline":
                from diffreason.tasks.sudoku_ar import load_ar_model

                model = load_ar_model(self.paths[role])
            else:
                from diffreason.model import load_model

                model = load_model(self.paths[role])
                if role == "sudoku":
                    from diffreason.tasks.sudoku import check_vocabulary

                    check_vocabulary(model)
            model.model.to(self.device)
            self._loaded[role] = model
        return self._loaded[role]

    def searchers(self):
        """The infill searchers over the code model: constrained, and with the slot left free (one engine)."""
        if "searchers" not in self._loaded:
            from diffreason.tasks.infill.search import Searcher

            searcher = Searcher(self.get("code"))
            self._loaded["searchers"] = (searcher, Searcher(searcher.lm, engine=searcher.engine, constrain=False))
        return self._loaded["searchers"]


def _line(entry: Entry, k: int, item_id: str, **fields) -> dict:
    return {"task": entry.task, "set": entry.set, "mode": entry.label, "item": k, "id": item_id, **fields}


def eval_chunk(entry: Entry, items: Items, ks: list[int], seed: int, models: Models) -> list[dict]:
    """The result lines of items `ks` (one chunk: consecutive indices from a multiple of the chunk size)."""
    if entry.task == "sudoku":
        return _sudoku_chunk(entry, items, ks, seed, models)
    if entry.task == "json":
        return [_json_item(entry, items, k, seed, models) for k in ks]
    return [_infill_item(entry, items, k, seed, models) for k in ks]


def _sudoku_chunk(entry: Entry, items: Items, ks: list[int], seed: int, models: Models) -> list[dict]:
    from diffreason.tasks import sudoku

    got = [items.get(k) for k in ks]
    grids = [g for _, g in got]
    model = models.get("baseline" if entry.mode == "autoregressive" else "sudoku")  # (loaded before the clock)
    t = time.perf_counter()
    if entry.mode == "autoregressive":
        from diffreason.tasks.sudoku_ar import solve_ar

        results = solve_ar(model, grids, batch_size=len(grids))
        budget = sudoku.CELLS
    else:
        lm = model
        steps = entry.options.get("steps")
        # puzzle p of the chunk runs with seed `seed + p` (`solve`): here item_seed of its own index
        results = sudoku.solve(lm, grids, mode=entry.mode, seed=item_seed(seed, entry.task, entry.set, ks[0]),
                               max_steps=steps, batch_size=len(grids), samples=entry.options.get("samples", 1))
        budget = steps or lm.sampler_config.max_denoising_steps
    seconds = (time.perf_counter() - t) / len(grids)
    return [_line(entry, k, item_id, solved=r.solved, valid=None, steps=r.steps, seconds=seconds,
                  record={"solution": r.solution, "samples": r.samples, "voted": r.voted, "budget": budget})
            for k, (item_id, _), r in zip(ks, got, results)]


def _json_item(entry: Entry, items: Items, k: int, seed: int, models: Models) -> dict:
    from diffreason.evals.json_eval import run_eval

    name, path = items.get(k)
    lm = models.get("json")
    fillings = entry.options.get("fillings", 1)
    t = time.perf_counter()
    rep = run_eval([path], lm.tokenizer, lm if entry.mode == "model" else None, fillings,
                   seed=item_seed(seed, entry.task, entry.set, k),
                   compile_timeout=entry.options.get("compile_timeout", 30.0), freeze=False)  # (`run` froze)
    seconds = time.perf_counter() - t
    total = rep["total"]
    compiled = bool(total.get("compiled"))
    valid, invalid = total.get("valid", 0), total.get("invalid", 0)
    record = {"compiled": compiled, "valid": valid, "invalid": invalid, "unjudged": total.get("unjudged", 0),
              "reason": rep["unsupported_top"][0][0] if rep["unsupported_top"] else None,
              "plausibility": rep["plausibility_mean"] if entry.mode == "model"
              else rep["plausibility_random_fillings_mean"],
              "problems": [
                  *(f"{x['file']}: {x['error']}" for x in rep["bad_files"]),
                  *(f"{x['schema']}: compile crashed: {x['error']}" for x in rep["crashes"]),
                  *(f"{x['schema']}: invalid output: {x['error']}" for x in rep["invalid_outputs"])],
              # compiled, but its template needs more positions than the model has: no output, said so
              "not_run": [f"{x['schema']}: {x['error']}" for x in rep.get("too_long_for_the_model", [])]}
    steps = rep["steps_mean"]
    return _line(entry, k, name, solved=None, valid=(invalid == 0) if valid + invalid else None,
                 steps=None if steps is None else round(steps, 2), seconds=seconds, record=record)


def _infill_item(entry: Entry, items: Items, k: int, seed: int, models: Models) -> dict:
    from diffreason.evals.infill_eval import eval_task
    from diffreason.tasks.infill.humaneval import single_line_set

    task_id, task = items.get(k)
    searcher, free = models.searchers()
    samples = entry.options.get("samples", 1)
    single = single_line_set([items.get(i)[1] for i in range(len(items))])
    t = time.perf_counter()
    try:
        rec = eval_task(task, single, searcher, free if entry.mode == "unconstrained" else None, samples=samples,
                        max_hole_tokens=entry.options.get("max_hole_tokens", 64),
                        seed=item_seed(seed, entry.task, entry.set, k),
                        modes=("verified",) if entry.mode == "verified" else ("model",),
                        timeout=entry.options.get("timeout", 10.0), isolation="auto")
    except DiffreasonError as exc:  # (that task alone: left out of every figure, said in the report; as `eval infill`)
        return _line(entry, k, task_id, solved=None, valid=None, steps=None, seconds=time.perf_counter() - t,
                     record={"problems": [f"{task_id}: not evaluated: {' '.join(str(exc).split())}"]})
    seconds = time.perf_counter() - t
    tested = rec["tested"]
    if entry.mode == "unconstrained":
        solved, valid, steps = None, rec["parses_free"][0], rec["samples"][0]["free"]["steps"]
    elif entry.mode == "verified":
        solved = rec["first_verified_pass"] is not None if tested else None
        valid, steps = rec["verified_returned_parses"], sum(rec["steps_all"])
    elif samples == 1:
        solved, valid, steps = rec.get("pass_model") if tested else None, rec["parses_model"][0], rec["steps"]
    else:  # the top-scoring of the K: what `infill(mode="model", samples=K)` returns
        top = min(range(samples), key=lambda j: (-rec["samples"][j]["model"]["score"], j))
        solved = rec.get("pass_model_top_k") if tested else None
        valid, steps = rec["parses_model"][top], sum(rec["steps_all"])
    rec["budget"] = searcher.engine.sampler.config.max_denoising_steps
    return _line(entry, k, task_id, solved=solved, valid=valid, steps=steps, seconds=seconds, record=rec)


def run(suite: Suite, seed: int, results: Results, done_lines: list[dict], models: Models,
        progress: Callable[[Entry, int, int], Callable[[int], None]] | None = None,
        items: list[Items] | None = None) -> int:
    """Every item of the suite not in `done_lines`, chunk by chunk, each chunk's lines appended to `results` as it
    finishes; `progress(entry, total, done)` gives the advance(n) of that entry's bar; `items`: each entry's `Items`
    (made here when not given). Returns the items run."""
    done = {(line["task"], line["set"], line["mode"], line["item"]): line.get("id") for line in done_lines}
    ran = 0
    # what `json_eval.run_eval` does for a run over many files, once for the whole suite: the objects of the imports
    # and models leave the collector's generations (a full collection per schema was 0.3 s)
    gc.collect()
    gc.freeze()
    try:
        for entry, its in zip(suite.entries, items or [Items(e) for e in suite.entries]):
            n = len(its)
            have = {k for k in range(n) if (*entry.key, k) in done}
            # (the header's digests say it already; this is the last word. Generated puzzles are what the entry and
            # seed make them, and are not generated again to be compared.)
            for k in sorted(have) if its.from_files else ():
                if done[(*entry.key, k)] != its.get(k)[0]:
                    raise SuiteError(f"{str(results.path)!r} holds another item {k} of {entry.task} {entry.set} "
                                     f"{entry.label} ({done[(*entry.key, k)]!r}, now {its.get(k)[0]!r}); pass "
                                     "--restart to discard the results, or another --out")
            advance = progress(entry, n, len(have)) if progress else None
            for start in range(0, n, entry.chunk):
                ks = list(range(start, min(n, start + entry.chunk)))
                if all(k in have for k in ks):
                    continue
                lines = eval_chunk(entry, its, ks, seed, models)  # (the whole chunk: its batch is always the same)
                results.append([line for line in lines if line["item"] not in have])
                ran += sum(1 for k in ks if k not in have)
                if advance:
                    advance(sum(1 for k in ks if k not in have))
    finally:
        gc.unfreeze()
    return ran


# ---- the report ---------------------------------------------------------------------------------------------------


def summarise(entry: Entry, count: int, lines: list[dict]) -> dict:
    """One row: the entry's items done, solved / valid rates, steps (median, p90, the solved-within-s-steps curve),
    seconds per item and items per second, and the task's own summary (`sudoku_eval.mode_entry`,
    `infill_eval.summarise`, JSON coverage)."""
    from diffreason.evals.infill_eval import percentile, rate

    lines = sorted(lines, key=lambda x: x["item"])
    steps = [x["steps"] for x in lines if x["steps"] is not None]
    seconds = sum(x["seconds"] for x in lines)
    # the curve of the headline verdict: solved where the task has one (Sudoku, tested infill), else valid
    verdict = "solved" if any(x["solved"] is not None for x in lines) else "valid"
    judged = [x for x in lines if x[verdict] is not None and x["steps"] is not None]
    top = max(steps, default=0)
    row = {
        "task": entry.task, "set": entry.set, "mode": entry.label, "baseline": entry.mode in BASELINE_MODES,
        "n": count, "done": len(lines),
        "solved_rate": rate(x["solved"] for x in lines), "valid_rate": rate(x["valid"] for x in lines),
        "steps_mean": round(statistics.mean(steps), 2) if steps else None,
        "steps_median": statistics.median(steps) if steps else None,
        "steps_p90": percentile(steps, 0.9),
        "curve": verdict,
        # fraction of the judged items with that verdict within s steps, s = 1 .. the most any item took
        "within_steps": [round(sum(1 for x in judged if x[verdict] and x["steps"] <= s) / len(judged), 4)
                         for s in range(1, int(math.ceil(top)) + 1)] if judged else [],
        "seconds": round(seconds, 3),  # wall time of the items (their share of their chunk's)
        "seconds_per_item": round(seconds / len(lines), 4) if lines else None,
        "items_per_second": round(len(lines) / seconds, 3) if seconds > 0 else None,
    }
    if not lines:
        return row
    if entry.task == "sudoku":
        from diffreason.evals.sudoku_eval import mode_entry
        from diffreason.tasks.sudoku import SolveResult

        results = [SolveResult(puzzle=x["id"], solution=x["record"]["solution"], solved=x["solved"],
                               steps=x["steps"], mode=x["mode"], seconds=x["seconds"], samples=x["record"]["samples"],
                               voted=x["record"]["voted"]) for x in lines]
        own = lines[0]["record"]["budget"]
        m = mode_entry(results, seconds, own)
        row["sudoku"] = {k: m[k] for k in ("unsolved_ran_out", "unsolved_stopped", "voted", "chains_mean",
                                           "chains_max")}
        if entry.mode == "autoregressive" or m["chains_max"] > 1:  # (it writes every cell: it never runs out of
            # steps; K chains: a miss is voted, not one chain's end — 0 % of each read as if none missed: QA)
            row["sudoku"].update(unsolved_ran_out=None, unsolved_stopped=None)
        row["budget"] = own
    elif entry.task == "json":
        recs = [x["record"] for x in lines]
        outputs = sum(r["valid"] + r["invalid"] for r in recs)
        plaus = [r["plausibility"] for r in recs if r.get("plausibility") is not None]
        row["json"] = {"compiled_rate": rate(r["compiled"] for r in recs),
                       "outputs": outputs, "outputs_valid_rate": round(sum(r["valid"] for r in recs) / outputs, 4)
                       if outputs else None, "unjudged": sum(r["unjudged"] for r in recs),
                       "plausibility_mean": round(statistics.mean(plaus), 4) if plaus else None,
                       "problems": [p for r in recs for p in r["problems"]],
                       "not_run": [p for r in recs for p in r.get("not_run", [])]}
    else:
        from diffreason.evals.infill_eval import summarise as infill_summary

        modes = ["verified"] if entry.mode == "verified" else ["model"]
        problems = [p for x in lines for p in x["record"].get("problems", [])]
        recs = [x["record"] for x in lines if "problems" not in x["record"]]
        if not recs:
            s = {}
        elif entry.mode == "unconstrained":  # (its runs with the slot free are the baseline's: the rates of those)
            s = {"parse_rate": rate(p for r in recs for p in r["parses_free"]),
                 "parse_rate_constrained_same_seeds": rate(p for r in recs for p in r["parses_same_seeds"])}
        else:
            s = infill_summary(recs, entry.options.get("samples", 1), modes, recs[0]["budget"])
            s = {k: v for k, v in s.items() if k not in ("passed_within_steps", "parsed_within_steps",
                                                         "model_top_of_k", "pass_at_k_curve")}
        row["infill"] = {**s, "problems": problems}
    return row


def build_report(head: dict, lines: list[dict]) -> dict:
    """suite.json: the header's run, a row per entry, and each model row beside its set's baseline row."""
    entries = [Entry(e["task"], e["set"], e["mode"], e["n"], e.get("options", {})) for e in head["entries"]]
    by_key: dict = {}
    for line in lines:
        by_key.setdefault((line["task"], line["set"], line["mode"]), {})[line["item"]] = line  # (last one counts)
    rows = [summarise(e, count, list(by_key.get(e.key, {}).values())) for e, count in zip(entries, head["counts"])]
    # the items of each entry, and those it has a verdict on (a JSON schema too long for the model is not run: its
    # rates leave it out, so two entries are compared over the same verdicts only: QA, 2026-12-07)
    items = [(sorted((x["item"], x["id"]) for x in by_key.get(e.key, {}).values()),
              sorted((x["item"], x["id"]) for x in by_key.get(e.key, {}).values()
                     if x["solved"] is not None or x["valid"] is not None)) for e in entries]
    comparisons = []
    for row, mine in zip(rows, items):
        if row["baseline"]:
            continue
        for base, theirs in zip(rows, items):
            if base["baseline"] and (base["task"], base["set"]) == (row["task"], row["set"]):
                comparisons.append({
                    "task": row["task"], "set": row["set"], "mode": row["mode"], "baseline": base["mode"],
                    # (a set's name does not fix its items: another generator seed, file or n is other puzzles)
                    "same_items": mine == theirs,
                    **{f"{key}": [row[key], base[key]] for key in ("solved_rate", "valid_rate", "steps_median",
                                                                 "seconds_per_item", "items_per_second")}})
    return {"suite": head["suite"], "description": head.get("description", ""), "seed": head["seed"],
            "models": head["models"], "command": head.get("command", ""),
            "items": sum(r["done"] for r in rows), "items_planned": sum(r["n"] for r in rows),
            "seconds": round(sum(r["seconds"] for r in rows), 1),
            "complete": all(r["done"] == r["n"] for r in rows), "rows": rows, "comparisons": comparisons}


def _display(path: str) -> str:
    """A model's path as the report names it: from the working directory where it lies below it."""
    try:
        return str(Path(path).relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def _num(x, fmt: str = "{:g}") -> str:
    return "—" if x is None else fmt.format(x)


def write_report(out_dir: Path, head: dict, lines: list[dict]) -> list[Path]:
    from diffreason.evals.infill_eval import pct

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = build_report(head, lines)
    json_path = out_dir / "suite.json"
    json_path.write_text(json.dumps(report, indent=1))
    md = [
        f"# Eval suite: {report['suite']}",
        "",
        f"Command: `{report['command']}`  ",
        f"Seed {report['seed']}; models: " + ", ".join(f"{k} `{_display(v)}`" for k, v in report["models"].items())
        + ".  ",
        *([f"{report['description'][0].upper()}{report['description'][1:]}.  "] if report["description"] else []),
        f"{report['items']} items in {report['seconds']:.0f} s of evaluation (model loading and puzzle generation "
        "apart).",
        "",
        "Per task, set and mode: items done (of n), `solved` (Sudoku: the verifier accepts the grid; infill: the "
        "task's tests pass — model mode sample 0, or the top-scoring of K with ×K; verified ×K: pass@K), `valid` "
        "(JSON: every output validates against the schema, over the schemas compiled; infill: the code parses), "
        "denoising steps (Sudoku: all chains; JSON: per object, all canvases; infill: sample 0's, or all "
        "candidates' with ×K and verified; the autoregressive baseline: forward passes), wall seconds per item and "
        "items per second on this run's machine. Baselines: `autoregressive` (the causal LM given with --baseline, "
        "`train sudoku-ar` builds it from a diffusion preset's sizes; `eval sudoku --baseline` compares the two), "
        "`random` (random fillings of the JSON template: no model), `unconstrained` (the code model with "
        "the hole's slot left free).",
        "",
        "| task | set | mode | items | solved | valid | median steps | p90 steps | mean steps | s / item | items/s |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["rows"]:
        items = f"{r['done']}" + (f" / {r['n']}" if r["done"] != r["n"] else "")
        md.append(f"| {r['task']} | {r['set']} | {r['mode']}{' (baseline)' if r['baseline'] else ''} | {items} | "
                  f"{pct(r['solved_rate'])} | {pct(r['valid_rate'])} | {_num(r['steps_median'])} | "
                  f"{_num(r['steps_p90'])} | {_num(r['steps_mean'], '{:.1f}')} | "
                  f"{_num(r['seconds_per_item'], '{:.2f}')} | {_num(r['items_per_second'], '{:.2f}')} |")
    if report["comparisons"]:
        md += ["", "Model against baseline (model / baseline):", "",
               "| task | set | mode | baseline | solved | valid | median steps | s / item | same items |",
               "|---|---|---|---|---:|---:|---:|---:|---|"]
        for c in report["comparisons"]:
            md.append(f"| {c['task']} | {c['set']} | {c['mode']} | {c['baseline']} | "
                      f"{pct(c['solved_rate'][0])} / {pct(c['solved_rate'][1])} | "
                      f"{pct(c['valid_rate'][0])} / {pct(c['valid_rate'][1])} | "
                      f"{_num(c['steps_median'][0])} / {_num(c['steps_median'][1])} | "
                      f"{_num(c['seconds_per_item'][0], '{:.2f}')} / {_num(c['seconds_per_item'][1], '{:.2f}')} | "
                      + ("yes |" if c["same_items"] else "**no: not comparable** |"))
    extra = []
    for r in report["rows"]:
        if "sudoku" in r and r["done"] and r["baseline"]:
            extra.append(f"- sudoku {r['set']} {r['mode']}: greedy, one cell per forward pass")
        elif "sudoku" in r and r["done"]:
            s = r["sudoku"]
            ends = (f"unsolved: out of steps {pct(s['unsolved_ran_out'])}, stopped early "
                    f"{pct(s['unsolved_stopped'])}; " if s["unsolved_ran_out"] is not None else "")
            extra.append(f"- sudoku {r['set']} {r['mode']}: budget {r['budget']} steps; {ends}chains mean "
                         f"{s['chains_mean']:.2f}, voted {pct(s['voted'])}")
        elif "json" in r:
            j = r["json"]
            extra.append(f"- json {r['set']} {r['mode']}: compiled {pct(j['compiled_rate'])}, {j['outputs']} "
                         f"outputs, {pct(j['outputs_valid_rate'])} valid, {j['unjudged']} unjudged; plausibility "
                         f"{_num(j['plausibility_mean'], '{:.2f}')}" + (f"; problems: {len(j['problems'])}"
                                                                        if j["problems"] else "")
                         + (f"; not run (too long for the model): {len(j['not_run'])}" if j.get("not_run") else ""))
        elif "infill" in r:
            i = r["infill"]
            parts = [f"{label} {pct(i[key])}" for key, label in (
                ("pass_at_1", "pass@1"), ("model_top_k", "top of K"),
                ("parse_rate", "parses (every sample, model mode)"),
                ("parse_rate_constrained_same_seeds", "constrained on the same seeds"),
                ("verified_returned_parse_rate", "verified answers (code that parses)"),
                ("exact_match", "exact (model mode's sample 0)"), ("exact_match_lines", "exact lines"))
                if i.get(key) is not None]
            if isinstance(i.get("pass_at_k"), dict):
                parts.append("pass@k " + ", ".join(f"{k}: {pct(v)}" for k, v in i["pass_at_k"].items()))
            if i.get("sandbox_seconds_per_task") is not None:
                parts.append(f"sandbox {i['sandbox_seconds_per_task']:.2f} s / task")
            extra.append(f"- infill {r['set']} {r['mode']}: " + (", ".join(parts) or "no item evaluated (see the "
                                                                                   "problems below)"))
    if extra:
        md += ["", "Per task:", "", *extra]
    problems = [p for r in report["rows"] for task in ("json", "infill") for p in r.get(task, {}).get("problems", [])]
    if problems:
        md += ["", "Problems (items not evaluated, or bugs: a compile must fail cleanly, an output must validate):",
               "",
               *[f"- {' '.join(p.split())[:300]}" for p in problems[:20]]]
    not_run = [p for r in report["rows"] for p in r.get("json", {}).get("not_run", [])]
    if not_run:
        md += ["", "Not run (compiled, but the template needs more positions than the model has; no output, so "
                   "neither valid nor invalid):", "", *[f"- {' '.join(p.split())[:300]}" for p in not_run[:20]]]
    if not report["complete"]:
        md += ["", f"Incomplete: {report['items']} items done; run the command again to continue."]
    md += ["", "![solved vs steps per task](suite.png)", ""]
    md_path = out_dir / "suite.md"
    md_path.write_text("\n".join(md))
    png_path = out_dir / "suite.png"
    _plot(report, png_path)
    return [json_path, md_path, png_path]


def _plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(r["task"] for r in report["rows"]))
    fig, axes = plt.subplots(1, max(1, len(tasks)), figsize=(5.5 * max(1, len(tasks)), 4.2), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        verdicts = set()
        for r in report["rows"]:
            if r["task"] != task or not r["within_steps"]:
                continue
            verdicts.add(r["curve"])
            curve = r["within_steps"]
            ax.plot(range(1, len(curve) + 1), [100 * v for v in curve], linestyle="--" if r["baseline"] else "-",
                    label=f"{r['set']} {r['mode']}")
        ax.set_title(f"{task}: {' / '.join(sorted(verdicts)) or 'no steps'} within s steps")
        ax.set_xlabel("denoising steps (baselines: forward passes)")
        ax.set_ylabel("items (%)")
        ax.set_ylim(-2, 102)
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
