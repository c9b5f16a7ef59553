from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import probes


@pytest.fixture
def board_dir(tmp_path: Path) -> Path:
    d = tmp_path / "boards"
    d.mkdir(mode=0o700)
    os.chmod(d, 0o700)
    return d


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
