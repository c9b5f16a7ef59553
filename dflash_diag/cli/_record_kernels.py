"""`record --kernels`: torch.profiler started inside a running process, beside doctor's sampling window, merged into
one Perfetto trace (docs/integrations.md).

The steps: start the recording (the attach protocol's ``kernels`` action, at a safe point of the process, leased to
this command); sample the process as `record` does until the process says the profiler stopped (the steps, the
duration); read its outcome and torch's trace, place torch's clock on ours, analyse the window with the trace as
evidence, merge. Every exit this command sees stops the profiler first (Ctrl-C, SIGTERM, SIGHUP, an error):
the stop file asks the process to end it and drop it, and the command waits for its word (bounded); on the exit
it cannot see (SIGKILL) the process notices the lease's end within half a second and does the same.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from dflash_diag import __version__
from dflash_diag.errors import AttachError, CommandError, ExitCode
from dflash_diag.model import Observation


def record_kernels(args: argparse.Namespace, duration_s: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """The merged trace document and the command's summary (its --json)."""
    from dflash_contract.board import BoardDirError, choose_board_dir
    from dflash_diag.cli._signals import deferred, terminate_like_ctrl_c
    from dflash_diag.inject import kernels as recording
    from dflash_diag.inject.request import Lease

    try:  # a default directory someone else took: a private one beside it, as `attach` and `run` do
        board_dir, warning = choose_board_dir(Path(args.board_dir).resolve() if args.board_dir else None)
    except (BoardDirError, OSError) as exc:
        raise CommandError(str(exc), ExitCode.BAD_INPUT) from None
    if warning is not None:
        _say(args, f"warning: {warning}")
    lease = Lease.for_target(args.pid)
    if lease is None:
        _say(args, f"PID {args.pid} runs in another PID namespace: the recording cannot hold a lease on this command; "
                   "should it be killed (SIGKILL), the profiler still stops by itself after --duration")
    with terminate_like_ctrl_c():
        started = recording.start_recording(
            args.pid, board_dir=board_dir, duration_s=duration_s, steps=args.steps, method=args.method,
            timeout_s=args.timeout, lease=lease, progress=None if args.json else _progress,
            interrupted=lambda stopped: _say_stopped(args, stopped))
        files = started.files
        state: dict[str, Any] = {}
        try:
            observed = _observe(args, duration_s, started, state)
        except BaseException:
            with deferred():  # a second Ctrl-C must not cut the stop short (it is bounded)
                stopped = recording.abort(args.pid, files)
            _say_stopped(args, stopped)
            raise
        finally:
            files.remove()
    return _merge(args, started, observed, state)


def _say_stopped(args: argparse.Namespace, stopped: bool) -> None:
    _say(args, f"the profiler in PID {args.pid} " + (
        "was stopped and its recording dropped" if stopped else
        "was asked to stop; it stops by itself once this command has exited (its lease)"))


def _progress(message: str) -> None:
    if sys.stderr.isatty():
        print(f"dflash-diag record: {message}...", file=sys.stderr, flush=True)


def _say(args: argparse.Namespace, message: str) -> None:
    print(f"dflash-diag record: {message}", file=sys.stderr, flush=True)


def _observe(args: argparse.Namespace, duration_s: float, started: Any, state: dict[str, Any]) -> Any:
    """doctor's window until the process says the profiler stopped, then the trace as evidence of the analysis."""
    from dflash_diag.cli._observe import observe, sampler_config
    from dflash_diag.inject import kernels as recording
    from dflash_diag.sources.kernel_trace import recorded_trace

    def finish(obs: Observation) -> Observation:
        outcome = recording.wait_outcome(args.pid, started.files, time.monotonic() + duration_s + recording.END_GRACE_S)
        if not outcome.get("ok"):
            raise AttachError(f"PID {args.pid}: the kernel recording failed: {outcome.get('error')}", ExitCode.ATTACH_FAILED)
        if outcome.get("reason") == "program-profiler":
            _say(args, f"PID {args.pid} started a profiler of its own: ours stepped aside at once (the trace ends there)")
        with recording.open_trace(started.files) as fh:  # read as a stream: memory is what is kept of it
            size = os.fstat(fh.fileno()).st_size
            trace, clock = recorded_trace(fh, outcome, args.pid, wall_minus_mono_s=time.time() - time.monotonic())
        state.update(outcome=outcome, clock=clock, torch_bytes=size)
        return replace(until_stop(obs, outcome.get("stop_began_mono_ns")), kernels=trace)

    config = sampler_config(duration_s, args.rate, args.board_dir, native=args.native)
    return observe(args.pid, duration_s, config, progress=not args.json,
                   until=lambda: recording.ended(started.files), finish=finish)


