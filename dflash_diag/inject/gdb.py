"""gdb and cuda-gdb: driven one command at a time over a pipe, in their own session.

``attach PID`` (``auto-solib-add off``: no symbol reading, cuda-gdb never reads libcuda), call ``mmap`` for one
private read-write page (or reuse the last one), write the fixed program into it with 8-byte pokes and read it
back, call ``Py_AddPendingCall(PyRun_SimpleString, page)``, nudge the main thread when it waits in a Python
lock, ``detach``. A Ctrl-C in our terminal does not reach the debugger; if we die it reads EOF and detaches, and
the kernel sends it SIGTERM (PR_SET_PDEATHSIG), on which it detaches and quits too. It is killed only between
commands (never inside a call into the process), and the process is sent SIGCONT if it is left stopped.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import secrets
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.inject.injection import CALL_GRACE_S, FINISH_S, Run, last_line, left_s
from dflash_diag.inject.lifetime import die_with_us, resume_if_stopped
from dflash_diag.inject.nudge import should_nudge
from dflash_diag.inject.preflight import check_version
from dflash_diag.inject.program import PAGE_BYTES, page_words
from dflash_diag.inject.request import note_page, reusable_page
from dflash_diag.sources.elfsyms import ProcessSymbols
from dflash_diag.sources.ptrace_access import not_permitted


def gdb_argv(gdb: str) -> list[str]:
    settings = ("set auto-solib-add off", "set auto-load off", "set debuginfod enabled off", "set pagination off",
                "set confirm off", "set width 0", "set height 0", "set print thread-events off",
                "set print inferior-events off", "set print frame-arguments none", "set print entry-values no")
    argv = [gdb, "-nx", "-nw", "-q"]
    for s in settings:
        argv += ["-iex", s]
    return argv


def parse_value(output: str) -> int | None:
    """The integer of the last ``$N = value`` line gdb printed (hex or decimal), None when there is none."""
    found = re.findall(r"^\$\d+ = (-?(?:0x[0-9a-fA-F]+|\d+))", output, re.M)
    if not found:
        return None
    text = found[-1]
    return int(text, 16) if text.lower().startswith(("0x", "-0x")) else int(text)


def main_thread_number(info_threads: str, pid: int) -> str | None:
    """gdb's number for the thread whose LWP is the PID (the main thread)."""
    for line in info_threads.splitlines():
        m = re.match(r"^\*?\s*(\d+)\s+(?:Thread 0x[0-9a-f]+ \(LWP (\d+)\)|process (\d+)|LWP (\d+))", line.strip())
        if m and int(m.group(2) or m.group(3) or m.group(4)) == pid:
            return m.group(1)
    return None


def backtrace_functions(bt: str, symbols: ProcessSymbols | None = None) -> list[str]:
    """Function names of a gdb backtrace; frames gdb could not name are named from ``symbols``."""
    out: list[str] = []
    for m in re.finditer(r"^#(\d+)\s+(?:(0x[0-9a-fA-F]+) in )?([A-Za-z_?][\w.@:?]*)", bt, re.M):
        name = m.group(3)
        if name == "??" and m.group(2) and symbols is not None:
            pc = int(m.group(2), 16) - (1 if m.group(1) != "0" else 0)  # a return address: look inside the call
            name = symbols.name_of(pc) or "??"
        out.append(name)
    return out


class DebuggerDied(Exception):
    pass


class DebuggerTimeout(Exception):
    pass


