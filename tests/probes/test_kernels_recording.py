"""probes.kernels, the torch.profiler recording `record --kernels` starts in a process, run here in this test process
(torch 2.13, CPU): it records the ops of threads other than the one that started it, ends at the steps asked for
(or the stop file, or its command's death), refuses beside a profiler of the program's own (running or warming up)
and steps aside when the program starts one, and leaves no hook, thread or profiler behind."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from dflash_contract import proc  # noqa: E402
from dflash_contract.attach import OUTCOME_SUFFIX  # noqa: E402
from probes import attach as attach_mod  # noqa: E402
from probes import kernels  # noqa: E402


class Worker:
    """A training thread: a small model, forward, backward and an optimizer step every few milliseconds."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.model = torch.nn.Linear(16, 16)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.thread = threading.Thread(target=self._run, name="trainer-0", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        x = torch.randn(8, 16)
        while not self.stop.is_set():
            self.model(x).pow(2).mean().backward()
            self.opt.step()
            self.opt.zero_grad()
            time.sleep(0.003)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)


@pytest.fixture
def worker() -> Iterator[Worker]:
    w = Worker()
    yield w
    w.close()


@pytest.fixture
def prefix(tmp_path: Path) -> str:
    d = tmp_path / "boards"
    d.mkdir(mode=0o700)
    return str(d / ".attach-1.0123456789abcdef")


