"""Batch mode (``top --batch``): the same aggregates as the screen, as plain text or JSON (schema in docs/top.md)."""

from __future__ import annotations

import math
import time
from typing import Any

from dflash_diag.model import (
    NA,
    PIPELINE_STAGES,
    Frame,
    GpuSample,
    Maybe,
    Stage,
    StageNames,
    StageStats,
    ThreadStats,
)
from dflash_diag.view.findings import finding_json, headline_json, maybe_findings_lines, plain_lines
from dflash_diag.view.frame import TopFrame
from dflash_diag.view.text import (
    STATE_ORDER,
    STATE_SHORT,
    board_age_text,
    gpu_detail_lines,
    maybe,
    names_of,
    probe_summary,
    rate_note,
    top_frame_text,
)
from dflash_diag.view.waits import waits_json, waits_lines

# 2: each finding is the one finding document (docs/findings.md): evidence a list of {name, value} pairs (1 had an
# object, which kept one value of a name given twice) and kind, impact, stages, because, explains; and the headline.
JSON_SCHEMA = "dflash-diag.top/2"


def _num(value: Maybe[float] | Maybe[int] | None) -> float | int | None:
    """NA and non-finite numbers become null: JSON has no NaN, and the reason is given next to the section."""
    if isinstance(value, NA) or value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _shares(shares: Any) -> dict[str, float]:
    return {state.value: round(float(shares.get(state, 0.0)), 4) for state in STATE_ORDER}


def _frame_json(frame: Frame | None) -> dict[str, Any] | None:
    if frame is None:
        return None
    return {"name": frame.name, "file": frame.filename, "line": frame.line, "native": frame.native}


def _thread_json(stats: ThreadStats) -> dict[str, Any]:
    return {
        "name": stats.name,
        "tid": stats.os_thread_id,
        "stage": stats.stage,
        "samples": stats.n_samples,
        "shares": _shares(stats.shares),
        "cpu_pct": _num(stats.cpu_pct),
        "gil_held_pct": _num(stats.gil_held_pct),
        "top_frame": _frame_json(stats.top_frame),
        "gpu_index": stats.gpu_index,
        "helper": stats.helper,
        "attribution": stats.attribution or None,
    }


def stage_names_json(names: StageNames) -> dict[str, str]:
    """What the report calls each stage (``stages.target`` -> "consumer"...): the keys and ``bottleneck`` stay wire
    values, these are the words a person reads (the program's own, or the roles)."""
    return {stage.value: names.word(stage) for stage in PIPELINE_STAGES}


def _stage_json(stage: StageStats, names: StageNames) -> dict[str, Any]:
    return {
        "name": names.word(stage.stage),
        "threads": list(stage.threads),
        "batches_per_s": _num(stage.batches_per_s),
        "tokens_per_s": _num(stage.tokens_per_s),
        "shares": _shares(stage.shares),
    }


def _na(value: NA) -> dict[str, Any]:
    return {"status": "na", "reason": value.reason}


def _gpu_json(gpu: GpuSample) -> dict[str, Any]:
    processes: list[dict[str, Any]] | None = None
    if not isinstance(gpu.processes, NA):
        processes = [
            {"pid": p.pid, "used_memory_bytes": _num(p.used_memory_bytes), "sm_util_pct": _num(p.sm_util_pct)}
            for p in gpu.processes
        ]
    return {
        "index": gpu.index,
        "name": gpu.name,
        "uuid": gpu.uuid,
        "util_pct": _num(gpu.util_pct),
        "mem_util_pct": _num(gpu.mem_util_pct),
        "memory_used_bytes": _num(gpu.memory_used_bytes),
        "memory_total_bytes": _num(gpu.memory_total_bytes),
        "power_w": _num(gpu.power_w),
        "power_limit_w": _num(gpu.power_limit_w),
        "sm_clock_mhz": _num(gpu.sm_clock_mhz),
        "max_sm_clock_mhz": _num(gpu.max_sm_clock_mhz),
        "temperature_c": _num(gpu.temperature_c),
        "throttle_reasons": None if isinstance(gpu.throttle_reasons, NA) else list(gpu.throttle_reasons),
        "processes": processes,
    }


