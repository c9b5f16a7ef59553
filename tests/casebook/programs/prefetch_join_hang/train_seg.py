#!/usr/bin/env python
# Reproduces the mechanism of pytorch/pytorch#21554 ("the main process hangs when it tries to join the pin memory
# thread indefinitely, while the pin memory thread is still [blocked on] the queue"): shutting down a helper
# thread by joining it while it is blocked on a queue that nobody will service again.
"""Semantic-segmentation toy: a background-generator prefetches batches; each epoch is capped at max_steps."""
import argparse
import queue
import threading
import time

import torch
import torch.nn as nn


class BackgroundGenerator:
    """Runs a generator in a thread, `depth` items ahead of the consumer."""

    def __init__(self, gen, depth=4):
        self._q = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._gen = gen
        self._t = threading.Thread(target=self._produce, name="bg-generator", daemon=True)
        self._t.start()

    def _produce(self):
        for item in self._gen:
            if self._stop.is_set():
                return
            self._q.put(item)
        self._q.put(None)

    def __iter__(self):
        while (item := self._q.get()) is not None:
            yield item

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()  # wait for the producer to notice and exit
        return False


def tiles(seed, n, size):
    g = torch.Generator().manual_seed(seed)
    for _ in range(n):
        img = torch.rand(8, 3, size, size, generator=g)
        yield img, (img.mean(1) > 0.5).long()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiles-per-epoch", type=int, default=400)
    ap.add_argument("--max-steps", type=int, default=60)
    ap.add_argument("--size", type=int, default=32)
    args = ap.parse_args()
    torch.set_num_threads(1)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 2, 1))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for epoch in range(1, 100):
        t0 = time.time()
        with BackgroundGenerator(tiles(epoch, args.tiles_per_epoch, args.size)) as batches:
            for step, (img, mask) in enumerate(batches, 1):
                loss = nn.functional.cross_entropy(net(img), mask)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if step == args.max_steps:
                    print(f"epoch {epoch}: {step} steps in {time.time() - t0:.1f}s, loss {loss.item():.3f}; "
                          "max steps reached, next epoch", flush=True)
                    break


if __name__ == "__main__":
    main()
