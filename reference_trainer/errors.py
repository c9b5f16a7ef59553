"""The trainer's exit codes and its one user-facing error type (docs/trainer.md, "Exit codes").

Codes shared with ``dflash-diag`` mean the same thing there (2 bad flags, 6 a bad input file); the rest are
the trainer's own.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0  # done: max steps / seconds reached, or stopped by a signal after a checkpoint
    THREAD_FAILED = 1  # a thread raised: its traceback is printed (a bug or a broken environment, not a flag)
    USAGE = 2  # bad flags (argparse's own code)
    BAD_INPUT = 6  # --resume / --target-path / --data names a missing, corrupt or foreign file
    WRITE_FAILED = 9  # the checkpoint or summary could not be written (disk full, read-only); the old one is kept
    INTERRUPTED = 130  # a second SIGINT/SIGTERM/SIGHUP: stopped at once, no checkpoint (128 + SIGINT)


class UserError(Exception):
    """A mistake of the user's (flag, path, file): one line on stderr, ``exit_code``, no traceback."""

    def __init__(self, message: str, exit_code: ExitCode = ExitCode.BAD_INPUT) -> None:
        super().__init__(message)
        self.exit_code = exit_code
