"""The Flight Recorder dumps of a job's ranks, matched by sequence number (pure).

torch numbers each process group's collectives in the order a rank makes them (``collective_seq_id``): the
same number on every member is the same collective, if the program is right. Matching the members' dumps number
by number says, per group:

- the last collective every member completed;
- the oldest one some member entered and has not completed: who waits in it and since when (on each rank's own
  clock: the dump's time minus the entry's creation), who never entered it (its newest entry is older), and
  whether every member entered it (then the wait is below Python: the transport or the device);
- the numbers at which members recorded different collectives: another operation (a rank broadcasts where the
  others all-reduce), other shapes, other dtypes. One such difference shifts every later pairing, as in torch's
  own analyzer (``torch.distributed.flight_recorder``), which stops pairing after the first; here the first few
  are listed, oldest first.

Completion is read as torch records it: ``state == "completed"`` (NCCL's watchdog saw the work end); gloo
records no start or end (its entries stay ``scheduled``) and retires an entry when its work finished, so a retired
gloo entry is complete. NCCL retires an entry that timed out as well: retired alone is not done there.
Point-to-point operations (their own sequence) are not matched.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from dflash_diag.model.flightrec import (
    MISMATCH_DTYPE,
    MISMATCH_SIZE,
    MISMATCH_TYPE,
    CollectiveRef,
    FlightRecorderAnalysis,
    GroupVerdict,
    Mismatch,
    PendingCollective,
    RankPosition,
)
from dflash_diag.model.mailbox import FrDump, FrEntry

MAX_MISMATCHES = 10
DEFAULT_GROUP_DESC = "default_pg"


def completed(entry: FrEntry) -> bool:
    """Whether the rank that recorded ``entry`` finished it (see the module's docstring)."""
    if entry.state == "completed":
        return True
    return entry.retired and entry.profiling_name.startswith("gloo:")


def _ref(entry: FrEntry) -> CollectiveRef:
    return CollectiveRef(seq=entry.collective_seq_id or 0, op=entry.op, profiling_name=entry.profiling_name)


GroupKey = tuple[str, str]  # (pg_name, pg_desc) as the entries name their group


def _by_group(dumps: Sequence[FrDump]) -> dict[GroupKey, dict[int, dict[int, FrEntry]]]:
    """group -> rank -> collective seq -> entry (collectives only; a later entry of one seq wins).

    A process that destroyed its groups and made new ones keeps the old groups' entries in its ring, under the
    same name (gloo's default group is "0" each time) and another uid (``pg_id``): the newest uid of a name is the
    live group, the others are left out."""
    out: dict[GroupKey, dict[int, dict[int, FrEntry]]] = defaultdict(dict)
    for dump in dumps:
        newest: dict[GroupKey, int] = {}
        for entry in dump.entries:
            key = (entry.pg_name, entry.pg_desc)
            newest[key] = max(newest.get(key, -1), entry.pg_id if entry.pg_id is not None else -1)
        for entry in dump.entries:
            if entry.is_p2p or entry.collective_seq_id is None or entry.collective_seq_id <= 0:
                continue
            key = (entry.pg_name, entry.pg_desc)
            if (entry.pg_id if entry.pg_id is not None else -1) != newest[key]:
                continue
            out[key].setdefault(dump.rank, {})[entry.collective_seq_id] = entry
    return out


def _members(key: GroupKey, dumps: Sequence[FrDump], world_size: int | None) -> tuple[tuple[int, ...], bool]:
    """The group's members: the world for the default group, else its config in the dumps (the group whose id the
    entries carry), else the ranks that recorded it. (gloo writes one config under an empty name for all its
    groups, the last one's: for the default group the world size is the surer answer.)"""
    if key[1] == DEFAULT_GROUP_DESC and world_size:
        return tuple(range(world_size)), True
    pg_ids = {str(e.pg_id) for d in dumps for e in d.entries if (e.pg_name, e.pg_desc) == key and e.pg_id is not None}
    for dump in dumps:
        for group in dump.groups:
            if group.ranks and (group.pg_id in pg_ids or group.name == key[0]):
                return tuple(sorted(group.ranks)), True
    recorded = sorted({d.rank for d in dumps for e in d.entries if (e.pg_name, e.pg_desc) == key})
    return tuple(recorded), False


def _position(rank: int, entries: dict[int, FrEntry]) -> RankPosition:
    done = [seq for seq, e in entries.items() if completed(e)]
    return RankPosition(rank=rank, last_enqueued=max(entries) if entries else None,
                        last_completed=max(done) if done else None,
                        oldest_recorded=min(entries) if entries else None)


def _pending(members: Sequence[int], by_rank: dict[int, dict[int, FrEntry]],
             dump_ns: dict[int, int | None]) -> PendingCollective | None:
    """The oldest collective some member waits in, and where every other member is relative to it."""
    waiting_at: dict[int, int] = {}
    for rank in members:
        open_seqs = [seq for seq, e in by_rank.get(rank, {}).items() if not completed(e)]
        if open_seqs:
            waiting_at[rank] = min(open_seqs)
    if not waiting_at:
        return None
    seq = min(waiting_at.values())
    waiting = tuple(sorted(r for r, s in waiting_at.items() if s == seq))
    entry = by_rank[waiting[0]][seq]
    missing, done, undumped = [], [], []
    for rank in members:
        if rank in waiting:
            continue
        entries = by_rank.get(rank)
        if entries is None:
            undumped.append(rank)
        elif seq in entries:
            (done if completed(entries[seq]) else missing).append(rank)  # not completed here: waits in an older one
        elif max(entries) < seq:
            missing.append(rank)
        else:
            done.append(rank)  # entered later ones; this one fell out of its ring buffer
    waits = [(dump_ns[r] - by_rank[r][seq].time_created_ns) / 1e9 for r in waiting
             if dump_ns.get(r) is not None and by_rank[r][seq].time_created_ns is not None]
    waits = [max(0.0, w) for w in waits]
    return PendingCollective(
        ref=_ref(entry), waiting_ranks=waiting, missing_ranks=tuple(missing), done_ranks=tuple(done),
        undumped_ranks=tuple(undumped), waiting_since_s=min(waits) if waits else None,
        waiting_longest_s=max(waits) if waits else None,
        all_entered=not missing and not undumped and not done and len(waiting) == len(members))


def _values(seq: int, by_rank: dict[int, dict[int, FrEntry]], ranks: Iterable[int],
            read: object) -> tuple[tuple[str, tuple[int, ...]], ...]:
    seen: dict[str, list[int]] = defaultdict(list)
    for rank in ranks:
        seen[read(by_rank[rank][seq])].append(rank)  # type: ignore[operator]
    return tuple((value, tuple(rs)) for value, rs in sorted(seen.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def _shapes(entry: FrEntry) -> str:
    return "in " + repr([list(s) for s in entry.input_sizes]) + " out " + repr([list(s) for s in entry.output_sizes])


def _mismatches(by_rank: dict[int, dict[int, FrEntry]], from_seq: int | None) -> tuple[Mismatch, ...]:
    if from_seq is None:
        return ()
    seqs = sorted({seq for entries in by_rank.values() for seq in entries if seq >= from_seq})
    out: list[Mismatch] = []
    for seq in seqs:
        ranks = [r for r, entries in sorted(by_rank.items()) if seq in entries]
        if len(ranks) < 2:
            continue
        for kind, read in ((MISMATCH_TYPE, lambda e: e.op), (MISMATCH_SIZE, _shapes),
                           (MISMATCH_DTYPE, lambda e: ",".join(e.input_dtypes + e.output_dtypes))):
            values = _values(seq, by_rank, ranks, read)
            if len(values) > 1:
                out.append(Mismatch(seq=seq, kind=kind, values=values))
                break  # another op has other shapes too: the first difference says it
        if len(out) >= MAX_MISMATCHES:
            break
    return tuple(out)


def _group_verdict(key: GroupKey, by_rank: dict[int, dict[int, FrEntry]], dumps: Sequence[FrDump],
                   world_size: int | None) -> GroupVerdict:
    members, known = _members(key, dumps, world_size)
    dumped = {d.rank for d in dumps if d.na is None}
    present = {r: by_rank.get(r, {}) for r in members if r in dumped}
    positions = tuple(_position(r, present[r]) for r in sorted(present))
    completes = [p.last_completed for p in positions]
    last_all = None
    if positions and all(c is not None for c in completes):
        seq = min(c for c in completes if c is not None)
        entry = next((present[p.rank][seq] for p in positions if seq in present[p.rank]), None)
        last_all = _ref(entry) if entry is not None else CollectiveRef(seq=seq, op="", profiling_name="")
    oldest = [p.oldest_recorded for p in positions if p.oldest_recorded is not None]
    dump_ns = {d.rank: d.dump_wall_ns for d in dumps}
    times = [t for r, t in dump_ns.items() if r in present and t is not None]
    return GroupVerdict(
        pg_name=key[0], pg_desc=key[1], ranks=members, members_known=known, positions=positions,
        last_completed_by_all=last_all, pending=_pending(members, present, dump_ns),
        mismatches=_mismatches({r: e for r, e in present.items() if e}, max(oldest) if oldest else None),
        compared_from_seq=max(oldest) if oldest else None,
        dump_spread_s=(max(times) - min(times)) / 1e9 if len(times) > 1 else None)


def match_flight_recorder(dumps: Sequence[FrDump], world_size: int | None = None) -> FlightRecorderAnalysis:
    """The ranks' dumps together (see the module's docstring). ``world_size``: the job's, when known (the default
    group's members when the dumps do not say; the ranks that gave no dump)."""
    usable = [d for d in dumps if d.na is None]
    notes = [f"rank {d.rank}: no Flight Recorder ({d.na})" for d in dumps if d.na is not None]
    p2p = sum(1 for d in usable for e in d.entries if e.is_p2p)
    if p2p:
        notes.append(f"{p2p} point-to-point entries (send/recv) are not matched")
    groups = [_group_verdict(key, by_rank, usable, world_size) for key, by_rank in _by_group(usable).items()]
    groups.sort(key=lambda g: (g.pg_desc != DEFAULT_GROUP_DESC, g.pg_name))
    dumped = tuple(sorted(d.rank for d in usable))
    world = range(world_size) if world_size else sorted({r for g in groups for r in g.ranks})
    return FlightRecorderAnalysis(groups=tuple(groups), dumped_ranks=dumped,
                                  undumped_ranks=tuple(r for r in world if r not in dumped), notes=tuple(notes))
