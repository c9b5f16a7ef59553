"""py-spy: strict parsing of ``dump --json``, the binary search, retries, and attach-failure diagnosis."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.sources.pyspy import PySpy
from dflash_diag.sources.pyspy_find import find_pyspy
from dflash_diag.sources.pyspy_json import PySpyOutputError, load_recorded_dumps, parse_dump

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H200 = FIXTURES / "h200" / "pyspy_dump_json_nonblocking.json"


def good_thread(**over: Any) -> dict[str, Any]:
    thread: dict[str, Any] = {
        "pid": 7, "thread_id": 140000, "thread_name": "target-0", "os_thread_id": 8, "active": True,
        "owns_gil": False, "process_info": None,
        "frames": [{"name": "f", "filename": "/a.py", "module": None, "short_filename": "a.py", "line": 3,
                    "locals": None, "is_entry": True, "is_shim_entry": False}],
    }
    thread.update(over)
    return thread


def parse(doc: Any, pid: int = 7) -> Any:
    text = doc if isinstance(doc, str) else json.dumps(doc)
    return parse_dump(text, pid=pid, monotonic_s=1.0, wall_s=2.0, duration_s=0.01, native=False)


def test_parses_real_recordings() -> None:
    samples = load_recorded_dumps(H200)
    assert len(samples) == 10
    first = samples[0]
    assert first.pid == 766 and not first.native
    names = {t.name for t in first.threads}
    assert names == {"drafter-1", "metrics-hog", "drafter-0", "target-0", "MainThread"}
    target = next(t for t in first.threads if t.name == "target-0")
    assert target.os_thread_id == 782 and not target.active and not target.owns_gil
    assert target.top is not None and (target.top.name, target.top.line) == ("target", 7)
    assert not any(f.native for t in first.threads for f in t.frames)


def test_native_frames_are_marked_by_module() -> None:
    native = [s for s in load_recorded_dumps(FIXTURES / "cpu" / "pyspy_target_bound.json") if s.native]
    assert native
    frames = [f for s in native for t in s.threads for f in t.frames]
    assert any(f.native and f.module and f.module.endswith(".so") for f in frames)
    assert any(not f.native and f.filename.endswith("threading.py") for f in frames)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("not json", "not JSON"),
        ('[{"a": NaN}]', "not JSON"),
        ({"threads": []}, "expected a list"),
        (["x"], "not an object"),
        ([good_thread(thread_id="1")], "thread_id is str"),
        ([good_thread(active=1)], "active is int"),
        ([good_thread(owns_gil=None)], "owns_gil is NoneType"),
        ([good_thread(thread_id=True)], "is a bool"),
        ([good_thread(thread_id=-1)], "out of range"),
        ([good_thread(os_thread_id="8")], "os_thread_id"),
        ([good_thread(thread_name=5)], "thread_name"),
        ([good_thread(frames="f")], "frames is str"),
        ([good_thread(frames=[{"name": "f", "filename": "/a.py"}])], "lacks 'line'"),
        ([good_thread(frames=[{"name": "f", "filename": "/a.py", "line": 1.5}])], "line is float"),
        ([good_thread(frames=[{"name": "f", "filename": "/a.py", "line": 1, "module": 3}])], "module"),
        ([good_thread(frames=[{"name": "x" * 10_000, "filename": "/a.py", "line": 1}])], "longer than"),
        ([good_thread(pid=8)], "belongs to PID 8"),
        ([{k: v for k, v in good_thread().items() if k != "owns_gil"}], "lacks 'owns_gil'"),
    ],
)
def test_rejects_malformed_output(doc: Any, message: str) -> None:
    with pytest.raises(PySpyOutputError, match=message):
        parse(doc)


def test_torn_line_number_is_unknown_not_fatal() -> None:
    """Seen in a nonblocking dump of the tiny trainer: line -60417. The frame stays, its line becomes 0."""
    frames = [{"name": "f", "filename": "/a.py", "line": -60417}, {"name": "g", "filename": "/b.py", "line": 7}]
    sample = parse([good_thread(frames=frames)])
    assert [(f.name, f.line) for f in sample.threads[0].frames] == [("f", 0), ("g", 7)]


def test_accepts_minimal_and_null_optionals() -> None:
    sample = parse([good_thread(thread_name=None, os_thread_id=None)])
    assert sample.threads[0].name is None and sample.threads[0].os_thread_id is None
    assert sample.threads[0].frames[0].line == 3


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=25,
)


@settings(max_examples=60, deadline=None)
@given(json_values)
def test_any_json_parses_or_fails_cleanly(doc: Any) -> None:
    """Untrusted input: anything is either a valid sample or a PySpyOutputError, never another exception."""
    try:
        parse(doc)
    except PySpyOutputError:
        pass


# --- finding the binary ------------------------------------------------------------------------------------


def test_find_pyspy_prefers_explicit_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "py-spy"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    assert find_pyspy(str(fake)) == str(fake)
    assert find_pyspy(str(tmp_path / "missing")) is None
    monkeypatch.setenv("DFLASH_DIAG_PYSPY", str(fake))
    assert find_pyspy() == str(fake)


def test_find_pyspy_next_to_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DFLASH_DIAG_PYSPY", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    found = find_pyspy()
    assert found is not None and Path(found).parent == Path(sys.executable).parent


# --- attach failures, with the real py-spy -----------------------------------------------------------------


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_missing_process() -> None:
    with pytest.raises(AttachError) as err:
        PySpy(dead_pid()).dump()
    assert err.value.exit_code == ExitCode.NO_PROCESS
    assert "no process with PID" in str(err.value)
    with pytest.raises(AttachError) as err:
        PySpy(dead_pid()).check()
    assert err.value.exit_code == ExitCode.NO_PROCESS


@pytest.mark.parametrize("pid", [0, -1])
def test_non_positive_pid_is_no_process(pid: int) -> None:
    with pytest.raises(AttachError) as err:
        PySpy(pid).check()
    assert err.value.exit_code == ExitCode.NO_PROCESS


def test_not_a_python_process() -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        spy = PySpy(sleeper.pid, retry_delay_s=0.0)
        with pytest.raises(AttachError) as err:
            spy.dump()
        assert err.value.exit_code == ExitCode.NOT_PYTHON
        assert "sleep" in str(err.value) and "not a Python process" in str(err.value)
        assert spy.attempts == 1  # "Failed to find python version" from a non-Python process is not retried
        with pytest.raises(AttachError) as err:
            PySpy(sleeper.pid).check()
        assert err.value.exit_code == ExitCode.NOT_PYTHON
    finally:
        sleeper.kill()
        sleeper.wait()


def test_pyspy_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AttachError) as err:
        PySpy(os.getpid(), binary=str(tmp_path / "no-such-py-spy")).dump()
    assert err.value.exit_code == ExitCode.MISSING_TOOL and "pip install py-spy" in str(err.value)
    monkeypatch.setenv("DFLASH_DIAG_PYSPY", str(tmp_path / "nope"))
    with pytest.raises(AttachError) as err:
        PySpy(os.getpid()).check()
    assert err.value.exit_code == ExitCode.MISSING_TOOL


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_permission_denied_names_the_fix(tmp_path: Path) -> None:
    """py-spy run as another user (nobody) against our process: the real 'Permission Denied' is diagnosed."""
    real = find_pyspy()
    assert real is not None
    wrapper = tmp_path / "py-spy-as-nobody"
    wrapper.write_text(f'#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups {real} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(AttachError) as err:
            PySpy(target.pid, binary=str(wrapper)).dump()
    finally:
        target.kill()
        target.wait()
    assert err.value.exit_code == ExitCode.PERMISSION
    text = str(err.value)
    assert "ptrace_scope" in text and "CAP_SYS_PTRACE" in text and "SYS_PTRACE" in text


def test_transient_failures_are_retried() -> None:
    """"Failed to find python version" happens on ~40% of attaches: retried, then the real dump succeeds."""
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    calls: list[Sequence[str]] = []

    def flaky(cmd: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        if len(calls) <= 2:
            return subprocess.CompletedProcess(list(cmd), 1, "", "Error: Failed to find python version from target process")
        return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout_s, check=False)

    try:
        spy = PySpy(target.pid, runner=flaky, retries=4, retry_delay_s=0.01)
        # The fresh interpreter itself may fail transiently too: the retry loop absorbs that as well.
        sample = spy.dump()
    finally:
        target.kill()
        target.wait()
    assert len(calls) >= 3 and spy.failures >= 2
    assert sample.pid == target.pid
    assert any(f.name == "<module>" for t in sample.threads for f in t.frames)  # the real stack of the target
    assert "--nonblocking" in calls[-1] and "--native" not in calls[-1]


def test_native_dumps_are_rate_limited() -> None:
    now = [100.0]
    seen: list[Sequence[str]] = []
    out = json.dumps([good_thread(pid=os.getpid())])

    def runner(cmd: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        seen.append(cmd)
        now[0] += 0.5 if "--native" in cmd else 0.01  # a native dump pauses the target ~0.5 s
        return subprocess.CompletedProcess(list(cmd), 0, out, "")

    spy = PySpy(os.getpid(), native=True, runner=runner, clock=lambda: now[0], native_min_interval_s=5.0)
    kinds = []
    for _ in range(6):
        kinds.append(spy.dump().native)
        now[0] += 1.0
    # First native, then non-blocking until max(5 s, 20 x 0.5 s) = 10 s have passed.
    assert kinds == [True, False, False, False, False, False]
    now[0] += 10.0
    assert spy.dump().native
    spy.request_native()
    assert spy.dump().native
    assert all(("--native" in c) != ("--nonblocking" in c) for c in seen)  # never both: py-spy refuses that
    if shutil.which("nice"):
        # Non-blocking dumps run at a lower priority than the trainer; a native dump (the trainer is paused
        # until it ends) at full priority.
        assert all(c[:3] == [shutil.which("nice"), "-n", "10"] for c in seen if "--nonblocking" in c)
        assert all("nice" not in c[0] for c in seen if "--native" in c)


def test_failing_native_dump_falls_back_to_python_frames() -> None:
    out = json.dumps([good_thread(pid=os.getpid())])
    seen: list[Sequence[str]] = []

    def runner(cmd: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        seen.append(cmd)
        if "--native" in cmd:
            return subprocess.CompletedProcess(list(cmd), 1, "", "Error: Failed to merge native and python frames")
        return subprocess.CompletedProcess(list(cmd), 0, out, "")

    spy = PySpy(os.getpid(), native=True, runner=runner)
    sample = spy.dump()
    assert not sample.native and sample.threads[0].name == "target-0"
    assert spy.native_error == "Failed to merge native and python frames"
    assert not spy.dump().native and sum("--native" in c for c in seen) == 1  # not retried before the interval
