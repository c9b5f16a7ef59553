"""The wait-for graph: what every thread computes or waits on, who is at the other end, and the path from the
threads that lose throughput to the root. Pure.

Each sample of each thread is either work (python, native, compile, checkpoint recompute) or a wait, and a wait
is an edge to what it waits for:

- a queue's ``get`` -> the threads that put into that queue; its ``put`` -> the threads that get from it (queue
  names come from the program's line, ``self.batches.get()`` is ``batches``, and from the calls in each thread's
  functions on disk: ``analysis.stages``);
- a lock (a ``with X:`` or ``X.acquire()`` line the thread is parked on) -> the threads whose code holds ``X``
  (their frames sit inside a ``with X:`` block on disk: ``sources.outside``);
- the GIL -> the thread that held it in the same dump;
- a condition, an event, a join, the GPU, a socket or pipe, a child process, a sleep: edges that end outside
  what the stacks can follow, named with the line where the thread waits.

The chain starts at the threads that train (their stacks run autograd's backward or an optimizer step; else
the consumer stage; else the main thread) and follows their largest wait while it costs them at least
``CHAIN_WAIT_SHARE`` of their time, until it reaches threads that compute (the root: where their time goes) or a
wait that leaves the process. Progress (anything computing, a stack that moves, CPU time, a step counter) and
lock cycles make hangs and deadlocks claims with evidence rather than guesses.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dflash_contract.board import SessionKeys
from dflash_contract.settings import AREA_DEBUG, AREA_STARTUP, ENV_BY_NAME
from dflash_diag.analysis.classify import explain
from dflash_diag.analysis.collectives import collective_op
from dflash_diag.analysis.frames import user_frames
from dflash_diag.analysis.hotspots import hot_functions, library_text, spots_text
from dflash_diag.analysis.peers import launcher_first, outside_wait, own_settings, setting_text
from dflash_diag.analysis.sampled import Sampled, classified, process_cpu_pct
from dflash_diag.analysis.stages import QUEUE_CALL, queue_name, queue_use_of
from dflash_diag.model import NA, Frame, Maybe, Stage, ThreadSample, ThreadState, ThreadStats
from dflash_diag.model.evidence import is_library_file
from dflash_diag.model.waits import (
    FOLLOWED,
    WAIT_CHILD,
    WAIT_COLLECTIVE,
    WAIT_CONDITION,
    WAIT_GIL,
    WAIT_GPU,
    WAIT_IO,
    WAIT_JOIN,
    WAIT_LOCK,
    WAIT_OTHER,
    WAIT_PROCESS,
    WAIT_QUEUE_GET,
    WAIT_QUEUE_PUT,
    WAIT_SLEEP,
    ChainHop,
    ThreadWaits,
    WaitEdge,
    WaitGraph,
)

MIN_SAMPLES = 3  # a thread seen fewer times says nothing about its waits
CHAIN_WAIT_SHARE = 0.30  # a wait that costs a thread this share of its time is worth following
EDGE_MIN_SHARE = 0.05  # smaller waits are not listed
WORK_SHARE = 0.10  # a thread computing in this share of its samples is making progress
IDLE_CPU_PCT = 3.0  # below this share of one core over the window, the process did no work
THREAD_RUNS_PCT = 0.2  # a thread that used 2 ms a second ran: it is not blocked for good
MAX_HOPS = 6
_TOOL_THREADS = ("dflash-diag-",)
_WORK = frozenset({ThreadState.PYTHON, ThreadState.NATIVE, ThreadState.COMPILE, ThreadState.CHECKPOINT})
_CONDITION_WAITS = {"Condition.wait": "a Condition", "Condition.wait_for": "a Condition", "Event.wait": "an Event",
                    "Semaphore.acquire": "a Semaphore", "BoundedSemaphore.acquire": "a Semaphore",
                    "Barrier.wait": "a Barrier", "Barrier._wait": "a Barrier"}
# The main thread parks in threading._shutdown when the program's code is done and its threads are not.
_JOIN_WAITS = {"Thread.join", "Thread._wait_for_tstate_lock", "_wait_for_tstate_lock", "_shutdown"}
_CHILD_FILES = ("multiprocessing/pool.py", "multiprocessing/connection.py", "multiprocessing/popen_fork.py",
                "multiprocessing/popen_spawn_posix.py", "multiprocessing/queues.py", "concurrent/futures/process.py",
                "subprocess.py", "multiprocessing/managers.py")
# A thread pool's futures: a thread parked in Future.result()/wait()/as_completed() waits for the pool's workers
# (concurrent.futures runs every submitted call in a thread whose frames start in thread.py's _worker).
_FUTURE_FILES = ("concurrent/futures/_base.py",)
_POOL_WORKER_FILE = "concurrent/futures/thread.py"
POOL_FUTURES = "a thread pool's futures"
_IO_FILES = ("socket.py", "selectors.py", "ssl.py", "asyncio/", "http/client.py", "urllib/", "requests/", "urllib3/")
_TRAINING_FILES = ("torch/autograd/__init__.py", "torch/_tensor.py", "torch/optim/")
_TRAINING_NAMES = ("backward", "step", "_single_tensor_adamw", "_multi_tensor_adamw", "adamw", "adam", "sgd")


@dataclass(frozen=True, slots=True)
class _Row:
    t_s: float
    thread: ThreadSample
    state: ThreadState
    gil_holder: str | None  # the thread holding the GIL in the same dump


def build(ctx: Sampled) -> WaitGraph:
    """The wait-for graph of ``ctx``'s window."""
    rows = _rows(ctx)
    stats = {t.name: t for t in ctx.threads}
    uses = _queue_uses(ctx, rows)
    nodes = [_node(ctx, name, rs, stats.get(name)) for name, rs in rows.items()
             if len(rs) >= MIN_SAMPLES and not name.startswith(_TOOL_THREADS)]
    workers = frozenset(name for name, rs in rows.items() if is_pool_worker(rs[-1].thread))
    nodes = [_linked(n, nodes, uses, workers) for n in nodes]
    cpu = process_cpu_pct(ctx.obs)
    progress = _progress(ctx, nodes, cpu)
    note = "" if nodes else f"no thread has {MIN_SAMPLES} samples in the window"
    return WaitGraph(threads=tuple(sorted(nodes, key=lambda n: (-n.computing_share, n.name))),
                     chain=_chain(ctx, nodes, rows, uses), progress=progress, process_cpu_pct=cpu,
                     cycle=_lock_cycle(nodes), note=note, trains=training_threads(nodes, rows))


