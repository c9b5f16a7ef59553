"""Fixtures for the reference trainer tests: the real trainer (build + Run) in-process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from trainer_helpers import ROOT, tiny_args

# tests/probes has no __init__.py: once pytest puts tests/ on sys.path, `import probes` would find that
# directory as a namespace package instead of the real (editable-installed) one. The repository root on
# sys.path makes the regular package win, whatever the collection order.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture
def tiny_pipeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Build (not start) a tiny-preset Run in-process: ``tiny_pipeline("--drafter-devices", "cpu,cpu")``."""
    from reference_trainer.build import build
    from reference_trainer.cli import parse_args
    from reference_trainer.train import Run

    monkeypatch.setenv("DFLASH_DIAG_BOARD_DIR", str(tmp_path / "board"))
    threads = torch.get_num_threads()

    def make(*extra: str, sequential: bool = False) -> Run:
        config, _ = parse_args(tiny_args(tmp_path, "--probes", "none", *extra))
        return Run(build(config), sequential=sequential)

    yield make
    torch.set_num_threads(threads)
