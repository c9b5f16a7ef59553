"""Swarm early warning for an apiary: will this hive swarm within three days? Trained on the live export of the
hive loggers (scales, in-hive temperature/humidity/CO2 boards, an acoustic band-energy sensor).

    hive logger     a child process (launcher.start_logger: subprocess.Popen of hivelog.py) simulates the hives
                    and prints one CSV line per hive and reading to its stdout
    export reader   a thread in the trainer that reads the lines off the pipe, parses them and keeps the last
                    `length` readings of every hive; every `ticks_per_batch` readings it queues a batch of windows
    main thread     trains a small temporal convolution network on the windows

The logger's process settings and the window sizes come from a TOML station config, --config.

usage: python train.py [--config configs/station_gateway.toml] [--steps N]

The gateway config starts the logger with PYTHONUNBUFFERED=1 (live_output = true), so its stdout is a raw,
unbuffered stream and print(*fields, sep=",") makes one write(2) per field and per separator; public reports of
the cost of unbuffered output: aws/amazon-sagemaker-examples#319, amoffat/sh#116, python/cpython#74589.
"""
import argparse
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import launcher

HERE = os.path.dirname(os.path.abspath(__file__))
FEATURES = 14
# rough scale of each column (brood, outside, rh, weight, co2, fanning, bands) for the input normalisation
CENTER = np.array([35.0, 14.0, 55.0, 40.0, 1700.0, 0.4] + [0.8] * 8, dtype=np.float32)
SCALE = np.array([0.6, 6.0, 12.0, 8.0, 700.0, 0.3] + [0.8] * 8, dtype=np.float32)


def cli():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=os.path.join(HERE, "configs", "station_gateway.toml"))
    ap.add_argument("--steps", type=int, default=2 ** 62)
    ap.add_argument("--lr", type=float, default=1e-3)
    return ap.parse_args()


class ExportReader(threading.Thread):
    def __init__(self, stream, hives, length, ticks_per_batch, out, stop):
        super().__init__(name="export-reader", daemon=True)
        self.stream, self.out, self.stop = stream, out, stop
        self.hives, self.length = hives, length
        self.rows_per_batch = hives * ticks_per_batch
        self.window = np.zeros((hives, length, FEATURES), dtype=np.float32)
        self.label = np.zeros(hives, dtype=np.float32)
        self.rows = 0
        self.error = None

    def run(self):
        try:
            header = self.stream.readline().decode().strip().split(",")
            if header[0] != "hive" or len(header) != FEATURES + 3:
                raise ValueError(f"unexpected export header {header!r}")
            while not self.stop.is_set():
                lines = [self.stream.readline() for _ in range(self.rows_per_batch)]
                if not lines[-1]:
                    break
                # rows come hive by hive within a reading: (ticks, hives, columns)
                fields = np.array([ln.rstrip().split(b",") for ln in lines]).reshape(-1, self.hives, FEATURES + 3)
                order = np.argsort(fields[0, :, 0].astype(np.int64))
                ticks = len(fields)
                self.window = np.concatenate(
                    [self.window[:, ticks:], fields[:, order, 2:-1].astype(np.float32).transpose(1, 0, 2)], 1)
                self.label = fields[-1, order, -1].astype(np.float32)
                self.rows += len(lines)
                if self.rows >= self.hives * self.length:
                    x = torch.from_numpy((self.window - CENTER) / SCALE).transpose(1, 2).contiguous()
                    if not self.put((x, torch.from_numpy(self.label))):
                        return
            raise EOFError("the hive logger closed its output")
        except Exception as exc:        # noqa: BLE001 - reported by the main thread
            self.error = exc

    def put(self, item):
        while not self.stop.is_set():
            try:
                self.out.put(item, timeout=0.25)
                return True
            except queue.Full:
                pass
        return False


class SwarmTCN(nn.Module):
    def __init__(self, width=48):
        super().__init__()
        self.inp = nn.Conv1d(FEATURES, width, 3, padding=1)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv1d(width, width, 3, padding=d, dilation=d), nn.GELU(),
                          nn.Conv1d(width, width, 1), nn.GroupNorm(8, width))
            for d in (1, 2, 4, 8))
        self.head = nn.Sequential(nn.Linear(2 * width, 64), nn.GELU(), nn.Linear(64, 1))

    def forward(self, x):
        h = F.gelu(self.inp(x))
        for blk in self.blocks:
            h = h + blk(h)
        return self.head(torch.cat([h.mean(2), h.amax(2)], 1)).squeeze(1)


class Interrupted(BaseException):
    pass


def main():
    args = cli()
    if not os.path.isabs(args.config) and not os.path.exists(args.config):
        args.config = os.path.join(HERE, args.config)        # relative to the program's folder
    cfg = launcher.load_config(args.config)
    torch.set_num_threads(1)
    torch.manual_seed(0)

    def on_signal(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Interrupted()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    scratch = logger = None
    stop = threading.Event()
    try:
        scratch = tempfile.mkdtemp(prefix="apiary-")
        logger = launcher.start_logger(cfg, seed=3, cwd=scratch)
        batches = queue.Queue(maxsize=4)
        reader = ExportReader(logger.stdout, cfg["logger"]["hives"], cfg["windows"]["length"],
                              cfg["windows"]["ticks_per_batch"], batches, stop)
        reader.start()
        print(f"hive logger pid {logger.pid}, {cfg['logger']['hives']} hives, live output "
              f"{cfg['logger'].get('live_output', False)}", flush=True)

        model = SwarmTCN()
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
        pos_weight = torch.tensor(3.0)
        step, tick, tick_step = 0, time.monotonic(), 0
        while step < args.steps:
            try:
                x, y = batches.get(timeout=2.0)
            except queue.Empty:
                if reader.error is not None or logger.poll() is not None:
                    raise RuntimeError(f"hive export stopped: {reader.error!r}, logger exit {logger.poll()}")
                continue
            loss = F.binary_cross_entropy_with_logits(model(x), y, pos_weight=pos_weight)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 10 == 0:
                now = time.monotonic()
                print(f"step {step} loss {loss.item():.4f} rate {(step - tick_step) / (now - tick):.1f}/s "
                      f"rows {reader.rows}", flush=True)
                tick, tick_step = now, step
    except Interrupted:
        print("interrupted, stopping the hive logger", flush=True)
    finally:
        stop.set()
        if logger is not None:
            if logger.poll() is None:
                logger.terminate()
            try:
                logger.wait(timeout=5)
            except subprocess.TimeoutExpired:
                logger.kill()
                logger.wait()
            logger.stdout.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
