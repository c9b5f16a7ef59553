"""`dflash-diag top`: the live view of where target and drafter threads spend their time."""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from dflash_diag.analysis.threads import StagePatterns
from dflash_diag.cli._job import add_job_flag, job_topology
from dflash_diag.cli._output import dump_json, finite_float, output_path_arg, pid_arg, rate_arg, shown
from dflash_diag.errors import AttachError, CommandError, DflashDiagError, ExitCode
from dflash_diag.model import Stage
from dflash_diag.sources.config import SamplerConfig

if TYPE_CHECKING:
    from dflash_diag.model.job import JobTopology
    from dflash_diag.snapshot.output import PreparedFile
    from dflash_diag.tui.source import TopSource

MAX_RATE_HZ = 50.0
DEFAULT_WINDOW_S = 30.0
DEFAULT_DURATION_S = 5.0
ATTACH_WAIT_S = 60.0  # launch mode: how long a fresh interpreter may take before py-spy can read it
WRAPPER_GRACE_S = 10.0  # launch mode: how long a wrapper (shim, shell script, uv run) may take to start Python
CHILD_INT_GRACE_S = 10.0  # after SIGINT, before SIGTERM
CHILD_TERM_GRACE_S = 5.0  # after SIGTERM, before SIGKILL


class TopCommand:
    """Live view of a PyTorch training process: where each thread's time goes, and why the pipeline is slow.

    Attach to a running process by PID, or launch one after `--`:

      dflash-diag top 12345
      dflash-diag top -- python -m reference_trainer --preset tiny
      dflash-diag top --pid 12345 --batch --duration 10 --json     # like `top -b`: no screen

    Sampling uses py-spy without pausing the process (--native pauses it, so native samples are
    rate-limited). In launch mode the command's output goes to a log file, and when top quits the
    command gets SIGINT (then SIGTERM, then SIGKILL), unless --keep-child. Keys: press ? in the app.
    Docs: docs/top.md
    """

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("pid", nargs="?", metavar="PID", help="process to attach to (or use --pid)")
        parser.add_argument(
            "launch_command", nargs="*", metavar="-- COMMAND", help="launch COMMAND and attach to it"
        )
        parser.add_argument("--pid", dest="pid_option", type=pid_arg, metavar="PID", help="process to attach to")
        parser.add_argument(
            "--batch", "-b", action="store_true", help="print aggregates once, without a screen"
        )
        parser.add_argument(
            "--duration",
            type=finite_float,
            default=DEFAULT_DURATION_S,
            metavar="S",
            help=f"batch mode: seconds to sample (default {DEFAULT_DURATION_S:g})",
        )
        parser.add_argument(
            "--json", action="store_true", help="batch mode: JSON output (schema in docs/top.md)"
        )
        parser.add_argument(
            "--rate",
            type=rate_arg,
            default=None,
            metavar="HZ",
            help="stack samples per second, or 'auto' (default: 2-10 Hz by the CPU left idle; +/- change it "
            "live, a returns to auto)",
        )
        parser.add_argument(
            "--native",
            action="store_true",
            help="also take native (C/C++) stacks: pauses the process, rate-limited",
        )
        parser.add_argument(
            "--window",
            type=finite_float,
            default=DEFAULT_WINDOW_S,
            metavar="S",
            help=f"seconds of history the live shares cover (default {DEFAULT_WINDOW_S:g})",
        )
        parser.add_argument(
            "--target-pattern",
            metavar="GLOBS",
            help="thread names of the target stage, comma-separated globs (default: target-*)",
        )
        parser.add_argument(
            "--drafter-pattern",
            metavar="GLOBS",
            help="thread names of the drafter stage (default: drafter-*)",
        )
        parser.add_argument(
            "--board-dir",
            metavar="DIR",
            help="where the process's probe board is (default: per-user runtime dir)",
        )
        parser.add_argument(
            "--refresh", type=finite_float, default=1.0, metavar="S", help="screen refresh interval (default 1)"
        )
        parser.add_argument(
            "--warmup",
            type=finite_float,
            default=None,
            metavar="S",
            help="launch mode: seconds to wait after attaching before sampling (default: until a target or "
            "drafter thread runs, at most 60 s)",
        )
        parser.add_argument(
            "--screenshot",
            metavar="SVG",
            type=output_path_arg,
            help="no terminal needed: run the live view headless for --duration seconds, save it as SVG, exit",
        )
        parser.add_argument(
            "--size", default="120x40", metavar="WxH", help="terminal size for --screenshot (default 120x40)"
        )
        parser.add_argument("--child-log", metavar="PATH", type=output_path_arg,
                            help="launch mode: file for the command's output")
        parser.add_argument(
            "--keep-child", action="store_true", help="launch mode: leave the command running on quit"
        )
        add_job_flag(parser)

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        target = _parse_target(args)
        _validate(args)
        if not args.batch and args.screenshot is None and not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise CommandError(
                "the live view needs a terminal: use --batch (and --json) for scripts", ExitCode.USAGE
            )
        with _reserved_screenshot(args) as shot:  # a bad --screenshot fails before anything is attached
            if isinstance(target, int):
                return _run_attached(target, args, child=None, shot=shot)
            with _launched(target, args) as child:
                interpreter = _wait_attachable(child, args)
                return _run_attached(interpreter, args, child=child, shot=shot)


