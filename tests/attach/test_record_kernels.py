"""`dflash-diag record --kernels` on real processes through the ptrace injector: a small threaded torch program
(its main thread parked in join, two training threads) and a plain Python program without torch.

The recording gives a valid trace with the training threads' ops on their tracks; afterwards the program's own
profiler starts and a second recording works, and the hook inventory is what it was. Refusals are one line with
their own exit code: no torch (15), the program's own profiler running (16, and that profiler is left to finish).
The command killed (SIGKILL) or ended by SIGTERM: the profiler stops in the process all the same.
The tiny reference trainer's recording is in tests/export/test_record_e2e.py.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from attach_helpers import CLI, ROOT, cli, env_for, wait_for

from dflash_diag.errors import ExitCode
from dflash_diag.inject.orchestrate import inject
from probes.attach import hooks_left

sys.path.insert(0, str(ROOT / "tests" / "export"))
from trace_format import strict_json, validate_trace  # the Trace Event Format's rules

pytestmark = pytest.mark.slow

# Two training threads (a layer, SGD); the main thread parks in join. Control files in argv[1]: `own` makes a
# thread run the program's own torch.profiler for 0.3 s (result in `own.result`), `hold` makes it hold one open
# until `release` appears (result in `hold.result`); `profiling` says every 50 ms whether a profiler runs.
PROGRAM = r"""
import os, sys, threading, time
import torch
ctl = sys.argv[1]
def train(name):
    model = torch.nn.Linear(32, 32)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 32)
    while True:
        model(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        time.sleep(0.01)
def own_profiler():
    while True:
        for kind in ("own", "hold"):
            if os.path.exists(os.path.join(ctl, kind)):
                os.unlink(os.path.join(ctl, kind))
                try:
                    with torch.profiler.profile() as prof:
                        deadline = time.time() + 0.3
                        while time.time() < deadline or (kind == "hold" and not os.path.exists(os.path.join(ctl, "release"))):
                            torch.mm(torch.randn(8, 8), torch.randn(8, 8))
                            time.sleep(0.01)
                    result = f"ok {len(prof.events())}"
                except Exception as exc:
                    result = f"error {exc!r}"
                # Written whole, then renamed: the test reads the file as soon as it exists.
                with open(os.path.join(ctl, kind + ".result.tmp"), "w") as fh:
                    fh.write(result)
                os.replace(os.path.join(ctl, kind + ".result.tmp"), os.path.join(ctl, kind + ".result"))
        with open(os.path.join(ctl, "profiling.tmp"), "w") as fh:
            fh.write(str(torch.autograd.profiler._is_profiler_enabled))
        os.replace(os.path.join(ctl, "profiling.tmp"), os.path.join(ctl, "profiling"))
        time.sleep(0.05)
threads = [threading.Thread(target=train, args=(f"trainer-{i}",), name=f"trainer-{i}", daemon=True) for i in range(2)]
threads.append(threading.Thread(target=own_profiler, name="profiler-switch", daemon=True))
for t in threads:
    t.start()
print("ready", os.getpid(), flush=True)
threads[0].join()
"""


class Program:
    def __init__(self, proc: subprocess.Popen[str], ctl: Path, board_dir: Path, env: dict[str, str]) -> None:
        self.proc, self.pid, self.ctl, self.board_dir, self.env = proc, proc.pid, ctl, board_dir, env

    def own_profiler(self, kind: str = "own", timeout_s: float = 60.0) -> str:
        result = self.ctl / f"{kind}.result"
        result.unlink(missing_ok=True)
        (self.ctl / kind).write_text("")
        wait_for(result.exists, timeout_s, f"the program's own profiler ({kind})")
        return result.read_text()

    def inventory(self) -> dict[str, Any]:
        out = inject(self.pid, "inventory", board_dir=self.board_dir, method="ptrace", timeout_s=60)
        assert out.result["ok"], out.result
        return out.result["inventory"]

    def profiling(self) -> bool:
        """Whether a torch profiler runs in the program, as the program says (no injection races the command's)."""
        try:
            return (self.ctl / "profiling").read_text() == "True"
        except OSError:
            return False

    def record(self, out: Path, *extra: str, timeout_s: float = 180.0) -> subprocess.CompletedProcess[str]:
        return cli("record", "--kernels", str(self.pid), "--method", "ptrace", "--board-dir", str(self.board_dir),
                   "-o", str(out), "--json", *extra, env=self.env, timeout_s=timeout_s)

    def leftovers(self) -> list[str]:
        return sorted(p.name for p in self.board_dir.iterdir() if ".trace.json" in p.name or ".kernels" in p.name
                      or p.name.endswith(".stop"))


@pytest.fixture(scope="module")
def program(ptrace_ok: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Program]:
    work = tmp_path_factory.mktemp("kernels")
    board_dir, ctl = work / "boards", work / "ctl"
    board_dir.mkdir(mode=0o700)
    ctl.mkdir()
    script = work / "program.py"
    script.write_text(PROGRAM)
    env = env_for(board_dir)
    proc = subprocess.Popen([sys.executable, str(script), str(ctl)], stdout=subprocess.PIPE, text=True, cwd=work,
                            env={k: v for k, v in env.items() if k != "PYTHONPATH"})
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
        time.sleep(2.0)  # its first steps import what torch imports lazily (the optimizer's dynamo checks)
        yield Program(proc, ctl, board_dir, env)
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _no_profiler_left(program: Program, before: dict[str, Any]) -> None:
    after = program.inventory()
    # A logger that appears (None -> ...) is one a torch module registered when it was first imported (the
    # profiler's export imports torch.profiler._cupti_monitor): a new module's logger, not a hook anybody set.
    left = [h for h in hooks_left(before, after) if not (h.startswith("loggers.") and ": None -> " in h)]
    assert left == []  # the wrapper and the step hook out, no thread of ours, no profiler
    assert after["torch"]["autograd.profiler._is_profiler_enabled"] is False


def test_a_recording_then_the_programs_profiler_and_a_second_recording(program: Program, tmp_path: Path) -> None:
    before = program.inventory()
    done = program.record(tmp_path / "k.json", "--steps", "3")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["reason"] == "steps" and summary["steps"] >= 3 and summary["host_spans"] > 0
    assert summary["gpu_spans"] == 0 and summary["cuda"] is False  # this box has no GPU: CPU ops only
    doc = strict_json((tmp_path / "k.json").read_bytes())
    assert validate_trace(doc) == []
    names = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    for thread in ("trainer-0", "trainer-1"):
        tid = next(t for t, n in names.items() if n == thread)
        ops = [e for e in doc["traceEvents"] if e.get("tid") == tid and e.get("cat") == "cpu_op"]
        assert {"aten::linear", "aten::mm"} & {e["name"] for e in ops}  # its own ops on its own track
        assert any(n == f"{thread} · sampled" for n in names.values())  # with our sampled states beside it
    assert [e for e in doc["traceEvents"] if e.get("cat") == "state"]
    assert [e for e in doc["traceEvents"] if e.get("cat") == "step"]
    assert program.leftovers() == []
    _no_profiler_left(program, before)
    assert program.own_profiler().startswith("ok")  # the program's own profiler starts as before
    again = program.record(tmp_path / "k2.json", "--duration", "1")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["reason"] == "duration"
    # doctor weighs the trace: its summary in the JSON, the trace's note among the findings
    doctor = cli("doctor", str(program.pid), "--duration", "1", "--json", "--kernels-trace", str(tmp_path / "k.json"),
                 "--board-dir", str(program.board_dir), env=program.env)
    assert doctor.returncode == 0, doctor.stderr
    report = json.loads(doctor.stdout)
    assert report["kernels"]["host_spans"] == summary["host_spans"] and report["kernels"]["devices"] == []
    assert any(f["rule_id"] == "kernel-trace" for f in report["findings"])


def test_refusals_are_one_line_with_their_own_code(program: Program, tmp_path: Path,
                                                   start_plain: Callable[..., Any]) -> None:
    (program.ctl / "release").unlink(missing_ok=True)
    result = program.ctl / "hold.result"
    result.unlink(missing_ok=True)
    (program.ctl / "hold").write_text("")  # the program holds a profiler of its own open
    wait_for(lambda: not (program.ctl / "hold").exists(), 30, "the program's profiler to start")
    time.sleep(0.3)
    busy = program.record(tmp_path / "busy.json")
    (program.ctl / "release").write_text("")
    wait_for(result.exists, 60, "the program's own profiler to finish")
    assert busy.returncode == ExitCode.PROFILER_BUSY, busy.stderr
    assert busy.stderr.count("\n") == 1 and "a torch profiler is running in this process" in busy.stderr
    assert result.read_text().startswith("ok")  # left alone, it recorded and finished
    assert not (tmp_path / "busy.json").exists()

    plain = start_plain()  # a threaded Python program that never imported torch
    no_torch = cli("record", "--kernels", str(plain.pid), "--method", "ptrace", "--board-dir",
                   str(program.board_dir), "-o", str(tmp_path / "none.json"), env=program.env)
    assert no_torch.returncode == ExitCode.NO_TORCH, no_torch.stderr
    assert "has not imported torch" in no_torch.stderr and "Traceback" not in no_torch.stderr
    assert "torch" not in json.dumps(inject(plain.pid, "inventory", board_dir=program.board_dir,
                                            method="ptrace", timeout_s=60).result["inventory"]["torch"])


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "term"])
def test_the_command_ended_by_a_signal_leaves_no_profiler(program: Program, tmp_path: Path, sig: int) -> None:
    before = program.inventory()
    out = tmp_path / "never.json"
    cmd = [*CLI, "record", "--kernels", str(program.pid), "--method", "ptrace", "--board-dir", str(program.board_dir),
           "--duration", "30", "-o", str(out)]
    rec = subprocess.Popen(cmd, env=program.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: rec.poll() is not None or program.profiling(), 120, "the profiler to run in the program")
        assert rec.poll() is None, rec.communicate()[1]
        rec.send_signal(sig)
        _, err = rec.communicate(timeout=60)
    finally:
        if rec.poll() is None:
            rec.kill()
            rec.wait()
    if sig == signal.SIGTERM:
        assert rec.returncode == 128 + signal.SIGTERM, err
        assert "the profiler in PID" in err and "was stopped and its recording dropped" in err
    time.sleep(1.5)  # SIGKILL: the process sees its lease's end at its next half-second check
    _no_profiler_left(program, before)
    wait_for(lambda: program.leftovers() == [], 10, "the recording's files to be gone")
    assert not out.exists()
    assert program.own_profiler().startswith("ok")


