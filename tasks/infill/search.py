"""Filling holes: hole-length search and K candidates in one batch, scored by the model, checked by parsing and by
tests run in the sandbox.

    result = run_infill(lm, parse_code(text), tests="assert f(2) == 4", mode="verified", samples=4)
    result.code, result.holes[0].text, result.holes[0].length, result.holes[0].steps, result.candidate

**Layout** (`tasks.infill.layout.infill_layout`, as the model was trained): the code before the hole is the prompt
(its last `PROMPT_TOKENS` tokens), and one canvas holds the hole's slot then the code after the hole as fixed tokens,
as much as fits (the rest is cut: the model does not see it, the checks do), then pads. A hole is one slot of at most
one canvas: `max_hole_tokens` (or a `<|hole:N|>` bound) longer than the canvas is an error. The slot is the hole's
regex (`tasks.infill.grammar`, or `regex=`) over the tokenizer, padded: pads end the hole early.

**Edges**: prefix, hole and suffix are tokenized apart (the layout pre-splits the text at the hole's edges, in
training as here), so no token spans an edge and the fixed suffix tokens are the ones training showed; inside the
slot the automaton takes any tokens that spell a string of the hole's language (not only the tokenizer's own split
of it), and a byte-level BPE spells every string.

**Several holes** are filled one at a time, left to right, each in a canvas of its own: hole i's prompt is the code
before it with the holes before it filled (by the same sample), and its canvas shows the code after it up to the next
hole (a later hole's text is not known yet, so the code past it is not shown).

**Search**: the hole's slot at each length of `lengths` (the training slot lengths up to `max_hole_tokens`) × K
samples (seeds `seed`, `seed + 1`, ... — sample j keeps its seed for every hole and length) run as ONE request list
through the engine (`Engine.generate_batch`, in batches of `CPU_BATCH` canvases on the CPU; the checkpoint's sampler
with `draws="fast"`, whose draws do not depend on the batch); then one more batched forward
pass scores every finished canvas: the model's mean log-probability of the hole's tokens and of the pad that ends it,
read from the clean canvas. Uniform-state diffusion never trusts its input — any token may be noise — so a token the
model would replace scores low. Each sample keeps its best-scoring length; samples are ranked by their mean score
over the holes.

**Modes**: `model` returns the top-ranked sample. `verified` goes down the ranking and returns the first sample whose
filled code parses (compiles: `compile`, in-process, runs nothing, and reads as the template read it: no string or
comment runs from a hole into the code around it, `reads_as_written`) and passes the tests (run in the sandbox,
`diffreason.sandbox.run_python`, never in this process); there, at the last hole, a sample prefers its best length
whose code parses. When none passes, the best-scoring sample that parses is returned with `passed=False`; when no
sample parses, verified mode returns no code at all (`code` None, no holes filled, `candidate` None) — what it returns
always parses — and the ranking still holds every sample. Results always name the mode, K (`samples`) and how many
samples were checked (`checked`).
"""

from __future__ import annotations

import functools
import numbers
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from diffreason.tasks.infill.grammar import HoleLanguage, hole_context, hole_language, scan
from diffreason.tasks.infill.holes import InfillCode, InfillInputError, check_tests
from diffreason.tasks.infill.layout import hole_text, infill_layout
from diffreason.tasks.infill.testrun import DEFAULT_MODULE, check_test_functions, failure_line, module_name, run_tests

MODES = ("model", "verified")
MAX_SAMPLES = 256
TEST_SECONDS = 10.0  # wall clock per sandboxed test run
CPU_BATCH = 8  # canvases per engine batch on the CPU: 64 ran 1.3x slower per canvas-step than 4-8 (the logits of a
# batch outgrow the caches); on an accelerator the engine's own (64) holds


