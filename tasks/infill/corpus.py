"""Training data for the code infilling model: Python functions from the code on this machine, with holes.

Sources (offline): the standard library (`sysconfig.get_paths()["stdlib"]`, without its test suites and its own
site-packages) and the installed packages' sources in the interpreter's site-packages — read as files, decoded as
UTF-8 (files that are not are skipped), parsed with `ast`. Each function or method (decorators included, dedented to
the top level) of 2 to `MAX_LINES` lines is a document.

Kept out of training:
- HumanEval: every function whose name is one of HumanEval's entry points, or whose normalised body (stripped lines,
  no blank or comment lines, inner whitespace collapsed) contains the normalised body of one of HumanEval's canonical
  solutions as a contiguous line sequence. The solutions are rebuilt from the infilling files (prompt + canonical
  solution + suffix) — those files are evaluation data, read here only to build this filter.
- Whole packages held out for validation: `HELDOUT_PACKAGES` (a few stdlib and a few site-packages top-level names).

Holes (`make_example`), drawn per example: a whole line (with its indentation and newline, as HumanEval's
single-line infilling cuts them), a statement's body (multi-line block; a function's body after its docstring
included), a run of 2-8 whole lines (HumanEval's multi-line infilling), a random character span (up to ~80 characters,
within or across lines), or rarely an empty hole at a line boundary. The hole must fit the largest slot; the slot's
length is drawn from `SLOT_LENGTHS` (those at least as long as the hole), so that the model sees slots of every size
with their tails of pads. Each example is laid out by `infill_layout` (tasks/infill/layout.py), as inference lays
it out.

`CodeStream` yields `SFTBatch`es (only slot positions corruptible: the suffix's fixed tokens stay clean and are not in
the loss), resumable by `state_dict` / `load_state_dict` (its RNG and its noise generator).
"""

from __future__ import annotations

import ast
import hashlib
import random
import re
import stat
import sysconfig
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from diffreason.errors import DiffreasonError
from diffreason.tasks.infill.layout import InfillLayout, encode, infill_layout

CANVAS = 128
PROMPT_TOKENS = 128
SLOT_LENGTHS = (16, 32, 48, 64)
DEFAULT_SLOT = 48  # a slot length for inference when the hole's length is unknown
VOCAB_SIZE = 4096
MAX_LINES = 60
MAX_FUNCTION_CHARS = 4000
MAX_FILE_BYTES = 300_000
FILES_PER_PACKAGE = 40  # site-packages: at most this many files per top-level package (a stable sample)
MODEL_PRESET = dict(
    hidden_size=256, intermediate_size=384, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
    head_dim=64, global_head_dim=64, sliding_window=64, num_experts=4, top_k_experts=2, moe_intermediate_size=96,
    canvas_length=CANVAS,
)
PRESETS = {
    "code-small": MODEL_PRESET,  # the shipped model (diffreason/weights/code-small): 4.5M parameters, ~18 MB
    "code-tiny": dict(  # for tests: the same canvas, the smallest shapes
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
        head_dim=16, global_head_dim=16, sliding_window=16, num_experts=2, top_k_experts=1, moe_intermediate_size=16,
        canvas_length=CANVAS,
    ),
}
HELDOUT_PACKAGES = frozenset({
    # standard library
    "json", "email", "csv", "textwrap", "fractions", "statistics",
    # site-packages
    "rich", "click", "jsonschema", "yaml",
})
SKIP_DIRS = frozenset({"test", "tests", "idle_test", "__pycache__", "site-packages", "dist-packages", "testing"})
HOLE_KINDS = (("line", 0.32), ("block", 0.25), ("lines", 0.15), ("span", 0.25), ("empty", 0.03))


@dataclass(frozen=True)
class Function:
    package: str  # the top-level package (or module) it comes from
    path: str  # the file, relative to its source root
    name: str
    source: str  # dedented, ending with a newline


@dataclass
class Corpus:
    train: list[Function]
    heldout: list[Function]
    stats: dict = field(default_factory=dict)


