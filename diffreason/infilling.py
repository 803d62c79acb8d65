"""Code infilling: `infill(model, code, tests=None, ...)` → the code with its holes filled, and why.

    from diffreason import infill, load_model

    result = infill(None, "def square(x):\\n    <|hole|>\\n", tests="assert square(3) == 9", mode="verified",
                    samples=8)
    print(result.code)            # the filled file
    result.holes[0].text, result.holes[0].length, result.holes[0].steps, result.candidate, result.passed

`code` is text with `<|hole|>` markers (`<|hole:N|>`: at most N tokens), or a (prefix, suffix) pair as
HumanEval-infilling gives it. `model`: a loaded checkpoint, its directory, or None for the embedded code model
(`diffreason/weights/code-small`). `tests`: Python source run against the filled code, in the sandbox
(`diffreason.sandbox`), never in this process: the code is importable as `module` (option; default "solution") and
its names are in scope; a sample passes when the tests run to their end (`diffreason.tasks.infill.testrun`: unittest
and pytest-style test functions run too). `mode="model"` returns the
top-scoring of K samples (the hole-length search runs inside each); `mode="verified"` the first, best first, whose
code parses and passes the tests. The template, the layout, the search and the checks:
`diffreason.tasks.infill.search` and `diffreason.tasks.infill.grammar`.

Line endings are read as Python reads source (`\r\n` and a lone `\r` end a line, as `\n` does; a leading byte order
mark is read past); the filled code comes back with everything outside the holes as it was given (each line's own
end, the mark), and a fill's lines end as its hole's line did (`InfillCode.written`; the samples' records keep
`\n`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from diffreason.model import DiffusionLM, load_model

if TYPE_CHECKING:
    from diffreason.tasks.infill.search import InfillResult

DEFAULT_MAX_HOLE_TOKENS = 64  # the code model's largest training slot


def code_model_path() -> Path:
    """The embedded code model's directory (which may be missing in a checkout that has not trained it)."""
    from diffreason import model as models

    return Path(getattr(models, "EMBEDDED_CODE", models.WEIGHTS_DIR / "code-small"))


def load_code_model(model: DiffusionLM | str | Path | None = None) -> DiffusionLM:
    from diffreason.errors import ModelLoadError

    if isinstance(model, DiffusionLM):
        return model
    if model is None:
        path = code_model_path()
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"the embedded code model is missing ({path}); pass a model")
        model = path
    return load_model(model)


def infill(
    model: DiffusionLM | str | Path | None,
    code: str | tuple[str, str],
    tests: str | None = None,
    mode: str = "model",
    samples: int = 1,
    max_hole_tokens: int = DEFAULT_MAX_HOLE_TOKENS,
    seed: int = 0,
    **options: Any,
) -> InfillResult:
    """Fill the holes of `code` (see the module docstring). `options` go to
    `diffreason.tasks.infill.search.run_infill`: `lengths`, `single_line`, `regex`, `constrain`, `max_steps`,
    `timeout`, `isolation`, `module`, `tests_name`, `watch`, `sampler`."""
    from diffreason.tasks.infill.holes import InfillCode, parse_code, parse_pair
    from diffreason.tasks.infill.search import check_test_inputs, run_infill
    from diffreason.tasks.infill.testrun import DEFAULT_MODULE

    check_test_inputs(tests, options.get("module", DEFAULT_MODULE))  # (before the model loads)
    if isinstance(code, InfillCode):
        parsed = code
    elif isinstance(code, tuple) and len(code) == 2:
        parsed = parse_pair(*code)
    else:
        parsed = parse_code(code)
    lm = load_code_model(model)
    return run_infill(lm, parsed, tests, mode=mode, samples=samples, max_hole_tokens=max_hole_tokens, seed=seed,
                      **options)
