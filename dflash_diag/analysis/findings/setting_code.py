"""A setting that puts the program's time into code it chose: the cause is the setting, the cost its code's share.

- ``setting-slows-code``: a process-wide setting away from its default (``analysis.settings.non_default``) decides a
  known mechanism (``analysis.mechanisms``: a catalogue entry's ``settings``), and a thread whose speed is the
  program's spends a measured share of its working samples in that mechanism's code: torch.load's restricted
  unpickler forced by ``TORCH_FORCE_WEIGHTS_ONLY_LOAD``, warnings printed on every call by ``PYTHONWARNINGS``,
  protobuf's pure-Python runtime chosen by its variable, strcoll under the collation of ``LC_ALL``.

- ``compile-disabled``: a setting that turns a compiler off (``PYTORCH_JIT=0``, ``TORCHDYNAMO_DISABLE``,
  ``TORCH_COMPILE_DISABLE``, ``NUMBA_DISABLE_JIT``) while the program's functions decorated to be compiled by it
  (``@torch.jit.script``, ``@torch.compile``, ``@njit``: the source on disk says so) hold a measured share of a
  weighed thread's working samples: they run in the interpreter, op by op, with the GIL held.

- ``proxy-relay``: the process's environment names an HTTP proxy on this machine (``http_proxy=http://127.0.0.1:
  3128``) and a weighed thread waits on a socket while the process's connections go to that proxy (the connections
  it closed, or a blocked read whose other end is there): every request is relayed through a second process and a
  second connection. A warning where the relay's onward connections go to this machine too (a local service's
  requests, which ``no_proxy`` would send straight there); information otherwise.

The threads weighed are those whose speed is the program's, those on the wait-for graph's limiting path, the threads
filling a queue they wait on, and the thread holding the GIL they wait for (a loader unpickling in Python slows the
trainer through the GIL, not through its queue). The share is of the thread's working samples (its waits left out)
and is the most the setting costs there; the same setting at a harmless value leaves no time in that code and draws
nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from dflash_contract.code_knobs import KNOB_BY_NAME, SQL_PREFIX
from dflash_contract.settings import PROXY_VARS, loopback_proxy
from dflash_diag.analysis.findings._context import Context, pct, speed_threads
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.findings.gil import native_gil_wait
from dflash_diag.analysis.hotspots import declared_default_text
from dflash_diag.analysis.mechanisms import (
    MIN_SHARE,
    NOT_WORK,
    Seen,
    line_mechanisms,
    native_mechanisms,
    python_mechanisms,
)
from dflash_diag.analysis.native import thread_stacks
from dflash_diag.analysis.sched import TIME_WAIT_S
from dflash_diag.analysis.settings import non_default
from dflash_diag.analysis.waits import is_pool_worker
from dflash_diag.model import Finding, Severity, ThreadState, ThreadStats
from dflash_diag.model.sched import SettingReading
from dflash_diag.model.waits import WAIT_IO, WAIT_QUEUE_GET, WaitGraph

RULES = (RuleSpec("setting-slows-code", sampled=True, produces=("gil-contention",)),
         RuleSpec("compile-disabled", sampled=True, produces=("gil-contention",)),
         RuleSpec("proxy-relay", sampled=True))

# Of a speed thread's working samples in the setting's code: a warning from here (the time a default would mostly
# save), information from the mechanisms' own floor (MIN_SHARE).
WARNING_SHARE = 0.20
# A speed thread waiting for the GIL this share of its samples makes the thread holding it most one to weigh.
GIL_WAIT_SHARE = 0.10
# A speed thread waiting on a queue this share of its samples makes the threads filling it ones to weigh.
FEED_WAIT_SHARE = 0.10


@dataclass(frozen=True, slots=True)
class _Hit:
    reading: SettingReading
    seen: Seen
    thread: str
    why: str  # "" for a thread whose speed is the program's; else how it slows one
    # The other settings set away from their defaults that decide the same mechanism (the CA bundle's several
    # variables): one finding names them all.
    also: tuple[SettingReading, ...] = ()


# A setting that turns a compiler off: (the compiler, the decorators that ask it to compile a function).
_TORCH_COMPILE = ("torch.compile", ("torch.compile", "compile", "torch._dynamo.optimize", "dynamo.optimize"))
COMPILERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "PYTORCH_JIT": ("TorchScript", ("torch.jit.script", "jit.script", "script", "torch.jit.script_if_tracing")),
    "TORCHDYNAMO_DISABLE": _TORCH_COMPILE,
    "TORCH_COMPILE_DISABLE": _TORCH_COMPILE,
    "NUMBA_DISABLE_JIT": ("numba", ("numba.jit", "numba.njit", "jit", "njit", "numba.vectorize", "vectorize",
                                    "numba.guvectorize", "guvectorize", "numba.stencil", "stencil")),
}


def check(ctx: Context) -> Iterator[Finding]:
    readings = {r.name: r for r in non_default(ctx.obs)}
    readings.update(_code_knobs(ctx))
    if not readings:
        return
    weighed = weighed_threads(ctx)
    yield from _code_of_settings(ctx, readings, weighed)
    yield from _compilers_off(ctx, readings, weighed)
    yield from _proxy_relay(ctx, readings, weighed)


Weighed = list[tuple[ThreadStats, str]]  # a thread, and how it slows one whose speed is the program's ("": it is one)


def _code_of_settings(ctx: Context, readings: dict[str, SettingReading], weighed: Weighed) -> Iterator[Finding]:
    hits: dict[str, _Hit] = {}
    for thread, why in weighed:
        rows = ctx.stats_rows(thread)
        tids = {thread.os_thread_id} if thread.os_thread_id is not None else set()
        seen = (*python_mechanisms(rows, shown=None), *native_mechanisms(thread_stacks(ctx.obs.native, tids), shown=None),
                *line_mechanisms(rows, ctx.obs.line_text))
        for s in seen:
            for name in (*s.mechanism.settings, *s.mechanism.arguments):
                reading = readings.get(name)
                best = hits.get(name)
                if reading is not None and (best is None or s.share > best.seen.share):
                    hits[name] = _Hit(reading, s, thread.name, why)
    by_mechanism: dict[str, _Hit] = {}
    for hit in sorted(hits.values(), key=lambda h: -h.seen.share):  # one finding a mechanism, its best hit
        first = by_mechanism.get(hit.seen.mechanism.text)
        if first is None:
            by_mechanism[hit.seen.mechanism.text] = hit
        else:
            by_mechanism[hit.seen.mechanism.text] = replace(first, also=(*first.also, hit.reading))
    for hit in by_mechanism.values():
        yield _finding(hit)


# Where a setting the program passes in its own code comes from, as the reading's source says it.
CODE_SOURCE = "the program's code"


def _code_knobs(ctx: Context) -> dict[str, SettingReading]:
    """The catalogued settings the program's files pass (``SourceFile.knobs``) at a value other than the library's
    default (a literal that is the default is left out; a value read from the program's configuration is unknown
    here and kept: the time in the code it decides says whether it is away from the default), as readings: the
    first use of each name."""
    out: dict[str, SettingReading] = {}
    for file in ctx.obs.files:
        if file.run_by:  # another process's script (a server child): its settings are not this process's
            continue
        for use in file.knobs:
            knob = KNOB_BY_NAME.get(use.name)
            if knob is None or use.name in out or (use.value and use.value == knob.default):  # a default: harmless
                continue
            value = use.value or (f"<its configuration's `{use.key}`>" if use.key else "<computed at run time>")
            default = declared_default_text(ctx.obs.files, use.key) if use.configured_in else ""
            if use.via:  # a name the code computed from the configuration: that name, then the key it came from
                value = f"{use.via} (`{use.key}` = {use.value} in {use.configured_in}{default})" \
                    if use.configured_in else f"{use.via} (computed from its configuration's `{use.key}`)"
            elif use.configured_in:  # read from the configuration file the process was started with
                value = f"{use.value} (`{use.key}` in {use.configured_in}{default})"
            where = f"{file.path.rsplit('/', 1)[-1]}:{use.line}"
            if use.name.startswith(SQL_PREFIX):  # SQL text: the statement as the program runs it
                call = f'{use.call}("{use.name} = {value}")'
            elif knob.position is not None:  # the call's own argument: sys.set_coroutine_origin_tracking_depth(64)
                call = f"{use.call}({value})"
            else:
                call = f"{use.name}={value}" if use.call == "{...}" else f"{use.call}({use.name}={value})"
            out[use.name] = SettingReading(area="code", name=use.name, value=value, default=knob.default,
                                           source=CODE_SOURCE, effect=knob.effect, detail=f"{call} at {where}")
    return out


def weighed_threads(ctx: Context) -> Weighed:
    """The threads whose speed is the program's and those on the wait-for graph's limiting path (the training
    threads down to its root), the threads filling a queue they wait on, and the one holding the GIL they wait for
    (with how each of the last two slows them)."""
    graph = ctx.waits
    path = {name for hop in graph.chain for name in hop.threads} if isinstance(graph, WaitGraph) else set()
    speed = list(speed_threads(ctx))
    speed += [t for t in ctx.threads if t.name in path and t.n_samples > 0 and all(t.name != s.name for s in speed)]
    out = [(t, "") for t in speed]
    out += _feeders(ctx, speed, graph)
    held = gil_holder(ctx, speed)
    if held is not None:
        hog, waiter = held
        if all(t.name != hog.name for t, _ in out):
            out.append((hog, f"; {hog.name} holds the GIL {waiter.name} waits for ({hog.gil_held_pct:.0f}% of the "
                             "time)"))
    return out


def gil_holder(ctx: Context, speed: list[ThreadStats] | None = None) -> tuple[ThreadStats, ThreadStats] | None:
    """(the thread holding the GIL a speed thread waits for, that waiter), where one waits for it GIL_WAIT_SHARE of
    its samples or more (or doctor's native look says so); None otherwise."""
    speed = list(speed_threads(ctx)) if speed is None else speed
    native = native_gil_wait(ctx, speed)
    if native is not None:
        waiter, _, hog = native
    else:
        waiter = max(speed, key=lambda t: t.shares.get(ThreadState.GIL_WAIT, 0.0), default=None)
        if waiter is None or waiter.shares.get(ThreadState.GIL_WAIT, 0.0) < GIL_WAIT_SHARE:
            return None
        hog = max((t for t in ctx.threads if t.n_samples > 0 and t.name != waiter.name and t.gil_held_pct > 0),
                  key=lambda t: t.gil_held_pct, default=None)
    return (hog, waiter) if hog is not None else None


def _feeders(ctx: Context, speed: list[ThreadStats], graph: object) -> list[tuple[ThreadStats, str]]:
    """The threads that fill a queue a speed thread waits on FEED_WAIT_SHARE of its samples or more (one hop of
    the wait-for graph: its edge's producers), with that wait: their time is the consumer's wait."""
    if not isinstance(graph, WaitGraph):
        return []
    names = {t.name for t in speed}
    by_name = {t.name: t for t in ctx.threads if t.n_samples > 0}
    out: list[tuple[ThreadStats, str]] = []
    for waits in graph.threads:
        if waits.name not in names:
            continue
        for edge in waits.waits:
            if edge.kind != WAIT_QUEUE_GET or edge.share < FEED_WAIT_SHARE:
                continue
            if not edge.to_threads:
                out += _unseen_fillers(ctx, names, waits.name, edge.target, edge.share, out)
            for name in edge.to_threads:
                if name in by_name and name not in names and all(name != t.name for t, _ in out):
                    out.append((by_name[name], f"; {waits.name} waits on `{edge.target}`, which it fills, "
                                               f"{pct(edge.share)} of its samples"))
    return out


MAX_UNSEEN_FILLERS = 4


def _unseen_fillers(ctx: Context, names: set[str], waiter: str, target: str, share: float,
                    weighed: list[tuple[ThreadStats, str]]) -> list[tuple[ThreadStats, str]]:
    """Where no thread is seen filling the queue a speed thread waits on (its put never blocks, or runs in a pool
    an event loop hands it), the process's other sampled threads, a pool's workers and the tool's own left out: one
    of them fills it."""
    out: list[tuple[ThreadStats, str]] = []
    for t in ctx.threads:
        if t.n_samples == 0 or t.name in names or t.name.startswith("dflash-diag-") or \
                any(t.name == w.name for w, _ in (*weighed, *out)) or \
                any(is_pool_worker(s) for s, _ in ctx.stats_rows(t)[-1:]):
            continue
        out.append((t, f"; {waiter} waits on `{target}` {pct(share)} of its samples, and no thread is seen filling "
                       "it"))
    return out[:MAX_UNSEEN_FILLERS]


def _finding(hit: _Hit) -> Finding:
    r, seen = hit.reading, hit.seen
    severity = Severity.WARNING if seen.share >= WARNING_SHARE else Severity.INFO
    in_code = r.source == CODE_SOURCE
    setting = f"{r.detail} (default {r.default})" if in_code else f"{r.text()} ({r.source})"
    verb = "puts"
    if hit.also:  # several settings decide the code: each is named, none is singled out
        setting += "".join(f", {a.detail} (default {a.default})" if a.source == CODE_SOURCE
                           else f", {a.text()} ({a.source})" for a in hit.also)
        verb = "put"
    return Finding(
        rule_id="setting-slows-code", severity=severity,
        claim=f"{setting} {verb} {hit.thread}'s time into {seen.mechanism.text}: "
              f"{pct(seen.share)} of its working samples run there (`{seen.where}`){hit.why}",
        evidence=((r.detail if in_code else r.text(), f"{r.source}; default {r.default}: {r.effect}"),
                  ("time in that code", f"{pct(seen.share)} of {hit.thread}'s working samples, most in "
                                        f"`{seen.where}`")),
        remedy=seen.mechanism.remedy + "." if seen.mechanism.remedy else (
            f"Pass {r.name} at its default ({r.default}), or leave it out, where this code runs per item"
            if in_code else f"Set {r.name} back to its default ({r.default}) for training runs, or keep it only "
            "where it is needed (one call, one process)") + ".",
        impact=seen.share if severity >= Severity.WARNING else 0.0)


def _compilers_off(ctx: Context, readings: dict[str, SettingReading], weighed: Weighed) -> Iterator[Finding]:
    for name, (compiler, decorators) in COMPILERS.items():
        reading = readings.get(name)
        if reading is None:
            continue
        best: tuple[float, ThreadStats, str, str, str] | None = None
        for thread, why in weighed:
            share, function, decorator = _decorated_share(ctx, thread, frozenset(decorators))
            if share >= MIN_SHARE and (best is None or share > best[0]):
                best = (share, thread, why, function, decorator)
        if best is not None:
            yield _compiler_finding(reading, compiler, *best)


def _decorated_share(ctx: Context, thread: ThreadStats, decorators: frozenset[str]) -> tuple[float, str, str]:
    """(share of the thread's working samples inside a function of the program decorated with one of
    ``decorators``, the commonest such function, its decorator)."""
    working = [t for t, state in ctx.stats_rows(thread) if state not in NOT_WORK]
    if not working:
        return 0.0, "", ""
    hits: dict[tuple[str, str], int] = {}
    for sample in working:
        for frame in sample.frames:
            code = None if frame.native else ctx.code.get((frame.filename, frame.line))
            decorator = next((d for d in code.decorators if d in decorators), None) if code is not None else None
            if decorator is not None and code is not None:
                key = (f"{code.function or frame.name} ({frame.short_filename})", decorator)
                hits[key] = hits.get(key, 0) + 1
                break
    if not hits:
        return 0.0, "", ""
    (function, decorator), _ = max(hits.items(), key=lambda kv: kv[1])
    return sum(hits.values()) / len(working), function, decorator


def _compiler_finding(r: SettingReading, compiler: str, share: float, thread: ThreadStats, why: str, function: str,
                      decorator: str) -> Finding:
    severity = Severity.WARNING if share >= WARNING_SHARE else Severity.INFO
    return Finding(
        rule_id="compile-disabled", severity=severity,
        claim=f"{r.text()} ({r.source}) turns {compiler} off: `{function}`, decorated @{decorator} to be compiled, "
              f"runs as plain Python, op by op with the GIL held; {thread.name} spends {pct(share)} of its working "
              f"samples in it{why}",
        evidence=((r.text(), f"{r.source}; default {r.default}: {r.effect}"),
                  ("decorated code", f"`{function}` is decorated @{decorator} in the source on disk"),
                  ("time in it", f"{pct(share)} of {thread.name}'s working samples")),
        remedy=f"Unset {r.name} for training runs (it is meant for debugging the compiled code), or keep it to the "
               "process being debugged.",
        impact=share if severity >= Severity.WARNING else 0.0)


# A weighed thread waiting on a socket this share of its samples, while the connections go to the proxy.
PROXY_WAIT_SHARE = 0.30
# Another loopback endpoint closing at least 1/UPSTREAM_RATIO as many connections as the proxy's: the relay's own.
UPSTREAM_RATIO = 4


def _port_if_local(endpoint: str) -> int | None:
    """``127.0.0.1:3128`` / ``http://localhost:3128`` -> 3128 where the host is this machine's loopback (the
    catalogue's ``loopback_proxy``; the TCP facts' ``[v6]:port``, which says nothing of where it is, never is)."""
    url = loopback_proxy(endpoint)
    return int(url.rsplit(":", 1)[1]) if url is not None else None


def _proxy_relay(ctx: Context, readings: dict[str, SettingReading], weighed: Weighed) -> Iterator[Finding]:
    proxy = next((r for name in PROXY_VARS if (r := readings.get(name)) is not None
                  and _port_if_local(r.value) is not None), None)
    graph = ctx.waits
    if proxy is None or not isinstance(graph, WaitGraph):
        return
    port = _port_if_local(proxy.value)
    facts = ctx.obs.os_facts
    churn = [(endpoint, n) for endpoint, n in (facts.closed_connections if facts is not None else ())
             if _port_if_local(endpoint) is not None]
    closed = sum(n for endpoint, n in churn if _port_if_local(endpoint) == port)
    relays = [w for w in ctx.obs.outside_waits if w.kind == "socket" and _port_if_local(w.target.removeprefix("TCP "))
              == port]
    names = {t.name for t, _ in weighed}
    waiting = [(t.name, e.share) for t in graph.threads if t.name in names for e in t.waits
               if e.kind == WAIT_IO and e.share >= PROXY_WAIT_SHARE]
    if not (closed or relays) or not waiting:
        return
    thread, share = max(waiting, key=lambda w: w[1])
    # The relay's own connections onward, where they go to this machine too (another loopback port closing about
    # as often): the requests it relays are for a local service, which no_proxy would have sent straight there.
    upstream = max(((e, n) for e, n in churn if _port_if_local(e) != port and n * UPSTREAM_RATIO >= closed),
                   key=lambda en: en[1], default=None)
    bypass = next((r for name in ("no_proxy", "NO_PROXY") if (r := readings.get(name)) is not None), None)
    bypass_text = (f"{bypass.name} is empty" if bypass is not None and not bypass.value.strip()
                   else f"{bypass.text()}" if bypass is not None else "no_proxy is unset")
    relay = next((p for w in relays for p in w.peers), None)
    who = f" ({relay.relation} process {relay.pid}, `{relay.cmdline or relay.comm}`)" if relay is not None else ""
    seen = "; ".join(x for x in (
        f"{closed:,} connections to it closed in the last minute, about {closed / TIME_WAIT_S:.0f} a second"
        if closed else "",
        f"a blocked read whose other end is the proxy{who}" if relays else "") if x)
    local = (f", and {bypass_text}, so requests to local services go through it too ({upstream[1]:,} connections "
             f"to {upstream[0]} closed in the last minute beside them)" if upstream is not None else "")
    yield Finding(
        rule_id="proxy-relay", severity=Severity.WARNING if upstream is not None else Severity.INFO,
        claim=f"{proxy.text()} ({proxy.source}) sends the process's HTTP requests through a proxy on this "
              f"machine{who}{local}: a relay and a second connection per request; {thread} waits on a socket "
              f"{pct(share)} of its samples ({seen})",
        evidence=((proxy.text(), f"{proxy.source}: {proxy.effect}"),
                  ("bypass", bypass_text),
                  ("connections to the proxy", seen),
                  ("onward, to this machine", f"{upstream[0]}: {upstream[1]:,} closed in the last minute"
                   if upstream is not None else "none seen: the requests may be for other hosts"),
                  (f"{thread} waits on a socket", f"{pct(share)} of its samples")),
        remedy="Name the hosts the program reaches on this machine or network in no_proxy (no_proxy=localhost,"
               "127.0.0.1,...), or unset the proxy for the training job; keep the proxy for traffic that must leave "
               "through it.",
        impact=share if upstream is not None else 0.0)
