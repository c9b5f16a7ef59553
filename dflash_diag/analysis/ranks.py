"""One rank of a job in one row: where it is, how much of its time it waits on its peers in collectives, where it
computes, what its ``collectives`` probe published. Pure helpers, below the job's rules (``findings.job``) and its
driver (``analysis.job``), which read them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from dflash_contract.board import CollectivesKeys, HealthKeys, ProbeName
from dflash_diag.analysis.collectives import collective_op, program_site
from dflash_diag.analysis.hotspots import hot_functions
from dflash_diag.analysis.sampled import Row, classified, process_cpu_pct
from dflash_diag.model import Analysis, Observation, ThreadState
from dflash_diag.model.job import CollectiveWait, ProbeCollective, RankIdentity, RankSummary
from dflash_diag.model.waits import WaitGraph

_TOOL_THREADS = ("dflash-diag-",)
MAX_RECENT = 64  # rows of one board's recent collectives read (the probe writes 32)
MAX_RECENT_KEPT = 2048  # over every board of the window
_WORK = frozenset({ThreadState.PYTHON, ThreadState.NATIVE, ThreadState.COMPILE, ThreadState.CHECKPOINT})


def rank_rows(obs: Observation, analysis: Analysis) -> dict[str, list[Row]]:
    """Every sampled thread's samples with their states, in time order, by thread name (tool threads left out)."""
    out: dict[str, list[Row]] = {}
    for _, thread, stats, state in classified(obs, analysis.threads):
        if not stats.name.startswith(_TOOL_THREADS):
            out.setdefault(stats.name, []).append((thread, state))
    return out


def summarise(identity: RankIdentity, obs: Observation, analysis: Analysis) -> RankSummary:
    rows = rank_rows(obs, analysis)
    lines = obs.line_text
    ops = {name: [collective_op(t, lines) for t, _ in rs] for name, rs in rows.items()}
    thread = _training_thread(rows, ops)
    mine, my_ops = rows.get(thread, []), ops.get(thread, [])
    n = len(mine)
    in_coll = [op is not None for op in my_ops]
    waits: Counter[tuple[str, str]] = Counter((op, program_site(t)) for (t, _), op in zip(mine, my_ops, strict=True)
                                              if op is not None)
    collective = None
    if waits:
        (op, site), count = waits.most_common(1)[0]
        collective = CollectiveWait(op=op, site=site, share=count / n)
    now = None
    if mine and my_ops[-1] is not None:
        now = CollectiveWait(op=my_ops[-1] or "", site=program_site(mine[-1][0]), share=1.0)
    outside = [(t, s) for (t, s), c in zip(mine, in_coll, strict=True) if not c]
    spots = hot_functions(outside, n=2) if outside else ()
    # Shares of all the thread's samples (hot_functions divides by the rows it was given).
    scale = len(outside) / n if n else 0.0
    hot = ", ".join(f"{s.function} ({s.site}) {100.0 * s.share * scale:.0f}%" for s in spots)
    board = obs.board
    return RankSummary(
        identity=identity, alive=obs.process_alive, n_samples=n, thread=thread,
        collective_share=sum(in_coll) / n if n else 0.0, collective=collective, now=now,
        computing_share=sum(1 for (_, s), c in zip(mine, in_coll, strict=True) if s in _WORK and not c) / n if n else 0.0,
        hot=hot if spots else "", where=program_site(mine[-1][0]) if mine else "",
        progress=analysis.waits.progress if isinstance(analysis.waits, WaitGraph) else bool(obs.stacks),
        step=_step(board.session if board is not None else {}, board.probe(ProbeName.HEALTH) if board else None),
        probe=probe_collective(obs), headline=analysis.headline.text if analysis.headline else "",
        severity=analysis.headline.severity if analysis.headline else None, cpu_pct=process_cpu_pct(obs),
        workers=len({s.pid for s in obs.children}), exited=bool(obs.stacks) and not obs.process_alive)


def empty_summary(identity: RankIdentity, obs: Observation) -> RankSummary:
    return RankSummary(identity=identity, alive=obs.process_alive, n_samples=0, thread="", collective_share=0.0,
                       collective=None, now=None, computing_share=0.0, hot="", where="", progress=False, step=None,
                       probe=None, headline="", severity=None, cpu_pct=None, workers=0)