def frame_to_json(frame: TopFrame) -> dict[str, Any]:
    """The machine-readable batch report. Keys are stable (docs/top.md); every section has a ``status``."""
    pipeline: dict[str, Any]
    if isinstance(frame.pipeline, NA):
        pipeline = _na(frame.pipeline)
    else:
        p = frame.pipeline
        pipeline = {
            "status": "ok",
            "queue_name": p.queue_name,
            "queue_depth": _num(p.queue_depth),
            "queue_maxsize": _num(p.queue_maxsize),
            "queue_depth_history": list(p.queue_depth_history),
            "queue_trend_per_s": _num(p.queue_trend_per_s),
            "queue_trend": p.queue_trend or None,
            "producer_starved_share": _num(p.producer_starved_share),
            "consumer_starved_share": _num(p.consumer_starved_share),
            "producer_starved_sampled": _num(p.producer_starved_sampled),
            "consumer_starved_sampled": _num(p.consumer_starved_sampled),
            "probe_boards": p.probe_boards,
            "bottleneck": p.bottleneck,
            "verdict": p.verdict,
            "stages_from": p.stages_from,
            "stage_names": stage_names_json(p.names),
            "cpu_note": p.cpu_note or None,
        }
    stages: dict[str, Any] = (
        _na(frame.pipeline)
        if isinstance(frame.pipeline, NA)
        else {
            "status": "ok",
            Stage.TARGET.value: _stage_json(frame.pipeline.target, frame.pipeline.names),
            Stage.DRAFTER.value: _stage_json(frame.pipeline.drafter, frame.pipeline.names),
        }
    )
    gpus: dict[str, Any] = (
        _na(frame.gpus)
        if isinstance(frame.gpus, NA)
        else {"status": "ok", "devices": [_gpu_json(g) for g in frame.gpus]}
    )
    probes: dict[str, Any]
    if isinstance(frame.board, NA):
        probes = _na(frame.board)
    else:
        probes = {
            "status": "ok",
            "board_seq": frame.board.seq,
            "board_age_s": round(frame.board.age_s(frame.wall_s), 3),
            "board_path": frame.board.path,
            "summary": {name: reading for name, reading in probe_summary(frame.board)},
        }
    findings: dict[str, Any] = (
        _na(frame.findings)
        if isinstance(frame.findings, NA)
        else {"status": "ok", "items": [finding_json(f) for f in frame.findings]}
    )
    return {
        "schema": JSON_SCHEMA,
        "pid": frame.pid,
        "cmdline": list(frame.cmdline),
        "wall_time_s": frame.wall_s,
        "window_s": frame.window_s,
        "rate_hz": frame.rate_hz,
        "rate_requested_hz": frame.requested_rate_hz,
        "rate_reason": frame.rate_reason,
        "native": frame.native,
        "samples": frame.n_samples,
        "process_alive": frame.process_alive,
        "states": [state.value for state in STATE_ORDER],
        "threads": [_thread_json(t) for t in frame.threads],
        "stages": stages,
        "pipeline": pipeline,
        "gpus": gpus,
        "probes": probes,
        "headline": headline_json(frame.headline),
        "findings": findings,
        "waits": waits_json(frame.waits),
        "warnings": list(frame.warnings),
    }


def _pct_cell(share: float) -> str:
    return f"{100 * share:>5.0f}"


