"""gil: how late a waking thread gets the GIL back (knocker), and each thread's CPU share.

A daemon "knocker" thread sleeps ``knock_interval_s`` and measures how late it wakes up: the lateness
is the timer slack plus the wait to re-take the GIL. The slack is the smallest lateness ever seen (the
wake-up cost with a free GIL) and is subtracted. ``contention_share`` = Σ GIL wait / window: the share of
time a thread that wants the GIL has to wait for it (gilknocker's metric). The knocker costs one GIL
acquisition per knock (~100 per second at 10 ms), never spins, and keeps a bounded ring of samples.

Per-thread CPU share comes from /proc/self/task/<tid>/schedstat (on-CPU ns), read at publish time only.

Beside the window's rates, running totals (the probe's clock, knocks, summed lateness; each thread's schedstat ns):
a reader holding two boards judges exactly the interval between them, the knocker's wait and the threads' CPU over
the same time (the 10 s window of a process a few seconds old holds its start-up, which the shares since the last
publish do not).
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from dataclasses import dataclass

from dflash_contract.board import GilKeys, PayloadKeys, ProbeName
from probes._common import JsonDict, na, thread_tids


@dataclass(frozen=True, kw_only=True)
class Config:
    knock_interval_s: float = 0.01
    window_s: float = 10.0  # readings cover this much recent time
    max_threads: int = 256  # per-thread CPU entries on the board


def gil_enabled() -> bool:
    check = getattr(sys, "_is_gil_enabled", None)
    return True if check is None else bool(check())


def read_schedstat(tid: int) -> tuple[int, int] | None:
    """(on-CPU ns, run-queue wait ns) of one thread of this process, or None when it is gone."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat", "rb") as f:
            run_ns, wait_ns, _slices = f.read().split()
        return int(run_ns), int(wait_ns)
    except (OSError, ValueError):
        return None


class GilProbe:
    name = "gil"

    def __init__(self, config: Config) -> None:
        self.config = config
        self._free_threaded = not gil_enabled()
        maxlen = int(config.window_s / config.knock_interval_s * 2) + 16
        self._samples: deque[tuple[float, float]] = deque(maxlen=maxlen)  # (wake perf_counter, lateness s)
        self._slack_s: float | None = None
        self._totals: tuple[int, float] = (0, 0.0)  # (knocks, Σ lateness s) since start, replaced whole (one store)
        self._stop = threading.Event()
        self._cpu_prev: dict[int, tuple[int, int, int]] = {}  # tid -> (wall ns, run ns, wait ns)
        self._thread: threading.Thread | None = None
        if not self._free_threaded:
            self._thread = threading.Thread(target=self._knock, name="dflash-diag-gil-knocker", daemon=True)
            self._thread.start()

    def _knock(self) -> None:
        iv = self.config.knock_interval_s
        sleep, clock, append, stop = time.sleep, time.perf_counter, self._samples.append, self._stop
        while not stop.is_set():
            t0 = clock()
            sleep(iv)
            t1 = clock()
            late = max(0.0, t1 - t0 - iv)
            if self._slack_s is None or late < self._slack_s:
                self._slack_s = late
            append((t1, late))
            knocks, late_s = self._totals
            self._totals = (knocks + 1, late_s + late)

    def snapshot(self, now_s: float) -> JsonDict:
        if self._free_threaded:
            return na("free-threaded build: no GIL")
        now = time.perf_counter()
        start = now - self.config.window_s
        lates = [late for t, late in list(self._samples) if t >= start]
        slack = self._slack_s or 0.0
        waits = sorted(max(0.0, late - slack) for late in lates)
        first = next((t for t, _ in list(self._samples) if t >= start), now)
        span_s = max(1e-6, min(self.config.window_s, now - first + self.config.knock_interval_s))
        n = len(waits)
        threads = self._thread_cpu()
        knocker = threads.get("dflash-diag-gil-knocker", {})
        knocks, late_total_s = self._totals
        return {
            PayloadKeys.STATUS: "ok",
            GilKeys.FREE_THREADED: False,
            GilKeys.SWITCH_INTERVAL_S: sys.getswitchinterval(),
            GilKeys.WAIT_MEAN_MS: 1e3 * sum(waits) / n if n else 0.0,
            GilKeys.WAIT_P99_MS: 1e3 * waits[min(n - 1, int(0.99 * n))] if n else 0.0,
            GilKeys.WAIT_MAX_MS: 1e3 * waits[-1] if n else 0.0,
            GilKeys.CONTENTION_SHARE: min(1.0, sum(waits) / span_s),
            GilKeys.TIMER_SLACK_MS: 1e3 * slack,
            GilKeys.SAMPLES: n,
            GilKeys.WINDOW_S: span_s,
            GilKeys.KNOCK_INTERVAL_S: self.config.knock_interval_s,
            # Time the knocker sat runnable without a CPU: lateness that is CPU oversubscription, not GIL.
            GilKeys.KNOCKER_RUNQ_SHARE: knocker.get(GilKeys.RUNQ_SHARE),
            GilKeys.THREADS: threads,
            GilKeys.CLOCK_S: now,
            GilKeys.KNOCKS_TOTAL: knocks,
            GilKeys.LATE_TOTAL_S: late_total_s,
        }

    def _thread_cpu(self) -> JsonDict:
        now_ns = time.monotonic_ns()
        out: JsonDict = {}
        seen: set[int] = set()
        for tid, name in list(thread_tids().items())[: self.config.max_threads]:
            seen.add(tid)
            st = read_schedstat(tid)
            if st is None:
                continue
            prev = self._cpu_prev.get(tid)
            self._cpu_prev[tid] = (now_ns, st[0], st[1])
            key = name if name not in out else f"{name}#{tid}"
            totals = {GilKeys.RUN_NS: st[0], GilKeys.RUNQ_NS: st[1]}
            if prev is None or now_ns <= prev[0]:
                out[key] = {GilKeys.TID: tid, GilKeys.CPU_SHARE: None, GilKeys.RUNQ_SHARE: None, **totals}
                continue
            dt = now_ns - prev[0]
            out[key] = {
                GilKeys.TID: tid,
                GilKeys.CPU_SHARE: max(0.0, (st[0] - prev[1]) / dt),
                GilKeys.RUNQ_SHARE: max(0.0, (st[1] - prev[2]) / dt),
                **totals,
            }
        for tid in set(self._cpu_prev) - seen:  # bounded: forget threads that ended
            del self._cpu_prev[tid]
        return out

    def close(self) -> None:
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=1.0)


# What the probe registry (``probes/registry.py``) reads of this module: its board name, its Config, its class.
NAME = ProbeName.GIL
PROBE = GilProbe
