"""Native (C/C++) stacks of a process beside a window: ``py-spy record --native --idle --threads --format raw``.

Why ``record`` and not one ``dump --native`` per sample: each py-spy run loads the symbols of every library the
process maps (libtorch's are hundreds of MB) while the process is stopped, so one native dump paused a torch
trainer 0.5-0.7 s on the 2-core box; a recorder loads them once (a single pause of ~0.4 s) and then reads a sample
in a few milliseconds (docs/benchmarks.md, "Native stacks"). It runs for the window, is stopped with SIGINT (py-spy
writes what it has and exits), and its ``--duration`` bounds it if we die first: it never outlives the window by
more than ``OVERRUN_S``. ``--idle`` keeps the samples of threads that wait: a thread waiting for the GIL sleeps in a
condition wait, and only its native stack shows that the wait is the GIL's (``analysis.native``).

The raw output (one ``frame;frame;... count`` line per distinct stack, root first) goes to a file in a private
directory of our own that is removed after it is read; it is read bounded (``MAX_RAW_BYTES``, ``MAX_STACKS``,
``MAX_FRAMES``), and anything py-spy says that is not a profile is a reason (``NativeProfile.error``), never an
exception.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dflash_diag.model import Frame, NativeProfile, NativeStack
from dflash_diag.sources.pyspy_find import INSTALL_HINT, find_pyspy

NATIVE_PROFILE_HZ = 20.0  # 20 Hz cost the trainer no more than 5 Hz (the first sample's pause dominates)
OVERRUN_S = 5.0  # py-spy's own --duration: the window and this much more, in case we never stop it
STOP_TIMEOUT_S = 5.0  # how long py-spy gets to write its output after SIGINT
MAX_RAW_BYTES = 32 * 1024 * 1024
MAX_STACKS = 20_000
MAX_FRAMES = 256
MAX_NAME_CHARS = 400  # C++ symbols with their templates run to kilobytes; the head says what they are
_THREAD_ROOT = re.compile(r"^thread \((?P<tid>\d+)\)(?::\s?(?P<name>.*))?$")
_SAMPLES = re.compile(r"Samples: (\d+)")
_PYTHON_SUFFIXES = (".py", ".pyw", ".pyx")

Popen = Callable[..., "subprocess.Popen[bytes]"]


class NativeRecorder:
    """One ``py-spy record --native`` of ``pid`` from :meth:`start` to :meth:`stop` (at most ``max_s``)."""

    def __init__(self, pid: int, *, max_s: float, rate_hz: float = NATIVE_PROFILE_HZ, binary: str | None = None,
                 popen: Popen = subprocess.Popen, clock: Callable[[], float] = time.monotonic) -> None:
        self.pid = pid
        self.max_s = max_s
        self.rate_hz = rate_hz
        self._binary = binary
        self._popen = popen
        self._clock = clock
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None
        self._started_s = 0.0
        self._error: str | None = None

    def start(self) -> None:
        """Start recording; a failure to start is kept as the profile's reason, not raised."""
        binary = self._binary or find_pyspy()
        if binary is None:
            self._error = INSTALL_HINT
            return
        self._dir = Path(tempfile.mkdtemp(prefix="dflash-diag-native-"))  # 0700: only we read the stacks
        # --idle: the waiting threads too; a thread waiting for the GIL sleeps, and py-spy would drop it as idle.
        cmd = [binary, "record", "--pid", str(self.pid), "--native", "--idle", "--threads", "--format", "raw",
               "--rate", f"{self.rate_hz:g}", "--duration", str(max(1, int(self.max_s + OVERRUN_S))),
               "--output", str(self._dir / "raw.txt")]
        try:
            with open(self._dir / "out.txt", "wb") as out:  # py-spy holds its own copy of the descriptor
                self._proc = self._popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        except OSError as exc:
            self._error = f"py-spy could not start: {exc.strerror or exc}"
            self._cleanup()
            return
        self._started_s = self._clock()

    def stop(self) -> NativeProfile:
        """Stop py-spy (it writes what it took) and read the profile; removes the files it wrote."""
        duration_s = max(0.0, self._clock() - self._started_s) if self._proc is not None else 0.0
        try:
            if self._proc is None:
                return self._profile(duration_s, 0, (), self._error or "py-spy was not started")
            why = self._end()
            out = self._read(self._dir / "out.txt", 64 * 1024) if self._dir else ""
            raw_path = self._dir / "raw.txt" if self._dir else None
            if raw_path is None or not raw_path.exists():
                return self._profile(duration_s, 0, (), why or _py_spy_reason(out))
            if raw_path.stat().st_size > MAX_RAW_BYTES:
                return self._profile(duration_s, 0, (), f"py-spy's output is over {MAX_RAW_BYTES} bytes: not read")
            stacks = parse_raw(self._read(raw_path, MAX_RAW_BYTES))
            found = _SAMPLES.search(out)
            samples = int(found.group(1)) if found else max((s.count for s in stacks), default=0)
            return self._profile(duration_s, samples, stacks, None if stacks else (why or _py_spy_reason(out)))
        finally:
            self._cleanup()

    def _end(self) -> str | None:
        proc = self._proc
        assert proc is not None
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGINT)
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                return f"py-spy did not stop within {STOP_TIMEOUT_S:g} s of being asked"
        return None

    def _profile(self, duration_s: float, samples: int, stacks: tuple[NativeStack, ...],
                 error: str | None) -> NativeProfile:
        return NativeProfile(rate_hz=self.rate_hz, duration_s=duration_s, samples=samples, stacks=stacks,
                             error=error)

    @staticmethod
    def _read(path: Path, limit: int) -> str:
        try:
            with open(path, "rb") as f:
                return f.read(limit).decode("utf-8", "replace")
        except OSError:
            return ""

    def _cleanup(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)  # only our own directory, made by mkdtemp above
            self._dir = None


