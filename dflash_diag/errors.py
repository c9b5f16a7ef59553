"""Typed failures. A user mistake becomes one line on stderr and a distinct exit code, never a traceback."""

from __future__ import annotations


class ExitCode:
    """Exit codes shared by every subcommand (the table in README.md and docs/security.md)."""

    OK = 0
    FAILURE = 1  # unexpected internal error (a bug: the traceback is shown)
    USAGE = 2  # bad flags or arguments (argparse's own code)
    NO_PROCESS = 3  # the PID does not exist / the process exited
    PERMISSION = 4  # not allowed to inspect the process (ptrace, other user)
    MISSING_TOOL = 5  # py-spy (or another required tool) is not installed
    BAD_INPUT = 6  # a file given to us is missing, corrupt, foreign or unsafe
    EXISTS = 7  # refusing to overwrite an existing output without --force
    NOT_PYTHON = 8  # the process is not a Python interpreter py-spy understands
    UNSAFE_OUTPUT = 9  # refusing to write over something dflash-diag did not write (or /, home, the cwd)
    FINDINGS = 10  # `doctor --fail-on`: findings at or above the threshold were raised
    CANNOT_WRITE = 11  # the output cannot be written: no such or unwritable directory, disk full, name too long
    UNSUPPORTED = 12  # `attach`: a CPython version (or build) the probes cannot be injected into
    ATTACH_FAILED = 13  # `attach`/`detach`: the process is stopped, traced, the command itself (or an ancestor
    # waiting for it), or the injected probes failed
    ATTACH_TIMEOUT = 14  # `attach`/`detach`: the process did not reach a safe point in time (request cancelled)
    NO_TORCH = 15  # `record --kernels`: the process has not imported torch
    PROFILER_BUSY = 16  # `record --kernels`: a torch profiler already runs (or warms up) in the process


class DflashDiagError(Exception):
    """Base class of every error this package raises on purpose."""

    exit_code: int = ExitCode.FAILURE


class CommandError(DflashDiagError):
    """A user-facing failure with a one-line message that says what to do."""

    def __init__(self, message: str, exit_code: int = ExitCode.FAILURE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class BoardError(DflashDiagError):
    """A probe board could not be used: missing, corrupt, truncated, foreign or unsafe."""

    exit_code = ExitCode.BAD_INPUT


class AttachError(DflashDiagError):
    """py-spy (or /proc) could not look at the process; the message names the cause and the fix."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived in a command that changed another process (``cli/_signals.py``).

    A BaseException, like KeyboardInterrupt: ``except Exception`` does not stop it, ``finally`` blocks run
    (the detach), and the command exits 128+N."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum
