"""A user's tests against a filled file (`tasks.infill.testrun`), run in the real sandbox: what passes is the tests
running to their end against the code, every test they define run — not a fill or a file that leaves early with
status 0, nor tests that were never run."""

import pytest

from diffreason.tasks.infill.holes import InfillInputError
from diffreason.tasks.infill.testrun import check_test_functions, failure_line, module_name, run_tests

ADD = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"


def verdict(code: str, tests: str, module: str = "app") -> tuple[bool, str]:
    check_test_functions(tests)
    r = run_tests(code, tests, module=module, timeout=20.0, isolation="auto")
    return r.passed, r.stderr


def both(tests: str, module: str = "app") -> tuple[bool, bool]:
    """(passes with the right add, passes with the wrong one)"""
    return verdict(ADD, tests, module)[0], verdict(WRONG, tests, module)[0]


@pytest.mark.parametrize("body", ["raise SystemExit", "import sys; sys.exit(0)", "raise SystemExit(0)"])
def test_a_fill_that_exits_early_with_status_0_does_not_pass(body):
    """(verdict "end" took any SystemExit(0) as unittest.main()'s: these fills passed `assert add(2, 3) == 5`.)"""
    assert verdict(f"def add(a, b):\n    {body}\n", "assert add(2, 3) == 5\n")[0] is False


def test_tests_that_exit_before_their_checks_do_not_pass():
    assert verdict(WRONG, "raise SystemExit(0)\nassert add(2, 3) == 5\n")[0] is False


def test_the_files_main_block_does_not_run_and_the_code_is_importable_as_its_module():
    """(A file ending in `sys.exit(main())` ended every run before the tests: any fill passed.)"""
    code = "import sys\n\n" + ADD + "\n\nif __name__ == '__main__':\n    sys.exit(0)\n"
    assert verdict(code, "assert add(2, 3) == 5\n")[0] is True
    assert verdict(code.replace("a + b", "a - b"), "assert add(2, 3) == 5\n")[0] is False
    assert both("from app import add as plus\nimport app, importlib, inspect\nassert plus(2, 3) == app.add(2, 3) == 5\n"
                "assert 'a + b' in inspect.getsource(app.add) or 'a - b' in inspect.getsource(app.add)\n"
                "importlib.reload(app)\n") == (True, False)
    passed, stderr = verdict(ADD, "from add import add\nassert add(2, 3) == 5\n", module="app")
    assert not passed and "No module named 'add'" in stderr


@pytest.mark.parametrize("stem", ["math", "collections", "os", "re", "unittest"])
def test_a_file_named_as_a_standard_module_does_not_replace_it(stem):
    """(`math.py`'s code replaced the math module for the tests and unittest: every fill failed.)"""
    tests = "import math, collections, os, re\nassert math.isclose(1, 1) and os.name\nassert add(2, 3) == 5\n"
    assert both(tests, module=stem) == (True, False)


def test_a_dunder_file_name_runs_as_the_default_module():
    """(`__main__.py` replaced the tests' own main module: unittest found no test and a wrong fill passed.)"""
    assert module_name("__main__") == module_name("__init__") == "solution" and module_name("app") == "app"
    with pytest.raises(InfillInputError, match="dunder"):
        run_tests(ADD, "pass\n", module="__main__", timeout=5.0, isolation="auto")


def test_a_future_import_in_the_tests_is_theirs():
    """(The tests were appended to the code: a `from __future__` line there was a SyntaxError for every fill.)"""
    assert both("from __future__ import annotations\nassert add(2, 3) == 5\n") == (True, False)


UNITTEST = """import unittest

class TestAdd(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

class TestZero(unittest.TestCase):
    def test_zero(self):
        self.assertEqual(add(0, 3), 3)
"""


@pytest.mark.parametrize("ending", [
    "\nif __name__ == '__main__':\n    unittest.main()\n",
    "",
    "\nunittest.main(defaultTest='TestZero')\n",  # (ran only TestZero: the other TestCase was never run)
    "\nunittest.TextTestRunner().run(unittest.defaultTestLoader.loadTestsFromTestCase(TestAdd))\n",  # (result unread)
    "\nunittest.main(exit=True)\n",
])
def test_every_unittest_case_runs_and_any_failure_fails(ending):
    assert both(UNITTEST + ending) == (True, False)
    passed, stderr = verdict(WRONG, UNITTEST + ending)
    assert "test_add" in stderr


