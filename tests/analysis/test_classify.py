"""Thread-state classification on real py-spy recordings (CPU here, and the H200) and on rule-by-rule cases."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dflash_diag.analysis.classify import (
    DeviceEvidence,
    OsEvidence,
    classify,
    classify_sample,
    explain,
    wait_kind,
)
from dflash_diag.model import Frame, StackSample, ThreadSample, ThreadState
from dflash_diag.sources.lines import LineCache
from dflash_diag.sources.pyspy_json import load_recorded_dumps

S = ThreadState
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CPU = FIXTURES / "cpu"
H200 = FIXTURES / "h200" / "pyspy_dump_json_nonblocking.json"
_disk = LineCache()


# The line texts of the workload as it was when the CPU fixtures were recorded (an Observation records them the
# same way): the workload itself may change without shifting what the recordings mean.
_RECORDED_LINES = {int(k): v for k, v in json.loads((CPU / "pipeline_child_lines.json").read_text())["lines"].items()}


def cpu_lines(filename: str, line: int) -> str | None:
    if filename.endswith("/pipeline_child.py"):
        return _RECORDED_LINES.get(line)
    return _disk(filename, line)


# What the H200 child ran at the two lines whose C calls leave no frame (see the fixture's .md).
H200_LINES = {("/tmp/child.py", 7): "torch.cuda.synchronize()", ("/tmp/child.py", 21): "time.sleep(0.5)"}


def h200_lines(filename: str, line: int) -> str | None:
    return H200_LINES.get((filename, line))


def states_by_thread(samples: tuple[StackSample, ...], lines=None) -> dict[str, list[ThreadState]]:
    out: dict[str, list[ThreadState]] = {}
    for sample in samples:
        for thread, c in classify_sample(sample, lines=lines):
            out.setdefault(thread.name or "?", []).append(c.state)
    return out


def share(states: list[ThreadState], state: ThreadState) -> float:
    return Counter(states)[state] / len(states)


# --- the H200 recording ------------------------------------------------------------------------------------


def test_h200_queue_waiters_and_gil_holder() -> None:
    by = states_by_thread(load_recorded_dumps(H200), h200_lines)
    assert by["drafter-1"] == [S.QUEUE_GET] * 10
    assert by["drafter-0"] == [S.QUEUE_GET] * 10
    assert by["metrics-hog"] == [S.PYTHON] * 10


def test_h200_synchronize_thread_is_gpu_wait_with_its_line() -> None:
    """The GPU-waiting thread shows active:false owns_gil:false at the synchronize line."""
    by = states_by_thread(load_recorded_dumps(H200), h200_lines)
    assert by["target-0"] == [S.GPU_WAIT] * 10
    assert by["MainThread"] == [S.IDLE] * 10


def test_h200_without_line_text_falls_back_to_gil_wait() -> None:
    """Names alone cannot see a C call: off CPU, no GIL, someone else holding it -> GIL wait (documented)."""
    by = states_by_thread(load_recorded_dumps(H200))
    assert by["target-0"] == [S.GIL_WAIT] * 10
    assert by["drafter-1"] == [S.QUEUE_GET] * 10  # queue waits need no line text


# --- the CPU recordings ------------------------------------------------------------------------------------


def test_target_bound_recording() -> None:
    samples = load_recorded_dumps(CPU / "pyspy_target_bound.json")
    assert sum(s.native for s in samples) == 3
    by = states_by_thread(samples, cpu_lines)
    # The drafters starve: parked in Queue.get nearly always (now and then one computes on an item).
    assert share(by["drafter-0"], S.QUEUE_GET) >= 0.75
    assert share(by["drafter-1"], S.QUEUE_GET) >= 0.75
    assert set(by["drafter-0"] + by["drafter-1"]) <= {S.QUEUE_GET, S.NATIVE, S.GIL_WAIT, S.PYTHON}
    assert set(by["MainThread"]) == {S.IDLE}  # Event.wait
    # target-0 runs the matmul without the GIL; nobody else holds the GIL, so it is never "GIL wait".
    assert share(by["target-0"], S.NATIVE) >= 0.75
    assert S.GIL_WAIT not in by["target-0"]


def test_target_bound_native_frames_are_native_compute() -> None:
    samples = [s for s in load_recorded_dumps(CPU / "pyspy_target_bound.json") if s.native]
    for sample in samples:
        target = next(t for t in sample.threads if t.name == "target-0")
        assert any(f.native and "libtorch_cpu" in f.filename for f in target.frames)
        c = explain(target, lines=cpu_lines, gil_held_elsewhere=False)
        assert c.state is S.NATIVE and c.rule.startswith("native"), c


def test_drafter_bound_recording() -> None:
    by = states_by_thread(load_recorded_dumps(CPU / "pyspy_drafter_bound.json"), cpu_lines)
    assert share(by["target-0"], S.QUEUE_PUT) >= 0.75
    assert S.QUEUE_GET not in by["drafter-0"]
    assert share(by["gil-hog"], S.PYTHON) >= 0.6
    # drafter-0 computes, or waits for the GIL the hog holds (never idle, never queue).
    assert set(by["drafter-0"]) <= {S.NATIVE, S.GIL_WAIT, S.PYTHON}
    assert S.GIL_WAIT in by["drafter-0"]


def test_gil_wait_from_native_frames() -> None:
    """A condvar wait in the binding layer (``gil_scoped_*``, ``THPVariable_dealloc``): re-taking the GIL."""
    found = []
    for name in ("pyspy_drafter_bound.json", "pyspy_ckpt_compile.json", "pyspy_target_bound.json"):
        for sample in load_recorded_dumps(CPU / name):
            if not sample.native:
                continue
            for thread, c in classify_sample(sample, lines=cpu_lines):
                named = [f for f in thread.frames if f.native and not f.name.startswith("0x")]
                if (
                    len(named) >= 2
                    and named[0].name.startswith("pthread_cond")
                    and "libtorch_python" in named[1].filename
                    and thread.name in ("drafter-0", "target-0")
                ):
                    found.append(c.state)
    assert found and set(found) == {S.GIL_WAIT}


def test_compile_and_checkpoint_recording() -> None:
    samples = load_recorded_dumps(CPU / "pyspy_ckpt_compile.json")
    by = states_by_thread(samples, cpu_lines)
    assert set(by["compile-0"]) == {S.COMPILE}
    assert S.CHECKPOINT in by["ckpt-0"]
    assert set(by["drafter-0"]) <= {S.QUEUE_GET, S.NATIVE, S.GIL_WAIT, S.PYTHON}
    native_ckpt = [
        c for s in samples if s.native for t, c in classify_sample(s) if t.name == "ckpt-0"
        and any("call_unpack_hook" in f.name for f in t.frames)
    ]
    assert native_ckpt and {c.state for c in native_ckpt} == {S.CHECKPOINT}


# --- rule by rule ------------------------------------------------------------------------------------------

TH = "/usr/lib/python3.11/threading.py"
QP = "/usr/lib/python3.11/queue.py"
TORCH = "/venv/lib/python3.11/site-packages/torch"
APP = "/app/train.py"


def py(name: str, filename: str, line: int = 10) -> Frame:
    return Frame(name, filename, line)


def nat(name: str, lib: str = "/venv/lib/libtorch_cpu.so") -> Frame:
    return Frame(name, lib, 0, native=True, module=lib)


def thread(*frames: Frame, active: bool = False, gil: bool = False) -> ThreadSample:
    return ThreadSample(thread_id=1, os_thread_id=11, name="t", active=active, owns_gil=gil, frames=tuple(frames))


APP_LINES = {
    (APP, 1): "loss_val = loss.item()",
    (APP, 2): "time.sleep(0.1)",
    (APP, 3): "y = model(x)",
    (APP, 4): "self.q_hs.put(hidden)",
    (APP, 5): "logits = out.cpu()",
    (APP, 6): "with self.lock:",
    (APP, 7): "self.lock.acquire()",
}


def app_lines(filename: str, line: int) -> str | None:
    return APP_LINES.get((filename, line))


CASES = [
    ("queue put", thread(py("Condition.wait", TH), py("Queue.put", QP), py("run", APP)), None, S.QUEUE_PUT),
    ("queue get", thread(py("Condition.wait", TH), py("Queue.get", QP), py("run", APP)), None, S.QUEUE_GET),
    ("instrumented queue get", thread(py("Condition.wait", TH), py("ProbedQueue.get", "/p/probes/queues.py")),
     None, S.QUEUE_GET),
    ("queue put by line text", thread(py("Condition.wait", TH), py("run", APP, 4)), None, S.QUEUE_PUT),
    ("torch.cuda.synchronize", thread(py("synchronize", f"{TORCH}/cuda/__init__.py"), py("step", APP)), None,
     S.GPU_WAIT),
    ("Event.synchronize", thread(py("Event.synchronize", f"{TORCH}/cuda/streams.py"), py("step", APP)), None,
     S.GPU_WAIT),
    ("native cudaStreamSynchronize", thread(nat("cudaStreamSynchronize", "/usr/lib/libcudart.so.12"),
                                            nat("at::native::_local_scalar_dense_cuda"), py("step", APP)),
     None, S.GPU_WAIT),
    (".item() line", thread(py("step", APP, 1)), True, S.GPU_WAIT),
    ("native memcpy_and_sync (.item/.cpu)", thread(nat("0x7f01", "/usr/lib/libcuda.so.1"),
                                                  nat("c10::cuda::memcpy_and_sync", "/venv/lib/libc10_cuda.so"),
                                                  py("step", APP, 3), active=True), None, S.GPU_WAIT),
    (".cpu() line while on CPU", thread(py("step", APP, 5), active=True), True, S.GPU_WAIT),
    ("dynamo compile", thread(py("InstructionTranslator.run", f"{TORCH}/_dynamo/symbolic_convert.py"),
                              py("_compile", f"{TORCH}/_dynamo/convert_frame.py"), py("step", APP)), None,
     S.COMPILE),
    ("inductor compile holding the GIL", thread(py("GraphLowering.run", f"{TORCH}/_inductor/graph.py"),
                                                gil=True, active=True), None, S.COMPILE),
    ("triton compile", thread(py("compile", "/venv/site-packages/triton/compiler/compiler.py"),
                              py("JITFunction.run", "/venv/site-packages/triton/runtime/jit.py")), None, S.COMPILE),
    ("compiled code running is not compile", thread(py("call", "/tmp/torchinductor_root/ab/cab.py"),
                                                    py("_fn", f"{TORCH}/_dynamo/eval_frame.py"), active=True),
     None, S.NATIVE),
    ("checkpoint recompute", thread(py("Linear.forward", f"{TORCH}/nn/modules/linear.py"),
                                    py("_checkpoint_without_reentrant_generator.<locals>.recompute_fn",
                                       f"{TORCH}/utils/checkpoint.py"),
                                    py("_checkpoint_hook.__init__.<locals>.unpack_hook",
                                       f"{TORCH}/utils/checkpoint.py"), active=True), None, S.CHECKPOINT),
    ("reentrant checkpoint backward", thread(py("CheckpointFunction.backward", f"{TORCH}/utils/checkpoint.py"),
                                             gil=True), None, S.CHECKPOINT),
    ("checkpointed forward is not recompute", thread(py("Linear.forward", f"{TORCH}/nn/modules/linear.py"),
                                                     py("checkpoint", f"{TORCH}/utils/checkpoint.py"), gil=True),
     None, S.PYTHON),
    ("owns the GIL", thread(py("step", APP, 3), gil=True, active=True), None, S.PYTHON),
    ("native take_gil", thread(nat("take_gil", "/usr/lib/libpython3.11.so"),
                               nat("PyEval_RestoreThread", "/usr/lib/libpython3.11.so"), py("step", APP, 3)), None,
     S.GIL_WAIT),
    ("bare condvar under Python", thread(nat("0x7f00"), nat("pthread_cond_timedwait", "/usr/lib/libc.so.6"),
                                         py("step", APP, 3)), None, S.GIL_WAIT),
    ("off CPU, GIL elsewhere", thread(py("step", APP, 3)), True, S.GIL_WAIT),
    ("off CPU, GIL free", thread(py("step", APP, 3)), False, S.NATIVE),
    ("active without GIL in torch", thread(py("linear", f"{TORCH}/nn/functional.py"), active=True), True, S.NATIVE),
    ("native MKL compute", thread(nat("mkl_blas_sgemm"), nat("at::native::cpublas::gemm"), py("step", APP, 3),
                                  active=True), None, S.NATIVE),
    ("autograd engine backward", thread(py("_engine_run_backward", f"{TORCH}/autograd/graph.py"),
                                        py("Tensor.backward", f"{TORCH}/_tensor.py")), True, S.NATIVE),
    ("sleep line", thread(py("loop", APP, 2)), True, S.IDLE),
    ("Python lock wait is not GIL wait", thread(nat("pthread_cond_timedwait", "/usr/lib/libc.so.6"),
                                                nat("PyThread_acquire_lock_timed", "/usr/lib/libpython3.11.so"),
                                                py("step", APP, 7)), True, S.IDLE),
    ("Event.wait", thread(py("Event.wait", TH), py("main", APP)), None, S.IDLE),
    ("Thread.join", thread(py("Thread._wait_for_tstate_lock", TH), py("Thread.join", TH)), None, S.IDLE),
    ("selector", thread(py("EpollSelector.select", "/usr/lib/python3.11/selectors.py")), True, S.IDLE),
    # sock.makefile("rb").read(n) parks in SocketIO.readinto, and py-spy may still call the thread active.
    ("socket file read", thread(py("SocketIO.readinto", "/usr/lib/python3.11/socket.py", 706), py("read_record", APP, 3),
                                active=True), None, S.IDLE),
    ("socket file write to a peer that does not drain",
     thread(py("SocketIO.write", "/usr/lib/python3.11/socket.py", 724), py("push", APP, 3)), True, S.IDLE),
    ("multiprocessing pipe read", thread(py("Connection._recv_bytes", "/usr/lib/python3.11/multiprocessing/connection.py"),
                                         py("loop", APP, 3)), True, S.IDLE),
    ("no frames", thread(), None, S.IDLE),
]


@pytest.mark.parametrize(("label", "sample", "gil_elsewhere", "expected"), CASES, ids=[c[0] for c in CASES])
def test_rule(label: str, sample: ThreadSample, gil_elsewhere: bool | None, expected: ThreadState) -> None:
    c = explain(sample, lines=app_lines, gil_held_elsewhere=gil_elsewhere)
    assert c.state is expected, f"{label}: {c}"
    assert c.rule  # every decision names its evidence


def test_classify_is_explain_state_and_proc_running_means_active() -> None:
    t = thread(py("step", APP, 3))
    running = OsEvidence(cpu_share=0.9, span_s=0.5, state="R")
    assert classify(t, gil_held_elsewhere=True) is S.GIL_WAIT
    # /proc says the thread is on a CPU: it computes without the GIL, it does not wait for it.
    assert classify(t, running, gil_held_elsewhere=True) is S.NATIVE


# What /proc says around a sample: parked in the kernel at 0% CPU, or running.
FUTEX_0 = OsEvidence(cpu_share=0.0, span_s=0.5, state="S", wchan="futex_do_wait", syscall="futex")
SOCKET_0 = OsEvidence(cpu_share=0.0, span_s=0.5, state="S", wchan="unix_stream_read_generic", syscall="recvfrom")
RAN_A_LITTLE = OsEvidence(cpu_share=0.019, span_s=0.5, state="S", wchan="futex_do_wait", syscall="futex")
SHORT_SPAN = OsEvidence(cpu_share=0.0, span_s=0.05, state="S", wchan="futex_do_wait")
RUNNABLE_0 = OsEvidence(cpu_share=0.001, span_s=0.5, state="R")
BUSY_GPU = DeviceEvidence(index=0, util_pct=97.0)
IDLE_GPU = DeviceEvidence(index=0, util_pct=40.0)
APP_LINES[(APP, 8)] = "item = self._queue.get()"  # wandb-style SimpleQueue.get: a C call, no Python frame
APP_LINES[(APP, 9)] = "n = self._sock.recv_into(self._buf)"
LAUNCH = thread(nat("cuLaunchKernel", "/usr/lib/libcuda.so.1"), nat("at::native::gemm", "/venv/lib/libtorch_cuda.so"),
                py("linear", f"{TORCH}/nn/functional.py"), active=True)

EVIDENCE_CASES = [
    # (label, sample, gil elsewhere, /proc, device, expected, words in the rule)
    ("C-level queue get at 0% CPU while another thread holds the GIL", thread(py("_loop", APP, 8)), True, FUTEX_0,
     None, S.IDLE, "lock, condition or C-level queue"),
    ("same, GIL free (was 'native')", thread(py("_loop", APP, 8)), False, FUTEX_0, None, S.IDLE, "0.0% CPU"),
    ("socket recv_into at 0% CPU", thread(py("_read", APP, 9)), True, SOCKET_0, None, S.IDLE, "socket read"),
    ("`with lock:` at 0% CPU", thread(py("step", APP, 6)), True, FUTEX_0, None, S.IDLE, "futex"),
    ("a GIL waiter that ran 1.9% of a core", thread(py("step", APP, 3)), True, RAN_A_LITTLE, None, S.GIL_WAIT, ""),
    ("too short a /proc span to say", thread(py("step", APP, 3)), True, SHORT_SPAN, None, S.GIL_WAIT, ""),
    ("runnable at the nearest reading", thread(py("step", APP, 3)), True, RUNNABLE_0, None, S.NATIVE, ""),
    (".item() line at 0% CPU is GPU wait", thread(py("step", APP, 1)), True, FUTEX_0, None, S.GPU_WAIT, "host sync"),
    ("torch ops while the GPU is 97% busy", thread(py("linear", f"{TORCH}/nn/functional.py"), active=True), False,
     None, BUSY_GPU, S.GPU_WAIT, "GPU0 is 97% busy"),
    ("torch ops at 0% CPU while the GPU is busy", thread(py("linear", f"{TORCH}/nn/functional.py")), True, FUTEX_0,
     BUSY_GPU, S.GPU_WAIT, "waits on the device"),
    ("torch ops while the GPU is 40% busy", thread(py("linear", f"{TORCH}/nn/functional.py"), active=True), False,
     None, IDLE_GPU, S.NATIVE, ""),
    ("app code while the GPU is busy is not GPU wait", thread(py("step", APP, 3), active=True), False, None,
     BUSY_GPU, S.NATIVE, ""),
    ("native kernel launch into a busy GPU", LAUNCH, None, None, BUSY_GPU, S.GPU_WAIT, "launch queue is full"),
    ("native kernel launch, GPU not busy", LAUNCH, None, None, IDLE_GPU, S.NATIVE, ""),
    ("library worker parked on a condvar at 0% CPU",
     thread(nat("pthread_cond_wait", "/usr/lib/libc.so.6"), nat("torch::autograd::ReadyQueue::pop"),
            py("run", APP, 3)), None, FUTEX_0, None, S.IDLE, "blocked in"),
    ("backward() caller keeps the autograd rule", thread(py("_engine_run_backward", f"{TORCH}/autograd/graph.py")),
     True, FUTEX_0, None, S.NATIVE, "autograd engine"),
]


@pytest.mark.parametrize(("label", "sample", "gil_elsewhere", "os_ev", "device", "expected", "words"), EVIDENCE_CASES,
                         ids=[c[0] for c in EVIDENCE_CASES])
def test_rule_with_os_and_gpu_evidence(label: str, sample: ThreadSample, gil_elsewhere: bool | None,
                                       os_ev: OsEvidence | None, device: DeviceEvidence | None,
                                       expected: ThreadState, words: str) -> None:
    c = explain(sample, os_ev, lines=app_lines, gil_held_elsewhere=gil_elsewhere, device=device)
    assert c.state is expected, f"{label}: {c}"
    assert words in c.rule, c.rule


def test_a_sync_line_in_a_process_without_cuda_is_host_work_not_a_gpu_wait() -> None:
    """`.tolist()` / `.item()` on a process with no CUDA driver mapped reads host memory: it cannot wait on a GPU."""
    running = thread(py("step", APP, 1), active=True)
    assert explain(running, lines=app_lines, gil_held_elsewhere=True).state is S.GPU_WAIT  # unknown: the line decides
    assert explain(running, lines=app_lines, gil_held_elsewhere=True, cuda=True).state is S.GPU_WAIT
    assert explain(running, lines=app_lines, gil_held_elsewhere=True, cuda=False).state is S.NATIVE
    holding = thread(py("step", APP, 5), active=True, gil=True)
    assert explain(holding, lines=app_lines, cuda=False).state is S.PYTHON


def test_wait_kind_in_words() -> None:
    assert wait_kind("unix_stream_read_generic", "recvfrom") == "a socket read (recvfrom, unix_stream_read_generic)"
    assert wait_kind("ep_poll", None).startswith("poll/select")
    assert wait_kind("hrtimer_nanosleep", "clock_nanosleep").startswith("a sleep")
    assert wait_kind(None, None) == "the kernel"


def test_unknown_gil_holder_defaults_to_gil_wait() -> None:
    assert classify(thread(py("step", APP, 3))) is S.GIL_WAIT


def test_reference_trainer_recording() -> None:
    """The tiny reference trainer (default: drafter-bound on CPU), recorded with its probes on."""
    samples = load_recorded_dumps(CPU / "pyspy_tiny_trainer.json")
    by = states_by_thread(samples)  # names alone: the trainer's sources change, the recording does not
    assert share(by["target-0"], S.QUEUE_PUT) >= 0.25  # the target waits for room in q_hs
    assert set(by["target-0"]) <= {S.QUEUE_PUT, S.NATIVE, S.GIL_WAIT, S.PYTHON}
    assert S.CHECKPOINT in by["drafter-0"]  # activation-checkpoint recompute in the drafter's backward
    assert not {S.QUEUE_GET, S.QUEUE_PUT} & set(by["drafter-0"])  # drafters never wait for data
    assert share(by["drafter-0"], S.NATIVE) >= 0.5
    assert set(by["MainThread"]) == {S.IDLE}  # joining the workers
    assert share(by["dflash-diag-board"], S.IDLE) >= 0.75


_names = st.sampled_from([
    "Condition.wait", "Queue.get", "Queue.put", "synchronize", "Event.synchronize", "step", "<module>",
    "_engine_run_backward", "recompute_fn", "_compile", "take_gil", "pthread_cond_timedwait", "mkl_blas_sgemm",
    "cudaStreamSynchronize", "0x7f00", "gil_scoped_acquire", "PyThread_acquire_lock_timed",
]) | st.text(max_size=30)
_files = st.sampled_from([
    TH, QP, APP, f"{TORCH}/cuda/__init__.py", f"{TORCH}/utils/checkpoint.py", f"{TORCH}/_dynamo/convert_frame.py",
    f"{TORCH}/autograd/graph.py", "/usr/lib/libc.so.6", "/venv/lib/libtorch_python.so", "/usr/lib/libpython3.11.so",
]) | st.text(max_size=30)
_frames = st.builds(
    lambda name, filename, line, native: Frame(name, filename, line, native=native, module=filename if native else None),
    _names, _files, st.integers(min_value=0, max_value=10), st.booleans(),
)
_threads = st.builds(
    lambda frames, active, gil: ThreadSample(thread_id=1, os_thread_id=2, name="t", active=active, owns_gil=gil,
                                             frames=tuple(frames)),
    st.lists(_frames, max_size=8), st.booleans(), st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(_threads, st.sampled_from([None, True, False]))
def test_any_stack_gets_exactly_one_state_and_a_reason(sample: ThreadSample, elsewhere: bool | None) -> None:
    c = explain(sample, lines=app_lines, gil_held_elsewhere=elsewhere)
    assert isinstance(c.state, ThreadState) and c.rule
    if sample.owns_gil:
        # Holding the GIL, a thread is never waiting for it, nor starved in a queue.
        assert c.state not in (S.GIL_WAIT, S.QUEUE_GET, S.QUEUE_PUT)


# --- a host sync told by the line a thread sits at (CUDA's spinning wait reads as "active") --------------------------

@pytest.mark.parametrize(("text", "active", "gil_elsewhere", "cuda", "want"), [
    ("n = int(mask.sum())", True, None, True, S.GPU_WAIT),  # spinning in the sync: on CPU, no GIL
    ("if not bool(torch.isfinite(loss)):", True, None, None, S.GPU_WAIT),  # a tensor in the text: CUDA not absent
    ("if done:", True, None, True, S.GPU_WAIT),
    ("print(loss)", True, None, True, S.GPU_WAIT),
    ("n = int(mask.sum())", True, None, None, S.NATIVE),  # CUDA unknown: a conversion proves nothing
    ("n = int(mask.sum())", True, None, False, S.NATIVE),
    ("n = int(mask.sum())", False, True, True, S.GIL_WAIT),  # asleep while another thread holds the GIL
    ("n = int(mask.sum())", False, False, True, S.GPU_WAIT),  # asleep with the GIL free: a blocking sync
    ("print(loss)", False, False, True, S.NATIVE),  # asleep at a print: maybe a full pipe, not a sync
    ("x = a + b", True, None, True, S.NATIVE),
])
def test_a_conversion_of_a_tensor_in_c_without_the_gil_is_a_gpu_wait(text: str, active: bool,
                                                                     gil_elsewhere: bool | None, cuda: bool | None,
                                                                     want: S) -> None:
    from dflash_diag.analysis.classify import explain

    frame = Frame("chunked_loss", "/srv/spec/loss.py", 33)
    thread = ThreadSample(thread_id=1, os_thread_id=1, name="drafter-0", active=active, owns_gil=False,
                          frames=(frame, Frame("run", "/srv/spec/train.py", 9)))
    got = explain(thread, lines=lambda f, n: text if n == 33 else None, gil_held_elsewhere=gil_elsewhere, cuda=cuda)
    assert got.state == want, got.rule
    held = ThreadSample(thread_id=1, os_thread_id=1, name="drafter-0", active=True, owns_gil=True, frames=thread.frames)
    assert explain(held, lines=lambda f, n: text, cuda=True).state == S.PYTHON  # holding the GIL: Python runs
