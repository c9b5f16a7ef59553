"""`doctor --kernel-window`: torch.profiler inside the process for doctor's own window, its trace as evidence.

Off unless asked for: what the profiler leaves behind once it is taken out (CUPTI's callbacks may stay registered
and tax every later kernel launch) is measured by ``bench/gpu_evidence_cost.py`` (windows before, during and after
the profiler, alternating, several rounds); until that residual is measured nil on the GPU the diagnosis runs on,
no kernel window is taken by default. The recording is `record --kernels`'s (the attach protocol's ``kernels``
action, leased to this command, stopped on every exit it sees); the sampling window is doctor's and lasts as long as
the profiler records (``--duration``), so the answer comes in one window: attach, the window, the profiler's stop
and export.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dflash_diag.errors import CommandError, ExitCode
from dflash_diag.model import Analysis

# The recording's own attach request waits this long for the process's safe point (`record --timeout`'s default).
START_TIMEOUT_S = 30.0


def diagnose_with_kernel_window(args: argparse.Namespace) -> tuple[Analysis, dict[str, Any]]:
    """doctor's window with torch.profiler recording in the process for all of it; the analysis and the report,
    with what the recording cost the process (its stop and export, which hold the GIL) under ``kernel_window``."""
    from dflash_contract.board import BoardDirError, ensure_private_dir
    from dflash_diag.cli._record_kernels import _observe
    from dflash_diag.cli._signals import deferred
    from dflash_diag.cli.doctor import report_json
    from dflash_diag.inject import kernels as recording
    from dflash_diag.inject.request import Lease
    from dflash_diag.sources.board import default_board_dir

    try:
        board_dir = ensure_private_dir(Path(args.board_dir).resolve() if args.board_dir else default_board_dir())
    except (BoardDirError, OSError) as exc:
        raise CommandError(str(exc), ExitCode.BAD_INPUT) from None
    window = argparse.Namespace(pid=args.pid, rate=args.rate, board_dir=args.board_dir, native=False, json=args.json)
    started = recording.start_recording(
        args.pid, board_dir=board_dir, duration_s=args.duration, steps=None, method=args.attach_method,
        timeout_s=START_TIMEOUT_S, lease=Lease.for_target(args.pid), progress=None if args.json else _progress,
        interrupted=lambda stopped: _say_stopped(args.pid, stopped))
    state: dict[str, Any] = {}
    try:
        observed = _observe(window, args.duration, started, state)
    except BaseException:
        with deferred():  # a second Ctrl-C must not cut the stop short (it is bounded)
            stopped = recording.abort(args.pid, started.files)
        _say_stopped(args.pid, stopped)
        raise
    finally:
        started.files.remove()
    analysis = observed.analysis
    report = report_json(args.pid, analysis)
    outcome = state.get("outcome") or {}
    report["kernel_window"] = {
        "cuda": bool(outcome.get("cuda")), "torch": outcome.get("torch"), "steps": outcome.get("steps"),
        "stop_ms": outcome.get("stop_ms"), "export_ms": outcome.get("export_ms"),
        "torch_trace_bytes": state.get("torch_bytes"), "method": started.injection.method,
    }
    return analysis, report


def _progress(message: str) -> None:
    if sys.stderr.isatty():
        print(f"dflash-diag doctor: kernel window: {message}...", file=sys.stderr, flush=True)


def _say_stopped(pid: int, stopped: bool) -> None:
    print(f"dflash-diag doctor: the profiler in PID {pid} " + (
        "was stopped and its recording dropped" if stopped else
        "was asked to stop; it stops by itself once this command has exited (its lease)"), file=sys.stderr, flush=True)
