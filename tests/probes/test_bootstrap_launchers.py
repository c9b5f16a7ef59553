"""The `dflash-diag run` bootstrap tells a launcher of ranks (torchrun) from the program it runs: the launcher leaves
the probes to its ranks (probes/_bootstrap/sitecustomize.py). Its two predicates, read out of the file (importing
it would run the bootstrap in this process); the whole path runs in tests/casebook/test_jobs.py's probes mode."""

from __future__ import annotations

import ast
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

BOOTSTRAP = Path(__file__).resolve().parents[2] / "probes" / "_bootstrap" / "sitecustomize.py"


def _functions() -> dict[str, Callable[..., Any]]:
    tree = ast.parse(BOOTSTRAP.read_text())
    wanted = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("_is_launcher", "_is_rank")]
    consts = [n for n in tree.body if isinstance(n, ast.Assign)
              and any(isinstance(t, ast.Name) and t.id.startswith("_LAUNCHER") for t in n.targets)]
    namespace: dict[str, Any] = {"os": os, "Mapping": Mapping}
    exec(compile(ast.Module(body=[*consts, *wanted], type_ignores=[]), str(BOOTSTRAP), "exec"), namespace)
    return {name: namespace[name] for name in ("_is_launcher", "_is_rank")}


@pytest.mark.parametrize(("argv", "launcher"), [
    (["/venv/bin/python3", "/venv/bin/torchrun", "--nproc-per-node", "4", "train.py"], True),
    (["python", "-u", "/usr/local/bin/torchrun", "train.py"], True),
    (["python", "-m", "torch.distributed.run", "--nproc-per-node", "2", "train.py"], True),
    (["python", "-X", "dev", "-m", "torch.distributed.launch", "train.py"], True),
    (["python", "-W", "ignore", "-m", "torch.distributed.run", "t.py"], True),
    (["python", "train.py", "torchrun"], False),  # an argument that happens to be called torchrun
    (["python", "-m", "reference_trainer"], False),
    (["python", "-c", "import torchrun"], False),
    (["python"], False),
    ([], False),
])
def test_launchers_are_told_from_programs(argv: list[str], launcher: bool) -> None:
    assert _functions()["_is_launcher"](argv) is launcher


def test_a_rank_is_a_process_with_a_numeric_rank() -> None:
    is_rank = _functions()["_is_rank"]
    assert is_rank({"RANK": "0"}) and is_rank({"LOCAL_RANK": "3"})
    assert not is_rank({}) and not is_rank({"RANK": ""}) and not is_rank({"RANK": "x"})
