"""The wait-for graph of one window: what every thread computes or waits on, and the path from where
throughput is lost to its root. Built by ``analysis.waits``; read by the ``waits`` rules, ``doctor --json``
(the ``waits`` section, docs/findings.md) and ``top``'s Waits tab."""

from __future__ import annotations

from dataclasses import dataclass

# What a thread waits on (the edge's kind). ``target`` says which one: a queue's name, a lock's expression, a
# thread name for the GIL, "cuda:0", "socket", "child process".
WAIT_QUEUE_GET = "queue-get"  # -> the threads that put into that queue
WAIT_QUEUE_PUT = "queue-put"  # -> the threads that get from it
WAIT_LOCK = "lock"  # a with-lock or .acquire() -> the thread holding it, where the code shows it
WAIT_CONDITION = "condition"  # Condition/Event/Semaphore/Barrier wait -> whoever should signal it (unknown)
WAIT_JOIN = "join"  # Thread.join -> the joined thread
WAIT_GIL = "gil"  # runnable but another thread holds the GIL -> that thread
WAIT_GPU = "gpu"  # a host-device sync -> the device
WAIT_IO = "io"  # socket, pipe, file, select -> the peer (outside the process)
WAIT_CHILD = "child"  # a worker process (multiprocessing, subprocess) -> that process
WAIT_SLEEP = "sleep"  # time.sleep: by design
WAIT_COLLECTIVE = "collective"  # a torch.distributed call (all_reduce, barrier...) -> the peer ranks (other processes)
WAIT_OTHER = "other"  # blocked, and nothing tells on what
# A file lock another process holds, or a pipe whose other end is another process (/proc: sources.peers) -> that
# process; ``target`` names it and what it does ("a file lock on `index.lock` held by process 4321 (...)").
WAIT_PROCESS = "process"
WAIT_KINDS = (WAIT_QUEUE_GET, WAIT_QUEUE_PUT, WAIT_LOCK, WAIT_CONDITION, WAIT_JOIN, WAIT_GIL, WAIT_GPU, WAIT_IO,
              WAIT_CHILD, WAIT_SLEEP, WAIT_COLLECTIVE, WAIT_OTHER, WAIT_PROCESS)
# Waits another thread of the process can end (the graph can follow them); the others end outside it.
FOLLOWED = frozenset({WAIT_QUEUE_GET, WAIT_QUEUE_PUT, WAIT_LOCK, WAIT_GIL, WAIT_JOIN})


@dataclass(frozen=True, slots=True)
class WaitEdge:
    """One thing a thread waits on, over the window."""

    kind: str  # one of WAIT_KINDS
    target: str  # which queue / lock / thread / device; "" when unknown
    share: float  # of the thread's samples
    site: str  # the program's line where it waits: "Loader.next_batch (loader.py:33)"; "" when unknown
    to_threads: tuple[str, ...] = ()  # the threads at the other end, where known (holders, producers, consumers)


@dataclass(frozen=True, slots=True)
class ThreadWaits:
    """One thread: how much it computes and where, and what it waits on."""

    name: str
    stage: str
    n_samples: int
    computing_share: float  # python, native, compile, checkpoint recompute
    hot: str  # where it computes: "decode_jpeg (data.py:33) 91%"; "" when it does not
    waits: tuple[WaitEdge, ...]  # biggest first
    cpu_pct: float | None  # % of one core over the window (/proc); None when unknown
    stack_changed: bool  # its innermost program frame moved during the window
    holds: tuple[str, ...] = ()  # locks it holds in its newest sample (with-blocks of the code on disk)


@dataclass(frozen=True, slots=True)
class ChainHop:
    """One step of the limiting path: these threads wait on ``edge`` (None: the root, where they compute)."""

    threads: tuple[str, ...]
    edge: WaitEdge | None
    hot: str = ""  # at the root: where its time goes


@dataclass(frozen=True, slots=True)
class WaitGraph:
    threads: tuple[ThreadWaits, ...]
    # From the threads that lose throughput (those that train, else the consumer stage) to the root.
    chain: tuple[ChainHop, ...]
    progress: bool  # anything moved in the window: CPU time, a changing stack, a step counter
    process_cpu_pct: float | None
    cycle: tuple[str, ...] = ()  # threads waiting on each other's locks, in order; () when none
    trains: tuple[str, ...] = ()  # threads whose stacks run autograd's backward or an optimizer step
    note: str = ""  # why the graph is partial ("too few samples"), "" when whole

    @property
    def root(self) -> ChainHop | None:
        return self.chain[-1] if self.chain else None

    def chain_text(self) -> str:
        """``trainer waits on `batches` 80% <- loader-0 spends 91% in decode_jpeg (data.py:33)``."""
        parts = []
        for hop in self.chain:
            who = ", ".join(hop.threads[:3]) + (f" and {len(hop.threads) - 3} more" if len(hop.threads) > 3 else "")
            what = edge_text(hop.edge) if hop.edge is not None else ("spends " + hop.hot if hop.hot else "computes")
            parts.append(f"{who} {_plural(what) if len(hop.threads) > 1 else what}")
        return " <- ".join(parts)


def _plural(verb_phrase: str) -> str:
    """``waits on ...`` -> ``wait on ...`` for a group of threads."""
    first, _, rest = verb_phrase.partition(" ")
    verb = {"waits": "wait", "spends": "spend", "computes": "compute", "sleeps": "sleep", "is": "are"}.get(first, first)
    return f"{verb} {rest}".rstrip()


def edge_text(edge: WaitEdge) -> str:
    """``waits on `batches` (get) 80% at fit (train.py:12)``."""
    share = f"{100.0 * edge.share:.0f}%"
    at = f" at {edge.site}" if edge.site else ""
    what = {
        WAIT_QUEUE_GET: f"waits on `{edge.target or 'a queue'}` (get, empty)",
        WAIT_QUEUE_PUT: f"waits on `{edge.target or 'a queue'}` (put, full)",
        WAIT_LOCK: f"waits for lock `{edge.target or '?'}`",
        WAIT_CONDITION: f"waits on {edge.target or 'a condition'}",
        WAIT_JOIN: f"waits to join {edge.target or 'a thread'}",
        WAIT_GIL: "waits for the GIL" + (f" (held by {edge.target})" if edge.target else ""),
        WAIT_GPU: f"waits on {edge.target or 'the GPU'}",
        WAIT_IO: f"waits on {edge.target or 'I/O'}",
        WAIT_CHILD: f"waits on {edge.target or 'a child process'}",
        WAIT_SLEEP: "sleeps",
        WAIT_COLLECTIVE: f"waits on the peer ranks in {edge.target or 'a collective'}",
        WAIT_OTHER: "is blocked",
        WAIT_PROCESS: f"waits on {edge.target or 'another process'}",
    }.get(edge.kind, f"waits ({edge.kind})")
    return f"{what} {share}{at}"
