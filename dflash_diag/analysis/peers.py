"""Waits that leave the process, as the wait-for graph names them: a thread blocked on a file lock another process
holds, or on a pipe whose other end is another process (``Observation.outside_waits``, read by
``sources.peers``), with what that process does. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace

from dflash_contract.settings import AREA_DEBUG, AREA_IO, ENV_BY_NAME
from dflash_diag.analysis.classify import explain
from dflash_diag.analysis.hotspots import library_place, read_departures
from dflash_diag.analysis.libc import chains_text
from dflash_diag.analysis.native import native_spots, spots_text
from dflash_diag.analysis.settings import control_effect
from dflash_diag.model import Observation, ThreadSample
from dflash_diag.model.analysis import Analysis
from dflash_diag.model.common import is_na
from dflash_diag.model.sched import SENDING_CALLS, OutsideWait, PeerProcess, TcpSender

# A reading of the thread's wait within this long of a stack sample describes that sample (the readings come with
# every /proc sweep, twice a second; the stacks up to 20 times).
MATCH_S = 0.35
# The stack sample that shows where a reading's blocking call was made: the thread's nearest off-CPU one, this close.
# The stacks' clock is py-spy's output read as it comes: on a loaded box it runs a tenth of a second or more behind
# the sweeps', so one reading alone may land nearer another line's off-CPU sample; the line most readings of the same
# wait land on is the wait's (``wait_sites``).
SITE_MATCH_S = MATCH_S
_STATES = {"R": "running", "S": "sleeping", "D": "in the kernel (D)", "T": "stopped", "t": "traced", "Z": "a zombie"}


# A blocking call's place: the thread and its innermost Python frame (the line that made the C call).
SiteKey = tuple[int, str, int]


# A thread parked in these waits for another thread of its own process, whatever a /proc reading says it was in.
_IN_PROCESS_WAITS = ("/threading.py", "/queue.py")


def _site_key(thread: ThreadSample) -> SiteKey | None:
    frame = next((f for f in thread.frames if not f.native), None)
    if thread.os_thread_id is None or frame is None or frame.filename.endswith(_IN_PROCESS_WAITS):
        return None
    return thread.os_thread_id, frame.filename, frame.line


def _nearest(obs: Observation, tid: int, t_s: float) -> OutsideWait | None:
    near = [w for w in obs.outside_waits if w.tid == tid and abs(w.monotonic_s - t_s) <= MATCH_S and w.peers]
    return min(near, key=lambda w: abs(w.monotonic_s - t_s)) if near else None


def wait_sites(obs: Observation) -> dict[SiteKey, OutsideWait]:
    """The lines where a thread was seen blocked on another process: for each /proc reading of the wait, the
    thread's off-CPU stack sample nearest to it, within SITE_MATCH_S; of one wait's readings (its thread, kind and
    target), the line most of them land on, and any other line two of them do. The sweeps read twice a second, the
    stacks up to 20 times: every other off-CPU sample of the same thread at the same line is the same blocking call
    between two sweeps (a line makes one C call)."""
    off_cpu: dict[int, list[tuple[float, SiteKey]]] = {}
    for sample in obs.stacks if obs.outside_waits else ():
        for thread in sample.threads:
            key = None if thread.active or thread.owns_gil else _site_key(thread)
            if key is not None:
                off_cpu.setdefault(key[0], []).append((sample.monotonic_s, key))
    # one wait -> its readings' lines: (key, distance in seconds, the reading)
    votes: dict[tuple[int, str, str], list[tuple[SiteKey, float, OutsideWait]]] = {}
    for wait in obs.outside_waits:
        seen = off_cpu.get(wait.tid)
        if not wait.peers or not seen:
            continue
        t_s, key = min(seen, key=lambda s: abs(s[0] - wait.monotonic_s))
        if abs(t_s - wait.monotonic_s) <= SITE_MATCH_S:
            votes.setdefault((wait.tid, wait.kind, wait.target), []).append((key, abs(t_s - wait.monotonic_s), wait))
    out: dict[SiteKey, OutsideWait] = {}
    for readings in votes.values():
        count: dict[SiteKey, int] = {}
        for key, _, _ in readings:
            count[key] = count.get(key, 0) + 1
        best = max(count.values())
        for key, _, wait in sorted(readings, key=lambda r: r[1]):
            # a second line of the same wait (a header read, then the body) stands where two readings saw it
            if key not in out and (count[key] == best or count[key] >= 2):
                out[key] = wait
    return out


def outside_wait(obs: Observation, thread: ThreadSample, t_s: float,
                 sites: Mapping[SiteKey, OutsideWait] | None = None,
                 places: Mapping[int, str] | None = None) -> str | None:
    """What an off-CPU ``thread`` waits on outside the process at ``t_s``, as an edge's target; None when nothing
    was read. With ``sites`` (``wait_sites``) that know the thread's blocking line, a sample is the wait exactly when
    it is at that line; without, the reading nearest in time (within MATCH_S) stands for it."""
    tid = thread.os_thread_id
    if tid is None or not obs.outside_waits:
        return None
    key = _site_key(thread)
    if sites and any(k[0] == tid for k in sites):
        wait = sites.get(key) if key is not None else None
    else:
        wait = _nearest(obs, tid, t_s) if key is not None else None
    if wait is None:
        return None
    # One edge per wait, whatever the sample: described by the window's newest reading of the same wait (its
    # peer's CPU use and frame change from sweep to sweep; the edge must not split into one per reading).
    same = [w for w in obs.outside_waits if (w.tid, w.kind, w.target) == (wait.tid, wait.kind, wait.target)
            and w.peers and w.peers[0].pid == wait.peers[0].pid]
    with_cpu = [w for w in same if w.peers[0].cpu_pct is not None]
    newest = (with_cpu or same)[-1]
    # Whether the other end waits too is a state of the moment: said where half the readings or more saw it.
    back = 2 * sum(1 for w in same if w.peer_waits_back) >= len(same)
    return describe(replace(newest, peer_waits_back=back), child_places(obs) if places is None else places,
                    own_settings(obs))


def own_settings(obs: Observation) -> frozenset[tuple[str, str]]:
    """The watched process's own known settings (name, shown value), against which a peer's are told apart: the
    ones a launcher gave the peer, and the ones it only inherited."""
    facts = obs.os_facts
    env = facts.env if facts is not None and not is_na(facts.env) else ()
    return frozenset((e.name, e.value) for e in env if e.where in ("process", "program"))  # type: ignore[union-attr]


def describe(wait: OutsideWait, places: Mapping[int, str] | None = None,
             own: frozenset[tuple[str, str]] = frozenset()) -> str:
    """``a file lock on `/runs/index.lock` held by process 4321 (python syncer.py: running, 97% CPU, in
    compress_chunk (syncer.py:30))``; with ``places`` (:func:`child_places`), a peer that is a sampled child
    process also says the library function its samples spend most in: one reading's frame is a moment, the samples
    are the window."""
    places = places or {}
    peers = "; ".join(peer_text(p, wait.kind, own) + (f", {places[p.pid]}" if p.pid in places else "")
                      for p in wait.peers[:2])
    side = "to" if wait.syscall in ("write", "writev") else "from"
    if wait.kind == "file-lock":
        return f"a file lock on `{wait.target}` held by {peers}"
    if wait.kind == "pipe":
        return f"a pipe {side} {peers}" + _capacity_text(wait.pipe_capacity_bytes)
    if wait.kind == "pty":
        return (f"a pseudo-terminal ({wait.target}) {side} {peers}: its bytes pass the kernel's terminal layer (line "
                "discipline, output processing, a kernel worker that pushes them to the reading side), which a pipe "
                "skips")
    if wait.kind == "socket":
        sending = wait.syscall in SENDING_CALLS
        text = f"a {wait.target} connection {'to' if sending else 'from'} {peers}"
        limit = sender_limit_text(wait.sender, this_end=sending)
        if wait.peer_waits_back:
            text += (", which waits reading the same connection: both ends wait for bytes in flight, not for each "
                     "other's work")
            if not limit:  # nothing the kernel accounts holds the bytes back: the commonest cause, as a candidate
                text += (" (one known cause: a small write held back by Nagle's algorithm, TCP_NODELAY off, until "
                         "the other end's delayed acknowledgement, ~40 ms on Linux)")
        return text + limit
    return f"{wait.target} ({peers})"


# The sender was held back by a window or a buffer this share of the time it had data to send.
LIMITED_SHARE = 0.5


def sender_limit_text(sender: TcpSender | None, *, this_end: bool = False) -> str:
    """"; its socket sends at most 37.5 MB/s (SO_MAX_PACING_RATE: the kernel paces every byte)" where the
    connection's sending end has a pacing cap, or was held back by the receiver's window or its own send buffer
    for most of the time it had data to send (tcp_info's own accounting); "" otherwise."""
    if sender is None:
        return ""
    who, receiver = ("this end", "the other end's") if this_end else ("the sending end", "this end's")
    if sender.max_pacing_rate_bytes_s:
        return (f"; {who}'s socket sends at most {_rate_text(sender.max_pacing_rate_bytes_s)} "
                "(SO_MAX_PACING_RATE: the kernel paces every byte it sends to that rate)")
    busy = sender.busy_ms or 0.0
    if busy <= 0:
        return ""
    rwnd, sndbuf = (sender.rwnd_limited_ms or 0.0) / busy, (sender.sndbuf_limited_ms or 0.0) / busy
    if rwnd >= LIMITED_SHARE:
        return (f"; {who} was held back by {receiver} receive window {100.0 * rwnd:.0f}% of the time it had data to "
                "send (the receiving socket's buffer: SO_RCVBUF, net.ipv4.tcp_rmem)")
    if sndbuf >= LIMITED_SHARE:
        return (f"; {who} was held back by its own send buffer {100.0 * sndbuf:.0f}% of the time it had data to "
                "send (SO_SNDBUF, net.ipv4.tcp_wmem)")
    return ""


def _rate_text(bytes_s: int) -> str:
    return f"{bytes_s / 1e6:.1f} MB/s ({bytes_s * 8 / 1e6:.0f} Mbit/s)"


# A peer on a CPU this much of the time between two reads computes flat out.
COMPUTING_PEER_CPU_PCT = 80.0


def only_computes(obs: Observation, tid: int) -> bool:
    """The thread's wait on another process is on a producer that only computes: a pipe's or a socket's other end
    running flat out (COMPUTING_PEER_CPU_PCT of a core, the newest reading: on a CPU, or runnable and waiting for
    one, as a busy process on a crowded machine is), its time in its own user-space code, its calls and
    settings unremarkable. The wait is then a pipeline stage that lives in another process and limits throughput, as
    an in-process stage with no cause found does: nothing about it is the matter, however long the thread waits."""
    readings = [w for w in obs.outside_waits if w.tid == tid and w.peers and w.peers[0].cpu_pct is not None]
    if not readings or readings[-1].kind not in ("pipe", "socket"):
        return False
    wait = readings[-1]
    peer = wait.peers[0]
    assert peer.cpu_pct is not None
    return (wants_cpu_pct(peer) >= COMPUTING_PEER_CPU_PCT and (peer.kernel_pct or 0.0) < KERNEL_HEAVY_PCT
            and not small_calls_text(peer, wait.kind) and not peer_settings(peer, own_settings(obs),
                                                                             small_writes=_tiny_writes(peer))
            and not peer.controls and not wait.peer_waits_back)


def wants_cpu_pct(peer: PeerProcess) -> float:
    """How much of a core the peer wanted between its two reads: its CPU, and its main thread's wait for one."""
    return (peer.cpu_pct or 0.0) + (peer.cpu_wait_pct or 0.0)


# A peer's wait for a CPU this share of the time or more is said with its CPU: it wants more than it got.
PEER_CPU_WAIT_PCT = 10.0


def child_places(obs: Observation) -> dict[int, str]:
    """What is known of where another process's time goes, by PID: a sampled child's library place
    (``hotspots.library_place``: "most of its time inside json/encoder.py (80% of its samples)"), and a looked-at
    peer's C code and C library calls (``Observation.peer_native``: ``native.native_spots``, ``libc.chains_text``),
    and the values the run's configuration changed that a peer's script reads (``SourceFile.run_by``); processes
    with none of these are left out. Read once per analysis (``Sampled.child_places``)."""
    by_pid: dict[int, list[ThreadSample]] = {}
    for sample in obs.children:
        by_pid.setdefault(sample.pid, []).extend(sample.threads)
    places = {pid: library_place([(t, explain(t).state) for t in threads]) for pid, threads in by_pid.items()}
    out = {pid: f"most of its time {place}" for pid, place in places.items() if place}
    # The script a peer runs (``SourceFile.run_by``): the values the run's configuration changed that it reads.
    for script in (f for f in obs.files if f.run_by):
        said = read_departures(obs.files, [script])
        if said:
            text = f"its script reads {said}"
            out[script.run_by] = f"{out[script.run_by]}; {text}" if script.run_by in out else text
    for look in obs.peer_native:
        spots = native_spots(look.profile.stacks)  # the C code under its Python lines (an extension, a library)
        calls = "; ".join(x for x in (f"its native samples: {spots_text(spots)}" if spots else "",
                                      chains_text(look.profile.stacks, dict(look.env))) if x)
        if calls:
            out[look.pid] = f"{out[look.pid]}; {calls}" if look.pid in out else calls
    return out


# At most this many other processes get a native look after a window (each is paused while py-spy reads it).
MAX_PEER_LOOKS = 2


def peers_to_look_at(analysis: Analysis) -> tuple[int, ...]:
    """The other processes whose native stacks would say where their time goes: Python processes a finding names
    as what a thread waits on (``process PID``), busy (BUSY_PEER_CPU_PCT) with KERNEL_HEAVY_PCT of their CPU or
    more in the kernel at their newest reading (system calls, which only their C frames name), and not looked at
    yet; busiest first, at most MAX_PEER_LOOKS. Not a peer that computes in user space: its look would run beside
    the process's own, which stops the process while py-spy reads it, and a producer whose reader is stopped
    blocks in its writes, samples that read as work (a twin's decoder child read 95% in `write` that way)."""
    obs = analysis.observation
    looked = {look.pid for look in obs.peer_native}
    claims = " ".join(f.claim for f in analysis.findings)
    newest: dict[int, PeerProcess] = {}
    for wait in obs.outside_waits:
        for peer in wait.peers:
            if peer.cpu_pct is not None:
                newest[peer.pid] = peer
    busy = [p for p in newest.values()
            if p.pid not in looked and is_python(p) and re.search(rf"\bprocess {p.pid}\b", claims)
            and (p.cpu_pct or 0.0) >= BUSY_PEER_CPU_PCT and (p.kernel_pct or 0.0) >= KERNEL_HEAVY_PCT]
    return tuple(p.pid for p in sorted(busy, key=lambda p: -(p.cpu_pct or 0.0)))[:MAX_PEER_LOOKS]


def is_python(peer: PeerProcess) -> bool:
    """The peer runs a Python interpreter (its name or its command's program), which py-spy can read."""
    return peer.comm.startswith("python") or peer.cmdline.split(" ", 1)[0].rsplit("/", 1)[-1].startswith("python")


# The controls a peer's cgroup sets (sources.sched.CPU_QUOTA, MEMORY_LIMIT, IO_LIMIT): their values name the group.
_CGROUP_CONTROLS = frozenset({"a CPU quota", "a memory limit", "an I/O limit"})


def peer_text(peer: PeerProcess, kind: str = "", own: frozenset[tuple[str, str]] = frozenset()) -> str:
    what = peer.cmdline or peer.comm
    facts = [_STATES.get(peer.state, peer.state)]
    if peer.cpu_pct is not None:
        kernel = ""
        if peer.kernel_pct is not None and peer.cpu_pct >= BUSY_PEER_CPU_PCT and peer.kernel_pct >= KERNEL_HEAVY_PCT:
            kernel = f" ({peer.kernel_pct:.0f}% of it in the kernel)"
        facts.append(f"{peer.cpu_pct:.0f}% CPU{kernel}")
        if (peer.cpu_wait_pct or 0.0) >= PEER_CPU_WAIT_PCT:
            facts.append(f"waiting for a CPU {peer.cpu_wait_pct:.0f}% of the time")
    if peer.top_frame:
        facts.append(f"in {peer.top_frame}")
    calls = small_calls_text(peer, kind)
    if calls:
        facts.append(calls)
    # What the kernel does to it first: each control is read from the kernel, a cgroup's only where it binds.
    if peer.controls:
        shown = peer.controls[:2]
        # A group's limit says its cgroup in its value; the rest are read from the peer's /proc status.
        source = "" if all(name in _CGROUP_CONTROLS for name, _ in shown) else " (its /proc status)"
        facts.append("the kernel runs it with " + ", ".join(
            f"{name} {value}" + (f" ({effect})" if (effect := control_effect(name)) else "")
            for name, value in shown) + source)
    settings = peer_settings(peer, own, small_writes=_tiny_writes(peer))
    if settings:
        facts.append("started with " + ", ".join(setting_text(name, value) for name, value in settings))
    if peer.env_differs:
        facts.append(env_differs_text(peer.env_differs))
    if peer.sched_differs:
        facts.append("the scheduler runs it, against this process's main thread, at " + ", ".join(
            f"{what} {theirs} (here {own})" for what, theirs, own in peer.sched_differs))
    if peer.limits_differ:
        facts.append("its resource limits, against this process's: " + ", ".join(
            f"{name} {theirs} (here {own})" for name, theirs, own in peer.limits_differ[:3]))
    relation = f" (its {peer.relation})" if peer.relation in ("child", "parent", "sibling") else ""
    return f"process {peer.pid}{relation} `{what}`: {', '.join(facts)}"


def env_differs_text(names: tuple[str, ...]) -> str:
    """"its environment, against this process's at start, sets LD_FOO, changes PATH and lacks TZ" (names only)."""
    groups = [(verb, [n[1:] for n in names if n[:1] == mark]) for verb, mark in
              (("sets", "+"), ("changes", "~"), ("lacks", "-"))]
    parts = [f"{verb} {', '.join(found)}" for verb, found in groups if found]
    joined = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
    return f"its environment, against this process's at start, {joined}"


PEER_SETTINGS_SHOWN = 2


def peer_settings(peer: PeerProcess, own: frozenset[tuple[str, str]] = frozenset(), *,
                  small_writes: bool = False) -> tuple[tuple[str, str], ...]:
    """The peer's settings worth saying: the interpreter's only for a Python peer, a launcher's first
    (:func:`launcher_first`). Settings it only inherited from the watched process are said only where what was
    measured of the peer is what they do (an unbuffered stream where its writes are tiny): the same environment
    is everywhere in the job, and beside a busy peer an unweighed one reads as its cause."""
    python = is_python(peer)

    def said(name: str, value: str) -> bool:
        if name.startswith("PYTHON") and not python:
            return False  # only the interpreter reads these
        var = ENV_BY_NAME.get(name)
        if var is not None and var.is_default(value):
            return False  # set to what the default does (PYTHONMALLOC=pymalloc): nothing to say (older recordings)
        if (name, value) not in own:
            return True  # a launcher gave it
        return small_writes and var is not None and var.area == AREA_IO

    # Diagnostics' settings first (a debug mode, a linker that reports or re-resolves): they cost on every call,
    # where a pool size or a locale costs only where their code runs.
    ordered = sorted(launcher_first([s for s in peer.settings if said(*s)], own), key=lambda s: not _costs_everywhere(s[0]))
    return tuple(ordered[:PEER_SETTINGS_SHOWN])


def _costs_everywhere(name: str) -> bool:
    var = ENV_BY_NAME.get(name)
    return var is not None and var.area == AREA_DEBUG


def launcher_first(settings: Iterable[tuple[str, str]], own: frozenset[tuple[str, str]]
                   ) -> tuple[tuple[str, str], ...]:
    """Of another process's settings (name, shown value), those the watched process does not share (a launcher gave
    them), else those it inherited; each name once, first seen."""
    given: dict[str, str] = {}
    inherited: dict[str, str] = {}
    for name, value in settings:
        (inherited if (name, value) in own else given).setdefault(name, value)
    return tuple((given or inherited).items())


def setting_text(name: str, value: str) -> str:
    """"LC_ALL=C.UTF-8 (the C library's locale for everything ...; default: LC_* and LANG, else C)"."""
    var = ENV_BY_NAME.get(name)
    return f"{name}={value}" + (f" ({var.effect}; default: {var.default})" if var is not None else "")


# A peer busy at this share of a core whose CPU goes this much to the kernel works in system calls, not its code.
BUSY_PEER_CPU_PCT = 30.0
KERNEL_HEAVY_PCT = 30.0
# Calls this frequent carrying this few bytes each are the peer's cost: a system call per field or separator where a
# buffer would make one per several KiB (an unbuffered stream, a flush per write, input read a byte at a time).
SMALL_CALLS_PER_S = 2_000.0
TINY_CALL_BYTES = 32.0
# A socket peer that both reads and writes this often, in messages up to this size, serves requests one at a time:
# the waiting thread's every call is a round trip to it.
MESSAGE_BYTES = 4096.0


def small_calls_text(peer: PeerProcess, kind: str = "") -> str:
    """What the peer's system calls say between two reads (/proc/PID/io): "513,250 write calls a second of 3
    bytes each on average: a system call per few bytes (...)" for tiny calls; on a socket, "it reads 10,139 and
    writes 5,070 times a second, 97 and 176 bytes a call: request and reply messages, a round trip per call" for a
    server answering small requests; "" otherwise."""
    reads, writes = _per_call(peer.read_calls_per_s, peer.read_bytes_per_s), \
        _per_call(peer.write_calls_per_s, peer.written_bytes_per_s)
    said = []
    for rate, verb, why in ((writes, "write", "its output is not buffered, or flushed on every write"),
                            (reads, "read",
                             "its input read a few bytes at a time: unbuffered, or many small files or messages")):
        if rate is not None and rate[1] <= TINY_CALL_BYTES:
            said.append(f"{rate[0]:,.0f} {verb} calls a second of {rate[1]:.0f} bytes each on average: a system call "
                        f"per few bytes ({why})")
    if said or kind != "socket" or reads is None or writes is None:
        return "; ".join(said)
    if max(reads[1], writes[1]) <= MESSAGE_BYTES:
        return (f"it reads {reads[0]:,.0f} and writes {writes[0]:,.0f} times a second, {reads[1]:.0f} and "
                f"{writes[1]:.0f} bytes a call: request and reply messages, a round trip per call")
    return ""


def _tiny_writes(peer: PeerProcess) -> bool:
    """The peer writes many calls of a few bytes each (what an unbuffered stream does)."""
    writes = _per_call(peer.write_calls_per_s, peer.written_bytes_per_s)
    return writes is not None and writes[1] <= TINY_CALL_BYTES


def _per_call(calls_per_s: float | None, bytes_per_s: float | None) -> tuple[float, float] | None:
    """(calls a second, bytes a call) where the calls are many (SMALL_CALLS_PER_S); None otherwise."""
    if calls_per_s is None or bytes_per_s is None or calls_per_s < SMALL_CALLS_PER_S:
        return None
    return calls_per_s, bytes_per_s / calls_per_s


# Linux's pipe capacity unless a program sets another (F_SETPIPE_SZ; pipe(7)): 16 pages.
DEFAULT_PIPE_CAPACITY_BYTES = 65536


def _capacity_text(capacity: int | None) -> str:
    """"; the pipe's capacity is 4 KiB, set below Linux's default 64 KiB (F_SETPIPE_SZ): ..." for a capacity set
    away from the default; "" for the default or none read."""
    if capacity is None or capacity <= 0 or capacity == DEFAULT_PIPE_CAPACITY_BYTES:
        return ""
    size = f"{capacity // 1024} KiB" if capacity >= 1024 else f"{capacity} bytes"
    if capacity < DEFAULT_PIPE_CAPACITY_BYTES:
        return (f"; the pipe's capacity is {size}, set below Linux's default 64 KiB (F_SETPIPE_SZ): its writer can "
                "get only that far ahead of its reader, and what it sends crosses in pieces of that size")
    return f"; the pipe's capacity is {size}, set above Linux's default 64 KiB (F_SETPIPE_SZ)"
