"""Stale code: the process runs code that is no longer what its files on disk say.

Two sources of evidence:
- the ``codedrift`` probe: modules whose file changed after import (exact, in-process);
- from outside (``sources.outside``): a sampled frame's function is no longer at that line in the file on
  disk (the file was edited: the running code differs from it), or a file of a sampled frame was modified
  after the process started. The first is a measured mismatch (warning); the second alone is a hint (info):
  a touched file may hold the same code.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from dflash_contract.board import CodedriftKeys, ProbeName
from dflash_diag.analysis.findings._context import Context, items, num
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.model import Finding, Severity, SourceLine

# Name at most this many modules in the claim; the evidence lists a few more.
CLAIM_MODULES = 2
EVIDENCE_MODULES = 6
# /proc gives the start time from the boot time in whole seconds: a file written within this margin of the start
# was written before the process could have read it, or at the same time.
START_MARGIN_S = 1.0
# Generated code (inductor's output, triton launchers) is written after start by design: never stale.
_GENERATED = ("torchinductor", "/triton/", "/__pycache__/")
_REMEDY = ("The running process still executes the old code. Restart the run to pick up the edit "
           "(or revert the file if the edit was not meant for this run).")

RULES = (RuleSpec("stale-code", slows=False),)


def check(ctx: Context) -> Iterator[Finding]:
    payload = ctx.probe(ProbeName.CODEDRIFT)
    stale = [s for s in items(payload, CodedriftKeys.STALE) if isinstance(s, Mapping) and isinstance(s.get(CodedriftKeys.MODULE), str)]
    if stale:
        yield _from_probe(payload, stale)
        return
    yield from _from_outside(ctx)


def _from_probe(payload: Mapping[str, object] | None, stale: list[Mapping[str, object]]) -> Finding:
    names = [str(s[CodedriftKeys.MODULE]) for s in stale]
    shown = ", ".join(names[:CLAIM_MODULES]) + (f" and {len(names) - CLAIM_MODULES} more" if len(names) > CLAIM_MODULES else "")
    evidence: list[tuple[str, str]] = [("stale modules", str(len(stale)))]
    for entry in stale[:EVIDENCE_MODULES]:
        mtime = num(entry, CodedriftKeys.MTIME_WALL_S)
        imported = num(entry, CodedriftKeys.IMPORT_WALL_S)
        age = f"changed {mtime - imported:.0f} s after import" if mtime is not None and imported is not None else str(entry.get(CodedriftKeys.HOW, "changed"))
        evidence.append((str(entry.get(CodedriftKeys.FILE) or entry[CodedriftKeys.MODULE]), age))
    checked = num(payload, CodedriftKeys.CHECKED_MODULES)
    if checked is not None:
        evidence.append(("modules checked", f"{checked:.0f}"))
    return Finding(
        rule_id="stale-code",
        severity=Severity.WARNING,
        claim=f"code changed on disk since the process imported it: restart to pick up {shown}",
        evidence=tuple(evidence),
        remedy=_REMEDY,
        impact=0.2,
    )


def _from_outside(ctx: Context) -> Iterator[Finding]:
    start = ctx.obs.process.start_wall_s if ctx.obs.process is not None else None
    frames = _sampled_functions(ctx)
    moved = [(code, name) for code, name in frames if _moved(code, name)]
    # A script another process runs (a server child, started later) is that process's code, not this one's.
    newer = [f for f in ctx.obs.files if not _generated(f.path) and not f.run_by and (
        not f.exists or (start is not None and f.mtime_wall_s is not None and f.mtime_wall_s > start + START_MARGIN_S))]
    if not moved and not newer:
        return
    evidence: list[tuple[str, str]] = []
    for code, name in moved[:EVIDENCE_MODULES]:
        now = f"`{code.function}`" if code.function else ("past the end of the file" if code.text is None else "no function")
        evidence.append((f"{code.filename.rsplit('/', 1)[-1]}:{code.line}", f"runs {name}; on disk that line is in {now}"))
    for f in newer[:EVIDENCE_MODULES]:
        if not f.exists:
            evidence.append((f.path, "deleted since"))
        elif start is not None and f.mtime_wall_s is not None:
            via = f" (imported by {f.imported_by})" if f.imported_by else ""
            evidence.append((f.path, f"modified {f.mtime_wall_s - start:.0f} s after the process started{via}"))
    files = sorted({c.filename.rsplit("/", 1)[-1] for c, _ in moved} | {f.path.rsplit("/", 1)[-1] for f in newer})
    shown = ", ".join(files[:CLAIM_MODULES]) + (f" and {len(files) - CLAIM_MODULES} more" if len(files) > CLAIM_MODULES else "")
    if moved:
        claim = (f"the process runs old code: {moved[0][1]} runs at {moved[0][0].filename.rsplit('/', 1)[-1]}:"
                 f"{moved[0][0].line}, which the file on disk no longer has there; restart to pick up {shown}")
    else:
        claim = f"{shown} changed on disk after the process started: the running code may differ; restart to pick it up"
    yield Finding(
        rule_id="stale-code",
        severity=Severity.WARNING if moved else Severity.INFO,
        claim=claim,
        evidence=tuple(evidence),
        remedy=_REMEDY,
        impact=0.2 if moved else 0.0,
    )


def _sampled_functions(ctx: Context) -> list[tuple[SourceLine, str]]:
    """(what disk says, the function the process runs there) for each distinct sampled program frame."""
    seen: dict[tuple[str, int], tuple[SourceLine, str]] = {}
    for sample in ctx.obs.stacks:
        for thread in sample.threads:
            for frame in thread.frames:
                key = (frame.filename, frame.line)
                if frame.native or key in seen:
                    continue
                code = ctx.code.get(key)
                if code is not None and not _generated(frame.filename):
                    seen[key] = (code, frame.name)
    return list(seen.values())


def _moved(code: SourceLine, running: str) -> bool:
    """The sampled function is not the one the file on disk has at that line (now)."""
    name = running.rsplit(".", 1)[-1]
    if not code.parsed:
        return False  # the file does not parse now: its functions cannot be compared (its mtime still tells)
    if name.startswith("<") and name != "<module>":
        return False  # <lambda>, <listcomp>, <genexpr>: no def of their own to compare
    if code.text is None:
        return True  # the line is past the end of the file now
    if name == "<module>":
        return code.function is not None
    return code.function is None or code.function.rsplit(".", 1)[-1] != name


def _generated(path: str) -> bool:
    return any(g in path for g in _GENERATED)
