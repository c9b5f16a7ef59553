"""Train two copies of a small classifier from one stream of batches.

One thread makes batches and puts them on `q`; two worker threads take them off and train. worker-1 also mines
hard examples after every step, one row at a time in Python; worker-0 does not.
"""
import queue
import sys
import threading
import time

import torch
from torch import nn

FEATURES = 128
BATCH = 64
q: queue.Queue = queue.Queue(maxsize=8)
done = [0, 0]


def make_batches() -> None:
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(FEATURES, generator=gen)
    while True:
        x = torch.randn(BATCH, FEATURES, generator=gen)
        y = (x @ w > 0).long()
        q.put((x, y))


def hard_examples_python(x: torch.Tensor, y: torch.Tensor, logits: torch.Tensor) -> list[int]:
    """Rows whose margin is small for their spread, the readable way: one row, one feature at a time."""
    hard = []
    rows = x.tolist()
    scores = logits.tolist()
    labels = y.tolist()
    for i, row in enumerate(rows):
        mean = 0.0
        for value in row:
            mean += value / FEATURES
        spread = 0.0
        for value in row:
            spread += (value - mean) * (value - mean)
        outliers = 0
        for value in row:
            if abs(value - mean) * abs(value - mean) > 4.0 * spread / FEATURES:
                outliers += 1
        margin = scores[i][labels[i]] - scores[i][1 - labels[i]]
        if margin < (spread / FEATURES) ** 0.5 or outliers > FEATURES // 20:
            hard.append(i)
    return hard


def worker(index: int, mine_hard: bool) -> None:
    model = nn.Sequential(nn.Linear(FEATURES, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    kept = 0
    while True:
        x, y = q.get()
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if mine_hard:
            kept += len(hard_examples_python(x, y, logits.detach()))
        done[index] += 1
        if done[index] % 50 == 0:
            sys.stdout.write(f"worker-{index} steps={done[index]} hard={kept}\n")
            sys.stdout.flush()


def main() -> None:
    torch.set_num_threads(1)  # the threads share the cores; no intra-op pool per thread
    threading.Thread(target=make_batches, name="producer", daemon=True).start()
    workers = [threading.Thread(target=worker, args=(i, i == 1), name=f"worker-{i}", daemon=True) for i in range(2)]
    for t in workers:
        t.start()
    while True:
        time.sleep(1.0)


if __name__ == "__main__":
    main()
