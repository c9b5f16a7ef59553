"""Stacks of another process through py-spy: ``py-spy dump --pid P --json [--nonblocking | --native]``.

Why a subprocess per dump: ``dump --json`` is the only py-spy output with per-thread ``owns_gil``/``active``
(``record``/``top`` merge threads); one dump costs ~10-40 ms of py-spy CPU on a torch process.

Why ``--nonblocking`` by default: py-spy's blocking mode ptrace-stops every OS thread for each sample, and a
torch process has many (py-spy#872: 5-15x slowdown at 100 Hz). ``--native`` needs the blocking mode (py-spy
refuses ``--native --nonblocking``), so native dumps are opt-in and rate-limited (``native_min_interval_s``).

py-spy's output is untrusted input: it is parsed strictly into :mod:`dflash_diag.model` objects, and any
deviation is a :class:`PySpyOutputError`. Attach failures become :class:`AttachError` with a diagnosis.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dflash_diag.errors import AttachError, DflashDiagError, ExitCode
from dflash_diag.model import Frame, StackSample, ThreadSample
from dflash_diag.model.text import printable

PYSPY_ENV = "DFLASH_DIAG_PYSPY"  # explicit path to the py-spy binary
INSTALL_HINT = "py-spy not found: pip install py-spy (or set DFLASH_DIAG_PYSPY=/path/to/py-spy)"

# Bounds on what we accept from py-spy: generous for real processes, small enough to keep memory bounded.
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
MAX_THREADS = 4096
MAX_FRAMES = 4096
MAX_STR = 8192

# "Failed to find python version" and friends happen on ~40% of attaches to a fresh interpreter and go away
# on retry (probe-apis.md §4.2c); these markers mean "try again".
_TRANSIENT_MARKERS = (
    "Failed to find python version",
    "Failed to find a python interpreter",
    "failed to find _PyRuntime",
    "Failed to get interpreter",
    "Failed to copy PyCodeObject",
    "Failed to copy PyFrameObject",
    "Failed to read",
    "Failed to merge native and python frames",
    "Interrupted system call",
)
_PERMISSION_MARKERS = ("permission denied", "operation not permitted", "os error 1)", "os error 13)")

PTRACE_FIX = (
    "run dflash-diag as the process's user with ptrace allowed (sysctl kernel.yama.ptrace_scope=0), "
    "or as root / with CAP_SYS_PTRACE (sudo dflash-diag ...); in a container add --cap-add SYS_PTRACE "
    "(Kubernetes: securityContext.capabilities.add: [SYS_PTRACE])"
)


NATIVE_PAUSE_FACTOR = 20.0  # native dumps at most every 20x their own duration (<= 5% of the time paused)


class PySpyOutputError(DflashDiagError):
    """py-spy printed something that is not the ``dump --json`` layout we know."""

    exit_code = ExitCode.BAD_INPUT


def find_pyspy(explicit: str | None = None) -> str | None:
    """Where the py-spy binary is: explicit path, $DFLASH_DIAG_PYSPY, PATH, next to sys.executable, scripts dirs."""
    if explicit is not None:
        return explicit if _is_executable(explicit) else None
    env = os.environ.get(PYSPY_ENV)
    if env:
        return env if _is_executable(env) else None
    on_path = shutil.which("py-spy")
    if on_path:
        return on_path
    candidates = [Path(sys.executable).parent / "py-spy"]
    for scheme in (None, f"{os.name}_user"):
        try:
            scripts = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        if scripts:
            candidates.append(Path(scripts) / "py-spy")
    for candidate in candidates:
        if _is_executable(str(candidate)):
            return str(candidate)
    return None


def _is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


# --- strict parsing ---------------------------------------------------------------------------------------


def _req(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str, *, in_range: bool = True) -> Any:
    if key not in obj:
        raise PySpyOutputError(f"py-spy output: {where} lacks {key!r}")
    return _check(obj[key], kind, f"{where}.{key}", in_range=in_range)


def _check(value: Any, kind: type | tuple[type, ...], where: str, *, in_range: bool = True) -> Any:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # bool is an int in Python; py-spy never sends a bool where it means a number.
    if isinstance(value, bool) and bool not in kinds:
        raise PySpyOutputError(f"py-spy output: {where} is a bool, expected {_names(kinds)}")
    if not isinstance(value, kinds):
        raise PySpyOutputError(f"py-spy output: {where} is {type(value).__name__}, expected {_names(kinds)}")
    if isinstance(value, str) and len(value) > MAX_STR:
        raise PySpyOutputError(f"py-spy output: {where} is longer than {MAX_STR} characters")
    if in_range and isinstance(value, int) and not isinstance(value, bool) and not (0 <= value < 2**64):
        raise PySpyOutputError(f"py-spy output: {where} = {value} is out of range")
    return value


def _names(kinds: tuple[type, ...]) -> str:
    return " or ".join("null" if k is type(None) else k.__name__ for k in kinds)


def parse_frame(raw: Any, where: str) -> Frame:
    if not isinstance(raw, dict):
        raise PySpyOutputError(f"py-spy output: {where} is not an object")
    name = _req(raw, "name", str, where)
    filename = _req(raw, "filename", str, where)
    line = _req(raw, "line", int, where, in_range=False)
    # A nonblocking dump can read a line table the process is rewriting and report nonsense such as -60417:
    # the frame is still real, its line is unknown (0).
    line = line if 0 <= line < 2**31 else 0
    module = _check(raw.get("module"), (str, type(None)), f"{where}.module")
    # py-spy sets ``module`` (the shared library) only on native frames; Python frames carry null.
    # Names come from the inspected program: made printable here, so no screen or report shows raw escapes.
    return Frame(name=printable(name), filename=printable(filename), line=line, native=module is not None,
                 module=module)


def _printable_or_none(text: str | None) -> str | None:
    return None if text is None else printable(text)


def parse_thread(raw: Any, where: str) -> ThreadSample:
    if not isinstance(raw, dict):
        raise PySpyOutputError(f"py-spy output: {where} is not an object")
    frames_raw = _req(raw, "frames", list, where)
    if len(frames_raw) > MAX_FRAMES:
        raise PySpyOutputError(f"py-spy output: {where} has {len(frames_raw)} frames (limit {MAX_FRAMES})")
    return ThreadSample(
        thread_id=_req(raw, "thread_id", int, where),
        os_thread_id=_check(raw.get("os_thread_id"), (int, type(None)), f"{where}.os_thread_id"),
        name=_printable_or_none(_check(raw.get("thread_name"), (str, type(None)), f"{where}.thread_name")),
        active=_req(raw, "active", bool, where),
        owns_gil=_req(raw, "owns_gil", bool, where),
        frames=tuple(parse_frame(f, f"{where}.frames[{i}]") for i, f in enumerate(frames_raw)),
    )


def parse_dump(
    text: str | bytes,
    *,
    pid: int,
    monotonic_s: float,
    wall_s: float,
    duration_s: float,
    native: bool,
) -> StackSample:
    """Parse ``py-spy dump --json`` output, refusing anything malformed, foreign or oversized."""
    if len(text) > MAX_OUTPUT_BYTES:
        raise PySpyOutputError(f"py-spy output is larger than {MAX_OUTPUT_BYTES} bytes")
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise PySpyOutputError(f"py-spy output is not JSON: {exc}") from None
    return stack_sample_from_json(doc, pid=pid, monotonic_s=monotonic_s, wall_s=wall_s, duration_s=duration_s,
                                  native=native)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def stack_sample_from_json(
    doc: Any, *, pid: int, monotonic_s: float, wall_s: float, duration_s: float, native: bool
) -> StackSample:
    """Build a StackSample from an already-decoded ``dump --json`` document (recorded fixtures use this too)."""
    if not isinstance(doc, list):
        raise PySpyOutputError(f"py-spy output: expected a list of threads, got {type(doc).__name__}")
    if len(doc) > MAX_THREADS:
        raise PySpyOutputError(f"py-spy output: {len(doc)} threads (limit {MAX_THREADS})")
    threads = []
    for i, raw in enumerate(doc):
        where = f"thread[{i}]"
        if isinstance(raw, dict) and "pid" in raw:
            got = _check(raw["pid"], int, f"{where}.pid")
            if got != pid:
                raise PySpyOutputError(f"py-spy output: {where} belongs to PID {got}, not {pid}")
        threads.append(parse_thread(raw, where))
    return StackSample(pid=pid, monotonic_s=monotonic_s, wall_s=wall_s, duration_s=duration_s, native=native,
                       threads=tuple(threads))


# --- attach-failure diagnosis ----------------------------------------------------------------------------


def process_exists(pid: int) -> bool:
    """True when ``pid`` names a live process (ours or another user's); a zombie has exited."""
    if pid <= 0:
        return False  # os.kill(0 or -n, 0) would signal a process group, not check a PID
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            state = fh.read().rsplit(")", 1)[-1].split()[:1]
    except OSError:
        return True  # no /proc (or not readable): os.kill said it exists
    return state not in (["Z"], ["X"])


def _looks_like_python(pid: int) -> bool | None:
    """Whether the process runs a Python interpreter: exe named python*, or libpython mapped. None: cannot tell."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        exe = ""
    if "python" in os.path.basename(exe).lower():
        return True
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if "libpython" in line or "/python3" in line:
                    return True
    except PermissionError:
        return None
    except OSError:
        return None if not exe else False
    return False


def _exe_name(pid: int) -> str:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as fh:
                return fh.read().strip()
        except OSError:
            return "?"


def diagnose(pid: int, stderr: str) -> AttachError:
    """Turn a failed py-spy run into an AttachError that names the cause and the fix."""
    first = _first_error_line(stderr)
    if not process_exists(pid):
        return AttachError(f"no process with PID {pid} (it exited or never existed)", ExitCode.NO_PROCESS)
    if any(marker in stderr.lower() for marker in _PERMISSION_MARKERS) or _other_user(pid):
        owner = _owner(pid)
        who = f" (owned by uid {owner}, you are uid {os.geteuid()})" if owner is not None and owner != os.geteuid() else ""
        scope = _ptrace_scope()
        now = f" (kernel.yama.ptrace_scope is {scope} here)" if scope not in (None, "0") else ""
        return AttachError(f"not allowed to inspect PID {pid}{who}: {first}{now}; {PTRACE_FIX}", ExitCode.PERMISSION)
    if _looks_like_python(pid) is False:
        return AttachError(
            f"PID {pid} ({_exe_name(pid)}) is not a Python process: py-spy found no interpreter in it",
            ExitCode.NOT_PYTHON,
        )
    return AttachError(f"py-spy could not read PID {pid}: {first}", ExitCode.FAILURE)


def _ptrace_scope() -> str | None:
    """The Yama ptrace policy (0: classic, 1: descendants only, 2: admin only, 3: none), None without Yama."""
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope", encoding="ascii") as fh:
            value = fh.read().strip()
    except OSError:
        return None
    return value if value.isdigit() else None


def _first_error_line(stderr: str) -> str:
    for line in stderr.splitlines():
        line = line.strip()
        if line.startswith("Error:"):
            return line[len("Error:") :].strip()
        if line.lower().startswith("permission denied"):
            return "permission denied"
    for line in stderr.splitlines():
        if line.strip():
            return line.strip()[:300]
    return "no output"


def _owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _other_user(pid: int) -> bool:
    """True when we cannot ptrace ``pid`` because it is another user's and we are not root."""
    if os.geteuid() == 0:
        return False
    owner = _owner(pid)
    return owner is not None and owner != os.geteuid()


def is_transient(stderr: str) -> bool:
    return any(marker in stderr for marker in _TRANSIENT_MARKERS)


# --- the source ------------------------------------------------------------------------------------------

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
        if not process_exists(self.pid):
            raise AttachError(f"no process with PID {self.pid} (it exited or never existed)", ExitCode.NO_PROCESS)
        if _other_user(self.pid):
            raise diagnose(self.pid, "Permission denied")
        if _looks_like_python(self.pid) is False:
            raise diagnose(self.pid, "")

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
            if not process_exists(self.pid):
                break
            if want_native and native is None and is_transient(stderr):
                # Native unwinding fails on some builds ("Failed to merge native and python frames"): fall back
                # to Python frames now and retry native only after the usual interval.
                self._last_native_s = t1
                self.native_error = _first_error_line(stderr)
                return self.dump(native=False)
            if not is_transient(stderr) or attempt == self.retries:
                break
            if _looks_like_python(self.pid) is False:
                break  # "Failed to find python version" from a process that is not Python: no point retrying
            time.sleep(self.retry_delay_s * (attempt + 1))
        raise diagnose(self.pid, stderr)


def load_recorded_dumps(path: str | Path, *, start_monotonic_s: float = 0.0, spacing_s: float = 0.2,
                        start_wall_s: float = 1_764_412_345.0) -> tuple[StackSample, ...]:
    """Recorded dumps (``[{"native": bool, "seconds": float, "dump": [...]}, ...]``, as in tests/fixtures/*/)
    as StackSamples, ``spacing_s`` apart: for tests, replays and offline analysis. Validated like live output."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"), parse_constant=_reject_constant)
    except (OSError, ValueError) as exc:
        raise PySpyOutputError(f"{path}: cannot read recorded dumps: {exc}") from None
    if not isinstance(doc, list):
        raise PySpyOutputError(f"{path}: expected a list of recorded dumps")
    out = []
    for i, entry in enumerate(doc):
        if not isinstance(entry, dict) or not isinstance(entry.get("dump"), list) or not entry["dump"]:
            raise PySpyOutputError(f"{path}: entry {i} has no dump")
        first = entry["dump"][0]
        pid = first.get("pid") if isinstance(first, dict) else None
        if not isinstance(pid, int) or isinstance(pid, bool):
            raise PySpyOutputError(f"{path}: entry {i} has no pid")
        seconds = entry.get("seconds", 0.0)
        out.append(stack_sample_from_json(
            entry["dump"], pid=pid, monotonic_s=start_monotonic_s + i * spacing_s,
            wall_s=start_wall_s + i * spacing_s,
            duration_s=float(seconds) if isinstance(seconds, int | float) else 0.0,
            native=bool(entry.get("native", False)),
        ))
    return tuple(out)
