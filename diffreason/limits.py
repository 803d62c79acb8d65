"""Bounds on work done for untrusted input, without process-global state (no signals, no timers).

- `cpu_budget(seconds, memory_bytes)`: a cooperative limit on the calling thread's CPU time (and on how far the
  process's resident memory may grow) while a block runs. Long loops call `check()`, which raises `BudgetExceeded`
  once the budget is spent. Budgets nest (the tighter one wins) and live in a context variable, so they work in any
  thread and never touch a caller's own timers. The JSON-schema compiler runs under one when it compiles a request.
- `validate_json(schema, value, seconds)`: jsonschema's verdict on a value, with a time limit that works in any
  thread. Python's `re` cannot be interrupted (a schema `pattern` can backtrack for hours), so a schema holding a
  pattern is checked in a worker process that is killed when its time is up; others in the calling process.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from diffreason.errors import DiffreasonError


class BudgetExceeded(DiffreasonError):
    """A block ran past its CPU-time or memory budget (`cpu_budget`)."""


class ValidationTimeout(DiffreasonError):
    """jsonschema did not decide within its time limit (a schema pattern that backtracks)."""


@dataclass(frozen=True)
class _Budget:
    deadline: float  # time.thread_time() past which the block stops
    seconds: float
    rss_limit: int | None  # resident bytes past which the block stops (None: no memory bound)
    memory_bytes: int | None
    what: str


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("diffreason_budget", default=None)
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int | None:
    """This process's resident memory now (None where /proc is not there to read it cheaply)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


@contextlib.contextmanager
def cpu_budget(seconds: float | None, memory_bytes: int | None = None, what: str = "the work"):
    """Run a block with at most `seconds` of this thread's CPU time and at most `memory_bytes` of growth of the
    process's resident memory (None: no bound); `check()` inside it raises BudgetExceeded past either. An enclosing
    budget still applies: the tighter of the two wins."""
    if seconds is None and memory_bytes is None:
        yield
        return
    now = time.thread_time()
    deadline = now + seconds if seconds is not None else float("inf")
    rss = resident_bytes() if memory_bytes is not None else None
    rss_limit = rss + memory_bytes if rss is not None else None
    outer = _BUDGET.get()
    if outer is not None:
        if outer.deadline < deadline:
            deadline, seconds, what = outer.deadline, outer.seconds, outer.what
        if outer.rss_limit is not None and (rss_limit is None or outer.rss_limit < rss_limit):
            rss_limit, memory_bytes = outer.rss_limit, outer.memory_bytes
    token = _BUDGET.set(_Budget(deadline, seconds or 0.0, rss_limit, memory_bytes, what))
    try:
        yield
    finally:
        _BUDGET.reset(token)


_calls = 0


def check() -> None:
    """Raise BudgetExceeded when the enclosing `cpu_budget` is spent (nothing to do outside one). Cheap: a context
    variable and a clock read; resident memory is read on every 64th call."""
    budget = _BUDGET.get()
    if budget is None:
        return
    if time.thread_time() > budget.deadline:
        raise BudgetExceeded(f"{budget.what} took more than {budget.seconds:g} s of CPU time")
    global _calls
    _calls += 1
    if budget.rss_limit is not None and not _calls % 64:
        rss = resident_bytes()
        if rss is not None and rss > budget.rss_limit:
            raise BudgetExceeded(f"{budget.what} needed more than {budget.memory_bytes / 2**20:.0f} MiB of memory")


# ---- jsonschema with a time limit -------------------------------------------------------------------------------


def validate_json(schema: Any, value: Any, seconds: float = 30.0) -> tuple[str, str, str] | None:
    """None when `value` validates against `schema` (its own draft's validator, formats checked); else (message,
    JSON path of the instance, the keyword that refused it) of jsonschema's best-matching error. A schema holding a
    `pattern` is checked in a worker process with `seconds` of wall time (ValidationTimeout past it); others here,
    where nothing can run away. Where jsonschema itself fails on the schema, a DiffreasonError saying so."""
    if _has_patterns(schema):
        return _WORKER.validate(schema, value, seconds)
    try:
        return _verdict(schema, value)
    except Exception as exc:  # jsonschema itself fails on this schema (say, a $ref into a non-schema)
        raise DiffreasonError(f"jsonschema cannot evaluate this schema ({type(exc).__name__}: {exc})") from None


def _has_patterns(schema: Any) -> bool:
    """Does the schema hold a regex jsonschema will run (`pattern`, `patternProperties`)? Over-approximated by a
    text search: a schema that merely mentions the word is checked in the worker too."""
    try:
        return "pattern" in json.dumps(schema)
    except (TypeError, ValueError):
        return True


class EndlessRecursion(RuntimeError):
    """jsonschema recursed without end on a schema (a `$ref` cycle that never descends into the value)."""


