"""`dflash-diag snapshot`: a complete, redacted bug-report bundle of a live, hung or dying process.

    result = take_snapshot(pid, output=Path("report.tar.gz"))   # gather (<= ~2.6 s), analyse, write atomically

Layout (``<name>/`` inside the .tar.gz, or the directory itself with ``as_dir=True``): ``report.md``,
``snapshot.json`` (schema ``dflash-diag.snapshot/1``), ``stacks.txt``, ``board.json``, ``nvml.json``,
``timeline.svg``. docs/bug-reports.md describes each.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dflash_diag.model import Finding
from dflash_diag.snapshot.build import SCHEMA, analyse_gathered, build_files
from dflash_diag.snapshot.bundle import default_name, load_snapshot, write_dir, write_tar
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
    now = wall_clock()
    path = output_path(pid, output, as_dir, now)
    if path.exists() and not force:  # fail before spending seconds gathering
        from dflash_diag.snapshot.bundle import _refuse_existing  # noqa: PLC0415

        _refuse_existing(path, force)
    gathered = gather(pid, duration_s=duration_s, deadline_s=deadline_s, board_dir=board_dir, wall_clock=wall_clock)
    end_wall_s = wall_clock()
    analysis = analyse_gathered(gathered, end_wall_s)
    files = build_files(gathered, analysis, end_wall_s)
    if as_dir:
        write_dir(path, files, force=force)
    else:
        top = path.name[: -len(".tar.gz")] if path.name.endswith(".tar.gz") else path.name.split(".")[0]
        write_tar(path, top or "snapshot", files, force=force, mtime_s=end_wall_s)
    return SnapshotResult(
        path=path,
        findings=analysis.findings,
        missing=tuple(gathered.missing),
        elapsed_s=time.monotonic() - t0,
        alive_at_end=gathered.alive_at_end,
    )


__all__ = ["SCHEMA", "Gathered", "SnapshotResult", "load_snapshot", "take_snapshot"]