@dataclass
class Candidate:
    """One canvas of the search: sample `sample` (seed `seed`) at slot length `length` for hole `hole`."""

    hole: int
    sample: int
    seed: int
    length: int
    text: str
    tokens: int  # the hole's tokens (before the first pad)
    steps: list[int]  # denoising steps per canvas
    score: float  # mean log-probability of the hole's tokens and its end (see the module docstring)
    parses: bool | None = None  # the filled code parses (known at the last hole; None before)


@dataclass
class HoleFill:
    """What the chosen sample wrote into one hole, and why."""

    index: int
    text: str
    length: int  # the slot length chosen
    tokens: int
    steps: list[int]
    candidate: int  # the sample (0 .. K-1) it comes from
    seed: int
    score: float
    lengths: list[int]  # the slot lengths searched
    why: str
    prefix_cut: int = 0  # prompt tokens cut from the front (past PROMPT_TOKENS)
    suffix_cut: int = 0  # suffix tokens past the canvas (not shown to the model)


@dataclass
class Sample:
    """One of the K samples: its fill of every hole, score and verdicts."""

    index: int
    seed: int
    texts: list[str]
    lengths: list[int]
    score: float
    parses: bool
    passed: bool | None = None  # None: not run (no tests, or not reached)
    status: str = ""  # the sandbox's verdict when run ("passed", "failed", "timeout", ...) or "does not parse"
    error: str = ""  # when the tests did not pass: the last line they wrote to stderr (an assertion, an import error)


@dataclass
class InfillResult:
    code: str | None  # the filled code (None: verified mode found no sample whose code parses)
    holes: list[HoleFill]  # (empty when `code` is None)
    mode: str
    samples: int  # K
    candidate: int | None  # the sample returned
    checked: int  # samples whose checks ran (parse, then the tests in the sandbox) until one was returned
    parses: bool
    passed: bool | None  # the tests' verdict on the returned code (None: no tests)
    why: str
    seconds: float
    ranking: list[Sample] = field(default_factory=list)  # every sample, best first
    candidates: list[Candidate] = field(default_factory=list)  # every canvas of the search

    @property
    def steps(self) -> list[int]:
        """Denoising steps per canvas of the returned fill (one canvas per hole)."""
        return [s for h in self.holes for s in h.steps]

    def to_dict(self, with_candidates: bool = False) -> dict:
        out = asdict(self)
        out["steps"] = self.steps
        if not with_candidates:
            out.pop("candidates")
        return out


