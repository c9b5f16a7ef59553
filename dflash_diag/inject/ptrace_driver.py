"""The ptrace driver of ``--method ptrace``: queue the fixed program in a running CPython with no debugger,
stopping one of its threads for about a millisecond.

It runs in a helper process of its own (``inject/ptrace.py`` starts it: ``python -I -S``, its own session,
SIGINT/SIGTERM/SIGHUP blocked), reads a plan as JSON on stdin and answers JSON on stdout. Being a process of its
own is what makes a killed command harmless: the helper is the tracer, it finishes (every wait is bounded), puts
the thread back exactly as it was and detaches, whatever happens to the command. Standard library only.

What it does (x86-64 Linux):

1. Picks a thread at a safe place: ``PTRACE_SEIZE`` (which stops nothing) and ``PTRACE_INTERRUPT`` of one thread
   at a time, the main thread first, and reads its registers. Only a thread stopped *inside a system call*
   (``orig_rax >= 0``) or, running, inside an exported function of the Python runtime that takes no lock of the
   pending-call machinery (the plan's ``allowed`` ranges) is used; another is let go at once (a pause of tens of
   microseconds) and the next one is tried, for up to ``search_s``. Why: ``Py_AddPendingCall`` takes the
   interpreter's pending-calls lock; a thread stopped in a system call holds no such lock (none is held across
   a system call), so the call cannot deadlock on a lock its own thread holds. ``mmap`` is a system-call wrapper
   (no lock, no malloc).
2. Saves its registers (``PTRACE_GETREGS``) and its whole FPU/vector state (``PTRACE_GETREGSET NT_X86_XSTATE``,
   else ``PTRACE_GETFPREGS``).
3. Calls functions in it: arguments in rdi/rsi/..., a stack 640 bytes below its own (past the red zone), a
   return address of 0: the call ends in a SIGSEGV at address 0, which the tracer sees first and discards (the
   program's own handlers never run). ``orig_rax`` is -1 during the calls, so the kernel does not restart the
   interrupted system call into them. ``mmap`` maps one private read-write page (unless the plan reuses one),
   the program is written into it through /proc/PID/mem and read back, then
   ``Py_AddPendingCall(PyRun_SimpleString, page)``. A signal that arrives meanwhile is delivered as it would
   be during any C call.
4. Restores the vector state and the registers (the interrupted system call then restarts as after any
   stop). When the main thread was interrupted in a futex wait under a Python lock acquire, its result is set to
   EINTR instead (the nudge: ``inject/nudge.py``), found by the first return address into the Python runtime
   above its stack pointer.
5. ``PTRACE_DETACH``. The pause of each thread is timed from its interrupt to its detach.

Every wait is bounded. A call that does not come back in ``call_timeout_s`` is abandoned: the thread is
interrupted and put back as it was (docs/attach.md says what that can leave). A helper killed by SIGKILL in the
middle of a call (microseconds) leaves the thread to return to address 0: the process dies. That is true of every
debugger-based injector too; nothing else can kill it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import platform
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dflash_diag.inject.nudge import EINTR, should_nudge

PTRACE_CONT, PTRACE_GETREGS, PTRACE_SETREGS = 7, 12, 13
PTRACE_GETFPREGS, PTRACE_SETFPREGS, PTRACE_DETACH = 14, 15, 17
PTRACE_GETREGSET, PTRACE_SETREGSET, PTRACE_SEIZE, PTRACE_INTERRUPT = 0x4204, 0x4205, 0x4206, 0x4207
PTRACE_EVENT_STOP = 128
NT_X86_XSTATE = 0x202
WALL = 0x40000000  # __WALL: wait for threads too (they are not children)
XSTATE_BYTES = 1 << 16
FPREGS_BYTES = 512
RED_ZONE_BYTES = 128
STACK_GAP_BYTES = 512  # past the red zone: room for what the interrupted code keeps just below its frame
STACK_SCAN_WORDS = 512  # 4 KiB above the stack pointer: where the nudge looks for a Python lock wait
SIGSEGV_BIT = 1 << (signal.SIGSEGV - 1)
MAX_THREADS_TRIED = 64
POLL_S = 0.0001  # the wait for a stop polls (bounded waits): 0.1 ms of latency at most
YIELD_POLLS = 200  # ... after this many polls that only yield the CPU
PROT_RW, MAP_PRIVATE_ANONYMOUS = 3, 0x22
PAGE_BYTES = 4096


class Regs(ctypes.Structure):
    """``struct user_regs_struct`` of x86-64 (sys/user.h)."""

    _fields_ = [(name, ctypes.c_ulonglong) for name in (
        "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx", "rsi", "rdi",
        "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base", "gs_base", "ds", "es", "fs", "gs")]


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


class DriverError(Exception):
    """A failure with a kind the command turns into its exit code: permission, traced, gone, unsupported,
    no-safe-thread, failed."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class _Libc:
    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._ptrace = libc.ptrace
        self._ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        self._ptrace.restype = ctypes.c_long

    def ptrace(self, request: int, tid: int, addr: int = 0, data: Any = None) -> None:
        ctypes.set_errno(0)
        if self._ptrace(request, tid, ctypes.c_void_p(addr), data) == -1:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))