# ----- arguments -----
def _parse_target(args: argparse.Namespace) -> int | list[str]:
    """A PID to attach to, or a command line to launch."""
    positional: list[str] = ([args.pid] if args.pid is not None else []) + list(args.launch_command)
    if args.pid_option is not None:
        if positional:
            raise CommandError("give either --pid PID or a command after --, not both", ExitCode.USAGE)
        return _check_pid(args.pid_option)
    if not positional:
        raise CommandError(
            "nothing to watch: give a PID (top 12345) or a command (top -- python train.py)", ExitCode.USAGE
        )
    if len(positional) == 1 and positional[0].isdigit():
        try:
            return pid_arg(positional[0])
        except argparse.ArgumentTypeError as exc:
            raise CommandError(str(exc), ExitCode.USAGE) from None
    if positional[0].isdigit():
        raise CommandError(
            f"'{' '.join(positional)}': a PID takes no arguments; to launch a command put it after --",
            ExitCode.USAGE,
        )
    return positional


def _check_pid(pid: int) -> int:
    if pid <= 0:
        raise CommandError(f"invalid PID {pid}: must be a positive integer", ExitCode.USAGE)
    return pid


def _validate(args: argparse.Namespace) -> None:
    if args.rate is not None and not 0 < args.rate <= MAX_RATE_HZ:  # also refuses nan and inf
        raise CommandError(f"--rate {args.rate:g}: must be in (0, {MAX_RATE_HZ:g}] Hz, or auto", ExitCode.USAGE)
    if not 0 < args.duration <= 24 * 3600:
        raise CommandError(f"--duration {args.duration:g}: must be > 0 seconds", ExitCode.USAGE)
    if not 0 < args.window <= 24 * 3600:
        raise CommandError(f"--window {args.window:g}: must be > 0 seconds", ExitCode.USAGE)
    if not 0.05 <= args.refresh <= 60:
        raise CommandError(f"--refresh {args.refresh:g}: must be between 0.05 and 60 seconds", ExitCode.USAGE)
    if args.warmup is not None and args.warmup < 0:
        raise CommandError(f"--warmup {args.warmup:g}: must be >= 0 seconds", ExitCode.USAGE)
    if args.screenshot is not None:
        if args.batch:
            raise CommandError("--screenshot and --batch do not go together", ExitCode.USAGE)
        args.size_cells = _parse_size(args.size)
        if not args.screenshot.endswith(".svg"):
            raise CommandError(f"--screenshot {shown(args.screenshot)[:200]}: the file name must end in .svg",
                               ExitCode.USAGE)
    if args.json and not args.batch:
        raise CommandError("--json needs --batch (the live screen has no JSON form)", ExitCode.USAGE)
    for flag, pattern in (
        ("--target-pattern", args.target_pattern),
        ("--drafter-pattern", args.drafter_pattern),
    ):
        if pattern is not None and not pattern.strip(" ,"):
            raise CommandError(f"{flag}: give at least one thread-name glob, e.g. 'target-*'", ExitCode.USAGE)
    if args.board_dir is not None and not Path(args.board_dir).is_dir():
        raise CommandError(f"--board-dir {args.board_dir}: no such directory", ExitCode.BAD_INPUT)


