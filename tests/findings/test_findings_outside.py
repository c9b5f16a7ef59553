"""The rules that read evidence from outside the stacks (/proc, stderr, files on disk), the hang, warm-up and the
two H200 false alarms of issue 9, on constructed observations (each fails when its rule breaks)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from findings_builders import (
    NOW_S,
    board,
    healthy_board,
    observation,
    pipeline,
    stack,
    thread_sample,
    thread_stats,
)

from dflash_diag.analysis.findings import evaluate
from dflash_diag.model import (
    NA,
    Finding,
    Frame,
    GpuProcess,
    GpuSample,
    Observation,
    ProcessFacts,
    ProcThreadSample,
    Severity,
    SourceFile,
    SourceLine,
    StackSample,
    ThreadState,
    ThreadStats,
)


def _proc(states: list[dict[int, str]], run_ns_per_sweep: int = 0) -> tuple[tuple[ProcThreadSample, ...], ...]:
    return tuple(tuple(ProcThreadSample(tid=tid, comm="python", state=state, utime_s=40.0, stime_s=1.0,
                                        run_ns=i * run_ns_per_sweep, runq_wait_ns=0, monotonic_s=float(i))
                       for tid, state in sweep.items()) for i, sweep in enumerate(states))


def _facts(state: str = "S", stderr: str | None = None, start: float | None = NOW_S - 45.0) -> ProcessFacts:
    return ProcessFacts(state=state, start_wall_s=start, stderr_target="/tmp/run.log" if stderr else "pipe:[1]",
                        stderr_tail=stderr, stderr_mtime_wall_s=NOW_S - 30.0 if stderr else None)


def _run(obs: Observation, threads: tuple[ThreadStats, ...] = (), pipe: object = None) -> dict[str, Finding]:
    return {f.rule_id: f for f in evaluate(obs, threads, pipe or pipeline(), now_wall_s=NOW_S)}  # type: ignore[arg-type]


# --- process state -------------------------------------------------------------------------------------


def test_a_stopped_process_is_critical_from_proc() -> None:
    obs = replace(observation(), proc=_proc([{1: "T", 2: "T"}] * 4), process=_facts("T"))
    f = _run(obs)["process-stopped"]
    assert f.severity == Severity.CRITICAL and "SIGSTOP" in f.claim and "kill -CONT 4242" in f.remedy


def test_a_running_process_is_not_stopped_and_a_zombie_is_named() -> None:
    assert "process-stopped" not in _run(replace(observation(), proc=_proc([{1: "R", 2: "S"}] * 4), process=_facts()))
    assert _run(replace(observation(), process=_facts("Z")))["process-zombie"].severity == Severity.CRITICAL


def test_threads_in_uninterruptible_sleep() -> None:
    obs = replace(observation(), proc=_proc([{1: "D", 2: "S"}, {1: "D", 2: "R"}, {1: "D", 2: "S"}]), process=_facts())
    f = _run(obs)["process-uninterruptible"]
    assert f.severity == Severity.WARNING and "tid 1 100%" in dict(f.evidence)["threads in D"]
    all_d = replace(observation(), proc=_proc([{1: "D", 2: "D"}] * 3), process=_facts("D"))
    assert _run(all_d)["process-uninterruptible"].severity == Severity.CRITICAL


# --- hang and thread deaths -----------------------------------------------------------------------------

DEATH = ("Exception in thread learner-0:\nTraceback (most recent call last):\n"
         '  File "/app/train.py", line 30, in learn\n    loss = step(batch)\nValueError: bad batch\n')
BLOCKED = (Frame("Condition.wait", "/usr/lib/python3.11/threading.py", 327),
           Frame("Queue.put", "/usr/lib/python3.11/queue.py", 140), Frame("produce", "/app/train.py", 12))


def _hung(cpu_ns: int = 0, stderr: str | None = DEATH) -> tuple[Observation, tuple[ThreadStats, ...]]:
    stacks = [stack([thread_sample("feeder-0", BLOCKED, tid=11)], t=i * 0.5) for i in range(10)]
    obs = replace(observation(), stacks=tuple(stacks), window_s=5.0, proc=_proc([{11: "S"}] * 6, cpu_ns),
                  process=_facts(stderr=stderr))
    threads = (thread_stats("feeder-0", "target", {ThreadState.QUEUE_PUT: 1.0}, tid=11, n=10,
                            timeline=[ThreadState.QUEUE_PUT] * 10),)
    return obs, threads


def test_a_hang_names_the_blocked_threads_and_the_dead_ones() -> None:
    obs, threads = _hung()
    found = _run(obs, threads)
    hang = found["pipeline-hang"]
    assert hang.severity == Severity.CRITICAL and hang.kind == "symptom"
    assert "feeder-0 blocked in the queue.put for the whole 5.0 s window" in hang.claim
    evidence = dict(hang.evidence)
    assert evidence["died: learner-0"] == "ValueError: bad batch at train.py:30 in learn, stderr last written 30 s ago"
    assert evidence["process CPU over the window"] == "0.0% of one core"
    died = found["thread-died"]
    assert died.claim == "1 thread(s) died of an uncaught exception: learner-0 (ValueError: bad batch at train.py:30 " \
                         "in learn)"


def test_blocked_but_burning_cpu_is_not_a_hang() -> None:
    obs, threads = _hung(cpu_ns=400_000_000)  # 40% of a core: someone works (a C extension not in the stacks)
    assert "pipeline-hang" not in _run(obs, threads)


def test_thread_deaths_from_the_probe_with_their_time() -> None:
    b = replace(board({"threads": {"alive": 3, "deaths": [{"thread": "learner-1", "exception": "KeyError: 'x'",
                                                           "where": "t.py:3 in run", "wall_time_s": NOW_S - 12.0}]}}))
    obs, threads = _hung(stderr=None)
    f = _run(replace(obs, boards=(b,)), threads)["thread-died"]
    assert dict(f.evidence)["learner-1"] == "KeyError: 'x' at t.py:3 in run, 12 s ago"


# --- GIL: a C-level wait at 0% CPU is not contention (issue 14) -----------------------------------------


def test_a_thread_blocked_in_c_at_zero_cpu_is_not_a_gil_waiter() -> None:
    waiter = thread_stats("wandb-sender", "other", {ThreadState.GIL_WAIT: 0.8, ThreadState.IDLE: 0.2}, tid=21)
    holder = thread_stats("drafter-0", "drafter", {ThreadState.PYTHON: 0.9, ThreadState.NATIVE: 0.1}, tid=22,
                          gil_held_pct=90.0)
    idle = replace(waiter, cpu_pct=0.2)
    assert "gil-contention" not in _run(observation(), (idle, holder))
    busy = replace(waiter, cpu_pct=12.0)  # runs between waits: contending
    assert "gil-contention" in _run(observation(), (busy, holder))


def test_gil_probe_contention_net_of_cpu_run_queue_waits() -> None:
    b = healthy_board(gil={"contention_share": 0.45, "knocker_runq_share": 0.30})
    assert "gil-contention" not in _run(observation((b,)), ())
    b = healthy_board(gil={"contention_share": 0.70, "knocker_runq_share": 0.10})
    assert "60%" in dict(_run(observation((b,)), ())["gil-contention"].evidence)["GIL contention (probe)"]


def test_gil_probe_wait_behind_a_holder_preempted_by_other_load_is_not_contention() -> None:
    # The knocker waited half the window, but the process's threads ran 5% of it and sat runnable 60%: a holder was
    # preempted with the GIL in hand by another process's load (the fresh clone's CI, two cores, a suite beside it).
    preempted = {"MainThread": {"tid": 1, "cpu_share": 0.05, "runq_share": 0.60},
                 "dflash-diag-gil-knocker": {"tid": 2, "cpu_share": 0.001, "runq_share": 0.05}}
    b = healthy_board(gil={"contention_share": 0.50, "knocker_runq_share": 0.05, "threads": preempted})
    assert "gil-contention" not in _run(observation((b,)), ())
    # The same wait behind a holder that ran on a CPU is the process's own contention.
    running = {**preempted, "MainThread": {"tid": 1, "cpu_share": 0.80, "runq_share": 0.10}}
    b = healthy_board(gil={"contention_share": 0.50, "knocker_runq_share": 0.05, "threads": running})
    assert "45%" in dict(_run(observation((b,)), ())["gil-contention"].evidence)["GIL contention (probe)"]
    # A first reading has no CPU shares yet: only the knocker's own run-queue time is taken out.
    first = {"MainThread": {"tid": 1, "cpu_share": None, "runq_share": None}}
    b = healthy_board(gil={"contention_share": 0.50, "knocker_runq_share": 0.05, "threads": first})
    assert "45%" in dict(_run(observation((b,)), ())["gil-contention"].evidence)["GIL contention (probe)"]


def test_gil_probe_wait_is_judged_over_the_boards_interval_not_the_probes_start_up() -> None:
    # A rank a few seconds old: its 10 s window holds the imports (the knocker waited 36% of it), while over the
    # observation's boards the knocker waited 1% and the threads ran 5% (the fresh clone's CI flake).
    def gil(clock_s: float, knocks: int, late_s: float, main_run_ns: int, main_runq_ns: int) -> dict:
        return {"contention_share": 0.36, "knocker_runq_share": 0.0, "timer_slack_ms": 0.1, "clock_s": clock_s,
                "knocks_total": knocks, "late_total_s": late_s,
                "threads": {"MainThread": {"tid": 1, "cpu_share": 0.05, "runq_share": 0.0, "run_ns": main_run_ns,
                                           "runq_ns": main_runq_ns},
                            "dflash-diag-gil-knocker": {"tid": 2, "cpu_share": 0.0, "runq_share": 0.0,
                                                        "run_ns": 1_000, "runq_ns": 0}}}
    first = healthy_board(gil=gil(100.0, 1000, 3.0, 4_000_000_000, 0))
    quiet = healthy_board(gil=gil(103.0, 1290, 3.0 + 290 * 1e-4 + 0.03, 4_150_000_000, 10_000_000))
    assert "gil-contention" not in _run(observation((first, quiet)), ())
    # The same boards, where the knocker did wait 45% of the interval while MainThread ran Python on a CPU: a warning,
    # with the interval's share.
    busy = healthy_board(gil=gil(103.0, 1290, 3.0 + 290 * 1e-4 + 1.35, 6_700_000_000, 10_000_000))
    assert "45%" in dict(_run(observation((first, busy)), ())["gil-contention"].evidence)["GIL contention (probe)"]
    # Boards less than a second apart say too little: the probe's window is read, as from one board.
    close = healthy_board(gil=gil(100.5, 1050, 3.01, 4_020_000_000, 0))
    assert "36%" in dict(_run(observation((first, close)), ())["gil-contention"].evidence)["GIL contention (probe)"]


# --- stale code from outside ------------------------------------------------------------------------------


def test_stale_code_from_the_file_on_disk() -> None:
    frames = (Frame("chunked_ce", "/app/losses.py", 8), Frame("train", "/app/loop.py", 30))
    obs = replace(observation(), stacks=(stack([thread_sample("train", frames, tid=11)]),), process=_facts(),
                  code=(SourceLine("/app/losses.py", 8, "chunk_count", "if seq_len <= 0:"),
                        SourceLine("/app/loop.py", 30, "train", "loss = chunked_ce(...)")),
                  files=(SourceFile("/app/losses.py", True, NOW_S - 5.0), SourceFile("/app/loop.py", True, NOW_S - 900)))
    f = _run(obs)["stale-code"]
    assert f.severity == Severity.WARNING
    assert f.claim.startswith("the process runs old code: chunked_ce runs at losses.py:8, which the file on disk no "
                              "longer has there")
    assert dict(f.evidence)["losses.py:8"] == "runs chunked_ce; on disk that line is in `chunk_count`"
    assert dict(f.evidence)["/app/losses.py"] == "modified 40 s after the process started"


def test_a_touched_file_alone_is_information_and_generated_code_is_never_stale() -> None:
    frames = (Frame("train", "/app/loop.py", 30), Frame("call", "/tmp/torchinductor_u/ab/cab.py", 9))
    obs = replace(observation(), stacks=(stack([thread_sample("train", frames, tid=11)]),), process=_facts(),
                  code=(SourceLine("/app/loop.py", 30, "train", "loss = f()"),),
                  files=(SourceFile("/app/loop.py", True, NOW_S - 5.0),
                         SourceFile("/tmp/torchinductor_u/ab/cab.py", True, NOW_S - 1.0)))
    f = _run(obs)["stale-code"]
    assert f.severity == Severity.INFO and "torchinductor" not in str(f.evidence)


# --- reentrant checkpoint seen from outside -------------------------------------------------------------


def test_reentrant_checkpoint_in_the_stacks_with_torchs_warning() -> None:
    frames = (Frame("block", "/app/model.py", 6), Frame("CheckpointFunction.forward", "/venv/lib/python3.11/site-packages/torch/utils/checkpoint.py", 274),
              Frame("Function.apply", "/venv/lib/python3.11/site-packages/torch/autograd/function.py", 625),
              Frame("checkpoint", "/venv/lib/python3.11/site-packages/torch/utils/checkpoint.py", 511), Frame("forward", "/app/model.py", 31))
    stacks = tuple(stack([thread_sample("drafter-0", frames, tid=12)], t=i) for i in range(6))
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.NATIVE: 1.0}, tid=12, n=6,
                            timeline=[ThreadState.NATIVE] * 6),)
    warned = "/venv/lib/python3.11/site-packages/torch/utils/checkpoint.py:238: UserWarning: None of the inputs have requires_grad=True. Gradients will be None\n"
    quiet = _run(replace(observation(), stacks=stacks, process=_facts()), threads)["checkpoint-reentrant"]
    assert quiet.severity == Severity.INFO and "use_reentrant=True at model.py:31 (forward)" in quiet.claim
    assert "dflash-diag run" in quiet.remedy
    loud = _run(replace(observation(), stacks=stacks, process=_facts(stderr=warned)), threads)["checkpoint-reentrant"]
    assert loud.severity == Severity.WARNING and "torch warned that none of its inputs requires grad" in loud.claim


# --- warm-up vs recompile storm from the stacks -----------------------------------------------------------

COMPILING = (Frame("InstructionTranslator.run", "/venv/lib/python3.11/site-packages/torch/_dynamo/symbolic_convert.py", 1200),
             Frame("_compile", "/venv/lib/python3.11/site-packages/torch/_dynamo/convert_frame.py", 900), Frame("run", "/app/trainer.py", 60))
RUNNING_ELSEWHERE = (Frame("Linear.forward", "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", 134), Frame("run", "/app/trainer.py", 55))
RUNNING_INSIDE = (Frame("autotune", "/venv/lib/python3.11/site-packages/torch/_inductor/runtime/triton_heuristics.py", 9),
                  Frame("_compile", "/venv/lib/python3.11/site-packages/torch/_dynamo/convert_frame.py", 900), Frame("run", "/app/trainer.py", 60))


def _compile_obs(pattern: list[tuple[tuple[Frame, ...], ThreadState]], age_s: float = 45.0) -> tuple[Observation, tuple[ThreadStats, ...]]:
    stacks = tuple(stack([thread_sample("Trainer", frames, tid=31)], t=i) for i, (frames, _) in enumerate(pattern))
    timeline = [state for _, state in pattern]
    shares = {s: timeline.count(s) / len(timeline) for s in set(timeline)}
    threads = (thread_stats("Trainer", "drafter", shares, tid=31, n=len(timeline), timeline=timeline),)
    return replace(observation(), stacks=stacks, process=_facts(start=NOW_S - age_s)), threads


def test_the_same_call_compiled_again_after_returning_is_a_recompile_storm() -> None:
    c, r = (COMPILING, ThreadState.COMPILE), (RUNNING_ELSEWHERE, ThreadState.NATIVE)
    found = _run(*_compile_obs([c, c, r, r, c, c, r, c, c, r]))
    storm = found["compile-recompile-storm"]
    assert "3 separate compiles of trainer.py:60 (run)" in storm.claim and storm.stages == ("drafter",)
    assert "warming-up" not in found


def test_one_long_first_compile_is_warm_up_whatever_runs_inside_it() -> None:
    c, inside = (COMPILING, ThreadState.COMPILE), (RUNNING_INSIDE, ThreadState.NATIVE)
    found = _run(*_compile_obs([c, c, inside, c, c, inside, c, c, c, c]))
    assert "compile-recompile-storm" not in found
    warm = found["warming-up"]
    assert warm.kind == "state" and "the process started 45 s ago" in warm.claim


# --- the two H200 false alarms of issue 9 ----------------------------------------------------------------


def test_no_cudagraph_multi_thread_without_captures() -> None:
    hazard = "torch 2.11: CUDAGraph Trees raise a bare AssertionError in Python threads (pytorch#123177)"
    b = healthy_board(cudagraphs={"torch": "2.11.0+cu130", "captures": 0, "capture_threads": [],
                                  "multi_thread_hazard": hazard})
    assert "cudagraph-multi-thread" not in _run(observation((b,)))
    b = healthy_board(cudagraphs={"torch": "2.11.0+cu130", "captures": 4, "capture_threads": ["drafter-0", "drafter-1"],
                                  "multi_thread_hazard": hazard})
    f = _run(observation((b,)))["cudagraph-multi-thread"]
    assert f.severity == Severity.WARNING and "captured from 2 threads (drafter-0, drafter-1)" in f.claim


def test_gdn_claim_per_kernel_from_transformers_stderr_line() -> None:
    line = ("`causal_conv1d_fn` is falling back to its reference PyTorch implementation because `causal_conv1d` is "
            "not installed. This is correct but much slower\n")
    b = healthy_board(fastpath={"gdn_kernels": {"modeling_qwen3_5.chunk_gated_delta_rule": "fla"}})
    f = _run(replace(observation((b,)), process=_facts(stderr=line)))["gdn-torch-fallback"]
    assert f.severity == Severity.INFO
    assert f.claim == ("GatedDeltaNet's causal conv1d runs transformers' PyTorch fallback; the gated delta rule runs "
                       "fast kernels")
    assert "causal-conv1d" in f.remedy and "flash-linear-attention" not in f.remedy


# --- unused full-vocabulary logits, from the code ---------------------------------------------------------


def test_logits_computed_and_never_read() -> None:
    frames = (Frame("target_worker", "/app/pipeline.py", 34),)
    obs = replace(observation(), stacks=(stack([thread_sample("tgt", frames, tid=11)]),),
                  code=(SourceLine("/app/pipeline.py", 34, "target_worker", "q.put(hidden.float())",
                                   unused_logits=((33, "logits = lm_head(hidden)  # copied from eval"),)),))
    f = _run(obs)["wasted-full-vocab-logits"]
    assert f.severity == Severity.INFO
    assert f.claim.startswith("pipeline.py:33 computes full-vocabulary logits that the function never reads")


# --- a stage waiting on a saturated GPU is GPU-bound, not losing time to syncs (issue 14) ---------------


def _gpu(util: float, pid: int = 4242, power_w: float | None = None) -> GpuSample:
    na = NA("not read")
    return GpuSample(index=0, name="H200", uuid="GPU-0", util_pct=util, mem_util_pct=na, memory_used_bytes=na,
                     memory_total_bytes=na, power_w=na if power_w is None else power_w,
                     power_limit_w=na if power_w is None else 700.0, sm_clock_mhz=na, max_sm_clock_mhz=na,
                     temperature_c=na, throttle_reasons=na,
                     processes=(GpuProcess(pid=pid, used_memory_bytes=na, sm_util_pct=na),), monotonic_s=0.0)


def _syncing_drafter() -> tuple[tuple[ThreadStats, ...], tuple[StackSample, ...]]:
    """A drafter thread in cudaStreamSynchronize 8 samples out of 10."""
    sync = (Frame("cudaStreamSynchronize", "libcudart.so", 0, native=True), Frame("step", "/app/train.py", 9))
    timeline = [ThreadState.GPU_WAIT] * 8 + [ThreadState.NATIVE] * 2
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.GPU_WAIT: 0.8, ThreadState.NATIVE: 0.2}, tid=12,
                            n=10, timeline=timeline),)
    stacks = tuple(stack([thread_sample("drafter-0", sync, tid=12)], t=i) for i in range(10))
    return threads, stacks


def test_host_syncs_on_a_saturated_gpu_are_information() -> None:
    threads, stacks = _syncing_drafter()
    busy = replace(observation(), stacks=stacks, gpus=tuple((_gpu(98.0),) for _ in range(4)))
    f = _run(busy, threads)["host-sync-storm"]
    assert f.severity == Severity.INFO and "GPU-bound" in f.claim and f.impact == 0.8  # a lead, no cost claimed
    idle = replace(busy, gpus=tuple((_gpu(35.0),) for _ in range(4)))
    assert _run(idle, threads)["host-sync-storm"].severity == Severity.WARNING


def test_no_host_sync_storm_in_a_process_without_the_cuda_driver() -> None:
    """A `.tolist()` in a process with no CUDA driver mapped (/proc/PID/maps) copies host memory: no GPU to wait on."""
    threads, stacks = _syncing_drafter()
    obs = replace(observation(), stacks=stacks, process=replace(_facts(), uses_cuda=False))
    assert "host-sync-storm" not in _run(obs, threads)
    assert "host-sync-storm" in _run(replace(obs, process=replace(_facts(), uses_cuda=True)), threads)


def test_gpu_power_is_evidence_not_a_verdict() -> None:
    """Small models keep an H200 99% busy at 165-240 W of 700: the power is shown, the GPU still reads saturated."""
    threads, stacks = _syncing_drafter()
    obs = replace(observation(), stacks=stacks, gpus=tuple((_gpu(98.0, power_w=165.0),) for _ in range(4)))
    f = _run(obs, threads)["host-sync-storm"]
    assert f.severity == Severity.INFO and "GPU-bound" in f.claim
    assert dict(f.evidence)["GPU power"].startswith("165 W of its 700 W limit")


def test_a_side_thread_holding_the_gil_most_of_the_time_is_named_even_on_a_busy_machine() -> None:
    hog = thread_stats("telemetry", "other", {ThreadState.PYTHON: 1.0}, tid=41, gil_held_pct=95.0, n=20)
    stage = thread_stats("fit", "drafter", {ThreadState.PYTHON: 0.3, ThreadState.NATIVE: 0.5,
                                            ThreadState.GIL_WAIT: 0.1, ThreadState.QUEUE_GET: 0.1}, tid=42, n=20)
    f = _run(observation(), (hog, stage))["gil-contention"]
    assert f.claim.startswith("GIL contention: telemetry (not a pipeline stage) holds the GIL 95% of the time")
    assert f.claim.endswith("fit gets it only in what is left") and f.stages == ("drafter",)
    # The same share held by a pipeline thread, with no side thread, is that stage's own Python: no finding.
    own = replace(hog, name="fit-0", stage="drafter")
    assert "gil-contention" not in _run(observation(), (own, replace(stage, shares={ThreadState.NATIVE: 1.0})))


def _trainer_and_monitor(cpu_pct: float, runq_pct: float, *, monitor_stage: str = "other",
                         held_pct: float = 50.0) -> tuple[tuple[ThreadStats, ...], tuple[StackSample, ...]]:
    """A training loop (backward in its stacks, computing in every sample) and a side thread holding the GIL."""
    fit = (Frame("Tensor.backward", "/venv/lib/python3.11/site-packages/torch/_tensor.py", 600),
           Frame("main", "/app/train_mlp.py", 58))
    hist = (Frame("weight_histogram", "/app/train_mlp.py", 26), Frame("watch_weights", "/app/train_mlp.py", 35))
    n = 100
    stacks = tuple(stack([thread_sample("MainThread", fit, tid=1),
                          thread_sample("weight-watch", hist, tid=2, gil=i < held_pct)], t=i * 0.05) for i in range(n))
    trainer = replace(thread_stats("MainThread", "other", {ThreadState.NATIVE: 1.0}, tid=1, n=n,
                                   timeline=[ThreadState.NATIVE] * n), cpu_pct=cpu_pct, runq_pct=runq_pct)
    monitor = replace(thread_stats("weight-watch", monitor_stage, {ThreadState.PYTHON: 0.6, ThreadState.IDLE: 0.4},
                                   tid=2, n=n, gil_held_pct=held_pct), cpu_pct=30.0, runq_pct=2.0)
    return (trainer, monitor), stacks


def test_a_training_thread_asleep_while_a_side_thread_holds_the_gil_is_contention_with_its_cost() -> None:
    """Every sample of the training loop computes (a GIL waiter between two ops looks like the op it will run),
    but /proc says it slept 20% of the window: the side thread holding the GIL half the time costs that."""
    threads, stacks = _trainer_and_monitor(cpu_pct=62.0, runq_pct=18.0)
    f = _run(replace(observation(), stacks=stacks), threads)["gil-contention"]
    assert f.severity == Severity.WARNING and f.impact == pytest.approx(0.20)
    assert f.claim.startswith("GIL contention: weight-watch (not a pipeline stage) holds the GIL 50% of the time")
    assert "MainThread, which computes in 100% of its samples, was asleep 20% of the window" in f.claim
    assert dict(f.evidence)["MainThread (/proc)"] == ("on a CPU 62%, runnable and waiting for a CPU 18%, asleep 20% "
                                                      "of the window")
    # Asleep only 5%: no measured cost. A monitor that is a pipeline stage: its Python is the stage's own work.
    threads, stacks = _trainer_and_monitor(cpu_pct=80.0, runq_pct=15.0)
    assert "gil-contention" not in _run(replace(observation(), stacks=stacks), threads)
    threads, stacks = _trainer_and_monitor(cpu_pct=62.0, runq_pct=18.0, monitor_stage="target")
    assert "gil-contention" not in _run(replace(observation(), stacks=stacks), threads)
    # A stage's thread (no backward in its stacks: a producer) starved the same way is named, and its stage given.
    threads, stacks = _trainer_and_monitor(cpu_pct=30.0, runq_pct=40.0)
    producer = replace(threads[0], name="encode", stage="target")
    stacks = tuple(replace(s, threads=tuple(replace(t, name="encode", frames=(Frame("encode", "/app/d.py", 24),))
                                            if t.name == "MainThread" else t for t in s.threads)) for s in stacks)
    f = _run(replace(observation(), stacks=stacks), (producer, threads[1]))["gil-contention"]
    assert "encode, which computes in 100% of its samples, was asleep 30% of the window" in f.claim
    assert f.stages == ("target",)
    # A side thread that rarely holds the GIL does not explain the sleep.
    threads, stacks = _trainer_and_monitor(cpu_pct=62.0, runq_pct=18.0, held_pct=10.0)
    assert "gil-contention" not in _run(replace(observation(), stacks=stacks), threads)


def test_a_side_thread_burning_a_core_in_python_is_a_gil_hog_from_few_samples() -> None:
    hog = replace(thread_stats("telemetry", "other", {ThreadState.PYTHON: 0.9, ThreadState.GIL_WAIT: 0.1}, tid=41,
                               gil_held_pct=55.0, n=9), cpu_pct=85.0)
    stage = thread_stats("encode", "target", {ThreadState.NATIVE: 0.6, ThreadState.GIL_WAIT: 0.2,
                                              ThreadState.QUEUE_PUT: 0.2}, tid=42, n=9)
    f = _run(observation(), (hog, stage))["gil-contention"]
    assert "telemetry" in f.claim and dict(f.evidence)["telemetry CPU"].startswith("85% of a core")
    assert "gil-contention" not in _run(observation(), (replace(hog, cpu_pct=20.0), stage))
