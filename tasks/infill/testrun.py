"""Running a user's tests against a filled file, in the sandbox.

    check_test_functions(tests)                     # refuses what no run could call, before a model loads
    result = run_tests(filled, tests, module="app", timeout=10.0, isolation="auto")   # a SandboxResult

The filled code runs first as a module of its own name (`module`: the file's; `src/app.py` in the sandbox, so
tracebacks show its lines; importable — `from app import add` — unless the name is a standard library module's: the
library's module stays what `import` gives, where Python would take a local file for one not yet imported; its
`if __name__ == "__main__":` block does not run), then the tests run as the main program with the code's names in
scope (`assert add(2, 3) == 5` works without an import; installed packages import too — `import pytest` — after
the standard library). The tests pass when the program runs to its end (`run_python`'s verdict "last": a
`SystemExit` fails, so a fill that exits early — `sys.exit(0)` in a body, `raise SystemExit` — never passes; only the
tests' own `sys.exit(0)` in their last top-level statement ends them) and no test failed anywhere:

- `unittest.main()` runs with `exit=False`; every unittest failure or error, whoever ran the test, fails the run, and
  so does a `test*` function that raised, even when the file's own runner caught it;
- tests the file defines but did not run are run after it: each `test*` function defined outside classes and
  functions (under `if` or `try` too) that was never called, each TestCase test that never ran (a `defaultTest`
  may have named a few), and the `test*` methods (inherited too) of pytest-style `Test*` classes without a
  constructor — a fresh instance each, with `setup_method` / `teardown_method`, inside the class's `setup_class` /
  `teardown_class` — between the file's `setup_module()` and `teardown_module()` when it has them, each function
  inside `setup_function` / `teardown_function`; those skipped (`unittest.skip`, `pytest.mark.skip`, `skipif(True)`,
  `__test__ = False`) are not, and a test that skips itself (`SkipTest`, `pytest.skip()`) did not fail.

Refused up front (`check_test_functions`), as nothing could call them or nothing would check anything: a `test*`
function or pytest-style method the file never mentions again that takes arguments (pytest fixtures) or is async; a
file with no test and no call or assert outside functions (a HumanEval-style `check(candidate)` never called).
"""

from __future__ import annotations

import ast
import json
import re
import sysconfig

from diffreason.tasks.infill.holes import InfillInputError

DEFAULT_MODULE = "solution"  # the filled code's module name when the code has no file name (a (prefix, suffix) pair)