def graph_of(sampled: Sampled) -> Maybe[WaitGraph]:
    """:func:`build`, never raising: the graph, or why it could not be built (``analyse`` builds it once, before the
    rules run, and records the reason among its errors)."""
    try:
        return build(sampled)
    except Exception as exc:  # an analysis bug is shown, never raised
        return NA(f"wait-for graph failed: {type(exc).__name__}: {exc}")


# --- rows -------------------------------------------------------------------------------------------------------


def _rows(ctx: Sampled) -> dict[str, list[_Row]]:
    """Every thread's samples with their states and the GIL holder of the same dump, in time order, by name."""
    by_tid = {t.os_thread_id: t for t in ctx.threads if t.os_thread_id is not None}
    by_name = {t.name: t for t in ctx.threads if t.os_thread_id is None}
    holders: dict[int, str | None] = {}  # by the dump (its id: the dumps of the window live as long as this)
    out: dict[str, list[_Row]] = {}
    for sample, thread, stats, state in classified(ctx.obs, ctx.threads):
        if id(sample) not in holders:
            holder_thread = next((t for t in sample.threads if t.owns_gil), None)
            holder = _stats_of(holder_thread, by_tid, by_name) if holder_thread is not None else None
            holders[id(sample)] = holder.name if holder is not None else None
        out.setdefault(stats.name, []).append(_Row(sample.monotonic_s, thread, state, holders[id(sample)]))
    return out


def _stats_of(thread: ThreadSample, by_tid: Mapping[int, ThreadStats],
              by_name: Mapping[str, ThreadStats]) -> ThreadStats | None:
    if thread.os_thread_id is not None:
        return by_tid.get(thread.os_thread_id)
    return by_name.get(thread.name or "")


# --- what one sample waits on --------------------------------------------------------------------------------


