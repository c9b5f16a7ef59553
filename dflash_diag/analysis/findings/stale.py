"""Stale code: sources changed on disk after the running process imported them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from dflash_contract.board import CodedriftKeys, ProbeName
from dflash_diag.analysis.findings._context import Context, items, num
from dflash_diag.model import Finding, Severity

# Name at most this many modules in the claim; the evidence lists a few more.
CLAIM_MODULES = 2
EVIDENCE_MODULES = 6


def check(ctx: Context) -> Iterator[Finding]:
    payload = ctx.probe(ProbeName.CODEDRIFT)
    stale = [s for s in items(payload, CodedriftKeys.STALE) if isinstance(s, Mapping) and isinstance(s.get(CodedriftKeys.MODULE), str)]
    if not stale:
        return
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
    yield Finding(
        rule_id="stale-code",
        severity=Severity.WARNING,
        claim=f"code changed on disk since the process imported it: restart to pick up {shown}",
        evidence=tuple(evidence),
        remedy="The running process still executes the old code. Restart the run to pick up the edit "
        "(or revert the file if the edit was not meant for this run).",
        impact=0.2,
    )
