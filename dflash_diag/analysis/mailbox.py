"""A job across every node, judged from what its ranks posted to the job's own store (pure).

The ranks on other machines cannot be sampled from here; their probes post a summary every couple of seconds and
answer requests for their stacks and their Flight Recorder (``sources.store``). One window reads every summary at
its start and at its end and gathers the Flight Recorders at its end (``model.mailbox.MailboxWindow``). From it:

- **who moved**: a rank's step counter and completed collectives between its two posts. A job where any rank
  completed a collective over the window is not hung, whatever the ranks on this machine look like;
- **a hang**: a collective some members entered and waited in for at least ``HANG_MIN_S`` past the dumps' spread
  (the dumps are taken a little apart, on each rank's own clock), that the others never entered, with no collective
  completed by the waiting ranks over the window;
- **the straggler**: each rank's share of its own time inside collective calls between its two posts (its own
  clock: no skew between nodes); when every rank but one waits at least ``WAIT_SHARE`` of its time and that one
  far less, the others wait for it;
- **dead ranks**: no post for more than two of its intervals and no answer to the window's request, while other
  ranks answered: the rank exited, was killed, or is frozen holding the GIL (its probe thread cannot run).
"""

from __future__ import annotations

from collections.abc import Sequence

from dflash_diag.analysis.flightrec import match_flight_recorder
from dflash_diag.model.evidence import is_library_file
from dflash_diag.model.flightrec import MISMATCH_TYPE, FlightRecorderAnalysis
from dflash_diag.model.mailbox import (
    FrGathered,
    MailboxRead,
    MailboxVerdict,
    MailboxWindow,
    RankPost,
    RemoteHang,
    RemoteRank,
    RemoteStraggler,
    StacksAnswer,
    StacksGathered,
)

HANG_MIN_S = 5.0  # waited in one collective at least this long past the dumps' spread
WAIT_SHARE = 0.30  # every other rank waits at least this share of its time: a measured cost
GAP = 0.25  # ... and the straggler waits at least this much less than their mean, and at most half of it
MIN_SPAN_S = 1.5  # two posts closer than this give no share
SILENT_INTERVALS = 2.0  # no post for this many intervals (plus a second) counts as silence
FRAMES_SHOWN = 3


def _posts(read: MailboxRead | str) -> dict[int, RankPost]:
    return {} if isinstance(read, str) else {p.rank: p for p in read.posts}


def _answered(window: MailboxWindow) -> set[int]:
    out: set[int] = set()
    if isinstance(window.flight_recorder, FrGathered):
        out |= {d.rank for d in window.flight_recorder.dumps}
    if isinstance(window.stacks, StacksGathered):
        out |= {a.rank for a in window.stacks.answers}
    return out


def _asked(window: MailboxWindow) -> bool:
    return isinstance(window.flight_recorder, FrGathered) or isinstance(window.stacks, StacksGathered)


def _delta(first: RankPost | None, last: RankPost, field: str) -> int | None:
    if first is None or first.posts >= last.posts:
        return None
    a, b = getattr(first, field), getattr(last, field)
    return None if a is None or b is None else max(0, b - a)


def _share(first: RankPost | None, last: RankPost) -> tuple[float | None, float | None]:
    """(share of its time in collectives, the posts' span) between the rank's two posts, on its own clock."""
    if first is None or first.posts >= last.posts:
        return None, None
    span_s = last.posted_wall_s - first.posted_wall_s
    a, b = _in_collectives_s(first), _in_collectives_s(last)
    if span_s < MIN_SPAN_S or a is None or b is None:
        return None, span_s if span_s > 0 else None
    return max(0.0, min(1.0, (b - a) / span_s)), span_s


def _in_collectives_s(post: RankPost) -> float | None:
    """Seconds in collective calls up to the post, the call it is in counted so far (the probe adds a call's
    time when it returns; a rank that waits in one call the whole window would read as not waiting)."""
    if post.coll_in_s is None:
        return None
    current = post.coll_current
    if current is None or current.since_wall_s is None:
        return post.coll_in_s
    return post.coll_in_s + max(0.0, post.posted_wall_s - current.since_wall_s)


def _frames_text(answer: StacksAnswer) -> str:
    """The main thread's innermost frames of the program's own code (the library's below them, counted): where
    it is, in the words of its author."""
    threads = sorted(answer.threads, key=lambda t: (t.name != "MainThread", not t.frames))
    for thread in threads:
        own = [f for f in thread.frames if not is_library_file(f.file)]
        if own:
            inner = next(f for f in thread.frames if not is_library_file(f.file))
            below = thread.frames.index(inner)
            shown = " < ".join(f"{f.function} ({f.file.rsplit('/', 1)[-1]}:{f.line})" for f in own[:FRAMES_SHOWN])
            in_lib = f" (inside {thread.frames[0].function}, {below} library frames below)" if below else ""
            return f"{thread.name}: {shown}{in_lib}"
    return ""


def _where(rank: int, last: RankPost | None, stacks: dict[int, StacksAnswer]) -> str:
    if rank in stacks:
        text = _frames_text(stacks[rank])
        if text:
            return text
    if last is not None:
        for row in last.threads:
            if row.where:
                return f"{row.name}: {row.where}"
    return ""


def _silent(post: RankPost | None) -> bool:
    if post is None:
        return True
    return post.final or post.age_s > SILENT_INTERVALS * post.interval_s + 1.0


