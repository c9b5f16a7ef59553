"""Connections refused at a full listen queue: the threads that matter wait to open a TCP connection to a service
on this machine whose accept queue overflowed.

A listener's ``listen(backlog)`` caps the connections the kernel keeps for it to accept; a SYN that arrives while
the queue is full is dropped (the namespace's ``ListenOverflows`` counts each), and the client's kernel sends it
again only after its retransmission timeout (1 s, then 3 s, 7 s...). A client that opens a connection per request
against a small backlog stalls a second at a time in ``connect`` while its stacks show an ordinary request line.
Seen from the sweeps (``SchedSample.connecting``: the process's sockets still opening, the listener there, its
backlog; ``listen_overflows``) and the stacks (the threads' samples inside ``create_connection``).
"""

from __future__ import annotations

from collections.abc import Iterator

from dflash_diag.analysis.findings._context import Context, lower_bound, pct, speed_threads, threads_text
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.findings.scheduler import child_site
from dflash_diag.model import Finding, Frame, Severity, ThreadStats
from dflash_diag.model.sched import ChildSched, Connecting

RULES = (RuleSpec("listen-queue-full", sampled=True),)

# A warning where the threads that matter spend this share of their samples opening connections (lower bound),
# and the kernel refused connections at a full accept queue in the window.
CONNECT_SHARE = 0.10
SHOWN = 3
# A frame that opens a connection: the standard library's and urllib3's ``create_connection`` (http.client,
# urllib, requests), or a socket's own connect.
_CONNECT_FUNCTIONS = frozenset({"create_connection"})
_SOCKET_CONNECT = frozenset({"connect", "connect_ex"})


def _connecting(frames: tuple[Frame, ...]) -> bool:
    python = [f for f in frames if not f.native][:4]
    return any(f.name in _CONNECT_FUNCTIONS or (f.name in _SOCKET_CONNECT and f.filename.endswith("socket.py"))
               for f in python)


def _connect_share(ctx: Context, t: ThreadStats) -> float:
    rows = ctx.stats_rows(t)
    return sum(1 for sample, _ in rows if _connecting(sample.frames)) / len(rows) if rows else 0.0


def _threads_that_matter(ctx: Context) -> list[ThreadStats]:
    """The threads whose speed is the program's, and those the wait-for graph's limiting path runs through (the
    training thread waits on a queue, whose producers wait on a pool's fetchers): each one's wait is the program's."""
    on_path = {name for hop in ctx.waits.chain for name in (*hop.threads, *(hop.edge.to_threads if hop.edge else ()))}
    matter = {t.name for t in speed_threads(ctx)} | on_path
    return [t for t in ctx.sampled() if t.name in matter and not t.name.startswith("dflash-diag-")]


def check(ctx: Context) -> Iterator[Finding]:
    sweeps = ctx.obs.sched
    counts = [s.listen_overflows for s in sweeps if s.listen_overflows is not None]
    refused = counts[-1] - counts[0] if len(counts) >= 2 else 0
    seen = [c for s in sweeps for c in s.connecting]
    if refused <= 0 or not seen:
        return
    span_s = max(1e-6, sweeps[-1].monotonic_s - sweeps[0].monotonic_s)
    endpoint = max({c.remote for c in seen}, key=lambda r: sum(c.sockets for c in seen if c.remote == r))
    readings = [c for c in seen if c.remote == endpoint]
    with_listener = [c for c in readings if c.backlog is not None]
    last = with_listener[-1] if with_listener else readings[-1]
    waiting = sorted(((t, _connect_share(ctx, t)) for t in _threads_that_matter(ctx) if t.n_samples),
                     key=lambda ts: -ts[1])
    waiting = [(t, s) for t, s in waiting if s > 0]
    share = sum(s for _, s in waiting) / len(waiting) if waiting else 0.0
    samples = sum(t.n_samples for t, _ in waiting)
    costly = bool(waiting) and lower_bound(share, samples) >= CONNECT_SHARE
    listener = _listener_text(ctx, last)
    claim = (f"connections refused at a full listen queue: {listener} listens on {endpoint}"
             + (f" with a backlog of {last.backlog} (its listen())" if last.backlog is not None else "")
             + f", and the kernel refused {refused} connections at a full accept queue in the window "
             f"({refused / span_s:.1f}/s, ListenOverflows); each refused connection waits for its SYN to be sent "
             "again, 1 s later")
    if waiting:
        names = threads_text([t.name for t, _ in waiting], SHOWN)
        claim += f": {names} {'waits' if len(waiting) == 1 else 'wait'} to connect in {pct(share)} of " \
                 f"{'its' if len(waiting) == 1 else 'their'} samples"
    evidence = [
        ("refused at a full accept queue (ListenOverflows)", f"{refused} in {span_s:.1f} s"),
        (f"the process's connections opening to {endpoint}",
         f"in {sum(1 for s in sweeps if any(c.remote == endpoint for c in s.connecting))} of {len(sweeps)} "
         f"sweeps, up to {max(c.sockets for c in readings)} at once, SYNs sent again up to "
         f"{max(c.retransmits for c in readings)} times"),
    ]
    if last.backlog is not None:
        queued = max((c.accept_queue or 0) for c in with_listener)
        evidence.append((f"listener on {endpoint}", f"{listener}: backlog {last.backlog}, accept queue up to {queued} "
                                                    "when read"))
    evidence += [(f"{t.name} opening connections", f"{pct(s)} of its samples (create_connection)")
                 for t, s in waiting[:SHOWN]]
    stages = tuple(sorted({t.stage.value for t, _ in waiting} - {"other"}))
    yield Finding(
        rule_id="listen-queue-full", severity=Severity.WARNING if costly else Severity.INFO, claim=claim,
        evidence=tuple(evidence),
        remedy=("Give the service a backlog that covers its clients' bursts (listen(128) or more; socketserver's "
                "request_queue_size, a web server's --backlog; the kernel caps it at net.core.somaxconn), accept "
                "faster (more accepting threads or processes), or keep connections open (HTTP keep-alive, a "
                "connection pool) instead of one per request."),
        impact=share if costly else 0.0, stages=stages if costly else ())


def _listener_text(ctx: Context, c: Connecting) -> str:
    pid = c.listener_pid
    if pid is None:
        return "a process of this machine"
    if pid == ctx.obs.pid:
        return "this process"
    child = _child(ctx, pid)
    comm = f" (`{child.comm}`)" if child is not None else ""
    return f"its child process {pid}{comm}{child_site(ctx, pid)}"


def _child(ctx: Context, pid: int) -> ChildSched | None:
    for sweep in reversed(ctx.obs.sched):
        for child in sweep.children:
            if child.pid == pid:
                return child
    return None
