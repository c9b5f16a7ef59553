"""top's live verdict has hysteresis: each frame is analysed with the stage the last one named
(``analysis.analyse(obs, previous_bottleneck=...)``, as ``cli.top_live.LiveSource.poll`` does), so near-equal waits keep the stage shown instead of flipping."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "findings"))

from findings_builders import observation, thread_sample

from dflash_diag.analysis import analyse
from dflash_diag.cli.top_live import frame_of
from dflash_diag.model import Frame, Observation, PipelineView, StackSample

_LIB = "/usr/lib/python3.11"
_TORCH = "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py"
PUT = (Frame("Condition.wait", f"{_LIB}/threading.py", 331), Frame("Queue.put", f"{_LIB}/queue.py", 140),
       Frame("produce", "/app/p.py", 9))
GET = (Frame("Condition.wait", f"{_LIB}/threading.py", 331), Frame("Queue.get", f"{_LIB}/queue.py", 171),
       Frame("consume", "/app/p.py", 19))
WORK_P = (Frame("Linear.forward", _TORCH, 134), Frame("produce", "/app/p.py", 8))
WORK_C = (Frame("Linear.forward", _TORCH, 134), Frame("consume", "/app/p.py", 18))


def _window(put_of_50: int, get_of_50: int, n: int = 200) -> Observation:
    """target-0 blocked in put ``put_of_50`` of every 50 samples, drafter-0 in get ``get_of_50``."""
    stacks = []
    for i in range(n):
        p = thread_sample("target-0", PUT if i % 50 < put_of_50 else WORK_P, tid=1, active=i % 50 >= put_of_50)
        c = thread_sample("drafter-0", GET if i % 50 < get_of_50 else WORK_C, tid=2, active=i % 50 >= get_of_50)
        stacks.append(StackSample(pid=4242, monotonic_s=i * 0.05, wall_s=i * 0.05, duration_s=0.01, native=False,
                                  threads=(p, c)))
    return observation(stacks=stacks)


def _pipeline(obs: Observation, previous: str) -> PipelineView:
    frame = frame_of(analyse(obs, previous_bottleneck=previous), native=False)
    assert isinstance(frame.pipeline, PipelineView)
    return frame.pipeline


def test_near_equal_waits_keep_the_stage_the_screen_showed() -> None:
    near = _window(11, 10)  # 22% against 20%
    assert _pipeline(near, "").bottleneck == "balanced"  # alone (doctor, --batch): no stage by that margin
    assert _pipeline(near, "drafter").bottleneck == "drafter"  # shown last and still waited on at least as much
    assert _pipeline(near, "target").bottleneck == "balanced"  # the evidence leans the other way: not kept
    assert _pipeline(_window(30, 1), "target").bottleneck == "drafter"  # a clear turn takes over at once
