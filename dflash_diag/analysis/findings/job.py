"""A job of several ranks, judged across its ranks: the rank the others wait for, a collective that never
completes and the rank that never entered it, ranks that call different collectives, a rank that died.

Every rank of a data-parallel job makes the same collective calls in the same order; a rank in ``all_reduce``
waits until every peer has entered it. So, over one window of every rank (``analysis.job``'s rows):

- ``rank-straggler``: every rank but one waits in the same collective for a large share of its time, and that one
  rank waits far less: the others wait for it. The claim names it and where its time goes (its hot code, or
  its own wait: its data-loader workers).
- ``rank-uneven-input``: the straggler spends its time in the same code as its peers, only longer: more input on
  that rank (a larger shard, longer sequences), or a slower core.
- ``collective-hang``: no rank moves: ranks sit in one collective for the whole window, and the others are not in
  it: parked elsewhere, in another collective, or gone. With the ``collectives`` probe: the sequence number of
  the collective the waiting ranks are in, and the rank that never entered it.
- ``collective-mismatch``: at the hang, ranks are in different collectives (a ``barrier`` only rank 0 calls).
- ``rank-died``: a rank exited during the window or is missing (the launcher started LOCAL_WORLD_SIZE ranks),
  or the launcher restarted the group after a rank failed (its stderr names the rank and exit code).

Only ranks on this machine are seen: when every local rank waits, the rank they wait for runs elsewhere.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property

import dflash_diag.analysis.findings.crossnode as crossnode
from dflash_diag.analysis.collectives import collective_op
from dflash_diag.analysis.findings._context import JobContext, pct
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.hotspots import NOT_WORK, charge_frame
from dflash_diag.analysis.ranks import rank_rows, ranks_text
from dflash_diag.analysis.sched import summary_of
from dflash_diag.model import Finding, Severity
from dflash_diag.model.findings import CAUSE, SYMPTOM
from dflash_diag.model.job import RankSummary
from dflash_diag.model.mailbox import MailboxVerdict
from dflash_diag.model.sched import SchedSummary
from dflash_diag.model.waits import WaitGraph, edge_text

MIN_SAMPLES = 8  # a rank with fewer stack samples says nothing about its shares
MIN_WINDOW_S = 2.0
WAIT_SHARE = 0.30  # each waiting rank loses at least this share of its time in the collective: a measured cost
GAP = 0.25  # ... and the straggler waits at least this much less than their mean, and at most half of it
HANG_SHARE = 0.90  # in one collective (or parked on one wait) for the whole window, give or take a sample
SAME_WORK_SHARE = 0.03  # the straggler's hottest function takes at least this share of its peers' time: the same code
MIN_SAME_WORK_SAMPLES = 2  # ... seen in at least this many of their samples, pooled
SAME_WORK_RATIO = 1.5  # ... and it takes the straggler at least this many times their share
DEATHS_SHOWN = 4
# torchrun's report of a failed rank on its stderr, and the rank's own exception line ("[rank1]: ValueError: ...").
_FAILED = re.compile(r"failed \(exitcode: (-?\d{1,4})\) local_rank: (\d{1,6}) \(pid: (\d{1,8})\)")
_RANK_ERROR = re.compile(r"^\[(?:default)?rank(\d{1,6})\]: ([A-Za-z_][\w.]{0,80}(?:Error|Exception|Interrupt)\b.{0,200})$")
_RESTART = re.compile(r"(\d{1,6})/(\d{1,6}) attempts left; will restart worker group")

RULES = (
    RuleSpec("collective-hang", kind=SYMPTOM, sampled=True, hang=True, halts=True),
    RuleSpec("rank-straggler", kind=SYMPTOM, sampled=True),
    RuleSpec("rank-uneven-input", sampled=True),
    RuleSpec("collective-mismatch", slows=False, explains=("collective-hang",)),
    RuleSpec("rank-died", slows=False, explains=("collective-hang",)),
)


@dataclass(frozen=True)
class JobJudgement(JobContext):
    """The job's window (``findings._context.JobContext``) and what the rules find in it, each found once.
    ``mailbox``: every rank on every node as its probes posted it (``analysis.mailbox``; None: not read), judged
    once by the job's analysis, which reports it too."""

    mailbox: MailboxVerdict | None = None

    @cached_property
    def sampled(self) -> tuple[RankSummary, ...]:
        """Ranks with enough samples, alive over the window."""
        return tuple(s for s in self.summaries if s.alive and s.n_samples >= MIN_SAMPLES)

    @cached_property
    def hang(self) -> _Hang | None:
        if crossnode.judged(self.mailbox):
            return None  # a rank elsewhere completed collectives in the window: the ranks here wait for it
        return _find_hang(self)

    @cached_property
    def straggler(self) -> _Straggler | None:
        return None if self.hang is not None else _find_straggler(self)

    @cached_property
    def deaths(self) -> _Deaths:
        return _find_deaths(self)

    def culprits(self) -> set[int]:
        """PIDs of the ranks the job's findings name (the straggler, the ranks not in the hung collective)."""
        out: set[int] = set()
        if self.hang is not None:
            out |= {s.identity.pid for s in self.hang.elsewhere}
        if self.straggler is not None:
            out.add(self.straggler.slow.identity.pid)
        return out