class GdbSession:
    """gdb (or cuda-gdb) read one command at a time from a pipe; each answer ends at an echoed marker."""

    def __init__(self, argv: Sequence[str], transcript: list[str], deadline_mono: float = float("inf")) -> None:
        env = dict(os.environ, LC_ALL="C", LANG="C", TERM="dumb", DEBUGINFOD_URLS="")
        self.proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True, env=env,
                                     preexec_fn=die_with_us())
        self.transcript = transcript
        self.deadline_mono = deadline_mono  # no command waits past it (the command's --timeout)
        self._n = 0
        self._tag = secrets.token_hex(4)
        self._buf = b""
        self.in_call = False
        self.marker = ""

    def command(self, cmd: str, timeout_s: float, *, call: bool = False) -> str:
        """Send ``cmd``; its output. Waits at most ``timeout_s``, and never past the deadline."""
        left_s = self.deadline_mono - time.monotonic()
        if left_s <= 0:
            raise DebuggerTimeout("the --timeout ran out")
        cut = left_s < timeout_s
        timeout_s = min(timeout_s, left_s)
        self._n += 1
        marker = self.marker = f"@@dflash-diag-{self._tag}-{self._n}@@"
        t0 = time.monotonic()
        self.in_call = call
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(f"{cmd}\necho \\n{marker}\\n\n".encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise DebuggerDied(self._last_words()) from None
        try:
            out = self._read_until(marker.encode(), timeout_s)
        except DebuggerTimeout:
            if cut:
                raise DebuggerTimeout(f"{cmd.split()[0]}: the --timeout ran out") from None
            raise
        self.in_call = False
        # Prompts ("(gdb) ", "(cuda-gdb) ") precede the answers when stdin is a pipe: drop them.
        text = re.sub(r"^(?:\([\w-]*gdb\) ?)+", "", out.decode("utf-8", "replace"), flags=re.M)
        self.transcript.append(f"> {cmd}   [{1e3 * (time.monotonic() - t0):.0f} ms]")
        self.transcript.append(text.rstrip())
        return text

    def _read_until(self, marker: bytes, timeout_s: float) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while marker not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DebuggerTimeout(f"no answer in {timeout_s:g} s")
            ready, _, _ = select.select([fd], [], [], min(left, 0.5))
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise DebuggerDied(self._last_words())
            self._buf += chunk
        out, _, self._buf = self._buf.partition(marker)
        return out

    def _last_words(self) -> str:
        """What the debugger said last before it went away (e.g. a missing shared library of cuda-gdb)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=1.0)
        if self.proc.stdout is not None:  # what it printed but we had not read yet (it died before a write)
            with contextlib.suppress(OSError, ValueError):
                fd = self.proc.stdout.fileno()
                while select.select([fd], [], [], 0.2)[0] and len(self._buf) < 1 << 20:
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    self._buf += chunk
        said = self._buf.decode("utf-8", "replace")
        self.transcript.append(said.rstrip())
        return f"status {self.proc.returncode}: {last_line(said)}" if said.strip() else f"status {self.proc.returncode}"

    def finish(self, timeout_s: float = 10.0) -> None:
        """Detach and quit; a debugger that does not exit in time is killed (it is between commands).

        Idempotent: a finish cut short (Ctrl-C, SIGTERM while waiting for the exit) is finished again."""
        stdin = self.proc.stdin
        if stdin is not None and not stdin.closed:
            with contextlib.suppress(BrokenPipeError, OSError, ValueError):
                stdin.write(b"detach\nquit\n")
                stdin.close()
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10.0)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()


_CALLS_CHECKED: dict[str, str | None] = {}


def cannot_call(gdb: str, timeout_s: float = 30.0) -> str | None:
    """Why this debugger cannot call a function inside a process on this machine (its own words), None when it can
    or when that cannot be told (it may not attach here at all: the real attach then says why).

    Some kernel and gdb pairs fail to restore a thread's extended register state after a call ("Couldn't write
    extended state status: Bad address"): the thread then resumes with a half-restored state and the program dies
    (a syscall's restart code leaks out as OSError 514). Found on a throwaway child before the target is touched."""
    if gdb in _CALLS_CHECKED:
        return _CALLS_CHECKED[gdb]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    why: str | None = None
    try:
        time.sleep(0.2)  # past exec: its libc is mapped
        done = subprocess.run([*gdb_argv(gdb), "-batch", "-p", str(child.pid), "-ex", "sharedlibrary /libc[.-]",
                               "-ex", "p (int)getpid()"], capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)
        text = done.stdout + done.stderr
        if parse_value(done.stdout) != child.pid:  # only a failed call's own words refuse: a gdb that cannot start
            # or attach here says so at the real attach, in its words
            why = next((ln.strip().rstrip(".") for ln in text.splitlines()
                        if "couldn't write" in ln.lower() or "cannot write" in ln.lower()), None)
    except (subprocess.TimeoutExpired, OSError):
        why = None  # not told: the real attach has its own deadline and errors
    finally:
        child.kill()
        child.wait()
    _CALLS_CHECKED[gdb] = why
    return why


def via_gdb(run: Run, program: str) -> None:
    pid = run.target.pid
    why = cannot_call(run.path, min(30.0, left_s(run)))
    if why is not None:
        raise AttachError(f"{os.path.basename(run.path)} cannot call a function inside a process on this machine "
                          f"({why}: a thread it called into would resume broken and the program die); PID {pid} was "
                          "not touched; --method ptrace injects without a debugger", ExitCode.ATTACH_FAILED)
    session = GdbSession(gdb_argv(run.path), run.transcript, run.deadline_mono)
    attached_at: float | None = None
    try:
        session.command("show version", run.timeout_s)  # every command is cut at the deadline
        attached_at = time.monotonic()
        out = session.command(f"attach {pid}", run.timeout_s)
        _check_attached(pid, out, run.path)
        for setting in ("set scheduler-locking off", "set unwindonsignal on"):
            session.command(setting, 10.0)
        # libc's unwind tables, to read the main thread's stack through its syscall wrappers (small, fast).
        for lib in ("/libc[.-]", "/ld-musl"):
            session.command(f"sharedlibrary {lib}", run.timeout_s)
        addresses = run.target.symbols.addresses if run.target.symbols is not None else _ask_symbols(run, session)
        addr = _map_page(run, session, addresses["mmap"])
        _write_page(session, addr, program)
        out = session.command(f"p (int)((int(*)(void*, void*)){addresses['Py_AddPendingCall']:#x})"
                              f"((void*){addresses['PyRun_SimpleString']:#x}, (void*){addr:#x})", 10.0, call=True)
        status = parse_value(out)
        if status is None:  # the debugger could not make the call at all (it printed an error, not a value)
            raise AttachError(f"{os.path.basename(run.path)} could not call Py_AddPendingCall in PID {pid} "
                              f"({last_line(out)}): nothing was queued; --method ptrace injects without a debugger",
                              ExitCode.ATTACH_FAILED)
        if status != 0:
            raise AttachError(f"Py_AddPendingCall refused the call in PID {pid} (it returned {status}): its queue is "
                              "full; try again in a moment", ExitCode.ATTACH_FAILED)
        note_page(run.req.directory, pid, run.target.start_ticks, addr)
        _maybe_nudge(run, session)
        session.command("detach", 10.0)
        run.stopped_s = time.monotonic() - attached_at
        session.finish(min(10.0, left_s(run)))
        resume_if_stopped(pid)  # a debugger that left it stopped (it should not): resume it
    except DebuggerTimeout as exc:
        _abandon(run, session, attached_at, f"{os.path.basename(run.path)} did not answer ({exc})")
    except DebuggerDied as exc:
        _abandon(run, session, attached_at, f"{os.path.basename(run.path)} exited during the attach ({exc})")
    except BaseException:  # an AttachError, or Ctrl-C / SIGTERM / SIGHUP (cli/_signals.py): detach, then go
        if session.proc.poll() is None:  # it reads "detach" once a call in flight has returned: wait for that
            session.finish(CALL_GRACE_S if session.in_call else min(10.0, left_s(run)))
        if attached_at is not None:
            run.stopped_s = time.monotonic() - attached_at
        resume_if_stopped(pid)
        raise


def _abandon(run: Run, session: GdbSession, attached_at: float | None, why: str) -> None:
    if session.in_call:
        # A call into the process is in flight: killing the debugger now would leave the thread to return
        # into a breakpoint. Give it one more generous chance before giving up.
        with contextlib.suppress(DebuggerTimeout, DebuggerDied):
            session._read_until(session.marker.encode(), CALL_GRACE_S)
    session.finish(FINISH_S)  # between commands now: detach and quit if it still reads, else killed
    resumed = resume_if_stopped(run.target.pid)
    if attached_at is not None:
        run.stopped_s = time.monotonic() - attached_at
    tail = " (it was left stopped: sent SIGCONT)" if resumed else ""
    raise AttachError(f"{why}; PID {run.target.pid} runs on unchanged{tail}: nothing was injected",
                      ExitCode.ATTACH_FAILED)


def _check_attached(pid: int, out: str, debugger: str) -> None:
    low = out.lower()
    if "ptrace: operation not permitted" in low or ("could not attach" in low and "permitted" in low):
        raise AttachError(not_permitted(pid), ExitCode.PERMISSION)
    if "no such process" in low:
        raise AttachError(f"no process with PID {pid} is running", ExitCode.NO_PROCESS)
    if f"attaching to process {pid}" not in low or "ptrace:" in low:
        raise AttachError(f"{os.path.basename(debugger)} could not attach to PID {pid}: {last_line(out)}",
                          ExitCode.ATTACH_FAILED)



def _ask_symbols(run: Run, session: GdbSession) -> dict[str, int]:
    """The debugger's view of the runtime's symbols, when reading the ELF files did not work."""
    pid = run.target.pid
    session.command("sharedlibrary /libpython3", 30.0)
    hexversion = parse_value(session.command("p/x *(unsigned int*)&Py_Version", 10.0))
    if hexversion is None:
        raise AttachError(f"PID {pid} exports no Py_Version: not CPython 3.11+ (or a stripped interpreter); attach "
                          "supports CPython 3.11 to 3.14", ExitCode.UNSUPPORTED if run.target.python else ExitCode.NOT_PYTHON)
    major, minor, micro = hexversion >> 24, (hexversion >> 16) & 0xFF, (hexversion >> 8) & 0xFF
    check_version(pid, (major, minor))
    run.python_version = f"{major}.{minor}.{micro}"
    out: dict[str, int] = {}
    for symbol in ("Py_AddPendingCall", "PyRun_SimpleString", "mmap"):
        value = parse_value(session.command(f"p/x (unsigned long)&{symbol}", 10.0))
        if value is None:
            raise AttachError(f"{symbol} is not visible in PID {pid}: cannot inject (static or stripped libc?)",
                              ExitCode.UNSUPPORTED)
        out[symbol] = value
    return out


def _map_page(run: Run, session: GdbSession, mmap_addr: int) -> int:
    addr = reusable_page(run.req.directory, run.target.pid, run.target.start_ticks)
    if addr is not None:
        return addr
    # PROT_READ|PROT_WRITE (3), MAP_PRIVATE|MAP_ANONYMOUS (0x22): one private page, never executable.
    out = session.command(f"p/x (unsigned long)((void*(*)(void*, unsigned long, int, int, int, long)){mmap_addr:#x})"
                          "((void*)0, 4096, 3, 34, -1, 0)", 10.0, call=True)
    addr = parse_value(out)
    if addr is None or addr in (0, (1 << 64) - 1) or addr % PAGE_BYTES:
        raise AttachError(f"mmap in PID {run.target.pid} failed ({last_line(out)}): nothing was injected; --method "
                          "ptrace injects without a debugger", ExitCode.ATTACH_FAILED)
    return addr


def _write_page(session: GdbSession, addr: int, program: str) -> None:
    words = page_words(program)
    session.command("\n".join(f"set {{unsigned long long}}({addr:#x} + {off}) = {word:#x}" for off, word in words), 10.0)
    out = session.command(f"x/{len(words)}gx {addr:#x}", 10.0)
    if read_back_words(out)[: len(words)] != [w for _, w in words]:
        raise AttachError("writing the bootstrap program into the process did not read back the same: nothing queued",
                          ExitCode.ATTACH_FAILED)


def read_back_words(x_output: str) -> list[int]:
    """The values of gdb's ``x/Ngx`` output (``0xADDR:\t0x...\t0x...`` lines)."""
    return [int(v, 16) for line in x_output.splitlines() if re.match(r"^0x[0-9a-fA-F]+:", line.strip())
            for v in re.findall(r"0x[0-9a-fA-F]+", line.split(":", 1)[1])]



def _maybe_nudge(run: Run, session: GdbSession) -> None:
    number = main_thread_number(session.command("info threads", 10.0), run.target.pid)
    if number is None:
        return
    session.command(f"thread {number}", 10.0)
    bt = session.command("bt 24", 10.0)
    functions = backtrace_functions(bt, run.target.symbols)
    run.main_thread_where = " < ".join(functions[:6]) or None
    if platform.machine() != "x86_64":
        return
    orig = parse_value(session.command("p $orig_rax", 10.0))
    rax = parse_value(session.command("p $rax", 10.0))
    if should_nudge(orig, rax, functions, platform.machine()):
        session.command("set var $rax = -4", 10.0)  # EINTR: the lock wait returns, Python runs pending calls
        run.nudged = True