def _rank_rows(window: MailboxWindow, world: Sequence[int], answered: set[int]) -> tuple[RemoteRank, ...]:
    first, last = _posts(window.first), _posts(window.last)
    stacks = {a.rank: a for a in window.stacks.answers} if isinstance(window.stacks, StacksGathered) else {}
    rows: list[RemoteRank] = []
    for rank in world:
        post = last.get(rank)
        before = first.get(rank)
        share, span_s = _share(before, post) if post is not None else (None, None)
        rows.append(RemoteRank(
            rank=rank, node_rank=post.node_rank if post else None, host=post.host if post else "",
            pid=post.pid if post else None,
            steps_done=_delta(before, post, "steps") if post else None,
            collectives_done=_delta(before, post, "coll_completed") if post else None,
            wait_share=share, posted_span_s=span_s, silent_s=post.age_s if post else None,
            final=post.final if post else False, answered=rank in answered,
            where=_where(rank, post, stacks)))
    return tuple(rows)


def _world(window: MailboxWindow) -> list[int]:
    ranks: set[int] = set()
    size = window.address.world_size
    for read in (window.first, window.last):
        if not isinstance(read, str):
            ranks |= {p.rank for p in read.posts} | set(read.silent_ranks)
    if size:
        ranks |= set(range(size))
    return sorted(ranks)


def _dead(rows: Sequence[RemoteRank], last: dict[int, RankPost], asked: bool) -> tuple[int, ...]:
    """Ranks that posted before, fell silent and answered nothing, while at least one other rank is alive and
    answering. A rank that never posted is not called dead: its probes may not run, or never reached the store."""
    alive = [r for r in rows if not _silent(last.get(r.rank)) and (r.answered or not asked)]
    if not alive:
        return ()
    return tuple(r.rank for r in rows if r.rank in last and _silent(last[r.rank]) and not r.answered)


def _matched(window: MailboxWindow, world_size: int | None) -> FlightRecorderAnalysis | None:
    if not isinstance(window.flight_recorder, FrGathered) or not window.flight_recorder.dumps:
        return None
    return match_flight_recorder(window.flight_recorder.dumps, world_size)


def _hang(analysis: FlightRecorderAnalysis | None, rows: Sequence[RemoteRank], dead: Sequence[int]) -> RemoteHang | None:
    if analysis is None:
        return None
    by_rank = {r.rank: r for r in rows}
    for group in analysis.groups:
        pending = group.pending
        if pending is None or pending.waiting_since_s is None:
            continue
        silent = tuple(r for r in pending.undumped_ranks if r in dead)
        mismatched = next((m.values for m in group.mismatches
                           if m.seq == pending.ref.seq and m.kind == MISMATCH_TYPE), ())
        if not pending.missing_ranks and not silent and not mismatched:
            continue  # every member entered the same collective: the stall is below Python, not a rank's code
        if pending.waiting_since_s < HANG_MIN_S + (group.dump_spread_s or 0.0):
            continue
        if any(by_rank[r].collectives_done for r in pending.waiting_ranks if r in by_rank):
            continue  # a waiting rank completed collectives in the window: it is slow, not stuck
        return RemoteHang(group=group.pg_desc or group.pg_name, seq=pending.ref.seq, op=pending.ref.op,
                          waiting_ranks=pending.waiting_ranks, missing_ranks=pending.missing_ranks,
                          silent_ranks=silent, waiting_since_s=pending.waiting_since_s, mismatched=mismatched)
    return None


def _straggler(rows: Sequence[RemoteRank]) -> RemoteStraggler | None:
    shares = [(r.wait_share, r.rank) for r in rows if r.wait_share is not None and r.moved]
    if len(shares) < 2:
        return None
    low_share, low_rank = min(shares)
    others = [(s, r) for s, r in shares if r != low_rank]
    if any(s < WAIT_SHARE for s, _ in others):
        return None
    mean = sum(s for s, _ in others) / len(others)
    if low_share > mean - GAP or low_share > mean / 2:
        return None
    return RemoteStraggler(rank=low_rank, wait_share=low_share, others_wait_share=mean,
                           others=tuple(sorted(r for _, r in others)))


def _notes(window: MailboxWindow) -> tuple[str, ...]:
    notes: list[str] = []
    for label, part in (("first read", window.first), ("last read", window.last),
                        ("Flight Recorder", window.flight_recorder), ("stacks", window.stacks)):
        if isinstance(part, str):
            notes.append(f"{label}: {part}")
    if not isinstance(window.last, str):
        notes += [f"rank {rank}: summary refused ({why})" for rank, why in window.last.invalid]
        notes += [f"rank {rank} never posted (no probes in it, or they could not reach the store)"
                  for rank in window.last.silent_ranks]
    return tuple(notes)


def judge_mailbox(window: MailboxWindow) -> MailboxVerdict:
    """The job as its ranks posted it over one window (see the module's docstring)."""
    world = _world(window)
    answered = _answered(window)
    rows = _rank_rows(window, world, answered)
    dead = _dead(rows, _posts(window.last), _asked(window))
    matched = _matched(window, window.address.world_size or None)
    hang = _hang(matched, rows, dead)
    return MailboxVerdict(
        address=window.address.label, world_size=window.address.world_size or None, ranks=rows, hang=hang,
        straggler=None if hang is not None or dead else _straggler(rows), dead_ranks=dead,
        job_moved=any(r.moved for r in rows), notes=_notes(window), flight_recorder=matched)