def check(ctx: JobJudgement) -> Iterator[Finding]:
    if len(ctx.summaries) < 1:
        return
    deaths = ctx.deaths
    mail = ctx.mailbox
    if mail is not None and (mail.hang is not None or mail.dead_ranks):
        # The whole job's view: the Flight Recorders name the rank that never entered, wherever it runs.
        yield from _crossnode_findings(ctx, mail)
        return
    hang = ctx.hang
    if hang is not None:
        yield _hang_finding(ctx, hang, deaths)
        if hang.mismatch:
            yield _mismatch_finding(ctx, hang)
    if hang is None or not hang.mismatch:
        shifted = _sequence_mismatch(ctx)
        if shifted is not None:
            yield shifted
    straggler = ctx.straggler
    remote = mail.straggler if mail is not None else None
    if remote is not None and (straggler is None or straggler.slow.identity.rank != remote.rank):
        # The straggler over every node (the ranks here may all be waiting for it); the local finding says more
        # (its hot code) when it names the same rank.
        found = crossnode.straggler_finding(mail)  # type: ignore[arg-type]
        if found is not None:
            yield found
        straggler = None
    if straggler is not None:
        yield _straggler_finding(ctx, straggler)
        uneven = _uneven(ctx, straggler)
        if uneven is not None:
            yield uneven
    if deaths.any:
        yield _died_finding(ctx, deaths, hung=hang is not None)


def _crossnode_findings(ctx: JobJudgement, mail: MailboxVerdict) -> Iterator[Finding]:
    """A hang or a silent rank seen through the mailbox, with what this machine saw of its own ranks' deaths."""
    died = crossnode.died_finding(mail, hung=mail.hang is not None, here=_local_states(ctx, mail.dead_ranks))
    if died is not None:
        yield died
    hang = crossnode.hang_finding(mail)
    if hang is not None:
        yield hang
    if died is None and ctx.deaths.any:
        yield _died_finding(ctx, ctx.deaths, hung=mail.hang is not None)


def _local_states(ctx: JobJudgement, ranks: Sequence[int]) -> dict[int, str]:
    """What /proc says of the silent ranks that run here (by global rank)."""
    out: dict[int, str] = {}
    for summary, obs in zip(ctx.summaries, ctx.job.ranks, strict=False):
        rank = summary.identity.rank
        if rank not in ranks:
            continue
        if not summary.alive:
            out[rank] = f"gone (PID {summary.identity.pid} exited)"
        elif obs.process is not None and obs.process.state:
            out[rank] = f"{obs.process.state_name} (PID {summary.identity.pid}, state {obs.process.state})"
    return out


