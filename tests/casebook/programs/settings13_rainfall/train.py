"""Precipitation nowcasting: predicts the radar reflectivity 15 minutes ahead from the last four 5-minute frames.

    radar decoder   a child process (subprocess.Popen of decoder.py) loads the site's storm archive (synthesised
                    at its start-up), cuts 4+1-frame windows out of it (station clutter, noise, rotations) and
                    writes each batch to its stdout as a pickle (wire.Writer)
    wire reader     a thread in the trainer that unpickles the batches off the pipe (wire.Reader) into a queue
    main thread     trains a small convolutional nowcaster on them

The wire settings (pickle protocol, flushing) and the decoder's batch size come from a TOML file, --wire-config.

usage: python train.py [--wire-config configs/wire_archive.toml] [--steps N]

The archive layout asks for pickle protocol 0 (the ASCII-safe one); protocol 0 (and 1-2) pickle a bytes payload
as a latin-1 text string with escapes, a per-character round trip on both ends; public reports of the cost:
strictdoc-project/strictdoc#3106, mila-iqia/blocks#443, ioam/lancet#14, peter-wangxu/persist-queue#47,
dabeaz/curio#130.
"""
import argparse
import os
import pickle
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib

import torch
import torch.nn.functional as F
from torch import nn

import radar
import wire

HERE = os.path.dirname(os.path.abspath(__file__))


def cli():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wire-config", default=os.path.join(HERE, "configs", "wire_archive.toml"))
    ap.add_argument("--steps", type=int, default=2 ** 62)
    ap.add_argument("--lr", type=float, default=1e-3)
    return ap.parse_args()


class WireReader(threading.Thread):
    def __init__(self, stream, out, stop):
        super().__init__(name="wire-reader", daemon=True)
        self.reader, self.out, self.stop = wire.Reader(stream), out, stop
        self.error = None

    def run(self):
        try:
            while not self.stop.is_set():
                msg = self.reader.recv()
                x = torch.from_numpy(msg["frames"])
                y = torch.from_numpy(msg["target"])
                while not self.stop.is_set():
                    try:
                        self.out.put((x, y, msg["meta"]), timeout=0.5)
                        break
                    except queue.Full:
                        pass
        except Exception as exc:        # noqa: BLE001 - reported by the main thread
            self.error = exc


class Nowcaster(nn.Module):
    """Patchify (4 km cells), two conv layers with a skip, transposed-conv back to the 1 km grid."""

    def __init__(self, width=32):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(radar.HIST, width, 4, stride=4), nn.GELU())
        self.body = nn.Sequential(nn.Conv2d(width, 2 * width, 3, padding=1), nn.GELU(),
                                  nn.Conv2d(2 * width, width, 3, padding=1), nn.GELU())
        self.head = nn.ConvTranspose2d(2 * width, 1, 4, stride=4)

    def forward(self, x):
        h = self.stem(x)
        return self.head(torch.cat([h, self.body(h)], 1))


class Interrupted(BaseException):
    pass


def main():
    args = cli()
    if not os.path.isabs(args.wire_config) and not os.path.exists(args.wire_config):
        args.wire_config = os.path.join(HERE, args.wire_config)      # relative to the program's folder
    args.wire_config = os.path.abspath(args.wire_config)
    with open(args.wire_config, "rb") as fh:
        dec_cfg = tomllib.load(fh)["decoder"]
    torch.set_num_threads(1)
    torch.manual_seed(0)

    def on_signal(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Interrupted()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    scratch = decoder = None
    stop = threading.Event()
    try:
        scratch = tempfile.mkdtemp(prefix="nowcast-")
        # the station catalogue the evaluation job reads, written once (same protocol as the frame wire)
        with open(os.path.join(scratch, "stations.pkl"), "wb") as fh:
            pickle.dump({"stations": radar.STATIONS, "grid_km": radar.GRID}, fh,
                        protocol=wire.load_config(args.wire_config)["pickle_protocol"])
        decoder = subprocess.Popen([sys.executable, os.path.join(HERE, "decoder.py"), args.wire_config,
                                    str(dec_cfg["batch"]), str(dec_cfg["storms"])],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, cwd=scratch)
        batches = queue.Queue(maxsize=4)
        reader = WireReader(decoder.stdout, batches, stop)
        reader.start()

        model = Nowcaster()
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        step, tick, tick_step = 0, time.monotonic(), 0
        while step < args.steps:
            try:
                x, y, meta = batches.get(timeout=2.0)
            except queue.Empty:
                if reader.error is not None or decoder.poll() is not None:
                    raise RuntimeError(f"frame wire stopped: {reader.error!r}, decoder exit {decoder.poll()}")
                continue
            loss = F.mse_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 25 == 0:
                now = time.monotonic()
                print(f"step {step} loss {loss.item():.5f} rate {(step - tick_step) / (now - tick):.1f}/s",
                      flush=True)
                tick, tick_step = now, step
    except Interrupted:
        print("interrupted, stopping the radar decoder", flush=True)
    finally:
        stop.set()
        if decoder is not None:
            if decoder.poll() is None:
                decoder.terminate()
            try:
                decoder.wait(timeout=5)
            except subprocess.TimeoutExpired:
                decoder.kill()
                decoder.wait()
            decoder.stdout.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
