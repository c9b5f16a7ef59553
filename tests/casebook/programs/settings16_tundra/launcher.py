"""Side processes of a training run.

[evaluator] detach = true  starts the evaluator in a session of its own (setsid), so a
Ctrl-C or hang-up on the trainer's terminal does not cut an evaluation round short.
[evaluator] nice = N       the evaluator lowers its own priority by N at start-up.
The lease keeper is always detached: it must outlive a crashed trainer by a few seconds.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

LEASE_KEEPER = r"""
import ctypes, os, signal, sys, time
ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)
if os.getppid() != int(sys.argv[1]):
    os._exit(0)
path = sys.argv[2]
while True:
    with open(path, "w") as f:
        f.write(str(time.time()))
    time.sleep(1.0)
"""


def start_lease_keeper(lease_path):
    return subprocess.Popen([sys.executable, "-c", LEASE_KEEPER, str(os.getpid()), lease_path],
                            stdin=subprocess.DEVNULL, start_new_session=True)


def start_sampler(archive, batch, oversample, seed):
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "sampler_worker.py"), "--parent", str(os.getpid()),
         "--archive", archive, "--batch", str(batch), "--oversample", str(oversample),
         "--seed", str(seed)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)


def start_evaluator(cfg, snapshots, report):
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "evaluator.py"), "--parent", str(os.getpid()),
         "--snapshots", snapshots, "--report", report, "--nice", str(cfg["nice"])],
        stdin=subprocess.DEVNULL, start_new_session=cfg["detach"])


def stop(proc):
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