def parses(code: str) -> bool:
    """Does `code` compile as Python (`compile`: nothing is run)? A parse alone (`ast.parse`) takes code the compiler
    refuses: `return` outside a function, `break` outside a loop, a duplicate argument, a misplaced `nonlocal`.
    Compiled as the UTF-8 bytes a file of it holds, so that a coding declaration counts (`# coding: ascii` and an
    "é" in a hole: Python refuses the file, as here)."""
    with warnings.catch_warnings():  # (a SyntaxWarning, "invalid escape sequence", is printed, not raised)
        warnings.simplefilter("ignore")
        try:
            compile(code.encode("utf-8"), "<infill>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError, UnicodeError):
            return False
    return True


def reads_as_written(code: InfillCode, texts: Sequence[str]) -> bool:
    """Does `code` with its holes filled with `texts` read as the hole's template read it: does every string and
    comment Python's tokenizer finds that overlaps a hole lie within it (or hold it: a comment the code before it
    opened, or a string for a hole the code before it leaves inside one)? The template
    cannot see all of it: `""` before a hole that starts with `"` is a triple quote to Python, which runs on (QA,
    2026-12-07: into a later line's `# \"\"\"`, and the file still compiled, its code in between a string)."""
    import io
    import tokenize

    spans = []  # (start, end, in a string) of each hole's text
    for i, fill in enumerate(texts):
        before = code.prefix(i, texts)
        spans.append((len(before), len(before) + len(fill), scan(before).quote is not None))
    text = code.fill(texts)
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return False
    for token in tokens:
        if token.type in (tokenize.STRING, tokenize.COMMENT):
            a, b = starts[token.start[0] - 1] + token.start[1], starts[token.end[0] - 1] + token.end[1]
            holds = token.type == tokenize.COMMENT or None  # (a comment the code before the hole opened holds it)
            if any(a < hi and lo < b and not (lo <= a and b <= hi) and not (a < lo and hi <= b and (holds or string))
                   for lo, hi, string in spans):
                return False
    return True


def filled_parses(code: InfillCode, texts: Sequence[str]) -> bool:
    """`code` with its holes filled with `texts` compiles (`parses`) and reads as written (`reads_as_written`)."""
    return parses(code.fill(texts)) and reads_as_written(code, texts)


def slot_lengths(max_hole_tokens: int, canvas_length: int, trained: Sequence[int] = (16, 32, 48, 64)) -> list[int]:
    """The slot lengths searched: the training slot lengths up to `max_hole_tokens`, and `max_hole_tokens` itself."""
    top = min(max_hole_tokens, canvas_length)
    return sorted({n for n in trained if n <= top} | {top})


def _integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_lengths(code: InfillCode, max_hole_tokens: int, canvas_length: int) -> None:
    """Every hole must fit one canvas: `max_hole_tokens` and each `<|hole:N|>` at most the canvas length."""
    if max_hole_tokens < 1:
        raise InfillInputError(f"max_hole_tokens must be at least 1, got {max_hole_tokens}")
    if max_hole_tokens > canvas_length:
        raise InfillInputError(f"a hole of up to {max_hole_tokens} tokens is longer than the model's canvas "
                               f"({canvas_length} tokens); a hole must fit one canvas")
    for hole in code.holes:
        if hole.max_tokens is not None and hole.max_tokens > canvas_length:
            raise InfillInputError(f"line {hole.line}: the hole of up to {hole.max_tokens} tokens is longer than the "
                                   f"model's canvas ({canvas_length} tokens); a hole must fit one canvas")


def hole_language_of(code: InfillCode, i: int, prefix: str, single_line: bool | None,
                     depth: int = 4) -> HoleLanguage:
    hole = code.holes[i]
    ctx = hole_context(prefix, code.suffix(i), hole.whole_line, hole.indent, single_line=bool(single_line),
                       suffix_ends_at_hole=i < len(code.holes) - 1)
    return hole_language(ctx, depth)


def _training_constants() -> tuple[tuple[int, ...], int]:
    try:
        from diffreason.tasks.infill.corpus import PROMPT_TOKENS, SLOT_LENGTHS
    except ImportError:  # pragma: no cover
        return (16, 32, 48, 64), 128
    return tuple(SLOT_LENGTHS), int(PROMPT_TOKENS)


class _Templates:
    """Slot templates of the search, built once per (regex, length) (the tokenizer's Compiler caches the automata)."""

    def __init__(self, lm, constrain: bool):
        self.lm, self.constrain = lm, constrain
        self.tokenizer = lm.tokenizer

    def build(self, prefix: str, suffix: str, language: HoleLanguage, length: int, prompt_tokens: int):
        from diffreason.canvas import CanvasTemplate
        from diffreason.constrain.chardfa import AutomatonTooLarge
        from diffreason.errors import TemplateError

        tok = self.tokenizer
        layout = infill_layout(prefix, None, suffix, tok, self.lm.canvas_length, length, prompt_tokens)
        vocab = len(tok)
        if self.constrain:
            try:
                slot = CanvasTemplate.from_regex(language.regex, tok, length, language.intersections, python=False)
            except AutomatonTooLarge as exc:  # (not "nothing fits": the language is too large to compile)
                raise InfillInputError(f"the hole's language is too large to compile ({exc}); with "
                                       "diffreason.infill, pass a simpler regex= or constrain=False") from None
            except TemplateError:
                return None, layout  # no string of the hole's language fits this length
        else:
            slot = CanvasTemplate.unconstrained(length, vocab)
        if length == len(layout.canvas):  # (a slot as long as the canvas: no suffix shown)
            return slot, layout
        return slot + CanvasTemplate.from_positions(vocab, layout.canvas[length:]), layout


def _forward_scores(lm, prompts: list[list[int]], canvases: list[list[int]], lengths: list[int],
                    batch: int = 16) -> list[tuple[float, int]]:
    """(score, tokens) per canvas: the mean log-probability (untempered, unconstrained) the model gives the slot's
    tokens up to and including the first pad (the hole's end; the whole slot when it has none), reading the finished
    canvas after its prompt (the training forward: the prompt encoded causally, the canvas bidirectionally)."""
    import torch
    from transformers import DynamicCache

    model, pad = lm.model, lm.tokenizer.pad_token_id
    out: list[tuple[float, int] | None] = [None] * len(prompts)
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, p in enumerate(prompts):
        groups.setdefault(tuple(p), []).append(i)
    with torch.inference_mode():
        for prompt, members in groups.items():
            for start in range(0, len(members), batch):
                idx = members[start: start + batch]
                canvas = torch.tensor([canvases[i] for i in idx], device=lm.device)
                ids = torch.tensor([prompt] * len(idx), device=lm.device)
                cache = DynamicCache(config=model.config.get_text_config(decoder=True))
                logits = model(input_ids=ids, decoder_input_ids=canvas, past_key_values=cache).logits
                logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, canvas[..., None]).squeeze(-1)
                for row, i in enumerate(idx):
                    slot = canvases[i][: lengths[i]]
                    n = slot.index(pad) if pad in slot else len(slot)
                    end = min(n + 1, len(slot))
                    out[i] = (float(logp[row, :end].mean()), n)
    return out  # type: ignore[return-value]


