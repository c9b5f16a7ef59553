"""`record --kernels`' side of a torch.profiler recording inside a running process: ask for it (the attach
protocol's ``kernels`` action, run by the bootstrap at a safe point like attach/detach), wait for its end, ask
for an early end, read what it left (its outcome, torch's trace), remove its files.

The process writes its files next to the request's (``dflash_contract.attach``: ``.trace.json``, ``.kernels``);
the command writes ``.stop`` to end the recording early (``finish``: keep it; ``abort``: throw it away). The
recording is leased to the command: if the command dies (SIGKILL), the process stops the profiler by itself
within half a second and deletes its trace (``probes/kernels.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from dflash_contract import attach as protocol
from dflash_diag.errors import AttachError, ExitCode, Terminated
from dflash_diag.inject.injection import Outcome
from dflash_diag.inject.preflight import proc_state
from dflash_diag.inject.request import Lease, Request, write_private

OUTCOME_SCHEMA = protocol.KERNELS_OUTCOME_SCHEMA
MAX_OUTCOME_BYTES = 8 << 20
MAX_TRACE_BYTES = 1 << 30  # torch's JSON of a recording (a few hundred bytes an event): past it, a shorter window
POLL_S = 0.05
# After the window: the process stops the profiler (synchronising the GPU) and exports the trace, both growing with
# the events recorded (docs/benchmarks.md); the command waits this long for it before it gives up.
END_GRACE_S = 120.0
ABORT_WAIT_S = 30.0  # Ctrl-C / SIGTERM: how long the command waits for the process to say the profiler stopped
# ... when it came during the start: the recording may not have begun (then no word ever comes); when it has, the
# process checks for the stop every half second, which a loaded machine can stretch to a few.
STARTING_ABORT_WAIT_S = 5.0
REFUSALS = {"no-torch": ExitCode.NO_TORCH, "profiler-active": ExitCode.PROFILER_BUSY,
            "unsupported": ExitCode.UNSUPPORTED}


@dataclass(frozen=True)
class KernelFiles:
    """The files of one recording (all in the board directory, all 0600)."""

    prefix: Path

    @property
    def trace(self) -> Path:
        return Path(str(self.prefix) + protocol.TRACE_SUFFIX)

    @property
    def stop(self) -> Path:
        return Path(str(self.prefix) + protocol.STOP_SUFFIX)

    @property
    def outcome(self) -> Path:
        return Path(str(self.prefix) + protocol.OUTCOME_SUFFIX)

    def paths(self) -> tuple[Path, ...]:
        return (self.trace, self.stop, self.outcome, Path(str(self.outcome) + protocol.TMP_SUFFIX))

    def remove(self) -> None:
        for path in self.paths():
            with contextlib.suppress(OSError):
                os.unlink(path)


@dataclass(frozen=True)
class Recording:
    """A recording that started: the injection's outcome, its files, when the command saw it start."""

    injection: Outcome
    files: KernelFiles
    started_mono_s: float
    cuda: bool
    torch_version: str


def start_recording(pid: int, *, board_dir: Path, duration_s: float, steps: int | None, method: str,
                    timeout_s: float, lease: Lease | None, progress: Callable[[str], None] | None = None,
                    interrupted: Callable[[bool], None] | None = None) -> Recording:
    """Start torch.profiler in ``pid``; AttachError with the refusal's exit code when it would not start.

    ``interrupted(stopped)``: told, on Ctrl-C or SIGTERM during the start, whether the process said the profiler
    is stopped (False: it may never have started, or stops by itself at its lease's end)."""
    from dflash_diag.inject.orchestrate import inject

    request = Request(board_dir, pid)
    files = KernelFiles(request.prefix)
    params = {"duration_s": float(duration_s), "steps": steps}
    try:
        outcome = inject(pid, "kernels", board_dir=board_dir, method=method, timeout_s=timeout_s, progress=progress,
                         lease=lease, request=request, kernels=params)
    except (KeyboardInterrupt, Terminated):
        # Ctrl-C or SIGTERM while the answer was on its way: the recording may have started. Ask it to stop and
        # give it a moment to say so (its lease covers the rest once this command has exited).
        stopped = abort(pid, files, wait_s=STARTING_ABORT_WAIT_S)
        files.remove()
        if interrupted is not None:
            interrupted(stopped)
        raise
    except BaseException:  # the request failed or was cancelled: nothing started
        files.remove()
        raise
    result = outcome.result
    if not result.get("ok"):
        files.remove()
        code = REFUSALS.get(str(result.get("refused")), ExitCode.ATTACH_FAILED)
        raise AttachError(f"PID {pid}: {result.get('error') or 'the profiler did not start'}", code)
    recording = result.get("recording")
    info: Mapping[str, Any] = recording if isinstance(recording, dict) else {}
    return Recording(injection=outcome, files=files, started_mono_s=time.monotonic(), cuda=bool(info.get("cuda")),
                     torch_version=str(info.get("torch", "?")))


