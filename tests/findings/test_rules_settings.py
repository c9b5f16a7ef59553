"""The settings rules on constructed windows: every setting away from its default is listed as information, and a
setting leads only with its cost measured (the collector's pause share, GIL waits, time in the ops a debug mode
slows); a one-off or a harmless value stays information."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from findings_builders import NOW_S
from sched_builders import PID, Thread, ensemble, pools, scenario, settings_board

from dflash_diag.analysis import analyse
from dflash_diag.model import Frame, Severity
from dflash_diag.model.sched import ProcessIo


def _findings(obs: Any, rule: str) -> list[Any]:
    return [f for f in analyse(replace(obs, now_wall_s=NOW_S)).findings if f.rule_id == rule]


def _collector(total_s: float, count: int) -> dict[str, Any]:
    return {"collections": count, "collections_by_generation": [count, 0, 0], "pause_s_total": total_s,
            "pause_max_ms": 40.0, "recent_pause_share": 0.0, "recent_collections": 0, "explicit_collects": 0}


def _interp(**over: Any) -> dict[str, Any]:
    base = {"python_version": "3.11", "switch_interval_s": 0.005, "gc_enabled": True, "gc_threshold": [700, 10, 10],
            "gc_default_threshold": [700, 10, 10], "recursion_limit": 1000, "gc_callbacks": [], "xoptions": []}
    return {**base, **over}


def test_nothing_away_from_its_default_says_nothing() -> None:
    board = settings_board({"interpreter": _interp(), "collector": _collector(0.0, 0), "cpu_cores": 2,
                            "torch_flags": {"num_threads": 2, "anomaly_detection": False}})
    assert _findings(scenario([Thread("MainThread", PID, 0.9, 0.0)], boards=(board,)), "settings-changed") == []


def test_the_list_has_the_environment_the_interpreter_and_torch() -> None:
    board = settings_board({"interpreter": _interp(switch_interval_s=0.25, gc_threshold=[100, 2, 2]),
                            "torch_flags": {"cudnn_benchmark": True, "float32_matmul_precision": "high"},
                            "known_environment": [["MKL_NUM_THREADS", "1"]]})
    obs = scenario([Thread("MainThread", PID, 0.9, 0.0)], boards=(board,),
                   env=[("OMP_NUM_THREADS", "8", "process"), ("CUDA_LAUNCH_BLOCKING", "1", "process")])
    (note,) = _findings(obs, "settings-changed")
    assert note.severity == Severity.INFO and note.kind == "note"
    names = [name for name, _ in note.evidence]
    assert names == ["OMP_NUM_THREADS=8", "CUDA_LAUNCH_BLOCKING=1", "MKL_NUM_THREADS=1",
                     "sys.getswitchinterval() = 0.25 s", "gc.get_threshold() = (100, 2, 2)",
                     "torch.get_float32_matmul_precision() = high", "torch.backends.cudnn.benchmark = True"]
    assert "set by the program" in dict(note.evidence)["MKL_NUM_THREADS=1"]
    # On CPU, CUDA_LAUNCH_BLOCKING costs nothing: listed, never a cause.
    assert _findings(obs, "torch-debug-mode") == []


def test_collector_pauses_over_the_window_are_a_cause() -> None:
    first = settings_board({"interpreter": _interp(gc_callbacks=["memutil._on_collection"]),
                            "collector": _collector(10.0, 100)}, wall_time_s=NOW_S - 4.0, seq=1)
    last = settings_board({"interpreter": _interp(gc_callbacks=["memutil._on_collection"]),
                           "collector": _collector(11.2, 140)}, seq=9)
    analysis = analyse(replace(scenario([Thread("MainThread", PID, 0.9, 0.0)], boards=(first, last)), now_wall_s=NOW_S))
    (finding,) = [f for f in analysis.findings if f.rule_id == "gc-pauses"]
    assert finding.severity == Severity.WARNING and abs(finding.impact - 0.3) < 1e-6
    assert finding.claim == ("the garbage collector stops every thread 30% of the time (40 collections in the window, "
                             "up to 40 ms each), with gc.callbacks = memutil._on_collection")
    assert analysis.headline is not None and analysis.headline.rule_id == "gc-pauses"
    calm = settings_board({"interpreter": _interp(), "collector": _collector(10.05, 140)}, seq=9)
    quiet = settings_board({"interpreter": _interp(), "collector": _collector(10.0, 100)}, wall_time_s=NOW_S - 4.0, seq=1)
    assert _findings(scenario([Thread("MainThread", PID, 0.9, 0.0)], boards=(quiet, calm)), "gc-pauses") == []


def test_explicit_collections_seen_from_outside() -> None:
    collect_line = Frame("on_step_end", "/app/callbacks.py", 21)
    main = Thread("MainThread", PID, 0.9, 0.0, frame=collect_line)
    obs = scenario([main])
    obs = type(obs)(**{**{f: getattr(obs, f) for f in obs.__dataclass_fields__},
                       "source_lines": {"/app/callbacks.py:21": "        gc.collect()"}})
    (finding,) = _findings(obs, "gc-pauses")
    assert "calls gc.collect() at on_step_end (callbacks.py:21)" in finding.claim
    assert finding.severity == Severity.WARNING  # every sample is inside it


def test_a_switch_interval_with_measured_gil_waits() -> None:
    board = settings_board({"interpreter": _interp(switch_interval_s=0.25), "setting_calls": [
        {"call_name": "sys.setswitchinterval", "arg": "0.25", "site": "termui.py:7 (<module>)", "count": 1,
         "callers": ["MainThread"], "last_wall_s": NOW_S}]},
        gil={"contention_share": 0.45, "knocker_runq_share": 0.05, "wait_mean_ms": 30.0, "wait_p99_ms": 240.0})
    analysis = analyse(replace(scenario([Thread("MainThread", PID, 0.6, 0.0)], boards=(board,)), now_wall_s=NOW_S))
    (finding,) = [f for f in analysis.findings if f.rule_id == "gil-switch-interval"]
    assert finding.claim.startswith("sys.setswitchinterval(0.25) (default 0.005 s) called by MainThread at "
                                    "termui.py:7 (<module>)")
    assert "threads wait for the GIL 40% of the time" in finding.claim and finding.severity == Severity.WARNING
    # The GIL contention it produces is named after it.
    contention = [f for f in analysis.findings if f.rule_id == "gil-contention"]
    assert contention and analysis.headline is not None and analysis.headline.rule_id == "gil-switch-interval"
    harmless = settings_board({"interpreter": _interp(switch_interval_s=0.25)},
                              gil={"contention_share": 0.02, "knocker_runq_share": 0.0})
    assert _findings(scenario([Thread("MainThread", PID, 0.6, 0.0)], boards=(harmless,)), "gil-switch-interval") == []


def test_anomaly_detection_on_is_weighed_by_the_time_in_ops() -> None:
    calls = [{"call_name": "torch.autograd.set_detect_anomaly", "arg": "True", "site": "train_vae.py:10 (<module>)",
              "count": 1, "callers": ["MainThread"], "last_wall_s": NOW_S}]
    board = settings_board({"torch_flags": {"anomaly_detection": True}, "setting_calls": calls})
    (finding,) = _findings(scenario([Thread("MainThread", PID, 0.9, 0.0)], boards=(board,)), "torch-debug-mode")
    assert finding.severity == Severity.WARNING and finding.claim.startswith(
        "anomaly detection is on (torch.autograd.set_detect_anomaly(True) called by MainThread at train_vae.py:10")
    assert "MainThread spends 100% of its samples in ops" in finding.claim


def test_the_sync_debug_mode_the_syncs_probe_set_is_not_the_programs() -> None:
    """The syncs probe counts syncs through torch.cuda.set_sync_debug_mode(1), armed only where the program left it
    at 0: read as the program's setting it warned on every CUDA program attached with probes (the H200 casebook)."""
    flags = {"torch_flags": {"cuda_sync_debug_mode": 1}}
    counting = {"status": "ok", "total": 10, "per_s": 2.0, "top_lines": []}
    ours = scenario([Thread("MainThread", PID, 0.9, 0.0)], boards=(settings_board(flags, syncs=counting),))
    assert _findings(ours, "torch-debug-mode") == []
    assert _findings(ours, "settings-changed") == []  # nor listed as a setting of the program's
    # The program set it itself (the probe then stays away, saying so): the program's, weighed as before.
    theirs = settings_board(flags, syncs={"status": "na", "reason": "the program set torch.cuda's sync debug mode "
                                                                    "itself: left as it is"})
    (finding,) = _findings(scenario([Thread("MainThread", PID, 0.9, 0.0)], boards=(theirs,)), "torch-debug-mode")
    assert finding.severity == Severity.WARNING and "get_sync_debug_mode() is 1" in finding.claim
    # "error" (2) is never the probe's.
    two = settings_board({"torch_flags": {"cuda_sync_debug_mode": 2}}, syncs=counting)
    assert _findings(scenario([Thread("MainThread", PID, 0.9, 0.0)], boards=(two,)), "torch-debug-mode") != []


