"""The snapshot's sampling window is doctor's and catches what doctor catches: enough samples per thread."""

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
    """The snapshot's window is doctor's (5 s of a burst): 1.5 s missed a hot loop that doctor's 5 s saw, and 1 s at
    a duty-capped 10 Hz gave 2-7 samples on a loaded box, too few for a GIL hog's waiters to pass the
    sampled-evidence bound."""
    from dflash_diag.observe import Window
    from dflash_diag.snapshot.gather import deadline_s

    child = spawn("--hog")
    out = tmp_path / "s.tar.gz"
    assert main(["snapshot", str(child.pid), "-o", str(out)]) == ExitCode.OK
    with tarfile.open(out) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/snapshot.json"))
        handle = tar.extractfile(member)
        assert handle is not None
        doc = json.load(handle)
    sampling = doc["sampling"]
    assert sampling["window_s"] >= 4.0, sampling
    assert sampling["stack_samples"] >= 30, sampling
    assert doc["timings_s"]["total"] < deadline_s(Window()) + 0.3, doc["timings_s"]  # inside the deadline
