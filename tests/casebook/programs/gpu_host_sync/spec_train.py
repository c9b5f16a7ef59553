"""Speculative-decoding drafter training on one GPU: an 'oracle' thread makes hidden states, the drafter learns.
The loss is accumulated chunk by chunk as Python floats for exact logging, and each step is timed precisely."""
import argparse
import queue
import threading
import time

import torch
from torch import nn


def oracle(q, device, width):
    net = nn.Sequential(*[nn.Linear(width, width) for _ in range(4)]).to(device).eval()
    with torch.no_grad():
        while True:
            q.put(net(torch.randn(16, 512, width, device=device)))


def drafter(q, device, width, chunks=32):
    head = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Linear(width, width)).to(device)
    opt = torch.optim.AdamW(head.parameters(), lr=1e-4)
    step = 0
    while True:
        h = q.get()
        t0 = time.perf_counter()
        running = 0.0
        for piece in h.chunk(chunks, dim=1):
            loss = (head(piece) - piece).pow(2).mean() / chunks
            loss.backward()
            running += loss.item()  # exact per-chunk accounting
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()  # precise step time
        step += 1
        if step % 20 == 0:
            print(f"step {step} loss {running:.4f} {1000 * (time.perf_counter() - t0):.1f} ms", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--width", type=int, default=1024)
    a = ap.parse_args()
    q = queue.Queue(maxsize=4)
    threading.Thread(target=oracle, args=(q, a.device, a.width), name="oracle", daemon=True).start()
    t = threading.Thread(target=drafter, args=(q, a.device, a.width), name="drafter")
    t.start()
    t.join()
