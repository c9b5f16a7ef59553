"""`dflash-diag snapshot`: a complete, redacted bug-report bundle of a live, hung or dying process.

    result = take_snapshot(pid, output=Path("report.tar.gz"))   # check -o, gather (<= ~2.6 s), analyse, write

Layout (``<name>/`` inside the .tar.gz, or the directory itself with ``as_dir=True``): ``report.md``,
``snapshot.json`` (schema ``dflash-diag.snapshot/1``), ``stacks.txt``, ``board.json``, ``nvml.json``,
``timeline.svg``, ``trace.json`` (a Perfetto / chrome://tracing timeline) and ``MANIFEST.json`` (every file's SHA-256: how ``--force`` recognises a bundle it may
replace). docs/bug-reports.md describes each; docs/security.md what is redacted and what may be replaced.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dflash_diag.model import Finding
from dflash_diag.snapshot.build import SCHEMA, analyse_gathered, build_files
from dflash_diag.snapshot.bundle import default_name, load_snapshot, prepare_output
from dflash_diag.snapshot.gather import DEFAULT_DEADLINE_S, DEFAULT_DURATION_S, Gathered, gather


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
    pid: int,
    *,
    output: Path | None = None,
    as_dir: bool = False,
    force: bool = False,
    duration_s: float = DEFAULT_DURATION_S,
    deadline_s: float = DEFAULT_DEADLINE_S,
    board_dir: str | None = None,
    wall_clock: Callable[[], float] = time.time,
) -> SnapshotResult:
    t0 = time.monotonic()
    path = output_path(pid, output, as_dir, wall_clock())
    # Every check of the destination (and the temporary sibling) before seconds of sampling are spent.
    prepared = prepare_output(path, as_dir=as_dir, force=force)
    try:
        gathered = gather(pid, duration_s=duration_s, deadline_s=deadline_s, board_dir=board_dir, wall_clock=wall_clock)
        end_wall_s = wall_clock()
        analysis = analyse_gathered(gathered, end_wall_s)
        files = build_files(gathered, analysis, end_wall_s)
    except BaseException:
        prepared.abandon()
        raise
    prepared.commit(files, top=_top_name(path), mtime_s=end_wall_s)
    return SnapshotResult(
        path=path,
        findings=analysis.findings,
        missing=tuple(gathered.missing),
        elapsed_s=time.monotonic() - t0,
        alive_at_end=gathered.alive_at_end,
    )


__all__ = ["SCHEMA", "Gathered", "SnapshotResult", "load_snapshot", "take_snapshot"]
