"""Running py-spy: the binary search, retries, native rate limits, and attach-failure diagnosis, with the real binary."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_pyspy_json import good_thread  # one py-spy thread record, as `dump --json` prints it

from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.sources.pyspy import PySpy
from dflash_diag.sources.pyspy_find import find_pyspy

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H200 = FIXTURES / "h200" / "pyspy_dump_json_nonblocking.json"


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


def test_root_refused_by_the_kernel_is_not_told_to_run_as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """`doctor 1` as root in a container: the kernel refuses even root (PID 1 holds capabilities we lack). The old
    line said to run as root; it now says the process is protected and that its name is no Python's."""
    from dflash_diag.sources import attach

    sleeper = subprocess.Popen(["sleep", "30"])
    real_readlink = os.readlink

    def refused(path: str) -> str:
        if path == f"/proc/{sleeper.pid}/exe":
            raise PermissionError(13, "Permission denied")
        return real_readlink(path)

    try:
        monkeypatch.setattr(attach.os, "geteuid", lambda: 0)
        monkeypatch.setattr(attach, "has_cap_sys_ptrace", lambda: True)
        monkeypatch.setattr(attach.os, "readlink", refused)
        err = attach.attach_error(sleeper.pid, "Error: Failed to get process executable name.\n"
                                               "Permission denied (os error 13)")
    finally:
        sleeper.kill()
        sleeper.wait()
    text = str(err)
    assert err.exit_code == ExitCode.PERMISSION
    assert "even by root with CAP_SYS_PTRACE" in text and "sudo" not in text and "as root /" not in text
    assert "sleep does not look like a Python program" in text


@pytest.mark.slow  # a real doctor run
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_doctor_1_as_root_says_what_is_wrong() -> None:
    """The real PID 1 of this machine: whatever it is (not Python here, or protected from root itself), advice to
    run as root (which we are) is never the answer."""
    binary = find_pyspy()
    assert binary is not None
    if subprocess.run([binary, "dump", "--pid", "1"], capture_output=True, timeout=60).returncode == 0:
        pytest.skip("PID 1 is a Python process py-spy can read here")
    out = subprocess.run([sys.executable, "-m", "dflash_diag", "doctor", "1", "--duration", "0.5"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != ExitCode.OK and out.stderr.count("\n") == 1, out.stderr
    assert "sudo dflash-diag" not in out.stderr and "as root / with CAP_SYS_PTRACE" not in out.stderr
