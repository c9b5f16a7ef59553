"""doctor's second look into native code, on a real program: a producer thread doing decimal arithmetic at 600
digits (decimal.DefaultContext.prec, so every thread's context) limits a queue's consumer. Its stacks end at the
Python line (`total += ...`): from outside, the window names no cause, so doctor records native stacks with py-spy
for a moment more and says where the time goes below that line; under `run`, the decimal precision the settings
probe read is weighed by that time and becomes the cause. The recording leaves no file and no py-spy behind, and
the saved observation carries it: the replay is the same report."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dflash_diag.analysis.findings.fastpath import SLOW_PATH_NOTE_SHARE

pytestmark = pytest.mark.slow
CLI = [sys.executable, "-m", "dflash_diag"]
DECIMAL_CODE = re.compile(r"_decimal|mpdec")

PROGRAM = r"""
import decimal, queue, sys, threading

decimal.DefaultContext.prec = int(sys.argv[1])  # every thread started after this copies it
q = queue.Queue(maxsize=8)


def featurize():
    one = decimal.Decimal(1)
    while True:
        total = decimal.Decimal(0)
        for i in range(1, 40):
            total += (one / decimal.Decimal(i)).sqrt() * decimal.Decimal(i + 7) / decimal.Decimal(3)
        q.put(float(total))


threading.Thread(target=featurize, name="featurizer", daemon=True).start()
print("READY", flush=True)
while True:
    q.get()
