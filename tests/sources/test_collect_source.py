"""Collector and LiveSampler: scheduling, dedup and back-off with injected sources; then real py-spy end to end."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from workload import pipeline_child

from dflash_diag.analysis.pipeline import pipeline_view
from dflash_diag.analysis.threads import aggregate_threads
from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.model import NA, Board, ProcThreadSample, StackSample, ThreadState, WriterIdentity
from dflash_diag.model.board import BOARD_SCHEMA
from dflash_diag.sources.collect import Collector, LiveSampler
from dflash_diag.sources.config import SamplerConfig, SamplerIO
from dflash_diag.sources.pyspy_json import PySpyOutputError, load_recorded_dumps

S = ThreadState
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RECORDED = load_recorded_dumps(FIXTURES / "cpu" / "pyspy_drafter_bound.json")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 1e-6)

    def wall(self) -> float:
        return 1_764_412_345.0 + self.now


class FakeSpy:
    """Replays recorded dumps at the fake clock's time; each dump costs ``dump_s`` of it."""

    def __init__(self, clock: FakeClock, dump_s: float = 0.005, fail_after: int | None = None,
                 error: AttachError | None = None) -> None:
        self.clock = clock
        self.dump_s = dump_s
        self.calls = 0
        self.fail_after = fail_after
        self.error = error or AttachError("py-spy could not read PID: boom", ExitCode.FAILURE)

    def dump(self) -> StackSample:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise self.error
        self.clock.now += self.dump_s
        base = RECORDED[self.calls % len(RECORDED)]
        return replace(base, pid=os.getpid(), monotonic_s=self.clock.now, duration_s=self.dump_s)


class NoGpu:
    def sample(self) -> NA:
        return NA("no NVML (libnvidia-ml.so not found)")


def make_board(seq: int, wall_s: float) -> Board:
    return Board(
        schema=BOARD_SCHEMA,
        writer=WriterIdentity(pid=os.getpid(), start_time_ticks=1, argv=(), python="3.11", torch=None, hostname="h"),
        seq=seq, wall_time_s=wall_s, interval_s=1.0, threads={},
        probes={"queues": {"status": "ok", "q_hs": {"depth": seq, "maxsize": 64, "depth_history": [seq]}}},
        app={}, path="x",
    )


def collector(clock: FakeClock, spy: FakeSpy, config: SamplerConfig | None = None, **io: Any) -> Collector:
    """A Collector of this test process on the fake clock, replaying recorded dumps."""
    fakes = SamplerIO(pyspy=spy, nvml=NoGpu(), clock=clock, wall_clock=clock.wall, sleep=clock.sleep, **io)
    return Collector(os.getpid(), config or SamplerConfig(rate_hz=5.0), fakes)


def test_schedule_dedup_and_progress() -> None:
    clock = FakeClock()
    spy = FakeSpy(clock)
    reads: list[int] = []

    def boards(pid: int) -> Board:
        reads.append(pid)
        seq = len(reads) // 2  # the writer publishes every second read: each version is seen twice
        return make_board(seq, clock.wall())

    progress: list[tuple[float, float]] = []
    obs = collector(clock, spy, board_reader=boards).collect(2.0, progress=lambda d, t: progress.append((d, t)))
    assert 9 <= len(obs.stacks) <= 11  # 5 Hz for 2 s
    assert [s.monotonic_s for s in obs.stacks] == sorted(s.monotonic_s for s in obs.stacks)
    assert 4 <= len(obs.proc) <= 6  # /proc every 0.5 s, plus a last sweep
    assert isinstance(obs.boards, tuple) and len(reads) >= 4
    seqs = [b.seq for b in obs.boards]
    assert seqs == sorted(set(seqs))  # deduplicated by seq, oldest first
    assert isinstance(obs.gpus, NA) and "libnvidia-ml.so" in obs.gpus.reason
    assert obs.process_alive and obs.pid == os.getpid()
    assert obs.window_s == pytest.approx(2.0, abs=0.1)
    assert progress[-1] == (2.0, 2.0) and all(a[0] <= b[0] for a, b in zip(progress, progress[1:], strict=False))
    assert obs.cmdline  # our own argv, redacted by the default redactor


