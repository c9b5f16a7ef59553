"""A value the run's configuration changes, taken by the call a limiting thread's time is in.

- ``changed-value-at-hot-call``: the program's code declares a default for a configuration value (a dataclass
  field, argparse's ``default=``, ``cfg.get(key, default)``: ``SourceFile.overridden``), the configuration file on
  the command line sets it otherwise, and the line that passes or reads it (a library call's argument traced to
  the key, ``SourceFile.passed``; a read of the key, ``SourceFile.reads_departures``) is on the stack of
  HOT_CALL_SHARE or more of the working samples of a thread whose speed is the program's (or one on the wait-for
  graph's limiting path, one filling a queue such a thread waits on, the GIL holder it waits for).

What is seen is exactly that: most of the thread's time is inside a call that runs with a value this run changed.
What the value costs against the code's default is not measured (no second run), so the finding is information,
never a warning; it is the stage's "because" only where no measured cause is found (a warning's cause leads), and
says so. A configuration that keeps the code's defaults, or changes values read elsewhere, draws nothing: the value
must be on the line the time stands on. Keys that name or place a run (a name, a seed, a path) are left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from dflash_diag.analysis.findings._context import Context, pct
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.findings.scheduler import RUN_DELAY_SHARE
from dflash_diag.analysis.findings.setting_code import Weighed, gil_holder, weighed_threads
from dflash_diag.analysis.hotspots import (
    FRAMEWORK_LIBRARIES,
    is_label_key,
    is_off_value,
    library_shares,
)
from dflash_diag.analysis.mechanisms import NOT_WORK
from dflash_diag.analysis.native import thread_stacks
from dflash_diag.analysis.sched import summary_of
from dflash_diag.model import Finding, Frame, Severity, ThreadStats
from dflash_diag.model.common import is_na
from dflash_diag.model.evidence import ENV_LIBRARY, DeclaredDefault, KnobUse, SourceFile
from dflash_diag.model.sched import SchedSummary
from dflash_diag.model.stage import PIPELINE_STAGES
from dflash_diag.model.waits import WAIT_PROCESS, WaitEdge, WaitGraph

# On the thread holding the GIL a speed thread waits for, the changed value is the root of that contention: named
# first. On any other thread while one does, it explains no stage (the hold is the measured mechanism). Where no rule
# names a stage, it is the "because" of where the time goes: on the root's own thread, or on the thread that has the
# CPU the root waits for.
RULES = (RuleSpec("changed-value-at-hot-call", sampled=True, produces=("gil-contention",),
                  explains=("where-time-goes",)),
         # A changed value on a thread's wait on another process (the call it blocks at, or the environment the
         # child it waits on inherits): the root of that wait, named first.
         RuleSpec("changed-value-at-process-wait", sampled=True, produces=("process-wait",)))

# Of a weighed thread's working samples on the line that takes the changed value: the call holds most of its time.
HOT_CALL_SHARE = 0.5
# Changed values named on one hot line at most (a call taking several from the configuration).
SHOWN = 2
# A thread at the wait-for graph's root runnable but off a CPU this share of the window or more (schedstat's run
# delay) while the thread with the changed value is on one CPU_TAKER_SHARE or more: that thread has the CPU it waits
# for (scheduler.RUN_DELAY_SHARE: a wait the scheduler notes).
ROOT_CPU_WAIT_SHARE = RUN_DELAY_SHARE
CPU_TAKER_SHARE = 0.25
# Every claim ends so: what is seen is where the time is, not what the value costs.
NOT_MEASURED = "; what the change costs is not measured"


@dataclass(frozen=True, slots=True)
class _Use:
    """A line of the program's file that takes a changed value: a library call's argument or a read of the key."""

    path: str
    line: int
    default: DeclaredDefault
    declared_in: str  # the file that declares the default (its base name)
    argument: str  # "np.argsort(kind=kind)" where a library call's argument; "" for a read of the key


def check(ctx: Context) -> Iterator[Finding]:
    departed = _departed(ctx.obs.files)  # once: the hot line, the process wait and the exports read it
    if not departed:
        return
    uses = changed_value_uses(ctx.obs.files, departed)
    weighed = weighed_threads(ctx)  # once: each way below weighs the same threads
    best: tuple[float, ThreadStats, str, tuple[_Use, ...]] | None = None
    for thread, why in weighed if uses else ():
        share, on_line = _hot_use(ctx, thread, uses)
        if on_line and share >= HOT_CALL_SHARE and (best is None or share > best[0]):
            best = (share, thread, why, on_line)
    if best is not None:
        share, thread, why, on_line = best
        found = _finding(share, thread, why, on_line, _statement(ctx, on_line[0]))
        held = gil_holder(ctx)
        if held is None:
            yield _with_cpu_taken(ctx, thread, found)
        elif held[0].name == thread.name:  # the GIL's holder: it slows the waiter's stage through the GIL
            waiter = held[1].stage
            yield replace(found, stages=(waiter,) if waiter in PIPELINE_STAGES else ())
        else:  # another thread's hold of the GIL is the measured mechanism: said, explains no stage
            yield replace(found, impact=0.0)
        return
    waited = _waited_use(ctx, uses, weighed)
    if waited is not None:
        yield waited
        return
    yield from _exported(ctx, weighed, departed)


# "decode (data.py:33)": the place a wait edge names (``analysis.waits._site``).
_SITE = re.compile(r"\(([^():]+):(\d+)\)$")


def _waited_use(ctx: Context, uses: Sequence[_Use], weighed_list: Weighed) -> Finding | None:
    """A weighed thread blocked on another process HOT_CALL_SHARE of its samples or more (the wait-for graph's
    ``process`` edge: a pipe from a child, a socket's peer, a file lock's holder) at a line that runs with a
    changed value (``subprocess.run(cmd)``, the command built from the value): its wait is the other end's work
    under that call. The most blocked such thread; None where none."""
    graph = ctx.waits
    if not isinstance(graph, WaitGraph) or not uses:
        return None
    weighed = {t.name: (t, why) for t, why in weighed_list}
    best: tuple[float, ThreadStats, str, WaitEdge, tuple[_Use, ...]] | None = None
    for node in graph.threads:
        if node.name not in weighed:
            continue
        for edge in node.waits:
            site = _SITE.search(edge.site) if edge.kind == WAIT_PROCESS else None
            if site is None or edge.share < HOT_CALL_SHARE or (best is not None and edge.share <= best[0]):
                continue
            on = tuple(u for u in uses if _base(u.path) == site[1] and u.line == int(site[2]))
            if on:
                best = (edge.share, *weighed[node.name], edge, on)
    if best is None:
        return None
    share, thread, why, edge, on_line = best
    found = _finding(share, thread, why, on_line, _statement(ctx, on_line[0]))
    where = f"{_base(on_line[0].path)}:{on_line[0].line}"
    return replace(found, rule_id="changed-value-at-process-wait",
                   claim=found.claim.replace(f" spends {pct(share)} of its working time in ",
                                             f" is blocked {pct(share)} of its samples on {_short(edge.target)} "
                                             "at ", 1),
                   evidence=(found.evidence[0], ("blocked at that line",
                                                 f"{pct(share)} of {thread.name}'s samples at {where}, on "
                                                 f"{_short(edge.target)}")))


# The other process as the claim names it, at most this long (its command line is in `process-wait`).
TARGET_CHARS = 100
_COMMAND = re.compile(r"^([^`]*)`([^`\s]+)[^`]*`")


def _short(target: str) -> str:
    """"a pipe from process 17958 (its child) `bash`": the process's command by its program only."""
    command = _COMMAND.match(target)
    text = f"{command[1]}`{command[2].rsplit('/', 1)[-1]}`" if command else target
    return text if len(text) <= TARGET_CHARS else text[:TARGET_CHARS - 3] + "..."


