"""A file system call's target and its directory's settings (``ProcThreadSample.syscall_target``,
``target_settings``) in what `kernel-time` says: batch 27's spool program, whose capture thread creates and renames
a record per sample in directories with the dirsync attribute. Its recording predates the reading; one sweep's
reading is given the target the reader reads from such a thread (tests/sources/test_storage_source.py reads it live)."""
from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

from dflash_diag.analysis import analyse
from dflash_diag.model import Observation
from dflash_diag.observe.codec import read_observation

RECORDED = Path(__file__).resolve().parents[1] / "casebook" / "observations"
DIRSYNC = ("its directory has the dirsync attribute (chattr +D): every create, rename and unlink in it waits for the "
           "journal to commit",)


def _obs(name: str) -> Observation:
    obs = read_observation(gzip.open(RECORDED / f"{name}.json.gz").read())
    assert isinstance(obs, Observation)
    return obs


def _with_target(obs: Observation, settings: tuple[str, ...]) -> Observation:
    """The sweep reading that caught a thread blocked in rename, with its target and the directory's settings."""
    def read(t):  # type: ignore[no-untyped-def]
        if t.syscall != "rename":
            return t
        return replace(t, syscall_target="/tmp/ptarmigan-spool-1-x/new/11020.9.000010386.rec",
                       target_settings=settings)
    return replace(obs, proc=tuple(tuple(read(t) for t in sweep) for sweep in obs.proc))


def test_the_directory_setting_of_the_file_a_kernel_heavy_thread_was_caught_on_is_said() -> None:
    obs = _with_target(_obs("settings27_ptarmigan__outside"), DIRSYNC)
    report = analyse(obs)
    assert report.headline is not None
    assert ("; /proc caught it in rename on `new/11020.9.000010386.rec`, and its directory has the dirsync attribute "
            "(chattr +D): every create, rename and unlink in it waits for the journal to commit") in report.headline.text
    kernel = next(f for f in report.findings if f.rule_id == "kernel-time")
    assert "dirsync attribute" in kernel.claim
    # A directory with no such setting: nothing is said of it.
    plain = analyse(_with_target(_obs("settings27_ptarmigan__outside"), ()))
    assert plain.headline is not None and "dirsync" not in plain.headline.text
