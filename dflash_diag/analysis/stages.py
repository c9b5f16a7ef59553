"""Which threads form which pipeline stage, for programs we have never seen. Pure.

In order, the first that names any thread wins:
1. ``names``: the user's (or the default ``target-*`` / ``drafter-*``) thread-name patterns;
2. ``board``: the roles a program published on its probe board (``app.threads[name].role``);
3. ``queues``: inferred from what the threads do with queues. A thread that puts into a queue produces for
   it, one that gets from it consumes. Evidence: samples blocked in ``put``/``get`` (and ``queue.py`` frames),
   the text of the program's lines (``self.hs_q.put(h)``), and the queue calls in the thread's own functions
   on disk (``sources.outside``) -- the last one tells producers from consumers even when neither blocks.
   The queue that both a producer and a consumer thread use, and that threads block on most, is the pipeline's
   queue: its producers are the *target* stage (upstream), its consumers the *drafter* stage (downstream).
   Threads that share an entry function with a stage member do the same job and join it. Where the two sides
   name the queue differently and one side is known, a relay (it gets from its own input, a socket or another
   process's queue, and puts into a queue no thread here gets from) is the known consumers' producer.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dflash_diag.analysis.hotspots import HotSpot, time_spent
from dflash_diag.model import Frame, Observation, SourceLine, Stage, ThreadSample, ThreadState, ThreadStats
from dflash_diag.model.evidence import is_library_file

QUEUE_CALL = re.compile(r"([A-Za-z_][\w\.\[\]'\"]*)\.(put|get)(?:_nowait)?\(")
_QUEUE_FILES = ("/queue.py", "/multiprocessing/queues.py")
_THREADING = "threading.py"


@dataclass(frozen=True, slots=True)
class StageAssignment:
    stages: Mapping[int, Stage]  # thread identity -> its stage
    how: str  # "names" | "board" | "queues" | ""
    queue: str | None = None  # the pipeline queue's name when inferred (receiver's last attribute)
    # Producer/consumer queues of every thread (for evidence): identity -> (puts, gets) queue names.
    queue_use: Mapping[int, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)


@dataclass(slots=True)
class _Use:
    puts: Counter[str]
    gets: Counter[str]
    blocked: Counter[str]  # samples blocked on that queue (put or get)


def queue_name(receiver: str) -> str:
    """``self.hs_queue`` -> ``hs_queue``; ``queues['hs']`` -> ``queues['hs']`` (the last attribute)."""
    return receiver.rsplit(".", 1)[-1] or receiver


def entry_frame(thread: ThreadSample) -> Frame | None:
    """The thread's entry point: its outermost Python frame outside threading.py."""
    for frame in reversed(thread.frames):
        if frame.native or frame.filename.endswith(_THREADING):
            continue
        return frame
    return None


def entry_key(frame: Frame | None) -> tuple[str, str] | None:
    return (frame.filename, frame.name) if frame is not None else None


def infer_from_queues(
    rows: Mapping[int, Sequence[tuple[ThreadSample, ThreadState]]],
    obs: Observation,
) -> StageAssignment:
    """Producer (target) and consumer (drafter) stages from queue use; empty when nothing tells."""
    code = {(c.filename, c.line): c for c in obs.code}
    uses = {ident: _queue_use(samples, code, obs) for ident, samples in rows.items()}
    stages: dict[int, Stage] = {}
    queue = _pipeline_queue(uses)
    if queue is not None:
        for ident, use in uses.items():
            if queue in use.gets and queue not in use.puts:
                stages[ident] = Stage.DRAFTER
            elif queue in use.puts and queue not in use.gets:
                stages[ident] = Stage.TARGET
    if not (Stage.DRAFTER in stages.values() and Stage.TARGET in stages.values()):
        # The two sides name the queue differently (a function's parameter `out` is the caller's `batches`):
        # threads that only put are upstream, threads that only get are downstream.
        putters = {i for i, u in uses.items() if u.puts and not u.gets}
        getters = {i for i, u in uses.items() if u.gets and not u.puts}
        if putters and getters:
            stages = {**{i: Stage.TARGET for i in putters}, **{i: Stage.DRAFTER for i in getters}}
            queue = queue or _most_blocked(uses, putters | getters)
    if stages and len(set(stages.values())) == 1:
        _add_relays(uses, stages)
    if stages and len(set(stages.values())) == 1:
        # One side only. When it waits on the queue, the other side is whoever is busy meanwhile (a consumer that
        # never blocks in get, because its producer is faster, is never seen calling get).
        other = next(iter(stages.values())).other_side
        for ident in _busy_threads(rows, exclude=set(stages)):
            stages[ident] = other
    if not stages:
        return StageAssignment(stages={}, how="")
    _join_by_entry(rows, stages)
    queue_use = {i: (tuple(sorted(u.puts)), tuple(sorted(u.gets))) for i, u in uses.items() if u.puts or u.gets}
    return StageAssignment(stages=stages, how="queues", queue=queue, queue_use=queue_use)