def default_sources() -> list[Path]:
    """The standard library and this interpreter's site-packages (purelib)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    purelib = Path(sysconfig.get_paths()["purelib"])
    return [stdlib] + ([purelib] if purelib != stdlib and purelib.is_dir() else [])


def package_of(path: Path, root: Path) -> str:
    first = path.relative_to(root).parts[0]
    return first[:-3] if first.endswith(".py") else first


def _stable(s: str) -> str:
    return hashlib.sha1(s.encode()).hexdigest()


def source_files(roots: Iterable[Path], files_per_package: int = FILES_PER_PACKAGE,
                 max_files: int = 0) -> list[tuple[Path, Path]]:
    """(root, file) pairs of the Python files under `roots`, skipping test suites, caches and nested site-packages;
    under a root that is an installed environment (a folder named site-packages or dist-packages: hundreds of
    packages, each as big as it likes) at most `files_per_package` files per top-level package, a stable sample, and
    none of its private top-level modules; every other root (the standard library, a folder of your own) read whole;
    at most `max_files` in all (0: no limit), also a stable sample."""
    out = []
    for root in roots:
        root = Path(root)
        installed = root.name in ("site-packages", "dist-packages")
        by_package: dict[str, list[Path]] = {}
        for f in sorted(root.rglob("*.py")):
            rel = f.relative_to(root).parts
            if any(p in SKIP_DIRS or p.endswith((".dist-info", ".egg-info")) for p in rel[:-1]):
                continue
            if installed and len(rel) == 1 and rel[0].startswith(("_", ".")):
                continue  # private helper modules of site-packages (editable-install finders, ...)
            by_package.setdefault(package_of(f, root), []).append(f)
        for files in by_package.values():
            if installed and files_per_package:
                files = sorted(files, key=lambda f: _stable(str(f.relative_to(root))))[:files_per_package]
            out += [(root, f) for f in files]
    if max_files and len(out) > max_files:
        out = sorted(out, key=lambda rf: _stable(str(rf[1].relative_to(rf[0]))))[:max_files]
    return out


def normalised_lines(source: str) -> list[str]:
    """Stripped, whitespace-collapsed lines without blank or comment-only lines."""
    out = []
    for line in source.splitlines():
        s = " ".join(line.split())
        if s and not s.startswith("#"):
            out.append(s)
    return out


def _body_source(fn: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> str:
    """A function's body after its docstring, as source lines."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str) and len(body) > 1:
        body = body[1:]
    return "\n".join(lines[body[0].lineno - 1: body[-1].end_lineno])


@dataclass(frozen=True)
class HumanEvalFilter:
    entry_points: frozenset[str]
    solutions: tuple[tuple[str, ...], ...]  # normalised canonical bodies

    @classmethod
    def from_files(cls, files: Iterable[str | Path]) -> "HumanEvalFilter":
        from diffreason.tasks.infill.humaneval import load_tasks

        names, programs = set(), {}
        for f in files:
            for t in load_tasks(f):
                names.add(t.entry_point)
                base = re.sub(r"^\w+Infilling/", "", t.task_id).split("/L")[0]
                base = "/".join(base.split("/")[:2])  # HumanEval/N
                programs.setdefault(base, (t.entry_point, t.prompt + t.canonical_solution + t.suffix))
        solutions = set()
        for entry, program in programs.values():
            try:
                tree = ast.parse(program)
            except SyntaxError:
                continue
            lines = program.splitlines()
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry:
                    body = tuple(normalised_lines(_body_source(node, lines)))
                    if body:
                        solutions.add(body)
        return cls(frozenset(names), tuple(sorted(solutions)))

    def excludes(self, name: str, body: list[str]) -> bool:
        if name in self.entry_points:
            return True
        present = set(body)
        text = "\n" + "\n".join(body) + "\n"
        return any(sol[0] in present and ("\n" + "\n".join(sol) + "\n") in text for sol in self.solutions)


def default_humaneval_filter() -> HumanEvalFilter:
    from diffreason.tasks.infill.humaneval import default_task_files

    files = [f for f in default_task_files().values() if f.is_file()]
    if not files:
        raise DiffreasonError("the HumanEval-infilling files (../shared/humaneval_infilling) are missing: they are "
                              "needed to keep HumanEval's functions out of training")
    return HumanEvalFilter.from_files(files)


