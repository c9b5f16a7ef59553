"""A small threaded torch pipeline for the end-to-end ``top --batch`` tests: target-* threads put tensors into a
bounded queue, drafter-* threads take them and compute. Light on CPU (two shared cores): small matmuls, one intra-op
thread. Prints "ready" once every thread runs; runs until killed or ``--seconds`` pass.
"""

from __future__ import annotations

import argparse
import queue
import sys
import threading
import time

import torch

torch.set_num_threads(1)


def target(q_hs: queue.Queue[torch.Tensor], stop: threading.Event) -> None:
    weight = torch.randn(192, 192)
    while not stop.is_set():
        hidden = torch.randn(64, 192)
        for _ in range(4):
            hidden = torch.tanh(hidden @ weight)
        try:
            q_hs.put(hidden, timeout=0.5)
        except queue.Full:
            continue


def drafter(q_hs: queue.Queue[torch.Tensor], stop: threading.Event) -> None:
    weight = torch.randn(192, 192, requires_grad=True)
    while not stop.is_set():
        try:
            hidden = q_hs.get(timeout=0.5)
        except queue.Empty:
            continue
        loss = (hidden @ weight).square().mean()
        loss.backward()
        weight.grad = None
        loss.item()  # a host sync, as a real trainer's logging does
        time.sleep(0.002)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=120.0)
    args = parser.parse_args()
    q_hs: queue.Queue[torch.Tensor] = queue.Queue(maxsize=4)
    stop = threading.Event()
    threads = [
        threading.Thread(target=target, args=(q_hs, stop), name="target-0", daemon=True),
        threading.Thread(target=drafter, args=(q_hs, stop), name="drafter-0", daemon=True),
    ]
    for t in threads:
        t.start()
    print("ready", flush=True)
    stop.wait(args.seconds)
    stop.set()
    for t in threads:
        t.join()


if __name__ == "__main__":
    sys.exit(main())
