"""Trainer that logs every step to a run registry shared with the checkpoint mirror (syncer.py).

Both processes serialise on the registry's lock file (fcntl.flock), as the cluster's old rsync-based mirror did.
"""
import fcntl
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager

import torch

RUN_DIR = os.path.join(os.getcwd(), "runs")
LOCK = os.path.join(RUN_DIR, "registry.lock")
REGISTRY = os.path.join(RUN_DIR, "registry.jsonl")


@contextmanager
def registry_locked():
    with open(LOCK, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def log_step(step, loss):
    with registry_locked():
        with open(REGISTRY, "a") as out:
            out.write(json.dumps({"step": step, "loss": loss}) + "\n")


def main():
    os.makedirs(RUN_DIR, exist_ok=True)
    mirror = subprocess.Popen([sys.executable, "syncer.py", RUN_DIR])
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    step, t0 = 0, time.time()
    try:
        while True:
            x = torch.randn(64, 32)
            loss = (model(x).squeeze(1) - x.sum(1)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            log_step(step, loss.item())
            if step % 20 == 0:
                print(f"step {step} {step / (time.time() - t0):.1f} steps/s", flush=True)
    finally:
        mirror.terminate()


if __name__ == "__main__":
    main()
