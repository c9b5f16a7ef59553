"""Does `dflash-diag record --kernels` ever crash the process it records? A soak: many recordings of CPU torch programs
of several shapes, counting the processes lost.

torch 2.13's all-threads profiler (``profile_all_threads=True``, which `record --kernels` starts so that every thread's
CPU ops are recorded) read its state through a raw pointer in every thread's op callback and freed it when stopped
from another thread without waiting for the callbacks in flight: now and then a training thread's op wrote into freed
memory (SIGSEGV in ``ThreadLocalSubqueue::begin_op``). probes/kernels.py now takes the callback out and drains the
calls in flight before the stop; this bench is how that was found and how the fix is held to it.

Target programs (``--shapes``, each a fresh process every ``--per-target`` recordings; ``faulthandler`` on, so a crash
leaves every thread's Python stack in the program's stderr, kept in the report):

- ``main-spin``: an ``nn.Linear`` trained in the main thread, and one pure-Python thread spinning beside it;
- ``threads``: three training threads, the main thread parked in ``join`` (the injector nudges it);
- ``churn``: the main thread trains while another starts short-lived training threads, each a few dozen steps.

Two ways to record (``--via``):

- ``cli`` (the real thing): ``dflash-diag record --kernels PID --duration D`` run against the program, one recording
  after another; every ``--doctor-every``-th one with a ``dflash-diag doctor PID`` sampling the program at the same
  time (py-spy reading it from outside). A recording counts as ``ok`` (exit 0), ``refused`` (the command said why:
  exit 12, 15, 16) or ``failed`` (another exit: the program is alive but the command did not record); after each,
  the program must still run, else it is ``lost``;
- ``signal`` (fast, in-process): the program itself starts ``probes.kernels`` from a signal handler (which runs on
  the main thread at a bytecode boundary, where the attach bootstrap's pending call runs) every few hundred
  milliseconds, and the recording's own thread ends it as in a real recording; many more cycles a minute, no py-spy;
- ``torch`` (the race itself, on this torch): the all-threads profiler started the same way and stopped 2 ms later
  from another thread, as ``probes.kernels`` does, either plainly (``--stop plain``: what it did before) or after
  taking its callback out and draining (``--stop drained``: what it does now), while the ``threads`` shape's three
  threads train; thousands of stops an hour, where a real recording stops once.

Nothing but the programs it starts is touched; every wait is bounded, the whole run by ``--budget-s``. Run it niced
(``nice -n 19``) on a shared machine. Writes ``record_soak.json`` (and prints a summary) to ``--out``; exit 1 when a
program was lost.

  nice -n 19 .venv/bin/python bench/record_soak.py --via cli --recordings 510 --out /tmp/soak-cli
  nice -n 19 .venv/bin/python bench/record_soak.py --via signal --recordings 3000 --out /tmp/soak-signal
  .venv/bin/python bench/record_soak.py --via cli --recordings 6 --per-target 2 --out /tmp/soak-ci   # CI's short run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "dflash_diag"]
SHAPES = ("main-spin", "threads", "churn")
REFUSED_EXITS = {12, 15, 16}  # unsupported, no torch, a profiler already runs: the command said why
READY_TIMEOUT_S = 120.0  # importing torch on a loaded 2-core machine
RECORD_TIMEOUT_S = 240.0

# The program under recording. argv: shape, control directory, via, cycles, seed. It prints "ready" once every
# training thread has stepped; in the signal way it records itself `cycles` times and prints "done N" (os._exit:
# the interpreter's own shutdown beside running daemon threads is not what is measured here).
TARGET = r'''
import faulthandler, json, os, random, signal, sys, threading, time
faulthandler.enable()
import torch
torch.set_num_threads(1)
shape, ctl, via, cycles, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
rng = random.Random(seed)
stepped = {}

def train(name, steps=None):
    model = torch.nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64)
    n = 0
    while steps is None or n < steps:
        model(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        n += 1
        stepped[name] = n

def spin():
    x = 0
    while True:
        x += 1

def churn():
    i = 0
    while True:
        t = threading.Thread(target=train, args=(f"short-{i % 4}", rng.randint(10, 80)), name=f"short-{i % 4}",
                             daemon=True)
        t.start()
        t.join()
        i += 1

box = {}

def handler(signum, frame):
    """The signal way's start: on the main thread, at a bytecode boundary (where the attach bootstrap runs)."""
    from probes import kernels
    params = {"duration_s": rng.choice((0.1, 0.2, 0.4)), "steps": rng.choice((None, None, 3))}
    box["result"] = kernels.start(params, files_prefix=box["prefix"], lease=None)