def _wait_outcome(prefix: str, timeout_s: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(prefix + ".kernels"):
        assert time.monotonic() < deadline, "the recording did not end"
        time.sleep(0.02)
    return json.loads(Path(prefix + ".kernels").read_text())


def _wait_idle(timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while kernels.recording() is not None or any(t.name == kernels.THREAD_NAME for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the recording's thread did not end"
        time.sleep(0.02)


def test_it_records_other_threads_until_the_steps_and_leaves_nothing(worker: Worker, prefix: str) -> None:
    before = attach_mod.inventory()
    started = kernels.start({"duration_s": 20.0, "steps": 5}, files_prefix=prefix, lease=None)
    assert started["ok"] and started["recording"]["all_threads"] and not started["recording"]["cuda"]
    assert kernels.start({"duration_s": 1.0, "steps": None}, files_prefix=prefix + "x", lease=None)["refused"] == \
        kernels.PROFILER_ACTIVE  # one at a time
    outcome = _wait_outcome(prefix)
    _wait_idle()
    assert outcome["ok"] and outcome["reason"] == "steps" and outcome["steps"] >= 5
    assert len(outcome["step_marks"]) == outcome["steps"] and {m[1] for m in outcome["step_marks"]} == {worker.thread.native_id}
    assert outcome["threads"][str(worker.thread.native_id)] == "trainer-0"
    trace = Path(prefix + ".trace.json")
    assert stat.S_IMODE(trace.stat().st_mode) == 0o600 and outcome["trace_bytes"] == trace.stat().st_size
    events = json.loads(trace.read_text())["traceEvents"]
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("tid") == worker.thread.native_id]
    assert {"aten::linear", "aten::mm"} & {e["name"] for e in ops}  # the worker's ops: not the starting thread's
    assert {m["name"] for m in outcome["clock_marks"]} <= {e["name"] for e in events}
    assert attach_mod.hooks_left(before, attach_mod.inventory()) == []  # no hook, no thread, no profiler left
    assert not torch.autograd.profiler._is_profiler_enabled
    with torch.profiler.profile() as prof:  # the program's own profiler starts as before
        torch.mm(torch.randn(4, 4), torch.randn(4, 4))
    assert any(e.name == "aten::mm" for e in prof.events())


def _program_profiler(hold: threading.Event, started: threading.Event, result: dict[str, Any],
                      schedule: bool) -> None:
    x = torch.randn(8, 8)
    try:
        if schedule:  # torch.profiler.profile in its warm-up step: prepared, not yet recording
            with torch.profiler.profile(schedule=torch.profiler.schedule(wait=0, warmup=1, active=1),
                                        acc_events=True) as prof:
                torch.mm(x, x)
                started.set()
                hold.wait(20)
                prof.step()
                torch.mm(x, x)
                prof.step()
        else:
            with torch.profiler.profile() as prof:
                started.set()
                hold.wait(20)
                torch.mm(x, x)
        result["events"] = len(prof.events() or ())
    except Exception as exc:
        result["error"] = repr(exc)
    started.set()


@pytest.mark.parametrize("schedule", [False, True], ids=["recording", "warming-up"])
def test_it_refuses_beside_the_programs_own_profiler_and_leaves_it_alone(prefix: str, schedule: bool) -> None:
    hold, started, result = threading.Event(), threading.Event(), {}
    thread = threading.Thread(target=_program_profiler, args=(hold, started, result, schedule), daemon=True)
    thread.start()
    assert started.wait(20)
    try:
        refused = kernels.start({"duration_s": 5.0, "steps": None}, files_prefix=prefix, lease=None)
    finally:
        hold.set()
        thread.join(20)
    assert refused["ok"] is False and refused["refused"] == kernels.PROFILER_ACTIVE
    assert "torch allows one profiler per process" in refused["error"]
    if schedule:
        assert "prof in _program_profiler" in refused["error"]  # found by the frame that holds it
    assert result.get("error") is None and result["events"] > 0  # the program's profiler recorded, untouched
    assert not os.path.exists(prefix + ".kernels") and kernels.recording() is None


def test_the_programs_own_profiler_wins_ours_steps_aside(worker: Worker, prefix: str) -> None:
    assert kernels.start({"duration_s": 20.0, "steps": None}, files_prefix=prefix, lease=None)["ok"]
    time.sleep(0.3)
    with torch.profiler.profile() as prof:  # torch would refuse (or worse) beside ours: ours stops first
        torch.mm(torch.randn(4, 4), torch.randn(4, 4))
    assert any(e.name == "aten::mm" for e in prof.events())
    outcome = _wait_outcome(prefix)
    _wait_idle()
    assert outcome["ok"] and outcome["reason"] == "program-profiler" and outcome["trace_bytes"] > 0


def test_the_stop_file_aborts_and_drops_the_recording(worker: Worker, prefix: str) -> None:
    assert kernels.start({"duration_s": 20.0, "steps": None}, files_prefix=prefix, lease=None)["ok"]
    time.sleep(0.2)
    Path(prefix + ".stop").write_bytes(b"abort")
    outcome = _wait_outcome(prefix, timeout_s=10)
    _wait_idle()
    assert outcome["reason"] == "aborted" and outcome["trace_bytes"] is None
    assert not os.path.exists(prefix + ".trace.json")


def test_a_stop_file_still_empty_is_not_read_as_a_finish(worker: Worker, prefix: str) -> None:
    """The command creates the stop file, then writes its word: a recording that read the empty file in between as
    a finish kept what an abort asked to throw away (a fresh clone's CI saw it once)."""
    assert kernels.start({"duration_s": 20.0, "steps": None}, files_prefix=prefix, lease=None)["ok"]
    time.sleep(0.2)
    stop = Path(prefix + ".stop")
    stop.write_bytes(b"")
    time.sleep(0.5)  # several of the recording's ticks see the empty file
    assert kernels.recording() is not None and not os.path.exists(prefix + OUTCOME_SUFFIX)
    stop.write_bytes(b"abort")
    outcome = _wait_outcome(prefix, timeout_s=10)
    _wait_idle()
    assert outcome["reason"] == "aborted" and outcome["trace_bytes"] is None


def test_its_commands_death_stops_it_within_the_lease_check(worker: Worker, prefix: str) -> None:
    holder = subprocess.Popen(["sleep", "60"])
    try:
        lease = {"pid": holder.pid, "start_ticks": proc.start_time_ticks(holder.pid)}
        assert kernels.start({"duration_s": 60.0, "steps": None}, files_prefix=prefix, lease=lease)["ok"]
        time.sleep(0.2)
        holder.kill()
        holder.wait()
        t0 = time.monotonic()
        _wait_idle(timeout_s=10)
        gone_s = time.monotonic() - t0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert gone_s < 2.0  # one lease check every half second, then the stop
    assert not torch.autograd.profiler._is_profiler_enabled
    assert not os.path.exists(prefix + ".kernels") and not os.path.exists(prefix + ".trace.json")  # nobody to read


def test_a_lease_of_a_process_already_gone_starts_nothing(prefix: str) -> None:
    refused = kernels.start({"duration_s": 5.0, "steps": None}, files_prefix=prefix,
                            lease={"pid": 2**22 - 3, "start_ticks": 1})
    assert refused["ok"] is False and "is gone" in refused["error"] and kernels.recording() is None


def test_a_detach_beside_a_recording_does_not_count_the_recordings_hooks(worker: Worker, prefix: str,
                                                                           tmp_path: Path) -> None:
    import probes

    assert probes.current() is None
    assert attach_mod.run("attach", names=frozenset({"gil"}), board_dir=str(Path(prefix).parent), discover=False)["ok"]
    try:
        assert kernels.start({"duration_s": 20.0, "steps": None}, files_prefix=prefix, lease=None)["ok"]
        detached = attach_mod.run("detach")  # the recording's wrapper, hook and thread are there now, not before
        assert detached["ok"] and detached["hooks_left"] == []
    finally:
        probes.stop()
        Path(prefix + ".stop").write_bytes(b"abort")
        _wait_idle()


def test_a_torch_without_all_thread_recording_runs_the_profiler_on_the_recordings_own_thread(
        worker: Worker, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch 2.11 (the H200's) keeps the profiler per thread and has no profile_all_threads: started in the main
    thread, it could not be stopped from another ("Can't disable Kineto profiler when it's not running"). There
    the recording starts and stops it on its own thread (CUPTI still traces every thread's kernels); on a process
    without CUDA it refuses: nothing of the training threads would be recorded."""
    class NoAllThreads:
        def __init__(self, **kwargs: Any) -> None:
            if "profile_all_threads" in kwargs:
                raise TypeError("__init__() got an unexpected keyword argument 'profile_all_threads'")

    monkeypatch.setattr(torch.profiler, "_ExperimentalConfig", NoAllThreads)
    refused = kernels.start({"duration_s": 5.0, "steps": None}, files_prefix=prefix, lease=None)
    assert refused["refused"] == kernels.UNSUPPORTED and "runs nothing on CUDA" in refused["error"]

    entered_on: list[str] = []
    real_profile = torch.autograd.profiler.profile

    class CpuProfile(real_profile):  # type: ignore[misc, valid-type]
        """The CUDA profile this torch would start, on this CPU build: CPU activities only."""
        def __init__(self, use_device: Any = None, **kwargs: Any) -> None:
            super().__init__(**kwargs)

        def __enter__(self) -> Any:
            entered_on.append(threading.current_thread().name)
            return super().__enter__()

    monkeypatch.setattr(kernels, "_cuda_traceable", lambda torch: True)
    monkeypatch.setattr(torch.autograd.profiler, "profile", CpuProfile)
    started = kernels.start({"duration_s": 20.0, "steps": 3}, files_prefix=prefix, lease=None)
    assert started["ok"] and started["recording"]["all_threads"] is False
    outcome = _wait_outcome(prefix)
    _wait_idle()
    assert entered_on == [kernels.THREAD_NAME]
    assert outcome["ok"], outcome["error"] and outcome["reason"] == "steps"
    assert {m["name"] for m in outcome["clock_marks"]} <= {e["name"] for e in
                                                           json.loads(Path(prefix + ".trace.json").read_text())["traceEvents"]}
    assert not torch.autograd.profiler._is_profiler_enabled


def test_the_stop_takes_the_all_threads_callback_out_before_it_frees_the_profiler(worker: Worker, prefix: str) -> None:
    """torch's all-threads mode reads its state through a raw pointer in every thread's op callback, and its stop
    frees that state without waiting for the callbacks in flight: stopped beside a training thread, an op entering
    at that moment wrote into freed memory (SIGSEGV in ThreadLocalSubqueue::begin_op; bench/record_soak.py counts
    the processes lost). So the callback goes first, the calls in flight get DRAIN_S to leave, and only then does
    the profiler stop: the training thread's last recorded op began before the callback went, and the stop came a
    whole drain later."""
    started = kernels.start({"duration_s": 20.0, "steps": 3}, files_prefix=prefix, lease=None)
    assert started["ok"] and started["recording"]["all_threads"]
    outcome = _wait_outcome(prefix)
    _wait_idle()
    off_ns = outcome["callbacks_off_mono_ns"]
    assert isinstance(off_ns, int) and outcome["drain_ms"] >= 0.9e3 * kernels.DRAIN_S
    events = json.loads(Path(prefix + ".trace.json").read_text())["traceEvents"]
    # torch's timestamps (Unix microseconds) onto the monotonic clock, through the end marks (a few µs wide)
    marks = {m["name"]: m for m in outcome["clock_marks"]}
    placed = [(e["ts"] * 1e3 - marks[e["name"]]["mono_ns_before"]) for e in events if e.get("name") in marks]
    assert placed
    offset_ns = min(placed)
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("tid") == worker.thread.native_id]
    assert ops, "the training thread's ops were recorded"
    last_op_mono_ns = max(float(e["ts"]) for e in ops) * 1e3 - offset_ns
    # none entered the profiler after its callback was taken out (20 ms: the clocks' placement and the call's own
    # time), although the thread stepped every few milliseconds through the whole drain
    assert last_op_mono_ns <= off_ns + 20e6


def test_a_torch_that_cannot_take_the_callback_out_gets_no_all_threads_recording(
        prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the toggle, stopping the all-threads profiler races every other thread's ops: on a process without
    CUDA (nothing else to record) the recording is refused, saying why; the process is left as it was."""
    monkeypatch.delattr(torch._C._autograd, "_toggle_collection_dynamic")
    refused = kernels.start({"duration_s": 5.0, "steps": None}, files_prefix=prefix, lease=None)
    assert refused["ok"] is False and refused["refused"] == kernels.UNSUPPORTED
    assert "no way to take its callback out" in refused["error"]
    assert kernels.recording() is None and not torch.autograd.profiler._is_profiler_enabled


def test_a_process_still_importing_torch_is_refused(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The safe point can fall inside `import torch`: a profiler started on a half-made torch is refused."""
    monkeypatch.setattr(torch.__spec__, "_initializing", True, raising=False)
    refused = kernels.start({"duration_s": 5.0, "steps": None}, files_prefix=prefix, lease=None)
    assert refused["refused"] == kernels.NO_TORCH and "still importing torch" in refused["error"]
