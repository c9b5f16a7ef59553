"""GPU-bound stages and PyTorch's autograd worker threads, on recorded py-spy dumps (issue 14, item 4).

On CUDA the drafter's backward runs on PyTorch's per-device autograd thread (py-spy names it ``Dummy-N``: a
thread Python did not start), while the drafter thread waits in ``_engine_run_backward``. The CPU recording of
the tiny trainer has the same frames on one thread (on CPU the engine runs backward on the caller); these tests
split each such stack where the engine thread would take over, which is exactly what the H200 showed: the
recompute frames on ``Dummy-1``, the caller parked in ``_engine_run_backward``. NVML readings are planted
(GpuSample values as the real source builds them).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dflash_diag.analysis.pipeline import pipeline_view
from dflash_diag.analysis.threads import aggregate_threads
from dflash_diag.model import (
    NA,
    Board,
    GpuProcess,
    GpuSample,
    Observation,
    StackSample,
    ThreadSample,
    ThreadState,
    WriterIdentity,
)
from dflash_diag.model.board import BOARD_SCHEMA
from dflash_diag.sources.pyspy_json import load_recorded_dumps

S = ThreadState
TINY = Path(__file__).resolve().parents[1] / "fixtures" / "cpu" / "pyspy_tiny_trainer.json"
WALL0 = 1_764_412_345.0
WORKER_TID = 999_001


def _split_backward(sample: StackSample) -> StackSample:
    """drafter-0 inside backward -> drafter-0 parked in _engine_run_backward + Dummy-1 running the inner frames."""
    threads: list[ThreadSample] = []
    worker_frames: tuple = ()
    for t in sample.threads:
        names = [f.name for f in t.frames]
        if t.name == "drafter-0" and "_engine_run_backward" in names:
            cut = names.index("_engine_run_backward")
            worker_frames = t.frames[:cut]
            t = replace(t, frames=t.frames[cut:], active=False, owns_gil=False)
        threads.append(t)
    worker = ThreadSample(thread_id=7, os_thread_id=WORKER_TID, name="Dummy-1", active=bool(worker_frames),
                          owns_gil=False, frames=worker_frames)
    return replace(sample, threads=(*threads, worker))


def _gpu(util_pct: float, at_s: float, pid: int) -> tuple[GpuSample, ...]:
    return (GpuSample(index=0, name="NVIDIA H200", uuid="GPU-0", util_pct=util_pct, mem_util_pct=40.0,
                      memory_used_bytes=1, memory_total_bytes=2, power_w=600.0, power_limit_w=700.0,
                      sm_clock_mhz=1980, max_sm_clock_mhz=1980, temperature_c=60, throttle_reasons=(),
                      processes=(GpuProcess(pid=pid, used_memory_bytes=1, sm_util_pct=util_pct),),
                      monotonic_s=at_s),)


def _board(pid: int) -> Board:
    app = {"threads": {"target-0": {"role": "target", "device": "cuda:0"},
                       "drafter-0": {"role": "drafter", "device": "cuda:0"}}}
    return Board(schema=BOARD_SCHEMA, writer=WriterIdentity(pid=pid, start_time_ticks=5, argv=("python",),
                                                         python="3.12", torch="2.11", hostname="h"),
                 seq=1, wall_time_s=WALL0 + 1.0, interval_s=0.5, threads={}, probes={}, app=app, path="/tmp/b.json")


def _observation(util_pct: float | None, *, split: bool = True, board: bool = True) -> Observation:
    stacks = load_recorded_dumps(TINY, start_monotonic_s=10.0, spacing_s=0.2, start_wall_s=WALL0)
    if split:
        stacks = tuple(_split_backward(s) for s in stacks)
    pid = stacks[0].pid
    gpus: Any = NA("no NVML")
    if util_pct is not None:
        gpus = tuple(_gpu(util_pct, 10.0 + 0.5 * k, pid) for k in range(9))
    return Observation(pid=pid, cmdline=("python", "-m", "reference_trainer"), started_wall_s=WALL0, window_s=3.6,
                       stacks=stacks, proc=(), gpus=gpus, boards=(_board(pid),) if board else NA("no board"),
                       process_alive=True, warnings=())


def test_autograd_worker_is_attributed_to_the_stage_whose_backward_it_runs() -> None:
    threads = aggregate_threads(_observation(util_pct=None))
    by = {t.name: t for t in threads}
    worker = by["Dummy-1"]
    assert worker.stage == "drafter" and worker.helper, worker
    assert "drafter-0's backward" in worker.attribution, worker.attribution
    assert worker.shares[S.CHECKPOINT] > 0  # the recompute runs on the worker
    # The drafter's own row carries the time its backward spends in checkpoint recompute, not "native".
    drafter = by["drafter-0"]
    unsplit = {t.name: t for t in aggregate_threads(_observation(util_pct=None, split=False))}["drafter-0"]
    assert drafter.shares[S.CHECKPOINT] == pytest.approx(unsplit.shares[S.CHECKPOINT])
    # The stage mean is over the stage's own threads: the helper is listed, not averaged in twice.
    view = pipeline_view(_observation(util_pct=None), threads, now_wall_s=WALL0 + 2.0)
    assert view.drafter.threads == ("drafter-0",)
    assert view.drafter.shares[S.CHECKPOINT] == pytest.approx(drafter.shares[S.CHECKPOINT])
    # Listed right after the stage's own threads.
    names = [t.name for t in threads]
    assert names.index("Dummy-1") == names.index("drafter-0") + 1


def test_gpu_bound_stage_reads_gpu_bound() -> None:
    """GPU0 99% busy (NVML), both stages on cuda:0 (board): time in torch ops and in backward is GPU wait."""
    busy = {t.name: t for t in aggregate_threads(_observation(util_pct=99.0))}
    calm = {t.name: t for t in aggregate_threads(_observation(util_pct=30.0))}
    for name in ("target-0", "drafter-0"):
        assert busy[name].shares[S.GPU_WAIT] >= 0.35, (name, dict(busy[name].shares))
        # what stays native is CPU kernels seen in native frames (MKL on this CPU recording)
        assert busy[name].shares[S.NATIVE] <= 0.15, (name, dict(busy[name].shares))
        assert calm[name].shares[S.GPU_WAIT] == 0.0, (name, dict(calm[name].shares))
        # waiting for the queue stays a queue wait; only compute-looking time moves
        assert busy[name].shares[S.QUEUE_PUT] == pytest.approx(calm[name].shares[S.QUEUE_PUT])
    assert busy["MainThread"].shares[S.GPU_WAIT] == 0.0  # joining threads is not GPU work
    dominant = max(busy["drafter-0"].shares, key=lambda s: busy["drafter-0"].shares[s])
    assert dominant in (S.GPU_WAIT, S.CHECKPOINT), dict(busy["drafter-0"].shares)


def test_the_process_gpu_from_nvml_when_no_board_says_which() -> None:
    """No board: the process is on exactly one GPU (NVML's process list), so its threads' device is that one."""
    busy = {t.name: t for t in aggregate_threads(_observation(util_pct=99.0, board=False))}
    assert busy["target-0"].shares[S.GPU_WAIT] >= 0.35


def test_a_cpu_thread_of_a_gpu_process_gets_no_gpu_evidence() -> None:
    obs = _observation(util_pct=99.0)
    board = obs.board
    assert board is not None
    app = {"threads": {"target-0": {"role": "target", "device": "cpu"}}}
    obs = replace(obs, boards=(replace(board, app=app),))
    by = {t.name: t for t in aggregate_threads(obs)}
    assert by["target-0"].shares[S.GPU_WAIT] == 0.0
