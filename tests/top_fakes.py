"""A deterministic fake :class:`TopSource` and frames for the TUI tests (no py-spy, no clock)."""

from __future__ import annotations

import threading
from dataclasses import replace
from types import MappingProxyType

from dflash_diag.errors import AttachError, CommandError
from dflash_diag.model import (
    NA,
    Board,
    Finding,
    Frame,
    GpuProcess,
    GpuSample,
    PipelineView,
    Severity,
    StageStats,
    ThreadState,
    ThreadStats,
    WriterIdentity,
)
from dflash_diag.model.stats import stage_names
from dflash_diag.view.frame import TopFrame, thread_key

S = ThreadState
FROZEN_WALL_S = 1_764_412_345.0  # 2025-11-29 10:32:25 UTC: every screen shows this, so snapshots are stable


def _timeline(pattern: str, n: int = 120) -> tuple[ThreadState, ...]:
    chars = {
        "P": S.PYTHON,
        "N": S.NATIVE,
        "G": S.GPU_WAIT,
        "W": S.GIL_WAIT,
        ">": S.QUEUE_PUT,
        "<": S.QUEUE_GET,
        "C": S.COMPILE,
        "K": S.CHECKPOINT,
        ".": S.IDLE,
    }
    return tuple(chars[pattern[i % len(pattern)]] for i in range(n))


def _shares(timeline: tuple[ThreadState, ...]) -> dict[ThreadState, float]:
    shares = {state: 0.0 for state in ThreadState}
    for state in timeline:
        shares[state] += 1.0 / len(timeline)
    return shares


def thread(
    name: str, tid: int, stage: str, pattern: str, cpu_pct: float, func: str, gpu: int | None = None
) -> ThreadStats:
    timeline = _timeline(pattern)
    return ThreadStats(
        name=name,
        os_thread_id=tid,
        stage=stage,
        n_samples=len(timeline),
        shares=MappingProxyType(_shares(timeline)),
        cpu_pct=cpu_pct,
        gil_held_pct=100.0 * _shares(timeline)[S.PYTHON],
        top_frame=Frame(func, f"/src/reference_trainer/{stage}.py", 42),
        gpu_index=gpu,
        timeline=timeline,
    )


THREADS = (
    thread("MainThread", 1000, "other", "........", 1.0, "join"),
    thread("target-0", 1001, "target", "NNNNPG>>", 71.0, "forward", 0),
    thread("target-1", 1002, "target", "NNNPWG>>", 64.0, "forward", 0),
    thread("drafter-0", 1003, "drafter", "PNNKKWW<", 88.0, "chunked_loss", 1),
    thread("drafter-1", 1004, "drafter", "PPNNKWWW", 93.0, "chunked_loss", 1),
    thread("wandb-writer", 1005, "other", "...P....", 3.0, "wait"),
)


def _stage(name: str, threads: tuple[ThreadStats, ...], batches: float, tokens: float) -> StageStats:
    members = tuple(t for t in threads if t.stage == name)
    shares = {state: sum(t.shares[state] for t in members) / len(members) for state in ThreadState}
    return StageStats(name, tuple(t.name for t in members), batches, tokens, MappingProxyType(shares))