def _parse_size(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)x(\d+)", text)
    if match is None or not (40 <= int(match[1]) <= 1000 and 10 <= int(match[2]) <= 500):
        raise CommandError(
            f"--size {text}: expected WIDTHxHEIGHT, e.g. 120x40 (at least 40x10)", ExitCode.USAGE
        )
    return int(match[1]), int(match[2])


# ----- running -----
def _sampler_config(args: argparse.Namespace) -> SamplerConfig:
    return SamplerConfig(rate_hz=args.rate, native=args.native, window_s=args.window, board_dir=args.board_dir)


def _patterns(args: argparse.Namespace) -> StagePatterns:
    return StagePatterns.parse(target=args.target_pattern, drafter=args.drafter_pattern)


@contextmanager
def _reserved_screenshot(args: argparse.Namespace) -> Iterator[PreparedFile | None]:
    """--screenshot's destination checked and its temporary sibling reserved (the rules of every output,
    snapshot.output: exit 7 when it exists, 9 for /, home or the working directory, 11 when it cannot be
    written); the sibling is removed unless the screenshot was committed."""
    if args.screenshot is None:
        yield None
        return
    from dflash_diag.snapshot.output import never_ours, prepare_file

    shot = prepare_file(Path(args.screenshot), force=False, is_ours=never_ours, what="screenshot",
                        flag="--screenshot", forceable=False)
    try:
        yield shot
    finally:
        shot.abandon()  # a no-op once committed


def _run_attached(pid: int, args: argparse.Namespace, child: Child | None, shot: PreparedFile | None) -> int:
    topology = _job_of(pid, args, launched=child is not None)
    if topology is not None:
        return _run_job(topology, args, shot)
    check_attachable(pid)  # AttachError -> one line, its exit code, before any screen or output
    if args.batch:
        return _run_batch(pid, args, child)
    return _run_tui(pid, args, child, shot)


def _job_of(pid: int, args: argparse.Namespace, *, launched: bool) -> JobTopology | None:
    """The job ``pid`` launches or belongs to (docs/jobs.md); a launcher top started gets time to start its ranks."""
    from dflash_diag.sources.job import is_launcher_argv
    from dflash_diag.sources.procfs import read_cmdline

    if args.job is False:
        return None
    topology = job_topology(pid, None)
    if topology is None and launched:
        try:
            launcher = is_launcher_argv(read_cmdline(pid))
        except AttachError:
            launcher = False
        deadline = time.monotonic() + ATTACH_WAIT_S
        while launcher and topology is None and time.monotonic() < deadline:
            time.sleep(0.5)
            topology = job_topology(pid, None)
    if topology is None and args.job:
        return job_topology(pid, True)  # a usage error that says what the PID is not
    return topology


def _run_job(topology: JobTopology, args: argparse.Namespace, shot: PreparedFile | None) -> int:
    from dflash_diag.cli.top_job import JobLiveSource, batch_json, batch_text, collect_job

    if args.batch:
        from dflash_diag.cli._observe import sampler_config

        # doctor's window: a short one is a burst shared between the ranks (sources/jobcollect.py)
        config = sampler_config(args.duration, args.rate, args.board_dir, native=args.native)
        analysis, frames, _ = collect_job(topology, args.duration, config, _patterns(args))
        if args.json:
            dump_json(batch_json(analysis, frames))
        else:
            sys.stdout.write(batch_text(analysis, frames))
        sys.stdout.flush()
        return ExitCode.OK
    return _run_tui(topology.asked_pid, args, None, shot,
                    source=JobLiveSource(topology, _sampler_config(args), _patterns(args)))


