"""The layer rules, checked on the import statements of every module.

dflash_contract (stdlib: the board contract, /proc identity, the redactor; imported by probes and tool alike) |
probes/ (stdlib + torch) | dflash_diag/model (stdlib) | sources (all I/O, reads) | inject (writes into a live
process: attach/detach) | analysis (pure) | observe (a target over a window, through sources) | view (top's frame
and batch report) | tui (the screen: model + view only), snapshot | cli (wires real sources into everything).
docs/architecture.md describes the layers and tabulates these rules.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STDLIB = set(sys.stdlib_module_names)


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _top(name: str) -> str:
    return name.split(".", 1)[0]


def _within(name: str, prefixes: set[str] | tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _violations(package: str, allowed: set[str], banned: tuple[str, ...] = ()) -> list[str]:
    """Imports in ``package`` that are banned, or neither stdlib nor under an ``allowed`` prefix."""
    bad = []
    for path in _modules(package):
        for name in _imports(path):
            if _within(name, banned) or not (_top(name) in STDLIB or _within(name, allowed)):
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    return bad


def test_contract_is_stdlib_only_and_imports_nobody() -> None:
    assert _violations("dflash_contract", {"dflash_contract"}) == []


def test_probes_use_only_stdlib_torch_and_the_contract() -> None:
    assert _violations("probes", {"torch", "probes", "dflash_contract"}) == []


def test_model_is_stdlib_only() -> None:
    assert _violations("dflash_diag/model", {"dflash_diag.model", "dflash_contract"},
                       ("dflash_diag.sources", "dflash_diag.analysis")) == []


def test_analysis_is_pure() -> None:
    banned = ("dflash_diag.sources", "dflash_diag.tui", "dflash_diag.cli", "dflash_diag.snapshot", "subprocess", "socket", "pynvml", "textual")
    assert _violations("dflash_diag/analysis", {"dflash_diag", "dflash_contract"}, banned) == []


def test_sources_do_not_import_presentation() -> None:
    banned = ("dflash_diag.tui", "dflash_diag.cli", "dflash_diag.snapshot", "dflash_diag.analysis", "textual", "rich")
    # dflash_contract (stdlib only) defines the board and where it lives, for writer and reader alike. PyYAML,
    # optional like pynvml, parses a program's YAML profile where it is installed (sources/configs.py).
    found = _violations("dflash_diag/sources", {"dflash_diag", "pynvml", "dflash_contract", "yaml"}, banned)
    # The one exception: the job's own c10d store is joined with torch's client (test below).
    assert [v for v in found if v != "dflash_diag/sources/store.py imports torch.distributed"] == []


def test_only_the_store_source_imports_torch_and_only_inside_functions() -> None:
    """``sources/store.py`` joins a job's c10d store with torch's own client: torch is imported there alone, inside
    the functions that connect, so no other command (and not ``--help``) pays for importing torch."""
    users = sorted(str(p.relative_to(ROOT)) for p in _modules("dflash_diag")
                   if any(_top(n) == "torch" for n in _imports(p)))
    assert users == ["dflash_diag/sources/store.py"]
    tree = ast.parse((ROOT / "dflash_diag/sources/store.py").read_text())
    top_level = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert not any(_top(a.name) == "torch" for n in top_level if isinstance(n, ast.Import) for a in n.names)


def test_observe_sits_between_the_readers_and_the_commands() -> None:
    """``observe`` wires the readers (``sources``) into one window of a target; it presents nothing and writes into
    no process, and nothing below it (the readers, the pure analysis, the views, the screen) reaches up into it."""
    banned = ("dflash_diag.view", "dflash_diag.tui", "dflash_diag.cli", "dflash_diag.snapshot", "dflash_diag.export",
              "dflash_diag.inject", "textual", "rich", "probes", "subprocess")
    assert _violations("dflash_diag/observe", {"dflash_diag", "dflash_contract"}, banned) == []
    for package in ("model", "sources", "analysis", "view", "tui", "inject"):
        assert [v for v in _violations(f"dflash_diag/{package}", set(), ())
                if " imports dflash_diag.observe" in v] == [], package


def test_sources_only_read_the_injector_is_apart() -> None:
    """``sources`` reads the outside world; writing into a live process is ``inject``'s alone, and only the
    commands start an injection (``cli``; snapshot and export never do)."""
    assert [v for v in _violations("dflash_diag/sources", set(), ()) if " imports dflash_diag.inject" in v] == []
    users = sorted({str(p.relative_to(ROOT).parts[1]) for p in _modules("dflash_diag")
                    if p.relative_to(ROOT).parts[1] not in ("inject", "cli")
                    and any(_within(n, ("dflash_diag.inject",)) for n in _imports(p))})
    assert users == []


def test_inject_reads_through_sources_and_never_presents() -> None:
    banned = ("dflash_diag.tui", "dflash_diag.cli", "dflash_diag.snapshot", "dflash_diag.analysis",
              "dflash_diag.view", "dflash_diag.export", "textual", "rich", "probes")
    assert _violations("dflash_diag/inject", {"dflash_diag", "dflash_contract"}, banned) == []


def test_the_attach_protocol_loads_alone() -> None:
    """The bootstrap loads ``dflash_contract/attach.py`` by its path inside the user's program, before anything
    of ours is importable there: it may import the standard library only, not even the rest of its package."""
    assert [n for n in _imports(ROOT / "dflash_contract" / "attach.py") if _top(n) not in STDLIB] == []


def test_the_tool_never_imports_the_probes() -> None:
    """The tool reads what probes publish through the contract; it does not run probe code."""
    for package in ("dflash_diag/model", "dflash_diag/sources", "dflash_diag/analysis", "dflash_diag/tui",
                    "dflash_diag/inject"):
        assert [v for v in _violations(package, set(), ()) if " imports probes" in v] == []


def test_tui_sees_frames_only() -> None:
    """The screen renders frames: it never builds I/O (sources), runs analyses, or writes bundles (snapshot)."""
    allowed = {"dflash_diag.model", "dflash_diag.view", "dflash_diag.tui", "dflash_diag.errors", "textual", "rich"}
    banned = ("pynvml", "subprocess", "socket")
    assert _violations("dflash_diag/tui", allowed, banned) == []


def test_view_is_plain() -> None:
    """top's frame and batch report: no screen library (``top --batch`` runs without Textual), no I/O."""
    assert _violations("dflash_diag/view", {"dflash_diag.model", "dflash_diag.view", "dflash_contract"},
                       ("subprocess", "socket")) == []


