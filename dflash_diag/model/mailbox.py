"""What the tool reads from a job's mailbox (docs/mailbox.md): the ranks' summaries, their stack dumps and their
Flight Recorder dumps, validated and bounded by ``sources.mailbox`` (other processes wrote them), read over the
job's own c10d store by ``sources.store``.

Plain frozen values (str, int, float, bool, tuples, None for a field the writer left unset); a read that could
not be made at all is an ``NA`` in its place.
"""

from __future__ import annotations

from dataclasses import dataclass

from dflash_diag.model.flightrec import FlightRecorderAnalysis


@dataclass(frozen=True, slots=True)
class StoreAddress:
    """Where a job's c10d store is, as a rank's environment says (MASTER_ADDR / MASTER_PORT / WORLD_SIZE)."""

    host: str
    port: int
    world_size: int
    from_pid: int  # the process whose environment named it (a rank, or the launcher's child)

    @property
    def label(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class GroupSeq:
    """A process group's collective sequence numbers on one rank, as torch's Flight Recorder keeps them."""

    pg_id: str  # torch's uid of the group in that process ("0": the default group)
    name: str | None
    desc: str | None
    ranks: tuple[int, ...] | None  # the members' global ranks (None: not known)
    last_enqueued: int | None  # -1 or None: none yet
    last_started: int | None  # -1: not recorded (gloo records no start)
    last_completed: int | None


@dataclass(frozen=True, slots=True)
class ThreadRow:
    name: str
    tid: int | None
    cpu_share: float | None  # of one core, over the gil probe's last window
    where: str | None  # the innermost Python frame: "function (file.py:line)"


@dataclass(frozen=True, slots=True)
class QueueRow:
    name: str
    depth: int | None
    maxsize: int | None


@dataclass(frozen=True, slots=True)
class CollectiveNow:
    """The collective call a rank's thread is in (the collectives probe's oldest current call)."""

    seq: int | None
    op: str
    thread: str
    since_wall_s: float | None  # on the rank's clock


@dataclass(frozen=True, slots=True)
class RankPost:
    """One rank's summary as it last posted it."""

    rank: int
    world_size: int | None
    local_rank: int | None
    node_rank: int | None
    host: str
    pid: int | None
    posts: int  # the post's number: a rank whose number stops growing stopped posting
    posted_wall_s: float  # the rank's clock
    interval_s: float
    final: bool  # its probes closed: the program is exiting or exited
    age_s: float  # the reader's clock minus posted_wall_s (across nodes, clock skew included)
    step: int | None
    steps: int | None
    last_step_wall_s: float | None
    optimizer_steps: int | None  # counted by the health probe (None: not running)
    coll_entered: int | None
    coll_completed: int | None
    coll_current: CollectiveNow | None
    groups: tuple[GroupSeq, ...]
    groups_na: str | None
    gil_share: float | None
    gpu_busy_pct: float | None
    threads: tuple[ThreadRow, ...]
    queues: tuple[QueueRow, ...]
    requests_answered: int
    coll_in_s: float | None = None  # seconds inside collective calls since the probe armed (its own clock)

    @property
    def stale(self) -> bool:
        """No post for three intervals (and at least 10 s): the rank died, hangs in a way that stops its probe
        thread too (it holds the GIL), or lost the store."""
        return self.age_s > max(10.0, 3.0 * self.interval_s)


@dataclass(frozen=True, slots=True)
class MailboxRead:
    """Every rank's summary, read with one multi_get."""

    address: StoreAddress
    read_wall_s: float
    elapsed_ms: float
    posts: tuple[RankPost, ...]  # by rank
    silent_ranks: tuple[int, ...]  # ranks below WORLD_SIZE with no summary in the store
    invalid: tuple[tuple[int, str], ...]  # (rank, why its summary was refused)
    round_trips: int  # store calls the read took (2 when every rank posted: check, multi_get)


@dataclass(frozen=True, slots=True)
class StackFrame:
    function: str
    file: str
    line: int | None


@dataclass(frozen=True, slots=True)
class ThreadStack:
    name: str
    tid: int | None
    daemon: bool | None
    frames: tuple[StackFrame, ...]  # innermost first
    truncated: bool  # deeper frames were left out


@dataclass(frozen=True, slots=True)
class StacksAnswer:
    rank: int
    request_id: int
    answered_wall_s: float
    cost_ms: float | None  # what dumping cost the rank
    threads: tuple[ThreadStack, ...]
    truncated: bool
    na: str | None


@dataclass(frozen=True, slots=True)
class FrEntry:
    """One Flight Recorder entry (torch's fields, frames left out)."""

    record_id: int | None
    pg_id: int | None
    pg_name: str
    pg_desc: str
    collective_seq_id: int | None
    p2p_seq_id: int | None
    op_id: int | None
    is_p2p: bool
    profiling_name: str  # "gloo:all_reduce"
    input_sizes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    output_sizes: tuple[tuple[int, ...], ...]
    output_dtypes: tuple[str, ...]
    state: str  # scheduled | started | completed
    retired: bool
    time_created_ns: int | None
    time_started_ns: int | None
    time_completed_ns: int | None
    timeout_ms: int | None
    thread_name: str

    @property
    def op(self) -> str:
        """The operation without the backend: ``all_reduce`` of ``gloo:all_reduce``."""
        return self.profiling_name.rpartition(":")[2] or self.profiling_name


@dataclass(frozen=True, slots=True)
class FrDump:
    """One rank's Flight Recorder, as its probe answered."""

    rank: int
    request_id: int
    answered_wall_s: float
    dump_wall_ns: int | None  # when it was taken, on the rank's own clock (the entries' clock)
    cost_ms: float | None
    version: str | None
    groups: tuple[GroupSeq, ...]
    entries: tuple[FrEntry, ...]  # oldest first
    entries_total: int
    truncated: bool
    na: str | None


@dataclass(frozen=True, slots=True)
class StacksGathered:
    request_id: int
    elapsed_ms: float
    answers: tuple[StacksAnswer, ...]  # by rank
    silent_ranks: tuple[int, ...]  # no answer to this request by the deadline
    invalid: tuple[tuple[int, str], ...]


@dataclass(frozen=True, slots=True)
class FrGathered:
    request_id: int
    elapsed_ms: float
    dumps: tuple[FrDump, ...]  # by rank
    silent_ranks: tuple[int, ...]
    invalid: tuple[tuple[int, str], ...]


@dataclass(frozen=True, slots=True)
class MailboxWindow:
    """What one observation window read from a job's mailbox: every rank's summary at its start and at its end,
    every rank's Flight Recorder at its end, and the stacks of the ranks the end's reading singled out.

    A part that could not be read is a string saying why (the reader's NA reason); None: not asked for."""

    address: StoreAddress
    first: MailboxRead | str
    last: MailboxRead | str
    flight_recorder: FrGathered | str | None
    stacks: StacksGathered | str | None


@dataclass(frozen=True, slots=True)
class RemoteRank:
    """One rank as the mailbox shows it over the window (every figure on the rank's own clock)."""

    rank: int
    node_rank: int | None
    host: str
    pid: int | None
    steps_done: int | None  # step() calls between the window's two posts (None: no step counter)
    collectives_done: int | None  # collective calls completed between them
    wait_share: float | None  # share of its time inside collective calls between them
    posted_span_s: float | None  # the two posts' distance
    silent_s: float | None  # its last post's age at the window's end (None: it never posted)
    final: bool  # its probes closed
    answered: bool  # it answered the window's Flight Recorder or stack request
    where: str  # its main (or busiest) thread's innermost frames from the stacks it sent, or its posted frame

    @property
    def moved(self) -> bool:
        return bool(self.steps_done) or bool(self.collectives_done)


@dataclass(frozen=True, slots=True)
class RemoteHang:
    """A collective every other member waits in and some rank never entered (the Flight Recorder's matching)."""

    group: str
    seq: int
    op: str
    waiting_ranks: tuple[int, ...]
    missing_ranks: tuple[int, ...]  # dumped and never entered it
    silent_ranks: tuple[int, ...]  # gave no dump and stopped posting: dead, or frozen with the GIL held
    waiting_since_s: float
    # Every member entered sequence number ``seq``, but not the same collective: (op, ranks) per operation recorded
    # there (a barrier on one rank, an all_reduce on the other never match); empty when ranks stayed away instead.
    mismatched: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class RemoteStraggler:
    rank: int
    wait_share: float
    others_wait_share: float  # the other ranks' mean
    others: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MailboxVerdict:
    """The job across every node, as its ranks posted it (``analysis.mailbox``)."""

    address: str
    world_size: int | None
    ranks: tuple[RemoteRank, ...]  # by rank
    hang: RemoteHang | None
    straggler: RemoteStraggler | None
    dead_ranks: tuple[int, ...]  # stopped posting and answered nothing, while others kept posting
    job_moved: bool  # some rank completed a step or a collective over the window
    notes: tuple[str, ...]
    flight_recorder: FlightRecorderAnalysis | None = None  # the ranks' dumps matched (None: none gathered)

    def rank(self, rank: int) -> RemoteRank | None:
        return next((r for r in self.ranks if r.rank == rank), None)