def _site(frame: Frame | None) -> str:
    if frame is None:
        return ""
    # The format of every place a report names: ``decode (data.py:33)``, as the hot spots are written.
    return f"{frame.name} ({frame.short_filename}:{frame.line})" if frame.line else f"{frame.name} ({frame.short_filename})"


def wait_of(ctx: Sampled, row: _Row) -> tuple[str, str, str] | None:
    """(kind, target, site) of what the sample waits on; None when it works."""
    state = row.state
    thread = row.thread
    # Off a CPU, without the GIL, while /proc saw it blocked on a file lock or a pipe another process holds (a C call
    # leaves no frame of its own: its stack reads as computing at the calling line): that process.
    off_cpu = not thread.active and not thread.owns_gil
    elsewhere = outside_wait(ctx.obs, thread, row.t_s, ctx.outside_sites, ctx.child_places) if off_cpu else None
    if elsewhere is None and state in _WORK:
        return None
    own = user_frames(thread)
    site = _site(own[0]) if own else ""
    if elsewhere is not None:
        return WAIT_PROCESS, elsewhere, site
    if state is ThreadState.GIL_WAIT:
        return WAIT_GIL, row.gil_holder or "", site
    if state is ThreadState.GPU_WAIT:
        return WAIT_GPU, "the GPU", site
    if state in (ThreadState.QUEUE_GET, ThreadState.QUEUE_PUT):
        kind = WAIT_QUEUE_GET if state is ThreadState.QUEUE_GET else WAIT_QUEUE_PUT
        return kind, _queue_at(ctx, own[0]) if own else "", site
    return _idle_wait(ctx, thread, own, site)


def _queue_at(ctx: Sampled, frame: Frame) -> str:
    match = QUEUE_CALL.search(ctx.line_text(frame) or "")
    return queue_name(match.group(1)) if match is not None else ""


def _idle_wait(ctx: Sampled, thread: ThreadSample, own: Sequence[Frame], site: str) -> tuple[str, str, str]:
    op = collective_op(thread, ctx.obs.line_text)
    if op is not None:  # the peer ranks are other processes: the job's analysis follows this edge (analysis.job)
        return WAIT_COLLECTIVE, op, site
    python = [f for f in thread.frames if not f.native]
    library = list(itertools.takewhile(lambda f: is_library_file(f.filename), python))
    # A pool's apply() parks in threading's Condition.wait: what it waits for is the child, not the condition.
    if any(marker in f.filename for f in library for marker in _CHILD_FILES):
        call = (ctx.line_text(own[0]) or "").strip() if own else ""
        return WAIT_CHILD, f"a child process (`{call[:80]}`)" if call else "a child process", site
    # ... and a thread pool's futures park there too: what they wait for is the pool's worker threads.
    if any(marker in f.filename for f in library for marker in _FUTURE_FILES):
        return WAIT_CONDITION, POOL_FUTURES, site
    for frame in python:
        if not is_library_file(frame.filename):
            break
        path = frame.filename
        if path.endswith("threading.py"):
            if frame.name in _JOIN_WAITS:
                return WAIT_JOIN, "a thread", site
            if frame.name in _CONDITION_WAITS:
                return WAIT_CONDITION, _CONDITION_WAITS[frame.name], site
        if any(marker in path for marker in _IO_FILES):
            return WAIT_IO, "a socket", site
    if own:
        line = ctx.code.get((own[0].filename, own[0].line))
        if line is not None and line.acquires:
            return WAIT_LOCK, line.acquires, site
        text = ctx.line_text(own[0]) or ""
        if "sleep(" in text:
            return WAIT_SLEEP, "", site
        if ".acquire(" in text or text.lstrip().startswith("with "):
            return WAIT_LOCK, text.strip().removeprefix("with ").rstrip(":")[:60], site
        if ".join(" in text:
            return WAIT_JOIN, "a thread", site
        if ".wait(" in text:
            return WAIT_CONDITION, "an event", site
        if any(call in text for call in (".recv(", ".read(", ".readline(", ".accept(", "select(", "input(")):
            return WAIT_IO, "a read", site
    return WAIT_OTHER, "", site


# --- one thread --------------------------------------------------------------------------------------------


