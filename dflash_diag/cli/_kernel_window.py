"""`doctor --kernel-window`: torch.profiler inside the process for doctor's own window, its trace as evidence.

Off unless asked for: what the profiler leaves behind once it is taken out (CUPTI's callbacks may stay registered
and tax every later kernel launch) is measured by ``bench/gpu_evidence_cost.py`` (windows before, during and after
the profiler, alternating, several rounds); until that residual is measured nil on the GPU the diagnosis runs on,
no kernel window is taken by default. The recording is `record --kernels`'s (the attach protocol's ``kernels``
action, leased to this command, stopped on every exit it sees); the sampling window is doctor's and lasts as long as
the profiler records (``--duration``), so the answer comes in one window: attach, the window, the profiler's stop
and export. What the recording was and cost the process is kept in the observation (``KernelWindow``), so a replay
reports it as the live run did.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from dflash_diag.errors import CommandError, ExitCode
from dflash_diag.model import Observation
from dflash_diag.model.kernels import KernelWindow
from dflash_diag.observe import Target, Window

# The recording's own attach request waits this long for the process's safe point (`record --timeout`'s default).
START_TIMEOUT_S = 30.0


def observe_with_kernel_window(args: argparse.Namespace, target: Target, window: Window) -> Observation:
    """doctor's window with torch.profiler recording in the process for all of it: the observation, with the trace
    and what the recording cost the process (its stop and export, which hold the GIL)."""
    from dflash_contract.board import BoardDirError, ensure_private_dir
    from dflash_diag.cli._record_kernels import observe_recording
    from dflash_diag.cli._signals import deferred
    from dflash_diag.inject import kernels as recording
    from dflash_diag.inject.request import Lease
    from dflash_diag.sources.board import default_board_dir

    try:
        board_dir = ensure_private_dir(Path(args.board_dir).resolve() if args.board_dir else default_board_dir())
    except (BoardDirError, OSError) as exc:
        raise CommandError(str(exc), ExitCode.BAD_INPUT) from None
    started = recording.start_recording(
        target.pid, board_dir=board_dir, duration_s=window.duration_s, steps=None, method=args.attach_method,
        timeout_s=START_TIMEOUT_S, lease=Lease.for_target(target.pid), progress=None if args.json else _progress,
        interrupted=lambda stopped: _say_stopped(target.pid, stopped))
    state: dict[str, Any] = {}
    try:
        obs = observe_recording(target, window, started, state, show_progress=not args.json,
                                say=lambda message: _say(message))
    except BaseException:
        with deferred():  # a second Ctrl-C must not cut the stop short (it is bounded)
            stopped = recording.abort(target.pid, started.files)
        _say_stopped(target.pid, stopped)
        raise
    finally:
        started.files.remove()
    return replace(obs, kernel_window=kernel_window_of(state.get("outcome") or {}, state.get("torch_bytes"),
                                                       started.injection.method))


def kernel_window_of(outcome: dict[str, Any], torch_bytes: object, method: str) -> KernelWindow:
    """The recording's outcome (JSON the process wrote) as typed values: a value of the wrong type is left out."""
    def num(value: object) -> float | None:
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None

    def whole(value: object) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    torch = outcome.get("torch")
    return KernelWindow(cuda=bool(outcome.get("cuda")), torch=torch if isinstance(torch, str) else None,
                        steps=whole(outcome.get("steps")), stop_ms=num(outcome.get("stop_ms")),
                        export_ms=num(outcome.get("export_ms")), torch_trace_bytes=whole(torch_bytes), method=method)


def _progress(message: str) -> None:
    if sys.stderr.isatty():
        print(f"dflash-diag doctor: kernel window: {message}...", file=sys.stderr, flush=True)


def _say(message: str) -> None:
    print(f"dflash-diag doctor: {message}", file=sys.stderr, flush=True)


def _say_stopped(pid: int, stopped: bool) -> None:
    _say(f"the profiler in PID {pid} " + (
        "was stopped and its recording dropped" if stopped else
        "was asked to stop; it stops by itself once this command has exited (its lease)"))


__all__ = ["START_TIMEOUT_S", "kernel_window_of", "observe_with_kernel_window"]