def _with_cpu_taken(ctx: Context, thread: ThreadStats, found: Finding) -> Finding:
    """``found``, also aimed at the stage of a thread at the wait-for graph's root that waits for a CPU while
    ``thread``, outside the root, is on one (their shares of the window, /proc): the root's time is stretched by the
    CPU ``thread`` takes. Unchanged where /proc was not read or no root thread waits so."""
    graph = ctx.waits
    summary = summary_of(ctx.obs)
    if not isinstance(graph, WaitGraph) or graph.root is None or thread.name in graph.root.threads or is_na(summary):
        return found
    assert isinstance(summary, SchedSummary)
    sched = {t.tid: t for t in summary.threads}
    taker = sched.get(thread.os_thread_id) if thread.os_thread_id is not None else None
    if taker is None or taker.cpu_share < CPU_TAKER_SHARE:
        return found
    tids = {t.name: t.os_thread_id for t in ctx.threads}
    for node in graph.threads:
        waiter = sched.get(tids.get(node.name) or -1)
        if node.name not in graph.root.threads or node.stage not in PIPELINE_STAGES or waiter is None or \
                waiter.runq_share < ROOT_CPU_WAIT_SHARE:
            continue
        taken = (f"; {node.name} waits for a CPU {pct(waiter.runq_share)} of the window while {thread.name} is on "
                 f"one {pct(taker.cpu_share)}")
        return replace(found, stages=tuple(dict.fromkeys((*found.stages, node.stage))),
                       claim=found.claim.replace(NOT_MEASURED, taken + NOT_MEASURED),
                       evidence=(*found.evidence, ("the CPU it takes (/proc)",
                                                   f"{node.name} runnable, waiting for a CPU "
                                                   f"{pct(waiter.runq_share)} of the window; {thread.name} on one "
                                                   f"{pct(taker.cpu_share)}")))
    return found