@pytest.mark.parametrize("tests", [
    "def test_add():\n    assert add(2, 3) == 5\n",
    "def test_a():\n    pass\n\ndef test_add():\n    assert add(2, 3) == 5\n\ntest_a()\n",  # (only one called)
    "from app import add\n\ndef main():\n    pass\n\ndef test_add():\n    assert add(2, 3) == 5\n\nmain()\n",
    "def test_add():\n    assert add(2, 3) == 5\n\ndef test_twice():\n    test_add()\n",  # (called in another test)
    "import sys\nif sys.version_info > (3,):\n    def test_add():\n        assert add(2, 3) == 5\n",
    "class TestAdd:\n    def test_add(self):\n        assert add(2, 3) == 5\n",  # (pytest's class style)
    "class Checks:\n    def test_add(self):\n        assert add(2, 3) == 5\n\nclass TestAdd(Checks):\n    pass\n",
    "class TestAdd:\n    def setup_method(self, method):\n        self.a = 2\n\n    def test_add(self):\n"
    "        assert add(self.a, 3) == 5\n",
    "def setup_module():\n    global A\n    A = 2\n\ndef test_add():\n    assert add(A, 3) == 5\n",
    # (a runner of the file's own that catches each failure: the test still failed)
    "def test_add():\n    assert add(2, 3) == 5\n\nfor name, f in list(globals().items()):\n"
    "    if name.startswith('test'):\n        try:\n            f()\n        except AssertionError:\n"
    "            print('FAIL', name)\n",
])
def test_test_functions_the_file_never_calls_are_run(tests):
    """(Any call of a test function anywhere, or of `main`, switched them all off; under `if` or in a pytest class
    they were never run: a wrong fill passed.)"""
    assert both(tests) == (True, False)


def test_helper_classes_named_test_star_with_a_constructor_are_left_alone():
    tests = "class TestData:\n    def __init__(self, n):\n        self.n = n\n\nassert add(TestData(2).n, 3) == 5\n"
    assert both(tests) == (True, False)


