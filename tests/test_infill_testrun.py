"""A user's tests against a filled file (`tasks.infill.testrun`), run in the real sandbox: what passes is the tests
running to their end against the code — not a fill or a file that leaves early with status 0."""

import pytest

from diffreason.tasks.infill.holes import InfillInputError
from diffreason.tasks.infill.testrun import run_tests, uncalled_tests

ADD = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"


def verdict(code: str, tests: str, module: str = "app") -> tuple[bool, str]:
    r = run_tests(code, tests, uncalled_tests(tests), module=module, timeout=20.0, isolation="auto")
    return r.passed, r.stderr


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
    assert verdict(ADD, "from app import add as plus\nimport app\nassert plus(2, 3) == app.add(2, 3) == 5\n")[0]
    passed, stderr = verdict(ADD, "from add import add\n", module="app")
    assert not passed and "No module named 'add'" in stderr


def test_a_future_import_in_the_tests_is_theirs():
    """(The tests were appended to the code: a `from __future__` line there was a SyntaxError for every fill.)"""
    assert verdict(ADD, "from __future__ import annotations\nassert add(2, 3) == 5\n")[0] is True


UNITTEST = """import unittest

class TestAdd(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)
"""


@pytest.mark.parametrize("ending", ["\nif __name__ == '__main__':\n    unittest.main()\n", ""])
def test_unittest_cases_run_with_or_without_unittest_main(ending):
    assert verdict(ADD, UNITTEST + ending)[0] is True
    passed, stderr = verdict(WRONG, UNITTEST + ending)
    assert passed is False and "FAIL: test_add" in stderr


def test_pytest_style_functions_are_called_when_the_file_does_not_call_them():
    tests = "def test_add():\n    assert add(2, 3) == 5\n\ndef test_zero():\n    assert add(0, 0) == 0\n"
    assert uncalled_tests(tests) == ["test_add", "test_zero"]
    assert verdict(ADD, tests)[0] is True
    assert verdict(WRONG, tests)[0] is False
    calling = tests + "\ntest_add()\n"  # (a script that runs its own checks: nothing more is called)
    assert uncalled_tests(calling) == []


@pytest.mark.parametrize("tests, message", [
    ("def test_add(tmp_path):\n    pass\n", "test_add (line 1) takes arguments (pytest fixtures are not supported)"),
    ("async def test_add():\n    pass\n", "test_add (line 1) is async"),
])
def test_test_functions_the_run_cannot_call_are_refused(tests, message):
    with pytest.raises(InfillInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        uncalled_tests(tests)