def in_ranges(address: int, ranges: Sequence[int]) -> bool:
    """Whether ``address`` lies in one of the sorted [start, end) pairs of the flat list ``ranges``."""
    lo, hi = 0, len(ranges) // 2
    while lo < hi:
        mid = (lo + hi) // 2
        if ranges[2 * mid] <= address:
            lo = mid + 1
        else:
            hi = mid
    return lo > 0 and ranges[2 * (lo - 1)] <= address < ranges[2 * (lo - 1) + 1]


def lock_wait_under(stack: bytes, py_text: Sequence[int], lock_waits: Sequence[Sequence[Any]]) -> list[str]:
    """The lock-wait function the thread sits under: the first return address into the Python runtime's code
    above its stack pointer, named when it is one of ``lock_waits`` ([start, end, name]); [] otherwise."""
    for off in range(0, min(len(stack), 8 * STACK_SCAN_WORDS) - 7, 8):
        word = int.from_bytes(stack[off : off + 8], "little")
        if in_ranges(word, py_text):
            return [name for start, end, name in lock_waits if start <= word - 1 < end][:1]
    return []


def signal_masks(pid: int, tid: int) -> tuple[int, int]:
    """(blocked in that thread, ignored by the process) from /proc."""
    blocked = ignored = 0
    with open(f"/proc/{pid}/task/{tid}/status", encoding="ascii", errors="replace") as fh:
        for line in fh:
            if line.startswith("SigBlk:"):
                blocked = int(line.split()[1], 16)
            elif line.startswith("SigIgn:"):
                ignored = int(line.split()[1], 16)
    return blocked, ignored


def threads_of(pid: int) -> list[int]:
    """The threads to try, best first: those blocked in a system call (the main thread first: it can be nudged),
    then the running ones (main first). Bounded."""
    try:
        tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if t.isdigit())
    except OSError:
        raise DriverError("gone", f"no process with PID {pid} is running") from None
    ordered = ([pid] if pid in tids else []) + [t for t in tids if t != pid][: MAX_THREADS_TRIED - 1]
    blocked = [t for t in ordered if in_system_call(pid, t)]
    return blocked + [t for t in ordered if t not in blocked]


def in_system_call(pid: int, tid: int) -> bool:
    """Whether /proc says the thread is blocked in a system call now (its syscall file starts with a number)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall", "rb") as fh:
            first = fh.read(64).split(b" ", 1)[0]
    except OSError:
        return False
    return first.isdigit()


@dataclass
class Report:
    """What the driver did, for the command (the JSON answer)."""

    ok: bool = False
    error: str | None = None
    kind: str | None = None
    touched: bool = False  # anything written into the process or called in it
    tid: int | None = None
    main_thread: bool = False
    in_syscall: bool | None = None
    syscall: int | None = None
    page: int | None = None
    page_reused: bool = False
    pending_call: int | None = None
    nudged: bool = False
    where: list[str] = field(default_factory=list)
    fp_state: str | None = None
    samples: int = 0
    pauses_us: dict[str, float] = field(default_factory=dict)  # thread id -> its longest stop (one contiguous pause)
    stopped_us: dict[str, float] = field(default_factory=dict)  # thread id -> all its stops added up
    # thread id -> of its longest stop, the time a loaded machine added: that thread runnable without a CPU on its
    # way to the stop, and this helper runnable without one while it held the thread stopped (schedstat; the two
    # never overlap: a stopped thread is not runnable, and before the stop the helper only polls)
    pause_runq_us: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # thread id -> why it was not used
    steps_us: dict[str, float] = field(default_factory=dict)  # the used thread's stop: step -> microseconds in


def _runq_ns(path: str) -> int:
    """A thread's summed time runnable without a CPU (schedstat, ns); 0 where /proc does not say."""
    try:
        with open(path, "rb") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0


