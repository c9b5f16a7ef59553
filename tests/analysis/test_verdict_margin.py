"""The pipeline verdict needs a margin, does not flip on sampling noise, and says "balanced" when neither stage
clearly waits on the other; a live screen's verdict has hysteresis (the stage shown last keeps its place until the
evidence turns by the margin). Observations built from the shares a window would give."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "findings"))

from findings_builders import observation, thread_stats

from dflash_diag.analysis.pipeline import pipeline_view
from dflash_diag.model import PipelineView, ThreadState

S = ThreadState


def _view(put: float, get: float, *, n: int = 200, previous: str = "",
          names: tuple[str, str] = ("target-0", "drafter-0")) -> PipelineView:
    """One producer blocked in put ``put`` of its ``n`` samples, one consumer waiting in get ``get`` of its own."""
    producer = thread_stats(names[0], "target", {S.QUEUE_PUT: put, S.NATIVE: 1.0 - put}, tid=1, n=n)
    consumer = thread_stats(names[1], "drafter", {S.QUEUE_GET: get, S.NATIVE: 1.0 - get}, tid=2, n=n)
    obs = observation()
    return pipeline_view(obs, (producer, consumer), now_wall_s=obs.started_wall_s + obs.window_s, previous=previous)


def test_a_clear_difference_names_the_stage() -> None:
    assert _view(put=0.55, get=0.02).bottleneck == "drafter"
    assert _view(put=0.01, get=0.40).bottleneck == "target"


def test_both_stages_waiting_about_as_much_is_balanced() -> None:
    """The issue's trainer: both stages at the same rate, each waiting on the other a fifth of the time."""
    view = _view(put=0.22, get=0.18)
    assert view.bottleneck == "balanced"
    assert view.verdict.startswith("balanced: both stages wait on each other about as much")


def test_a_difference_within_sampling_noise_names_no_stage() -> None:
    """30% against 15% is a stage verdict from 2,000 samples, noise from 10 (two standard errors: 37 points)."""
    assert _view(put=0.30, get=0.15, n=2000).bottleneck == "drafter"
    few = _view(put=0.30, get=0.15, n=10)
    assert few.bottleneck == "balanced" and "clear margin" in few.verdict


def test_the_stage_shown_last_keeps_its_place_until_the_evidence_turns_by_the_margin() -> None:
    """Windows that drift around equal waits: without hysteresis the verdict would read target, balanced, drafter,
    target...; with it the shown stage stays while its side still waits at least as much, and the other stage takes
    over only with the full margin."""
    windows = [(0.05, 0.40), (0.16, 0.20), (0.21, 0.19), (0.18, 0.22), (0.24, 0.21), (0.60, 0.05)]
    shown: list[str] = []
    previous = ""
    for put, get in windows:
        previous = _view(put, get, previous=previous).bottleneck
        shown.append(previous)
    # (0.21, 0.19) leans the consumer's way by 2 points: the producer stage is no longer the bottleneck, but nor
    # is the consumer stage by a margin -- balanced; then only the clear window names the consumer stage.
    assert shown == ["target", "target", "balanced", "balanced", "balanced", "drafter"]
    # The same windows judged alone (doctor, --batch): no hysteresis, so the near-equal ones are balanced too.
    assert [_view(p, g).bottleneck for p, g in windows] == [
        "target", "balanced", "balanced", "balanced", "balanced", "drafter"]


def test_a_held_stage_is_not_kept_against_the_evidence() -> None:
    assert _view(put=0.45, get=0.05, previous="target").bottleneck == "drafter"


def test_the_verdict_uses_the_programs_words() -> None:
    """Threads called target-*/drafter-*: the program's own words. Anything else: the roles."""
    assert _view(put=0.55, get=0.02).verdict.startswith("drafter-bound: targets blocked in put 55%")
    other = _view(put=0.55, get=0.02, names=("producer", "worker-0"))
    assert other.bottleneck == "drafter"  # the wire value is unchanged
    assert other.verdict.startswith("consumer-bound: producer threads blocked in put 55% of the time, worker threads")