def _add_relays(uses: Mapping[int, _Use], stages: dict[int, Stage]) -> None:
    """One side is known; the other is a relay that names the queue differently: a collator that gets from its
    own input (a socket, another process's queue) and puts into `out`, where the consumer gets from `batches`.
    A thread that puts into a queue no thread here gets from (by any name it is seen under) feeds the known
    consumers; one that gets from a queue no thread here puts into drains the known producers."""
    known = next(iter(stages.values()))
    gotten = {name for use in uses.values() for name in use.gets}
    put = {name for use in uses.values() for name in use.puts}
    for ident, use in uses.items():
        if ident in stages:
            continue
        if known is Stage.DRAFTER and set(use.puts) - gotten:
            stages[ident] = Stage.TARGET
        elif known is Stage.TARGET and set(use.gets) - put and not use.puts:
            stages[ident] = Stage.DRAFTER


_WAITING = (ThreadState.IDLE, ThreadState.QUEUE_GET, ThreadState.QUEUE_PUT)
# A thread doing work in this share of its samples is busy (a pipeline worker, not a helper waiting for events).
BUSY_SHARE = 0.5


def _busy_threads(rows: Mapping[int, Sequence[tuple[ThreadSample, ThreadState]]], exclude: set[int]) -> list[int]:
    busy = []
    for ident, samples in rows.items():
        if ident in exclude or not samples or (samples[-1][0].name or "").startswith("dflash-diag-"):
            continue
        working = sum(1 for _, state in samples if state not in _WAITING)
        if working / len(samples) >= BUSY_SHARE:
            busy.append(ident)
    return busy


def _most_blocked(uses: Mapping[int, _Use], idents: set[int]) -> str | None:
    blocked: Counter[str] = Counter()
    named: Counter[str] = Counter()
    for ident in idents:
        blocked.update(uses[ident].blocked)
        named.update({q: 1 for q in (*uses[ident].puts, *uses[ident].gets)})
    best = blocked.most_common(1) or named.most_common(1)
    return best[0][0] if best else None


def _queue_use(samples: Sequence[tuple[ThreadSample, ThreadState]], code: Mapping[tuple[str, int], SourceLine],
               obs: Observation) -> _Use:
    use = _Use(Counter(), Counter(), Counter())
    functions: set[tuple[str, int]] = set()
    for thread, state in samples:
        user = [f for f in thread.frames if not f.native and not is_library_file(f.filename)]
        for frame in user:
            functions.add((frame.filename, frame.line))
        blocked = state in (ThreadState.QUEUE_PUT, ThreadState.QUEUE_GET)
        in_queue = next((f for f in thread.frames if not f.native and f.filename.endswith(_QUEUE_FILES)
                         and f.name.rsplit(".", 1)[-1] in ("put", "get")), None)
        if not (blocked or in_queue is not None) or not user:
            continue
        # The program's line that called into the queue names it: `self.hs_q.put(h)`.
        text = obs.line_text(user[0].filename, user[0].line) or _code_text(code, user[0])
        match = QUEUE_CALL.search(text or "")
        if match is None:
            continue
        name, method = queue_name(match.group(1)), match.group(2)
        (use.puts if method == "put" else use.gets)[name] += 1
        if blocked:
            use.blocked[name] += 1
    for location in functions:  # what the thread's functions call, on disk: known even when never sampled
        line = code.get(location)
        for call in line.queue_calls if line is not None else ():
            receiver, _, method = call.rpartition(".")
            (use.puts if method.startswith("put") else use.gets).setdefault(queue_name(receiver), 0)
    return use


