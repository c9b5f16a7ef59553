"""From what was gathered to the bundle's files: analysis (threads, pipeline, findings), the schema-versioned
``snapshot.json``, ``report.md``, native stacks as text, the board, NVML state and the timeline picture.

Everything passes through the one redactor (``dflash_contract.redact``, docs/security.md) as structured
values, before anything is serialised: the environment as an allow-list, argv as a command line, the
document as a tree (secret-named keys, URL user info, signatures, connection strings, token formats), then
every secret value found in the environment, argv and board is replaced wherever else it appears, inside
strings only (never in numbers, never by editing serialised JSON).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import platform
import re
from collections.abc import Mapping
from typing import Any

from dflash_contract.board import AppKeys, CodedriftKeys, ProbeName
from dflash_contract.redact import (
    redact_argv,
    redact_env,
    redact_text,
    redact_tree,
    scrub_text,
    scrub_tree,
    secret_values,
)
from dflash_diag import __version__
from dflash_diag.model import (
    NA,
    Analysis,
    Observation,
    StackSample,
    ThreadState,
    ThreadStats,
)
from dflash_diag.model.job import JobAnalysis, JobObservation
from dflash_diag.snapshot.gather import Gathered, GatheredTarget
from dflash_diag.snapshot.jsonable import to_jsonable
from dflash_diag.snapshot.report import render_report
from dflash_diag.snapshot.shape import RATE_KEYS
from dflash_diag.snapshot.svg import timeline_svg
from dflash_diag.view.findings import finding_json, headline_json

# 2: findings are the one finding document (docs/findings.md): evidence a list of {name, value} objects (1 had
# [name, value] lists). diff reads both (bundle.SUPPORTED_SCHEMAS).
SCHEMA = "dflash-diag.snapshot/2"
# Environment variables that change how torch/CUDA/threads behave: shown in the report and compared by `diff`.
ENV_KNOB = re.compile(
    r"^(PYTORCH_.*|TORCH.*|CUDA_.*|CUBLAS.*|CUDNN.*|NCCL_.*|NVIDIA_.*|TRITON_.*|OMP_.*|MKL_.*|OPENBLAS_.*|"
    r"KMP_.*|TOKENIZERS_PARALLELISM|HF_.*|TRANSFORMERS_.*|WANDB_MODE|PYTHON(HASHSEED|OPTIMIZE|PATH|MALLOC|UNBUFFERED|"
    r"_GIL|DEVMODE)|DFLASH.*|LD_PRELOAD|MALLOC_.*)$"
)


def observation_of(g: Gathered) -> Observation:
    """The collector's window, or one made from the native dump when the window could not be sampled."""
    if g.observation is not None:
        return g.observation
    stacks: tuple[StackSample, ...] = (g.native_stacks,) if g.native_stacks is not None else ()
    return Observation(
        source_lines=_source_lines(stacks, g.pid),
        pid=g.pid,
        cmdline=redact_argv(g.cmdline),
        started_wall_s=g.started_wall_s,
        window_s=0.0,
        stacks=stacks,
        proc=(g.proc_threads,) if g.proc_threads else (),
        gpus=NA("the sampling window was not taken"),
        boards=(g.board,) if g.board is not None else NA("no board"),
        process_alive=g.alive_at_end,
        warnings=(),
    )


def _source_lines(stacks: tuple[StackSample, ...], pid: int) -> dict[str, str]:
    """The innermost Python lines of every thread, as the collector records them (the classifier reads
    `.item()`, `time.sleep(` from them): redacted by the process's redactor, then cut."""
    from dflash_diag.sources.lines import LineCache, read_source_lines, stack_frames
    from dflash_diag.sources.redaction import redactor_for

    return redactor_for(pid).source_lines(read_source_lines(stack_frames(stacks), LineCache()))


def analyse_gathered(g: Gathered, now_wall_s: float) -> Analysis:
    """The shared analysis (``dflash_diag.analysis.analyse``) of one process's gathering, judged at ``now_wall_s``;
    failures are noted as missing."""
    from dflash_diag.analysis import analyse

    analysis = analyse(dataclasses.replace(observation_of(g), now_wall_s=now_wall_s))
    for error in analysis.errors:
        g.miss("analysis", error)
    return analysis