def test_a_warning_in_stderr_alone_is_information_and_the_probe_overrules_it() -> None:
    stderr = "train.py:24: UserWarning: Anomaly Detection has been enabled. This mode will increase the runtime\n"
    (outside,) = _findings(scenario([Thread("MainThread", PID, 0.9, 0.0)], stderr=stderr), "torch-debug-mode")
    assert outside.severity == Severity.INFO and outside.impact == 0.0  # perhaps one step only, at start-up
    off = settings_board({"torch_flags": {"anomaly_detection": False}})
    assert _findings(scenario([Thread("MainThread", PID, 0.9, 0.0)], stderr=stderr, boards=(off,)),
                     "torch-debug-mode") == []


def test_oversubscription_is_named_before_the_gil_waits_it_causes() -> None:
    board = settings_board({"interpreter": _interp()}, gil={"contention_share": 0.5, "knocker_runq_share": 0.05})
    analysis = analyse(replace(scenario(ensemble() + pools(36, run=0.04, wait=0.3), boards=(board,)), now_wall_s=NOW_S))
    ids = [f.rule_id for f in analysis.findings]
    assert "gil-contention" in ids and "cpu-oversubscribed" in ids
    assert analysis.headline is not None and analysis.headline.rule_id == "cpu-oversubscribed"


