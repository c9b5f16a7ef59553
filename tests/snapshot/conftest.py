"""Fixtures of the snapshot tests (defined in conftest_snapshot.py so tests/diff can share them)."""

from __future__ import annotations

from conftest_snapshot import API_KEY, SECRETS, TOKEN, Spawn, board_dir, spawn  # noqa: F401
