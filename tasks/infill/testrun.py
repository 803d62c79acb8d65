"""Running a user's tests against a filled file, in the sandbox.

    check_test_functions(tests)                     # refuses what no run could call, before a model loads
    result = run_tests(filled, tests, module="app", timeout=10.0, isolation="auto")   # a SandboxResult

The filled code runs first as a module of its own name (`module`: the file's; `src/app.py` in the sandbox, so
tracebacks show its lines; importable — `from app import add` — unless the name is a standard library module's, as
in Python, where the library's comes first; its `if __name__ == "__main__":` block does not run), then the tests run
as the main program with the code's names in scope (`assert add(2, 3) == 5` works without an import). The tests pass
when the program runs to its end (`run_python`'s verdict "last": any `SystemExit` fails, so a fill that exits early
— `sys.exit(0)` in a body, `raise SystemExit` — never passes) and no unittest test failed anywhere:

- `unittest.main()` runs with `exit=False`; every unittest failure or error, whoever ran the test, fails the run;
- tests the file defines but did not run are run after it: each `test*` function defined outside classes and
  functions (under `if` or `try` too) that was never called, each TestCase test that never ran (a `defaultTest`
  may have named a few), and the `test*` methods of pytest-style `Test*` classes.

A `test*` function the file never mentions again and that takes arguments (pytest fixtures) or is async is refused
up front (`check_test_functions`): nothing could call it.
"""

from __future__ import annotations

import ast
import json
import re

from diffreason.tasks.infill.holes import InfillInputError

DEFAULT_MODULE = "solution"  # the filled code's module name when the code has no file name (a (prefix, suffix) pair)

# The sandboxed program: everything in one function, so the tests' names cannot shadow the driver's.
DRIVER = '''\
def __diffreason_tests(module_name, code_path, tests_path):
    import ast, functools, importlib.util, sys, types, unittest

    g = globals()
    del g["__diffreason_tests"]
    spec = importlib.util.spec_from_file_location(module_name, code_path)
    module = importlib.util.module_from_spec(spec)
    if module_name not in sys.modules and module_name not in sys.stdlib_module_names:
        sys.modules[module_name] = module
        sys.path.insert(0, __import__("os").path.abspath(__import__("os").path.dirname(code_path)))  # (reload)
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

    def track(function):
        if not isinstance(function, types.FunctionType):
            return function

        @functools.wraps(function)
        def tracked(*args, **kwargs):
            called.add(tracked)
            return function(*args, **kwargs)

        latest[function.__name__] = tracked
        return tracked

    class Decorate(ast.NodeTransformer):
        def visit_FunctionDef(self, node):  # (not into its body)
            if node.name.startswith("test"):
                node.decorator_list.append(ast.copy_location(ast.Name("__diffreason_track", ast.Load()), node))
            return node

        def visit_ClassDef(self, node):
            return node

    g["__diffreason_track"] = track
    exec(compile(ast.fix_missing_locations(Decorate().visit(tree)), tests_path, "exec", dont_inherit=True), g)
    g.pop("__diffreason_track", None)

    for tracked in list(latest.values()):
        if tracked not in called:
            tracked()
    cases = [v for v in list(g.values()) if isinstance(v, type) and v.__module__ == "__main__"]
    for case in cases:
        if issubclass(case, unittest.TestCase):
            left = [t for t in unittest.defaultTestLoader.loadTestsFromTestCase(case) if t.id() not in ran]
            if left:
                unittest.TextTestRunner(stream=sys.stderr).run(unittest.TestSuite(left))
        elif case.__name__.startswith("Test") and type(case) is type and "__init__" not in vars(case):
            instance = case()  # (pytest's rule: a Test* class with no constructor of its own)
            for name, member in list(vars(case).items()):
                if name.startswith("test") and callable(member):
                    getattr(instance, name)()
    if failed:
        print(f"{len(failed)} unittest test(s) failed: {failed[0]}", file=sys.stderr)
        raise SystemExit(1)


'''


def check_test_functions(tests: str, where: str = "the tests") -> None:
    """Refuse a `test*` function (defined outside classes and functions) that takes arguments without defaults
    (pytest fixtures) or is async, when the file never mentions its name again: the run would have to call it and
    cannot. `tests` must parse (`holes.check_tests`)."""
    tree = ast.parse(tests)
    defined, stack = [], list(tree.body)
    while stack:  # (statements outside functions and classes: under `if`, `try`, `with`, loops too)
        node = stack.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name.startswith("test"):
                defined.append(node)
        elif not isinstance(node, ast.ClassDef):
            stack.extend(n for n in ast.iter_child_nodes(node) if isinstance(n, ast.stmt))
    mentioned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for node in defined:
        if node.name in mentioned:
            continue
        args = node.args
        required = len(args.posonlyargs) + len(args.args) - len(args.defaults) + sum(
            d is None for d in args.kw_defaults)
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
    program = DRIVER + f"__diffreason_tests({json.dumps(module)}, {json.dumps(code_path)}, {json.dumps(tests_name)})\n"
    return run_python(program, files={code_path: code, tests_name: tests}, timeout=timeout, isolation=isolation,
                      verdict="last")


_FRAME = re.compile(r'\s*File "([^"]+)", line (\d+)')


def failure_line(stderr: str, reason: str = "") -> str:
    """What a failed run's stderr says went wrong, in one line: the exception of its first traceback that names the
    tests or the code, with the innermost such line (`AssertionError (tests.py line 3: assert add(2, 3) == 5)`); else
    stderr's last line, else `reason`."""
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return reason[:300]
    starts = [k for k, line in enumerate(lines) if line.startswith("Traceback")] + [len(lines)]
    frames = []
    for start, end in zip(starts, starts[1:]):  # (the first traceback that names the tests or the code)
        frames = [(k, m) for k, line in enumerate(lines[start:end], start) if (m := _FRAME.match(line))
                  and m.group(1) != "main.py" and not m.group(1).startswith(("/", "<"))]
        if frames:
            break
    if not frames:
        return lines[-1].strip()[:300]
    k, m = frames[-1]
    rest = [line.strip() for line in lines[k + 1:]]
    source = rest[0] if rest and not _FRAME.match(lines[k + 1]) else ""
    error = next((line for line in rest[1:] if not _FRAME.match(line) and set(line) - set("^~ ")), lines[-1].strip())
    return f"{error} ({m.group(1)} line {m.group(2)}: {source})"[:300]