def test_a_float64_default_dtype_is_weighed_by_the_time_in_ops() -> None:
    """An uncertainty library's import calls torch.set_default_dtype(torch.float64): every parameter created after
    it is double precision. A cause where the training threads spend their time in ops; set back, nothing."""
    calls = [{"call_name": "torch.set_default_dtype", "arg": "torch.float64", "site": "gp/__init__.py:12 (<module>)",
              "count": 1, "callers": ["MainThread"], "last_wall_s": NOW_S}]
    board = settings_board({"torch_flags": {"default_dtype": "torch.float64"}, "setting_calls": calls})
    (finding,) = _findings(scenario([Thread("MainThread", PID, 0.9, 0.0)], boards=(board,)), "default-dtype-float64")
    assert finding.severity == Severity.WARNING
    assert finding.claim.startswith("the default dtype is float64 (torch.set_default_dtype(torch.float64) called by "
                                    "MainThread at gp/__init__.py:12")
    assert "MainThread spends 100% of its samples in ops" in finding.claim
    restored = settings_board({"torch_flags": {"default_dtype": "torch.float32"}, "setting_calls": calls})
    assert _findings(scenario([Thread("MainThread", PID, 0.9, 0.0)], boards=(restored,)), "default-dtype-float64") == []


TOKENIZE = Frame("tokenize", "/app/reader.py", 30)