def test_slow_dumps_back_off() -> None:
    """py-spy taking 60 ms per dump: the rate drops so py-spy stays under 10% of a core, and says so."""
    clock = FakeClock()
    spy = FakeSpy(clock, dump_s=0.06)
    coll = collector(clock, spy, SamplerConfig(rate_hz=10.0))
    obs = coll.collect(3.0)
    assert coll.effective_rate_hz == pytest.approx(0.10 / 0.06)
    assert len(obs.stacks) <= 7  # ~1.7 Hz for 3 s (the first dumps happen before the cap is known)
    assert any("backed off to 1.7 Hz" in w and "60 ms of CPU" in w for w in obs.warnings)


def test_fixed_rate_when_not_adaptive() -> None:
    clock = FakeClock()
    obs = collector(clock, FakeSpy(clock, dump_s=0.06), SamplerConfig(rate_hz=10.0, adaptive=False)).collect(1.0)
    assert len(obs.stacks) >= 9


def test_first_dump_failure_is_raised_later_ones_are_warnings() -> None:
    clock = FakeClock()
    denied = AttachError("not allowed to inspect PID 1: ...", ExitCode.PERMISSION)
    with pytest.raises(AttachError) as err:
        collector(clock, FakeSpy(clock, fail_after=0, error=denied)).collect(1.0)
    assert err.value.exit_code == ExitCode.PERMISSION
    obs = collector(clock, FakeSpy(clock, fail_after=3)).collect(2.0)
    assert len(obs.stacks) == 3 and obs.process_alive
    assert any(w.startswith("py-spy failed") and "boom" in w for w in obs.warnings)


def test_redaction_is_injectable() -> None:
    clock = FakeClock()
    obs = collector(clock, FakeSpy(clock), redact_argv=lambda argv: ("<all hidden>",)).collect(0.2)
    assert obs.cmdline == ("<all hidden>",)


def test_live_sampler_window_with_fakes() -> None:
    clock = FakeClock()
    sampler = LiveSampler(os.getpid(), SamplerConfig(rate_hz=10.0, window_s=1.0),
                          SamplerIO(pyspy=FakeSpy(clock), nvml=NoGpu(), board_reader=lambda pid: None, clock=clock,
                                    wall_clock=clock.wall))
    try:
        first = sampler.poll()  # synchronous first dump
        assert len(first.stacks) == 1
        assert first.window_s < 0.5  # what was gathered so far, not the 1 s asked for
        assert sampler.set_rate(1000.0) == 50.0  # clamped
        assert isinstance(first.boards, NA)
    finally:
        sampler.close()


# --- real py-spy, real processes ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "bottleneck"), [("target-bound", "target"), ("drafter-bound", "drafter")])
def test_end_to_end_real_pyspy(mode: str, bottleneck: str) -> None:
    with pipeline_child("--mode", mode, "--drafters", "2") as child:
        obs = Collector(child.pid, SamplerConfig(rate_hz=5.0)).collect(3.0)
    threads = aggregate_threads(obs)
    by = {t.name: t for t in threads}
    summary = {t.name: ({k.value: round(v, 2) for k, v in t.shares.items() if v}, t.cpu_pct) for t in threads}
    why = f"{len(obs.stacks)} samples, warnings {obs.warnings}, threads {summary}"
    assert obs.process_alive, why
    assert len(obs.stacks) >= 3, why
    assert {"target-0", "drafter-0", "drafter-1", "MainThread"} <= set(by), why
    assert by["target-0"].stage == "target" and by["drafter-1"].stage == "drafter"
    assert by["MainThread"].shares[S.IDLE] == 1.0, why  # Event.wait
    assert not isinstance(by["target-0"].cpu_pct, NA), why
    drafter_get = (by["drafter-0"].shares[S.QUEUE_GET] + by["drafter-1"].shares[S.QUEUE_GET]) / 2
    if mode == "target-bound":
        assert drafter_get >= 0.5, why  # drafters blocked on an empty queue
        # (rarely blocked in put: on a busy box the drafters may not get a CPU for a moment)
        assert by["target-0"].shares[S.QUEUE_PUT] <= 0.25, why
    else:
        assert by["target-0"].shares[S.QUEUE_PUT] >= 0.5, why  # the target blocked on a full queue
        assert drafter_get <= 0.25, why
    assert any(k.rsplit(":", 1)[0].endswith("pipeline_child.py") and ("q.put(" in v or "q.get(" in v)
               for k, v in obs.source_lines.items()), obs.source_lines
    view = pipeline_view(obs, threads)
    assert view.bottleneck == bottleneck, (view.verdict, why)