def _node(ctx: Sampled, name: str, rows: list[_Row], stats: ThreadStats | None) -> ThreadWaits:
    n = len(rows)
    waits: Counter[tuple[str, str]] = Counter()
    sites: dict[tuple[str, str], Counter[str]] = {}
    working = 0
    for row in rows:
        found = wait_of(ctx, row)
        if found is None:
            working += 1
            continue
        kind, target, site = found
        waits[(kind, target)] += 1
        sites.setdefault((kind, target), Counter())[site] += 1
    edges = tuple(WaitEdge(kind=k, target=t, share=c / n, site=sites[(k, t)].most_common(1)[0][0])
                  for (k, t), c in waits.most_common() if c / n >= EDGE_MIN_SHARE)
    spots = hot_functions(((r.thread, r.state) for r in rows), n=2)
    cpu = stats.cpu_pct if stats is not None and isinstance(stats.cpu_pct, float) else None
    return ThreadWaits(name=name, stage=stats.stage if stats is not None else Stage.OTHER, n_samples=n,
                       computing_share=working / n, hot=spots_text(spots) if working else "", waits=edges,
                       cpu_pct=cpu, stack_changed=_moved(rows), holds=_holds(ctx, rows[-1].thread))


def _moved(rows: Sequence[_Row]) -> bool:
    """The thread's innermost Python frame was not the same in every sample."""
    seen = {next(((f.filename, f.name, f.line) for f in r.thread.frames if not f.native), None) for r in rows}
    return len(seen) > 1


def _holds(ctx: Sampled, thread: ThreadSample) -> tuple[str, ...]:
    held: dict[str, None] = {}
    for frame in user_frames(thread):
        line = ctx.code.get((frame.filename, frame.line))
        for lock in line.holds if line is not None else ():
            held.setdefault(lock, None)
    return tuple(held)


def _queue_uses(ctx: Sampled, rows: Mapping[str, list[_Row]]) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """Thread name -> (queues it puts into, queues it gets from): from its samples and its functions on disk."""
    out = {}
    for name, rs in rows.items():
        puts, gets = queue_use_of([(r.thread, r.state) for r in rs], ctx.code, ctx.obs)
        out[name] = (frozenset(puts), frozenset(gets))
    return out


def _linked(node: ThreadWaits, nodes: Sequence[ThreadWaits],
            uses: Mapping[str, tuple[frozenset[str], frozenset[str]]],
            workers: frozenset[str] = frozenset()) -> ThreadWaits:
    """Fill each edge's far end: producers of a queue it gets from, holders of a lock it wants, the GIL holder, the
    worker threads of the thread pools whose futures it waits on (``workers``)."""
    others = [n for n in nodes if n.name != node.name]
    linked = []
    for edge in node.waits:
        to: tuple[str, ...] = ()
        if edge.kind in (WAIT_QUEUE_GET, WAIT_QUEUE_PUT):
            side = 0 if edge.kind == WAIT_QUEUE_GET else 1  # get waits on putters, put on getters
            named = tuple(n.name for n in others if edge.target and edge.target in uses.get(n.name, ((), ()))[side])
            # The two sides may name one queue differently (a parameter `out` is the caller's `batches`): any
            # thread on the other side of some queue, that does not itself wait on this one the same way.
            to = named or tuple(n.name for n in others if uses.get(n.name, ((), ()))[side]
                                and not any(e.kind == edge.kind and e.target == edge.target for e in n.waits))
        elif edge.kind == WAIT_LOCK:
            to = tuple(n.name for n in others if edge.target in n.holds)
            if not to:
                # One lock, two spellings: `a.lock` where the caller holds it, `Registry.lock` (self.lock) inside
                # the method that waits for it. The attribute's name is what both keep.
                attr = edge.target.rsplit(".", 1)[-1]
                to = tuple(n.name for n in others if any(h.rsplit(".", 1)[-1] == attr for h in n.holds))
        elif edge.kind == WAIT_GIL and edge.target:
            to = (edge.target,) if edge.target != node.name else ()
        elif edge.kind == WAIT_CONDITION and edge.target == POOL_FUTURES:
            to = tuple(n.name for n in others if n.name in workers)
        linked.append(WaitEdge(kind=edge.kind, target=edge.target, share=edge.share, site=edge.site, to_threads=to))
    return ThreadWaits(name=node.name, stage=node.stage, n_samples=node.n_samples,
                       computing_share=node.computing_share, hot=node.hot, waits=tuple(linked), cpu_pct=node.cpu_pct,
                       stack_changed=node.stack_changed, holds=node.holds)