def test_tracemalloc_is_weighed_by_the_time_its_threads_run_python() -> None:
    board = settings_board({"interpreter": _interp(tracemalloc_frames=25)})
    obs = scenario([Thread("reader", PID, 0.9, 0.0, frame=TOKENIZE, gil=True)], boards=(board,))
    (finding,) = _findings(obs, "interpreter-hook")
    assert finding.claim.startswith("tracemalloc traces every allocation (tracing, 25 frames per allocation)")
    assert finding.claim.endswith("running Python: reader 100%") and finding.severity == Severity.WARNING
    (note,) = _findings(obs, "settings-changed")
    assert "tracemalloc=tracing, 25 frames per allocation" in note.claim
    # The same program once the leak hunt is over (tracing stopped): nothing; threads in torch ops: no cost claimed.
    off = settings_board({"interpreter": _interp(tracemalloc_frames=0)})
    assert _findings(scenario([Thread("reader", PID, 0.9, 0.0, frame=TOKENIZE, gil=True)], boards=(off,)),
                     "interpreter-hook") == []
    assert _findings(scenario([Thread("trainer", PID, 0.9, 0.0)], boards=(board,)), "interpreter-hook") == []


def test_a_trace_function_in_one_thread_is_weighed_by_that_threads_python_time() -> None:
    board = settings_board({"interpreter": _interp(thread_tracers=[["loader", "covtools.tracer._trace"]])})
    threads = [Thread("loader", 101, 0.9, 0.0, frame=TOKENIZE, gil=True),
               Thread("MainThread", PID, 0.9, 0.0, frame=Frame("step", "/app/train.py", 9), gil=True)]
    (finding,) = _findings(scenario(threads, boards=(board,)), "interpreter-hook")
    assert finding.claim.startswith("a trace function (covtools.tracer._trace) runs on every line and call of loader")
    assert "MainThread" not in finding.claim


def test_a_debug_allocator_from_the_environment_is_seen_from_outside() -> None:
    obs = scenario([Thread("MainThread", PID, 0.9, 0.0, frame=TOKENIZE, gil=True)],
                   env=[("PYTHONMALLOC", "debug", "process")])
    (finding,) = _findings(obs, "interpreter-hook")
    assert "debug allocator" in finding.claim and "PYTHONMALLOC=debug" in dict(finding.evidence)["hook"]
    harmless = scenario([Thread("MainThread", PID, 0.9, 0.0, frame=TOKENIZE, gil=True)],
                        env=[("PYTHONMALLOC", "malloc", "process")])
    assert _findings(harmless, "interpreter-hook") == []


CONV = (Frame("_conv_forward", "/venv/torch/nn/modules/conv.py", 543), Frame("forward", "/app/train.py", 30))
BACKWARD = (Frame("_engine_run_backward", "/venv/torch/autograd/graph.py", 829), Frame("step", "/app/train.py", 60))
NORM = (Frame("batch_norm", "/venv/torch/nn/functional.py", 2817), Frame("forward", "/app/train.py", 31))


def _trainer_in_turn(board: Any, frames: list[tuple[Frame, ...]]) -> Any:
    """A trainer whose 12 samples take ``frames`` in turn (each stack an equal share of them)."""
    obs = scenario([Thread("trainer", 101, 0.9, 0.0, stack_frames=frames[0])], boards=(board,), samples=12)
    stacks = tuple(replace(s, threads=tuple(replace(t, frames=frames[i % len(frames)]) for t in s.threads))
                   for i, s in enumerate(obs.stacks))
    return replace(obs, stacks=stacks)


def _convnet(board: Any) -> Any:
    """A trainer whose samples are a third convolution forward, a third another forward op, a third backward."""
    return _trainer_in_turn(board, [CONV, NORM, BACKWARD])