def _run_batch(pid: int, args: argparse.Namespace, child: Child | None) -> int:
    from dflash_diag.cli.top_live import collect_frame
    from dflash_diag.view.report import frame_to_json, frame_to_text

    frame = collect_frame(pid, args.duration, _sampler_config(args), _patterns(args))
    if args.json:
        dump_json(frame_to_json(frame))
    else:
        sys.stdout.write(frame_to_text(frame))
    sys.stdout.flush()
    return ExitCode.OK


def _run_tui(pid: int, args: argparse.Namespace, child: Child | None, shot: PreparedFile | None,
             source: TopSource | None = None) -> int:
    from dflash_diag.cli.top_live import LiveSource
    from dflash_diag.tui.app import TopApp

    source = source if source is not None else LiveSource(pid, _sampler_config(args), _patterns(args))
    try:
        first = source.poll()  # attach now, so a failure is one line on the terminal, not a broken screen
        if shot is not None:
            app = TopApp(
                source,
                refresh_s=args.refresh,
                initial_frame=first,
                native=args.native,
                screenshot_after_s=args.duration,
            )
            from dflash_diag.cli._signals import ctrl_c_ends, end_app_soon

            with ctrl_c_ends(lambda: end_app_soon(app)) as interrupted:
                code = app.run(headless=True, size=args.size_cells)
            if interrupted:
                return 128 + signal.SIGINT  # Ctrl-C: no screenshot, as README's table says (Textual ends quietly on it)
            if app.screenshot_svg is None:
                return int(code or ExitCode.FAILURE)  # the app stopped first and said why
            shot.commit(app.screenshot_svg.encode("utf-8"))  # exit 11 in one line when it cannot be written
            print(f"dflash-diag top: screenshot written to {shown(args.screenshot)}", file=sys.stderr)
        else:
            app = TopApp(source, refresh_s=args.refresh, initial_frame=first, native=args.native)
            code = app.run()
    finally:
        source.close()
    return int(code or 0)


def check_attachable(pid: int) -> None:
    """Fail fast, with the diagnosis (no such process, other user, not Python, py-spy missing)."""
    from dflash_diag.sources.pyspy import PySpy

    PySpy(pid).check()


def probe_dump(pid: int) -> list[str]:
    """Thread names from one non-blocking dump; AttachError while a fresh interpreter is not readable yet."""
    from dflash_diag.sources.pyspy import PySpy

    return [t.name or "" for t in PySpy(pid, retries=0).dump().threads]


# ----- launch mode -----
@dataclass
class Child:
    process: subprocess.Popen[bytes]
    log_path: Path
    keep: bool

    @property
    def pid(self) -> int:
        return self.process.pid


def _open_child_log(args: argparse.Namespace) -> tuple[Path, TextIO]:
    if args.child_log is not None:
        path = Path(args.child_log)
        try:
            # O_EXCL: never clobber a file the user cares about; 0600 as the output may hold secrets.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise CommandError(f"--child-log {path}: exists; choose another path", ExitCode.EXISTS) from None
        except OSError as exc:
            from dflash_diag.snapshot.output import cannot_write

            raise cannot_write(path, exc, "--child-log") from None
        return path, os.fdopen(fd, "w")
    directory = Path(tempfile.mkdtemp(prefix="dflash-diag-top-"))  # mode 0700
    path = directory / "child.log"
    return path, open(path, "w")  # closed by _launched


@contextmanager
def _launched(command: Sequence[str], args: argparse.Namespace) -> Iterator[Child]:
    """Start ``command`` with its output in a log file; on exit stop it (SIGINT, SIGTERM, SIGKILL) unless kept."""
    log_path, log = _open_child_log(args)
    env = dict(os.environ)
    if args.board_dir is not None:
        env["DFLASH_DIAG_BOARD_DIR"] = str(Path(args.board_dir).resolve())
    try:
        # A session of its own: the terminal's Ctrl-C reaches top only, which then stops the child in order.
        process = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    except FileNotFoundError:
        _discard_child_log(log_path, log, args)
        raise CommandError(f"cannot launch {command[0]!r}: command not found", ExitCode.BAD_INPUT) from None
    except PermissionError:
        _discard_child_log(log_path, log, args)
        raise CommandError(f"cannot launch {shown(command[0])!r}: permission denied", ExitCode.PERMISSION) from None
    child = Child(process, log_path, keep=args.keep_child)
    print(f"dflash-diag top: launched PID {child.pid}; its output goes to {shown(log_path)}", file=sys.stderr)
    try:
        yield child
    finally:
        log.close()
        _stop_child(child)


