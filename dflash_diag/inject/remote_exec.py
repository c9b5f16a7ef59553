"""Python 3.14's ``sys.remote_exec`` (PEP 768), run by an interpreter of the target's version, with the fixed
program as the script: the interpreter runs it at its next safe point. Nothing is stopped.
"""

from __future__ import annotations

import os
import subprocess

from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.inject.injection import Run, last_line, left_s
from dflash_diag.inject.lifetime import die_with_us
from dflash_diag.inject.program import safe_path


def remote_exec_argv(helper: str, pid: int, script_path: str) -> list[str]:
    code = f"import sys; sys.remote_exec({int(pid)}, {safe_path(script_path, 'script path')!r})"
    return [helper, "-I", "-c", code]


def via_remote_exec(run: Run) -> None:
    argv = remote_exec_argv(run.path, run.target.pid, str(run.req.script))
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=min(60.0, left_s(run)),
                              stdin=subprocess.DEVNULL, check=False, env={"PATH": os.environ.get("PATH", "")},
                              preexec_fn=die_with_us())
    except subprocess.TimeoutExpired:
        raise AttachError("sys.remote_exec did not return in time", ExitCode.ATTACH_FAILED) from None
    run.transcript.append(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        last = last_line(proc.stderr or proc.stdout)
        code = ExitCode.PERMISSION if "permission" in last.lower() or "not permitted" in last.lower() else ExitCode.ATTACH_FAILED
        raise AttachError(f"sys.remote_exec into PID {run.target.pid} failed: {last}", code)