# --- progress, cycles ----------------------------------------------------------------------------------------


def _progress(ctx: Sampled, nodes: Sequence[ThreadWaits], cpu_pct: float | None) -> bool:
    if any(n.computing_share >= WORK_SHARE or n.stack_changed for n in nodes):
        return True
    if cpu_pct is not None and cpu_pct >= IDLE_CPU_PCT:
        return True
    # A thread blocked for good runs not at all; one whose few milliseconds of work land in no sample (a consumer
    # of a slow socket) still runs a little: the kernel's count says so where the samples cannot.
    if any(n.cpu_pct is not None and n.cpu_pct >= THREAD_RUNS_PCT for n in nodes):
        return True
    first, last = ctx.first_board, ctx.board
    if first is not None and last is not None and first is not last:
        a, b = first.session.get(SessionKeys.STEPS), last.session.get(SessionKeys.STEPS)
        if isinstance(a, int) and isinstance(b, int) and b > a:
            return True
    return False


def _lock_cycle(nodes: Sequence[ThreadWaits]) -> tuple[str, ...]:
    """Threads that each wait (most of the window) for a lock the next one holds, back to the first."""
    wants = {}
    for n in nodes:
        edge = next((e for e in n.waits if e.kind == WAIT_LOCK and e.share >= 0.5 and e.to_threads), None)
        if edge is not None:
            wants[n.name] = edge.to_threads
    for start in sorted(wants):
        path = [start]
        while True:
            nxt = next((t for t in wants.get(path[-1], ()) if t in wants), None)
            if nxt is None:
                break
            if nxt == start:
                return tuple(path)
            if nxt in path:
                break
            path.append(nxt)
    return ()


# --- the chain ------------------------------------------------------------------------------------------------


def _chain(ctx: Sampled, nodes: Sequence[ThreadWaits], rows: Mapping[str, list[_Row]],
           uses: Mapping[str, tuple[frozenset[str], frozenset[str]]]) -> tuple[ChainHop, ...]:
    by_name = {n.name: n for n in nodes}
    start = start_threads(ctx, nodes, rows, uses)
    hops: list[ChainHop] = []
    visited: set[str] = set()
    group = [by_name[n] for n in start if n in by_name]
    while group and len(hops) < MAX_HOPS:
        visited.update(n.name for n in group)
        edge = _group_wait(group)
        onward = [by_name[t] for t in edge.to_threads if t in by_name and t not in visited] if edge else []
        if edge is None or (_followed(edge) and not onward and len(hops) > 0):
            # It computes more than it waits, or it waits only on threads already on the path (a loader blocked
            # now and then on the full queue it feeds): the root.
            hops.append(ChainHop(threads=tuple(n.name for n in group), edge=None, hot=_group_hot(ctx, group, rows)))
            break
        hops.append(ChainHop(threads=tuple(n.name for n in group), edge=edge))
        if not _followed(edge):
            child = _children_hop(ctx) if edge.kind == WAIT_CHILD else None
            if child is not None:
                hops.append(child)
            break
        group = onward
    return tuple(hops)


def is_pool_worker(thread: ThreadSample) -> bool:
    """A thread pool's worker: its frames start in ``concurrent/futures/thread.py``'s ``_worker``."""
    return any(_POOL_WORKER_FILE in f.filename for f in thread.frames)


def _followed(edge: WaitEdge) -> bool:
    """A wait another thread of the process ends, whose threads are known: followed to them."""
    return edge.kind in FOLLOWED or (edge.kind == WAIT_CONDITION and bool(edge.to_threads))


def children_text(ctx: Sampled) -> str:
    """``child process 4321 spends ShardWriter.write (exporter.py:41) 100%, most of it inside gzip.py (...)``: where
    the sampled children spend their time, as the wait chain says it at its end; "" when none was sampled."""
    hop = _children_hop(ctx)
    return WaitGraph(threads=(), chain=(hop,), progress=True, process_cpu_pct=None).chain_text() if hop else ""