def test_batch_top_does_not_import_the_tui() -> None:
    """``top --batch`` has no screen: its import chain stays out of dflash_diag.tui and textual."""
    code = ("import sys, dflash_diag.cli.top, dflash_diag.cli.top_live, dflash_diag.view.report; "
            "bad = sorted(m for m in sys.modules if m.startswith(('dflash_diag.tui', 'textual'))); print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("package", ["dflash_contract", "dflash_diag", "probes", "reference_trainer"])
def test_no_relative_imports(package: str) -> None:
    rel = [
        str(p.relative_to(ROOT))
        for p in _modules(package)
        for n in ast.walk(ast.parse(p.read_text()))
        if isinstance(n, ast.ImportFrom) and n.level > 0
    ]
    assert rel == []


def test_exports_sit_above_analysis_and_below_the_cli() -> None:
    # Builders of traces/profiles are pure; the Prometheus collector reads boards through sources, like snapshot.
    # Both name the board's keys by the contract's constants (stdlib only).
    banned = ("dflash_diag.tui", "dflash_diag.cli", "textual", "subprocess")
    allowed = {"dflash_diag", "dflash_contract", "prometheus_client"}
    assert _violations("dflash_diag/export", allowed, banned) == []
    pure = ("dflash_diag.sources", "prometheus_client", "socket", "pynvml")
    for module in ("trace", "speedscope", "timebase", "kernels"):
        path = ROOT / "dflash_diag" / "export" / f"{module}.py"
        assert [n for n in _imports(path) if _within(n, pure)] == [], module


# The floors of the house, bottom up (docs/architecture.md's picture). An import, at module level or inside a
# function, goes to a lower floor only: a function-local import that goes up is a layer rule broken out of the
# loader's sight. Two layers on one floor do not import each other (``snapshot`` and ``export``'s exchange is the
# one exception: a bundle holds a trace).
FLOORS = {"dflash_contract": 0, "probes": 1, "model": 1, "errors": 1, "dflash_diag": 1, "sources": 2,
          "reference_trainer": 2, "inject": 3, "analysis": 3, "observe": 4, "view": 4, "tui": 5, "export": 5,
          "snapshot": 6, "cli": 7, "__main__": 8}
SAME_FLOOR_ALLOWED = {("snapshot", "export")}
PURE = ("model", "analysis", "view")  # plain Python with no start-up to save: no import hides inside a function


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    from test_import_cycles import PACKAGES, import_graph

    return import_graph(ROOT, PACKAGES)


def upward_imports(eager: dict[str, set[str]], lazy: dict[str, set[str]]) -> list[str]:
    from test_import_cycles import _layer

    bad = []
    for kind, graph in (("", eager), ("function-local or type-only ", lazy)):
        for module, targets in sorted(graph.items()):
            for target in sorted(targets):
                src, dst = _layer(module), _layer(target)
                if src == dst or (src, dst) in SAME_FLOOR_ALLOWED:
                    continue
                if FLOORS.get(dst, 99) >= FLOORS.get(src, 99):
                    bad.append(f"{module} ({src}, floor {FLOORS.get(src)}) {kind}imports {target} "
                               f"({dst}, floor {FLOORS.get(dst)})")
    return bad


def test_no_import_goes_up_a_floor_not_even_inside_a_function() -> None:
    eager, lazy = _graph()
    assert upward_imports(eager, lazy) == []


def test_the_pure_layers_hide_no_import_in_a_function() -> None:
    """``model``, ``analysis`` and ``view`` load in milliseconds and import nothing heavy: an import inside one of
    their functions can only be hiding a cycle (the 2026-12-04 review counted 17 in ``analysis``)."""
    from test_import_cycles import _imports as statements

    hidden = []
    for layer in PURE:
        for path in _modules(f"dflash_diag/{layer}"):
            tree = ast.parse(path.read_text(), filename=str(path))
            for fn in ast.walk(tree):
                if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                    hidden += [f"{path.relative_to(ROOT)}:{node.lineno}" for node, _ in statements(fn)
                               if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dflash")]
    assert hidden == []


def test_an_upward_function_local_import_is_caught(tmp_path: Path) -> None:
    """Guards the check itself: a planted lazy import from analysis up into cli is reported."""
    eager = {"dflash_diag.analysis.x": set(), "dflash_diag.cli.y": {"dflash_diag.analysis.x"}}
    lazy = {"dflash_diag.analysis.x": {"dflash_diag.cli.y"}, "dflash_diag.cli.y": set()}
    assert upward_imports(eager, {k: set() for k in lazy}) == []
    assert len(upward_imports(eager, lazy)) == 1