# --- the hang ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Hang:
    waiting: tuple[RankSummary, ...]  # in the collective most ranks are in, all window
    elsewhere: tuple[RankSummary, ...]  # sampled ranks not in it: parked elsewhere or in another collective
    op: str
    site: str
    mismatch: tuple[RankSummary, ...]  # of ``elsewhere``: in another collective
    seq: int | None  # the probe's sequence number of the collective the waiting ranks are in


def _stuck(s: RankSummary) -> bool:
    """The rank's training thread sat in one collective call, at one place, for the whole window."""
    if s.collective is None or s.collective_share < HANG_SHARE or s.collective.share < HANG_SHARE:
        return False
    return s.probe is None or not s.probe.entered_in_window  # the probe saw no new call in the window


def _parked(ctx: JobJudgement, s: RankSummary) -> bool:
    """The rank does not move: its wait-for graph saw no progress, or its training thread waited on one thing
    (not a collective) all window."""
    analysis = ctx.analysis_of(s)
    graph = analysis.waits if analysis is not None else None
    if not isinstance(graph, WaitGraph):
        return False
    if not graph.progress:
        return True
    node = next((n for n in graph.threads if n.name == s.thread), None)
    return node is not None and bool(node.waits) and node.waits[0].share >= HANG_SHARE and not node.stack_changed


def _find_hang(ctx: JobJudgement) -> _Hang | None:
    window = ctx.job.window_s
    sampled = ctx.sampled
    if window < MIN_WINDOW_S or not sampled:
        return None
    stuck = [s for s in sampled if _stuck(s)]
    if not stuck:
        return None
    rest = [s for s in sampled if s not in stuck]
    if any(not _parked(ctx, s) for s in rest):
        return None  # a rank still works: the waiting ranks wait for it (the straggler rule's case)
    groups = Counter((s.collective.op, s.collective.site) for s in stuck if s.collective is not None)
    (op, site), _ = groups.most_common(1)[0]
    waiting = tuple(s for s in stuck if s.collective is not None and (s.collective.op, s.collective.site) == (op, site))
    other_coll = tuple(s for s in stuck if s not in waiting)
    if len(sampled) == 1 and not ctx.deaths.any and not ctx.job.topology.notes:
        return None  # one rank alone in a collective: nothing here says for whom (its own analysis says where)
    seqs = Counter(s.probe.current_seq for s in waiting
                   if s.probe is not None and s.probe.current_seq is not None and s.probe.from_start)
    seq = seqs.most_common(1)[0][0] if seqs else None
    return _Hang(waiting=waiting, elsewhere=tuple(rest) + other_coll, op=op, site=site, mismatch=other_coll, seq=seq)


def _hang_finding(ctx: JobJudgement, hang: _Hang, deaths: _Deaths) -> Finding:
    window = ctx.job.window_s
    at = f" at {hang.site}" if hang.site else ""
    numbered = f" (collective #{hang.seq})" if hang.seq is not None else ""
    parts = [f"{_who(hang.waiting)} {_verb('wait', hang.waiting)} in {hang.op}{numbered}{at} for the whole "
             f"{window:.1f} s window"]
    evidence: list[tuple[str, str]] = [(s.identity.label, _waits_text(s)) for s in hang.waiting]
    for s in hang.elsewhere:
        parts.append(f"{s.identity.label} never entered it: {_elsewhere_text(ctx, s, hang)}")
        evidence.append((s.identity.label, _elsewhere_text(ctx, s, hang)))
    for line in deaths.lines[:DEATHS_SHOWN]:
        evidence.append(("died", line))
    if not hang.elsewhere:
        if deaths.any:
            parts.append("the rank they wait for is gone: " + deaths.lines[0])
        else:
            parts.append(_remote_text(ctx))
    for s in hang.waiting + hang.elsewhere:
        if s.cpu_pct is not None:
            evidence.append((f"{s.identity.label} CPU over the window", f"{s.cpu_pct:.1f}% of one core"))
    return Finding(
        rule_id="collective-hang", severity=Severity.CRITICAL,
        claim="the job is hung in a collective: " + "; ".join(parts),
        evidence=tuple(evidence),
        remedy="Make every rank reach the same collective calls in the same order: a collective inside `if rank == "
               "0:` (a checkpoint helper that calls barrier), a rank that skips a batch, or a rank stuck before the "
               "call (its stack above) hangs the others. Set a timeout in init_process_group (the default is 10-30 "
               "min) and TORCH_NCCL_ASYNC_ERROR_HANDLING / TORCH_DISTRIBUTED_DEBUG=DETAIL to fail loudly.",
        impact=1.0, kind=SYMPTOM)


