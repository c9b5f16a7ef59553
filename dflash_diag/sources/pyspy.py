"""Stacks of another process through py-spy: ``py-spy dump --pid P --json [--nonblocking | --native]``.

Why a subprocess per dump: ``dump --json`` is the only py-spy output with per-thread ``owns_gil``/``active``
(``record``/``top`` merge threads); one dump costs ~10-40 ms of py-spy CPU on a torch process.

Why ``--nonblocking`` by default: py-spy's blocking mode ptrace-stops every OS thread for each sample, and a
torch process has many (py-spy#872: 5-15x slowdown at 100 Hz). ``--native`` needs the blocking mode (py-spy
refuses ``--native --nonblocking``), so native dumps are opt-in and rate-limited (``native_min_interval_s``).

Finding the binary is :mod:`~dflash_diag.sources.pyspy_find`, parsing :mod:`~dflash_diag.sources.pyspy_json`,
the diagnosis of a failed attach :mod:`~dflash_diag.sources.attach`; this module only runs py-spy.
"""

from __future__ import annotations

import resource
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence

from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.model import StackSample
from dflash_diag.sources import attach
from dflash_diag.sources.procfs import process_alive
from dflash_diag.sources.pyspy_find import INSTALL_HINT, find_pyspy
from dflash_diag.sources.pyspy_json import parse_dump

NATIVE_PAUSE_FACTOR = 20.0  # native dumps at most every 20x their own duration (<= 5% of the time paused)


Runner = Callable[[Sequence[str], float], "subprocess.CompletedProcess[str]"]


def _run(cmd: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout_s, check=False,
                          stdin=subprocess.DEVNULL)


class PySpy:
    """One target process sampled through the py-spy binary.

    ``native=True`` asks for native frames, which pause the process: they are taken at most once every
    ``native_min_interval_s``; other calls fall back to a non-blocking dump. ``dump(native=True)`` forces one.
    """

    def __init__(
        self,
        pid: int,
        *,
        native: bool = False,
        timeout_s: float = 10.0,
        retries: int = 4,
        retry_delay_s: float = 0.05,
        native_min_interval_s: float = 5.0,
        nice: int = 10,
        binary: str | None = None,
        runner: Runner | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.pid = pid
        self.native = native
        self.timeout_s = timeout_s
        self.retries = retries
        self.retry_delay_s = retry_delay_s
        self.native_min_interval_s = native_min_interval_s
        self.nice = nice
        self._explicit_binary = binary
        self._runner = runner or _run
        self._clock = clock
        self._wall = wall_clock
        self._last_native_s: float | None = None
        self._last_native_duration_s = 0.0
        self.native_error: str | None = None  # why the last native dump fell back to Python frames
        self.last_cpu_s: float | None = None  # CPU time (user+sys) the last py-spy run cost: what the box pays
        self.attempts = 0  # py-spy runs, retries included (shown as py-spy's error rate)
        self.failures = 0

    @property
    def binary(self) -> str:
        found = find_pyspy(self._explicit_binary)
        if found is None:
            if self._explicit_binary is not None:
                raise AttachError(f"py-spy not found at {self._explicit_binary}: pip install py-spy",
                                  ExitCode.MISSING_TOOL)
            raise AttachError(INSTALL_HINT, ExitCode.MISSING_TOOL)
        return found

    def check(self) -> None:
        """Fail early, with a diagnosis, when the process cannot be sampled (no dump is taken)."""
        self.binary  # noqa: B018  (raises MISSING_TOOL)
        attach.check(self.pid)

    def _want_native(self, native: bool | None) -> bool:
        if native is not None:
            return native
        if not self.native:
            return False
        if self._last_native_s is None:
            return True
        # A native dump pauses the process for its whole duration: keep the paused share under 5%.
        interval_s = max(self.native_min_interval_s, NATIVE_PAUSE_FACTOR * self._last_native_duration_s)
        return self._clock() - self._last_native_s >= interval_s

    def request_native(self) -> None:
        """Make the next dump native (the user just asked for native frames), whatever the rate limit says."""
        self._last_native_s = None

    def dump(self, native: bool | None = None) -> StackSample:
        """One dump of every thread; retries transient attach failures, raises AttachError otherwise."""
        binary = self.binary
        want_native = self._want_native(native)
        cmd = [binary, "dump", "--pid", str(self.pid), "--json", "--native" if want_native else "--nonblocking"]
        nice_bin = shutil.which("nice") if self.nice > 0 and not want_native else None
        if nice_bin is not None:
            # A non-blocking dump yields the CPU to the trainer when both want it. Not a native dump: that one
            # pauses the trainer until py-spy is done, so py-spy must finish as fast as it can.
            cmd = [nice_bin, "-n", str(self.nice), *cmd]
        stderr = ""
        for attempt in range(self.retries + 1):
            self.attempts += 1
            t0 = self._clock()
            wall0 = self._wall()
            usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            try:
                res = self._runner(cmd, self.timeout_s)
            except subprocess.TimeoutExpired:
                self.failures += 1
                raise AttachError(
                    f"py-spy took longer than {self.timeout_s:.0f} s to dump PID {self.pid}"
                    + (" (native dumps pause the process; try without --native)" if want_native else ""),
                    ExitCode.FAILURE,
                ) from None
            except FileNotFoundError:
                raise AttachError(INSTALL_HINT, ExitCode.MISSING_TOOL) from None
            except PermissionError:
                raise AttachError(f"py-spy at {binary} is not executable: pip install py-spy",
                                  ExitCode.MISSING_TOOL) from None
            t1 = self._clock()
            usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            self.last_cpu_s = max(0.0, (usage1.ru_utime + usage1.ru_stime) - (usage0.ru_utime + usage0.ru_stime))
            if res.returncode == 0:
                if want_native:
                    self._last_native_s = t1
                    self._last_native_duration_s = t1 - t0
                # Stamp the sample in the middle of the dump: the best estimate of when the threads were read.
                return parse_dump(res.stdout, pid=self.pid, monotonic_s=(t0 + t1) / 2,
                                  wall_s=wall0 + (t1 - t0) / 2, duration_s=t1 - t0, native=want_native)
            self.failures += 1
            stderr = res.stderr or res.stdout or ""
            if not process_alive(self.pid):
                break
            if want_native and native is None and attach.is_transient(stderr):
                # Native unwinding fails on some builds ("Failed to merge native and python frames"): fall back
                # to Python frames now and retry native only after the usual interval.
                self._last_native_s = t1
                self.native_error = attach.first_error_line(stderr)
                return self.dump(native=False)
            if not attach.is_transient(stderr) or attempt == self.retries:
                break
            if attach.looks_like_python(self.pid) is False:
                break  # "Failed to find python version" from a process that is not Python: no point retrying
            time.sleep(self.retry_delay_s * (attempt + 1))
        raise attach.attach_error(self.pid, stderr)