@dataclass
class HoleSearch:
    """One hole's search over K samples × slot lengths: the candidates of each sample, and the layouts."""

    hole: int
    lengths: list[int]  # the slot lengths that fit the hole's language
    by_sample: dict[int, list[Candidate]]
    cuts: dict[tuple[int, int], tuple[int, int]]  # (sample, length) -> (prefix_cut, suffix_cut)
    seconds: float = 0.0


class Searcher:
    """Runs hole searches with one engine and one template cache (see the module docstring)."""

    def __init__(self, lm, *, sampler=None, max_steps: int | None = None, engine=None, constrain: bool = True):
        """`sampler`: a SamplerConfig (default: the checkpoint's, with `draws="fast"` — the same distributions, drawn
        only where a position is accepted: a sample at every position of a 4k vocabulary was a fifth of the time)."""
        from diffreason.engine import Engine

        self.lm = lm
        if engine is None:
            config = sampler or lm.sampler_config.model_copy(update={"draws": "fast"})
            if max_steps is not None:
                config = config.model_copy(update={"max_denoising_steps": max_steps})
            engine = Engine(lm, config, max_batch_size=CPU_BATCH if lm.device.type == "cpu" else 64)
        self.engine = engine
        self.templates = _Templates(lm, constrain)
        self.trained, self.prompt_tokens = _training_constants()

    def lengths(self, code: InfillCode, i: int, max_hole_tokens: int, lengths: Sequence[int] | None) -> list[int]:
        hole = code.holes[i]
        top = min(max_hole_tokens, hole.max_tokens or max_hole_tokens)
        if lengths:
            lens = sorted({int(n) for n in lengths if 1 <= int(n) <= min(top, self.lm.canvas_length)})
        else:
            lens = slot_lengths(top, self.lm.canvas_length, self.trained)
        if not lens:
            raise InfillInputError(f"no slot length to search for hole {i + 1} (lengths {list(lengths or [])}, at "
                                   f"most {top} tokens)")
        return lens

    def requests(self, code: InfillCode, i: int, fills: Sequence[Sequence[str]], seeds: Sequence[int],
                 lens: Sequence[int], *, single_line: bool | None = None,
                 regex: str | None = None) -> tuple[list, list]:
        """The engine requests of hole i's search (see `search`), and per request (sample, slot length, layout);
        a length that no string of the hole's language fits is left out."""
        from diffreason.engine import GenerationRequest

        requests, meta = [], []
        for j, seed in enumerate(seeds):
            prefix = code.prefix(i, fills[j])
            rx = HoleLanguage(regex) if regex is not None else hole_language_of(code, i, prefix, single_line)
            for L in lens:
                template, layout = self.templates.build(prefix, code.suffix(i), rx, L, self.prompt_tokens)
                if template is not None:
                    requests.append(GenerationRequest(layout.prompt_ids, template, seed=seed))
                    meta.append((j, L, layout))
        if not requests:
            raise InfillInputError(f"hole {i + 1}: nothing the hole may hold fits {max(lens)} tokens; raise "
                                   "max_hole_tokens")
        return requests, meta

    def search(self, code: InfillCode, i: int, fills: Sequence[Sequence[str]], seeds: Sequence[int],
               lens: Sequence[int], *, single_line: bool | None = None, regex: str | None = None,
               watch: Callable[[int, object], None] | None = None) -> HoleSearch:
        """Hole i of every sample j (its earlier holes filled with fills[j], seed seeds[j]) at every length of
        `lens`: one batch through the engine, one batched scoring pass. At the last hole, each candidate says whether
        the filled code parses."""
        t0 = time.perf_counter()
        lm, canvas = self.lm, self.lm.canvas_length
        requests, meta = self.requests(code, i, fills, seeds, lens, single_line=single_line, regex=regex)
        usable = sorted({L for _, L, _ in meta})
        shown = next((r for r, (j, L, _) in enumerate(meta) if j == 0 and L == usable[-1]), 0)
        def shown_only(r, trace):
            if r == shown:
                watch(i, trace)

        callback = shown_only if watch is not None else None
        results = self.engine.generate_batch(requests, callback=callback)
        scores = _forward_scores(lm, [list(r.prompt) for r in requests], [res.raw_tokens[:canvas] for res in results],
                                 [L for _, L, _ in meta])
        last = i == len(code.holes) - 1
        by_sample: dict[int, list[Candidate]] = {j: [] for j in range(len(seeds))}
        cuts = {}
        for (j, L, layout), res, (score, n) in zip(meta, results, scores):
            text = hole_text(res.raw_tokens[:L], lm.tokenizer)
            cand = Candidate(i, j, seeds[j], L, text, n, list(res.steps), round(score, 5))
            if last:
                cand.parses = filled_parses(code, [*fills[j], text])
            by_sample[j].append(cand)
            cuts[(j, L)] = (layout.prefix_cut, layout.suffix_cut)
        return HoleSearch(i, usable, by_sample, cuts, time.perf_counter() - t0)


