"""Temporary siblings of a killed `snapshot` or `record` are removed by the next run in that directory, once
their writer is gone; nothing else is (docs/security.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest_snapshot import Spawn

from dflash_contract import proc
from dflash_diag.cli import main
from dflash_diag.errors import ExitCode
from dflash_diag.snapshot.output import TMP_PREFIX, remove_stale_siblings

ROOT = Path(__file__).resolve().parents[2]


def _dead_writer() -> tuple[int, int]:
    """(PID, start ticks) of a process that ran and was reaped: a writer that is gone."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    ticks = proc.start_time_ticks(child.pid)
    child.wait()
    assert ticks is not None or not proc.process_alive(child.pid)
    return child.pid, ticks or 1


def _kill_while_writing(argv: list[str], where: Path) -> list[str]:
    """Start `dflash-diag ARGV`, SIGKILL it once its temporary sibling exists; the names it left."""
    cmd = subprocess.Popen([sys.executable, "-m", "dflash_diag", *argv], cwd=ROOT, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    try:
        while not [p for p in where.iterdir() if p.name.startswith(TMP_PREFIX)]:
            assert cmd.poll() is None and time.monotonic() < deadline, "no temporary sibling appeared"
            time.sleep(0.05)
    finally:
        cmd.send_signal(signal.SIGKILL)
        cmd.wait()
    return sorted(p.name for p in where.iterdir() if p.name.startswith(TMP_PREFIX))


@pytest.mark.slow
@pytest.mark.parametrize("command", ["snapshot", "snapshot --dir", "record"])
def test_a_killed_commands_sibling_is_removed_by_the_next_run(command: str, spawn: Spawn, tmp_path: Path) -> None:
    child = spawn()
    where = tmp_path / "out"
    where.mkdir()
    (where / "keep.txt").write_text("mine")
    name, *flags = command.split()
    suffix = "" if flags else ".json" if name == "record" else ".tar.gz"
    left = _kill_while_writing([name, str(child.pid), "-o", str(where / f"first{suffix}"), "--duration", "30", *flags],
                               where)
    assert len(left) == 1  # a killed command does leave one: the case to clean up
    assert str(os.getpid()) not in left[0]
    code = main([name, str(child.pid), "-o", str(where / f"second{suffix}"), "--duration", "1", *flags])
    assert code == ExitCode.OK
    assert sorted(p.name for p in where.iterdir()) == sorted(["keep.txt", f"second{suffix}"])
    assert (where / "keep.txt").read_text() == "mine"


def test_only_our_names_of_dead_writers_of_this_user_are_removed(tmp_path: Path) -> None:
    dead_pid, dead_ticks = _dead_writer()
    me, my_ticks = os.getpid(), proc.start_time_ticks()
    assert my_ticks is not None
    dead = f"{TMP_PREFIX}{dead_pid}-{dead_ticks}-"
    planted_files = {
        f"{dead}abcd1234.tmp": True,  # a half-written .tar.gz or trace of a dead writer: removed
        f"{TMP_PREFIX}{me}-{my_ticks + 1}-abcd1234.tmp": True,  # our PID, another start time: reused, removed
        f"{TMP_PREFIX}{me}-{my_ticks}-abcd1234.tmp": False,  # this live process's own: kept
        f"{dead}abcd1234.tmp.bak": False,  # not exactly our name
        f"{TMP_PREFIX}abcd1234.tmp": False,  # no writer in the name (an older dflash-diag): kept
        "notes.txt": False,
    }
    for name in planted_files:
        (tmp_path / name).write_bytes(b"partial")
    bundle_dir = tmp_path / f"{dead}dir12345.tmp"  # a half-written --dir bundle: removed
    bundle_dir.mkdir()
    (bundle_dir / "report.md").write_text("# partial")
    old = tmp_path / f".dflash-diag-old-{dead_pid}-{dead_ticks}-0a1b2c3d"  # a moved-aside old bundle: removed
    old.mkdir()
    (old / "snapshot.json").write_text("{}")
    mixed = tmp_path / f"{dead}mixed123.tmp"  # holds a directory someone added: not what we left, kept whole
    (mixed / "sub").mkdir(parents=True)
    (mixed / "report.md").write_text("# partial")
    target = tmp_path / "precious.txt"
    target.write_text("precious")
    (tmp_path / f"{dead}link1234.tmp").symlink_to(target)  # a symlink: never followed, never removed

    removed = remove_stale_siblings(tmp_path)

    expected = {n for n, gone in planted_files.items() if gone} | {bundle_dir.name, old.name}
    assert set(removed) == expected
    left = {p.name for p in tmp_path.iterdir()}
    assert left == (set(planted_files) - expected) | {mixed.name, "precious.txt", f"{dead}link1234.tmp"}
    assert sorted(p.name for p in mixed.iterdir()) == ["report.md", "sub"]
    assert target.read_text() == "precious"
