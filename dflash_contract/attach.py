"""The attach protocol: what `dflash-diag attach`/`detach` (the tool) and the bootstrap it runs inside a process
(``probes/_attach_boot.py``) agree on. docs/attach.md tells the whole story.

The tool writes a *control file* (a JSON request) into the board directory and makes the process run a fixed
program that execs the bootstrap with that file's path. The bootstrap claims the request by renaming it, checks
every field again, acts, and writes a *result file* the tool waits for. A request the tool gave up on is
cancelled by deleting its control file first: a late bootstrap finds nothing to claim.

Standard library only, and no import of the rest of this package: the bootstrap, which runs inside the user's
program before anything of ours is imported, loads this file by its path.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

SCHEMA = "dflash-diag.attach/1"  # of the control file and of the result file
ACTIONS = ("attach", "detach", "inventory", "kernels")  # what a request may ask; nothing else runs
MAX_CONTROL_BYTES = 64 * 1024
MAX_RESULT_BYTES = 4 << 20
NONCE_HEX_CHARS = 16  # secrets.token_hex(8): a request's name cannot be guessed or replayed
PROBE_NAME = re.compile(r"[a-z]{1,32}")

# The files of one request, in the board directory: <prefix>.control (the request), .control.claimed (the
# bootstrap's once it renamed it), .result (the answer, written through .result.tmp), .py (the script Python
# 3.14's sys.remote_exec runs); and one per process, .attach-PID.page: where the tool's page is in that process.
CLAIMED_SUFFIX = ".claimed"
TMP_SUFFIX = ".tmp"
RESULT_NAME = re.compile(r"\.attach-\d+\.[0-9a-f]{16}\.result")
# A kernel recording (action "kernels", `dflash-diag record --kernels`) adds three files of the same request:
# .trace.json (torch.profiler's export, written by the process), .stop (the command asks for an early end) and
# .kernels (the recording's outcome, written through .kernels.tmp once the profiler is stopped).
TRACE_SUFFIX = ".trace.json"
STOP_SUFFIX = ".stop"
OUTCOME_SUFFIX = ".kernels"
KERNELS_OUTCOME_SCHEMA = "dflash-diag.kernels-outcome/1"  # of the .kernels file
# Every name above, and only those: what a clean-up of stale requests may remove.
OWN_FILE = re.compile(r"\.attach-(\d+)\.(?:[0-9a-f]{16}\.(?:control(?:\.claimed)?|result(?:\.tmp)?|py"
                      r"|trace\.json|stop|kernels(?:\.tmp)?)|page)")
# What a kernel recording may be asked for: the longest window, the most optimizer steps, the tick at which
# the process checks its end conditions (the stop file, the lease, the steps, the deadline).
KERNELS_MAX_DURATION_S = 30.0
KERNELS_MAX_STEPS = 100_000


def request_prefix(pid: int, nonce: str) -> str:
    return f".attach-{int(pid)}.{nonce}"


def control_name(pid: int, nonce: str) -> str:
    return request_prefix(pid, nonce) + ".control"


def result_name(pid: int, nonce: str) -> str:
    return request_prefix(pid, nonce) + ".result"


def script_name(pid: int, nonce: str) -> str:
    return request_prefix(pid, nonce) + ".py"


def kernels_prefix(control_path: str) -> str:
    """The path every file of a kernel recording starts with: its control file's path without ``.control``."""
    if not control_path.endswith(".control"):
        raise ValueError("not a control file's path")
    return control_path[: -len(".control")]


def page_name(pid: int) -> str:
    return f".attach-{int(pid)}.page"


# One injection into a process at a time (per board directory, where its page note is): the command holds an
# exclusive flock on this file from before it writes the page until the answer came or the request was cancelled.
LOCK_FILE = re.compile(r"\.attach-(\d+)\.lock")


def lock_name(pid: int) -> str:
    return f".attach-{int(pid)}.lock"


def is_result_path(result_path: object, control_path: str) -> bool:
    """Whether ``result_path`` is a result file beside ``control_path`` (the bootstrap writes nowhere else)."""
    return (isinstance(result_path, str) and os.path.dirname(result_path) == os.path.dirname(control_path)
            and RESULT_NAME.fullmatch(os.path.basename(result_path)) is not None)


def valid_lease(lease: object) -> bool:
    """``None`` or ``{"pid": int > 0, "start_ticks": int >= 0}`` (a process the probes are held for)."""
    return lease is None or (isinstance(lease, dict) and set(lease) == {"pid", "start_ticks"}
                             and all(type(v) is int for v in lease.values())
                             and lease["pid"] > 0 and lease["start_ticks"] >= 0)


def check_control(control: dict[str, Any], pid: int, now_wall_s: float | None = None) -> None:
    """ValueError (TimeoutError once its deadline passed) when ``control`` is not a request this process may run.

    The bootstrap checks again what the tool wrote: a control file is a file on disk, not a promise."""
    if control.get("schema") != SCHEMA:
        raise ValueError(f"control schema {control.get('schema')!r} is not {SCHEMA}")
    if control.get("pid") != pid:
        raise ValueError(f"control file is for PID {control.get('pid')}, this is {pid}")
    deadline = control.get("deadline_wall_s")
    now = time.time() if now_wall_s is None else now_wall_s
    if not isinstance(deadline, (int, float)) or now > deadline:
        raise TimeoutError("control file expired: the command gave up waiting")
    if control.get("action") not in ACTIONS:
        raise ValueError(f"unknown action {control.get('action')!r}")
    names = control.get("probes")
    if not (isinstance(names, list) and all(isinstance(n, str) and PROBE_NAME.fullmatch(n) for n in names)):
        raise ValueError("probe names must be a list of lowercase words")
    board_dir = control.get("board_dir")
    if board_dir is not None and not (isinstance(board_dir, str) and os.path.isabs(board_dir)):
        raise ValueError("board_dir must be an absolute path")
    if not isinstance(control.get("version"), str) or not isinstance(control.get("nonce"), str):
        raise ValueError("version and nonce must be strings")
    if not valid_lease(control.get("lease")):
        raise ValueError("lease must be {pid, start_ticks} (integers)")
    if control["action"] == "kernels":
        check_kernels(control.get("kernels"))


def check_kernels(params: object) -> None:
    """ValueError unless ``params`` is ``{"duration_s": seconds, "steps": int or None}`` within the bounds."""
    if not isinstance(params, dict) or set(params) != {"duration_s", "steps"}:
        raise ValueError("kernels must be {duration_s, steps}")
    duration = params["duration_s"]
    if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not 0.1 <= duration <= KERNELS_MAX_DURATION_S:
        raise ValueError(f"kernels.duration_s must be between 0.1 and {KERNELS_MAX_DURATION_S:g} seconds")
    steps = params["steps"]
    if steps is not None and (type(steps) is not int or not 1 <= steps <= KERNELS_MAX_STEPS):
        raise ValueError(f"kernels.steps must be an integer between 1 and {KERNELS_MAX_STEPS}")