def _children_hop(ctx: Sampled) -> ChainHop | None:
    """The root behind a wait on a child process: where the sampled children spend their working samples."""
    samples = ctx.obs.children
    if not samples:
        return None
    pids = tuple(dict.fromkeys(f"child process {s.pid}" for s in samples))
    rows = [(thread, explain(thread).state) for sample in samples for thread in sample.threads]
    # A child's thread that is neither on a CPU nor holding the GIL waits: on what, its line says (a lock it
    # inherited held across fork, a pipe back to the parent).
    waits: Counter[tuple[str, str, str]] = Counter()
    for thread, _ in rows:
        if thread.active or thread.owns_gil:
            continue
        own = user_frames(thread)
        waits[_idle_wait(ctx, thread, own, _site(own[0]) if own else "")] += 1
    busy = sum(1 for thread, _ in rows if thread.active or thread.owns_gil)
    if waits:
        (kind, target, site), count = waits.most_common(1)[0]
        if count > busy and kind in (WAIT_LOCK, WAIT_CONDITION, WAIT_JOIN):
            return ChainHop(threads=pids, edge=WaitEdge(kind=kind, target=target, share=count / len(rows), site=site))
    working = [(t, s) for t, s in rows if t.active or t.owns_gil]
    starting = _start_up(ctx, [t for t, _ in working])
    if starting:
        return ChainHop(threads=pids, edge=None, hot=starting)
    spots = hot_functions(working or rows, n=2)
    if not spots:
        return ChainHop(threads=pids, edge=WaitEdge(kind=WAIT_OTHER, target="", share=1.0, site=""))
    # what the children's hot line spends its time in, where one library function holds most of it (a compressor's
    # write, an encoder): the line reads like a cheap call
    place = library_text(working, of="their samples on a CPU") if working else library_text(rows)
    return ChainHop(threads=pids, edge=None, hot=spots_text(spots) + place)


# A child process's sample is its start-up, not its work, inside the import system (its frozen bootstrap frames) or
# inside multiprocessing's preparation of a child it started with a fresh interpreter (which runs the parent's main
# module again, from the top, before the child's task).
_IMPORT_FILES = ("<frozen importlib._bootstrap",)
_PREPARE = {"/multiprocessing/spawn.py": "spawn", "/multiprocessing/forkserver.py": "forkserver"}
_PREPARE_CALLS = frozenset({"prepare", "_fixup_main_from_path", "import_main_path"})
STARTING_UP = "their time starting up, not working"
STARTING_SHARE = 0.5  # of the children's working samples: they spend their time starting, not working


def _start_up(ctx: Sampled, working: Sequence[ThreadSample]) -> str:
    """Where the children's working samples are mostly their start-up, what they start: the share importing
    modules, the line of the parent's main module run again (a fresh interpreter per child) and the start method
    their stacks show; "" when they mostly work."""
    starting = [t for t in working if _starting(t)]
    if not working or len(starting) / len(working) < STARTING_SHARE:
        return ""
    share = len(starting) / len(working)
    methods = Counter(method for t in starting for f in t.frames if not f.native
                      for path, method in _PREPARE.items() if f.filename.endswith(path) and f.name in _PREPARE_CALLS)
    text = f"{STARTING_UP}: {share:.0%} of their samples import modules"
    if methods:
        method = methods.most_common(1)[0][0]
        text += (f", a fresh interpreter each that runs the parent's main module again (multiprocessing's '{method}' "
                 f"start method)")
    reruns = Counter(_rerun_line(ctx, t) for t in starting)
    reruns.pop("", None)
    if reruns:
        text += f", at {reruns.most_common(1)[0][0]}"
    settings = _start_up_settings(ctx)
    if settings:
        text += "; started with " + ", ".join(settings)
    return text


def _start_up_settings(ctx: Sampled) -> tuple[str, ...]:
    """The known settings the children were started with that change what a start costs (the bytecode cache,
    import-time diagnostics: ``dflash_contract.settings``' startup and debug areas), from the environments /proc
    read of them (``OsFacts.children_env``), each once with its effect and default."""
    facts = ctx.obs.os_facts
    start_up = [(e.name, e.value) for e in (facts.children_env if facts is not None else ())
                if (var := ENV_BY_NAME.get(e.name)) is not None and var.area in (AREA_STARTUP, AREA_DEBUG)
                and not var.is_default(e.value)]
    return tuple(setting_text(name, value) for name, value in launcher_first(start_up, own_settings(ctx.obs))[:2])