def _discard_child_log(path: Path, log: TextIO, args: argparse.Namespace) -> None:
    """Nothing was launched: the empty log this command just created (O_EXCL, so ours) goes, and its private
    directory when it made one."""
    log.close()
    path.unlink(missing_ok=True)
    if args.child_log is None:
        try:
            path.parent.rmdir()
        except OSError:
            pass


def _stop_child(child: Child) -> None:
    if child.process.poll() is not None:
        print(
            f"dflash-diag top: PID {child.pid} exited with code {child.process.returncode}", file=sys.stderr
        )
        return
    if child.keep:
        print(f"dflash-diag top: leaving PID {child.pid} running (--keep-child)", file=sys.stderr)
        return
    for sig, grace_s in (
        (signal.SIGINT, CHILD_INT_GRACE_S),
        (signal.SIGTERM, CHILD_TERM_GRACE_S),
        (signal.SIGKILL, 5.0),
    ):
        try:
            # The command runs in a session (and process group) of its own: the signal reaches a wrapper
            # script and the interpreter it started alike, like Ctrl-C in their own terminal.
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            break
        try:
            child.process.wait(timeout=grace_s)
            break
        except subprocess.TimeoutExpired:
            continue
    print(f"dflash-diag top: stopped PID {child.pid} (exit code {child.process.returncode})", file=sys.stderr)


def _wait_attachable(child: Child, args: argparse.Namespace) -> int:
    """Wait until py-spy can read the command's Python interpreter and its pipeline threads run (or the command
    dies); return the interpreter's PID. The command may be a wrapper (a pyenv shim, a shell script) that execs
    the interpreter (same PID, Python once the exec is done) or starts it as a child: both are followed.

    Without --warmup, sampling starts once a thread named like a target or drafter stage exists (at most
    ATTACH_WAIT_S), so a batch report covers training rather than imports. With --warmup S: S seconds after attach.
    """
    from dflash_diag.sources.attach import python_interpreter
    from dflash_diag.sources.pyspy_find import find_pyspy

    if find_pyspy() is None:
        check_attachable(child.pid)  # raises the MISSING_TOOL diagnosis before waiting for anything
    patterns = _patterns(args)
    started = time.monotonic()
    deadline = started + ATTACH_WAIT_S
    attached_at: float | None = None
    announced: int | None = None
    while True:
        if child.process.poll() is not None:
            raise CommandError(
                f"the command exited with code {child.process.returncode} before top could attach; see {child.log_path}",
                ExitCode.NO_PROCESS,
            )
        now = time.monotonic()
        pid = python_interpreter(child.pid)
        names: list[str] = []
        if pid is not None:
            if pid != child.pid and pid != announced:
                print(f"dflash-diag top: PID {child.pid} is a wrapper; watching its Python interpreter, PID {pid}",
                      file=sys.stderr)
                announced = pid
            try:
                names = probe_dump(pid)
                attached_at = attached_at if attached_at is not None else now
            except AttachError as exc:
                if exc.exit_code in (ExitCode.MISSING_TOOL, ExitCode.PERMISSION) or now > deadline:
                    raise
        elif now > started + WRAPPER_GRACE_S:
            check_attachable(child.pid)  # the diagnosis: not a Python process ...
            raise CommandError(  # ... and not a wrapper either (no Python process under it)
                f"PID {child.pid} is not a Python process and started none in {WRAPPER_GRACE_S:.0f} s",
                ExitCode.NOT_PYTHON)
        if attached_at is not None and pid is not None:
            if args.warmup is not None:
                if now - attached_at >= args.warmup:
                    return pid
            elif any(patterns.stage_of(name) is not Stage.OTHER for name in names) or now > deadline:
                return pid
        time.sleep(0.5)


__all__ = ["TopCommand", "DflashDiagError"]