def test_onednn_turned_off_is_weighed_by_the_convolutions_forward_and_their_share_of_backward() -> None:
    board = settings_board({"torch_flags": {"mkldnn_enabled": False}})
    (finding,) = _findings(_convnet(board), "cpu-kernels-slowed")
    assert finding.claim.startswith("oneDNN is off (torch.backends.mkldnn.enabled = False): convolutions run torch's "
                                    "own slow_conv2d")
    # forward: 4 of 12 samples; backward (4) counted in the convolutions' half of the forward ops: about 50%.
    assert "trainer spends about 50% of its samples in convolutions, forward (33%)" in finding.claim
    assert finding.severity == Severity.WARNING
    on = settings_board({"torch_flags": {"mkldnn_enabled": True}})
    assert _findings(_convnet(on), "cpu-kernels-slowed") == []


def test_onednn_primitive_cache_off_is_weighed_by_the_convolutions() -> None:
    board = settings_board({"known_environment": [["ONEDNN_PRIMITIVE_CACHE_CAPACITY", "0"],
                                                  ["LRU_CACHE_CAPACITY", "1"]]})
    (finding,) = _findings(_convnet(board), "cpu-kernels-slowed")
    assert finding.claim.startswith("ONEDNN_PRIMITIVE_CACHE_CAPACITY=0 (set by the program) turns oneDNN's primitive "
                                    "cache off: every convolution call")
    assert "trainer spends about 50% of its samples in convolutions" in finding.claim
    assert finding.severity == Severity.WARNING
    # The look-alikes: a capacity that keeps a few shapes, and ideep's cache variable alone, are only listed.
    kept = settings_board({"known_environment": [["ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64"],
                                                 ["LRU_CACHE_CAPACITY", "1"]]})
    assert _findings(_convnet(kept), "cpu-kernels-slowed") == []
    (note,) = _findings(_convnet(kept), "settings-changed")
    assert [n for n, _ in note.evidence] == ["ONEDNN_PRIMITIVE_CACHE_CAPACITY=64", "LRU_CACHE_CAPACITY=1"]


def test_a_math_library_held_to_a_fixed_code_path_is_weighed_by_the_time_in_ops() -> None:
    board = settings_board({"known_environment": [["MKL_CBWR", "COMPATIBLE"]]})
    (finding,) = _findings(scenario([Thread("MainThread", PID, 0.9, 0.0)], boards=(board,)), "cpu-kernels-slowed")
    assert finding.claim.startswith("MKL_CBWR=COMPATIBLE (set by the program) holds the CPU math kernels to a fixed")
    assert finding.severity == Severity.WARNING and "MainThread spends about 100% of its samples in torch ops" in \
        finding.claim
    # The twin's look-alike: the same variable at the library's own choice; and a capped path the threads never use.
    auto = settings_board({"known_environment": [["MKL_CBWR", "AUTO"]]})
    assert _findings(scenario([Thread("MainThread", PID, 0.9, 0.0)], boards=(auto,)), "cpu-kernels-slowed") == []
    idle = scenario([Thread("MainThread", PID, 0.9, 0.0, frame=TOKENIZE, gil=True)], boards=(board,))
    assert _findings(idle, "cpu-kernels-slowed") == []


def test_a_variable_the_program_set_itself_is_weighed_from_outside_too() -> None:
    # No probe: the variable was read from the process's memory (sources/live_environ.py), not from its start.
    obs = scenario([Thread("MainThread", PID, 0.9, 0.0)], env=[("MKL_CBWR", "COMPATIBLE", "program")])
    (finding,) = _findings(obs, "cpu-kernels-slowed")
    assert finding.claim.startswith("MKL_CBWR=COMPATIBLE (environment, set by the program) holds the CPU math")
    assert finding.severity == Severity.WARNING


ATTENTION = (Frame("Block.forward", "/app/model.py", 83),)  # the line calls F.scaled_dot_product_attention (C)


def _attention_net(board: Any) -> Any:
    """A trainer whose samples are a third at its attention line, a third another forward op, a third backward."""
    obs = _trainer_in_turn(board, [ATTENTION, NORM, BACKWARD])
    lines = {**obs.source_lines, "/app/model.py:83": "        y = F.scaled_dot_product_attention(q, k, v)"}
    return replace(obs, source_lines=lines)