def frame_to_text(frame: TopFrame) -> str:
    """A ``top -b`` style report: header, pipeline, threads, GPUs, probes, findings."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(frame.wall_s))
    alive = "running" if frame.process_alive else "EXITED"
    out = [
        f"dflash-diag top - PID {frame.pid} ({alive}) - {when}",
        f"command: {' '.join(frame.cmdline) or '?'}",
        f"window {frame.window_s:.1f} s, {frame.n_samples} samples at {frame.rate_hz:.3g} Hz"
        f"{f' ({note})' if (note := rate_note(frame.requested_rate_hz, frame.rate_hz, frame.rate_reason)) else ''}"
        f"{', native frames' if frame.native else ''}",
        "",
        "PIPELINE",
    ]
    state_header = " ".join(f"{STATE_SHORT[s] + '%':>5}" for s in STATE_ORDER)
    if isinstance(frame.pipeline, NA):
        out.append(f"  {frame.pipeline}")
    else:
        p = frame.pipeline
        out.append(f"  {'stage':<8} {'thr':>3} {'batch/s':>8} {'tok/s':>9} {state_header}")
        for stage in (p.target, p.drafter):
            cells = " ".join(_pct_cell(stage.shares.get(s, 0.0)) for s in STATE_ORDER)
            out.append(
                f"  {p.names.word(stage.stage):<8} {len(stage.threads):>3} {maybe(stage.batches_per_s, '{:.2f}'):>8}"
                f" {maybe(stage.tokens_per_s, '{:.0f}'):>9} {cells}"
            )
        depth = f"{maybe(p.queue_depth, '{:d}', '?')}/{maybe(p.queue_maxsize, '{:d}', '?')}"
        source = f" (probe over {p.probe_boards} boards)" if p.probe_boards else " (sampled)"
        out.append(
            f"  {p.queue_name} depth {depth}, trend {maybe(p.queue_trend_per_s, '{:+.2f}/s')}"
            f"{f' {p.queue_trend}' if p.queue_trend else ''},"
            f" producer starved {maybe(p.producer_starved_share, '{:.0%}')},"
            f" consumer starved {maybe(p.consumer_starved_share, '{:.0%}')}{source}"
        )
        bottleneck = p.names.word(p.bottleneck) if p.bottleneck in PIPELINE_STAGES else p.bottleneck
        out.append(f"  verdict (last {frame.window_s:.0f} s): {p.verdict} (bottleneck: {bottleneck})")
        if p.cpu_note:
            out.append(f"  {p.cpu_note}")
    out += ["", "THREADS", f"  {'name':<18} {'tid':>8} {'stage':<8} {state_header}  {'cpu%':>5}  top frame"]
    names = names_of(frame.pipeline, frame.threads)
    for t in frame.threads:
        cells = " ".join(_pct_cell(t.shares.get(s, 0.0)) for s in STATE_ORDER)
        tid = str(t.os_thread_id) if t.os_thread_id is not None else "?"
        out.append(
            f"  {t.name[:18]:<18} {tid:>8} {names.word(t.stage):<8} {cells}  {maybe(t.cpu_pct, '{:.0f}'):>5}  {top_frame_text(t)}"
        )
        if t.attribution:
            out.append(f"  {'':<18} {'':>8} {t.attribution}")
    if not frame.threads:
        out.append("  (no threads sampled)")
    out += ["", "GPUS"]
    if isinstance(frame.gpus, NA):
        out.append(f"  {frame.gpus}")
    else:
        for gpu in frame.gpus:
            out += [f"  {line}" for line in gpu_detail_lines(gpu, frame.pid, frame.threads)]
    out += ["", "PROBES", f"  {board_age_text(frame.board, frame.wall_s)}"]
    if not isinstance(frame.board, NA):
        out += [f"  {name:<11} {reading}" for name, reading in probe_summary(frame.board)]
    out += ["", "FINDINGS"] + plain_lines(
        maybe_findings_lines(frame.findings, frame.headline), indent="  ")
    out += ["", "WAITS"] + [f"  {line}" for line in waits_lines(frame.waits, names)]
    for warning in frame.warnings:
        out.append(f"warning: {warning}")
    return "\n".join(out) + "\n"