def analyse_target(gathered: GatheredTarget, now_wall_s: float) -> Analysis | JobAnalysis:
    """The one analysis of what was gathered of a target, judged at ``now_wall_s``: of its process, or of the job
    (each rank's window, or its native dump where the window could not be taken); failures are noted as missing."""
    from dflash_diag.analysis import analyse

    target = gathered.target
    ranks = tuple(dataclasses.replace(observation_of(g), patterns=target.patterns, now_wall_s=now_wall_s)
                  for g in gathered.processes)
    if target.job is None:
        analysis: Analysis | JobAnalysis = analyse(ranks[0])
    else:
        window = gathered.observation
        job = (dataclasses.replace(window, ranks=ranks, now_wall_s=now_wall_s) if isinstance(window, JobObservation)
               else JobObservation(topology=target.job, ranks=ranks, started_wall_s=min(o.started_wall_s for o in ranks),
                                   window_s=max(o.window_s for o in ranks), launcher_alive=None,
                                   warnings=target.job.notes, now_wall_s=now_wall_s))
        analysis = analyse(job)
    processes = analysis.ranks if isinstance(analysis, JobAnalysis) else (analysis,)
    for g, a in zip(gathered.processes, processes, strict=True):
        for error in a.errors:
            g.miss("analysis", error)
    return analysis