def test_flash_attention_turned_off_is_weighed_by_the_attention_and_its_share_of_backward() -> None:
    board = settings_board({"torch_flags": {"flash_sdp_enabled": False, "mem_efficient_sdp_enabled": True}})
    (finding,) = _findings(_attention_net(board), "cpu-kernels-slowed")
    assert finding.claim.startswith("torch.backends.cuda.flash_sdp_enabled() = False: the flash attention kernel is "
                                    "off, so scaled_dot_product_attention runs an unfused path")
    assert "which CPU attention honours too" in finding.claim
    assert "trainer spends about 50% of its samples in attention, forward (33%)" in finding.claim
    assert finding.severity == Severity.WARNING
    # The twin's look-alike: the memory-efficient kernel off in a CPU process (CUDA's only kernel) changes nothing.
    twin = settings_board({"torch_flags": {"flash_sdp_enabled": True, "mem_efficient_sdp_enabled": False}})
    assert _findings(_attention_net(twin), "cpu-kernels-slowed") == []


def _io(writes: int, written_bytes: int) -> tuple[ProcessIo, ProcessIo]:
    """The process's /proc/PID/io at the window's start and end (scenario's 4 s): ``writes`` calls in between."""
    return (ProcessIo(rchar=0, read_bytes=0, syscr=0, wchar=1000, syscw=10),
            ProcessIo(rchar=0, read_bytes=0, syscr=0, wchar=1000 + written_bytes, syscw=10 + writes))


def test_a_native_library_logging_every_call_is_weighed_by_the_writes_and_the_time_in_ops() -> None:
    on = [("MKL_VERBOSE", "1", "program")]
    obs = scenario([Thread("MainThread", PID, 0.9, 0.0)], env=on, io=_io(40_000, 4_000_000))
    (finding,) = _findings(obs, "native-call-log")
    assert finding.claim.startswith("MKL_VERBOSE=1 (environment, set by the program): MKL times every BLAS and "
                                    "LAPACK call and writes a line for it; the process made 10,000 write calls a "
                                    "second (977 KiB/s) over the window, and MainThread spends 100% of its samples")
    assert finding.severity == Severity.WARNING
    # The look-alikes: the variable at its default value (not even listed), and the log on but nothing written
    # (a library that does not read it): information only in the list.
    off = scenario([Thread("MainThread", PID, 0.9, 0.0)], env=[("MKL_VERBOSE", "0", "program")],
                   io=_io(40_000, 4_000_000))
    assert _findings(off, "native-call-log") == [] and _findings(off, "settings-changed") == []
    quiet = scenario([Thread("MainThread", PID, 0.9, 0.0)], env=on, io=_io(8, 800))
    assert _findings(quiet, "native-call-log") == []
    assert [n for n, _ in _findings(quiet, "settings-changed")[0].evidence] == ["MKL_VERBOSE=1"]
    unread = scenario([Thread("MainThread", PID, 0.9, 0.0)], env=on)  # older recordings: no write counters
    assert _findings(unread, "native-call-log") == []
    # NCCL's log at its default level says nothing per call.
    warn = scenario([Thread("MainThread", PID, 0.9, 0.0)], env=[("NCCL_DEBUG", "WARN", "process")],
                    io=_io(40_000, 4_000_000))
    assert _findings(warn, "native-call-log") == []