def _remote_text(ctx: JobJudgement) -> str:
    world = ctx.job.topology.world_size
    here = len(ctx.job.topology.ranks)
    if world is not None and world > here:
        return (f"every rank on this machine is in it, so the rank they wait for runs elsewhere ({world - here} of "
                f"WORLD_SIZE {world} are not here): run dflash-diag on the other nodes")
    return "every rank is in it and none is missing here: a rank may have left it without the others seeing it"


def _waits_text(s: RankSummary) -> str:
    c = s.collective
    where = f" at {c.site}" if c is not None and c.site else ""
    probe = ""
    if s.probe is not None:
        probe = f"; collective #{s.probe.current_seq}" if s.probe.current_seq is not None else ""
        if s.probe.current_for_s is not None:
            probe += f", in it for {s.probe.current_for_s:.0f} s"
    return f"in {c.op if c else '?'}{where} {pct(s.collective_share)} of {s.n_samples} samples{probe}"


def _elsewhere_text(ctx: JobJudgement, s: RankSummary, hang: _Hang) -> str:
    if s in hang.mismatch and s.collective is not None:
        text = f"it waits in another collective, {s.collective.op} at {s.collective.site or '?'}"
    else:
        text = _own_wait(ctx, s)
    if s.probe is not None and s.probe.from_start and hang.seq is not None:
        if s.probe.current_seq == hang.seq and s.probe.current_op and s.probe.current_op != hang.op:
            text += f" (its collective #{hang.seq} is {s.probe.current_op})"
        elif s.probe.entered < hang.seq:
            text += f" (it entered {s.probe.entered} collectives; the others are in #{hang.seq})"
    return text


def _own_wait(ctx: JobJudgement, s: RankSummary) -> str:
    """What the rank's training thread does instead: computes (where), or its largest wait (where), or where it is."""
    analysis = ctx.analysis_of(s)
    graph = analysis.waits if analysis is not None else None
    node = next((n for n in graph.threads if n.name == s.thread), None) if isinstance(graph, WaitGraph) else None
    if node is not None and node.computing_share >= 0.5 and node.hot:
        return f"its {s.thread} computes: {node.hot}"
    if node is not None and node.waits:
        return f"its {s.thread} {edge_text(node.waits[0])}"
    return f"its {s.thread or 'main thread'} is at {s.where}" if s.where else "no stack of its own code was seen"


def _verb(verb: str, ranks: Sequence[RankSummary]) -> str:
    """``wait`` for several ranks, ``waits`` for one."""
    return verb if len(ranks) > 1 else verb + "s"


def _who(ranks: Sequence[RankSummary]) -> str:
    if len(ranks) == 1:
        return ranks[0].identity.label
    return "ranks " + ranks_text([s.identity.rank for s in ranks], [s.identity.pid for s in ranks])


# --- the mismatch ------------------------------------------------------------------------------------------------


