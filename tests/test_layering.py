"""The package's layers, read off the source with `ast` (nothing is imported): the core (diffreason/, any subpackage
included) imports no backend, no eval and not the command line; nothing but the command line imports it; the tasks
import neither backends nor evals; and module-level imports form no cycle.

    core (diffreason/*)  <-  tasks/  <-  backends/, evals/  <-  diffreason/cli.py

The folders and the package each installs as come from pyproject.toml's package-dir, so new modules and subpackages
(diffreason/constrain/, tasks/json_schema/, ...) are covered without being named here.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = {
    package: ROOT / folder
    for package, folder in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].items()
}
CORE, BACKENDS, TASKS, EVALS, CLI = (
    "diffreason", "diffreason.backends", "diffreason.tasks", "diffreason.evals", "diffreason.cli",
)


def _modules() -> dict[str, Path]:
    """Every module of the installed packages: dotted name -> file. A folder under diffreason/ that another package
    installs from (none today) is that package's, not the core's."""
    owned = {folder.resolve(): package for package, folder in PACKAGE_DIRS.items()}
    modules = {}
    for package, folder in PACKAGE_DIRS.items():
        for file in sorted(folder.rglob("*.py")):
            parts = file.relative_to(folder).with_suffix("").parts
            if any(p.startswith(".") or p == "__pycache__" for p in parts):
                continue
            owner = next((owned[p] for p in (folder / Path(*parts)).resolve().parents if p in owned), package)
            if owner != package:
                continue
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            modules[".".join((package, *parts))] = file
    return modules


MODULES = _modules()


def _imports(name: str, file: Path, top_level_only: bool = False) -> set[str]:
    """Modules `name` imports (`from p import m` counts as p and p.m), relative imports resolved. With
    `top_level_only`, only what runs on import: not inside functions, not under `if TYPE_CHECKING:`."""
    tree = ast.parse(file.read_text(encoding="utf-8"), str(file))
    package = name if file.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if top_level_only and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return
        if top_level_only and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names if alias.name != "*")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _layer(module: str) -> str:
    for package in (BACKENDS, TASKS, EVALS):
        if _within(module, package):
            return package
    return CLI if module == CLI else CORE


def _violations(importer_layer: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{name} imports {target}"
        for name, file in MODULES.items()
        if _layer(name) == importer_layer
        for target in _imports(name, file)
        if any(_within(target, f) for f in forbidden)
    )


def test_the_modules_are_found():
    assert {CLI, "diffreason.engine", "diffreason.attention", "diffreason.tasks.sudoku",
            "diffreason.backends.sglang_runtime", "diffreason.evals.sudoku_eval"} <= set(MODULES)
    assert all(_layer(name) == package for package in PACKAGE_DIRS if package != CORE
               for name in MODULES if _within(name, package))


def test_the_core_imports_no_backend_eval_or_command_line():
    assert _violations(CORE, (BACKENDS, EVALS, CLI)) == []


def test_the_tasks_import_no_backend_eval_or_command_line():
    assert _violations(TASKS, (BACKENDS, EVALS, CLI)) == []


@pytest.mark.parametrize("layer", [BACKENDS, EVALS])
def test_backends_and_evals_do_not_import_the_command_line(layer):
    assert _violations(layer, (CLI,)) == []


def test_the_lazy_public_names_come_from_the_core():
    """diffreason/__init__.py imports its public names on first use (importlib, which `ast` cannot follow): each
    from a core module."""
    tree = ast.parse((PACKAGE_DIRS[CORE] / "__init__.py").read_text(encoding="utf-8"))
    exports = next(
        ast.literal_eval(node.value) for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_EXPORTS" for t in node.targets)
    )
    sources = {f"{CORE}.{module}" for module in exports.values()}
    assert sources <= set(MODULES)
    assert {s for s in sources if _layer(s) != CORE} == set()


def test_module_level_imports_form_no_cycle():
    """What runs on import (not the imports inside functions, which the command line uses to stay fast)."""
    graph = {
        name: {t for t in _imports(name, file, top_level_only=True) if t in MODULES and t != name}
        for name, file in MODULES.items()
    }
    # importing a.b.c runs a and a.b first: a submodule's import of its own package is no edge back
    graph = {name: {t for t in targets if not _within(name, t)} for name, targets in graph.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                cycles.append(" -> ".join([*path[path.index(target):], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []
