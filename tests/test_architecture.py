"""The source tree's shape: no import cycle (imports inside functions included), modules under
400 lines, functions under 60 lines, no citation of files outside the repository."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "swarmrl"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PKG.rglob("*.py")}


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(path: Path) -> set[str]:
    return imports_in(path.read_text(), module_name(path), path.name == "__init__.py")


def imports_in(text: str, here: str, is_package: bool = False) -> set[str]:
    """swarmrl modules a module's source imports, at module level or inside functions (not under
    `if TYPE_CHECKING:`, which never runs). `from pkg import sub` counts as importing pkg.sub."""
    tree = ast.parse(text)
    skip = {id(n) for block in ast.walk(tree) if _type_checking_block(block) for n in ast.walk(block)}
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("swarmrl")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                pkg = here.split(".") if is_package else here.split(".")[:-1]
                base = ".".join(pkg[:len(pkg) - node.level + 1] + ([base] if base else []))
            if not base.startswith("swarmrl"):
                continue
            for a in node.names:
                out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base)
    return {m for m in out if m in MODULES and m != here}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path (first module repeated at the end), or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        path.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return path[path.index(m):] + [m]
            if m not in state and (found := visit(m)):
                return found
        path.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def test_find_cycle_finds_a_loop_held_by_a_function_level_import():
    """The checker itself: function-level imports count, TYPE_CHECKING ones do not, and a loop
    is found while a DAG passes."""
    probe = ("from typing import TYPE_CHECKING\n"
             "if TYPE_CHECKING:\n    from swarmrl.config import Config\n"
             "def g():\n    from swarmrl.rl import trainer\n    import swarmrl.build\n")
    assert imports_in(probe, "swarmrl.probe") == {"swarmrl.rl.trainer", "swarmrl.build"}
    assert imports_in("from . import arith\n", "swarmrl.tasks", is_package=True) == {"swarmrl.tasks.arith"}
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle_in_src():
    graph = {m: imports_of(p) for m, p in MODULES.items()}
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph))}"


def test_modules_under_400_lines():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_functions_under_60_lines():
    long = {}
    for m, p in MODULES.items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{m}.{node.name}"] = n
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


REPO = SRC.parent
TEXT_FILES = [p for d in ("src", "tests", "benchmarks", "configs", "docs", "examples", "scripts")
              for p in (REPO / d).rglob("*") if p.suffix in (".py", ".md", ".yaml", ".sh", ".toml")] + [REPO / "README.md"]


@pytest.mark.parametrize("pattern", [r"DESIGN\.md", r"\.\./shared", r"seeds/\d"])
def test_the_repository_cites_only_files_in_it(pattern):
    """The design lives in docs/ARCHITECTURE.md; no file points outside the repository."""
    me = Path(__file__).resolve()
    hits = [f"{p.relative_to(REPO)}:{i + 1}" for p in TEXT_FILES if p.resolve() != me and p.is_file()
            for i, line in enumerate(p.read_text(errors="replace").splitlines()) if re.search(pattern, line)]
    assert not hits, f"{pattern} cited at {hits}"


def test_architecture_doc_exists_and_names_every_package():
    doc = (SRC.parent / "docs" / "ARCHITECTURE.md").read_text()
    packages = sorted({m.split(".")[1] for m in MODULES if m.count(".") >= 1})
    missing = [p for p in packages if p not in doc]
    assert not missing, f"docs/ARCHITECTURE.md does not mention {missing}"
