#!/usr/bin/env python3
"""Elastic training replica: sampler threads prepare batches, one learner thread steps the model and takes a
step lease from the lease service before committing each update."""
import logging
import queue
import subprocess
import sys
import threading

import torch
from torch import nn

logging.basicConfig(level=logging.INFO, format="%(asctime)s [%(threadName)s] %(message)s", stream=sys.stdout)
LOG = logging.getLogger("elastic")


class LeaseClient:
    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "lease_server.py"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)

    def acquire(self, step):
        self.proc.stdin.write(f"step {step}\n")
        self.proc.stdin.flush()
        return self._await_release(step)

    def _await_release(self, step):
        reply = self.proc.stdout.readline()
        if reply.split() != ["ok", str(step)]:
            raise RuntimeError(f"bad lease reply {reply!r}")
        return True


class Sampler(threading.Thread):
    def __init__(self, rank, out):
        super().__init__(name=f"sampler-{rank}", daemon=True)
        self.gen = torch.Generator().manual_seed(rank)
        self.out = out

    def run(self):
        while True:
            tokens = torch.randint(0, 1000, (16, 32), generator=self.gen)
            self.out.put(tokens)


class Learner(threading.Thread):
    def __init__(self, batches, lease):
        super().__init__(name="learner", daemon=True)
        self.batches, self.lease = batches, lease
        self.model = nn.Sequential(nn.Embedding(1000, 64), nn.Flatten(), nn.Linear(64 * 32, 1000))
        self.opt = torch.optim.Adam(self.model.parameters(), lr=3e-4)

    def run(self):
        step = 0
        while True:
            tokens = self.batches.get()
            loss = nn.functional.cross_entropy(self.model(tokens), tokens[:, -1])
            self.opt.zero_grad()
            loss.backward()
            step += 1
            self.lease.acquire(step)
            self.opt.step()
            if step % 10 == 0:
                LOG.info("lease %d granted, loss %.3f", step, loss.item())


def main():
    torch.set_num_threads(1)
    lease = LeaseClient()
    batches = queue.Queue(maxsize=6)
    for r in range(3):
        Sampler(r, batches).start()
    learner = Learner(batches, lease)
    learner.start()
    learner.join()


if __name__ == "__main__":
    main()
