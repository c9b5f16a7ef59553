#!/usr/bin/env python
# distill.py -- online distillation with an encode thread and a fit thread.
# A "telemetry" thread keeps running percentiles of every loss for the dashboard.
import math
import queue
import threading
import time

import torch
import torch.nn as nn

pipe = queue.Queue(maxsize=8)
loss_log = []
lock = threading.Lock()


def encode(seed):
    torch.manual_seed(seed)
    enc = nn.Sequential(*[nn.Linear(64, 64) for _ in range(6)])
    with torch.no_grad():
        while True:
            x = torch.randn(16, 64)
            for layer in enc:
                x = torch.tanh(layer(x))
            pipe.put(x)


def fit():
    net = nn.Sequential(*[nn.Linear(64, 64) for _ in range(4)])
    opt = torch.optim.Adam(net.parameters(), 1e-3)
    n = 0
    t0 = time.time()
    while True:
        h = pipe.get()
        loss = (net(h) - h).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with lock:
            loss_log.append(float(loss))
        n += 1
        if n % 20 == 0:
            print(f"[fit] {n} steps, {n / (time.time() - t0):.0f} steps/s", flush=True)


def telemetry():
    # recompute the dashboard numbers from the full history, as fast as possible
    while True:
        with lock:
            window = list(loss_log[-20000:])
        if not window:  # nothing to show before the first step
            time.sleep(0.05)
            continue
        mean = sum(window) / len(window)
        var = sum((v - mean) ** 2 for v in window) / len(window)
        ordered = sorted(window)
        p90 = ordered[int(0.9 * (len(ordered) - 1))]
        _ = (mean, math.sqrt(var), p90)


if __name__ == "__main__":
    torch.set_num_threads(1)
    threading.Thread(target=encode, args=(0,), name="encode", daemon=True).start()
    threading.Thread(target=fit, name="fit", daemon=True).start()
    threading.Thread(target=telemetry, name="telemetry", daemon=True).start()
    while True:
        time.sleep(1)