def until_stop(obs: Observation, stop_began_mono_ns: object) -> Observation:
    """The window up to the moment the recording's end was decided: what follows is the profiler's stop and export
    (the GIL held by our thread, the program's threads waiting for it), ours and not the program's: its cost is
    reported as such (``stop_ms``, ``export_ms``), never diagnosed as the program's GIL contention."""
    if not isinstance(stop_began_mono_ns, int) or isinstance(stop_began_mono_ns, bool):
        return obs
    cut_s = stop_began_mono_ns / 1e9
    stacks = tuple(s for s in obs.stacks if s.monotonic_s <= cut_s)
    if not stacks or len(stacks) == len(obs.stacks):
        return obs
    proc = tuple(sweep for sweep in obs.proc if not sweep or sweep[0].monotonic_s <= cut_s)
    gpus: Any = obs.gpus  # Maybe[...]: a tuple of sweeps, or NA
    if isinstance(gpus, tuple):
        gpus = tuple(sweep for sweep in gpus if not sweep or sweep[0].monotonic_s <= cut_s)
    resources = tuple(r for r in obs.resources if r.monotonic_s <= cut_s)
    start_s = min(s.monotonic_s for s in obs.stacks)
    return replace(obs, stacks=stacks, proc=proc, gpus=gpus, resources=resources,
                   window_s=max(0.0, min(obs.window_s, cut_s - start_s)))


def _merge(args: argparse.Namespace, started: Any, observed: Any,
           state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    from dflash_diag.analysis.kernels import summarise, summary_json
    from dflash_diag.export.kernels import kernels_trace
    from dflash_diag.model.kernels import GPU_CATS

    obs, analysis = observed.observation, observed.analysis
    trace, clock, outcome = obs.kernels, state["clock"], state["outcome"]
    profiled_s = max(0.0, (int(outcome.get("stopped_mono_ns") or 0) - int(outcome.get("started_mono_ns") or 0)) / 1e9)
    info = {"torch": outcome.get("torch"), "cuda": bool(outcome.get("cuda")), "reason": outcome.get("reason"),
            "steps": outcome.get("steps"), "profiled_s": round(profiled_s, 3), "stop_ms": outcome.get("stop_ms"),
            "export_ms": outcome.get("export_ms"), "torch_trace_bytes": state["torch_bytes"],
            "method": started.injection.method,
            "paused_ms": None if started.injection.paused_s is None else round(1e3 * started.injection.paused_s, 3)}
    merged = kernels_trace(obs, analysis.threads, analysis.findings, trace, clock, tool_version=__version__,
                           recording=info, max_events=args.max_events)
    summary = summarise(trace)
    gpu = [s for s in trace.spans if s.cat in GPU_CATS]
    host_threads = {s.tid for s in trace.spans if s.cat not in GPU_CATS}
    out = {
        "pid": args.pid, "window_s": round(obs.window_s, 3), "stack_samples": len(obs.stacks),
        "threads": len(analysis.threads), "findings": len(analysis.findings),
        "events": len(merged.doc["traceEvents"]), "torch_events": merged.torch_events,
        "left_out": merged.left_out, "cut_at_s": merged.cut_at_s,
        "gpu_spans": len(gpu), "streams": len({(s.device, s.tid) for s in gpu}),
        "host_spans": len(trace.spans) - len(gpu), "torch_threads": len(host_threads),
        "clock": merged.doc["otherData"]["kernels"]["clock"], **info,
        "kernels": summary_json(summary),
        "headlines": [f"{f.severity.label}: {f.rule_id}: {f.claim}" for f in analysis.findings
                      if f.rule_id in ("gpu-launch-bound", "kernel-trace")][:3],
    }
    return merged.doc, out
