"""Thread states on a real process that py-spy really attaches to: waiting is waiting (issue 14, item 4)."""

from __future__ import annotations

import pytest
from workload import pipeline_child

from dflash_diag.analysis.threads import OsTimeline, aggregate_threads, classify_stacks
from dflash_diag.model import NA, ThreadState
from dflash_diag.sources.collect import Collector
from dflash_diag.sources.config import SamplerConfig

S = ThreadState
WAITERS = ("wait-simplequeue", "wait-lock", "wait-socket", "wait-select", "wait-event", "wait-condition")

pytestmark = pytest.mark.slow


def test_threads_parked_in_c_level_waits_are_idle_not_gil_wait_or_native() -> None:
    """SimpleQueue.get, `with lock:`, socket recv_into, select, Event/Condition waits at 0% CPU, while a
    pure-Python thread holds the GIL: before, the first three read as 100% GIL wait (or native when the GIL
    was free) and sorted first; the kernel says they never ran."""
    with pipeline_child("--waiters", "--hog") as child:
        obs = Collector(child.pid, SamplerConfig(rate_hz=5.0)).collect(2.5)
    by = {t.name: t for t in aggregate_threads(obs)}
    summary = {n: {s.value: round(v, 2) for s, v in t.shares.items() if v} for n, t in by.items()}
    assert set(WAITERS) <= set(by), summary
    for name in WAITERS:
        t = by[name]
        assert t.shares[S.IDLE] >= 0.9, (name, summary[name], obs.warnings)
        assert not isinstance(t.cpu_pct, NA) and t.cpu_pct < 1.0, (name, t.cpu_pct)
    assert by["gil-hog"].shares[S.PYTHON] >= 0.5, summary["gil-hog"]
    rules = {r.thread.name: r.rule for rows in classify_stacks(obs.stacks, obs.line_text,
                                                              os_timeline=OsTimeline(obs.proc)).values()
             for r in rows}
    assert "socket read" in rules["wait-socket"], rules["wait-socket"]
    # A pool worker between jobs reads as idle from its frames alone (no /proc reading near the sample): the
    # pool's _worker on top, its work queue's get a C call. It read as native, or as a GIL wait while another
    # thread held the GIL, and a Jinja2 pool's holder was named at that loop instead of its jobs.
    assert by["wait-pool_0"].shares[S.IDLE] >= 0.9, summary["wait-pool_0"]
    frames_only = {r.thread.name: (r.state, r.rule) for rows in classify_stacks(obs.stacks, obs.line_text).values()
                   for r in rows}
    assert frames_only["wait-pool_0"] == (S.IDLE, "waits for a job in concurrent/futures/thread.py"), frames_only
    assert "futex" in rules["wait-simplequeue"] and "0.0% CPU" in rules["wait-simplequeue"], rules
