"""Checkpoints survive the ways runs end badly: kill -9 mid-write, a dropped ssh session, a full disk."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from trainer_helpers import ROOT, cli, read_jsonl, tiny_args

from reference_trainer import checkpoint


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.mark.slow
def test_next_start_removes_only_stale_temp_files_of_dead_writers(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    stale = checkpoint.temp_path(ckpt / "checkpoint.pt", _dead_pid())
    stale.write_bytes(b"x" * 4096)  # what kill -9 during torch.save leaves behind
    live_writer = subprocess.Popen(["sleep", "60"])
    try:
        keep = {
            "live": checkpoint.temp_path(ckpt / "checkpoint.pt", live_writer.pid),  # a writer still at work
            "notes": ckpt / "notes.txt",
            "not a pid": ckpt / ".checkpoint.pt.tmp-abc",
            "other name": ckpt / f".model.pt.tmp-{_dead_pid()}",
        }
        for path in keep.values():
            path.write_text("precious")
        outside = tmp_path / "outside.txt"
        outside.write_text("precious")
        link = checkpoint.temp_path(ckpt / "checkpoint.pt", _dead_pid())
        link.symlink_to(outside)  # a link with our name: never followed, never removed
        result = cli(tiny_args(tmp_path, "--max-steps", "1"), tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
        assert not stale.exists()
        assert f"removed {stale}" in result.stdout
        for path in keep.values():
            assert path.read_text() == "precious", path
        assert link.is_symlink() and outside.read_text() == "precious"
        assert (ckpt / "checkpoint.pt").is_file()
        assert not [p for p in ckpt.iterdir() if p.name.startswith(".checkpoint.pt.tmp-")
                    and p not in (keep["live"], link, keep["not a pid"])]
    finally:
        live_writer.kill()
        live_writer.wait()


@pytest.mark.slow
def test_sighup_checkpoints_and_exits_like_sigterm(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DFLASH_DIAG_BOARD_DIR": str(tmp_path / "board")}
    proc = subprocess.Popen([sys.executable, "-m", "reference_trainer",
                             *tiny_args(tmp_path, "--max-steps", "100000", "--metrics-jsonl", str(metrics))],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not metrics.exists() or len(read_jsonl(metrics)) < 2):
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            time.sleep(0.1)
        proc.send_signal(signal.SIGHUP)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert "SIGHUP: finishing the current step" in err
    assert (tmp_path / "ckpt" / "checkpoint.pt").is_file()


class _FullDisk:
    """A file handle on a disk that fills up after ``room`` bytes (ENOSPC at the write call)."""

    def __init__(self, real: Any, room: int) -> None:
        self.real, self.room = real, room

    def write(self, data: bytes) -> int:
        if len(data) > self.room:
            self.real.write(bytes(data[: self.room]))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.real.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def __enter__(self) -> _FullDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.real.close()


def test_full_disk_is_one_line_and_keeps_the_previous_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from reference_trainer.cli import main

    monkeypatch.setenv("DFLASH_DIAG_BOARD_DIR", str(tmp_path / "board"))
    assert main(tiny_args(tmp_path, "--probes", "none", "--max-steps", "1")) == 0
    saved = tmp_path / "ckpt" / "checkpoint.pt"
    before = saved.read_bytes()
    capsys.readouterr()
    real_open = checkpoint._open_private
    monkeypatch.setattr(checkpoint, "_open_private", lambda path: _FullDisk(real_open(path), room=10_000))
    assert main(tiny_args(tmp_path, "--probes", "none", "--max-steps", "2", "--resume")) == 9
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and f"could not write the checkpoint {saved}" in lines[0]
    assert "(ENOSPC)" in lines[0] and "the previous one is kept" in lines[0]
    assert saved.read_bytes() == before  # the old checkpoint, byte for byte
    assert [p.name for p in saved.parent.iterdir()] == ["checkpoint.pt"]  # no temp file left behind
