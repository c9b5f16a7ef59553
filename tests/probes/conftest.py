from __future__ import annotations

import importlib.machinery
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import probes


@pytest.fixture
def session_factory(board_dir: Path) -> Iterator:
    """Starts probe sessions (only the named probes) and closes them at the end of the test."""
    started = []

    def make(*names: str, **kw: object) -> probes.ProbeSession:
        from probes.session import ProbeSession

        config = probes.ProbesConfig(enabled=frozenset(names), board_dir=str(board_dir), **kw)
        s = ProbeSession(config)
        started.append(s)
        return s

    yield make
    for s in started:
        s.close()


@pytest.fixture
def half_imported(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Puts in sys.modules what importlib has there while a module's body is still running: an empty module whose
    spec says ``_initializing`` (the test puts the real one back with monkeypatch.setitem)."""

    def plant(name: str) -> None:
        half = types.ModuleType(name)
        half.__spec__ = importlib.machinery.ModuleSpec(name, None)
        half.__spec__._initializing = True  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, name, half)

    return plant
