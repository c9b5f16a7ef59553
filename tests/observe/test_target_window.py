"""The observation layer's pieces (observe/target.py, window.py, reach.py, cli/_args.py): one window, its one range
and its one burst rule for every command and for a process and a job alike; the target resolved once; one
reachability check."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from dflash_diag.cli import build_parser
from dflash_diag.cli._args import target_from_args, window_from_args
from dflash_diag.errors import AttachError, CommandError, ExitCode
from dflash_diag.observe import Target, Window, WindowError, check_reachable, resolve_target
from dflash_diag.observe.window import BURST_MAX_S, DEFAULT_DURATION_S, MAX_DURATION_S, MIN_DURATION_S
from dflash_diag.sources.config import BURST_RATE_HZ, MAX_RATE_HZ, MIN_RATE_HZ
from dflash_diag.sources.jobcollect import rank_config

COMMANDS = {"doctor": ["doctor", "1"], "snapshot": ["snapshot", "1"], "record": ["record", "1"],
            "top": ["top", "--pid", "1", "--batch"]}


def test_the_burst_rule() -> None:
    short = Window(DEFAULT_DURATION_S).sampler_config("/b")
    assert short.burst and short.rate_hz == BURST_RATE_HZ and short.board_dir == "/b"
    assert not Window(BURST_MAX_S + 1).sampler_config().burst and Window(BURST_MAX_S + 1).sampler_config().rate_hz is None
    asked = Window(5.0, rate_hz=2.0).sampler_config()
    assert not asked.burst and asked.rate_hz == 2.0
    # A job's burst is the same window shared by its ranks: 20 stacks a second in all.
    assert rank_config(short, 4).rate_hz == BURST_RATE_HZ / 4 and rank_config(asked, 4).rate_hz == 2.0
    # The live view never bursts: the rate asked, or auto, on the live budget.
    live = Window(5.0).live_config(None, 30.0)
    assert not live.burst and live.rate_hz is None and live.window_s == 30.0


@pytest.mark.parametrize("bad", [dict(duration_s=0.1), dict(duration_s=601.0), dict(duration_s=float("nan")),
                                 dict(rate_hz=0.1), dict(rate_hz=51.0), dict(rate_hz=float("inf"))])
def test_a_window_out_of_range_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(WindowError):
        Window(**bad)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_declares_the_window_once_with_one_range(command: str) -> None:
    """snapshot's window is doctor's (1.5 s missed a hot loop doctor's 5 s saw); top --batch takes it too, so a
    process and a job are sampled alike (a burst), not one at the live rate and the other at the burst rate."""
    parser = build_parser()
    argv = COMMANDS[command]
    args = parser.parse_args(argv)
    window = window_from_args(args)
    assert window.duration_s == DEFAULT_DURATION_S == 5.0  # record's timeline asks for 10 s by default
    assert window.burst and window.sampler_config().rate_hz == BURST_RATE_HZ
    for flag, good, bad in (("--duration", (MIN_DURATION_S, MAX_DURATION_S), (MIN_DURATION_S / 2, MAX_DURATION_S * 2)),
                            ("--rate", (MIN_RATE_HZ, MAX_RATE_HZ), (MIN_RATE_HZ / 2, MAX_RATE_HZ * 2))):
        for value in good:
            assert getattr(parser.parse_args([*argv, flag, str(value)]), flag[2:]) == value
        for value in bad:
            with pytest.raises(SystemExit) as exited:
                parser.parse_args([*argv, flag, str(value)])
            assert exited.value.code == ExitCode.USAGE
    assert parser.parse_args([*argv, "--rate", "auto"]).rate is None
    assert parser.parse_args([*argv, "--native", "--board-dir", "/x", "--target-pattern", "p-*"]).native


def test_the_target_is_resolved_once(tmp_path: object) -> None:
    plain = resolve_target(os.getpid())
    assert plain.job is None and plain.pids == (os.getpid(),)
    with pytest.raises(CommandError) as refused:
        resolve_target(os.getpid(), job=True)  # neither a rank nor a launcher of ranks
    assert refused.value.exit_code == ExitCode.USAGE and "leave out --job" in str(refused.value)
    args = build_parser().parse_args(["doctor", str(os.getpid()), "--target-pattern", " , "])
    with pytest.raises(CommandError, match="--target-pattern needs at least one"):
        target_from_args(args)
    args = build_parser().parse_args(["doctor", str(os.getpid()), "--board-dir", "/no/such/dir"])
    with pytest.raises(CommandError) as missing:
        target_from_args(args)
    assert missing.value.exit_code == ExitCode.BAD_INPUT


@pytest.fixture
def zombie() -> Iterator[int]:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(f"/proc/{child.pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.05)
    try:
        yield child.pid
    finally:
        child.wait()


def test_one_reachability_check(zombie: int) -> None:
    assert check_reachable(Target(os.getpid())).zombie is False
    with pytest.raises(AttachError) as gone:
        check_reachable(Target(4194301))
    assert gone.value.exit_code == ExitCode.NO_PROCESS
    # A zombie: doctor diagnoses it from /proc; every other command says it has exited (exit 3).
    assert check_reachable(Target(zombie), zombie_ok=True).zombie
    with pytest.raises(AttachError) as exited:
        check_reachable(Target(zombie))
    assert exited.value.exit_code == ExitCode.NO_PROCESS and "zombie" in str(exited.value)