@pytest.mark.parametrize("tests, message", [
    ("def test_add(tmp_path):\n    pass\n", "test_add (line 1) takes arguments (pytest fixtures are not supported)"),
    ("async def test_add():\n    pass\n", "test_add (line 1) is async"),
    ("if True:\n    def test_add(x):\n        pass\n", "test_add (line 2) takes arguments"),
    ("class TestAdd:\n    def test_add(self, tmp_path):\n        pass\n", "test_add (line 2) takes arguments"),
])
def test_test_functions_the_run_cannot_call_are_refused(tests, message):
    with pytest.raises(InfillInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_test_functions(tests)


def test_a_test_function_the_file_calls_with_arguments_is_not_refused():
    check_test_functions("def test_add(a, b):\n    assert add(a, b) == a + b\n\ntest_add(2, 3)\n")


def test_a_failure_names_the_line_of_the_tests():
    passed, stderr = verdict(WRONG, "x = 1\nassert add(2, 3) == 5\n")
    assert not passed and failure_line(stderr) == "AssertionError (tests.py line 2: assert add(2, 3) == 5)"
    passed, stderr = verdict(WRONG, UNITTEST)
    assert failure_line(stderr).startswith("AssertionError: -1 != 5 (tests.py line 5: self.assertEqual(add(2, 3), 5))")


def test_a_failure_after_a_flood_of_stderr_still_names_its_line():
    """QA, 2026-12-07: past the output cap only the start of stderr was kept, so the failure read as the truncation
    notice; the end is kept too."""
    passed, stderr = verdict(WRONG, "import sys\nsys.stderr.write('y' * 2_000_000)\nassert add(2, 3) == 5\n")
    assert not passed and "output truncated" in stderr
    assert failure_line(stderr) == "AssertionError (tests.py line 3: assert add(2, 3) == 5)"


def test_a_failure_in_the_code_names_its_line_and_an_early_exit_says_so():
    """(The code's frames carry the sandbox's absolute path: the summary named a line of the code as the error; a
    run that left early showed unittest's last word, "OK".)"""
    r = run_tests("def add(a, b):\n    return a + c\n", "assert add(2, 3) == 5\n", module="app", timeout=20.0,
                  isolation="auto")
    assert failure_line(r.stderr, r.reason) == "NameError: name 'c' is not defined (src/app.py line 2: return a + c)"
    r = run_tests("def add(a, b):\n    raise SystemExit(0)\n", "assert add(2, 3) == 5\n", module="app", timeout=20.0,
                  isolation="auto")
    assert not r.passed and failure_line(r.stderr, r.reason).startswith("left before the end of the program")


@pytest.mark.parametrize("tests", [
    UNITTEST + "\nimport sys\nsys.exit(not unittest.main(exit=False).result.wasSuccessful())\n",
    "assert add(2, 3) == 5\nimport sys\nsys.exit(0)\n",
    "def test_add():\n    assert add(2, 3) == 5\n\nif __name__ == '__main__':\n    import sys\n    sys.exit(0)\n",
])
def test_the_tests_own_exit_0_in_their_last_statement_ends_them(tests):
    """(Any SystemExit failed: a unittest file ending in sys.exit(...) failed every fill.)"""
    assert both(tests) == (True, False)
    assert both(tests.replace("sys.exit(0)", "sys.exit(1)")) == (False, False) or "sys.exit(0)" not in tests


@pytest.mark.parametrize("tests", [
    "STATE = {}\n\ndef setup_function():\n    STATE['a'] = 2\n\ndef teardown_function(function):\n"
    "    STATE.clear()\n\ndef test_add():\n    assert add(STATE['a'], 3) == 5\n\ndef test_again():\n"
    "    assert add(STATE['a'], 1) == 3\n",
    "class TestAdd:\n    @classmethod\n    def setup_class(cls):\n        cls.a = 2\n\n"
    "    def test_add(self):\n        assert add(self.a, 3) == 5\n",
    "class TestHelper:\n    __test__ = False\n\n    def test_never(self):\n        raise AssertionError\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n",
    "import unittest\n\n@unittest.skip('later')\ndef test_never():\n    raise AssertionError\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n",
    "import unittest\n\ndef test_skips():\n    raise unittest.SkipTest('no')\n\ndef test_add():\n"
    "    assert add(2, 3) == 5\n",
    "import pytest\n\ndef test_add():\n    assert add(2, 3) == 5\n    with pytest.raises(TypeError):\n"
    "        add(1, 'a')\n",
    "import pytest\n\n@pytest.mark.skip(reason='later')\ndef test_never():\n    raise AssertionError\n\n"
    "@pytest.mark.skipif(True, reason='here')\ndef test_not_here():\n    raise AssertionError\n\n"
    "def test_skips():\n    pytest.skip('no')\n\ndef test_add():\n    assert add(2, 3) == 5\n",
])
def test_pytest_hooks_skips_and_installed_packages(tests):
    """(setup_function / setup_class were never called, skipped tests ran or failed, `import pytest` was a
    ModuleNotFoundError in the sandbox: right fills failed.)"""
    assert both(tests) == (True, False)


def test_the_code_under_test_imports_installed_packages():
    code = "from packaging.version import Version\n\n\ndef newer(a, b):\n    return Version(a) > Version(b)\n"
    assert verdict(code, "assert newer('1.10', '1.9')\n")[0] is True


@pytest.mark.parametrize("tests", [
    "def check(candidate):\n    assert candidate(2, 3) == 5\n",
    "import math\n\n\ndef check(candidate):\n    assert candidate(2, 3) == 5\n",
])
def test_tests_that_check_nothing_are_refused(tests):
    """(A HumanEval-style check(candidate) never called passed every fill.)"""
    with pytest.raises(InfillInputError, match="nothing in them checks the code"):
        check_test_functions(tests)
    check_test_functions(tests + "\ncheck(add)\n")