@pytest.mark.slow
def test_end_to_end_with_the_probe_board(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child publishes q_hs through the real probes; the collector reads the real board."""
    board_dir = tmp_path / "boards"
    board_dir.mkdir(mode=0o700)
    monkeypatch.setenv("DFLASH_DIAG_BOARD_DIR", str(board_dir))
    with pipeline_child("--mode", "drafter-bound", "--probes") as child:
        deadline = time.monotonic() + 30
        while not (board_dir / f"{child.pid}.json").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        obs = Collector(child.pid, SamplerConfig(rate_hz=5.0, board_dir=str(board_dir))).collect(2.5)
    assert isinstance(obs.boards, tuple) and len(obs.boards) >= 2, obs.boards
    assert len({b.seq for b in obs.boards}) == len(obs.boards)
    view = pipeline_view(obs, aggregate_threads(obs))
    assert view.queue_name == "q_hs" and view.queue_maxsize == 4
    assert view.bottleneck == "drafter", view.verdict
    assert view.verdict.startswith("drafter-bound: q_hs ")
    assert "(probe)" in view.verdict  # the probe's measured put/get shares
    by = {t.name: t for t in aggregate_threads(obs)}
    assert by["target-0"].stage == "target"


@pytest.mark.slow
def test_process_exit_is_noticed() -> None:
    with pipeline_child("--mode", "target-bound", max_s=2.0) as child:
        t0 = time.monotonic()
        obs = Collector(child.pid, SamplerConfig(rate_hz=5.0)).collect(30.0)
        took_s = time.monotonic() - t0
    assert not obs.process_alive, obs.warnings
    assert took_s < 20.0, took_s  # returned when the process exited, not after 30 s
    assert obs.stacks, obs.warnings  # what it had
    assert any("exited" in w for w in obs.warnings), obs.warnings
    # the exit is not a py-spy failure
    assert not any(w.startswith("py-spy failed") for w in obs.warnings), obs.warnings


@pytest.mark.slow
def test_live_sampler_real() -> None:
    with pipeline_child("--mode", "target-bound") as child:
        sampler = LiveSampler(child.pid, SamplerConfig(rate_hz=5.0, window_s=10.0))
        try:
            first = sampler.poll()
            assert len(first.stacks) >= 1 and first.process_alive
            deadline = time.monotonic() + 30
            obs = first
            while len(obs.stacks) < 4 and time.monotonic() < deadline:
                time.sleep(0.3)
                obs = sampler.poll()
            assert len(obs.stacks) >= 4
            assert {t.name for t in aggregate_threads(obs)} >= {"target-0", "drafter-0"}
            child.kill()
            child.wait()
            deadline = time.monotonic() + 30
            while obs.process_alive and time.monotonic() < deadline:
                time.sleep(0.2)
                obs = sampler.poll()
            assert not obs.process_alive
            assert obs.stacks  # the last data stays
            time.sleep(0.5)
            assert len(sampler.poll().stacks) == len(obs.stacks)  # frozen at the exit
        finally:
            sampler.close()


def test_missing_process() -> None:
    import subprocess

    proc = subprocess.Popen(["true"])
    proc.wait()
    with pytest.raises(AttachError) as err:
        Collector(proc.pid).collect(1.0)
    assert err.value.exit_code == ExitCode.NO_PROCESS
    with pytest.raises(AttachError) as err:
        LiveSampler(proc.pid).poll()
    assert err.value.exit_code == ExitCode.NO_PROCESS


def test_controls_and_poll_never_wait_for_a_dump_in_progress() -> None:
    """The UI thread calls set_rate/set_native and the app's sampler thread polls while py-spy runs."""
    gate = threading.Event()
    blocked = threading.Event()

    class SlowSpy:
        native = False

        def __init__(self) -> None:
            self.calls = 0

        def dump(self) -> StackSample:
            self.calls += 1
            if self.calls > 1:
                blocked.set()
                gate.wait(30)
            return replace(RECORDED[0], pid=os.getpid(), monotonic_s=time.monotonic())

    sampler = LiveSampler(os.getpid(), SamplerConfig(rate_hz=20.0),
                          SamplerIO(pyspy=SlowSpy(), nvml=NoGpu(), board_reader=lambda pid: None))
    try:
        assert len(sampler.poll().stacks) == 1
        assert blocked.wait(30)  # the sampler thread is now inside a dump
        t0 = time.monotonic()
        sampler.set_rate(2.0)
        sampler.set_native(True)
        obs = sampler.poll()
        assert time.monotonic() - t0 < 1.0
        assert len(obs.stacks) == 1
    finally:
        gate.set()
        sampler.close()


def test_saturated_trainer_backs_off() -> None:
    """The trainer keeps both allowed cores 95% busy: py-spy would steal from it, so the rate drops to 2 Hz."""
    clock = FakeClock()
    start = clock.now

    def busy_proc(pid: int) -> tuple[ProcThreadSample, ...]:
        run_ns = int((clock.now - start) * 1.9e9)
        return (ProcThreadSample(tid=pid, comm="python", state="R", utime_s=0.0, stime_s=0.0, run_ns=run_ns,
                                 runq_wait_ns=0, monotonic_s=clock.now),)

    coll = collector(clock, FakeSpy(clock), SamplerConfig(rate_hz=10.0), proc_reader=busy_proc, cpu_cores=2)
    obs = coll.collect(4.0)
    assert coll.effective_rate_hz == 2.0
    assert len(obs.stacks) <= 12  # ~10 Hz until the second /proc sweep, then 2 Hz
    assert any("saturates its 2 CPU cores" in w for w in obs.warnings)
    idle = collector(FakeClock(), FakeSpy(clock), SamplerConfig(rate_hz=10.0), proc_reader=lambda pid: (), cpu_cores=2)
    assert idle.effective_rate_hz == 10.0


def test_collector_redacts_argv_by_default() -> None:
    """Every Observation's cmdline is redacted, whoever builds the Collector."""
    secrets = ["--api-key", "sk-1", "--token=abc", "WANDB_API_KEY=xyz", "lr=3e-4", "--lr", "1"]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *secrets])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and "sk-1" not in Path(f"/proc/{child.pid}/cmdline").read_text():
            time.sleep(0.05)
        cmdline = Collector(child.pid).cmdline
        assert cmdline[-7:] == ("--api-key", "<redacted>", "--token=<redacted>", "WANDB_API_KEY=<redacted>",
                                "lr=3e-4", "--lr", "1")
    finally:
        child.kill()
        child.wait()