def ended(files: KernelFiles) -> bool:
    """Whether the process has written the recording's outcome (the profiler is stopped)."""
    return files.outcome.exists()


def wait_outcome(pid: int, files: KernelFiles, deadline_mono_s: float) -> dict[str, Any]:
    """The recording's outcome once the process wrote it; AttachError when the process exits or it never comes."""
    while True:
        outcome = read_outcome(files)
        if outcome is not None:
            return outcome
        if proc_state(pid) in (None, "Z", "X"):
            raise AttachError(f"PID {pid} exited during the kernel recording", ExitCode.NO_PROCESS)
        if time.monotonic() >= deadline_mono_s:
            ask_stop(files, abort=True)
            raise AttachError(f"PID {pid} did not finish its kernel recording in time (stopping the profiler and "
                              "exporting its trace grow with the events: record a shorter --duration or fewer "
                              "--steps); asked it to stop and drop the trace", ExitCode.ATTACH_TIMEOUT)
        time.sleep(POLL_S)


def ask_stop(files: KernelFiles, *, abort: bool) -> None:
    """Ask the process to end the recording now (``abort``: and throw it away). Idempotent."""
    with contextlib.suppress(FileExistsError, OSError):
        write_private(files.stop, b"abort" if abort else b"finish")


def abort(pid: int, files: KernelFiles, wait_s: float = ABORT_WAIT_S) -> bool:
    """Stop the recording and throw it away; True once the process said the profiler is stopped."""
    ask_stop(files, abort=True)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        with contextlib.suppress(AttachError):
            if read_outcome(files) is not None:
                return True
        if proc_state(pid) in (None, "Z", "X"):
            return True  # gone: nothing of it is left running
        time.sleep(POLL_S)
    return False


def _open_private(path: Path, limit: int, what: str) -> BinaryIO | None:
    """A private regular file of ours, open for reading (None when absent); AttachError when it is not that."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AttachError(f"cannot read the {what} {path}: {exc.strerror}", ExitCode.ATTACH_FAILED) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise AttachError(f"the {what} {path} is not a private file of yours: refusing it", ExitCode.ATTACH_FAILED)
        if st.st_size > limit:
            raise AttachError(f"the {what} is {st.st_size / 1e6:.0f} MB, over the {limit / 1e6:.0f} MB this command "
                              "reads: record a shorter --duration or fewer --steps", ExitCode.BAD_INPUT)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_private(path: Path, limit: int, what: str) -> bytes | None:
    """The bytes of a private regular file of ours (None when absent); AttachError when it is not that."""
    fh = _open_private(path, limit, what)
    if fh is None:
        return None
    with fh:
        return fh.read(limit + 1)


def read_outcome(files: KernelFiles) -> dict[str, Any] | None:
    data = _read_private(files.outcome, MAX_OUTCOME_BYTES, "recording's outcome")
    if data is None:
        return None
    try:
        value = json.loads(data)
    except ValueError:
        raise AttachError(f"the recording's outcome {files.outcome} is not JSON", ExitCode.ATTACH_FAILED) from None
    if not isinstance(value, dict) or value.get("schema") != OUTCOME_SCHEMA:
        raise AttachError(f"the recording's outcome {files.outcome} is not one", ExitCode.ATTACH_FAILED)
    return value


def open_trace(files: KernelFiles) -> BinaryIO:
    """torch's trace of the recording, open for reading (the caller streams it: sources.kernel_trace)."""
    fh = _open_private(files.trace, MAX_TRACE_BYTES, "profiler's trace")
    if fh is None:
        raise AttachError("the process wrote no trace", ExitCode.ATTACH_FAILED)
    return fh
