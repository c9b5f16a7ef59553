"""No import cycle among the modules of the four packages: not at module level, and not through the imports made
later either.

An import executed while a module is being loaded (a top-level statement, including those inside a top-level
``if``/``try``/``class``) is an *eager* edge; an import inside a function (or lambda) body, or under
``if TYPE_CHECKING:``, is a *lazy* one. The graph of both must be acyclic: a cycle of eager edges means one of two
modules runs against a half-initialised other, and a cycle that a function-local (or type-only) import closes is
the same knot hidden from the loader: two modules that each need the other are one module, or a third is missing
below them. A lazy import stays legal where it goes down (``cli`` keeps ``--help`` light that way;
``tests/test_layers.py`` fails on one that goes up a floor).

``from package import name`` is an edge to ``package.name`` when that is a module, else to ``package`` (its
``__init__``). The implicit import of a parent package that every ``import a.b.c`` makes is not an edge:
otherwise every ``__init__`` that re-exports a submodule would form a cycle with it.
"""

from __future__ import annotations

import ast
import graphlib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dflash_contract", "dflash_diag", "probes", "reference_trainer")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    return {_module_name(p, root): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST, *, lazy: bool = False) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement under ``node``, with whether it is lazy (in a function or TYPE_CHECKING block)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, lazy
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _imports(child, lazy=True)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield from _imports(ast.Module(body=[stmt], type_ignores=[]), lazy=True)
            for stmt in child.orelse:  # the `else:` of TYPE_CHECKING is what runs
                yield from _imports(ast.Module(body=[stmt], type_ignores=[]), lazy=lazy)
        else:
            yield from _imports(child, lazy=lazy)


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is one of our modules (``a.b.func`` -> ``a.b``); None if foreign."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _targets(node: ast.Import | ast.ImportFrom, importer: str, is_package: bool) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:  # relative: test_layers bans them, but a cycle through one must still be seen
        anchor = importer.split(".")
        anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
        base = ".".join([*anchor, base] if base else anchor)
    for alias in node.names:
        yield f"{base}.{alias.name}"  # _edges falls back to `base` when this is not a module


