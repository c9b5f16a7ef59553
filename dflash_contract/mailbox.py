"""The mailbox: what the probes in a job's ranks post under a prefix of the job's own c10d store, and what the
tool reads back (docs/mailbox.md).

A distributed job already runs a key-value store every rank can reach (torch.distributed's TCPStore, at
``MASTER_ADDR:MASTER_PORT``). The ``mailbox`` probe in each rank opens a connection of its own to it and, under
:data:`PREFIX`, posts a small summary of the rank every couple of seconds and answers requests the tool posts
there ("dump your stacks", "dump your Flight Recorder"). The tool, on any node that can reach the store, reads
every rank's summary with one ``multi_get``. No network of our own: only the job's store.

The keys (all under :data:`PREFIX`, nothing else of the store is touched):

- ``summary/<rank>``: the rank's summary, a JSON object of :class:`SummaryKeys` (at most
  :data:`MAX_SUMMARY_BYTES`), overwritten at each post;
- ``request/any`` and ``request/<kind>``: counters. The tool asks with ``add(request/<kind>, 1)`` (the new value
  is the request's id) then ``add(request/any, 1)``; a rank polls ``request/any`` with ``add(..., 0)`` (one round
  trip that never blocks on a missing key) and reads the kinds only when it moved;
- ``answer/<kind>/<rank>``: the rank's answer to the newest request of that kind it saw, a JSON object of
  :class:`AnswerKeys` with the request's id (at most :data:`MAX_ANSWER_BYTES`);
- ``answered/<kind>/<rank>``: that request's id, in decimal, written after the answer: a reader polls these few
  bytes and fetches an answer only once its id is the reader's request or a later one.

Every value is strict JSON, UTF-8; readers validate and bound everything (another process wrote it).
Standard library only: the probes import this inside the user's program.
"""

from __future__ import annotations

from typing import Final

SUMMARY_SCHEMA: Final = "dflash-diag.mailbox-summary/1"
ANSWER_SCHEMA: Final = "dflash-diag.mailbox-answer/1"
PREFIX: Final = "dflash-diag/v1/"

# A TCPStore refuses any message over 8 MiB (and drops that client). Ours stay far below it: a summary is a few
# KB, an answer at most 1 MiB, and the tool reads answers a few at a time.
STORE_MESSAGE_LIMIT_BYTES: Final = 8 * 1024 * 1024
MAX_SUMMARY_BYTES: Final = 8 * 1024
MAX_ANSWER_BYTES: Final = 1024 * 1024
MAX_RANKS: Final = 1 << 20  # ranks a reader will name keys for (WORLD_SIZE is read from a process's environment)

KIND_STACKS: Final = "stacks"
KIND_FLIGHTREC: Final = "flightrec"
REQUEST_KINDS: Final[tuple[str, ...]] = (KIND_STACKS, KIND_FLIGHTREC)

REQUEST_ANY_KEY: Final = PREFIX + "request/any"


def summary_key(rank: int) -> str:
    return f"{PREFIX}summary/{int(rank)}"


def request_key(kind: str) -> str:
    if kind not in REQUEST_KINDS:
        raise ValueError(f"unknown request kind {kind!r}")
    return f"{PREFIX}request/{kind}"


def answer_key(kind: str, rank: int) -> str:
    if kind not in REQUEST_KINDS:
        raise ValueError(f"unknown request kind {kind!r}")
    return f"{PREFIX}answer/{kind}/{int(rank)}"


def answered_key(kind: str, rank: int) -> str:
    if kind not in REQUEST_KINDS:
        raise ValueError(f"unknown request kind {kind!r}")
    return f"{PREFIX}answered/{kind}/{int(rank)}"


# Bounds the writer keeps and the reader enforces.
MAX_THREADS: Final = 64  # threads listed in a summary, and stack dumps in an answer
MAX_FRAMES: Final = 64  # frames per thread in a stack answer (innermost first)
MAX_GROUPS: Final = 64  # process groups in a summary or a Flight Recorder answer
MAX_QUEUES: Final = 32
MAX_FR_ENTRIES: Final = 2000  # Flight Recorder entries in an answer (torch's ring holds 2000 by default)
MAX_TEXT_CHARS: Final = 300  # any string (thread names, functions, file paths, op names)