def _py_spy_reason(output: str) -> str:
    """py-spy's own words for why it took nothing (its last error line), one line."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip() and not ln.startswith("py-spy> You can use")]
    errors = [ln for ln in lines if "rror" in ln or "ermission" in ln or "denied" in ln]
    text = (errors or lines or ["no samples"])[-1]
    return f"py-spy took no native stack: {text[:200]}"


def parse_raw(text: str) -> tuple[NativeStack, ...]:
    """py-spy's raw (folded) output with ``--threads``: ``thread (TID): name;outer;...;inner COUNT`` per line.
    Lines that do not read so are skipped; at most ``MAX_STACKS`` stacks of at most ``MAX_FRAMES`` frames."""
    stacks: list[NativeStack] = []
    for line in text.splitlines():
        if len(stacks) >= MAX_STACKS:
            break
        stack, _, count_text = line.rstrip().rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        parts = stack.split(";")
        root = _THREAD_ROOT.match(parts[0])
        if root is None:
            continue
        frames = tuple(_frame(p) for p in reversed(parts[1:][-MAX_FRAMES:]))
        stacks.append(NativeStack(os_thread_id=int(root.group("tid")), thread_name=root.group("name") or None,
                                  frames=frames, count=int(count_text)))
    return tuple(stacks)


def _frame(text: str) -> Frame:
    """``name (file.py:12)`` (Python), ``name (file.c:12)`` / ``name (libx.so)`` / ``0x7f.. (libx.so)`` (native)."""
    cut = text.rfind(" (")
    if cut <= 0 or not text.endswith(")"):
        return Frame(name=text[:MAX_NAME_CHARS], filename="", line=0, native=True)
    name, where = text[:cut], text[cut + 2:-1]
    filename, sep, line_text = where.rpartition(":")
    if not sep or not line_text.isdigit():
        filename, line_text = where, "0"
    python = filename.endswith(_PYTHON_SUFFIXES)
    return Frame(name=name[:MAX_NAME_CHARS], filename=filename, line=int(line_text), native=not python)


__all__ = ["NATIVE_PROFILE_HZ", "NativeRecorder", "parse_raw"]