def _mismatch_finding(ctx: JobJudgement, hang: _Hang) -> Finding:
    others = "; ".join(f"{s.identity.label} in {s.collective.op} at {s.collective.site or '?'}"
                       for s in hang.mismatch if s.collective is not None)
    claim = (f"the ranks call different collectives: {_who(hang.waiting)} in {hang.op} at {hang.site or '?'}, "
             f"{others}: a collective only some ranks make (under an `if rank ...`, or skipped on one rank)")
    evidence = [(s.identity.label, _waits_text(s)) for s in hang.waiting + hang.mismatch]
    return Finding(rule_id="collective-mismatch", severity=Severity.CRITICAL, claim=claim, evidence=tuple(evidence),
                   remedy="Call every collective on every rank, in the same order: move the collective out of the "
                          "rank-specific branch (or give the other ranks the same call); TORCH_DISTRIBUTED_DEBUG=DETAIL "
                          "makes mismatched collectives raise with both call sites.",
                   impact=1.0, kind=CAUSE)


def _sequence_mismatch(ctx: JobJudgement) -> Finding | None:
    """With the probes: at one sequence number, ranks made different collective calls. Their sequences no longer
    line up: a rank skipped (or added) a collective, and from there on every call pairs with the wrong one."""
    by_seq: dict[int, dict[str, list[RankSummary]]] = {}
    for s in ctx.summaries:  # only numbers that count every call of their rank compare across ranks
        for seq, op in s.probe.recent if s.probe is not None and s.probe.from_start else ():
            by_seq.setdefault(seq, {}).setdefault(op, []).append(s)
    differ = sorted(seq for seq, ops in by_seq.items() if len(ops) > 1)
    if not differ:
        return None
    seq = differ[0]
    groups = sorted(by_seq[seq].items(), key=lambda kv: (-len(kv[1]), kv[0]))
    parts = [f"{_who(ranks)} made {op}" for op, ranks in groups]
    claim = (f"the ranks' collective calls no longer line up: at collective #{seq} " + ", ".join(parts)
             + f" ({len(differ)} of the numbers both sides saw differ): a rank skipped or added a collective, so "
             "each call now pairs with another rank's different one (wrong results, or a hang at the next mismatch)")
    evidence = [(f"collective #{n}", "; ".join(f"{_who(r)}: {op}" for op, r in sorted(by_seq[n].items())))
                for n in differ[:4]]
    return Finding(rule_id="collective-mismatch", severity=Severity.CRITICAL, claim=claim, evidence=tuple(evidence),
                   remedy="Make every rank make the same collective calls in the same order (a rank that skips a "
                          "batch must still join its all_reduce, or every rank skips it); "
                          "TORCH_DISTRIBUTED_DEBUG=DETAIL checks each call's operation and shapes across ranks.",
                   impact=1.0, kind=CAUSE)


# --- the straggler -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Straggler:
    slow: RankSummary
    waiting: tuple[RankSummary, ...]
    op: str
    site: str


def _find_straggler(ctx: JobJudgement) -> _Straggler | None:
    sampled = [s for s in ctx.sampled if s.collective_share is not None]
    if len(sampled) < 2 or ctx.job.window_s < MIN_WINDOW_S:
        return None
    slow = min(sampled, key=lambda s: (s.collective_share, -s.computing_share))
    waiting = [s for s in sampled if s is not slow]
    if min(s.collective_share for s in waiting) < WAIT_SHARE:
        return None
    # Against the waiting ranks' mean: one rank's share of ~30 samples moves by +-9 points from window to window.
    mean_wait = sum(s.collective_share for s in waiting) / len(waiting)
    if mean_wait - slow.collective_share < GAP or slow.collective_share > mean_wait / 2:
        return None
    ops = Counter(s.collective.op for s in waiting if s.collective is not None)
    if not ops:
        return None
    op, count = ops.most_common(1)[0]
    if count < len(waiting):
        return None  # "every rank but one waits in the same collective"
    sites = Counter(s.collective.site for s in waiting if s.collective is not None)
    return _Straggler(slow=slow, waiting=tuple(waiting), op=op, site=sites.most_common(1)[0][0])


