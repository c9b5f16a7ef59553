"""Secrets in the outputs the main leak test does not cover: a torchrun job (the launcher's command line in `doctor
--json`, `top --batch --json` and `record` of the job) and `record --kernels` (torch's annotation and thread names
in the trace, `doctor --kernels-trace` on it).

A known secret of the launcher (its own argv's ``--api-token X`` repeated bare, its environment's password in a
path) survived in the job outputs although single-process outputs scrub it; a password just past the cut of a
torch annotation's name kept its first part (names were cut, then redacted). Real processes, real commands.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "dflash_diag"]

pytestmark = pytest.mark.slow

RANK = """
import os, threading, time
def work():
    while True:
        sum(range(2000))
        time.sleep(0.01)
threading.Thread(target=work, name="worker", daemon=True).start()
print("rank", os.environ.get("RANK"), "ready", flush=True)
time.sleep(600)
"""


@pytest.fixture
def ptrace_ok() -> None:
    """`record --kernels` gets into the process with the ptrace injector (tests/attach/conftest.py says more)."""
    from dflash_diag.inject.method import ptrace_helper, ptrace_unsupported
    from dflash_diag.sources.ptrace_access import has_cap_sys_ptrace, ptrace_scope

    if ptrace_helper() is None:
        pytest.skip(ptrace_unsupported())
    if ptrace_scope() == 3 or (ptrace_scope() in (1, 2) and not has_cap_sys_ptrace()):
        pytest.skip("ptrace may not attach here (kernel.yama.ptrace_scope)")


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)


def _leaks(outputs: dict[str, str], needles: tuple[str, ...]) -> list[str]:
    return [f"{needle} in {where}" for where, text in outputs.items() for needle in needles
            if needle in text or json.dumps(needle)[1:-1] in text]


def test_a_jobs_outputs_hold_none_of_the_launchers_secrets(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    log = tmp_path / "job.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JOB_DB_PASSWORD": "jobEnvPassw0rd99",
           "DFLASH_DIAG_BOARD_DIR": str(tmp_path / "boards")}
    with log.open("w") as out:
        launcher = subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script),
             "--api-token", "jobArgToken0123456", "--mirror", "jobArgToken0123456", "--out",
             "/runs/jobEnvPassw0rd99/ckpt"], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while log.read_text().count("ready") < 2:
            assert launcher.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.3)
        pid = str(launcher.pid)
        outputs: dict[str, str] = {}
        doctor = _run(env, "doctor", pid, "--duration", "1", "--json")
        assert doctor.returncode == 0, doctor.stderr
        outputs["doctor --json (job)"] = doctor.stdout + doctor.stderr
        report = json.loads(doctor.stdout)
        assert report["job"]["launcher_pid"] == launcher.pid
        shown = " ".join(report["job"]["launcher_cmdline"])
        assert "--api-token <redacted>" in shown and "/runs/<redacted>/ckpt" in shown  # there, redacted
        top = _run(env, "top", "--pid", pid, "--batch", "--duration", "1", "--json")
        assert top.returncode == 0, top.stderr
        outputs["top --batch --json (job)"] = top.stdout + top.stderr
        trace = tmp_path / "job-trace.json"
        record = _run(env, "record", pid, "--duration", "1", "-o", str(trace), "--json")
        assert record.returncode == 0, record.stderr
        outputs["record (job)"] = record.stdout + record.stderr
        outputs["record trace file (job)"] = trace.read_text()
        snapshot = _run(env, "snapshot", pid, "--duration", "1", "--dir", "-o", str(tmp_path / "bundle"), "--json")
        assert snapshot.returncode == 0, snapshot.stderr
        for path in (tmp_path / "bundle").iterdir():
            outputs[f"bundle {path.name}"] = path.read_text(errors="replace")
    finally:
        from dflash_diag.sources.procfs import all_children

        ranks = all_children(launcher.pid)  # each in a session of its own: the group kill misses them (they slept
        os.killpg(launcher.pid, 9)          # 600 s beside a busy thread, through the rest of the suite)
        for rank in ranks:
            try:
                os.kill(rank, 9)
            except ProcessLookupError:
                pass
        launcher.wait(timeout=30)
    assert _leaks(outputs, ("jobArgToken0123456", "jobEnvPassw0rd99")) == []


KERNEL_PROGRAM = """
import os, sys, threading, time
import torch
pad = "x" * 270
def train():
    model = torch.nn.Linear(16, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 16)
    n = 0
    while True:
        with torch.autograd.profiler.record_function(pad + " postgres://u:straddleAnnotPassw0rd123@db/x"):
            model(x).pow(2).mean().backward()
        with torch.autograd.profiler.record_function("fetch " + os.environ["KERNEL_DB_PASSWORD"]):
            opt.step()
        opt.zero_grad()
        n += 1
        if n == 20:  # past the first steps, which import what torch imports lazily (seconds on a loaded box)
            print("ready", flush=True)
        time.sleep(0.005)
t = threading.Thread(target=train, name="trainer-" + os.environ["KERNEL_DB_PASSWORD"], daemon=True)
t.start()
t.join()
"""


def test_record_kernels_and_its_doctor_hold_no_secret(ptrace_ok: None, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    script = tmp_path / "kernels_program.py"
    script.write_text(KERNEL_PROGRAM)
    boards = tmp_path / "boards"
    boards.mkdir(mode=0o700)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERNEL_DB_PASSWORD": "kernelEnvPassw0rd77",
           "DFLASH_DIAG_BOARD_DIR": str(boards)}
    program = subprocess.Popen([sys.executable, str(script), "--api-token", "kernelArgToken0123"], env=env,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert program.stdout is not None and program.stdout.readline().strip() == "ready"
        out = tmp_path / "kernels.json"
        rec = _run(env, "record", "--kernels", str(program.pid), "--duration", "2", "--method", "ptrace", "-o",
                   str(out), "--json")
        assert rec.returncode == 0, rec.stderr
        doctor = _run(env, "doctor", str(program.pid), "--duration", "1", "--kernels-trace", str(out), "--json")
        assert doctor.returncode == 0, doctor.stderr
    finally:
        program.kill()
        program.wait()
    text = out.read_text()
    outputs = {"record --kernels": rec.stdout + rec.stderr, "record --kernels trace file": text,
               "doctor --kernels-trace --json": doctor.stdout + doctor.stderr}
    assert json.loads(rec.stdout)["host_spans"] > 0, rec.stdout  # the training thread's ops are in it
    assert _leaks(outputs, ("kernelEnvPassw0rd77", "kernelArgToken0123", "straddleAnnot")) == []
    names = {e.get("name") for e in json.loads(text)["traceEvents"]}
    assert any(isinstance(n, str) and n.endswith("postgres://<redacted>@db/x") for n in names)  # there, redacted
    assert "fetch <redacted>" in names