def record_self():
    try:
        cycle_all()
    except BaseException as exc:
        print("driver failed:", repr(exc), file=sys.stderr, flush=True)
        os._exit(3)

def cycle_all():
    """The signal way: probes.kernels started by the handler above, ended by the recording's own thread."""
    from probes import kernels
    done = refused = failed = 0
    for i in range(cycles):
        box.clear()
        box["prefix"] = os.path.join(ctl, f".attach-{os.getpid()}.{i:016x}")
        os.kill(os.getpid(), signal.SIGUSR1)
        deadline = time.monotonic() + 30
        while "result" not in box and time.monotonic() < deadline:
            time.sleep(0.005)
        result = box.get("result") or {}
        if result.get("ok"):
            while not os.path.exists(box["prefix"] + ".kernels") and time.monotonic() < deadline + 30:
                time.sleep(0.01)
            try:
                with open(box["prefix"] + ".kernels") as fh:
                    ok = json.load(fh).get("ok")
            except (OSError, ValueError):
                ok = False
            done, failed = done + bool(ok), failed + (not ok)
        elif result.get("refused"):
            refused += 1
        else:
            failed += 1
        for suffix in (".kernels", ".trace.json"):
            try:
                os.unlink(box["prefix"] + suffix)
            except OSError:
                pass
        while kernels.recording() is not None and time.monotonic() < deadline + 60:
            time.sleep(0.01)
        with open(os.path.join(ctl, "progress.tmp"), "w") as fh:
            json.dump({"cycles": i + 1, "ok": done, "refused": refused, "failed": failed}, fh)
        os.replace(os.path.join(ctl, "progress.tmp"), os.path.join(ctl, "progress"))
        time.sleep(rng.uniform(0.0, 0.15))
    print("done", done, flush=True)
    os._exit(0)

workers = []
if shape == "main-spin":
    workers.append(threading.Thread(target=spin, name="spinner", daemon=True))
elif shape == "threads":
    workers += [threading.Thread(target=train, args=(f"trainer-{i}",), name=f"trainer-{i}", daemon=True)
                for i in range(3)]
elif shape == "churn":
    workers.append(threading.Thread(target=churn, name="spawner", daemon=True))
def ready(names):
    """Once every training thread has stepped: say so, then (the signal way) start recording."""
    while not all(stepped.get(n) for n in names):
        time.sleep(0.05)
    print("ready", flush=True)
    if via == "signal":
        threading.Thread(target=record_self, name="soak-driver", daemon=True).start()

for t in workers:
    t.start()
if via == "signal":
    signal.signal(signal.SIGUSR1, handler)
if shape in ("main-spin", "churn"):
    threading.Thread(target=ready, args=(["main"],), daemon=True).start()
    train("main")
else:
    ready([f"trainer-{i}" for i in range(3)])
    workers[0].join()
'''


_TORCH_RACE = r'''
import faulthandler, json, os, signal, sys, threading, time
faulthandler.enable()
import torch
torch.set_num_threads(1)
ctl, cycles, stop_mode, drain_s = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
A = torch._C._profiler.ProfilerActivity
box = {"prof": None}
def start(signum, frame):  # on the main thread, at a bytecode boundary: where the attach bootstrap runs
    cfg = torch.profiler._ExperimentalConfig(profile_all_threads=True, trace_only=True)
    prof = torch.autograd.profiler.profile(use_kineto=True, experimental_config=cfg)
    prof.__enter__()
    box["prof"] = prof
signal.signal(signal.SIGUSR1, start)
def train():
    model = torch.nn.Linear(64, 64); opt = torch.optim.SGD(model.parameters(), lr=0.01); x = torch.randn(32, 64)
    while True:
        model(x).pow(2).mean().backward(); opt.step(); opt.zero_grad()
for i in range(3):
    threading.Thread(target=train, name=f"trainer-{i}", daemon=True).start()
