"""Next-interval zone temperature forecaster for a campus building-management system.

    feed.py (child process, the BMS replay tool) --stdout pipe, wire frames--> reader thread (parses snapshots
    into tensors, bounded queue) --> main thread (trains a small residual MLP on each snapshot's zones)

usage: python train.py [--wire pretty|compact] [--zones 512] [--steps N]
"""
import argparse
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import torch
from torch import nn
from torch.nn import functional as F

import wire

HERE = os.path.dirname(os.path.abspath(__file__))
FACADES = ("N", "E", "S", "W", "core")
FAN = {"low": 0.0, "auto": 0.5, "high": 1.0}
N_IN = 12 + 12 + 5 + len(FACADES) + 2


def snapshot_to_tensors(doc):
    zones = doc["zones"]
    temps = torch.tensor([z["temp_c"] for z in zones])                       # [Z, 12]
    rh = (torch.tensor([z["rh_pct"] for z in zones]) - 45.0) / 10.0
    scal = torch.tensor([[z["setpoint_c"], z["damper_pct"], z["co2_ppm"], z["occupied"], FAN[z["fan"]["mode"]]]
                         for z in zones], dtype=torch.float32)
    facade = torch.tensor([FACADES.index(z["facade"]) for z in zones])
    target = torch.tensor([z["next_temp_c"] for z in zones]) - temps[:, -1]
    scal[:, 1] /= 100.0
    scal[:, 2] /= 1000.0
    gap = (temps[:, -1] - scal[:, 0])[:, None]
    scal[:, 0] -= 21.0
    hour = torch.full((len(zones), 1), doc["hour"] / 23.0)
    x = torch.cat([temps - 21.0, rh, scal, F.one_hot(facade, len(FACADES)).float(), hour, gap], 1)
    return x, target


class Reader(threading.Thread):
    def __init__(self, stream, out, halt):
        super().__init__(name="feed-reader", daemon=True)
        self.stream, self.out, self.halt = stream, out, halt
        self.error = None

    def run(self):
        try:
            while not self.halt.is_set():
                doc = wire.read_frame(self.stream)
                if doc is None:
                    raise EOFError("feed exited")
                item = snapshot_to_tensors(doc)
                while not self.halt.is_set():
                    try:
                        self.out.put(item, timeout=0.5)
                        break
                    except queue.Full:
                        continue
        except Exception as exc:          # surfaced by the trainer
            self.error = exc
            self.halt.set()


class ZoneNet(nn.Module):
    def __init__(self, width=128, depth=2):
        super().__init__()
        self.inp = nn.Linear(N_IN, width)
        self.blocks = nn.ModuleList(nn.Sequential(nn.LayerNorm(width), nn.Linear(width, width), nn.SiLU(),
                                                  nn.Linear(width, width)) for _ in range(depth))
        self.out = nn.Linear(width, 1)

    def forward(self, x):
        h = self.inp(x)
        for blk in self.blocks:
            h = h + blk(h)
        return self.out(h).squeeze(-1)


def start_feed(layout, zones):
    env = dict(os.environ, **{wire.ENV_VAR: layout})
    cmd = [sys.executable, os.path.join(HERE, "feed.py"), "--zones", str(zones)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env, cwd=HERE)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wire", choices=sorted(wire.LAYOUTS), default="pretty")
    ap.add_argument("--zones", type=int, default=512)
    ap.add_argument("--steps", type=int, default=10 ** 12)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(0)
    halt = threading.Event()

    def on_signal(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if halt.is_set():
            return
        halt.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    feed = reader = None
    try:
        feed = start_feed(args.wire, args.zones)
        batches = queue.Queue(maxsize=3)
        reader = Reader(feed.stdout, batches, halt)
        reader.start()

        model = ZoneNet()
        opt = torch.optim.Adam(model.parameters(), lr=args.lr, foreach=True)
        sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=500)
        step, mark_t, mark_s = 0, time.perf_counter(), 0
        while step < args.steps:
            try:
                x, y = batches.get(timeout=1.0)
            except queue.Empty:
                if halt.is_set():
                    raise RuntimeError(f"feed reader stopped: {reader.error!r}")
                continue
            pred = model(x)
            loss = F.smooth_l1_loss(pred, y, beta=0.1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            if step % 10 == 0:
                now = time.perf_counter()
                print(f"step {step} loss {loss.item():.5f} [{(step - mark_s) / (now - mark_t):.1f} snapshots/s]",
                      flush=True)
                mark_t, mark_s = now, step
    except KeyboardInterrupt:
        print("stopping", flush=True)
    finally:
        halt.set()
        if feed is not None:
            feed.terminate()
            try:
                feed.wait(timeout=3)
            except subprocess.TimeoutExpired:
                feed.kill()
                feed.wait()
        if reader is not None:
            reader.join(timeout=2)
        if feed is not None:
            feed.stdout.close()


if __name__ == "__main__":
    main()
