"""What the Flight Recorder dumps of a job's ranks say together (``analysis.flightrec``): per process group, the last
collective every member completed, the oldest one some member still waits in (who waits, who never entered it,
for how long), and the collectives whose ranks disagree on the operation, the sizes or the dtypes.

Plain frozen values; built from ``model.mailbox.FrDump``s.
"""

from __future__ import annotations

from dataclasses import dataclass

MISMATCH_TYPE = "type"  # the ranks made different operations at one sequence number (all_reduce vs broadcast)
MISMATCH_SIZE = "size"  # the same operation on tensors of different shapes
MISMATCH_DTYPE = "dtype"  # ... of different element types


@dataclass(frozen=True, slots=True)
class CollectiveRef:
    seq: int  # the group's collective sequence number (torch's collective_seq_id)
    op: str  # "all_reduce"
    profiling_name: str  # "gloo:all_reduce"


@dataclass(frozen=True, slots=True)
class RankPosition:
    """Where one rank is in a group's sequence of collectives, from its dump."""

    rank: int
    last_enqueued: int | None  # the newest collective it entered (None: none recorded)
    last_completed: int | None
    oldest_recorded: int | None  # the ring buffer's oldest entry of the group (older ones were dropped)


@dataclass(frozen=True, slots=True)
class PendingCollective:
    """The oldest collective of a group that some member entered and has not completed."""

    ref: CollectiveRef
    waiting_ranks: tuple[int, ...]  # entered it, not completed
    missing_ranks: tuple[int, ...]  # dumped, and their newest collective is older: they never entered it
    done_ranks: tuple[int, ...]  # completed it (possible only while a peer's completion is not yet recorded)
    undumped_ranks: tuple[int, ...]  # members with no dump: nothing can be said of them
    waiting_since_s: float | None  # every waiting rank has waited at least this long (its own clock)
    waiting_longest_s: float | None
    all_entered: bool  # every member entered it and none completed: the stall is below Python (transport, device)


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One sequence number at which the members recorded different collectives."""

    seq: int
    kind: str  # MISMATCH_*
    values: tuple[tuple[str, tuple[int, ...]], ...]  # each value seen and the ranks that recorded it


@dataclass(frozen=True, slots=True)
class GroupVerdict:
    pg_name: str
    pg_desc: str
    ranks: tuple[int, ...]  # the members (from the dumps' group config; the dumping ranks when not known)
    members_known: bool
    positions: tuple[RankPosition, ...]  # of the members that dumped
    last_completed_by_all: CollectiveRef | None  # the newest collective every dumped member completed
    pending: PendingCollective | None
    mismatches: tuple[Mismatch, ...]  # oldest first, at most MAX_MISMATCHES
    compared_from_seq: int | None  # the oldest sequence number every dump still holds
    dump_spread_s: float | None  # the dumps were taken this far apart (ranks' clocks; across nodes, skew included)


@dataclass(frozen=True, slots=True)
class FlightRecorderAnalysis:
    groups: tuple[GroupVerdict, ...]  # the default group first
    dumped_ranks: tuple[int, ...]
    undumped_ranks: tuple[int, ...]  # ranks of the world that gave no dump
    notes: tuple[str, ...]  # what was left out (point-to-point operations, dumps without a Flight Recorder)