def stack_ran_out(exc: BaseException) -> bool:
    """Is `exc` Python's stack running out: a RecursionError, or the panic jsonschema's Rust extension (rpds) raises
    over one (a PanicException, which is no Exception)?"""
    return isinstance(exc, RecursionError) or (type(exc).__name__ == "PanicException" and "RecursionError" in str(exc))


def best_validation_error(validator: Any, value: Any):
    """jsonschema's best-matching error of `validator` on `value` (None: valid). Python's stack running out inside
    jsonschema (`stack_ran_out`) becomes `EndlessRecursion`, an Exception like jsonschema's other failures."""
    import jsonschema

    try:
        return jsonschema.exceptions.best_match(validator.iter_errors(value))
    except BaseException as exc:
        if stack_ran_out(exc):
            raise EndlessRecursion("it recurses without end on this schema") from None
        raise


def _verdict(schema: Any, value: Any) -> tuple[str, str, str] | None:
    from diffreason.tasks.json_schema.load import validator

    error = best_validation_error(validator(schema), value)
    if error is None:
        return None
    return error.message, "/" + "/".join(str(p) for p in error.absolute_path), str(error.validator)


def serve_validations() -> None:
    """The worker's loop (`python -c "from diffreason.limits import serve_validations; serve_validations()"`): one
    JSON line [schema, value] in on stdin, one out: ["ok", verdict] or ["error", exception text]. What else would
    reach stdout (an import that prints) goes to stderr."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource  # a runaway validation may not take the machine's memory either

        resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))
    _verdict(True, None)  # (imports jsonschema and its format checkers before saying it is ready)
    out.write('["ready", null]\n')
    out.flush()
    for line in sys.stdin:
        try:
            schema, value = json.loads(line)
            answer = ["ok", _verdict(schema, value)]
        except Exception as exc:  # jsonschema itself fails on this schema (say, a $ref into a non-schema)
            answer = ["error", f"{type(exc).__name__}: {exc}"]
        out.write(json.dumps(answer) + "\n")
        out.flush()


class _Worker:
    """One validation process, started on first use and again after it is killed (a timeout). A plain child
    interpreter (not multiprocessing's spawn, which re-runs the caller's main script: a user's top-level script
    without `if __name__ == "__main__"` ran twice, and its second run failed), spoken to in JSON lines."""

    START_SECONDS = 120.0  # a fresh interpreter importing jsonschema, on a loaded machine
    COMMAND = "from diffreason.limits import serve_validations; serve_validations()"

    def __init__(self):
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None

    def _start(self) -> None:
        try:
            self._process = subprocess.Popen([sys.executable, "-c", self.COMMAND], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                             encoding="utf-8", start_new_session=True)
            answer = self._answer(self.START_SECONDS)
        except OSError as exc:
            self._stop()
            raise ValidationTimeout(f"the validation worker did not start ({exc})") from None
        except BaseException:
            self._stop()
            raise
        if answer != ["ready", None]:
            self._stop()
            raise ValidationTimeout("the validation worker did not start")

    def _answer(self, seconds: float) -> Any:
        """The worker's next JSON line, or None when none came within `seconds` (or it ended). (poll, not select:
        a process holding 1,024 descriptors gets pipe numbers select refuses.)"""
        poller = select.poll()
        poller.register(self._process.stdout, select.POLLIN)
        line = self._process.stdout.readline() if poller.poll(max(0, int(seconds * 1000))) else ""
        try:
            return json.loads(line) if line else None
        except ValueError:
            return None

    def _stop(self) -> None:
        if self._process is not None:
            with contextlib.suppress(OSError):
                self._process.kill()
            self._process.wait()
            for stream in (self._process.stdin, self._process.stdout):
                with contextlib.suppress(OSError):
                    stream.close()
        self._process = None

    def validate(self, schema: Any, value: Any, seconds: float) -> tuple[str, str, str] | None:
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._stop()
                self._start()
            try:
                line = json.dumps([schema, value]) + "\n"
            except (TypeError, ValueError) as exc:  # (schemas and values reach here as JSON documents)
                raise DiffreasonError(f"the schema or the value is not a JSON document ({exc})") from None
            try:
                self._process.stdin.write(line)
                self._process.stdin.flush()
                answer = self._answer(seconds)
            except OSError:
                self._stop()
                raise ValidationTimeout("the validation worker stopped (out of memory?)") from None
            except BaseException:  # (Ctrl-C, a caller's timer: its answer would be read as the next request's)
                self._stop()
                raise
            if answer is None:
                ended = self._process.poll() is not None
                self._stop()
                if ended:
                    raise ValidationTimeout("the validation worker stopped (out of memory?)")
                raise ValidationTimeout(f"jsonschema did not finish checking the value within {seconds:g} s "
                                        "(a schema pattern that backtracks)")
        kind, result = answer
        if kind == "error":
            raise DiffreasonError(f"jsonschema cannot evaluate this schema ({result})")
        return None if result is None else tuple(result)


_WORKER = _Worker()