class TornSpy(FakeSpy):
    """Every other dump is garbled, as a nonblocking read of a changing process can be."""

    def dump(self) -> StackSample:
        if self.calls % 2 == 1:
            self.calls += 1
            self.clock.now += self.dump_s
            raise PySpyOutputError("py-spy output: thread[1].frames[12].line = -60417 is out of range")
        return super().dump()


def test_a_garbled_dump_is_one_failed_sample_not_the_end() -> None:
    clock = FakeClock()
    obs = collector(clock, TornSpy(clock)).collect(2.0)
    assert len(obs.stacks) >= 3  # sampling went on past the garbled dumps
    assert obs.process_alive


def test_auto_rate_climbs_with_idle_cores_and_drops_when_they_go() -> None:
    """Auto: 2 Hz until idle CPU is measured, 10 Hz once 14 of 16 cores are seen idle, 2 Hz when they fill up."""
    from dflash_diag.sources.procfs import CpuTimes

    clock = FakeClock()
    idle_share = {"now": 14 / 16}
    ticks = {"idle": 0.0, "total": 0.0, "at": clock.now}

    def cpu() -> CpuTimes:
        dt = clock.now - ticks["at"]
        ticks["at"] = clock.now
        ticks["total"] += dt * 100 * 16
        ticks["idle"] += dt * 100 * 16 * idle_share["now"]
        return CpuTimes(int(ticks["idle"]), int(ticks["total"]), 16, clock.now)

    coll = collector(clock, FakeSpy(clock), SamplerConfig(), cpu_reader=cpu, cpu_cores=16, proc_reader=lambda pid: ())
    assert coll.effective_rate_hz == 2.0
    obs = coll.collect(4.0)
    assert coll.effective_rate_hz == 10.0 and coll.rate_reason.startswith("auto: 14.0 idle cores")
    assert len(obs.stacks) >= 25  # mostly at 10 Hz
    idle_share["now"] = 0.5 / 16
    coll.collect(5.0)  # the load window (3 s) fills with the busy box
    assert coll.effective_rate_hz == 2.0
    assert not any("backed off" in w for w in obs.warnings)  # auto is not a back-off from an asked rate


