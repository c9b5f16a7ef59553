"""Waits that leave the process, as the wait-for graph names them: a thread blocked on a file lock another process
holds, or on a pipe whose other end is another process (``Observation.outside_waits``, read by
``sources.peers``), with what that process does. Pure.
"""

from __future__ import annotations

from dflash_diag.model import Observation, ThreadSample
from dflash_diag.model.sched import OutsideWait, PeerProcess

# A reading of the thread's wait within this long of a stack sample describes that sample (the readings come with
# every /proc sweep, twice a second; the stacks up to 20 times).
MATCH_S = 0.35
_STATES = {"R": "running", "S": "sleeping", "D": "in the kernel (D)", "T": "stopped", "t": "traced", "Z": "a zombie"}


def outside_wait(obs: Observation, thread: ThreadSample, t_s: float) -> str | None:
    """What ``thread`` waits on outside the process at ``t_s``, as an edge's target; None when nothing was read."""
    tid = thread.os_thread_id
    if tid is None or not obs.outside_waits:
        return None
    near = [w for w in obs.outside_waits if w.tid == tid and abs(w.monotonic_s - t_s) <= MATCH_S and w.peers]
    if not near:
        return None
    wait = min(near, key=lambda w: abs(w.monotonic_s - t_s))
    # One edge per wait, whatever the sample: described by the window's newest reading of the same wait (its
    # peer's CPU use and frame change from sweep to sweep; the edge must not split into one per reading).
    same = [w for w in obs.outside_waits if (w.tid, w.kind, w.target) == (wait.tid, wait.kind, wait.target)
            and w.peers and w.peers[0].pid == wait.peers[0].pid]
    with_cpu = [w for w in same if w.peers[0].cpu_pct is not None]
    return describe((with_cpu or same)[-1])


def describe(wait: OutsideWait) -> str:
    """``a file lock on `/runs/index.lock` held by process 4321 (python syncer.py: running, 97% CPU, in
    compress_chunk (syncer.py:30))``."""
    peers = "; ".join(peer_text(p) for p in wait.peers[:2])
    if wait.kind == "file-lock":
        return f"a file lock on `{wait.target}` held by {peers}"
    if wait.kind == "pipe":
        side = "to" if wait.syscall in ("write", "writev") else "from"
        return f"a pipe {side} {peers}"
    return f"{wait.target} ({peers})"


def peer_text(peer: PeerProcess) -> str:
    what = peer.cmdline or peer.comm
    facts = [_STATES.get(peer.state, peer.state)]
    if peer.cpu_pct is not None:
        facts.append(f"{peer.cpu_pct:.0f}% CPU")
    if peer.top_frame:
        facts.append(f"in {peer.top_frame}")
    relation = f" (its {peer.relation})" if peer.relation in ("child", "parent", "sibling") else ""
    return f"process {peer.pid}{relation} `{what}`: {', '.join(facts)}"