"""


def _start(tmp_path: Path, *, under_run: bool, prec: int = 600) -> subprocess.Popen[str]:
    script = tmp_path / "featurize.py"
    script.write_text(PROGRAM)
    cmd = [sys.executable, str(script), str(prec)]
    if under_run:
        cmd = [*CLI, "run", "--", *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=_env(tmp_path))
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.strip() == "READY" or not line:
            break
    time.sleep(1.0)
    return proc


def _env(tmp_path: Path) -> dict[str, str]:
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(scratch), "DFLASH_DIAG_BOARD_DIR": str(tmp_path / "boards")}


def _program_pid(proc: subprocess.Popen[str], under_run: bool) -> int:
    if not under_run:
        return proc.pid
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    return int(children[0]) if children else proc.pid


def _doctor(tmp_path: Path, pid: int, *extra: str) -> tuple[dict[str, Any], float]:
    t0 = time.monotonic()
    out = subprocess.run([*CLI, "doctor", str(pid), "--json", *extra], capture_output=True, text=True, timeout=120,
                         env=_env(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout), time.monotonic() - t0


def _py_spy_children() -> list[str]:
    out = subprocess.run(["pgrep", "-af", "py-spy record"], capture_output=True, text=True)
    return [ln for ln in out.stdout.splitlines() if "--native" in ln]


def test_from_outside_the_time_below_the_python_line_is_named_and_replayed(tmp_path: Path) -> None:
    proc = _start(tmp_path, under_run=False)
    saved = tmp_path / "obs.json"
    try:
        report, took_s = _doctor(tmp_path, proc.pid, "--save-observation", str(saved))
        quiet, quiet_s = _doctor(tmp_path, proc.pid, "--no-native-stacks")
        recorders = [ln for ln in _py_spy_children() if f"--pid {proc.pid} " in ln]
    finally:
        proc.kill()
        proc.wait()
    head = report["headline"]
    assert head["rule_id"] == "pipeline-bottleneck-target" and "no cause found" in head["text"], head
    look = report["native_stacks"]  # what the look took, said with the report
    assert look["error"] is None and look["samples"] >= 10 and 2.5 <= look["seconds"] < 5.0, look
    assert f"then {look['samples']} native stack samples in" in report["title"]
    assert "native_stacks" not in quiet
    native = head["text"].split("in native code: ", 1)
    assert len(native) == 2 and DECIMAL_CODE.search(native[1]), head["text"]
    assert took_s < 10.0, took_s  # the 5 s window, the analysis and the 2.5 s look
    # without the look: the same verdict, no native code, and sooner
    assert quiet["headline"]["rule_id"] == head["rule_id"] and "in native code" not in quiet["headline"]["text"]
    assert quiet_s < took_s
    # py-spy was stopped and its files removed: nothing of the recording is left
    assert recorders == [] and list((tmp_path / "tmp").iterdir()) == []
    replay = subprocess.run([*CLI, "doctor", "--replay", str(saved), "--json"], capture_output=True, text=True,
                            timeout=120)
    assert replay.returncode == 0, replay.stderr[-2000:]
    assert json.loads(replay.stdout)["headline"] == head


def test_under_run_the_decimal_precision_is_the_cause_weighed_by_that_time(tmp_path: Path) -> None:
    proc = _start(tmp_path, under_run=True)
    try:
        report, _ = _doctor(tmp_path, _program_pid(proc, under_run=True))
    finally:
        proc.terminate()
        proc.wait(30)
    found = {f["rule_id"]: f for f in report["findings"]}
    head = report["headline"]
    assert "cpu-kernels-slowed" in head["because"], head
    cause = found["cpu-kernels-slowed"]
    assert cause["severity"] == "warning" and "precision is 600 digits" in cause["claim"], cause
    share = re.search(r"about (\d+)% of its samples in decimal arithmetic", cause["claim"])
    assert share is not None and int(share.group(1)) >= 50, cause["claim"]


CONV = r"""
import sys, torch
torch.set_num_threads(1)
torch.backends.mkldnn.enabled = sys.argv[1] == "on"  # off: every convolution runs torch's own slow_conv2d
net = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 16, 3, padding=1))
opt = torch.optim.SGD(net.parameters(), lr=0.01)
print("READY", flush=True)
while True:
    x = torch.randn(8, 8, 32, 32)
    loss = net(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("onednn", ["off", "on"])
def test_from_outside_a_convolutions_slow_path_is_said_and_its_fast_path_is_not(tmp_path: Path, onednn: str) -> None:
    """oneDNN off: the convolutions' time in torch's slow_conv2d is said, as information (torch takes that path
    itself for small inputs and float64, so the path alone is no fault; the flag, read by the probes, makes it a
    cause). On: nothing."""
    script = tmp_path / "conv.py"
    script.write_text(CONV)
    proc = subprocess.Popen([sys.executable, str(script), onednn], stdout=subprocess.PIPE, text=True,
                            env=_env(tmp_path))
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        time.sleep(2.0)
        report, _ = _doctor(tmp_path, proc.pid)
    finally:
        proc.kill()
        proc.wait()
    found = {f["rule_id"]: f for f in report["findings"]}
    context = (report.get("native_stacks"), [(f["rule_id"], f["severity"]) for f in report["findings"]],
               report["headline"]["text"][:300])
    assert all(f["severity"] == "info" for f in report["findings"]), context
    if onednn == "on":  # the healthy twin: oneDNN's kernels, no slow path
        assert "native-slow-path" not in found, context
        return
    assert "native-slow-path" in found, context
    slow = found["native-slow-path"]
    share = re.search(r"spends (\d+)% of its time there", slow["claim"])
    # The share said is the rule's reading, at least its floor for a note; how far above depends on the box's load.
    assert "slow_conv2d" in slow["claim"] and share is not None, slow["claim"]
    assert int(share.group(1)) >= 100 * SLOW_PATH_NOTE_SHARE, slow["claim"]


GIL_PROGRAM = r"""
import hashlib, threading

def hog():  # pure Python: holds the GIL but for the interpreter's switch interval
    n = 0
    while True:
        for i in range(1000):
            n = (n * 31 + i) % 1000003

def hasher():  # releases the GIL for every digest, then must take it back from the hog
    block = b"x" * 65536
    while True:
        hashlib.sha256(block).digest()

threading.Thread(target=hog, name="hog", daemon=True).start()
threading.Thread(target=hasher, name="hasher", daemon=True).start()
print("READY", flush=True)
threading.Event().wait()
"""


def test_the_recorder_sees_a_thread_waiting_for_the_gil_which_the_python_stacks_show_as_its_call(
        tmp_path: Path) -> None:
    """py-spy record --native --idle, live: the hashing thread sleeps for the GIL after each digest (py-spy would
    drop those samples as idle without --idle); the pure-Python thread that holds it hardly ever waits."""
    from dflash_diag.analysis.native import gil_waits, thread_stacks
    from dflash_diag.sources.native_profile import NativeRecorder

    script = tmp_path / "gil.py"
    script.write_text(GIL_PROGRAM)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=_env(tmp_path))
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        time.sleep(0.5)
        recorder = NativeRecorder(proc.pid, max_s=2.5)
        recorder.start()
        time.sleep(2.5)
        profile = recorder.stop()
    finally:
        proc.kill()
        proc.wait()
    assert profile.error is None and profile.samples >= 10
    tids = {s.thread_name: s.os_thread_id for s in profile.stacks}
    hasher = gil_waits(thread_stacks(profile, {tids["hasher"]}))
    hog = gil_waits(thread_stacks(profile, {tids["hog"]}))
    assert hasher.samples >= 10 and hasher.share >= 0.3, hasher
    assert hog.share < hasher.share / 2, (hog, hasher)
    # where it waits: the hashing call taking the GIL back (CPython's _hashopenssl.c, py_evp_fromname in 3.11)
    assert any(re.search(r"(?i)evp|sha256|hash", name) for name, _ in hasher.at), hasher.at


SOLVER = r"""
import os

ROUNDS = int(os.environ.get("SOLVER_ROUNDS", "50"))


def solve(n):
    total = 0
    for _ in range(ROUNDS):
        for i in range(n):
            total = (total * 31 + i) % 1000003
    return total
"""

SOLVER_PROGRAM = r"""
import os, sys
os.environ["SOLVER_ROUNDS"] = "400"  # set by the program itself, before the package is imported
sys.path.insert(0, sys.argv[1])
import solver
import torch

w = torch.zeros(4, requires_grad=True)
print("READY", flush=True)
while True:  # a training step whose input the package computes
    loss = (w * float(solver.solve(2000))).sum()
    loss.backward()
"""


def test_a_setting_from_the_environment_that_the_busy_package_reads_is_said_beside_its_code(tmp_path: Path) -> None:
    """A program spends its time in an installed package whose module reads a variable the program set itself:
    doctor, from outside, says the module reads it, with its value (only the program's memory has it)."""
    site = tmp_path / "lib" / "site-packages"
    (site / "solver").mkdir(parents=True)
    (site / "solver" / "__init__.py").write_text(SOLVER)
    script = tmp_path / "main.py"
    script.write_text(SOLVER_PROGRAM)
    proc = subprocess.Popen([sys.executable, str(script), str(site)], stdout=subprocess.PIPE, text=True,
                            env=_env(tmp_path))
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        report, _ = _doctor(tmp_path, proc.pid, "--duration", "2")
        quick, _ = _doctor(tmp_path, proc.pid, "--duration", "2", "--no-native-stacks")
    finally:
        proc.kill()
        proc.wait()
    for r in (report, quick):  # read from outside with no stop of the process: with the native look or without it
        assert r["headline"]["rule_id"] == "where-time-goes"
        said = r["headline"]["text"]
        assert "solver/__init__.py there reads SOLVER_ROUNDS=400 from the environment" in said, said[:3000]
    assert "native_stacks" in report and "native_stacks" not in quick


TZ_PROGRAM = r"""
import os, queue, subprocess, sys, threading
# The decoder child turns time stamps into epoch seconds with time.mktime; its environment has TZ or not.
CHILD = '''
import sys, time
stamp = (2026, 3, 1, 12, 0, 0, 0, 0, -1)
out = sys.stdout.buffer
while True:
    total = 0.0
    for _ in range(2000):
        total += time.mktime(stamp)
    out.write(b"%d\\n" % int(total))
    out.flush()
'''
env = {k: v for k, v in os.environ.items() if k != "TZ"}
if sys.argv[1] == "set":
    env["TZ"] = ":/etc/localtime"  # the same zone, read once
child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, env=env)
q = queue.Queue(maxsize=4)


def reader():
    while True:
        q.put(child.stdout.readline())


threading.Thread(target=reader, name="batch-reader", daemon=True).start()
print("READY", flush=True)
while True:
    q.get()
    sum(i * i for i in range(2000))
"""


@pytest.mark.parametrize("tz", ["unset", "set"])
def test_a_busy_childs_system_calls_are_named_from_its_native_stacks(tmp_path: Path, tz: str) -> None:
    """The trainer waits on a pipe from a child that calls time.mktime in a loop. TZ unset: the child's CPU goes
    largely to the kernel, a native look at it finds tzset's stat of /etc/localtime under every call and says TZ
    is unset. TZ set (the same zone): the child computes in user space, gets no look, and nothing of the kind is
    said."""
    script = tmp_path / "decode.py"
    script.write_text(TZ_PROGRAM)
    proc = subprocess.Popen([sys.executable, str(script), tz], stdout=subprocess.PIPE, text=True, env=_env(tmp_path))
    saved = tmp_path / "obs.json.gz"
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        time.sleep(1.0)
        report, _ = _doctor(tmp_path, proc.pid, "--save-observation", str(saved))
    finally:
        proc.kill()
        proc.wait()
    for leftover in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split() \
            if Path(f"/proc/{proc.pid}").exists() else []:
        os.kill(int(leftover), 9)
    from dflash_diag.snapshot.bundle import load_observation

    obs = load_observation(str(saved))
    head = report["headline"]["text"]
    context = (head[:600], [(f["rule_id"], f["severity"]) for f in report["findings"]])
    if tz == "set":  # the child computes in user space: no look at it, and nothing of TZ is said
        assert obs.peer_native == () and "TZ is not set" not in str(report["findings"]), context  # type: ignore
        assert "on a pipe from process" in head and "(its child)" in head, context  # the child runs, and is waited on
        return
    assert [p.profile.samples > 0 for p in obs.peer_native] == [True], context  # type: ignore[union-attr]
    assert "> tzset > " in head and "TZ is not set in its environment" in head, context
    assert report["headline"]["because"][0] == "process-wait", context


OWN_TZ_PROGRAM = r"""
import queue, threading, time
q = queue.Queue(maxsize=4)


def stamps():  # turns local time stamps into epoch seconds, as a feature decoder does
    stamp = (2026, 3, 1, 12, 0, 0, 0, 0, -1)
    while True:
        q.put(sum(time.mktime(stamp) for _ in range(2000)))


threading.Thread(target=stamps, name="stamp-decoder", daemon=True).start()
print("READY", flush=True)
while True:
    q.get()
    sum(i * i for i in range(2000))
"""


def test_a_thread_of_its_own_in_the_c_librarys_system_calls_is_named_with_the_mechanism(tmp_path: Path) -> None:
    """The process's own producer thread calls time.mktime with TZ unset: its CPU goes largely to the kernel, the
    window names the kernel time with no cost it can weigh (information), so doctor takes its native look, which
    says the C library chain (tzset's stat) and, from the process's environment, that TZ is unset."""
    script = tmp_path / "stamps.py"
    script.write_text(OWN_TZ_PROGRAM)
    env = {k: v for k, v in _env(tmp_path).items() if k != "TZ"}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    saved = tmp_path / "obs.json.gz"
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        time.sleep(1.0)
        report, _ = _doctor(tmp_path, proc.pid, "--save-observation", str(saved))
    finally:
        proc.kill()
        proc.wait()
    from dflash_diag.snapshot.bundle import load_observation

    obs = load_observation(str(saved))
    context = (report["headline"]["text"][:800], [(f["rule_id"], f["severity"]) for f in report["findings"]])
    assert obs.native is not None and obs.native_env == (), context  # type: ignore[union-attr]
    said = " ".join(f["claim"] for f in report["findings"])
    assert re.search(r"in the C library: timelocal > tzset > \w*stat\w* \d+%", said), context
    assert "TZ is not set in its environment" in said, context
