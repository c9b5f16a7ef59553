"""The host-sync family (analysis/findings/hostsync.py): a device sync per step, at the line that makes it."""

from __future__ import annotations

from findings_builders import (
    NOW_S,
    _one,
    _run,
    healthy_board,
    observation,
    pipeline,
    stack,
    thread_sample,
    thread_stats,
)

from dflash_diag.analysis.findings import evaluate
from dflash_diag.model import Frame, ThreadState


def test_host_sync_storm_points_at_the_line() -> None:
    sync = (Frame("cudaStreamSynchronize", "libcudart.so", 0, native=True),
            Frame("_chunked_loss", "/app/loss.py", 42), Frame("step", "/app/train.py", 9))
    work = (Frame("mm", "libtorch.so", 0, native=True), Frame("step", "/app/train.py", 9))
    timeline = [ThreadState.GPU_WAIT, ThreadState.GPU_WAIT, ThreadState.NATIVE, ThreadState.GPU_WAIT] * 2
    stacks = [stack([thread_sample("drafter-0", sync if s == ThreadState.GPU_WAIT else work, tid=12)], t=i)
              for i, s in enumerate(timeline)]
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.GPU_WAIT: 0.75, ThreadState.NATIVE: 0.25}, tid=12,
                            n=8, timeline=timeline),)
    f = _one(_run(threads=threads, stacks=stacks), "host-sync-storm")
    assert "loss.py:42" in f.claim and dict(f.evidence)["drafter in explicit host syncs"] == "75%"
    assert dict(f.evidence)["sync site"] == "loss.py:42 (_chunked_loss) (6 samples)"


def test_waiting_on_a_busy_gpu_in_ops_is_not_a_sync_storm() -> None:
    """A thread in backward() or an op while the GPU is busy waits on a full launch queue: GPU-bound, healthy
    (the H200 casebook's healthy programs: 30-68% GPU wait at loss.backward() and opt.step())."""
    busy = (Frame("_engine_run_backward", "/sp/torch/autograd/graph.py", 829), Frame("step", "/app/train.py", 9))
    timeline = [ThreadState.GPU_WAIT, ThreadState.GPU_WAIT, ThreadState.NATIVE, ThreadState.GPU_WAIT] * 5
    stacks = [stack([thread_sample("drafter-0", busy, tid=12)], t=i) for i in range(len(timeline))]
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.GPU_WAIT: 0.75, ThreadState.NATIVE: 0.25}, tid=12,
                            n=len(timeline), timeline=timeline),)
    assert "host-sync-storm" not in {f.rule_id for f in _run(threads=threads, stacks=stacks)}


def test_one_sample_is_not_a_rate() -> None:
    threads = (
        thread_stats("logger", "other", {ThreadState.PYTHON: 1.0}, tid=13, gil_held_pct=100.0, n=1),
        thread_stats("drafter-0", "drafter", {ThreadState.GIL_WAIT: 1.0}, tid=12, n=1),
    )
    assert _run(threads=threads) == ()


def test_host_sync_site_shows_the_line_text() -> None:
    import dataclasses

    sync = (Frame("_chunked_loss", "/app/loss.py", 42), Frame("step", "/app/train.py", 9))
    timeline = [ThreadState.GPU_WAIT] * 6
    stacks = [stack([thread_sample("drafter-0", sync, tid=12)], t=i) for i in range(6)]
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.GPU_WAIT: 1.0}, tid=12, n=6, timeline=timeline),)
    obs = dataclasses.replace(observation((healthy_board(),), stacks),
                              source_lines={"/app/loss.py:42": "total += loss.item()"})
    f = _one(evaluate(obs, threads, pipeline(), now_wall_s=NOW_S), "host-sync-storm")
    assert "`total += loss.item()`" in f.claim
