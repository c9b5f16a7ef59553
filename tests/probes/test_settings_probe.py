"""The settings probe, for real: it times the collector's pauses (a callback of the program's own counts in them),
records the calls that change a setting with the thread and the line that made them (torch.set_num_threads from
pool threads), reads the interpreter's and torch's settings, never lets a failure reach the program, and puts
everything back when closed. A fresh interpreter shows torch's functions wrapped the moment its import finishes."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from dflash_contract.board import SettingsKeys as K
from probes.settings import SettingsProbe


def test_the_collector_is_timed_with_the_programs_own_callback_inside_each_pause() -> None:
    def slow_watchdog(phase: str, info: dict) -> None:
        if phase == "stop":
            time.sleep(0.5)  # what a heap-walking callback costs every collection

    probe = SettingsProbe()
    try:
        for _ in range(3):
            gc.collect()
        plain = probe.snapshot(0.0)[K.COLLECTOR][K.PAUSE_S_TOTAL]
        gc.callbacks.append(slow_watchdog)  # appended after the probe started, as a program would
        try:
            for _ in range(3):
                gc.collect()
        finally:
            gc.callbacks.remove(slow_watchdog)
        payload = probe.snapshot(0.0)
        gc.callbacks.append(slow_watchdog)
        names = probe.snapshot(0.0)[K.INTERPRETER][K.GC_CALLBACKS]
        gc.callbacks.remove(slow_watchdog)
    finally:
        probe.close()
    collector = payload[K.COLLECTOR]
    assert collector[K.COLLECTIONS] >= 6 and collector[K.COLLECTIONS_BY_GENERATION][2] >= 6
    assert collector[K.EXPLICIT_COLLECTS] == 6
    # The three watched pauses hold the watchdog's 1.5 s of sleep: the callback is timed inside each pause. (Not
    # compared with the plain ones: a full collection of this process, torch loaded, took 0.1-0.5 s on a loaded
    # box, and varies that much from one to the next.)
    watched = collector[K.PAUSE_S_TOTAL] - plain
    assert watched >= 1.45 and collector[K.PAUSE_MAX_MS] >= 450.0
    assert collector[K.RECENT_PAUSE_SHARE] > 0.0 and collector[K.RECENT_COLLECTIONS] >= 6
    assert f"{__name__}.slow_watchdog" in names  # beside any a test plugin registered (hypothesis has one)
    rows = [r for r in payload[K.SETTING_CALLS] if r[K.CALL] == "gc.collect"]  # one row per calling line
    assert sum(r[K.COUNT] for r in rows) == 6 and all(r[K.SITE].startswith("test_settings_probe.py:") for r in rows)
    assert all(r[K.CALLERS] == ["MainThread"] for r in rows)


def test_calls_from_pool_threads_are_recorded_by_thread_and_line() -> None:
    probe = SettingsProbe()  # torch is imported: its functions are wrapped at once
    before = torch.get_num_threads()
    try:
        def member() -> None:
            torch.set_num_threads(3)

        threads = [threading.Thread(target=member, name=f"member_{i}") for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        previous = sys.getswitchinterval()
        sys.setswitchinterval(0.25)
        try:
            payload = probe.snapshot(0.0)
        finally:
            sys.setswitchinterval(previous)
    finally:
        probe.close()
        torch.set_num_threads(before)
    rows = {r[K.CALL]: r for r in payload[K.SETTING_CALLS]}
    threads_row = rows["torch.set_num_threads"]
    assert threads_row[K.ARG] == "3" and threads_row[K.COUNT] == 4
    assert sorted(threads_row[K.CALLERS]) == [f"member_{i}" for i in range(4)]
    assert threads_row[K.SITE].endswith("(member)")
    assert rows["sys.setswitchinterval"][K.ARG] == "0.25"
    assert payload[K.INTERPRETER][K.SWITCH_INTERVAL_S] == 0.25
    flags = payload[K.TORCH_FLAGS]
    assert flags[K.ANOMALY_DETECTION] is False and flags[K.FLOAT32_MATMUL_PRECISION] == "highest"
    assert flags[K.CUDA_SYNC_DEBUG_MODE] is None  # CUDA never initialised: not read (never creates a context)
    assert payload[K.CPU_CORES] >= 1


def test_flags_and_the_environment_as_the_program_changed_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.setenv("SOME_API_TOKEN", "hf_abcdefghijklmnopqrstu")
    probe = SettingsProbe()
    torch.autograd.set_detect_anomaly(True)
    try:
        payload = probe.snapshot(0.0)
    finally:
        torch.autograd.set_detect_anomaly(False)
        probe.close()
    assert payload[K.TORCH_FLAGS][K.ANOMALY_DETECTION] is True
    assert ["OMP_NUM_THREADS", "7"] in payload[K.ENVIRONMENT]
    assert all(name != "SOME_API_TOKEN" for name, _ in payload[K.ENVIRONMENT])  # only the catalogue's names
    anomaly = [r for r in payload[K.SETTING_CALLS] if r[K.CALL] == "torch.autograd.set_detect_anomaly"]
    assert anomaly and anomaly[0][K.ARG] == "True"
    json.dumps(payload)  # the board's JSON


def test_tracemalloc_and_a_threads_trace_function_are_read() -> None:
    import tracemalloc

    stop = threading.Event()

    def tracer(frame, event, arg):  # type: ignore[no-untyped-def]
        return tracer

    def traced() -> None:
        sys.settrace(tracer)  # this thread only, as a debugger or coverage helper sets it
        while not stop.wait(0.01):
            pass

    worker = threading.Thread(target=traced, name="traced-loader", daemon=True)
    worker.start()
    probe = SettingsProbe()
    was_tracing = tracemalloc.is_tracing()
    tracemalloc.start(7)
    try:
        time.sleep(0.05)
        payload = probe.snapshot(0.0)
    finally:
        if not was_tracing:
            tracemalloc.stop()
        stop.set()
        worker.join(5)
        probe.close()
    interp = payload[K.INTERPRETER]
    assert interp[K.TRACEMALLOC_FRAMES] == 7
    assert ["traced-loader", f"{__name__}.tracer"] in interp[K.THREAD_TRACERS]  # a long qualname keeps its end
    assert all(name != threading.current_thread().name for name, _ in interp[K.THREAD_TRACERS])
    # Where something traces, what a traced line costs is measured (an empty trace function against none), and
    # the measuring thread's own trace function is put back.
    assert isinstance(interp[K.TRACE_LINE_SLOWDOWN], float) and interp[K.TRACE_LINE_SLOWDOWN] > 1.5
    assert sys.gettrace() is None
    after = SettingsProbe()
    try:
        quiet = after.snapshot(0.0)[K.INTERPRETER]
        assert quiet[K.THREAD_TRACERS] == []  # the thread is gone with its tracer
        assert quiet[K.TRACE_LINE_SLOWDOWN] is None  # nothing traces: nothing measured
    finally:
        after.close()


def test_a_collection_inside_the_probes_own_locked_work_does_not_wait_for_itself() -> None:
    """A collection can start at any allocation, also one the probe makes while it holds its lock (its snapshot
    did, at a rank's start): the callback then must not wait for that lock (it waited forever: the rank hung).
    In a child process, so that a regression is a timeout here, not a hung suite."""
    script = """
import gc, threading
from probes.settings import SettingsProbe
gc.set_threshold(1)  # every container allocation may start a collection (set before the probe wraps it)
probe = SettingsProbe()
before = probe.snapshot(0.0)["collector"]["collections"]
with probe._lock:
    _ = [[i] for i in range(200)]  # allocations: collections start inside the lock
assert probe.snapshot(0.0)["collector"]["collections"] > before  # and they were counted
print("done")
"""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=root)
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr[-2000:]


def test_close_puts_everything_back() -> None:
    originals = (gc.collect, gc.set_threshold, sys.setswitchinterval, torch.set_num_threads,
                 torch.autograd.set_detect_anomaly)
    callbacks = list(gc.callbacks)
    probe = SettingsProbe()
    assert gc.collect is not originals[0] and torch.set_num_threads is not originals[3]
    probe.close()
    assert (gc.collect, gc.set_threshold, sys.setswitchinterval, torch.set_num_threads,
            torch.autograd.set_detect_anomaly) == originals
    assert gc.callbacks == callbacks


def test_the_probes_own_calls_are_not_the_programs_settings() -> None:
    from probes._common import current_frames

    probe = SettingsProbe()
    try:
        current_frames()  # holds the collector off with gc.disable()/enable()
        gc.disable()
        gc.enable()
        rows = probe.snapshot(0.0)[K.SETTING_CALLS]
    finally:
        probe.close()
    assert [r[K.SITE] for r in rows if r[K.CALL] == "gc.disable"] == [rows[0][K.SITE]]
    assert rows[0][K.SITE].startswith("test_settings_probe.py:")


def test_a_failing_note_never_reaches_the_program() -> None:
    probe = SettingsProbe()
    try:
        def boom(*args: object) -> None:
            raise RuntimeError("probe bug")

        probe._note = boom  # type: ignore[method-assign]
        probe._on_gc("stop", {"generation": "odd"})  # an odd info: counted, never raised
        assert gc.collect() >= 0  # the wrapper was built around the original note: still returns gc's answer
        probe._patched.clear()
        probe.close()
        fresh = SettingsProbe()
        fresh._note = boom  # type: ignore[method-assign]
        fresh._patch(gc, ("get_count",), "gc")  # a wrapper made now calls the failing note
        assert isinstance(gc.get_count(), tuple)
        assert fresh.snapshot(0.0)["hook_errors"] >= 1
        fresh.close()
    finally:
        probe.close()


@pytest.mark.slow
def test_torch_is_wrapped_as_its_import_finishes(tmp_path: Path) -> None:
    """The probe starts before the program imports torch (dflash-diag run): the calls made right after the import,
    before any publish, are still seen."""
    script = (
        "import json, threading\n"
        "from probes.settings import SettingsProbe\n"
        "p = SettingsProbe()\n"
        "import torch\n"
        "t = threading.Thread(target=torch.set_num_threads, args=(2,), name='pool-0'); t.start(); t.join()\n"
        "rows = p.snapshot(0.0)['setting_calls']\n"
        "print(json.dumps([(r['call_name'], r['arg'], r['callers']) for r in rows]))\n"
        "print(type(torch.__spec__.loader).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    rows, loader = out.stdout.strip().splitlines()
    assert ["torch.set_num_threads", "2", ["pool-0"]] in json.loads(rows)
    assert loader != "_CallbackLoader"  # the module keeps the loader it would have had


def test_logging_levels_and_warnings_filters_are_read_and_listed() -> None:
    import logging
    import warnings

    from dflash_diag.analysis.settings import _interpreter as readings_of

    root, chatty = logging.getLogger(), logging.getLogger("featurizer.cache")
    old_root, old_chatty = root.level, chatty.level
    probe = SettingsProbe()
    try:
        with warnings.catch_warnings():
            root.setLevel(logging.INFO)
            chatty.setLevel(logging.DEBUG)
            chatty.addHandler(logging.StreamHandler(sys.stderr))
            silent = logging.getLogger("lib.artifact")  # at DEBUG, but nothing of it reaches a stream
            silent.setLevel(logging.DEBUG)
            silent.propagate = False
            warnings.filterwarnings("always", message="one library message")  # one message: not process-wide
            warnings.simplefilter("always")
            payload = probe.snapshot(0.0)
    finally:
        root.setLevel(old_root)
        chatty.setLevel(old_chatty)
        chatty.handlers.clear()
        probe.close()
    interp = payload[K.INTERPRETER]
    assert interp[K.LOGGING_ROOT_LEVEL] == logging.INFO
    assert "featurizer.cache" in interp[K.LOGGERS_AT_DEBUG] and "lib.artifact" not in interp[K.LOGGERS_AT_DEBUG]
    assert "always (Warning)" in interp[K.WARNINGS_ACTIONS]
    texts = {r.text() for r in readings_of(payload)}
    assert "logging.getLogger().level = INFO" in texts
    assert any(t.startswith("logging.getLogger(NAME).level = DEBUG for ") and "featurizer.cache" in t for t in texts)
    assert any(t.startswith("warnings.filters = ") and "always (Warning)" in t for t in texts)
    # The defaults list nothing: the root logger at WARNING, no logger at DEBUG, no 'always' filter.
    probe = SettingsProbe()
    try:
        with warnings.catch_warnings():
            warnings.resetwarnings()
            quiet = probe.snapshot(0.0)
    finally:
        probe.close()
    assert not {r.name for r in readings_of(quiet)} & {"logging.getLogger().level", "warnings.filters"}


def test_the_collectors_debugging_flags_and_what_they_kept_are_read() -> None:
    probe = SettingsProbe()
    before = gc.get_debug()
    try:
        assert probe.snapshot(0.0)[K.INTERPRETER][K.GC_DEBUG] == before == 0
        gc.set_debug(gc.DEBUG_SAVEALL)  # a leak hunt left on: every collected object is kept in gc.garbage
        for _ in range(20):
            a: list[object] = []
            a.append(a)  # a cycle for the collector to find and, here, keep
        del a  # the last one too
        gc.collect()
        interp = probe.snapshot(0.0)[K.INTERPRETER]
    finally:
        gc.set_debug(before)
        del gc.garbage[:]
        probe.close()
    assert interp[K.GC_DEBUG] == gc.DEBUG_SAVEALL and interp[K.GC_GARBAGE] >= 20


def test_the_quantized_engine_and_this_machines_own_are_read() -> None:
    import torch

    probe = SettingsProbe()
    before = torch.backends.quantized.engine
    try:
        flags = probe.snapshot(0.0)[K.TORCH_FLAGS]
        assert flags[K.QUANTIZED_ENGINE] == before and flags[K.QUANTIZED_ENGINE_DEFAULT] in ("x86", "fbgemm",
                                                                                             "qnnpack")
        if "qnnpack" in torch.backends.quantized.supported_engines:
            torch.backends.quantized.engine = "qnnpack"  # a mobile profile set process-wide
            assert probe.snapshot(0.0)[K.TORCH_FLAGS][K.QUANTIZED_ENGINE] == "qnnpack"
    finally:
        torch.backends.quantized.engine = before
        probe.close()


def test_the_decimal_default_contexts_precision_is_read_only_where_decimal_was_imported() -> None:
    import decimal

    probe = SettingsProbe()
    try:
        assert probe.snapshot(0.0)[K.INTERPRETER][K.DECIMAL_PREC] == 28
        decimal.DefaultContext.prec = 120  # an audit profile: every new thread's arithmetic on 120 digits
        assert probe.snapshot(0.0)[K.INTERPRETER][K.DECIMAL_PREC] == 120
    finally:
        decimal.DefaultContext.prec = 28
        probe.close()
