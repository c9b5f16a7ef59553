"""The diff tests reuse the real child workload of tests/snapshot."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "snapshot"))

from conftest_snapshot import board_dir, spawn  # noqa: F401