def pick_length(cands: Sequence[Candidate], prefer_parsing: bool) -> Candidate:
    """A sample's length: its best-scoring candidate (among those whose code parses first, if asked and known)."""
    if prefer_parsing:
        return max(cands, key=lambda c: (bool(c.parses), c.score, -c.length))
    return max(cands, key=lambda c: (c.score, -c.length))


def run_infill(
    lm,
    code: InfillCode,
    tests: str | None = None,
    *,
    mode: str = "model",
    samples: int = 1,
    max_hole_tokens: int = 64,
    seed: int = 0,
    lengths: Sequence[int] | None = None,
    single_line: bool | None = None,
    regex: str | None = None,
    constrain: bool = True,
    sampler=None,
    max_steps: int | None = None,
    timeout: float = TEST_SECONDS,
    isolation: str = "auto",
    module: str = DEFAULT_MODULE,
    tests_name: str = "tests.py",
    watch: Callable[[int, object], None] | None = None,
    engine=None,
) -> InfillResult:
    """Fill every hole of `code` (see the module docstring).

    `tests`: Python source run against the filled code, which is importable as `module`; `tests_name` is the tests'
    file name in tracebacks (`tasks.infill.testrun`). `lengths`: slot lengths to search (default: the training
    lengths up to `max_hole_tokens`). `single_line`: whole-line holes hold exactly one line. `regex`: the language of
    every hole instead of the one read off the code (read as Python's `re` reads it, matched whole).
    `constrain=False` leaves the slots free (any token: the baseline the constraints are measured against).
    `watch(hole, trace)` sees every denoising step of one canvas per hole (sample 0, the longest slot). `engine`:
    reuse one (its sampler then wins over `sampler` and `max_steps`)."""
    t0 = time.perf_counter()
    if mode not in MODES:
        raise InfillInputError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    if not _integer(samples) or not 1 <= samples <= MAX_SAMPLES:
        raise InfillInputError(f"samples must be an integer in [1, {MAX_SAMPLES}], got {samples!r}")
    if not _integer(max_hole_tokens):
        raise InfillInputError(f"max_hole_tokens must be an integer, got {max_hole_tokens!r}")
    if regex is not None:  # (as a slot's regex everywhere: it was the pipeline's own text, `a{}` read as `a*`)
        from diffreason.constrain.regex import from_python
        from diffreason.errors import TemplateError

        try:
            regex = from_python(regex)
        except TemplateError as exc:
            raise InfillInputError(str(exc)) from None
    if not _integer(seed) or not 0 <= seed <= 2**64 - samples:  # (sample j runs with seed + j)
        raise InfillInputError(f"seed must be an integer in [0, 2**64 - samples] (sample j draws with seed + j), "
                               f"got {seed!r}")
    check_test_inputs(tests, module)
    check_lengths(code, max_hole_tokens, lm.canvas_length)
    searcher = Searcher(lm, sampler=sampler, max_steps=max_steps, engine=engine, constrain=constrain)
    K, n_holes = samples, len(code.holes)
    seeds = [seed + j for j in range(K)]
    fills: list[list[str]] = [[] for _ in range(K)]
    chosen: list[list[Candidate]] = [[] for _ in range(K)]
    searches: list[HoleSearch] = []
    for i in range(n_holes):
        lens = searcher.lengths(code, i, max_hole_tokens, lengths)
        found = searcher.search(code, i, fills, seeds, lens, single_line=single_line, regex=regex, watch=watch)
        searches.append(found)
        for j in range(K):
            best = pick_length(found.by_sample[j], mode == "verified" and i == n_holes - 1)
            chosen[j].append(best)
            fills[j].append(best.text)
    ranking = [Sample(j, seeds[j], list(fills[j]), [c.length for c in chosen[j]],
                      round(sum(c.score for c in chosen[j]) / n_holes, 5), filled_parses(code, fills[j]))
               for j in range(K)]
    ranking.sort(key=lambda s: (-s.score, s.index))
    run = None if tests is None else functools.partial(run_tests, tests=tests, module=module, tests_name=tests_name,
                                                        timeout=timeout, isolation=isolation)
    pick, checked, why = _choose(code, ranking, run, mode)
    candidates = [c for f in searches for j in sorted(f.by_sample) for c in f.by_sample[j]]
    seconds = round(time.perf_counter() - t0, 3)
    if pick is None:  # verified mode, and no sample parses: nothing is returned
        return InfillResult(code=None, holes=[], mode=mode, samples=K, candidate=None, checked=checked, parses=False,
                            passed=False if tests is not None else None, why=why, seconds=seconds, ranking=ranking,
                            candidates=candidates)
    holes = []
    for i, found in enumerate(searches):
        c = chosen[pick.index][i]
        prefix_cut, suffix_cut = found.cuts[(pick.index, c.length)]
        holes.append(HoleFill(
            index=i, text=code.given(c.text, i), length=c.length, tokens=c.tokens, steps=c.steps,
            candidate=pick.index, seed=c.seed, score=c.score, lengths=found.lengths,
            why=_length_why(c, found.by_sample[pick.index], mode, i == n_holes - 1) + "; " + why,
            prefix_cut=prefix_cut, suffix_cut=suffix_cut,
        ))
    return InfillResult(
        code=code.written(pick.texts), holes=holes, mode=mode, samples=K, candidate=pick.index, checked=checked,
        parses=pick.parses, passed=pick.passed, why=why, seconds=seconds, ranking=ranking, candidates=candidates,
    )