def _training_thread(rows: Mapping[str, list[Row]], ops: Mapping[str, list[str | None]]) -> str:
    """The thread that makes the collective calls; else the one that works most; else MainThread."""
    if not rows:
        return ""
    in_coll = {name: sum(1 for op in ops[name] if op is not None) for name in rows}
    if max(in_coll.values()) > 0:
        return max(rows, key=lambda name: (in_coll[name], len(rows[name]), name == "MainThread"))
    working = {name: sum(1 for _, s in rs if s in _WORK) for name, rs in rows.items()}
    return max(rows, key=lambda name: (name == "MainThread" and working[name] > 0, working[name], len(rows[name])))


def _step(session: Mapping[str, Any], health: Mapping[str, Any] | None) -> int | None:
    """The rank's step: the program's own (``session.step``), else the optimizer steps the health probe counted."""
    for value in (session.get("step"), (health or {}).get(HealthKeys.STEPS)):
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else None


def probe_collective(obs: Observation) -> ProbeCollective | None:
    """The ``collectives`` probe's newest readings (and how many calls the window saw), validated."""
    board = obs.board
    payload = board.probe(ProbeName.COLLECTIVES) if board is not None else None
    if not isinstance(payload, Mapping) or payload.get(CollectivesKeys.ARMED) is not True:
        return None
    entered, completed = _int(payload.get(CollectivesKeys.ENTERED)), _int(payload.get(CollectivesKeys.COMPLETED))
    if entered is None or completed is None:
        return None
    current = payload.get(CollectivesKeys.CURRENT)
    row = current[0] if isinstance(current, list) and current and isinstance(current[0], Mapping) else {}
    since = _float(row.get(CollectivesKeys.SINCE_WALL_S))
    last = payload.get(CollectivesKeys.LAST)
    first_board = obs.boards[0] if isinstance(obs.boards, tuple) and obs.boards else None
    first = first_board.probe(ProbeName.COLLECTIVES) if first_board is not None else None
    first_entered = _int(first.get(CollectivesKeys.ENTERED)) if isinstance(first, Mapping) else None
    backend = payload.get(CollectivesKeys.BACKEND)
    recent: dict[int, str] = {}
    for b in obs.boards if isinstance(obs.boards, tuple) else ():
        rows = (b.probe(ProbeName.COLLECTIVES) or {}).get(CollectivesKeys.RECENT)
        for entry in rows[:MAX_RECENT] if isinstance(rows, list) else ():
            seq = _int(entry.get(CollectivesKeys.SEQ)) if isinstance(entry, Mapping) else None
            name = entry.get(CollectivesKeys.OP) if isinstance(entry, Mapping) else None
            if seq is not None and isinstance(name, str) and len(recent) < MAX_RECENT_KEPT:
                recent[seq] = name[:64]
    op = row.get(CollectivesKeys.OP)
    last_op = last.get(CollectivesKeys.OP) if isinstance(last, Mapping) else None
    return ProbeCollective(
        entered=entered, completed=completed,
        current_op=op if isinstance(op, str) else None, current_seq=_int(row.get(CollectivesKeys.SEQ)),
        current_for_s=max(0.0, board.wall_time_s - since) if since is not None and board is not None else None,
        last_op=last_op if isinstance(last_op, str) else None,
        in_collectives_s=_float(payload.get(CollectivesKeys.IN_COLLECTIVES_S)),
        backend=backend if isinstance(backend, str) else None,
        entered_in_window=entered - first_entered if first_entered is not None and entered >= first_entered else None,
        recent=tuple(sorted(recent.items())), from_start=payload.get(CollectivesKeys.FROM_START) is True)


def ranks_text(ranks: Sequence[int | None], pids: Sequence[int] = ()) -> str:
    """``0-3``, ``0, 2``, or PIDs for processes without a RANK."""
    known = sorted(r for r in ranks if r is not None)
    if len(known) != len(ranks):
        return ", ".join(str(r) if r is not None else f"PID {p}" for r, p in zip(ranks, pids, strict=False))
    if len(known) >= 3 and known == list(range(known[0], known[-1] + 1)):
        return f"{known[0]}-{known[-1]}"
    return ", ".join(str(r) for r in known)


__all__ = ["MAX_RECENT", "empty_summary", "probe_collective", "rank_rows", "ranks_text", "summarise"]
