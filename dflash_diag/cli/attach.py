"""`dflash-diag attach PID` / `detach PID`: start or stop the probes inside a process that is already running."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dflash_contract import proc
from dflash_contract.board import PROBE_NAMES, parse_probe_list
from dflash_diag.cli._output import dump_json, finite_float, pid_arg
from dflash_diag.errors import AttachError, CommandError, ExitCode

if TYPE_CHECKING:
    from dflash_diag.inject.request import Lease

KNOWN_PROBES = PROBE_NAMES  # the board contract's list
ATTACH_SCHEMA = "dflash-diag.attach-report/1"


def parse_probes(text: str) -> list[str]:
    """``--probes LIST``, by the contract's one grammar (``dflash_contract.board.parse_probe_list``), sorted."""
    try:
        return sorted(parse_probe_list(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_common(parser: argparse.ArgumentParser) -> None:
    from dflash_diag.inject.injection import DEFAULT_TIMEOUT_S
    from dflash_diag.inject.method import METHODS

    parser.add_argument("pid", type=pid_arg, metavar="PID", help="the running Python process")
    parser.add_argument("--method", choices=METHODS, default="auto",
                        help="how to get in: auto (ptrace: no debugger, one thread paused about a millisecond; "
                             "else remote-exec on Python 3.14+, gdb, cuda-gdb, lldb), or one of them")
    parser.add_argument("--timeout", type=finite_float, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"give up (and cancel the request) after S seconds (default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--board-dir", metavar="DIR", help="the board directory (default: see docs/board.md)")
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the debugger session on stderr")


def run_injection(args: argparse.Namespace, action: str, names: list[str], *, lease: Lease | None = None,
                  progress: Callable[[str], None] | None = None) -> Any:
    """Run one injection for a command; its Outcome. Errors stay AttachError (one line, exit code).

    SIGTERM and SIGHUP cancel it like Ctrl-C (cli/_signals.py), then the command exits 128+N. ``lease``: an
    ``inject.Lease``; ``progress``: called with each step instead of the messages on a terminal."""
    from dflash_contract.board import BoardDirError, choose_board_dir
    from dflash_diag.cli._signals import terminate_like_ctrl_c
    from dflash_diag.inject.orchestrate import inject

    if not 1.0 <= args.timeout <= 3600.0:
        raise CommandError("--timeout must be between 1 and 3600 seconds", ExitCode.USAGE)
    if not proc.process_alive(args.pid):  # before anything is created on disk for it
        raise AttachError(f"no process with PID {args.pid} (it exited or never existed)", ExitCode.NO_PROCESS)
    try:
        # The default directory taken by someone else (another user can create /tmp/dflash-diag-UID first): a
        # private one beside it, as `run` does, which every reader finds; an explicit one must be safe itself.
        board_dir, warning = choose_board_dir(Path(args.board_dir).resolve() if args.board_dir else None)
    except (BoardDirError, OSError) as exc:
        raise CommandError(str(exc), ExitCode.BAD_INPUT) from None
    if warning is not None:
        print(f"dflash-diag {action}: warning: {warning}", file=sys.stderr, flush=True)
    args.resolved_board_dir = board_dir
    if progress is None and not args.json and sys.stderr.isatty():
        def progress(message: str) -> None:
            print(f"dflash-diag {action}: {message}...", file=sys.stderr, flush=True)
    transcript: list[str] = []
    try:
        with terminate_like_ctrl_c():
            return inject(args.pid, action, names=names, board_dir=board_dir, method=args.method,
                          timeout_s=args.timeout, progress=progress, transcript=transcript, lease=lease)
    finally:
        if args.verbose and transcript:
            print("\n".join(transcript), file=sys.stderr)


def outcome_json(outcome: Any) -> dict[str, Any]:
    return {
        "schema": ATTACH_SCHEMA,
        "pid": outcome.pid,
        "action": outcome.action,
        "method": outcome.method,
        "debugger": outcome.debugger,
        "python": outcome.python,
        "stopped_s": None if outcome.stopped_s is None else round(outcome.stopped_s, 4),
        "paused_ms": None if outcome.paused_s is None else round(1e3 * outcome.paused_s, 3),
        "threads_paused": outcome.threads_paused,
        "stops": outcome.stops,
        "paused_total_ms": None if outcome.paused_total_s is None else round(1e3 * outcome.paused_total_s, 3),
        "waited_s": round(outcome.waited_s, 4),
        "total_s": round(outcome.total_s, 4),
        "nudged_main_thread": outcome.nudged,
        "result": dict(outcome.result),
    }


def _fail_if_not_ok(outcome: Any) -> None:
    result = outcome.result
    if not result.get("ok"):
        raise AttachError(f"PID {outcome.pid}: {result.get('error') or 'the probes did not start'}",
                          ExitCode.ATTACH_FAILED)


class AttachCommand:
    """Start the probes inside a Python process that is already running (no restart, no code change).

    This command's own ptrace injector (no debugger; one thread paused for about a millisecond), or a debugger
    (gdb, cuda-gdb or lldb; Python 3.14's sys.remote_exec where the process runs 3.14), makes the process run
    the installed probes' bootstrap at a safe point of its interpreter; then `top`, `doctor`, `board` and `snapshot` see a board as if it had been
    started under `dflash-diag run`. `dflash-diag detach PID` undoes it. How it works and what can go wrong:
    docs/attach.md.

    The probes stay until `detach` (or the process ends); with --lease-pid they leave by themselves once
    that process exits.

      dflash-diag attach 12345
      dflash-diag attach 12345 --probes checkpoint,compile --method cuda-gdb
      dflash-diag attach 12345 --lease-pid $$        # detached by themselves when this shell exits
    """

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--probes", default="all", type=parse_probes, metavar="LIST",
                            help=f"probes to start: all (default), or a comma list of {', '.join(KNOWN_PROBES)}; "
                                 "'-name' drops one")
        parser.add_argument("--lease-pid", type=pid_arg, metavar="PID",
                            help="hold the probes for process PID: they detach by themselves within about 2 s of "
                                 "its exit (e.g. $$, this shell); default: they stay until `dflash-diag detach`")
        _add_common(parser)

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        if not args.probes:
            raise CommandError("--probes names no probe: nothing to attach", ExitCode.USAGE)
        lease = None
        if args.lease_pid is not None:
            from dflash_diag.inject.request import Lease

            if args.lease_pid == args.pid:
                raise CommandError(f"--lease-pid {args.pid} is the process the probes go into: give the PID of "
                                   "the process they are for (e.g. $$, this shell)", ExitCode.USAGE)
            lease = Lease.for_target(args.pid, args.lease_pid)
            if lease is None:
                raise CommandError(f"PID {args.pid} runs in another PID namespace (a container?): it cannot see PID "
                                   f"{args.lease_pid}, so --lease-pid cannot be used for it", ExitCode.USAGE)
        outcome = run_injection(args, "attach", args.probes, lease=lease)
        _fail_if_not_ok(outcome)
        if args.json:
            dump_json(outcome_json(outcome))
        else:
            print_attached(outcome)
            board = outcome.result.get("board_path")
            if board and Path(board).parent != Path(args.resolved_board_dir):
                print(f"  note: the program's own board is in {Path(board).parent}: pass --board-dir "
                      f"{Path(board).parent} to board, doctor and top")
        return ExitCode.OK


class DetachCommand:
    """Stop the probes `dflash-diag attach` started in a process, and remove every hook they installed.

    Probes the program started itself (`dflash-diag run`, probes.start()) are left alone. The hook
    inventory taken before the attach is compared with the one after: anything left is reported (exit 13).

      dflash-diag detach 12345
    """

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        _add_common(parser)

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        outcome = run_injection(args, "detach", [])
        _fail_if_not_ok(outcome)
        left = list(outcome.result.get("hooks_left") or [])
        if args.json:
            dump_json(outcome_json(outcome))
        else:
            print_detached(outcome)
        if left:
            raise AttachError(f"PID {outcome.pid}: probes stopped, but {len(left)} hook(s) were left behind: "
                              f"{'; '.join(left)[:400]} (please report this)", ExitCode.ATTACH_FAILED)
        return ExitCode.OK


def pause_text(outcome: Any) -> str:
    """``paused 1.2 ms (1 thread) by ptrace``: the longest any one thread could not run at a stretch, how many
    threads were stopped, and (ptrace, when it let some go first) how many stops and their sum."""
    if outcome.paused_s is None:
        return f"by {outcome.method}"
    if outcome.threads_paused == 0:
        return f"no thread paused ({outcome.method})"
    threads = outcome.threads_paused
    detail = f"{threads} thread{'s' if threads != 1 else ''}"
    if (outcome.stops or 0) > 1 and outcome.paused_total_s is not None:  # let go until one stopped at a safe place
        detail += f"; {outcome.stops} stops, {_ms(outcome.paused_total_s)} in all"
    return f"paused {_ms(outcome.paused_s)} ({detail}) by {outcome.method}"


def _ms(seconds: float) -> str:
    ms = 1e3 * seconds
    return f"{ms:.1f} ms" if ms < 10 else f"{ms:.0f} ms"


def _timing(outcome: Any) -> str:
    return f"{pause_text(outcome)}; ran {1e3 * outcome.waited_s:.0f} ms later in {outcome.result.get('thread', '?')}" + (
        " (woken from a lock wait)" if outcome.nudged else "")


def print_attached(outcome: Any) -> None:
    r = outcome.result
    if r.get("already"):
        print(f"PID {outcome.pid} already has the probes attach started ({', '.join(r.get('added') or [])}); "
              f"board {r.get('board_path')}")
        if r.get("lease_dropped"):
            print("  they were held for another command (doctor --attach): now they stay until `dflash-diag detach`")
        return
    kind = "added to the program's own probe session" if r.get("session") == "existing" else "started"
    print(f"attached to PID {outcome.pid} (Python {outcome.python}): probes {kind}: {', '.join(r.get('added') or []) or 'none'}")
    print(f"  {_timing(outcome)}; the probes took {r.get('cost_ms', 0):.0f} ms to start")
    found = r.get("discovered") or {}
    if found.get("queues") or found.get("models"):
        print(f"  found in the running threads: queues {', '.join(found.get('queues') or []) or '-'}; "
              f"models {', '.join(found.get('models') or []) or '-'}")
    board = r.get("board_path")
    print(f"  board: {board or 'not written: ' + str(r.get('board_error'))}")
    print(f"  look: dflash-diag board {outcome.pid} | doctor {outcome.pid} | top {outcome.pid};  "
          f"undo: dflash-diag detach {outcome.pid}")
    lease = r.get("lease")
    if lease:
        print(f"  held for PID {lease['pid']}: the probes detach by themselves once it exits")


def print_detached(outcome: Any) -> None:
    r = outcome.result
    left = r.get("hooks_left") or []
    print(f"detached from PID {outcome.pid}: stopped {', '.join(r.get('removed') or []) or 'no probe'}; "
          + ("no hook left" if not left else f"{len(left)} hook(s) left"))
    print(f"  {_timing(outcome)}")