def _straggler_finding(ctx: JobJudgement, st: _Straggler) -> Finding:
    slow = st.slow
    mean_wait = sum(s.collective_share for s in st.waiting) / len(st.waiting)
    at = f" at {st.site}" if st.site else ""
    where = _time_goes(ctx, slow)
    their = "their" if len(st.waiting) > 1 else "its"
    claim = (f"{slow.identity.label} is the straggler: {_who(st.waiting)} {_verb('wait', st.waiting)} for it in "
             f"{st.op}{at} {pct(mean_wait)} of {their} time, while {slow.identity.label} waits "
             f"{pct(slow.collective_share)} and {where}")
    cpu = _cpu_wait(ctx, st)
    if cpu is not None:
        own, peers, thread, cause = cpu
        claim += (f"; its {thread} waited for a CPU {pct(own)} of the window (the waiting ranks' {pct(peers)}): the "
                  "CPUs it runs on hold it back, not only its code")
        if cause:
            claim += f" ({cause})"
    evidence: list[tuple[str, str]] = [(f"{slow.identity.label} (PID {slow.identity.pid})", where)]
    if cpu is not None:
        evidence.append((f"{slow.identity.label}'s {cpu[2]} waiting for a CPU (/proc run delay)",
                         f"{pct(cpu[0])} of the window; the waiting ranks' training threads {pct(cpu[1])}"))
    evidence += [(f"{s.identity.label} (PID {s.identity.pid})", _waits_text(s)) for s in st.waiting]
    evidence.append((f"{slow.identity.label} in collectives", f"{pct(slow.collective_share)} of {slow.n_samples} samples"))
    if slow.probe is not None and slow.probe.in_collectives_s is not None:
        evidence.append((f"{slow.identity.label} time in collectives (probe)", f"{slow.probe.in_collectives_s:.1f} s"))
    return Finding(
        rule_id="rank-straggler", severity=Severity.WARNING, claim=claim, evidence=tuple(evidence),
        remedy=f"Speed up {slow.identity.label} where its time goes (above), or even out the work per rank: every "
               f"other rank idles in {st.op} until it arrives, so the job runs at {slow.identity.label}'s pace.",
        impact=mean_wait, kind=SYMPTOM)


# The straggler's training thread waited for a CPU this share of the window, and this much more than the waiting
# ranks' did: the machine (a crowded or throttled CPU set, a lowered priority) slows it, whatever its code does.
CPU_WAIT_SHARE = 0.20
CPU_WAIT_GAP = 0.10
# The straggler's own findings that say why its threads wait for a CPU.
_CPU_CAUSES = ("thread-deprioritized", "cpu-throttled", "cpu-affinity-narrow", "cpu-oversubscribed")


def _thread_run_delay(ctx: JobJudgement, s: RankSummary) -> float | None:
    """The share of the window the rank's training thread was runnable but waiting for a CPU (/proc schedstat)."""
    analysis = ctx.analysis_of(s)
    if analysis is None:
        return None
    summary = summary_of(analysis.observation)
    if not isinstance(summary, SchedSummary):
        return None
    row = next((t for t in summary.threads if t.python and t.name == s.thread), None)
    return row.runq_share if row is not None else None


def _cpu_wait(ctx: JobJudgement, st: _Straggler) -> tuple[float, float, str, str] | None:
    """(the straggler's run delay, the waiting ranks' mean, its thread, the rank's own finding that says why) when
    the straggler waits for a CPU markedly more than the ranks that wait for it."""
    own = _thread_run_delay(ctx, st.slow)
    peers = [d for d in (_thread_run_delay(ctx, s) for s in st.waiting) if d is not None]
    if own is None or not peers:
        return None
    mean = sum(peers) / len(peers)
    if own < CPU_WAIT_SHARE or own - mean < CPU_WAIT_GAP:
        return None
    analysis = ctx.analysis_of(st.slow)
    found = [f for f in analysis.findings if f.rule_id in _CPU_CAUSES] if analysis is not None else []
    cause = f"{found[0].rule_id}: {found[0].claim}" if found else ""
    return own, mean, st.slow.thread, cause