PIPELINE = PipelineView(
    target=_stage("target", THREADS, 0.38, 21_500.0),
    drafter=_stage("drafter", THREADS, 0.31, 17_600.0),
    queue_name="q_hs",
    queue_depth=12,
    queue_maxsize=16,
    queue_depth_history=tuple(min(16, i // 3) for i in range(40)),
    queue_trend_per_s=0.31,
    producer_starved_share=0.25,
    consumer_starved_share=0.06,
    bottleneck="drafter",
    verdict="drafter-bound: q_hs 12/16 rising +0.3/s, targets blocked in put 25% of the time (probe), "
    "drafters wait in get 6% of the time (probe)",
    queue_trend="rising",
    producer_starved_sampled=0.22,
    consumer_starved_sampled=0.05,
    probe_boards=20,
    names=stage_names(THREADS),  # the reference trainer's threads: target-0, drafter-0, drafter-1
)

GPUS = tuple(
    GpuSample(
        index=i,
        name="NVIDIA H200",
        uuid=f"GPU-{i}",
        util_pct=util,
        mem_util_pct=40.0,
        memory_used_bytes=60 * 2**30,
        memory_total_bytes=141 * 2**30,
        power_w=400.0,
        power_limit_w=700.0,
        sm_clock_mhz=1980,
        max_sm_clock_mhz=1980,
        temperature_c=50,
        throttle_reasons=(),
        processes=(GpuProcess(4242, 60 * 2**30, util),),
        monotonic_s=100.0,
    )
    for i, util in ((0, 97.0), (1, 61.0))
)

BOARD = Board(
    schema="dflash-diag.board/1",
    writer=WriterIdentity(4242, 1, ("python", "-m", "reference_trainer"), "3.11.7", "2.13.0", "box"),
    seq=17,
    wall_time_s=FROZEN_WALL_S - 42.0,  # stale on purpose: the pane must say "no update for 42 s"
    interval_s=0.5,
    threads=MappingProxyType({1001: "target-0"}),
    probes=MappingProxyType(
        {
            "gil": {"status": "ok", "contention_share": 0.41, "wait_mean_ms": 9.8, "wait_p99_ms": 43.0},
            "allocator": {"status": "na", "reason": "no CUDA"},
            "compile": {
                "status": "ok",
                "compiles": 9,
                "recompiles": 3,
                "graph_breaks": 2,
                "recompile_limit_hits": 1,
            },
            "fastpath": {
                "status": "ok",
                "gdn_fast_path": False,
                "gdn_reason": "fla not importable",
                "flex_attention": "eager",
            },
            "codedrift": {
                "status": "ok",
                "checked_modules": 900,
                "stale": [{"module": "reference_trainer.loss"}],
            },
        }
    ),
    app=MappingProxyType({}),
    path="/tmp/board.json",
)

FINDINGS = (
    Finding(
        "stale-code",
        Severity.CRITICAL,
        "reference_trainer.loss changed on disk after import: the process runs old code",
        (("module", "reference_trainer.loss"),),
        "restart the trainer",
        0.3,
    ),
)


def make_frame(**changes: object) -> TopFrame:
    frame = TopFrame(
        pid=4242,
        cmdline=("python", "-m", "reference_trainer", "--preset", "tiny"),
        wall_s=FROZEN_WALL_S,
        window_s=10.0,
        rate_hz=2.0,
        requested_rate_hz=2.0,
        native=False,
        n_samples=120,
        threads=THREADS,
        pipeline=PIPELINE,
        gpus=NA("no NVML: libnvidia-ml.so.1 not found"),
        board=BOARD,
        findings=FINDINGS,
        stacks={
            thread_key(t.name, t.os_thread_id): (
                Frame(t.top_frame.name if t.top_frame else "?", f"/src/{t.stage}.py", 42),
                Frame("run", "/usr/lib/python3.11/threading.py", 982),
            )
            for t in THREADS
        },
        native_stacks={
            thread_key("drafter-1", 1004): (Frame("at::native::addmm", "libtorch_cpu.so", 0, native=True),)
        },
    )
    return replace(frame, **changes)  # type: ignore[arg-type]


class FakeSource:
    """Returns queued frames (the last one forever); records rate/native/snapshot requests."""

    def __init__(self, frames: list[TopFrame] | None = None, error: AttachError | None = None) -> None:
        self.pid = 4242
        self.frames = list(frames or [make_frame()])
        self.error = error
        self.rate_hz = 2.0
        self.native = False
        self.snapshots: list[str] = []
        self.polls = 0
        self.closed = False
        self.polled = threading.Event()
        self.snapshot_error: CommandError | None = None

    def poll(self) -> TopFrame:
        self.polls += 1
        self.polled.set()
        if self.error is not None:
            raise self.error
        frame = self.frames.pop(0) if len(self.frames) > 1 else self.frames[0]
        return replace(frame, rate_hz=self.rate_hz, native=self.native)

    def set_rate(self, rate_hz: float) -> float:
        self.rate_hz = min(50.0, rate_hz)  # the real source clamps too
        return self.rate_hz

    def set_native(self, native: bool) -> bool:
        self.native = native
        return native

    def write_snapshot(self) -> str:
        if self.snapshot_error is not None:
            raise self.snapshot_error
        path = f"/tmp/fake-snapshot-{len(self.snapshots)}.tar.gz"
        self.snapshots.append(path)
        return path

    def close(self) -> None:
        self.closed = True