def queue_use_of(samples: Sequence[tuple[ThreadSample, ThreadState]], code: Mapping[tuple[str, int], SourceLine],
                 obs: Observation) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(queues the thread puts into, queues it gets from), by name, from its samples and its functions on disk."""
    use = _queue_use(samples, code, obs)
    return tuple(sorted(use.puts)), tuple(sorted(use.gets))


def _code_text(code: Mapping[tuple[str, int], SourceLine], frame: Frame) -> str | None:
    line = code.get((frame.filename, frame.line))
    return line.text if line is not None else None


def _pipeline_queue(uses: Mapping[int, _Use]) -> str | None:
    """The queue that has both a producer thread and a (different) consumer thread, blocked on most."""
    producers: dict[str, set[int]] = {}
    consumers: dict[str, set[int]] = {}
    blocked: Counter[str] = Counter()
    for ident, use in uses.items():
        for name in use.puts:
            producers.setdefault(name, set()).add(ident)
        for name in use.gets:
            consumers.setdefault(name, set()).add(ident)
        blocked.update(use.blocked)
    candidates = [q for q in producers if q in consumers and producers[q] - consumers[q] and consumers[q] - producers[q]]
    if not candidates:
        # One side only (the other side's threads are gone, or never sampled): the queue threads block on.
        one_sided = [q for q in set(producers) | set(consumers) if blocked[q]]
        return max(one_sided, key=lambda q: (blocked[q], q)) if one_sided else None
    return max(candidates, key=lambda q: (blocked[q], len(producers[q]) + len(consumers[q]), q))


def _join_by_entry(rows: Mapping[int, Sequence[tuple[ThreadSample, ThreadState]]], stages: dict[int, Stage]) -> None:
    """Threads that run the same entry function as a stage member belong to its stage."""
    entries = {ident: _entry_of(samples) for ident, samples in rows.items()}
    by_entry: dict[tuple[str, str], set[Stage]] = {}
    for ident, stage in stages.items():
        key = entries.get(ident)
        if key is not None:
            by_entry.setdefault(key, set()).add(stage)
    for ident, key in entries.items():
        if ident in stages or key is None:
            continue
        known = by_entry.get(key, set())
        if len(known) == 1:
            stages[ident] = next(iter(known))


def _entry_of(samples: Sequence[tuple[ThreadSample, ThreadState]]) -> tuple[str, str] | None:
    counts: Counter[tuple[str, str]] = Counter()
    for thread, _ in samples:
        key = entry_key(entry_frame(thread))
        if key is not None:
            counts[key] += 1
    return counts.most_common(1)[0][0] if counts else None



# --- one thread of a stage slower than its peers -------------------------------------------------------------------
# A stage's threads that run the same entry function do the same job; when one of them spends a good part of its
# time in a function its peers hardly run (a per-row Python loop, a lock only it takes), that thread is the slow one
# of the stage, and the stage's mean shares hide it.
SLOW_THREAD_SHARE = 0.15  # of the thread's own samples, at least
SLOW_THREAD_EXCESS = 0.15  # more than the peer that runs the function most, by at least this share ...
SLOW_THREAD_PEER_FRACTION = 1 / 3  # ... and that peer spends at most a third of it there
SLOW_THREAD_MIN_SAMPLES = 15  # per thread: fewer is an anecdote


@dataclass(frozen=True, slots=True)
class SlowThread:
    """``thread`` spends ``spot.share`` of its samples in ``spot``, its peers of the same stage and job at most
    ``peer_share`` (``peer`` the one that spends most there)."""

    thread: str
    stage: Stage
    spot: HotSpot
    peer: str
    peer_share: float
    peers: tuple[str, ...]
    n_samples: int

    @property
    def excess(self) -> float:
        return self.spot.share - self.peer_share


def slow_thread(stage: Stage, members: Sequence[tuple[ThreadStats, Sequence[tuple[ThreadSample, ThreadState]]]]
                ) -> SlowThread | None:
    """The thread of ``stage`` that stands out from the peers doing its job (same entry function), by the function
    it spends time in and they do not; None when the stage's threads spend their time alike (or are too few, or
    too thinly sampled, to tell). ``members``: each thread of the stage with its classified samples."""
    by_job: dict[tuple[str, str] | None, list[tuple[ThreadStats, Sequence[tuple[ThreadSample, ThreadState]]]]] = {}
    for stats, rows in members:
        if stats.stage == stage and not stats.helper and len(rows) >= SLOW_THREAD_MIN_SAMPLES:
            by_job.setdefault(entry_key(stats.entry), []).append((stats, rows))
    found: list[SlowThread] = []
    jobs = {job for job in by_job if job is not None}
    for job, group in by_job.items():
        if job is None or len(group) < 2:
            continue
        spent = {stats.name: {(s.filename, s.function): s for s in time_spent(rows)} for stats, rows in group}
        for stats, rows in group:
            peers = [other.name for other, _ in group if other.name != stats.name]
            for key, spot in spent[stats.name].items():
                peer, peer_share = max(((p, spent[p][key].share if key in spent[p] else 0.0) for p in peers),
                                       key=lambda ps: ps[1])
                if _stands_out(spot.share, len(rows), peer_share, min(len(r) for o, r in group if o.name == peer)):
                    found.append(SlowThread(stats.name, stage, spot, peer, peer_share, tuple(peers), len(rows)))
    # More of a thread's time in the job's own function (its entry: the training step both run) is what is left when
    # its peer spends part of its time in something extra: the peer's extra function is the standout. The entry is
    # named only where nothing else stands out.
    extra = [s for s in found if (s.spot.filename, s.spot.function) not in jobs]
    return max(extra or found, key=lambda s: (s.excess, s.thread), default=None)


def _stands_out(share: float, n: int, peer_share: float, peer_n: int) -> bool:
    """A share well above the peer's, beyond the sampling noise of both (one standard error each)."""
    if share < SLOW_THREAD_SHARE or peer_share > share * SLOW_THREAD_PEER_FRACTION:
        return False
    noise = math.sqrt(share * (1 - share) / n) + math.sqrt(max(peer_share * (1 - peer_share), 1 / peer_n) / peer_n)
    return share - peer_share >= max(SLOW_THREAD_EXCESS, noise)