def test_a_fixed_window_ends_on_time_when_dumps_are_slow() -> None:
    """A dump that would end past the window is not started: snapshot's gatherer abandons a window that misses
    its deadline (the whole window was lost on a saturated trainer, py-spy taking 0.4 s per dump)."""
    clock = FakeClock()
    coll = collector(clock, FakeSpy(clock, dump_s=0.4), SamplerConfig(rate_hz=20.0, burst=True))
    start = clock.now
    obs = coll.collect(1.8)
    assert clock.now - start <= 1.8 + 1e-6, clock.now - start
    assert len(obs.stacks) >= 2  # half a core at 0.4 s of CPU per dump: 1.25 Hz


class GpmGpu(NoGpu):
    """A GPU source with NVML GPM: a window begun before the first sample and ended after the last."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.calls: list[tuple[str, float]] = []

    def gpm_begin(self) -> str:
        self.calls.append(("begin", self.clock.now))
        return "window"

    def gpm_end(self, window: str) -> tuple[Any, ...]:
        from dflash_diag.model import GpmReading

        assert window == "window"
        self.calls.append(("end", self.clock.now))
        return (GpmReading(index=0, window_s=self.calls[-1][1] - self.calls[0][1], sm_util_pct=95.0,
                           sm_occupancy_pct=14.0, any_tensor_pct=1.0, hmma_tensor_pct=1.0, fp32_pct=69.0,
                           fp16_pct=0.0, dram_bw_pct=10.0),)


def test_the_window_carries_nvml_gpm_over_its_whole_span() -> None:
    clock = FakeClock()
    gpu = GpmGpu(clock)
    fakes = SamplerIO(pyspy=FakeSpy(clock), nvml=gpu, clock=clock, wall_clock=clock.wall, sleep=clock.sleep)
    obs = Collector(os.getpid(), SamplerConfig(rate_hz=5.0), fakes).collect(2.0)
    assert [c[0] for c in gpu.calls] == ["begin", "end"]
    assert len(obs.gpm) == 1 and obs.gpm[0].fp32_pct == 69.0
    assert obs.gpm[0].window_s >= 2.0  # begun before the first sample, ended after the last
    # A GPU source without GPM (or NVML missing) leaves the readings empty: nothing else changes.
    plain = collector(clock, FakeSpy(clock)).collect(1.0)
    assert plain.gpm == ()
