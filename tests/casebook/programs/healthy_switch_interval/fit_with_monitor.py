#!/usr/bin/env python
# Regression fit with a monitor thread that summarises recent losses now and then. The switch interval is pinned
# to CPython's default in case a plugin changed it (some progress libraries used to).
import statistics
import sys
import threading
import time

import torch

sys.setswitchinterval(0.005)

losses = []


def monitor():
    while True:
        time.sleep(0.2)
        recent = losses[-2000:]
        if recent:
            q = statistics.quantiles(recent, n=20) if len(recent) > 20 else recent
            monitor.summary = (min(recent), max(recent), q[len(q) // 2])


if __name__ == "__main__":
    torch.set_num_threads(1)
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.SiLU()) for _ in range(6)])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    threading.Thread(target=monitor, name="monitor", daemon=True).start()
    n, start = 0, time.time()
    while True:
        x = torch.randn(32, 64)
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        del losses[:-5000]
        n += 1
        if n % 100 == 0:
            print(f"fit n={n} {n / (time.time() - start):.0f}/s", flush=True)