def import_graph(root: Path, packages: tuple[str, ...]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module-level edges, lazy edges) between the modules of ``packages``."""
    modules = _modules(root, packages)
    eager: dict[str, set[str]] = {m: set() for m in modules}
    lazy: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, is_lazy in _imports(tree):
            for target in _targets(node, name, path.name == "__init__.py"):
                resolved = _resolve(target, modules)
                if resolved is not None and resolved != name:
                    (lazy if is_lazy else eager)[name].add(resolved)
    return eager, lazy


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return None


def union(*graphs: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for graph in graphs:
        for module, targets in graph.items():
            out.setdefault(module, set()).update(targets)
    return out


def test_no_import_cycle_at_module_level() -> None:
    eager, _ = import_graph(ROOT, PACKAGES)
    cycle = find_cycle(eager)
    assert cycle is None, "module-level import cycle: " + " -> ".join(cycle or ())


def test_no_import_cycle_through_a_function_local_or_type_only_import() -> None:
    """A lazy import does not untie a knot, it hides it: split the module or move the shared part below both."""
    eager, lazy = import_graph(ROOT, PACKAGES)
    cycle = find_cycle(union(eager, lazy))
    assert cycle is None, "import cycle (closed by a function-local or TYPE_CHECKING import): " + " -> ".join(
        cycle or ()) + " (move what both need into a module below them)"


def test_the_graph_sees_the_imports_it_should() -> None:
    """Guards the parser itself: a graph with no edges would pass the cycle tests vacuously."""
    eager, lazy = import_graph(ROOT, PACKAGES)
    assert "dflash_diag.view.history" in eager["dflash_diag.view.frame"]  # from-import of a name
    assert "dflash_diag.snapshot.environment" in eager["dflash_diag.snapshot.gather"]  # from pkg import submodule
    assert "dflash_diag.inject.request" in lazy["dflash_diag.cli.doctor"]  # under TYPE_CHECKING
    assert "dflash_diag.sources.pyspy" in lazy["dflash_diag.snapshot.gather"]  # inside a function
    assert "dflash_diag.inject.request" not in eager["dflash_diag.cli.doctor"]


def _two_modules(root: Path, b_starts_with: str) -> Path:
    """``pkg.a`` imports ``pkg.b`` at the top; ``pkg.b`` begins with ``b_starts_with`` (which may import a back)."""
    pkg = root / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import Y\nX = 1\n")
    (pkg / "b.py").write_text(b_starts_with + "Y = 2\n")
    return root


@pytest.mark.parametrize(
    ("extra", "where"),
    [
        ("import pkg.a\n", "top"),
        ("if True:\n    from pkg.a import X\n", "top-level if"),
        ("from pkg import a\n", "from package import submodule"),
        ("from . import a\n", "relative"),
    ],
)
def test_a_planted_cycle_is_found(tmp_path: Path, extra: str, where: str) -> None:
    eager, _ = import_graph(_two_modules(tmp_path, b_starts_with=extra), ("pkg",))
    assert find_cycle(eager) is not None, where


@pytest.mark.parametrize(
    "extra",
    [
        "def f() -> None:\n    from pkg.a import X\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import X\n",
    ],
)
def test_a_cycle_a_lazy_import_closes_is_found(tmp_path: Path, extra: str) -> None:
    eager, lazy = import_graph(_two_modules(tmp_path, b_starts_with=extra), ("pkg",))
    assert find_cycle(eager) is None  # the loader would not trip on it ...
    assert lazy["pkg.b"] == {"pkg.a"}
    assert find_cycle(union(eager, lazy)) is not None  # ... but it is a cycle all the same


def _layer(module: str) -> str:
    """``dflash_diag.sources.pyspy`` -> ``sources``; ``probes.session`` -> ``probes``; the root keeps its name."""
    parts = module.split(".")
    return parts[1] if parts[0] == "dflash_diag" and len(parts) > 1 else parts[0]


LAYER_TABLE_HEADER = "| layer | imports at module level | imports lazily only |"


def _layer_names(cell: str) -> set[str]:
    """The layers a cell names: `snapshot.bundle` (why) -> snapshot; `dflash_diag.__version__` -> dflash_diag."""
    return {name.split(".")[0] for name in cell.split("`")[1::2]}


def _documented_layers() -> dict[str, tuple[set[str], set[str]]]:
    """docs/architecture.md's table: layer -> (imports at module level, imports lazily only)."""
    lines = (ROOT / "docs" / "architecture.md").read_text().splitlines()
    start = lines.index(LAYER_TABLE_HEADER) + 2  # past the header and the |---| line
    rows: dict[str, tuple[set[str], set[str]]] = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        layer, at_load, lazy_only = (c.strip() for c in line.strip().strip("|").split("|"))
        rows[layer.strip("`")] = (_layer_names(at_load), _layer_names(lazy_only))
    return rows


def test_architecture_doc_states_the_real_layer_imports() -> None:
    """docs/architecture.md lists which layer imports which; it must say what the code does today."""
    eager, lazy = import_graph(ROOT, PACKAGES)
    real: dict[str, tuple[set[str], set[str]]] = {}
    for graph, slot in ((eager, 0), (lazy, 1)):
        for module, targets in graph.items():
            src = _layer(module)
            if src in {"__main__", "errors"}:  # `python -m` entry and the error types: not layers of their own
                continue
            row = real.setdefault(src, (set(), set()))
            row[slot].update(_layer(t) for t in targets if _layer(t) != src)
    real = {k: (e, lz - e) for k, (e, lz) in real.items()}
    documented = _documented_layers()
    assert set(documented) >= {"model", "sources", "inject", "analysis", "view", "tui", "snapshot", "export", "cli"}
    assert {k: v for k, v in real.items() if k in documented} == documented