# A changed value's name -> the file declaring its default, and that declaration.
Departed = dict[str, tuple[SourceFile, DeclaredDefault]]


def _departed(files: Sequence[SourceFile]) -> Departed:
    """The values the run's configuration changes from the code's declared defaults, by name, with the file
    declaring each: labels and quantities left out."""
    return {d.name: (f, d) for f in files for d in f.overridden
            if not is_label_key(d.name) and not is_quantity(d.configured)}


def _value_text(d: DeclaredDefault, declared_in: str) -> str:
    """"`tie_break` = 'stable' in run.toml (the code's default 'any' at runcfg.py:25: its comment)"."""
    return (f"`{d.name}` = {d.configured} in {d.configured_in} (the code's default {d.default} at {declared_in}:"
            f"{d.line}" + (f": {d.note}" if d.note else "") + ")")


def _remedy(names: Sequence[str]) -> str:
    return (f"Run the same profile with {' and '.join(f'`{n}`' for n in names)} at the code's default and compare "
            "the step rate: the difference is what the change costs.")


def changed_value_uses(files: Sequence[SourceFile], departed: Departed) -> list[_Use]:
    """The lines of the program's own files (not another process's script) that pass or read a value the run's
    configuration sets away from the code's declared default (``departed``), a library argument before a plain
    read."""
    out: list[_Use] = []
    for file in files:
        if file.run_by:
            continue
        # Catalogued settings (``knobs``) and other libraries' arguments (``passed``) alike, traced to their key.
        for use in (*file.knobs, *file.passed):
            if use.key in departed and use.configured_in and use.library != ENV_LIBRARY:
                declared_in, d = departed[use.key]
                argument = f"{use.name}={use.via or use.key}" if use.name else (use.via or use.key)
                out.append(_Use(file.path, use.line, d, _base(declared_in.path), f"{use.call}({argument})"))
        for name, line in (*file.reads_departures, *file.carries):
            if name in departed and all((u.path, u.line, u.default.name) != (file.path, line, name) for u in out):
                declared_in, d = departed[name]
                out.append(_Use(file.path, line, d, _base(declared_in.path), ""))
    return out


