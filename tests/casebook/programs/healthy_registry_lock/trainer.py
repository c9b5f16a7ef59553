#!/usr/bin/env python3
# Trainer + archive packer sharing a run registry. The packer holds the registry lock only while it copies the
# registry (a few ms), and compresses outside the lock.
import fcntl
import os
import subprocess
import sys
import time

import torch

HERE = os.path.abspath("run_registry")


def append(line):
    with open(os.path.join(HERE, "LOCK"), "a+") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        with open(os.path.join(HERE, "log.tsv"), "a") as f:
            f.write(line)
        fcntl.flock(lk, fcntl.LOCK_UN)


if __name__ == "__main__":
    os.makedirs(HERE, exist_ok=True)
    packer = subprocess.Popen([sys.executable, "packer.py", HERE])
    torch.set_num_threads(1)
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    sgd = torch.optim.SGD(net.parameters(), lr=1e-2)
    i, t = 0, time.time()
    try:
        while True:
            x = torch.randn(64, 32)
            loss = (net(x).squeeze(1) - x.sum(1)).pow(2).mean()
            sgd.zero_grad()
            loss.backward()
            sgd.step()
            i += 1
            append(f"{i}\t{loss.item():.4f}\n")
            if i % 20 == 0:
                print(f"trainer: {i} steps ({i / (time.time() - t):.1f}/s)", flush=True)
    finally:
        packer.terminate()
