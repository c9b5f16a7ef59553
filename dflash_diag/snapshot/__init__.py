"""`dflash-diag snapshot`: a complete, redacted bug-report bundle of a live, hung or dying target: one process, or
every rank of a job (docs/jobs.md).

    result = take_snapshot(Target(pid), output=Path("report.tar.gz"))   # check -o, gather, analyse, write

Layout (``<name>/`` inside the .tar.gz, or the directory itself with ``as_dir=True``): ``report.md``,
``snapshot.json`` (schema ``dflash-diag.snapshot/2``), ``stacks.txt``, ``board.json``, ``nvml.json``,
``timeline.svg``, ``trace.json`` (a Perfetto / chrome://tracing timeline), ``observation.json`` (the window the
analysis judged, schema ``dflash-diag.observation/1``: ``doctor BUNDLE`` replays it) and ``MANIFEST.json`` (every file's SHA-256:
how ``--force`` recognises a bundle it may replace). A job's bundle is its lowest rank's, with the job on top and
the other ranks' own files beside (``snapshot.job``). docs/bug-reports.md describes each; docs/security.md what
is redacted and what may be replaced.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dflash_diag.model import Finding
from dflash_diag.model.job import JobAnalysis
from dflash_diag.observe import Target, Window
from dflash_diag.snapshot.build import SCHEMA, analyse_target, build_files, observation_file
from dflash_diag.snapshot.bundle import OBSERVATION_NAME, default_name, load_snapshot, prepare_output
from dflash_diag.snapshot.gather import Gathered, GatheredTarget, gather
from dflash_diag.snapshot.job import job_files


@dataclass(frozen=True, slots=True)
class SnapshotResult:
    path: Path
    findings: tuple[Finding, ...]
    missing: tuple[tuple[str, str], ...]
    elapsed_s: float
    alive_at_end: bool


def output_path(pid: int, output: Path | None, as_dir: bool, now_wall_s: float) -> Path:
    if output is not None:
        return output
    name = default_name(pid, now_wall_s)
    return Path(name if as_dir else f"{name}.tar.gz")


def _top_name(path: Path) -> str:
    name = path.name
    top = name[: -len(".tar.gz")] if name.endswith(".tar.gz") else name.split(".")[0]
    return top or "snapshot"


def take_snapshot(
    target: Target,
    *,
    window: Window | None = None,
    output: Path | None = None,
    as_dir: bool = False,
    force: bool = False,
    deadline_s: float | None = None,
    wall_clock: Callable[[], float] = time.time,
) -> SnapshotResult:
    """Check the output, gather (the target's window and each process's parts), analyse, write the bundle."""
    t0 = time.monotonic()
    name_pid = target.job.launcher_pid or target.job.asked_pid if target.job is not None else target.pid
    path = output_path(name_pid, output, as_dir, wall_clock())
    # Every check of the destination (and the temporary sibling) before seconds of sampling are spent.
    prepared = prepare_output(path, as_dir=as_dir, force=force)
    try:
        gathered = gather(target, window or Window(), deadline=deadline_s, wall_clock=wall_clock)
        end_wall_s = wall_clock()
        analysis = analyse_target(gathered, end_wall_s)
        observation = observation_file(gathered, analysis)  # before the files: a failure is listed as missing
        if isinstance(analysis, JobAnalysis):
            files = job_files(analysis, gathered.processes, end_wall_s)
        else:
            files = build_files(gathered.processes[0], analysis, end_wall_s)
        if observation is not None:
            files[OBSERVATION_NAME] = observation
    except BaseException:
        prepared.abandon()
        raise
    prepared.commit(files, top=_top_name(path), mtime_s=end_wall_s)
    missing = tuple((f"{_label(gathered, i)}{what}", why) for i, g in enumerate(gathered.processes)
                    for what, why in g.missing)
    return SnapshotResult(path=path, findings=analysis.findings, missing=missing, elapsed_s=time.monotonic() - t0,
                          alive_at_end=any(g.alive_at_end for g in gathered.processes))


def _label(gathered: GatheredTarget, index: int) -> str:
    job = gathered.target.job
    return f"{job.ranks[index].label}: " if job is not None else ""


__all__ = ["SCHEMA", "Gathered", "SnapshotResult", "load_snapshot", "take_snapshot"]