def driver():
    for i in range(cycles):
        os.kill(os.getpid(), signal.SIGUSR1)
        while box["prof"] is None:
            time.sleep(0.001)
        time.sleep(0.002)
        prof, box["prof"] = box["prof"], None
        if stop_mode == "drained":  # probes/kernels.py's _drain, then the stop
            torch._C._autograd._toggle_collection_dynamic(False, {A.CPU, A.CUDA, A.XPU})
            time.sleep(drain_s)
        prof.__exit__(None, None, None)
        with open(os.path.join(ctl, "progress.tmp"), "w") as fh:
            json.dump({"cycles": i + 1, "ok": i + 1, "refused": 0, "failed": 0}, fh)
        os.replace(os.path.join(ctl, "progress.tmp"), os.path.join(ctl, "progress"))
    print("done", flush=True)
    os._exit(0)
threading.Thread(target=driver, name="soak-driver", daemon=True).start()
print("ready", flush=True)
while True:
    time.sleep(1)
'''


@dataclass
class Target:
    """One program under recording, its stderr kept in a file (faulthandler writes a crash's stacks there)."""

    shape: str
    proc: subprocess.Popen[str]
    stderr_path: Path
    ctl: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def crash(self) -> dict[str, Any]:
        code = self.proc.returncode
        text = self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""
        lines = [ln for ln in text.splitlines() if not ln.startswith("USDT:")]
        fatal = [i for i, ln in enumerate(lines) if ln.startswith("Fatal Python error")]
        stack = lines[fatal[0]:fatal[0] + 40] if fatal else lines[-20:]
        return {"shape": self.shape, "returncode": code,
                "signal": signal.Signals(-code).name if code is not None and code < 0 else None, "stderr": stack}

    def stop(self) -> None:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@dataclass
class Tally:
    recordings: int = 0
    ok: int = 0
    refused: int = 0
    failed: int = 0
    lost: int = 0
    with_doctor: int = 0
    exits: dict[str, int] = field(default_factory=dict)
    crashes: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    command_s: list[float] = field(default_factory=list)
    in_flight: int = 0  # recordings under way (the command's workers)

    def add(self, other: Tally) -> None:
        for name in ("recordings", "ok", "refused", "failed", "lost", "with_doctor"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for k, v in other.exits.items():
            self.exits[k] = self.exits.get(k, 0) + v
        self.crashes += other.crashes
        self.failures += other.failures
        self.command_s += other.command_s

    def json(self) -> dict[str, Any]:
        times = sorted(self.command_s)
        return {"recordings": self.recordings, "ok": self.ok, "refused": self.refused, "failed": self.failed,
                "lost": self.lost, "with_doctor": self.with_doctor, "exits": self.exits, "crashes": self.crashes,
                "failures": self.failures[:20],
                "command_s_median": round(times[len(times) // 2], 2) if times else None}


def env_for(board_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DFLASH_DIAG_BOARD_DIR", "PYTHONPATH")}
    return {**env, "PYTHONPATH": str(ROOT), "DFLASH_DIAG_BOARD_DIR": str(board_dir), "WANDB_MODE": "disabled",
            "PYTHONFAULTHANDLER": "1"}


def start_target(work: Path, shape: str, via: str, cycles: int, seed: int, env: dict[str, str]) -> Target:
    script = work / "target.py"
    if not script.exists():
        script.write_text(TARGET)
    ctl = Path(tempfile.mkdtemp(prefix=f"{shape}-", dir=work))
    ctl.chmod(0o700)
    stderr_path = ctl / "stderr.log"
    with open(stderr_path, "w") as err:
        proc = subprocess.Popen([sys.executable, str(script), shape, str(ctl), via, str(cycles), str(seed)],
                                stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=work)
    target = Target(shape, proc, stderr_path, ctl)
    deadline = time.monotonic() + READY_TIMEOUT_S
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("ready"):
            return target
        if not line and not target.alive():
            break
    target.stop()
    raise RuntimeError(f"the {shape} program did not start: {target.crash()}")


def record_once(target: Target, board_dir: Path, out: Path, duration_s: float, env: dict[str, str],
                with_doctor: bool, tally: Tally) -> None:
    doctor = None
    if with_doctor:
        doctor = subprocess.Popen([*CLI, "doctor", str(target.pid), "--duration", "2", "--json"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        tally.with_doctor += 1
    t0 = time.monotonic()
    try:
        res = subprocess.run([*CLI, "record", "--kernels", str(target.pid), "--duration", f"{duration_s:g}",
                              "--board-dir", str(board_dir), "-o", str(out), "--force", "--json"],
                             env=env, capture_output=True, text=True, timeout=RECORD_TIMEOUT_S, cwd=ROOT)
        code, err = res.returncode, res.stderr
    except subprocess.TimeoutExpired:
        code, err = -1, f"record did not finish in {RECORD_TIMEOUT_S:g} s"
    tally.command_s.append(time.monotonic() - t0)
    if doctor is not None:
        try:
            doctor.wait(60)
        except subprocess.TimeoutExpired:
            doctor.kill()
            doctor.wait()
    tally.recordings += 1
    tally.exits[str(code)] = tally.exits.get(str(code), 0) + 1
    time.sleep(0.3)  # a crash at the stop's very end: let the program's death be seen
    if not target.alive():
        tally.lost += 1
        tally.crashes.append(target.crash())
    elif code == 0:
        tally.ok += 1
    elif code in REFUSED_EXITS:
        tally.refused += 1
    else:
        tally.failed += 1
        tally.failures.append(f"{target.shape} exit {code}: {err.strip()[-300:]}")


def soak_cli(args: argparse.Namespace, work: Path, tally: Tally, deadline: float) -> None:
    """``--jobs`` workers, each recording its own programs one after another (the shapes rotated per worker)."""
    board_dir = work / "boards"
    board_dir.mkdir(mode=0o700, exist_ok=True)
    env = env_for(board_dir)
    lock = threading.Lock()
    workers = [threading.Thread(target=_cli_worker, args=(args, work, tally, lock, deadline, env, board_dir, j),
                                name=f"soak-{j}") for j in range(args.jobs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def _cli_worker(args: argparse.Namespace, work: Path, tally: Tally, lock: threading.Lock, deadline: float,
                env: dict[str, str], board_dir: Path, job: int) -> None:
    rng = random.Random(args.seed + job)
    i = job
    while time.monotonic() < deadline:
        with lock:
            if tally.recordings + tally.in_flight >= args.recordings:
                return
        shape = args.shapes[i % len(args.shapes)]
        i += 1
        part = Tally()
        target = start_target(work, shape, "cli", 0, rng.randrange(1 << 30), env)
        try:
            for _ in range(args.per_target):
                with lock:
                    if tally.recordings + tally.in_flight >= args.recordings or time.monotonic() >= deadline:
                        break
                    tally.in_flight += 1
                    n = tally.recordings + tally.in_flight
                try:
                    record_once(target, board_dir, work / f"trace-{job}.json", rng.choice(args.durations), env,
                                with_doctor=args.doctor_every > 0 and n % args.doctor_every == 0, tally=part)
                finally:
                    with lock:
                        tally.in_flight -= 1
                        tally.recordings += 1
                        part.recordings -= 1  # counted in the shared tally already
                if not target.alive():
                    break
        finally:
            target.stop()
            shutil.rmtree(target.ctl, ignore_errors=True)
        with lock:
            tally.add(part)
            _progress(tally, shape)


def soak_signal(args: argparse.Namespace, work: Path, tally: Tally, deadline: float) -> None:
    env = env_for(work / "boards")
    rng = random.Random(args.seed)
    i = 0
    while tally.recordings < args.recordings and time.monotonic() < deadline:
        shape = args.shapes[i % len(args.shapes)]
        i += 1
        cycles = min(args.per_target, args.recordings - tally.recordings)
        target = start_target(work, shape, "signal", cycles, rng.randrange(1 << 30), env)
        part = Tally()
        try:
            until = min(deadline, time.monotonic() + 120 + 10 * cycles)
            while target.alive() and time.monotonic() < until:
                time.sleep(0.2)
            progress = _read_progress(target.ctl)
            part.recordings, part.ok = progress.get("cycles", 0), progress.get("ok", 0)
            part.refused, part.failed = progress.get("refused", 0), progress.get("failed", 0)
            if target.proc.poll() is not None and target.proc.returncode != 0:
                part.lost += 1
                part.recordings += 1  # the cycle it died in
                part.crashes.append(target.crash())
        finally:
            target.stop()
            shutil.rmtree(target.ctl, ignore_errors=True)
        tally.add(part)
        _progress(tally, shape)


def soak_torch(args: argparse.Namespace, work: Path, tally: Tally, deadline: float) -> None:
    """Programs that start and stop torch's all-threads profiler ``--per-target`` times each (see the docstring)."""
    from probes.kernels import DRAIN_S

    script = work / "torch_race.py"
    script.write_text(_TORCH_RACE)
    env = env_for(work / "boards")
    while tally.recordings < args.recordings and time.monotonic() < deadline:
        cycles = min(args.per_target, args.recordings - tally.recordings)
        ctl = Path(tempfile.mkdtemp(prefix="torch-", dir=work))
        stderr_path = ctl / "stderr.log"
        with open(stderr_path, "w") as err:
            proc = subprocess.Popen([sys.executable, str(script), str(ctl), str(cycles), args.stop, str(DRAIN_S)],
                                    stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=work)
        target = Target("threads", proc, stderr_path, ctl)
        part = Tally()
        try:
            until = min(deadline, time.monotonic() + 120 + 5 * cycles)
            while target.alive() and time.monotonic() < until:
                time.sleep(0.2)
            progress = _read_progress(ctl)
            part.recordings = part.ok = progress.get("cycles", 0)
            if proc.poll() is not None and proc.returncode != 0:
                part.lost += 1
                part.recordings += 1
                part.crashes.append({**target.crash(), "after_cycles": progress.get("cycles", 0)})
        finally:
            target.stop()
            shutil.rmtree(ctl, ignore_errors=True)
        tally.add(part)
        _progress(tally, f"torch ({args.stop} stop)")


def _read_progress(ctl: Path) -> dict[str, int]:
    try:
        value = json.loads((ctl / "progress").read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _progress(tally: Tally, shape: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {shape}: {tally.recordings} recordings, {tally.ok} ok, {tally.refused} "
          f"refused, {tally.failed} failed, {tally.lost} lost", flush=True)


def machine() -> dict[str, Any]:
    try:
        import torch

        torch_version = str(torch.__version__)
    except ImportError:
        torch_version = None
    try:
        model = next(ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                     if ln.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor()
    return {"host": platform.node(), "cpu": model, "cpus": os.cpu_count(), "python": platform.python_version(),
            "torch": torch_version, "kernel": platform.release(), "load_avg_at_start": os.getloadavg()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--via", choices=("cli", "signal", "torch"), default="cli")
    p.add_argument("--stop", choices=("plain", "drained"), default="drained", help="via torch: how the profiler stops")
    p.add_argument("--recordings", type=int, default=510)
    p.add_argument("--per-target", type=int, default=None,
                   help="recordings per program before a fresh one (default: 17 via cli, 250 via signal)")
    p.add_argument("--shapes", type=lambda s: s.split(","), default=list(SHAPES))
    p.add_argument("--durations", type=lambda s: [float(x) for x in s.split(",")], default=[0.5, 1.0])
    p.add_argument("--doctor-every", type=int, default=3, help="a concurrent doctor every Nth recording (0: never)")
    p.add_argument("--seed", type=int, default=31)
    p.add_argument("--jobs", type=int, default=1, help="via cli: programs recorded at once (one worker each)")
    p.add_argument("--budget-s", type=float, default=4 * 3600)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    if unknown := set(args.shapes) - set(SHAPES):
        p.error(f"unknown shapes: {sorted(unknown)}")
    args.per_target = args.per_target or {"cli": 17, "signal": 250, "torch": 1000}[args.via]
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="record-soak-") as tmp:
        work = Path(tmp)
        work.chmod(0o700)
        deadline = time.monotonic() + args.budget_s
        {"cli": soak_cli, "signal": soak_signal, "torch": soak_torch}[args.via](args, work, tally, deadline)
    report = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "date": time.strftime("%Y-%m-%d %H:%M"),
              "elapsed_s": round(time.time() - started, 1), "via": args.via, "shapes": args.shapes,
              "stop": args.stop if args.via == "torch" else None,
              "machine": machine(), **tally.json()}
    (args.out / "record_soak.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"{tally.recordings} recordings ({args.via}, {','.join(args.shapes)}) in {report['elapsed_s']:.0f} s: "
          f"{tally.ok} ok, {tally.refused} refused, {tally.failed} failed, {tally.lost} programs lost")
    for crash in tally.crashes:
        print(f"  lost: {crash['shape']} {crash['signal'] or crash['returncode']}: "
              + " | ".join(crash["stderr"][:6]))
    return 1 if tally.lost else 0


if __name__ == "__main__":
    sys.exit(main())