def _time_goes(ctx: JobJudgement, s: RankSummary) -> str:
    """Where the straggler's time goes: its hot code, or its own wait (its data-loader workers, a lock)."""
    analysis = ctx.analysis_of(s)
    graph = analysis.waits if analysis is not None else None
    if isinstance(graph, WaitGraph):
        node = next((n for n in graph.threads if n.name == s.thread), None)
        if node is not None and node.waits and node.waits[0].kind != "collective" \
                and node.waits[0].share > s.computing_share and graph.chain:
            return "its " + s.thread + " " + graph.chain_text().split(" ", 1)[-1].replace(" <- ", " <- ", 1)
    if s.hot:
        return f"spends its time in {s.hot}"
    return f"computes {pct(s.computing_share)} of its time" + (f" (at {s.where})" if s.where else "")


def _uneven(ctx: JobJudgement, st: _Straggler) -> Finding | None:
    """The straggler works in the functions its peers work in too, only longer: most of its work is in functions
    its peers run (their samples pooled: each peer alone has few samples outside the collective), and that work
    takes it at least 1.5 times their share. A straggler whose time goes to work of its own (a metrics refresh only
    it does) is no uneven input: its shared work is a small part of what it does."""
    slow_counts, slow_total = _function_counts(ctx, st.slow)
    pooled: Counter[tuple[str, str, int]] = Counter()
    pooled_total = 0
    per_peer: list[tuple[RankSummary, Counter[tuple[str, str, int]], int]] = []
    for s in st.waiting:
        counts, total = _function_counts(ctx, s)
        pooled.update(counts)
        pooled_total += total
        per_peer.append((s, counts, total))
    shared = [f for f in slow_counts if pooled[f] > 0]
    if not slow_total or not pooled_total or not shared:
        return None
    slow_work = sum(slow_counts.values()) / slow_total
    slow_shared = sum(slow_counts[f] for f in shared) / slow_total
    hits = sum(pooled[f] for f in shared)
    peers = hits / pooled_total
    if (hits < MIN_SAME_WORK_SAMPLES or peers < SAME_WORK_SHARE or slow_shared < SAME_WORK_RATIO * peers
            or slow_shared < slow_work / 2):
        return None
    names = ", ".join(f"{name} ({filename.rsplit('/', 1)[-1]})"
                      for name, filename, _ in sorted(shared, key=lambda f: -slow_counts[f])[:2])
    claim = (f"{st.slow.identity.label} does more of the same work than its peers: {pct(slow_shared)} of its time in "
             f"{names}, against {pct(peers)} on {_who(st.waiting)}: uneven per-rank input (a larger shard, longer "
             "sequences, more tokens per batch) or a slower core")
    evidence = [(st.slow.identity.label, f"{pct(slow_shared)} in the work its peers do too, {pct(slow_work)} working")]
    evidence += [(s.identity.label, f"{pct(sum(c[f] for f in shared) / t if t else 0.0)} in that work")
                 for s, c, t in per_peer]
    return Finding(rule_id="rank-uneven-input", severity=Severity.WARNING, claim=claim, evidence=tuple(evidence),
                   remedy="Balance the input per rank: a DistributedSampler (drop_last, or pad), bucket sequences by "
                          "length across ranks, or split by tokens rather than by samples; if the input is even, "
                          "compare the ranks' CPU or GPU (clocks, throttling, another job on it).",
                   impact=max(0.0, slow_shared - peers), kind=CAUSE)


def _function_counts(ctx: JobJudgement, s: RankSummary) -> tuple[Counter[tuple[str, str, int]], int]:
    """Samples of the rank's training thread charged to each function while it works outside a collective, and the
    thread's samples in all."""
    analysis = ctx.analysis_of(s)
    obs = next((o for o, x in zip(ctx.job.ranks, ctx.summaries, strict=True) if x is s), None)
    if analysis is None or obs is None:
        return Counter(), 0
    rows = rank_rows(obs, analysis).get(s.thread, [])
    counts: Counter[tuple[str, str, int]] = Counter()
    for thread, state in rows:
        if state in NOT_WORK or collective_op(thread, obs.line_text) is not None:
            continue
        frame = charge_frame(thread)
        if frame is not None:
            counts[(frame.name, frame.filename, 0)] += 1
    return counts, len(rows)