# The sandboxed program: everything in one function, so the tests' names cannot shadow the driver's.
DRIVER = '''\
def __diffreason_tests(module_name, code_path, tests_path, site_paths):
    import ast, functools, importlib.util, inspect, os, sys, types, unittest

    g = globals()
    del g["__diffreason_tests"]
    sys.path.extend(p for p in site_paths if p not in sys.path)  # (installed packages, after the standard library)
    spec = importlib.util.spec_from_file_location(module_name, code_path)
    module = importlib.util.module_from_spec(spec)
    if module_name not in sys.modules and module_name not in sys.stdlib_module_names:
        sys.modules[module_name] = module
        sys.path.insert(0, os.path.abspath(os.path.dirname(code_path)))  # (importlib.reload finds it there)
    spec.loader.exec_module(module)
    g.update({k: v for k, v in vars(module).items() if not (k.startswith("__") and k.endswith("__"))})

    ran, failed = set(), []
    run = unittest.TestCase.run

    def noted_run(self, result=None):
        ran.add(self.id())
        return run(self, result)

    unittest.TestCase.run = noted_run
    for name in ("addFailure", "addError", "addUnexpectedSuccess"):
        def noting(self, test, *args, _original=getattr(unittest.TestResult, name)):
            failed.append(test)
            return _original(self, test, *args)
        setattr(unittest.TestResult, name, noting)
    add_subtest = unittest.TestResult.addSubTest

    def noting_subtest(self, test, subtest, err):
        if err is not None:
            failed.append(subtest)
        return add_subtest(self, test, subtest, err)

    unittest.TestResult.addSubTest = noting_subtest

    class Program(unittest.TestProgram):
        def __init__(self, *args, **kwargs):
            kwargs["exit"] = False
            super().__init__(*args, **kwargs)

    unittest.main = Program

    with open(tests_path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), tests_path)
    latest, called = {}, set()

    def is_skip(error):  # unittest's SkipTest, pytest's skip() (its Skipped, an OutcomeException)
        return isinstance(error, unittest.SkipTest) or (
            type(error).__name__ == "Skipped" and any(c.__name__ == "OutcomeException" for c in type(error).__mro__))

    def skipped(obj):  # unittest.skip, pytest.mark.skip / skipif(True), __test__ = False
        if getattr(obj, "__unittest_skip__", False) or getattr(obj, "__test__", True) is False:
            return True
        for mark in getattr(obj, "pytestmark", None) or ():
            name, args = getattr(mark, "name", ""), getattr(mark, "args", ())
            if name == "skip" or (name == "skipif" and args and not isinstance(args[0], str) and args[0]):
                return True
        return False

    def hook(function, arg):  # pytest's setup/teardown hooks take their argument or none
        if not callable(function):
            return
        try:
            takes = len(inspect.signature(function).parameters)
        except (TypeError, ValueError):
            takes = 0
        function(arg) if takes else function()

    def one(call, *args):  # a test the driver runs: a skip is no failure
        try:
            call(*args)
        except BaseException as e:
            if not is_skip(e):
                raise

    def track(function):
        if not isinstance(function, types.FunctionType):
            return function

        @functools.wraps(function)
        def tracked(*args, **kwargs):
            called.add(tracked)
            try:
                return function(*args, **kwargs)
            except BaseException as e:  # (a failure the file's own runner may catch still fails the run)
                if not is_skip(e):
                    failed.append(function.__name__)
                raise

        latest[function.__name__] = tracked
        return tracked

    class Decorate(ast.NodeTransformer):
        def visit_FunctionDef(self, node):  # (not into its body)
            if node.name.startswith("test"):  # (outermost: it sees what the other decorators made)
                node.decorator_list.insert(0, ast.copy_location(ast.Name("__diffreason_track", ast.Load()), node))
            return node

        def visit_ClassDef(self, node):
            return node

    g["__diffreason_track"] = track
    try:
        exec(compile(ast.fix_missing_locations(Decorate().visit(tree)), tests_path, "exec", dont_inherit=True), g)
    except SystemExit as e:  # the tests' own sys.exit(0) in their last statement; an exit from anywhere else fails
        tb = e.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        last = tree.body[-1]
        if (e.code not in (0, None) or tb.tb_frame.f_code.co_filename != tests_path
                or not last.lineno <= tb.tb_lineno <= last.end_lineno):
            raise
    g.pop("__diffreason_track", None)

    cases = [v for v in list(g.values()) if isinstance(v, type) and v.__module__ == "__main__"]
    plain = [c for c in cases if not issubclass(c, unittest.TestCase) and c.__name__.startswith("Test")
             and type(c) is type and "__init__" not in vars(c)  # (pytest's rule: no constructor of its own)
             and not skipped(c)]
    functions = [t for t in latest.values() if t not in called and not skipped(t)]
    module = sys.modules["__main__"]
    if plain or functions:
        hook(g.get("setup_module"), module)
    for tracked in functions:
        hook(g.get("setup_function"), tracked)
        one(tracked)
        hook(g.get("teardown_function"), tracked)
    for case in plain:
        hook(getattr(case, "setup_class", None), case)
        for name in dir(case):
            if name.startswith("test") and callable(getattr(case, name)) and not skipped(getattr(case, name)):
                instance = case()  # (a fresh one per test, as pytest makes)
                hook(getattr(instance, "setup_method", None), getattr(instance, name))
                one(getattr(instance, name))
                hook(getattr(instance, "teardown_method", None), getattr(instance, name))
        hook(getattr(case, "teardown_class", None), case)
    if plain or functions:
        hook(g.get("teardown_module"), module)
    for case in cases:
        if issubclass(case, unittest.TestCase):
            left = [t for t in unittest.defaultTestLoader.loadTestsFromTestCase(case) if t.id() not in ran]
            if left:
                unittest.TextTestRunner(stream=sys.stderr).run(unittest.TestSuite(left))
    if failed:
        print(f"{len(failed)} test(s) failed: {failed[0]}", file=sys.stderr)
        raise SystemExit(1)


'''