def test_the_collectors_debugging_flags_are_listed_and_said_with_its_pauses() -> None:
    interp = _interp(gc_debug=33, gc_garbage=120_000)  # DEBUG_STATS | DEBUG_SAVEALL
    first = settings_board({"interpreter": interp, "collector": _collector(10.0, 100)}, wall_time_s=NOW_S - 4.0, seq=1)
    last = settings_board({"interpreter": interp, "collector": _collector(11.2, 140)}, seq=9)
    obs = replace(scenario([Thread("MainThread", PID, 0.9, 0.0)], boards=(first, last)), now_wall_s=NOW_S)
    (finding,) = _findings(obs, "gc-pauses")
    assert finding.claim.endswith("with gc.get_debug() = DEBUG_STATS|DEBUG_SAVEALL")
    (note,) = _findings(obs, "settings-changed")
    assert "gc.get_debug() = DEBUG_STATS|DEBUG_SAVEALL" in note.claim
    assert "gc.garbage holds 120,000 objects" in dict(note.evidence)["gc.get_debug() = DEBUG_STATS|DEBUG_SAVEALL"]
    off = settings_board({"interpreter": _interp(gc_debug=0, gc_garbage=0)}, seq=9)
    assert _findings(scenario([Thread("MainThread", PID, 0.9, 0.0)], boards=(off,)), "settings-changed") == []


EINSUM = (Frame("einsum", "/venv/torch/functional.py", 402), Frame("Mixer.forward", "/app/model.py", 51))


def _einsum_net(board: Any) -> Any:
    """A trainer whose samples are a third in torch.einsum, a third another forward op, a third backward."""
    return _trainer_in_turn(board, [EINSUM, NORM, BACKWARD])


def test_einsum_without_opt_einsum_is_weighed_by_the_einsums() -> None:
    off = settings_board({"torch_flags": {"opt_einsum_enabled": False}})
    (finding,) = _findings(_einsum_net(off), "cpu-kernels-slowed")
    assert finding.claim.startswith("einsum's contraction order is left to right (torch.backends.opt_einsum.enabled = "
                                    "False)")
    assert "trainer spends about 50% of its samples in einsum, forward (33%)" in finding.claim
    assert finding.severity == Severity.WARNING
    on = settings_board({"torch_flags": {"opt_einsum_enabled": True}})
    assert _findings(_einsum_net(on), "cpu-kernels-slowed") == [] and _findings(_einsum_net(on),
                                                                                "settings-changed") == []
    # The flag off where no einsum runs: listed, not a cause.
    assert _findings(_convnet(off), "cpu-kernels-slowed") == []


def test_mkl_forced_to_another_cpu_type_is_weighed_by_the_time_in_ops() -> None:
    obs = scenario([Thread("MainThread", PID, 0.9, 0.0)], env=[("MKL_DEBUG_CPU_TYPE", "5", "process")])
    (finding,) = _findings(obs, "cpu-kernels-slowed")
    assert finding.claim.startswith("MKL_DEBUG_CPU_TYPE=5 (environment) holds the CPU math kernels to a fixed")


def test_glibcs_allocator_debugging_is_weighed_by_the_time_in_ops() -> None:
    obs = scenario([Thread("MainThread", PID, 0.9, 0.0)], env=[("MALLOC_PERTURB_", "165", "process")])
    (finding,) = _findings(obs, "malloc-debug")
    assert finding.claim.startswith("MALLOC_PERTURB_=165 (environment): glibc fills every block it hands out and "
                                    "every block freed with a byte pattern")
    assert "MainThread spends 100% of its samples in ops" in finding.claim and finding.severity == Severity.WARNING
    tunables = scenario([Thread("MainThread", PID, 0.9, 0.0)],
                        env=[("GLIBC_TUNABLES", "glibc.malloc.perturb=170", "process")])
    assert _findings(tunables, "malloc-debug")[0].claim.startswith("GLIBC_TUNABLES=glibc.malloc.perturb=170")
    # The look-alikes: perturb at 0 (off), MALLOC_CHECK_ without the debug library (glibc >= 2.34 ignores it), an
    # arena limit through the tunables.
    for env in (("MALLOC_PERTURB_", "0", "process"), ("MALLOC_CHECK_", "3", "process"),
                ("GLIBC_TUNABLES", "glibc.malloc.arena_max=2", "process")):
        assert _findings(scenario([Thread("MainThread", PID, 0.9, 0.0)], env=[env]), "malloc-debug") == [], env
    checked = scenario([Thread("MainThread", PID, 0.9, 0.0)], env=[("MALLOC_CHECK_", "3", "process")])
    checked = replace(checked, os_facts=replace(checked.os_facts, libraries=("libgomp", "libc_malloc_debug")))
    assert _findings(checked, "malloc-debug")[0].claim.startswith("MALLOC_CHECK_=3 (environment): glibc checks")


