"""Window-sampler worker: cuts augmented training windows from the borehole archive and
streams them to the trainer as framed float32 batches on stdout."""
import argparse
import ctypes
import os
import signal
import struct
import sys

import numpy as np

import boreholes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--archive", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--oversample", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != args.parent:
        os._exit(0)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))

    series = np.load(args.archive, mmap_mode="r")
    series = np.ascontiguousarray(series)
    rng = np.random.default_rng(args.seed)
    out = sys.stdout.buffer
    b = args.batch
    while True:
        # Draw `oversample` candidates per slot, keep the most informative windows
        # (largest day-to-day variability), then add a site offset and sensor noise.
        x, y = boreholes.windows(series, rng, b * args.oversample)
        score = np.abs(np.diff(x.reshape(len(x), boreholes.LOOKBACK, -1), axis=1)).mean(axis=(1, 2))
        keep = np.argpartition(score, -b)[-b:]
        x, y = x[keep], y[keep]
        shift = rng.normal(0, 0.05, size=(b, 1)).astype(np.float32)
        x = (x + shift + rng.normal(0, 0.01, size=x.shape)).astype(np.float32)
        y = (y + shift).astype(np.float32)
        try:
            out.write(struct.pack("<III", b, x.shape[1], y.shape[1]))
            out.write(x.tobytes())
            out.write(y.tobytes())
            out.flush()
        except OSError:
            os._exit(0)


if __name__ == "__main__":
    main()