def test_doctor_takes_a_kernel_window_only_when_asked_and_leaves_no_profiler(program: Program) -> None:
    """`doctor --kernel-window`: the profiler records for doctor's own window, its trace is weighed, the recording's
    cost is reported, and afterwards nothing of it is left in the process. Without the flag, no profiler starts."""
    before = program.inventory()
    done = cli("doctor", str(program.pid), "--kernel-window", "--duration", "2", "--attach-method", "ptrace",
               "--board-dir", str(program.board_dir), "--json", env=program.env, timeout_s=180)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["kernels"] is not None  # the trace's summary (CPU ops only on this box: no GPU spans)
    window = report["kernel_window"]
    assert window["cuda"] is False and window["stop_ms"] is not None and window["torch_trace_bytes"] > 0
    assert report["stack_samples"] > 0
    _no_profiler_left(program, before)
    assert program.leftovers() == []
    plain = cli("doctor", str(program.pid), "--duration", "1", "--board-dir", str(program.board_dir), "--json",
                env=program.env, timeout_s=120)
    assert plain.returncode == 0 and json.loads(plain.stdout)["kernels"] is None and not program.profiling()
    refused = cli("doctor", str(program.pid), "--kernel-window", "--kernels-trace", "x.json", env=program.env,
                  timeout_s=60)
    assert refused.returncode == ExitCode.USAGE and "drop --kernels-trace" in refused.stderr