def check_test_inputs(tests: str | None, module: str = DEFAULT_MODULE) -> None:
    """The tests and the module name the code runs as, checked (InfillInputError) before any model work."""
    if tests is not None:
        check_tests(tests)
        check_test_functions(tests)
    if not isinstance(module, str) or module_name(module) != module:
        raise InfillInputError(f"module name {module!r} is not a Python identifier (or is a dunder name)")


def _length_why(c: Candidate, others: list[Candidate], mode: str, last: bool) -> str:
    if len(others) == 1:
        return f"length {c.length}, the only one searched"
    rest = ", ".join(f"{o.length}: {o.score:.3f}" for o in sorted(others, key=lambda o: o.length) if o is not c)
    if mode == "verified" and last and c.parses and any(not o.parses and o.score > c.score for o in others):
        return f"length {c.length}: the best-scoring whose code parses ({c.score:.3f}; {rest})"
    return f"length {c.length}: the highest score ({c.score:.3f}; {rest})"


def _tested(sample: Sample, filled: str, run) -> None:
    """Run the tests against a sample's filled code: its verdict, and why it failed."""
    r = run(filled)
    sample.passed, sample.status = r.passed, r.status
    if not r.passed:
        sample.error = failure_line(r.stderr, r.reason)


def _verdict(sample: Sample) -> str:
    return sample.status + (f" ({sample.error})" if sample.error else "")


