"""`where-time-goes` says how the OS ran the root's threads (on a CPU, the kernel's part, waiting for one, off one),
checked on a recorded observation of a real program (the casebook's healthy robotics twin from outside)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from dflash_diag.analysis import analyse
from dflash_diag.analysis.findings._context import pct
from dflash_diag.analysis.sched import summary_of
from dflash_diag.model.sched import ProcessIo, SchedSummary
from dflash_diag.snapshot.bundle import load_observation

RECORDING = Path(__file__).resolve().parents[1] / "casebook" / "observations" / \
    "settings4_robotics_fixed__outside.json.gz"


def test_the_roots_thread_is_said_with_its_share_on_a_cpu_waiting_for_one_and_off_one() -> None:
    obs = load_observation(str(RECORDING))
    analysis = analyse(obs)
    (finding,) = [f for f in analysis.findings if f.rule_id == "where-time-goes"]
    summary = summary_of(obs)
    assert isinstance(summary, SchedSummary)
    (learner,) = [t for t in summary.threads if t.name == "learner"]
    off = max(0.0, 1.0 - learner.cpu_share - learner.runq_share)
    assert finding.claim.startswith("where the time goes: learner spends learner (train.py:")
    assert f"; its thread on a CPU {pct(learner.cpu_share)} of the window (" in finding.claim
    assert finding.claim.endswith(f"of that in the kernel), waiting for a CPU {pct(learner.runq_share)}, off a CPU "
                                  f"{pct(off)}")
    assert ("the OS's view (/proc)", finding.claim.split("; ", 1)[1]) in finding.evidence


def test_a_root_off_a_cpu_is_said_with_what_the_kernel_had_it_blocked_in() -> None:
    """The casebook's spawn-pool program attached: its main thread off a CPU about half the window, which /proc's
    sweeps caught blocked in a futex (waiting on the queue its feeder fills)."""
    obs = load_observation(str(RECORDING.with_name("settings5_ocr__attach.json.gz")))
    (finding,) = [f for f in analyse(obs).findings if f.rule_id == "where-time-goes"]
    tid = next(t.os_thread_id for s in obs.stacks for t in s.threads if t.name == "MainThread")
    readings = [t for sweep in obs.proc for t in sweep if t.tid == tid]
    futex = sum(1 for t in readings if t.state in ("S", "D") and (t.syscall or t.wchan) == "futex")
    assert futex > 0
    assert finding.claim.endswith(f"(blocked in futex {futex} of {len(readings)} readings)"), finding.claim


def test_a_stage_verdict_with_no_cause_ends_with_its_hottest_lines_code() -> None:
    """The casebook's healthy message-passing twin from outside: the consumer stage limits throughput, no cause;
    the headline says where its time goes and the hottest line's code (read from the program's file)."""
    obs = load_observation(str(RECORDING.with_name("settings5_molprop_fixed__outside.json.gz")))
    headline = analyse(obs).headline
    assert headline is not None and headline.rule_id == "pipeline-bottleneck-drafter"
    assert "no cause found, its time goes to: main (train.py:106)" in headline.text
    assert headline.text.endswith("(hottest line `opt.step()`)")


def _with_writes(obs: Any, writes: int, written_bytes: int) -> Any:
    """The recording with its /proc/PID/io readings replaced: ``writes`` calls spread evenly over its sweeps."""
    first, last = obs.sched[0].monotonic_s, obs.sched[-1].monotonic_s
    sched = tuple(replace(s, io=ProcessIo(rchar=0, read_bytes=0, syscr=0,
                                          wchar=int(written_bytes * (s.monotonic_s - first) / (last - first)),
                                          syscw=int(writes * (s.monotonic_s - first) / (last - first))))
                  for s in obs.sched)
    return replace(obs, sched=sched)


def test_a_process_that_writes_thousands_of_times_a_second_is_said_so() -> None:
    obs = load_observation(str(RECORDING))
    span_s = obs.sched[-1].monotonic_s - obs.sched[0].monotonic_s
    busy = _with_writes(obs, int(5000 * span_s), int(512 * 1024 * span_s))
    (finding,) = [f for f in analyse(busy).findings if f.rule_id == "where-time-goes"]
    assert finding.claim.endswith("; the process made 5,000 write calls a second (512 KiB/s)"), finding.claim
    quiet = _with_writes(obs, int(20 * span_s), int(2048 * span_s))  # a progress line now and then: not said
    (finding,) = [f for f in analyse(quiet).findings if f.rule_id == "where-time-goes"]
    assert "write calls" not in finding.claim
