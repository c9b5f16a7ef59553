"""The job rules' claims from the job's mailbox: every rank on every node, as its probes posted it
(``analysis.mailbox``). The same rules as ``findings.job`` (``collective-hang``, ``rank-straggler``, ``rank-died``),
said for ranks this machine cannot sample: the job rules call these when a mailbox was read, and the mailbox's
view of the whole job wins over the ranks seen here (a rank here waiting all window is not a hang when a rank
elsewhere completed collectives in it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dflash_diag.analysis.findings._context import pct
from dflash_diag.model import Finding, Severity
from dflash_diag.model.findings import CAUSE, SYMPTOM
from dflash_diag.model.mailbox import MailboxVerdict, RemoteRank

SHOWN = 4


def rank_label(row: RemoteRank | None, rank: int) -> str:
    if row is None:
        return f"rank {rank}"
    node = f"node {row.node_rank}" if row.node_rank is not None else "node ?"
    host = f", host {row.host}" if row.host else ""
    pid = f", PID {row.pid}" if row.pid is not None else ""
    return f"rank {rank} ({node}{host}{pid})"


def _ranks(ranks: Sequence[int]) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    shown = ", ".join(str(r) for r in ranks[:8])
    more = f" and {len(ranks) - 8} more" if len(ranks) > 8 else ""
    return f"ranks {shown}{more}"


def _doing(row: RemoteRank | None) -> str:
    if row is None:
        return "it posted nothing"
    return f"its {row.where}" if row.where else "no stack came from it"


def _silence(row: RemoteRank | None) -> str:
    if row is None or row.silent_s is None:
        return "it never posted to the job's mailbox"
    if row.final:
        return f"its probes closed {row.silent_s:.0f} s ago (the program exited)"
    return f"its last post is {row.silent_s:.0f} s old and it answered no request"


def hang_finding(v: MailboxVerdict) -> Finding | None:
    hang = v.hang
    if hang is None:
        return None
    evidence: list[tuple[str, str]] = []
    if hang.mismatched:
        # Every member entered #seq, each its own operation: they never match, so none completes.
        said = [f"{_ranks(ranks)} in {op}" for op, ranks in hang.mismatched]
        parts = [f"the ranks called different collectives as #{hang.seq} of group {hang.group}: " + ", ".join(said)
                 + f", waiting since {hang.waiting_since_s:.0f} s (their Flight Recorders)"]
        for op, ranks in hang.mismatched:
            for rank in ranks[:SHOWN]:
                row = v.rank(rank)
                evidence.append((rank_label(row, rank), f"in {op} #{hang.seq}; {_doing(row)}"))
    else:
        parts = [f"{_ranks(hang.waiting_ranks)} {'wait' if len(hang.waiting_ranks) > 1 else 'waits'} in {hang.op} "
                 f"#{hang.seq} of group {hang.group} since {hang.waiting_since_s:.0f} s (their Flight Recorders)"]
    for rank in hang.missing_ranks[:SHOWN]:
        row = v.rank(rank)
        parts.append(f"{rank_label(row, rank)} never entered it: {_doing(row)}")
        evidence.append((rank_label(row, rank), f"never entered {hang.op} #{hang.seq}; {_doing(row)}"))
    for rank in hang.silent_ranks[:SHOWN]:
        row = v.rank(rank)
        parts.append(f"{rank_label(row, rank)} never entered it and fell silent")
        evidence.append((rank_label(row, rank), _silence(row)))
    for rank in () if hang.mismatched else hang.waiting_ranks[:SHOWN]:
        row = v.rank(rank)
        evidence.append((rank_label(row, rank), f"in {hang.op} #{hang.seq}, no collective completed in the window"))
    evidence.append(("read through", f"the job's store at {v.address}, {len(v.ranks)} ranks"))
    return Finding(
        rule_id="collective-hang", severity=Severity.CRITICAL,
        claim="the job is hung in a collective: " + "; ".join(parts),
        evidence=tuple(evidence),
        remedy="Make every rank reach the same collective calls in the same order; the rank that never entered it "
               "waits on something of its own (its stack above). Set a timeout in init_process_group so a hang "
               "fails loudly instead of holding every node.",
        impact=1.0, kind=SYMPTOM)


def straggler_finding(v: MailboxVerdict) -> Finding | None:
    st = v.straggler
    if st is None:
        return None
    row = v.rank(st.rank)
    label = rank_label(row, st.rank)
    their = "their" if len(st.others) > 1 else "its"
    claim = (f"{label} is the straggler: {_ranks(st.others)} {'wait' if len(st.others) > 1 else 'waits'} in "
             f"collective calls {pct(st.others_wait_share)} of {their} time for it, while it waits "
             f"{pct(st.wait_share)}; {_doing(row)}")
    evidence = [(label, f"{pct(st.wait_share)} of its time in collectives (its probe, its own clock); {_doing(row)}")]
    for rank in st.others[:SHOWN]:
        other = v.rank(rank)
        share = other.wait_share if other is not None and other.wait_share is not None else 0.0
        evidence.append((rank_label(other, rank), f"{pct(share)} of its time in collectives"))
    evidence.append(("read through", f"the job's store at {v.address}, {len(v.ranks)} ranks"))
    return Finding(
        rule_id="rank-straggler", severity=Severity.WARNING, claim=claim, evidence=tuple(evidence),
        remedy=f"Speed up rank {st.rank} where its time goes (run dflash-diag doctor on its node for its hot code), "
               "or even out the work per rank: every other rank idles in its collectives until it arrives.",
        impact=st.others_wait_share, kind=SYMPTOM)


def died_finding(v: MailboxVerdict, *, hung: bool, here: Mapping[int, str] | None = None) -> Finding | None:
    """``here``: the silent ranks that run on this machine, with what /proc says of them ("stopped (SIGSTOP/SIGTSTP)",
    "exited"): then that is the claim, not a guess."""
    if not v.dead_ranks:
        return None
    here = here or {}
    lines = [f"{rank_label(v.rank(r), r)}: {_silence(v.rank(r))}"
             + (f"; on this machine its process is {here[r]}" if r in here else "") for r in v.dead_ranks[:SHOWN]]
    unknown = [r for r in v.dead_ranks if r not in here]
    why = (" (it exited, was killed, or is frozen with the GIL held: its node's launcher log or `dflash-diag doctor` "
           "on that node says which)") if unknown else ""
    claim = ("a rank stopped: " if len(v.dead_ranks) == 1 else f"{len(v.dead_ranks)} ranks stopped: ") \
        + "; ".join(lines) + why
    if hung:
        claim += " -- the other ranks wait for it"
    return Finding(
        rule_id="rank-died", severity=Severity.CRITICAL, claim=claim,
        evidence=tuple(("silent", line) for line in lines) + (("read through", f"the job's store at {v.address}"),),
        remedy="Look at the silent rank's node: its launcher's log (a traceback, an exit code, the OOM killer in "
               "dmesg) or, if it still runs, `dflash-diag doctor` on it.",
        impact=1.0, kind=CAUSE)


def judged(v: MailboxVerdict | None) -> bool:
    """Whether the mailbox saw the whole job move: then a hang seen only among this machine's ranks is not one."""
    return v is not None and v.job_moved