def _choose(code: InfillCode, ranking: list[Sample], run, mode) -> tuple[Sample | None, int, str]:
    """The sample to return (None: verified mode, and no sample parses), how many were checked, and why. `run`: the
    tests' runner (None: no tests)."""
    K = len(ranking)
    if mode == "model":
        top = ranking[0]
        if run is None:
            return top, 0, f"sample {top.index} of {K}: the highest mean score ({top.score:.3f}; mode model)"
        if top.parses:
            _tested(top, code.fill(top.texts), run)
        else:
            top.passed, top.status = False, "does not parse"
        checked = f"tests {_verdict(top)}" if top.parses else "its code does not parse (tests not run)"
        return top, 1, (f"sample {top.index} of {K}: the highest mean score ({top.score:.3f}; mode model), "
                        f"{checked}")
    failed = []
    for n, s in enumerate(ranking, 1):
        if not s.parses:
            s.passed, s.status = (False if run is not None else None), "does not parse"
            failed.append(f"{s.index} does not parse")
            continue
        if run is None:
            return s, n, (f"sample {s.index} of {K}: the best-scoring whose code parses"
                          + (f" ({'; '.join(failed)})" if failed else "") + "; no tests given (mode verified)")
        _tested(s, code.fill(s.texts), run)
        if s.passed:
            return s, n, (f"sample {s.index} of {K}: the best-scoring that parses and passes the tests"
                          + (f" ({'; '.join(failed)})" if failed else "") + " (mode verified)")
        failed.append(f"{s.index} {_verdict(s)}")
    parsing = next((s for s in ranking if s.parses), None)
    if parsing is not None:
        return parsing, K, (f"no sample of {K} passes ({'; '.join(failed)}): sample {parsing.index}, the best-scoring "
                            "whose code parses (mode verified)")
    return None, K, (f"no sample of {K} parses ({'; '.join(failed)}): nothing returned (mode verified; more samples "
                     "or a larger max_hole_tokens may find one)")