class SummaryKeys:
    """Keys of a rank's summary (``summary/<rank>``)."""

    SCHEMA: Final = "schema"
    RANK: Final = "rank"
    WORLD_SIZE: Final = "world_size"
    LOCAL_RANK: Final = "local_rank"  # from the launcher's LOCAL_RANK (None: not set)
    NODE_RANK: Final = "node_rank"  # from GROUP_RANK (torchrun) or NODE_RANK / SLURM_NODEID (None: not set)
    HOST: Final = "host"
    PID: Final = "pid"
    POSTS: Final = "posts"  # this post's number (1, 2, ...): a summary that stops counting is stale
    POSTED_WALL_S: Final = "posted_wall_s"
    INTERVAL_S: Final = "interval_s"  # the writer posts this often
    FINAL: Final = "final"  # the probe closed (the program is exiting): no later post will come
    STEP: Final = "step"  # the program's step (probes.session's step(), else None)
    STEPS: Final = "steps"  # step() calls
    OPTIMIZER_STEPS: Final = "optimizer_steps"  # optimizer steps the health probe counted (None: not running)
    LAST_STEP_WALL_S: Final = "last_step_wall_s"
    COLL_ENTERED: Final = "coll_entered"  # the collectives probe's numbers (None: not running)
    COLL_COMPLETED: Final = "coll_completed"
    # Seconds this rank's threads spent inside collective calls since the probe armed, on its own clock: two posts
    # give the share of its time it waited for its peers, with no clock skew between nodes (None: not running).
    COLL_IN_S: Final = "coll_in_s"
    COLL_CURRENT: Final = "coll_current"  # the oldest call a thread is in now: {SEQ, OP, THREAD, SINCE_WALL_S}
    SEQ: Final = "seq"
    OP: Final = "op"
    THREAD: Final = "thread"
    SINCE_WALL_S: Final = "since_wall_s"
    GROUPS: Final = "groups"  # per process group, torch's own Flight Recorder sequence numbers (GroupKeys)
    GROUPS_NA: Final = "groups_na"  # why GROUPS is empty
    GIL_SHARE: Final = "gil_share"  # the gil probe's contention share (None: not running)
    GPU_BUSY_PCT: Final = "gpu_busy_pct"  # NVML's utilization of the rank's GPU, when torch.cuda is in use
    THREADS: Final = "threads"  # ThreadKeys rows, busiest first
    QUEUES: Final = "queues"  # QueueRowKeys rows
    REQUESTS_ANSWERED: Final = "requests_answered"


class GroupKeys:
    """A process group's row in a summary or a Flight Recorder answer."""

    PG_ID: Final = "pg_id"  # torch's uid of the group in this process ("0" is the default group)
    NAME: Final = "name"  # the group's name (pg_config key; the entries' process_group[0])
    DESC: Final = "desc"
    RANKS: Final = "ranks"  # global ranks of its members (None: not known)
    LAST_ENQUEUED: Final = "last_enqueued"  # collective sequence numbers (-1: none)
    LAST_STARTED: Final = "last_started"
    LAST_COMPLETED: Final = "last_completed"


class ThreadKeys:
    """A thread's row in a summary, and a thread of a stack answer."""

    NAME: Final = "name"
    TID: Final = "tid"  # native thread id
    CPU_SHARE: Final = "cpu_share"  # from the gil probe's last reading (None: not known)
    WHERE: Final = "where"  # the innermost Python frame: "function (file.py:line)"
    DAEMON: Final = "daemon"
    FRAMES: Final = "frames"  # stack answer: [function, file, line] rows, innermost first
    FRAMES_TRUNCATED: Final = "frames_truncated"


class QueueRowKeys:
    NAME: Final = "name"
    DEPTH: Final = "depth"
    MAXSIZE: Final = "maxsize"


class AnswerKeys:
    """An answer (``answer/<kind>/<rank>``)."""

    SCHEMA: Final = "schema"
    KIND: Final = "kind"
    RANK: Final = "rank"
    REQUEST_ID: Final = "request_id"  # the request answered: a reader takes answers to its id or a later one
    ANSWERED_WALL_S: Final = "answered_wall_s"
    COST_MS: Final = "cost_ms"
    NA: Final = "na"  # why there is nothing (no Flight Recorder in this torch); None otherwise
    TRUNCATED: Final = "truncated"  # bounded: rows were dropped to stay under MAX_ANSWER_BYTES
    THREADS: Final = "threads"  # stacks: ThreadKeys rows with FRAMES
    FR_VERSION: Final = "fr_version"  # flightrec: torch's dump format version ("2.10")
    DUMP_WALL_NS: Final = "dump_wall_ns"  # when the dump was taken, on this rank's clock (time.time_ns())
    GROUPS: Final = "groups"  # flightrec: GroupKeys rows (pg_config joined with pg_status)
    ENTRIES: Final = "entries"  # flightrec: EntryKeys rows, oldest first
    ENTRIES_TOTAL: Final = "entries_total"  # entries torch dumped (before the bound)


class EntryKeys:
    """A Flight Recorder entry, as the probe copies it from torch's dump (frames left out)."""

    RECORD_ID: Final = "record_id"
    PG_ID: Final = "pg_id"
    PG_NAME: Final = "pg_name"  # process_group[0]
    PG_DESC: Final = "pg_desc"  # process_group[1]
    COLLECTIVE_SEQ_ID: Final = "collective_seq_id"
    P2P_SEQ_ID: Final = "p2p_seq_id"
    OP_ID: Final = "op_id"
    IS_P2P: Final = "is_p2p"
    PROFILING_NAME: Final = "profiling_name"  # "gloo:all_reduce", "nccl:broadcast"
    INPUT_SIZES: Final = "input_sizes"
    INPUT_DTYPES: Final = "input_dtypes"
    OUTPUT_SIZES: Final = "output_sizes"
    OUTPUT_DTYPES: Final = "output_dtypes"
    STATE: Final = "state"  # scheduled | started | completed
    RETIRED: Final = "retired"
    TIME_CREATED_NS: Final = "time_created_ns"
    TIME_STARTED_NS: Final = "time_started_ns"  # time_discovered_started_ns (None: not recorded, as with gloo)
    TIME_COMPLETED_NS: Final = "time_completed_ns"
    TIMEOUT_MS: Final = "timeout_ms"
    THREAD_NAME: Final = "thread_name"