def _stage_shares(threads: tuple[ThreadStats, ...]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for stage in sorted({t.stage for t in threads}):
        members = [t for t in threads if t.stage == stage and t.n_samples > 0]
        if members:
            out[stage] = {s.value: round(sum(t.shares.get(s, 0.0) for t in members) / len(members), 4) for s in ThreadState}
    return out


def _rates(g: Gathered, a: Analysis) -> dict[str, Any]:
    app = g.board.app if g.board is not None else {}
    rates: dict[str, Any] = {}
    for key in RATE_KEYS:
        value = app.get(key) if isinstance(app, Mapping) else None
        rates[key] = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    rates["state_shares"] = _stage_shares(a.threads)
    return rates


def build_document(g: Gathered, a: Analysis, now_wall_s: float) -> dict[str, Any]:
    board = g.board
    app = dict(board.app) if board is not None else {}
    raw_config = app.get(AppKeys.CONFIG)
    config: Mapping[str, Any] = raw_config if isinstance(raw_config, Mapping) else {}
    env = g.environ if isinstance(g.environ, dict) else {}
    obs = a.observation
    gpus = obs.gpus
    latest_gpus = gpus[-1] if isinstance(gpus, tuple) and gpus else gpus
    codedrift = board.probe(ProbeName.CODEDRIFT) if board is not None else None
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "tool": {"name": "dflash-diag", "version": __version__},
        "created_wall_s": now_wall_s,
        "created_utc": _dt.datetime.fromtimestamp(now_wall_s, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "pid": g.pid,
        "process": {
            "argv": list(redact_argv(g.cmdline)),
            "exe": g.exe,
            "cwd": g.cwd,
            "start_wall_s": g.start_wall_s,
            "alive_at_end": g.alive_at_end,
            # py-spy can only attach to a process on this machine: our hostname is its hostname.
            "hostname": board.writer.hostname if board is not None else platform.node(),
        },
        "versions": g.versions,
        "app": {k: v for k, v in app.items() if k not in (AppKeys.CONFIG, AppKeys.THREADS)},
        "config": config,
        "flags": {k: v for k, v in config.items() if isinstance(v, bool)},
        "app_threads": app.get(AppKeys.THREADS, {}),
        "env": redact_env(env) if env else g.environ,  # allow-list: values of diagnosis knobs only
        "env_knobs": {k: v for k, v in sorted(redact_env(env).items()) if ENV_KNOB.match(k)},
        "headline": headline_json(a.headline),  # the one finding document (view/findings.py)
        "phase": a.phase,
        "findings": [finding_json(f) for f in a.findings],
        "rates": _rates(g, a),
        "pipeline": a.pipeline,
        "threads": a.threads,
        "proc_threads": g.proc_threads,
        "stacks_native": g.native_stacks,
        "stacks_last_sample": _last_sample(obs) if g.native_stacks is None else None,
        "gpus": latest_gpus,
        "board": board,
        "code": {
            "root": g.code.root if g.code else NA("code hashes not gathered"),
            "how": g.code.how if g.code else "",
            "files": dict(g.code.files) if g.code else {},
            "changed_after_start": list(g.code.changed_after_start) if g.code else [],
            "truncated": g.code.truncated if g.code else None,
            "stale_modules": list(codedrift.get(CodedriftKeys.STALE, [])) if codedrift else [],
        },
        "sampling": {
            "window_s": obs.window_s,
            "stack_samples": len(obs.stacks),
            "warnings": list(obs.warnings),
        },
        "missing": [{"what": what, "why": why} for what, why in g.missing],
        "timings_s": g.timings_s,
    }
    return scrub_tree(redact_tree(to_jsonable(doc)), known_secrets(g))


def observation_file(gathered: GatheredTarget, analysis: Analysis | JobAnalysis) -> bytes | None:
    """The observation the bundle's analysis judged (``observation.json``, observe.codec), so ``doctor BUNDLE``
    gives the same report offline; its strings pass the bundle's scrubber once more. None (and a missing entry)
    when it is too large to be read back."""
    from dflash_diag.observe.codec import ObservationFormatError, encode_observation

    secrets = frozenset().union(*(known_secrets(g) for g in gathered.processes))
    try:
        return encode_observation(analysis.observation, tool_version=__version__,
                                  text=lambda text: scrub_text(text, secrets))
    except ObservationFormatError as exc:
        gathered.processes[0].miss("observation.json", str(exc))
        return None


def known_secrets(g: Gathered) -> frozenset[str]:
    """Secret values read from the process's environment, argv and board: hidden wherever else they appear."""
    env = g.environ if isinstance(g.environ, dict) else {}
    return secret_values(env, g.cmdline)


def _redacted_names(threads: tuple[ThreadStats, ...], secrets: frozenset[str]) -> tuple[ThreadStats, ...]:
    return tuple(dataclasses.replace(t, name=scrub_text(redact_text(t.name), secrets)) for t in threads)


def render_stacks(sample: StackSample | None) -> str:
    if sample is None:
        return "no stacks could be taken (see `missing` in snapshot.json)\n"
    lines = [f"Process {sample.pid}: {len(sample.threads)} threads, "
             f"{'with' if sample.native else 'WITHOUT'} native frames (py-spy dump{' --native' if sample.native else ''})", ""]
    for t in sample.threads:
        flags = ", ".join(f for f, on in (("active", t.active), ("holds GIL", t.owns_gil)) if on) or "idle"
        lines.append(f"Thread {t.os_thread_id or t.thread_id:#x} ({t.os_thread_id}) \"{t.name or '?'}\" [{flags}]")
        for f in t.frames:
            where = f"{f.filename}:{f.line}" if f.line else f.filename
            lines.append(f"    {'(native) ' if f.native else ''}{f.name} ({where})")
        lines.append("")
    return "\n".join(lines)


def _last_sample(obs: Observation) -> StackSample | None:
    """Without the native dump, the sampling window's last (Python-only) dump is still every thread's stack."""
    return obs.stacks[-1] if obs.stacks else None


def _trace_json(a: Analysis, secrets: frozenset[str]) -> str:
    """The sampling window as a Perfetto / chrome://tracing timeline (the same file `dflash-diag record` writes),
    its strings through the bundle's scrubber: a finding's claim can quote another process's command line (a pipe's
    writer, a rank), whose argv redaction keeps a secret passed under a harmless flag (`--mirror TOKEN` beside
    `--api-token TOKEN`); the values known to be secret are hidden here as in every other file."""
    from dflash_diag.export.trace import chrome_trace

    try:
        doc = chrome_trace(a.observation, a.threads, a.findings, tool_version=__version__)
    except Exception as exc:  # a broken timeline must not lose the rest of the report
        doc = {"traceEvents": [], "otherData": {"generator": "dflash-diag", "error": f"{type(exc).__name__}: {exc}"}}
    return json.dumps(scrub_tree(doc, secrets), allow_nan=False, separators=(",", ":")) + "\n"


def build_files(g: Gathered, a: Analysis, now_wall_s: float) -> dict[str, bytes]:
    """Every file of the bundle, redacted, keyed by its name inside the bundle."""
    secrets = known_secrets(g)
    doc = build_document(g, a, now_wall_s)  # redacted and scrubbed as a tree
    board_json = doc.get("board")
    stacks = render_stacks(g.native_stacks if g.native_stacks is not None else _last_sample(a.observation))
    gpus = scrub_tree(redact_tree(to_jsonable(a.observation.gpus)), secrets)
    files: dict[str, str] = {
        "report.md": render_report(doc),  # rendered from the redacted document only
        "snapshot.json": json.dumps(doc, indent=1, sort_keys=False, allow_nan=False) + "\n",
        # plain text: each line through the same rules (a frame's file name can hold a secret)
        "stacks.txt": "\n".join(scrub_text(redact_text(line), secrets) for line in stacks.split("\n")),
        "board.json": json.dumps(board_json, indent=1) + "\n" if board_json else "null\n",
        "nvml.json": json.dumps(gpus, indent=1) + "\n",
        "timeline.svg": timeline_svg(_redacted_names(a.threads, secrets), title=f"dflash-diag snapshot of PID {g.pid}",
                                     window_s=a.observation.window_s),
        "trace.json": _trace_json(a, secrets),
    }
    return {name: text.encode("utf-8") for name, text in files.items()}