def check_test_functions(tests: str, where: str = "the tests") -> None:
    """Refuse a `test*` function (defined outside classes and functions) that takes arguments without defaults
    (pytest fixtures) or is async, when the file never mentions its name again: the run would have to call it and
    cannot. `tests` must parse (`holes.check_tests`)."""
    tree = ast.parse(tests)
    defined, methods, stack, checks, classes = [], [], list(tree.body), False, False
    while stack:  # (statements outside functions and classes: under `if`, `try`, `with`, loops too)
        node = stack.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name.startswith("test"):
                defined.append(node)
        elif isinstance(node, ast.ClassDef):
            tests_in = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and n.name.startswith("test")]
            classes = classes or bool(tests_in)
            if node.name.startswith("Test") and not node.bases:  # (a pytest-style class: its methods take self)
                methods += tests_in
        else:
            checks = checks or any(isinstance(n, (ast.Call, ast.Assert, ast.Raise)) for n in ast.walk(node))
            stack.extend(n for n in ast.iter_child_nodes(node) if isinstance(n, ast.stmt))
    if not (defined or classes or checks):
        raise InfillInputError(f"{where}: nothing in them checks the code (no test function or class, and no call or "
                               "assert outside functions): a HumanEval-style check(candidate) needs its call, as "
                               "check(add)")
    mentioned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    mentioned |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in defined + methods:
        if node.name in mentioned:
            continue
        args = node.args
        required = len(args.posonlyargs) + len(args.args) - len(args.defaults) + sum(
            d is None for d in args.kw_defaults) - (node in methods)
        if isinstance(node, ast.AsyncFunctionDef):
            raise InfillInputError(f"{where}: {node.name} (line {node.lineno}) is async: only plain test functions "
                                   "are run")
        if required:
            raise InfillInputError(f"{where}: {node.name} (line {node.lineno}) takes arguments (pytest fixtures are "
                                   "not supported): give it none, or call it in the file")


def module_name(stem: str) -> str:
    """The module name a file's code runs as: its stem when that is an identifier (not a dunder), else
    DEFAULT_MODULE."""
    dunder = stem.startswith("__") and stem.endswith("__")
    return stem if stem.isidentifier() and not dunder else DEFAULT_MODULE


def run_tests(code: str, tests: str, *, module: str = DEFAULT_MODULE, tests_name: str = "tests.py",
              timeout: float, isolation: str):
    """The sandbox's verdict (a `SandboxResult`) on `tests` run against the filled `code` (see the module
    docstring). `tests_name`: the tests' file name in the sandbox (their tracebacks show it)."""
    from diffreason.sandbox import run_python

    if module_name(module) != module:
        raise InfillInputError(f"module name {module!r} is not a Python identifier (or is a dunder name)")
    code_path = f"src/{module}.py"
    if not re.fullmatch(r"[\w.-]+\.py", tests_name) or tests_name == "main.py":
        tests_name = "tests.py"
    site_paths = sorted({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
    program = DRIVER + (f"__diffreason_tests({json.dumps(module)}, {json.dumps(code_path)}, {json.dumps(tests_name)}, "
                        f"{json.dumps(site_paths)})\n")
    return run_python(program, files={code_path: code, tests_name: tests}, timeout=timeout, isolation=isolation,
                      verdict="last")


_FRAME = re.compile(r'\s*File "([^"]+)", line (\d+)')
_SANDBOX_DIR = re.compile(r"^.*/diffreason-sandbox-[^/]+/")  # (a path in the run's working directory: relative)


def failure_line(stderr: str, reason: str = "") -> str:
    """What a failed run says went wrong, in one line: the exception of stderr's first traceback that names the tests
    or the code, with the innermost such line (`AssertionError (tests.py line 3: assert add(2, 3) == 5)`); without
    a traceback, the sandbox's `reason` (a run that left early: its stderr's last line may be unittest's "OK"), else
    stderr's last line."""
    marker = "Traceback (most recent call last):"  # (output without a newline before it runs into its line)
    stderr = stderr.replace(marker, "\n" + marker)
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    starts = [k for k, line in enumerate(lines) if line.startswith("Traceback")]
    for start, end in zip(starts, starts[1:] + [len(lines)]):  # (the first that names the tests or the code)
        frames = [(k, _SANDBOX_DIR.sub("", m.group(1)), m.group(2)) for k, line in enumerate(lines[start:end], start)
                  if (m := _FRAME.match(line))]
        ours = [f for f in frames if f[1] != "main.py" and not f[1].startswith(("/", "<"))]
        if not ours:
            continue
        k, path, number = ours[-1]
        source = lines[k + 1].strip() if k + 1 < end and not _FRAME.match(lines[k + 1]) else ""
        # the exception: the first line at the margin after the traceback's innermost frame
        error = next((line for line in lines[frames[-1][0] + 1: end] if not line.startswith(" ")), lines[end - 1])
        return f"{error.strip()} ({path} line {number}: {source})"[:300]
    if reason:
        return reason[:300]
    return lines[-1].strip()[:300] if lines else ""