_NUMBER = re.compile(r"^[+-]?(\d[\d_]*\.?\d*(e[+-]?\d+)?|\.\d+)$", re.IGNORECASE)


def is_quantity(value: str) -> bool:
    """A number other than zero (``512``, ``0.3``, ``1e-4``): a size, a count, a rate or a weight. It scales the
    work the time already shows rather than choosing how the work is done, and a profile changes many of them
    (its model's width, its batch): left out. Zero, a boolean, a string or a name is a choice (an option off, a
    backend, a mode) and stays."""
    return bool(_NUMBER.match(value.strip())) and not is_off_value(value)


def _hot_use(ctx: Context, thread: ThreadStats, uses: Sequence[_Use]) -> tuple[float, tuple[_Use, ...]]:
    """The share of the thread's working samples standing on the line of the use most of them stand on, and the
    uses on that line."""
    working = [t for t, state in ctx.stats_rows(thread) if state not in NOT_WORK]
    if not working:
        return 0.0, ()
    lines = {(u.path, u.line) for u in uses}
    counts: dict[tuple[str, int], int] = {}
    for sample in working:
        # Each sample counts once per line it stands on (a recursive call repeats a line on its stack).
        for place in {(fr.filename, fr.line) for fr in sample.frames if not fr.native} & lines:
            counts[place] = counts.get(place, 0) + 1
    if not counts:
        return 0.0, ()
    place, n = max(counts.items(), key=lambda kv: kv[1])
    return n / len(working), tuple(u for u in uses if (u.path, u.line) == place)


# The line's text shown in the claim, at most this long.
STATEMENT_CHARS = 80


def _statement(ctx: Context, use: _Use) -> str:
    """The line's text as recorded with the stacks or on disk (``line_text``), shortened; "" where neither has it."""
    text = " ".join((ctx.line_text(Frame(name="", filename=use.path, line=use.line)) or "").split())
    return text if len(text) <= STATEMENT_CHARS else text[:STATEMENT_CHARS - 3] + "..."


def _finding(share: float, thread: ThreadStats, why: str, uses: tuple[_Use, ...], statement: str) -> Finding:
    where = f"{_base(uses[0].path)}:{uses[0].line}"
    values = [_value_text(u.default, u.declared_in) for u in uses[:SHOWN]]
    call = next((u.argument for u in uses if u.argument), "")
    line = (f"the call {call} at {where}" if call else f"`{statement}` at {where}" if statement
            else f"the line {where}")
    many = len(values) > 1
    return Finding(
        rule_id="changed-value-at-hot-call", severity=Severity.INFO,
        claim=f"{thread.name} spends {pct(share)} of its working time in {line}, which runs with "
              f"{'values' if many else 'a value'} this run's configuration changes from the code's "
              f"default{'s' if many else ''}: {'; '.join(values)}{why}{NOT_MEASURED}",
        evidence=(("changed value" + ("s" if many else ""), "; ".join(values)),
                  ("time on that line", f"{pct(share)} of {thread.name}'s working samples stand on {where}")),
        remedy=_remedy([u.default.name for u in uses[:SHOWN]]),
        impact=share, stages=(thread.stage,) if thread.stage in PIPELINE_STAGES else ())


