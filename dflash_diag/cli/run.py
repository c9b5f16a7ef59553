"""`dflash-diag run -- python script.py ...`: run any Python program under the in-process probes."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from dflash_contract.board import (
    BOARD_DIR_ENV,
    PROBE_NAMES,
    BoardDirError,
    choose_board_dir,
    parse_probe_list,
)
from dflash_diag.cli._output import shown
from dflash_diag.errors import CommandError, ExitCode
from dflash_diag.sources.job import is_launcher_command

# The probes package sits next to dflash_diag (one distribution); its bootstrap is a sitecustomize.py.
BOOTSTRAP_DIR = Path(__file__).resolve().parents[2] / "probes" / "_bootstrap"
KNOWN_PROBES = PROBE_NAMES
# Forwarded to the program. SIGINT is special: from a terminal it already reached the program (same
# foreground process group), so it is only forwarded when it was sent to us alone.
FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def _check_probe_list(text: str) -> str:
    """``--probes LIST`` checked by the contract's one grammar; the text itself goes to the program's bootstrap."""
    try:
        parse_probe_list(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


class RunCommand:
    """Run a Python program under the in-process probes, without changing its code.

    The probes start at interpreter start-up (a sitecustomize bootstrap) in the first Python process the
    command starts, and publish a board that `dflash-diag board PID`, `top`, `doctor` and `snapshot` read.
    Exit code and signals pass through: the exit code is the program's, or 128+N if signal N killed it.

    example: dflash-diag run --probes all,-gil -- python train.py --lr 3e-4
             dflash-diag run --probes-to-wandb -- python train.py    # readings in the program's wandb run too
    """

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--probes",
            default="all",
            type=_check_probe_list,
            metavar="LIST",
            help=f"probes to run: all (default), none, or a comma list of {', '.join(KNOWN_PROBES)}; '-name' drops one",
        )
        parser.add_argument("--board-dir", metavar="DIR", help="where the board goes (default: see docs/board.md)")
        parser.add_argument("--keep-board", action="store_true", help="leave the board file after the program exits")
        parser.add_argument("--probes-to-wandb", action="store_true",
                            help="also log the readings into the program's wandb run, when it has one, beside its own "
                            "metrics (dflash/* series; a critical finding raises a wandb alert; docs/integrations.md)")
        parser.add_argument("program", nargs=argparse.REMAINDER, metavar="-- COMMAND ...", help="the program to run")

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        command = list(args.program)
        if command and command[0] == "--":
            command = command[1:]
        if not command:
            raise CommandError("no command given: dflash-diag run [--probes LIST] -- python script.py ...", ExitCode.USAGE)
        executable = shutil.which(command[0])
        if executable is None:
            raise CommandError(f"command not found: {shown(command[0])}", ExitCode.BAD_INPUT)
        if not (BOOTSTRAP_DIR / "sitecustomize.py").is_file():
            raise CommandError(f"probe bootstrap missing at {BOOTSTRAP_DIR}: reinstall dflash-diag", ExitCode.FAILURE)
        env = self._child_env(args)
        board_dir = _board_dir_for_child(env)
        try:
            child = subprocess.Popen([executable, *command[1:]], env=env)
        except OSError as exc:
            raise CommandError(f"cannot start {shown(command[0])}: {exc.strerror}", ExitCode.BAD_INPUT) from None
        launcher = is_launcher_command(command)
        if launcher:  # the bootstrap leaves the launcher alone and probes each rank it starts (docs/jobs.md)
            print(f"dflash-diag run: PID {child.pid} under probes ({shown(args.probes)}): a launcher of ranks; each rank "
                  f"publishes its own board in {shown(str(board_dir))}; look: dflash-diag doctor {child.pid}",
                  file=sys.stderr)
        else:
            print(
                f"dflash-diag run: PID {child.pid} under probes ({shown(args.probes)}); board {shown(str(board_dir / f'{child.pid}.json'))}; "
                f"look: dflash-diag board {child.pid}",
                file=sys.stderr,
            )
        return _wait_forwarding(child, board_dir / f"{child.pid}.json", note_missing=not launcher)

    def _child_env(self, args: argparse.Namespace) -> dict[str, str]:
        env = dict(os.environ)
        parts = [str(BOOTSTRAP_DIR)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(parts)
        env["DFLASH_DIAG_PROBES"] = args.probes
        env["DFLASH_DIAG_RUN_TOKEN"] = str(os.getpid())
        if args.board_dir:
            env[BOARD_DIR_ENV] = os.fsdecode(Path(args.board_dir).resolve())
        if args.keep_board:
            env["DFLASH_DIAG_KEEP_BOARD"] = "1"
        if args.probes_to_wandb:
            env["DFLASH_DIAG_PROBES_TO_WANDB"] = "1"
        return env


def _board_dir_for_child(env: dict[str, str]) -> Path:
    """Where the program's probes will publish, checked (and made) before it starts.

    An explicit directory that is unsafe stops us here (exit 6): the user asked for it, and a program started
    without the board it was promised helps nobody. A default directory someone else created is replaced by
    a private one, said loudly, and passed to the program."""
    explicit = env.get(BOARD_DIR_ENV)
    try:
        directory, warning = choose_board_dir(explicit or None)
    except BoardDirError as exc:
        raise CommandError(f"{shown(str(exc))}: the probes could not publish; pass --board-dir DIR of your own",
                           ExitCode.BAD_INPUT) from None
    if warning is not None:
        print(f"dflash-diag run: WARNING: {shown(warning)}", file=sys.stderr, flush=True)
        env[BOARD_DIR_ENV] = os.fsdecode(directory)
    return directory


def _in_foreground() -> bool:
    """Whether a terminal's Ctrl-C reaches the child by itself (we share the terminal's foreground group)."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


# If no board shows up this long after start, say why that may be (once, on stderr).
NO_BOARD_NOTE_S = 20.0


def _wait_forwarding(child: subprocess.Popen[bytes], board_path: Path, *, note_missing: bool = True) -> int:
    def forward(signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGINT and _in_foreground():
            return  # the terminal sent it to the whole group: the program has it already
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, *FORWARDED)}
    started = time.monotonic()
    noted = not note_missing
    try:
        while True:
            try:
                returncode = child.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                if not noted and time.monotonic() - started > NO_BOARD_NOTE_S:
                    noted = True
                    if not board_path.exists():
                        print(f"dflash-diag run: no board at {shown(str(board_path))} yet: if the command starts Python in a "
                              "subprocess (a shell script), the board is under that PID (list: dflash-diag board); "
                              "Python run with -I or -S cannot be probed", file=sys.stderr)
            except InterruptedError:
                continue
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 128 - returncode if returncode < 0 else returncode
