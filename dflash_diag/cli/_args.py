"""The flags every command that looks at a process shares, each declared once with its one range and help:

- the target (:func:`add_target_args`): the PID, ``--board-dir``, ``--target-pattern`` / ``--drafter-pattern``
  and ``--job`` / ``--no-job``; :func:`target_from_args` resolves them into one ``observe.Target``;
- the window (:func:`add_window_args`): ``--duration``, ``--rate`` and ``--native``; :func:`window_from_args`
  makes one ``observe.Window`` (whose burst rule every command shares).

A value out of range is a usage error in one line (exit 2) that names the flag and the range.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dflash_diag.cli._output import finite_float, pid_arg, rate_arg
from dflash_diag.errors import CommandError, ExitCode
from dflash_diag.model.patterns import StagePatterns
from dflash_diag.observe.target import Target, resolve_target
from dflash_diag.observe.window import (
    BURST_MAX_S,
    DEFAULT_DURATION_S,
    MAX_DURATION_S,
    MIN_DURATION_S,
    Window,
    WindowError,
    check_duration,
    check_rate,
)
from dflash_diag.sources.config import BURST_RATE_HZ, MAX_RATE_HZ, MIN_RATE_HZ


def duration_arg(text: str) -> float:
    """``--duration``: a finite number of seconds within the one range every command shares."""
    value = finite_float(text)
    try:
        return check_duration(value, "")
    except WindowError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def checked_rate_arg(text: str) -> float | None:
    """``--rate``: 'auto' or a number of samples a second within the one range every command shares."""
    value = rate_arg(text)
    try:
        return check_rate(value, "")
    except WindowError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_target_args(parser: argparse.ArgumentParser, *, pid_help: str | None = "the process to examine") -> None:
    """The PID (unless ``pid_help`` is None: the command takes it its own way), ``--board-dir``, the stage patterns
    and ``--job``."""
    if pid_help is not None:
        parser.add_argument("pid", type=pid_arg, metavar="PID", help=pid_help)
    parser.add_argument("--board-dir", metavar="DIR", help="where probe boards are (default: the per-user runtime dir)")
    parser.add_argument("--target-pattern", metavar="GLOBS",
                        help="thread names of the target (producer) stage, comma-separated fnmatch patterns "
                             "(default target-*; when no thread matches, stages are inferred from queue use)")
    parser.add_argument("--drafter-pattern", metavar="GLOBS",
                        help="thread names of the drafter (consumer) stage (default drafter-*)")
    add_job_flag(parser)


def add_job_flag(parser: argparse.ArgumentParser) -> None:
    """``--job`` / ``--no-job`` (default None: decided from the process tree)."""
    # Two flags of one group, not one BooleanOptionalAction: `--job --no-job` is a usage error, not the last one winning.
    either = parser.add_mutually_exclusive_group()
    either.add_argument("--job", action="store_const", const=True, default=None,
                        help="look at the whole job the PID launches or belongs to (torchrun's PID, or any rank's): "
                             "every rank and its worker processes in one window (default: when the PID is a launcher "
                             "of ranks or a rank with peers)")
    either.add_argument("--no-job", dest="job", action="store_const", const=False,
                        help="this one process only (docs/jobs.md)")


def add_window_args(parser: argparse.ArgumentParser, *, default_s: float = DEFAULT_DURATION_S,
                    duration_help: str | None = None) -> None:
    """``--duration`` (None when not given: :func:`window_from_args` applies ``default_s``, so a command can tell
    a window asked for from its default), ``--rate`` and ``--native``."""
    parser.add_argument("--duration", type=duration_arg, default=None, metavar="S",
                        help=duration_help or f"seconds to sample (default {default_s:g}, {MIN_DURATION_S:g} to "
                                              f"{MAX_DURATION_S:g})")
    parser.add_argument("--rate", type=checked_rate_arg, default=None, metavar="HZ",
                        help=f"stack samples per second ({MIN_RATE_HZ:g} to {MAX_RATE_HZ:g}), or auto (2-10 Hz by the "
                             f"CPU left free); default: {BURST_RATE_HZ:g} Hz for a window up to {BURST_MAX_S:g} s "
                             "(py-spy may use half a core while it samples), auto for longer ones and the live view")
    parser.add_argument("--native", action="store_true",
                        help="also take native (C/C++) stacks: pauses the process, rate-limited (at most 5%% of the "
                             "time)")


def window_given(args: argparse.Namespace) -> list[str]:
    """The window's flags given on the command line."""
    return [flag for flag, given in (("--duration", args.duration is not None), ("--rate", args.rate is not None),
                                     ("--native", bool(getattr(args, "native", False)))) if given]


def window_from_args(args: argparse.Namespace, default_s: float = DEFAULT_DURATION_S) -> Window:
    """The window the flags ask for (``default_s`` when ``--duration`` was not given)."""
    try:
        return Window(duration_s=default_s if args.duration is None else args.duration, rate_hz=args.rate,
                      native=bool(getattr(args, "native", False)))
    except WindowError as exc:
        raise CommandError(str(exc), ExitCode.USAGE) from None


def patterns_from_args(args: argparse.Namespace) -> StagePatterns:
    for flag, value in (("--target-pattern", args.target_pattern), ("--drafter-pattern", args.drafter_pattern)):
        if value is not None and not value.strip(" ,"):
            raise CommandError(f"{flag} needs at least one thread-name pattern (e.g. 'producer-*')", ExitCode.USAGE)
    return StagePatterns.parse(target=args.target_pattern, drafter=args.drafter_pattern)


def check_board_dir(args: argparse.Namespace) -> None:
    if args.board_dir is not None and not Path(args.board_dir).is_dir():
        raise CommandError(f"--board-dir {args.board_dir}: no such directory", ExitCode.BAD_INPUT)


def target_from_args(args: argparse.Namespace, pid: int | None = None, *, launched: bool = False) -> Target:
    """The target the flags name, resolved once (a job when the PID launches or belongs to one)."""
    patterns = patterns_from_args(args)
    check_board_dir(args)
    return resolve_target(args.pid if pid is None else pid, args.job, board_dir=args.board_dir, patterns=patterns,
                          launched=launched)


__all__ = ["add_job_flag", "add_target_args", "add_window_args", "check_board_dir", "duration_arg", "patterns_from_args",
           "target_from_args", "window_from_args", "window_given"]