def _exported(ctx: Context, weighed: Weighed, departed: Departed) -> Iterator[Finding]:
    """A changed value the program exports into its own environment (``os.environ["POLARS_MAX_THREADS"] =
    str(cfg.threads)``), where a weighed thread spends HOT_CALL_SHARE of its working time or more in the library
    the variable is named after (its first word: ``polars``), or is blocked on a child process of that name
    HOT_CALL_SHARE of /proc's sweeps or more (``BASH_ENV``: the ``bash`` it waits on inherits the variable): the
    value acts there through the variable."""
    files = ctx.obs.files
    exports = [(f, u) for f in files if not f.run_by for u in f.passed
               if u.library == ENV_LIBRARY and u.key in departed and u.configured_in]
    best: tuple[float, ThreadStats, str, str, SourceFile, KnobUse] | None = None
    for thread, why in weighed if exports else ():
        for file, use in exports:
            word = use.name.split("_", 1)[0].lower()
            share, library = _library_share(ctx, thread, word)
            waited, child = _child_share(ctx, thread, word)
            if waited > share:
                share, library = waited, child
            if share >= HOT_CALL_SHARE and (best is None or share > best[0]):
                best = (share, thread, why, library, file, use)
    if best is None:
        return
    share, thread, why, where, file, use = best
    declared_in, d = departed[use.key]
    value = _value_text(d, _base(declared_in.path))
    in_child = where.startswith(CHILD_PREFIX)
    spends = (f"is blocked on {where} in {pct(share)} of /proc's sweeps" if in_child
              else f"spends {pct(share)} of its working time in {where}")
    named = where.removeprefix(CHILD_PREFIX).strip("`")
    yield Finding(
        rule_id="changed-value-at-process-wait" if in_child else "changed-value-at-hot-call", severity=Severity.INFO,
        claim=f"{thread.name} {spends}, and the program exports {use.name} into its own environment at "
              f"{_base(file.path)}:{use.line} from a value this run's configuration changes from the code's default: "
              f"{value}; a variable named after {named}{' (the child inherits it)' if in_child else ''}{why}"
              f"{NOT_MEASURED}",
        evidence=(("changed value", value),
                  ("exported as", f"{use.name} at {_base(file.path)}:{use.line}"),
                  (("blocked on that child" if in_child else "time in that library"),
                   f"{pct(share)} of {thread.name}'s " + ("/proc sweeps" if in_child else "working samples"))),
        remedy=_remedy([d.name]),
        impact=share, stages=(thread.stage,) if thread.stage in PIPELINE_STAGES else ())


# How a child process the thread waits on is named in the claim: "its child `bash`".
CHILD_PREFIX = "its child "


def _child_share(ctx: Context, thread: ThreadStats, word: str) -> tuple[float, str]:
    """The share of /proc's sweeps that caught the thread blocked on a child process whose command's name starts
    with ``word`` (``bash`` for BASH_ENV: a pipe from it, a file lock it holds), and "its child `bash`"; (0, "")
    for a word under 3 letters or none."""
    sweeps = sum(1 for s in ctx.obs.proc if s)
    if len(word) < 3 or thread.os_thread_id is None or not sweeps:
        return 0.0, ""
    seen: dict[str, set[float]] = {}
    for wait in ctx.obs.outside_waits:
        if wait.tid != thread.os_thread_id:
            continue
        for peer in wait.peers:
            if peer.relation == "child" and peer.comm.lower().startswith(word):
                seen.setdefault(peer.comm, set()).add(wait.monotonic_s)
    if not seen:
        return 0.0, ""
    comm, times = max(seen.items(), key=lambda kv: len(kv[1]))
    return min(1.0, len(times) / sweeps), f"{CHILD_PREFIX}`{comm}`"


def _library_share(ctx: Context, thread: ThreadStats, word: str) -> tuple[float, str]:
    """The share of the thread's working samples inside a library whose name starts with or holds ``word`` (its
    Python frames; doctor's native look of the thread where larger), and that library; (0, "") for a word under
    3 letters, torch's and the interpreter's own libraries."""
    if len(word) < 3:
        return 0.0, ""

    working = [t for t, state in ctx.stats_rows(thread) if state not in NOT_WORK]
    tids = {thread.os_thread_id} if thread.os_thread_id is not None else set()
    python, native = library_shares(working, thread_stacks(ctx.obs.native, tids))
    named = [(share, lib) for lib, share in (*python.items(), *native.items())
             if lib and lib not in FRAMEWORK_LIBRARIES and (lib.startswith(word) or word in lib)]
    return max(named, default=(0.0, ""))


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]
