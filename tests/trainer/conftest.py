"""Fixtures for the reference trainer tests: the real Pipeline in-process."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from trainer_helpers import tiny_args


@pytest.fixture
def tiny_pipeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """Build (not run) a tiny-preset Pipeline in-process: ``tiny_pipeline("--drafter-devices", "cpu,cpu")``."""
    from reference_trainer.train import Pipeline, parse_args

    monkeypatch.setenv("DFLASH_DIAG_BOARD_DIR", str(tmp_path / "board"))
    threads = torch.get_num_threads()

    def build(*extra: str, sequential: bool = False) -> Pipeline:
        config, _ = parse_args(tiny_args(tmp_path, "--probes", "none", *extra))
        pipeline = Pipeline(config, sequential=sequential)
        pipeline.build()
        return pipeline

    yield build
    torch.set_num_threads(threads)
