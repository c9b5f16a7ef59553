#!/usr/bin/env python3
"""Day-ahead load forecasting for smart meters (CPU).

A gateway process (meterfeed.serve) streams windows of half-hourly meter
readings over TCP; a loader thread pulls them through FeedClient, builds
(history, target) tensors and queues them; the training thread fits a small
MLP forecaster with Adam.  Progress: `step N loss X steps/s=Y` every ~50 steps.

Run:   python train.py
       python train.py --recv-buffer 4194304
"""
import argparse
import multiprocessing as mp
import queue
import signal
import sys
import threading
import time

import torch
import torch.nn as nn

from meterfeed import FeedClient, serve

BATCH, WINDOW, HORIZON = 256, 336, 48


class Forecaster(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(WINDOW, 256), nn.GELU(), nn.Linear(256, 256), nn.GELU(),
                                 nn.Linear(256, HORIZON))

    def forward(self, x):
        return self.net(x)


def loader(client, q, stop):
    while not stop.is_set():
        try:
            block = torch.from_numpy(client.next_block())
        except (ConnectionError, OSError):
            if stop.is_set():
                return
            raise
        hist, target = block[:, :WINDOW], block[:, WINDOW:]
        scale = hist.mean(1, keepdim=True).clamp_min(1e-3)
        item = (hist / scale, target / scale)
        while not stop.is_set():
            try:
                q.put(item, timeout=0.5)
                break
            except queue.Full:
                pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recv-buffer", type=int, default=None, help="override the feed's SO_RCVBUF (bytes)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()
    gw = ctx.Process(target=serve, args=(child, BATCH, WINDOW, HORIZON), daemon=True, name="gateway")
    gw.start()
    port = parent.recv()
    opts = {} if args.recv_buffer is None else {"recv_buffer": args.recv_buffer}
    client = FeedClient(port, BATCH, WINDOW + HORIZON, opts)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: (stop.set(), sys.exit(0)))
    q = queue.Queue(maxsize=8)
    threading.Thread(target=loader, args=(client, q, stop), name="feed-loader", daemon=True).start()

    model = Forecaster()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    step, t_last, s_last = 0, time.time(), 0
    try:
        while True:
            x, y = q.get()
            loss = nn.functional.smooth_l1_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 50 == 0:
                now = time.time()
                print(f"step {step} loss {loss.item():.4f} steps/s={(step - s_last) / (now - t_last):.2f}", flush=True)
                t_last, s_last = now, step
    finally:
        stop.set()
        gw.terminate()


if __name__ == "__main__":
    main()