def _starting(thread: ThreadSample) -> bool:
    return any(not f.native and (f.filename.startswith(_IMPORT_FILES) or
                                 (f.name in _PREPARE_CALLS and f.filename.endswith(tuple(_PREPARE))))
               for f in thread.frames)


def _rerun_line(ctx: Sampled, thread: ThreadSample) -> str:
    """The program's own line a start-up sample is under (an import at the top of its main module, run again)."""
    frame = next((f for f in reversed(thread.frames) if not f.native and not is_library_file(f.filename)
                  and not f.filename.startswith("<")), None)
    if frame is None:
        return ""
    text = ctx.line_text(frame)
    return _site(frame) + (f" `{text.strip()[:60]}`" if text else "")


def start_threads(ctx: Sampled, nodes: Sequence[ThreadWaits], rows: Mapping[str, list[_Row]],
                  uses: Mapping[str, tuple[frozenset[str], frozenset[str]]]) -> tuple[str, ...]:
    """The threads that lose throughput when something is slow: those that train (backward, optimizer step),
    else the pipeline's end (threads that get from a queue and put into none), else the consumer stage, else the
    main thread."""
    training = training_threads(nodes, rows)
    if training:
        return training
    # The end of the pipeline: threads that take from a queue and feed none.
    sinks = tuple(n.name for n in nodes if any(e.kind == WAIT_QUEUE_GET for e in n.waits)
                  and not any(e.kind == WAIT_QUEUE_PUT for e in n.waits) and not uses.get(n.name, ((), ()))[0])
    if sinks:
        return sinks
    consumers = tuple(n.name for n in nodes if n.stage == Stage.DRAFTER)
    if consumers:
        return consumers
    return tuple(n.name for n in nodes if n.name == "MainThread")


def training_threads(nodes: Sequence[ThreadWaits], rows: Mapping[str, list[_Row]]) -> tuple[str, ...]:
    return tuple(n.name for n in nodes if any(_trains(r.thread) for r in rows.get(n.name, ())))


def _trains(thread: ThreadSample) -> bool:
    return any(not f.native and f.filename.endswith(_TRAINING_FILES[:2]) and f.name.rsplit(".", 1)[-1] == "backward"
               or (not f.native and _TRAINING_FILES[2] in f.filename
                   and f.name.rsplit(".", 1)[-1] in _TRAINING_NAMES) for f in thread.frames)


def _group_wait(group: Sequence[ThreadWaits]) -> WaitEdge | None:
    """The group's largest wait (mean share over its threads), when it costs at least CHAIN_WAIT_SHARE and more
    than the group computes in that time; its far end is the union of its threads' far ends."""
    totals: dict[tuple[str, str], float] = {}
    sites: dict[tuple[str, str], str] = {}
    to: dict[tuple[str, str], dict[str, None]] = {}
    for n in group:
        for e in n.waits:
            key = (e.kind, e.target if e.kind != WAIT_GIL else "")
            totals[key] = totals.get(key, 0.0) + e.share / len(group)
            sites.setdefault(key, e.site)
            for t in e.to_threads:
                to.setdefault(key, {})[t] = None
    if not totals:
        return None
    (kind, target), share = max(totals.items(), key=lambda kv: kv[1])
    computing = sum(n.computing_share for n in group) / len(group)
    if share < CHAIN_WAIT_SHARE or share < computing or kind == WAIT_SLEEP:
        return None
    holders = tuple(t for t in to.get((kind, target), {}) if t not in {n.name for n in group})
    if kind == WAIT_GIL:
        target = ", ".join(holders[:2])
    return WaitEdge(kind=kind, target=target, share=share, site=sites[(kind, target if kind != WAIT_GIL else "")],
                    to_threads=holders)


def _group_hot(ctx: Sampled, group: Sequence[ThreadWaits], rows: Mapping[str, list[_Row]]) -> str:
    samples = [(r.thread, r.state) for n in group for r in rows.get(n.name, ())]
    spots = hot_functions(samples, n=2)
    return spots_text(spots)


__all__ = ["CHAIN_WAIT_SHARE", "build", "graph_of", "start_threads", "wait_of"]
