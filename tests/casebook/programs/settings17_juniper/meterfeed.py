"""Decoder worker: cuts random meter windows out of the export, decodes them and streams
float32 (inputs, targets) batches to the trainer on stdout."""
import argparse
import ctypes
import os
import signal
import struct
import sys

import numpy as np

import meters


def features(kw, tod, dow, window):
    x_kw = kw[:window]
    phase = 2 * np.pi * tod[window - 1] / 86400.0
    cal = np.zeros(9, dtype=np.float32)
    cal[0], cal[1] = np.sin(phase), np.cos(phase)
    cal[2 + dow[window - 1]] = 1.0
    return np.concatenate([np.log1p(x_kw), cal]), np.log1p(kw[window:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--export", required=True)
    ap.add_argument("--slots", type=int, required=True)
    ap.add_argument("--window", type=int, required=True)
    ap.add_argument("--horizon", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != args.parent:
        os._exit(0)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))

    with open(args.export) as f:
        lines = f.read().splitlines()
    n_meters = len(lines) // args.slots
    span = args.window + args.horizon
    rng = np.random.default_rng(args.seed)
    out = sys.stdout.buffer
    while True:
        xs, ys = [], []
        for _ in range(args.batch):
            m = int(rng.integers(0, n_meters))
            s = int(rng.integers(0, args.slots - span))
            base = m * args.slots + s
            kw, tod, dow = meters.decode_window(lines[base:base + span])
            x, y = features(kw, tod, dow, args.window)
            xs.append(x)
            ys.append(y)
        x = np.stack(xs).astype(np.float32)
        y = np.stack(ys).astype(np.float32)
        try:
            out.write(struct.pack("<III", len(x), x.shape[1], y.shape[1]))
            out.write(x.tobytes())
            out.write(y.tobytes())
            out.flush()
        except OSError:
            os._exit(0)


if __name__ == "__main__":
    main()
