"""Running a user's tests against a filled file, in the sandbox.

    calls = uncalled_tests(tests)                         # checks the tests (parse, test functions) before a model loads
    result = run_tests(filled, tests, calls, module="app", timeout=10.0, isolation="auto")   # a SandboxResult

The filled code runs first as a module of its own name (`module`: the file's; importable, `from app import add`
works, and its `if __name__ == "__main__":` block does not run), then the tests run as the main program with the
code's names in scope (`assert add(2, 3) == 5` works without an import). The tests pass when the program runs to its
last statement (`run_python`'s verdict "last": any `SystemExit` fails, so a fill that exits early — `sys.exit(0)`
in a body, `raise SystemExit` — never passes). `unittest.main()` is run with `exit=False` and fails the run when a
test fails; TestCase classes the file defines but never runs, and `test*` functions it defines but never calls
(pytest's style), are run after it. A `test*` function that takes arguments (pytest fixtures) or is async is
refused, as the run could not call it.
"""

from __future__ import annotations

import ast
import json

from diffreason.tasks.infill.holes import InfillInputError

CODE_FILE, TESTS_FILE = "__candidate__.py", "__tests__.py"

# The sandboxed program: everything in one function, so the tests' names cannot shadow the driver's.
DRIVER = '''\
def __diffreason_tests(module_name, calls):
    import sys, types, unittest

    def compiled(path, name):
        with open(path, encoding="utf-8") as f:
            return compile(f.read(), name, "exec", dont_inherit=True)

    g = globals()
    del g["__diffreason_tests"]
    module = types.ModuleType(module_name)
    module.__file__ = module_name + ".py"
    sys.modules[module_name] = module
    exec(compiled(CODE_FILE, module_name + ".py"), module.__dict__)
    g.update({k: v for k, v in module.__dict__.items() if not (k.startswith("__") and k.endswith("__"))})

    class Program(unittest.TestProgram):
        ran = False

        def __init__(self, *args, **kwargs):
            Program.ran = True
            kwargs["exit"] = False
            super().__init__(*args, **kwargs)
            if not self.result.wasSuccessful():
                raise SystemExit(1)

    unittest.main = Program
    exec(compiled(TESTS_FILE, "tests.py"), g)
    if not Program.ran:
        cases = [v for v in list(g.values()) if isinstance(v, type) and issubclass(v, unittest.TestCase)
                 and v.__module__ == "__main__"]
        if cases:
            suite = unittest.TestSuite([unittest.defaultTestLoader.loadTestsFromTestCase(c) for c in cases])
            if not unittest.TextTestRunner(stream=sys.stderr).run(suite).wasSuccessful():
                raise SystemExit(1)
    for name in calls:
        g[name]()


'''


def uncalled_tests(tests: str, where: str = "the tests") -> list[str]:
    """The `test*` functions the tests define at top level and never call themselves (none when the file calls any of
    them, or `main`: a script that runs its own checks), in order. Raises InfillInputError for one the run could not
    call (parameters without defaults, async). `tests` must parse (`holes.check_tests`)."""
    tree = ast.parse(tests)
    defined = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and n.name.startswith("test")]
    called = {n.func.id if isinstance(n.func, ast.Name) else n.func.attr for n in ast.walk(tree)
              if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute))}
    if "main" in called or any(n.name in called for n in defined):
        return []
    for n in defined:
        args = n.args
        required = len(args.posonlyargs) + len(args.args) - len(args.defaults) + sum(
            d is None for d in args.kw_defaults)
        if isinstance(n, ast.AsyncFunctionDef):
            raise InfillInputError(f"{where}: {n.name} (line {n.lineno}) is async: only plain test functions are run")
        if required:
            raise InfillInputError(f"{where}: {n.name} (line {n.lineno}) takes arguments (pytest fixtures are not "
                                   "supported): give it none, or call it in the file")
    return [n.name for n in defined]


def run_tests(code: str, tests: str, calls: list[str], *, module: str, timeout: float, isolation: str):
    """The sandbox's verdict (a `SandboxResult`) on `tests` run against the filled `code` (see the module
    docstring)."""
    from diffreason.sandbox import run_python

    if not module.isidentifier():
        raise InfillInputError(f"module name {module!r} is not a Python identifier")
    program = (DRIVER.replace("CODE_FILE", repr(CODE_FILE)).replace("TESTS_FILE", repr(TESTS_FILE))
               + f"__diffreason_tests({json.dumps(module)}, {json.dumps(calls)})\n")
    return run_python(program, files={CODE_FILE: code, TESTS_FILE: tests}, timeout=timeout, isolation=isolation,
                      verdict="last")
