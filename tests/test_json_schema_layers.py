"""The JSON-schema compiler's shape (tasks/json_schema): each module imports only the modules below it, the API module
on top imports only load.py when it is imported, and the keyword table names methods that exist."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tasks" / "json_schema"
# a module may import the modules listed before it (the mixin modules do not import each other: they meet in compiler)
ORDER = ["patterns", "load", "keywords", "base", "rewrite", "negation", "values", "containers", "layout", "compiler",
         "__init__"]
MIXINS = {"rewrite", "negation", "values", "containers", "layout"}


def _package_imports(name: str) -> set[str]:
    """The modules of the package that module `name` imports anywhere (in functions too)."""
    out = set()
    for node in ast.walk(ast.parse((PACKAGE / f"{name}.py").read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("diffreason.tasks.json_schema"):
            parts = node.module.split(".")
            out.add(parts[3] if len(parts) > 3 else "__init__")
    return out


def test_every_module_is_placed():
    assert sorted(p.stem for p in PACKAGE.glob("*.py")) == sorted(ORDER)


@pytest.mark.parametrize("name", ORDER)
def test_each_module_imports_only_modules_below_it(name):
    for used in _package_imports(name):
        assert ORDER.index(used) < ORDER.index(name), f"{name}.py imports {used}.py, a module above it"
        assert not (name in MIXINS and used in MIXINS), f"{name}.py imports {used}.py: mixins meet in compiler.py"


def test_loading_a_schema_imports_neither_torch_nor_the_compiler():
    code = ("import sys; import diffreason.tasks.json_schema as m; m.load_schema_file; "
            "assert 'torch' not in sys.modules and 'diffreason.tasks.json_schema.compiler' not in sys.modules; "
            "m.Budget; assert 'diffreason.tasks.json_schema.base' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_the_keyword_table_names_methods_of_the_compiler():
    from diffreason.tasks.json_schema.compiler import SchemaCompiler
    from diffreason.tasks.json_schema.keywords import APPLIES, KEYWORDS, SUPPORTED, TYPES, VALUE_REGEXES

    for key, row in KEYWORDS.items():
        for method in (*row.read_by, row.merge, row.negate):
            assert method is None or callable(getattr(SchemaCompiler, method, None)), (key, method)
        assert set(row.writes) <= set(TYPES) and set(row.applies) <= set(TYPES), key
    assert set(VALUE_REGEXES) == set(TYPES) == set(SUPPORTED) == set(APPLIES)
    assert all("type" in SUPPORTED[kind] for kind in TYPES)