QUANT = (Frame("forward", "/venv/torch/ao/nn/quantized/dynamic/modules/linear.py", 54),
         Frame("WindowLM.forward", "/app/teacher.py", 17))


def _quantized_net(board: Any) -> Any:
    """A thread whose samples are two thirds in a dynamically quantized Linear, a third another forward op."""
    return _trainer_in_turn(board, [QUANT, QUANT, NORM])


def test_a_quantized_engine_for_another_cpu_is_weighed_by_the_quantized_modules() -> None:
    mobile = settings_board({"torch_flags": {"quantized_engine": "qnnpack", "quantized_engine_default": "x86"}})
    (finding,) = _findings(_quantized_net(mobile), "cpu-kernels-slowed")
    assert finding.claim.startswith("torch.backends.quantized.engine = qnnpack (this machine's own is x86): "
                                    "quantized (int8) ops run qnnpack's kernels")
    assert "trainer spends about 67% of its samples in quantized modules" in finding.claim
    assert finding.severity == Severity.WARNING
    # The twin's look-alike: the engine set, to this machine's own; and qnnpack on an ARM machine, its default.
    own = settings_board({"torch_flags": {"quantized_engine": "x86", "quantized_engine_default": "x86"}})
    arm = settings_board({"torch_flags": {"quantized_engine": "qnnpack", "quantized_engine_default": "qnnpack"}})
    for board in (own, arm):
        assert _findings(_quantized_net(board), "cpu-kernels-slowed") == []
        assert _findings(_quantized_net(board), "settings-changed") == []


def test_the_decimal_precision_away_from_28_is_listed() -> None:
    board = settings_board({"interpreter": _interp(decimal_prec=120)})
    (note,) = _findings(scenario([Thread("MainThread", PID, 0.9, 0.0)], boards=(board,)), "settings-changed")
    assert "decimal.DefaultContext.prec = 120" in note.claim
    plain = settings_board({"interpreter": _interp(decimal_prec=28)})
    assert _findings(scenario([Thread("MainThread", PID, 0.9, 0.0)], boards=(plain,)), "settings-changed") == []


def test_a_library_constant_changed_at_run_time_is_said_where_its_code_runs() -> None:
    sorted_list = "/venv/lib/python3.11/site-packages/sortedcontainers/sortedlist.py"
    frames = (Frame("SortedList._expand", sorted_list, 300), Frame("mine", "/app/train.py", 40))
    changes = [["sortedcontainers/sortedlist.py", "SortedList.DEFAULT_LOAD_FACTOR", "16", "1000"],
               ["yaml/constructor.py", "MAX_DEPTH", "5", "100"]]
    board = settings_board({"interpreter": _interp(), "library_changes": changes})
    obs = scenario([Thread("MainThread", PID, 0.9, 0.0, stack_frames=frames)], boards=(board,))
    (note,) = _findings(obs, "settings-changed")
    listed = dict(note.evidence)
    assert "sortedcontainers/sortedlist.py" in listed["SortedList.DEFAULT_LOAD_FACTOR = 16"]
    assert "MAX_DEPTH=5" in listed  # every change is listed ...
    (where,) = _findings(obs, "where-time-goes")
    # ... and said beside the time only where the thread's samples run in that code
    assert "there SortedList.DEFAULT_LOAD_FACTOR is 16 at run time (1000 in sortedcontainers/sortedlist.py)" \
        in where.claim
    assert "MAX_DEPTH" not in where.claim
    elsewhere = scenario([Thread("MainThread", PID, 0.9, 0.0)], boards=(board,))
    (where,) = _findings(elsewhere, "where-time-goes")
    assert "DEFAULT_LOAD_FACTOR" not in where.claim
