"""Seismic event classifier (noise / local / regional / teleseismic) + epicentral distance regression.

    decoder child process (synthesises / decodes 3-component waveform records, a block at a time)
        --(stdout pipe, fixed-size records)--> trainer (main thread: reads one batch of records per step, 1-D CNN)

usage: python train.py [--pipe-kib 4|1024] [--batch 32] [--steps N]
"""
import argparse
import signal
import time

import launcher
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from waveforms import N_CHANNELS, N_CLASSES, N_SAMPLES, RECORD_BYTES


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pipe-kib", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10_000_000)
    ap.add_argument("--lr", type=float, default=1e-3)
    return ap.parse_args()


class EventNet(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        layers, c = [], N_CHANNELS
        for k, w in enumerate((width, width, 2 * width, 2 * width)):
            layers += [nn.Conv1d(c, w, 7, stride=4 if k == 0 else 2, padding=3), nn.BatchNorm1d(w), nn.ReLU()]
            c = w
        self.body = nn.Sequential(*layers)
        self.cls = nn.Linear(2 * c, N_CLASSES)
        self.dist = nn.Linear(2 * c, 1)

    def forward(self, x):
        h = self.body(x)
        h = torch.cat([h.mean(-1), h.amax(-1)], 1)
        return self.cls(h), self.dist(h).squeeze(1)


RECORD = np.dtype([("seq", "<u4"), ("cls", "<u4"), ("logd", "<f4"), ("wave", "<f4", (N_CHANNELS, N_SAMPLES))])
assert RECORD.itemsize == RECORD_BYTES


def read_batch(stream, buf):
    """Fill buf with the next batch of records from the decoder -> (waveforms, classes, log10 distances)."""
    view = memoryview(buf)
    got = 0
    while got < len(buf):
        n = stream.readinto(view[got:])
        if not n:
            raise EOFError("decoder exited")
        got += n
    recs = np.frombuffer(buf, RECORD)
    return (torch.from_numpy(recs["wave"].copy()), torch.from_numpy(recs["cls"].astype(np.int64)),
            torch.from_numpy(recs["logd"].copy()))


def main():
    args = parse_args()
    torch.set_num_threads(1)      # one core for the trainer, the other for the decoder
    torch.manual_seed(0)

    def on_signal(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    proc = launcher.spawn_decoder(args.pipe_kib, seed=1)
    buf = bytearray(RECORD_BYTES * args.batch)
    model = EventNet()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, foreach=True)
    step, t0, s0 = 0, time.perf_counter(), 0
    try:
        while step < args.steps:
            x, cls, logd = read_batch(proc.stdout, buf)
            x = x / (x.abs().amax(-1, keepdim=True).amax(1, keepdim=True) + 1e-6)
            logits, dist = model(x)
            has_event = (cls > 0).float()
            loss = F.cross_entropy(logits, cls) + (has_event * (dist - logd) ** 2).sum() / has_event.sum().clamp(min=1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 10 == 0:
                now = time.perf_counter()
                print(f"step {step} loss {loss.item():.4f} steps/s={(step - s0) / (now - t0):.1f}", flush=True)
                t0, s0 = now, step
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=2)
        except Exception:
            proc.kill()
        proc.stdout.close()


if __name__ == "__main__":
    main()
