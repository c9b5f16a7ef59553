"""The snapshot's sampling window catches what a short doctor run catches (issue 14): enough samples per thread."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from conftest_snapshot import Spawn

from dflash_diag.cli import main
from dflash_diag.errors import ExitCode

pytestmark = pytest.mark.slow


def test_default_window_gives_every_thread_enough_samples(spawn: Spawn, tmp_path: Path) -> None:
    """1 s at a duty-capped 10 Hz gave 2-7 samples on a loaded box (at most 11 on an idle one), too few for a
    GIL hog's waiters to pass the sampled-evidence bound; 1.5 s of a burst gives ~30 on this loaded 2-core box."""
    child = spawn("--hog")
    out = tmp_path / "s.tar.gz"
    assert main(["snapshot", str(child.pid), "-o", str(out)]) == ExitCode.OK
    with tarfile.open(out) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/snapshot.json"))
        handle = tar.extractfile(member)
        assert handle is not None
        doc = json.load(handle)
    sampling = doc["sampling"]
    assert sampling["window_s"] >= 1.2, sampling
    assert sampling["stack_samples"] >= 12, sampling
    assert doc["timings_s"]["total"] < 3.0, doc["timings_s"]  # gathering stays inside the budget's deadline
