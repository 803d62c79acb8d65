"""The constraint pipeline's shape (diffreason/constrain): each stage imports only the stages before it, no module
imports a private name from another file, nothing is patched into a library outside a scope, and a Compiler owns
every cache it uses."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# stage of each module: a module may import modules of its own stage listed before it, and of earlier stages
ORDER = ["cache", "regex", "dfa", "chardfa", "tokens", "compose", "automata", "slots", "compiler"]


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every `from diffreason... import names` and `import diffreason...` in a file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("diffreason"):
            out.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            out += [(alias.name, []) for alias in node.names if alias.name.startswith("diffreason")]
    return out


def _constrain_module(module: str, names: list[str]) -> list[str]:
    """The diffreason.constrain modules an import statement reaches."""
    if module == "diffreason.constrain":
        return [name for name in names if name in ORDER] or ["compiler"]  # (the package re-exports the compiler)
    if module.startswith("diffreason.constrain."):
        return [module.split(".")[2]]
    return []


@pytest.mark.parametrize("name", ORDER)
def test_each_stage_imports_only_earlier_stages(name):
    for module, names in _imports(ROOT / "diffreason" / "constrain" / f"{name}.py"):
        assert module != "diffreason.canvas" and not module.startswith(("diffreason.tasks", "diffreason.backends",
                                                                          "diffreason.evals", "diffreason.cli"))
        for used in _constrain_module(module, names):
            assert ORDER.index(used) < ORDER.index(name), f"{name}.py imports {used}.py, a later stage"


def test_no_private_name_crosses_a_file():
    for path in [*ROOT.glob("diffreason/*.py"), *ROOT.glob("diffreason/constrain/*.py"), *ROOT.glob("tasks/**/*.py"),
                 *ROOT.glob("backends/*.py"), *ROOT.glob("evals/*.py")]:
        for module, names in _imports(path):
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            assert not private, f"{path.relative_to(ROOT)} imports {private} from {module}"


def test_no_module_level_cache_in_the_pipeline():
    """Caches are attributes of the stage objects a Compiler owns, not module globals."""
    for path in ROOT.glob("diffreason/constrain/*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
                func = node.value.func
                assert getattr(func, "id", getattr(func, "attr", None)) not in ("BytesLRU", "OrderedDict", "dict"), (
                    f"{path.name}:{node.lineno} keeps a module-level cache")


def test_a_compiler_owns_its_caches_and_clears_them():
    from diffreason.canvas import CanvasTemplate
    from diffreason.constrain import Compiler
    from diffreason.tokenizer import train_byte_bpe

    tok = train_byte_bpe()
    compiler = Compiler.for_tokenizer(tok)
    assert Compiler.for_tokenizer(tok) is compiler and Compiler.for_tokenizer(train_byte_bpe()) is not compiler
    extra = compiler.cache("test.extra", 2**20)
    extra.get("k", lambda: "v", lambda v: 1)
    template = CanvasTemplate.from_regex('"[a-z]{1,4}"', tok, 8)
    assert compiler.matches_nothing("a[b]c", ()) is False and compiler.matches_nothing("a[^\\s\\S]", ()) is True
    caches = [compiler.slots.cache, compiler.automata.cache, compiler.chars.char_fsms, compiler.chars.patterns,
              compiler.adapter.group_cache, extra]
    assert all(cache.items for cache in caches)
    again = CanvasTemplate.from_regex('"[a-z]{1,4}"', tok, 8)
    assert again.masks is template.masks  # built once, shared
    compiler.clear()
    assert not any(cache.items for cache in caches)
    rebuilt = CanvasTemplate.from_regex('"[a-z]{1,4}"', tok, 8)
    assert rebuilt.masks is not template.masks and bool((rebuilt.masks == template.masks).all())


def test_interegular_is_left_as_it_was():
    """A lookahead goes to interegular's own construction, which runs with this package's crawl; afterwards the
    library's functions are its own again."""
    import interegular.fsm
    import interegular.patterns as patterns

    from diffreason.constrain.chardfa import CharLevel

    before = (interegular.fsm.crawl, patterns.Pattern.__dict__["to_fsm"], patterns._Concatenation.__dict__["to_fsm"],
              patterns._Repeated.__dict__["to_fsm"])
    fsm = CharLevel().char_fsm("(?=a)[ab]c")
    assert fsm.accepts("ac") and not fsm.accepts("bc")
    after = (interegular.fsm.crawl, patterns.Pattern.__dict__["to_fsm"], patterns._Concatenation.__dict__["to_fsm"],
             patterns._Repeated.__dict__["to_fsm"])
    assert after == before