def functions_of(text: str, package: str, path: str) -> list[tuple[Function, list[str]]]:
    """The functions and methods of one file with their normalised bodies (a file that does not parse: none)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    lines = text.splitlines()
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        n = node.end_lineno - start + 1
        if not 2 <= n <= MAX_LINES:
            continue
        source = textwrap.dedent("\n".join(lines[start - 1: node.end_lineno])) + "\n"
        if len(source) > MAX_FUNCTION_CHARS or "\t" in source[:1]:
            continue
        out.append((Function(package, path, node.name, source), normalised_lines(_body_source(node, lines))))
    return out


def build_corpus(roots: Iterable[str | Path] | None = None, humaneval: HumanEvalFilter | None = None,
                 heldout_packages: Iterable[str] = HELDOUT_PACKAGES, files_per_package: int = FILES_PER_PACKAGE,
                 max_files: int = 0) -> Corpus:
    """The training and held-out functions of `roots` (default: the standard library and site-packages)."""
    roots = [Path(r) for r in (roots if roots is not None else default_sources())]
    humaneval = humaneval if humaneval is not None else default_humaneval_filter()
    heldout_packages = frozenset(heldout_packages)
    train, heldout, seen = [], [], set()
    stats = dict(files=0, unreadable=0, functions=0, duplicates=0, humaneval_name=0, humaneval_body=0,
                 heldout_packages=sorted(heldout_packages))
    for root, f in source_files(roots, files_per_package, max_files):
        try:
            if not stat.S_ISREG(f.stat().st_mode) or f.stat().st_size > MAX_FILE_BYTES:
                continue  # (a pipe or device named *.py would block the read or never end it)
            with open(f, "rb") as handle:  # (and a file that grows past the check is read no further)
                data = handle.read(MAX_FILE_BYTES + 1)
            if len(data) > MAX_FILE_BYTES:
                continue
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            stats["unreadable"] += 1
            continue
        stats["files"] += 1
        package = package_of(f, root)
        for fn, body in functions_of(text, package, str(f.relative_to(root))):
            key = _stable(fn.source)
            if key in seen:
                stats["duplicates"] += 1
                continue
            seen.add(key)
            if fn.name in humaneval.entry_points:
                stats["humaneval_name"] += 1
                continue
            if humaneval.excludes(fn.name, body):
                stats["humaneval_body"] += 1
                continue
            stats["functions"] += 1
            (heldout if package in heldout_packages else train).append(fn)
    stats["train_functions"], stats["heldout_functions"] = len(train), len(heldout)
    stats["heldout_found"] = sorted({fn.package for fn in heldout})
    if not train:
        raise DiffreasonError(f"no training functions under {', '.join(map(str, roots))}")
    return Corpus(train, heldout, stats)


# -- holes --------------------------------------------------------------------------------------------------------


def _line_starts(source: str) -> list[int]:
    starts, pos = [], 0
    for line in source.splitlines(keepends=True):
        starts.append(pos)
        pos += len(line)
    starts.append(pos)
    return starts


def _draw_hole(fn: Function, rng: random.Random) -> tuple[int, int, str] | None:
    """(start, end) character offsets of one hole in `fn.source`, and its kind; None if this draw found none."""
    src = fn.source
    starts = _line_starts(src)
    lines = src.splitlines()
    try:
        tree = ast.parse(src)
    except SyntaxError:
        tree = None
    fdef = tree.body[0] if tree is not None and tree.body else None
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    first = fdef.body[0].lineno - 1  # the first body line (0-based); the header is never a hole
    body_lines = [i for i in range(first, len(lines)) if lines[i].strip()]
    if not body_lines:
        return None
    kind = rng.choices([k for k, _ in HOLE_KINDS], [w for _, w in HOLE_KINDS])[0]
    if kind == "line":
        i = rng.choice(body_lines)
        return starts[i], starts[i + 1], kind
    if kind == "lines":
        i = rng.choice(body_lines)
        j = min(len(lines), i + rng.randint(2, 8))
        return starts[i], starts[j], kind
    if kind == "empty":
        i = rng.randint(first, len(lines))
        return starts[i], starts[i], kind
    if kind == "block":
        blocks = []
        for node in ast.walk(fdef):
            for name in ("body", "orelse", "finalbody"):
                body = getattr(node, name, None)
                if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                    if node is fdef and len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(
                            getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
                        body = body[1:]  # a function's body after its docstring
                    a, b = body[0].lineno - 1, body[-1].end_lineno
                    if a >= first and starts[a] < starts[b]:
                        blocks.append((a, b))
        if not blocks:
            return None
        a, b = rng.choice(blocks)
        return starts[a], starts[b], kind
    # span: a random stretch of characters in the body
    lo, hi = starts[first], len(src)
    if hi - lo < 2:
        return None
    a = rng.randrange(lo, hi - 1)
    length = min(hi - a, max(1, int(rng.expovariate(1 / 24))), 80)
    return a, a + length, kind


def make_example(fn: Function, tokenizer, rng: random.Random, tries: int = 6) -> InfillLayout | None:
    """One laid-out example of `fn` with a random hole that fits the largest slot (None if no draw fit)."""
    for _ in range(tries):
        hole = _draw_hole(fn, rng)
        if hole is None:
            continue
        a, b, _ = hole
        n = len(encode(tokenizer, fn.source[a:b]))
        sizes = [s for s in SLOT_LENGTHS if s >= n]
        if not sizes:
            continue
        return infill_layout(fn.source[:a], fn.source[a:b], fn.source[b:], tokenizer, CANVAS, rng.choice(sizes),
                             PROMPT_TOKENS)
    return None


def make_tokenizer(functions: list[Function], vocab_size: int = VOCAB_SIZE, sample: int = 6000, seed: int = 0):
    """A byte-level BPE trained on a stable sample of the training functions."""
    from diffreason.tokenizer import train_byte_bpe

    rng = random.Random(seed)
    picked = functions if len(functions) <= sample else rng.sample(functions, sample)
    return train_byte_bpe([fn.source for fn in picked], vocab_size=vocab_size)


def collate(layouts: list[InfillLayout], tokenizer, generator: torch.Generator):
    """An SFTBatch of laid-out examples: prompts left-padded to one width (as the engine lays them), noise uniform
    over the vocabulary, only slot positions corruptible."""
    from diffreason.train import SFTBatch

    width = max(len(lay.prompt_ids) for lay in layouts)
    prompts = torch.tensor([[tokenizer.pad_token_id] * (width - len(lay.prompt_ids)) + lay.prompt_ids
                            for lay in layouts])
    target = torch.tensor([lay.canvas for lay in layouts])
    noise = torch.randint(0, len(tokenizer), target.shape, generator=generator)
    return SFTBatch(prompts, target, noise, torch.tensor([lay.free for lay in layouts]))


class CodeStream:
    """SFT batches of random functions with random holes; resumable (its RNG and noise generator)."""

    def __init__(self, functions: list[Function], tokenizer, seed: int = 0):
        if not functions:
            raise DiffreasonError("no functions to train on")
        self.functions = functions
        self.tokenizer = tokenizer
        self.rng = random.Random(seed)
        self.generator = torch.Generator().manual_seed(seed)

    def state_dict(self) -> dict:
        return {"rng": self.rng.getstate(), "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        if "generator" in state:
            self.generator.set_state(state["generator"])

    def layouts(self, size: int) -> list[InfillLayout]:
        out = []
        while len(out) < size:
            lay = make_example(self.functions[self.rng.randrange(len(self.functions))], self.tokenizer, self.rng)
            if lay is not None:
                out.append(lay)
        return out

    def batch(self, size: int, progress: float = 0.0):
        return collate(self.layouts(size), self.tokenizer, self.generator)


def heldout_evaluator(functions: list[Function], tokenizer, n: int = 64, batch_size: int = 32, seed: int = 1234):
    """A fixed set of held-out examples and an evaluator: mean diffusion loss (t ~ U, a fixed draw) and the share of
    corrupted slot tokens the model gets right in one pass."""
    from diffreason.train import TrainConfig, sft_loss

    if not functions:
        return None
    stream = CodeStream(functions, tokenizer, seed)
    batches = [stream.batch(min(batch_size, n - i)) for i in range(0, n, batch_size)]
    cfg = TrainConfig(self_conditioning_p=0.0, ar_loss_weight=0.0)

    @torch.no_grad()
    def evaluate(lm) -> dict:
        generator = torch.Generator(device=lm.device).manual_seed(seed)
        losses, accs = [], []
        for b in batches:
            b = b.to(lm.device)
            _, metrics = sft_loss(lm.model, b, cfg, generator)
            losses.append(metrics["diffusion_loss"] * len(b.target))
            accs.append(metrics["canvas_acc"] * len(b.target))
        return {"val_loss": round(sum(losses) / n, 4), "val_slot_exact": round(sum(accs) / n, 4)}

    return evaluate


# The sampler schedule shipped in the checkpoint's generation_config: a slot is at most 64 tokens, so 32 steps, and
# code wants a cooler schedule than prose (a wrong token is a syntax error).
SAMPLER = dict(max_denoising_steps=32, entropy_bound=0.1, t_max=0.6, t_min=0.1)


def build_code_model(tokenizer, seed: int = 0, preset: dict | None = None):
    from diffreason.model import build_model
    from diffreason.sampler import SamplerConfig

    return build_model(dict(preset or MODEL_PRESET), tokenizer=tokenizer, seed=seed,
                       sampler_config=SamplerConfig(**SAMPLER))