class Driver:
    def __init__(self, plan: dict[str, Any], libc: _Libc | None = None) -> None:
        self.plan = plan
        self.pid = int(plan["pid"])
        self.libc = libc or _Libc()
        self.report = Report()
        self.mem_fd: int | None = None
        self.tid: int | None = None  # the thread we hold, stopped
        self.saved: Regs | None = None  # its registers as we found them; set: they must be put back
        self.fp_kind: str | None = None
        self.fp: Any = None
        self.fp_len = 0
        self.fp_legacy: Any = None
        self.stopped_at = 0.0
        # the held thread's run-queue ns at its interrupt, this helper's at the stop (None until it stopped)
        self.runq_at_ns: tuple[int, int | None] = (0, None)
        self.seized_ever = False
        self.unstopped: set[int] = set()  # seized, interrupted, not stopped in time: never tried again

    # --- one thread: seize, interrupt, wait, let go -----------------------------------------------------------

    def _pause(self, tid: int, seconds: float) -> None:
        key, us = str(tid), 1e6 * seconds
        if us >= self.report.pauses_us.get(key, 0.0):
            thread_at, helper_at = self.runq_at_ns
            thread_ns = _runq_ns(f"/proc/{self.pid}/task/{tid}/schedstat") - thread_at
            helper_ns = _runq_ns("/proc/thread-self/schedstat") - helper_at if helper_at is not None else 0
            self.report.pause_runq_us[key] = round(min(us, max(0, thread_ns) / 1e3 + max(0, helper_ns) / 1e3), 1)
        self.report.pauses_us[key] = round(max(self.report.pauses_us.get(key, 0.0), us), 1)
        self.report.stopped_us[key] = round(self.report.stopped_us.get(key, 0.0) + us, 1)

    def _wait(self, tid: int, timeout_s: float) -> int | None:
        """The thread's next stop (a wait status), None after ``timeout_s``. Polls: a yield first (a stop is
        usually microseconds away), then short sleeps."""
        deadline = time.monotonic() + timeout_s
        polls = 0
        while True:
            got, status = os.waitpid(tid, os.WNOHANG | WALL)
            if got:
                if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                    raise DriverError("gone", f"PID {self.pid} exited during the attach")
                return status
            if time.monotonic() >= deadline:
                return None
            polls += 1
            if polls < YIELD_POLLS:
                os.sched_yield()
            else:
                time.sleep(POLL_S)

    def _seize(self, tid: int) -> bool:
        """Seize and interrupt ``tid``; True once it is stopped for us. False: it did not stop in time."""
        try:
            self.libc.ptrace(PTRACE_SEIZE, tid)
        except OSError as exc:
            if exc.errno == errno.ESRCH or (exc.errno == errno.EPERM and self.seized_ever):
                self.report.skipped[str(tid)] = f"cannot be seized ({exc.strerror})"
                return False  # it ended meanwhile; or (a sibling was seized) it is an exiting thread
            kind = "permission" if exc.errno == errno.EPERM else "failed"
            raise DriverError(kind, f"ptrace(PTRACE_SEIZE) of thread {tid}: {exc.strerror}") from None
        self.seized_ever = True
        self.tid = tid
        self.runq_at_ns = (_runq_ns(f"/proc/{self.pid}/task/{tid}/schedstat"), None)
        self.stopped_at = time.monotonic()
        try:
            self.libc.ptrace(PTRACE_INTERRUPT, tid)
        except OSError:
            self.tid = None  # it ended between the two requests
            return False
        deadline = time.monotonic() + float(self.plan.get("stop_timeout_s", 0.5))
        while True:
            status = self._wait(tid, max(0.0, deadline - time.monotonic()))
            if status is None:  # in an uninterruptible wait: let go of it once it stops, or at our exit
                self.report.skipped[str(tid)] = "did not stop in time (uninterruptible wait?)"
                self.unstopped.add(tid)
                self.tid = None
                return False
            if status >> 16 == PTRACE_EVENT_STOP:
                self.runq_at_ns = (self.runq_at_ns[0], _runq_ns("/proc/thread-self/schedstat"))
                return True
            self.libc.ptrace(PTRACE_CONT, tid, 0, ctypes.c_void_p(os.WSTOPSIG(status)))  # a signal: deliver it

    def _let_go(self) -> None:
        """Detach the thread we hold (restoring it first when we changed it); its pause ends here."""
        if self.tid is None:
            return
        tid = self.tid
        try:
            if self.saved is not None:
                self._restore()
            self.libc.ptrace(PTRACE_DETACH, tid)
        except OSError:
            pass  # gone; or not stopped: the kernel detaches it when this helper exits
        finally:
            self._pause(tid, time.monotonic() - self.stopped_at)
            self.tid = None
            self.saved = None

    def _regs(self) -> Regs:
        regs = Regs()
        assert self.tid is not None
        self.libc.ptrace(PTRACE_GETREGS, self.tid, 0, ctypes.byref(regs))
        return regs

    # --- choosing the thread -------------------------------------------------------------------------------------

    def _usable(self, regs: Regs) -> str | None:
        """None when the stopped thread may run our calls; else why not."""
        if signed64(regs.orig_rax) >= 0:
            return None  # inside a system call: no lock of the pending-call machinery is held
        if in_ranges(regs.rip, self.plan.get("allowed") or []):
            return None
        return "running outside the functions where a call is safe"

    def pick_thread(self) -> Regs:
        search_deadline = time.monotonic() + float(self.plan.get("search_s", 2.0))
        while True:
            for tid in threads_of(self.pid):
                if tid in self.unstopped:
                    continue
                try:
                    blocked, ignored = signal_masks(self.pid, tid)
                except OSError:
                    continue
                if (blocked | ignored) & SIGSEGV_BIT:
                    self.report.skipped[str(tid)] = "blocks or ignores SIGSEGV (the calls' way back)"
                    continue
                if not self._seize(tid):
                    continue
                self.report.samples += 1
                regs = self._regs()
                why = self._usable(regs)
                if why is None:
                    return regs
                self.report.skipped[str(tid)] = why
                self._let_go()
                if time.monotonic() >= search_deadline:
                    break
            if time.monotonic() >= search_deadline:
                reasons = "; ".join(sorted(set(self.report.skipped.values()))) or "no thread to try"
                raise DriverError("no-safe-thread", f"no thread of PID {self.pid} could run the calls in "
                                  f"{self.plan.get('search_s', 2.0):g} s ({self.report.samples} stopped and let go): "
                                  f"{reasons}")
            time.sleep(0.005)

    # --- the state we change and put back --------------------------------------------------------------------

    def _save(self, regs: Regs) -> None:
        assert self.tid is not None
        self.saved = regs
        self.fp_legacy = ctypes.create_string_buffer(FPREGS_BYTES)
        self.libc.ptrace(PTRACE_GETFPREGS, self.tid, 0, self.fp_legacy)
        self.fp_kind = "fpregs"
        buf = ctypes.create_string_buffer(XSTATE_BYTES)
        iov = IoVec(ctypes.cast(buf, ctypes.c_void_p), XSTATE_BYTES)
        with contextlib.suppress(OSError):
            self.libc.ptrace(PTRACE_GETREGSET, self.tid, NT_X86_XSTATE, ctypes.byref(iov))
            self.fp, self.fp_len, self.fp_kind = buf, int(iov.len), "xstate"
        self.report.fp_state = self.fp_kind

    def _restore(self) -> None:
        assert self.tid is not None and self.saved is not None
        restored = False
        if self.fp_kind == "xstate":
            iov = IoVec(ctypes.cast(self.fp, ctypes.c_void_p), self.fp_len)
            try:
                self.libc.ptrace(PTRACE_SETREGSET, self.tid, NT_X86_XSTATE, ctypes.byref(iov))
                restored = True
            except OSError:
                self.report.fp_state = "fpregs (the kernel refused the saved xstate)"
        if not restored:
            self.libc.ptrace(PTRACE_SETFPREGS, self.tid, 0, self.fp_legacy)
        self.libc.ptrace(PTRACE_SETREGS, self.tid, 0, ctypes.byref(self.saved))

    # --- memory and calls -----------------------------------------------------------------------------------

    def _write(self, address: int, data: bytes) -> None:
        assert self.mem_fd is not None
        if os.pwrite(self.mem_fd, data, address) != len(data):
            raise DriverError("failed", f"short write into PID {self.pid} at {address:#x}")

    def _read(self, address: int, size: int) -> bytes:
        assert self.mem_fd is not None
        return os.pread(self.mem_fd, size, address)

    def call(self, function: int, args: Sequence[int]) -> int:
        """Call ``function(*args)`` in the held thread; its return value (rax). The thread is left stopped at
        the call's end (a SIGSEGV at address 0, discarded)."""
        assert self.tid is not None and self.saved is not None
        tid = self.tid
        sp = (self.saved.rsp - RED_ZONE_BYTES - STACK_GAP_BYTES) & ~0xF
        sp -= 8  # the return address: at the function's entry rsp+8 is 16-aligned, as after a `call`
        self._write(sp, (0).to_bytes(8, "little"))
        regs = Regs.from_buffer_copy(self.saved)
        regs.rsp, regs.rip, regs.rax, regs.orig_rax = sp, function, 0, (1 << 64) - 1
        regs.eflags &= ~(0x400 | 0x100)  # DF clear (the ABI), no single-step
        for name, value in zip(("rdi", "rsi", "rdx", "rcx", "r8", "r9"), args, strict=False):
            setattr(regs, name, value & ((1 << 64) - 1))
        self.report.touched = True
        self.libc.ptrace(PTRACE_SETREGS, tid, 0, ctypes.byref(regs))
        self.libc.ptrace(PTRACE_CONT, tid, 0, None)
        deadline = time.monotonic() + float(self.plan.get("call_timeout_s", 2.0))
        while True:
            status = self._wait(tid, max(0.0, deadline - time.monotonic()))
            if status is None:
                self._abandon_call(tid)
            assert status is not None
            sig = os.WSTOPSIG(status)
            if status >> 16 == PTRACE_EVENT_STOP:
                self.libc.ptrace(PTRACE_CONT, tid, 0, None)  # a group stop: our call goes on first
                continue
            if sig != signal.SIGSEGV:
                self.libc.ptrace(PTRACE_CONT, tid, 0, ctypes.c_void_p(sig))  # deliver it, as during any C call
                continue
            end = self._regs()
            if end.rip != 0:
                raise DriverError("failed", f"the call at {function:#x} in PID {self.pid} faulted at {end.rip:#x}: "
                                  "the thread is put back as it was")
            return int(end.rax)

    def _abandon_call(self, tid: int) -> None:
        self.libc.ptrace(PTRACE_INTERRUPT, tid)
        if self._wait(tid, 5.0) is None:
            raise DriverError("failed", f"thread {tid} of PID {self.pid} neither finished the call nor stopped")
        raise DriverError("failed", f"the call into PID {self.pid} did not return in "
                          f"{self.plan.get('call_timeout_s', 2.0):g} s (a lock held?): it was abandoned and the "
                          "thread put back as it was")

    def _map_page(self) -> int:
        reuse = self.plan.get("page")
        if reuse:
            self.report.page_reused = True
            return int(reuse)
        addr = self.call(int(self.plan["mmap"]), (0, PAGE_BYTES, PROT_RW, MAP_PRIVATE_ANONYMOUS, (1 << 64) - 1, 0))
        if -4096 < signed64(addr) < 0 or addr == 0 or addr % PAGE_BYTES:
            raise DriverError("failed", f"mmap in PID {self.pid} failed (errno {-signed64(addr)})")
        return addr

    # --- the whole of it -----------------------------------------------------------------------------------

    def _step(self, name: str) -> None:
        self.report.steps_us[name] = round(1e6 * (time.monotonic() - self.stopped_at), 1)

    def run(self) -> Report:
        rep = self.report
        try:
            if platform.machine() != "x86_64":
                raise DriverError("unsupported", f"the ptrace injector drives x86-64 only; this is {platform.machine()}")
            program = bytes.fromhex(str(self.plan["program_hex"]))
            if len(program) > PAGE_BYTES or len(program) % 8 or program[-1:] != b"\0":
                raise DriverError("failed", "the program does not fit one page (or is not NUL-terminated)")
            regs = self.pick_thread()
            self.mem_fd = os.open(f"/proc/{self.pid}/mem", os.O_RDWR | os.O_CLOEXEC)
            rep.tid, rep.main_thread = self.tid, self.tid == self.pid
            rep.syscall = signed64(regs.orig_rax) if signed64(regs.orig_rax) >= 0 else None
            rep.in_syscall = rep.syscall is not None
            self._step("stopped")
            self._save(regs)
            self._step("saved")
            hold_s = min(5.0, float(self.plan.get("hold_s") or 0.0))
            if hold_s > 0:
                time.sleep(hold_s)  # tests only: a window in which the thread is certainly held
            page = self._map_page()
            rep.page = page
            self._step("page")
            self._write(page, program)
            if self._read(page, len(program)) != program:
                raise DriverError("failed", "the program written into the process did not read back the same")
            self._step("written")
            status = self.call(int(self.plan["add_pending_call"]), (int(self.plan["run_simple_string"]), page))
            rep.pending_call = int.from_bytes((status & 0xFFFFFFFF).to_bytes(4, "little"), "little", signed=True)
            if rep.pending_call != 0:
                raise DriverError("failed", f"Py_AddPendingCall refused the call in PID {self.pid} (it returned "
                                  f"{rep.pending_call}): its queue is full; try again in a moment")
            self._step("queued")
            self._nudge_if_parked(regs)
            rep.ok = True
        except DriverError as exc:
            rep.error, rep.kind = str(exc), exc.kind
        except Exception as exc:  # a bug here must still put the thread back
            rep.error, rep.kind = f"{type(exc).__name__}: {exc}", "failed"
        finally:
            if rep.tid is not None and self.tid is not None:
                self._step("restoring")
            self._let_go()
            self._let_go_of_late_stops()
            if rep.tid is not None and str(rep.tid) in rep.pauses_us:
                rep.steps_us["resumed"] = rep.pauses_us[str(rep.tid)]
            if self.mem_fd is not None:
                os.close(self.mem_fd)
        return rep

    def _let_go_of_late_stops(self) -> None:
        """Threads that did not stop in time but may have since: detach them now (the rest the kernel detaches
        when this helper exits; an interrupt it never delivered is dropped then)."""
        for tid in sorted(self.unstopped):
            with contextlib.suppress(OSError, DriverError):
                if self._wait(tid, 0.0) is not None:
                    self.libc.ptrace(PTRACE_DETACH, tid)

    def _nudge_if_parked(self, regs: Regs) -> None:
        """A main thread in a futex wait under a Python lock acquire: its wait returns EINTR (docs/attach.md)."""
        if self.tid != self.pid or self.saved is None:
            return
        stack = b""
        with contextlib.suppress(OSError):
            stack = self._read(regs.rsp, 8 * STACK_SCAN_WORDS)
        self.report.where = lock_wait_under(stack, self.plan.get("py_text") or [], self.plan.get("lock_waits") or [])
        if should_nudge(signed64(regs.orig_rax), signed64(regs.rax), self.report.where, "x86_64"):
            self.saved.rax = EINTR & ((1 << 64) - 1)
            self.report.nudged = True


def main() -> int:
    """Plan on stdin, report on stdout; never a traceback (the command reads one JSON line)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # bounded work: finish it, whoever asks to stop
        signal.signal(sig, signal.SIG_IGN)
    try:
        plan = json.loads(sys.stdin.read(1 << 20))
        report = Driver(plan).run()
    except Exception as exc:
        report = Report(error=f"{type(exc).__name__}: {exc}", kind="failed")
    with contextlib.suppress(OSError):
        sys.stdout.write(json.dumps(report.__dict__) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
