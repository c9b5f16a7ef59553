"""lldb: the same steps as gdb's, as one batch script (no nudge, no page reuse), then SIGCONT if lldb left
the process stopped (a known lldb behaviour).
"""

from __future__ import annotations

import re
import subprocess
import time

from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.inject.injection import Run, last_line, left_s
from dflash_diag.inject.lifetime import die_with_us, resume_if_stopped
from dflash_diag.inject.program import page_words
from dflash_diag.sources.ptrace_access import not_permitted


def lldb_commands(program: str) -> list[str]:
    """The lldb batch commands (no interactive driving: lldb has no nudge and no page reuse)."""
    cmds = ["expr -l c -- unsigned long $dd_page = (unsigned long)((void*(*)(void*, unsigned long, int, int, int, long))"
            "mmap)((void*)0, 4096, 3, 34, -1, 0)"]
    cmds += [f"expr -l c -- *(unsigned long long*)($dd_page + {off}) = {word}ULL" for off, word in page_words(program)]
    cmds.append("expr -l c -- (int)((int(*)(void*, void*))Py_AddPendingCall)((void*)&PyRun_SimpleString, (void*)$dd_page)")
    cmds.append("process detach")
    return cmds


def via_lldb(run: Run, program: str) -> None:
    argv = [run.path, "--batch", "--no-lldbinit", "-p", str(run.target.pid)]
    for cmd in lldb_commands(program):
        argv += ["-o", cmd]
    t = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=left_s(run), stdin=subprocess.DEVNULL,
                              start_new_session=True, check=False, preexec_fn=die_with_us())
        out = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        out = str(exc.stdout or "")
        resume_if_stopped(run.target.pid)
        raise AttachError(f"lldb did not finish in {run.timeout_s:g} s; PID {run.target.pid} was resumed",
                          ExitCode.ATTACH_FAILED) from None
    finally:
        run.stopped_s = time.monotonic() - t
        resume_if_stopped(run.target.pid)  # lldb is known to leave processes stopped
    run.transcript.append(out)
    values = re.findall(r"\(int\) \$\d+ = (-?\d+)", out)
    if not values or values[-1] != "0":
        if "not permitted" in out.lower():
            raise AttachError(not_permitted(run.target.pid), ExitCode.PERMISSION)
        raise AttachError(f"lldb could not queue the bootstrap in PID {run.target.pid}: {last_line(out)}",
                          ExitCode.ATTACH_FAILED)