# --- deaths ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Deaths:
    lines: tuple[str, ...]  # what was seen, one line each
    exited: tuple[str, ...]  # ranks that exited in the window or are missing
    restarts: int | None
    max_restarts: int | None

    @property
    def any(self) -> bool:
        return bool(self.exited) or bool(self.restarts)


def _find_deaths(ctx: JobJudgement) -> _Deaths:
    topo = ctx.job.topology
    lines: list[str] = []
    exited: list[str] = []
    for s in ctx.summaries:
        if not s.alive:
            exited.append(s.identity.label)
            when = "during the window" if s.exited else "before it could be sampled"
            lines.append(f"{s.identity.label} (PID {s.identity.pid}) exited {when}")
    if ctx.job.launcher_alive:
        for local in topo.missing_local_ranks:
            exited.append(f"local rank {local}")
            lines.append(f"local rank {local} is gone: the launcher (PID {topo.launcher_pid}) started "
                         f"{topo.local_world_size} ranks here, {len(topo.ranks)} run")
    failures, errors, left = _launcher_report(ctx)
    for local, code, pid in failures[-DEATHS_SHOWN:]:
        error = errors.get(local)
        lines.append(f"local rank {local} (PID {pid}) failed with exit code {code}" + (f": {error}" if error else ""))
    restarts = topo.restart_count
    ranks = topo.ranks
    max_restarts = max((r.max_restarts for r in ranks if r.max_restarts is not None), default=None)
    if restarts:
        allowed = f" of {max_restarts} allowed" if max_restarts is not None else ""
        lines.append(f"the launcher restarted the group {restarts} time(s){allowed}"
                     + (f" ({left} attempts left)" if left is not None else ""))
    return _Deaths(lines=tuple(lines), exited=tuple(exited), restarts=restarts or None, max_restarts=max_restarts)


def _launcher_report(ctx: JobJudgement) -> tuple[list[tuple[int, int, int]], dict[int, str], int | None]:
    """From the launcher's stderr (when it goes to a file): each failed local rank (rank, exit code, PID), each rank's
    last exception line, and the attempts left."""
    facts = ctx.job.launcher
    tail = facts.stderr_tail if facts is not None else None
    if not tail:
        return [], {}, None
    failures = [(int(m[2]), int(m[1]), int(m[3])) for m in _FAILED.finditer(tail)]
    errors: dict[int, str] = {}
    left: int | None = None
    for line in tail.splitlines():
        m = _RANK_ERROR.match(line.strip())
        if m is not None:
            errors[int(m[1])] = m[2][:200]
        r = _RESTART.search(line)
        if r is not None:
            left = int(r[1])
    # torchrun names local ranks; with one node, the rank's exception line is its global rank: the same number.
    return failures, errors, left


def _died_finding(ctx: JobJudgement, deaths: _Deaths, *, hung: bool) -> Finding:
    if deaths.exited:
        severity = Severity.CRITICAL
        claim = ("a rank died: " if len(deaths.exited) == 1 else f"{len(deaths.exited)} ranks died: ") \
            + "; ".join(deaths.lines[:3])
    else:
        severity = Severity.WARNING
        claim = "a rank died and the launcher restarted the group: " + "; ".join(deaths.lines[:3])
    if hung:
        claim += " -- the other ranks wait for it"
    return Finding(
        rule_id="rank-died", severity=severity, claim=claim,
        evidence=tuple(("seen", line) for line in deaths.lines[:DEATHS_SHOWN + 2]),
        remedy="Read the failed rank's traceback (torchrun prints it with the rank's prefix; decorate the entry point "
               "with torch.distributed.elastic.multiprocessing.errors.record for an error file). A group that keeps "
               "restarting loses the work since the last checkpoint each time: fix the failure before raising "
               "--max-restarts.",
        impact=1.0 if severity == Severity.CRITICAL else 0.5, kind=CAUSE)
