"""Stand-in for the NIR spectrometer's vendor driver.

Streams one text record per scan on stdout, flushed as soon as the scan is taken:
    SCAN <seq> <label>
    <float32 x channels, base64 in MIME lines of 76 characters>
and a status line every 65536 scans on stderr.
"""
import argparse
import base64
import ctypes
import os
import signal
import sys

import numpy as np

ADULTERANTS = ("pure", "safflower", "turmeric", "corn_silk", "beet_fibre", "dyed_stamen")


def die_with_parent(parent):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)


def make_scans(n, channels, seed):
    rng = np.random.default_rng(seed)
    grid = np.linspace(0.0, 1.0, channels, dtype=np.float32)
    centers = rng.uniform(0.1, 0.9, size=(len(ADULTERANTS), 4)).astype(np.float32)
    labels = rng.integers(0, len(ADULTERANTS), size=n)
    scans = np.empty((n, channels), dtype=np.float32)
    for i in range(n):
        c = centers[labels[i]]
        s = sum(np.exp(-((grid - m) ** 2) / 0.002) * (0.5 + 0.2 * k) for k, m in enumerate(c))
        s = s + 0.9 * rng.standard_normal(channels).astype(np.float32) + 0.3 * grid
        scans[i] = s.astype(np.float32)
    return scans, labels


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--channels", type=int, default=256)
    ap.add_argument("--pool", type=int, default=4096)
    ap.add_argument("--chunk", type=int, default=1)
    args = ap.parse_args()
    die_with_parent(args.parent)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))

    scans, labels = make_scans(args.pool, args.channels, seed=5)
    records = [b"SCAN %d %d\n" % (i, labels[i]) + base64.encodebytes(scans[i].tobytes())
               for i in range(args.pool)]
    blocks = [b"".join(records[i:i + args.chunk]) for i in range(0, args.pool, args.chunk)]
    os.write(2, b"driver ready: %d scans, %d channels\n" % (args.pool, args.channels))
    out = sys.stdout.fileno()
    sent = 0
    while True:
        for block in blocks:
            view = memoryview(block)
            try:
                while view:
                    view = view[os.write(out, view):]
            except OSError:
                os._exit(0)
            sent += args.chunk
            if sent % 65536 == 0:
                os.write(2, b"driver: %d scans streamed\n" % sent)


if __name__ == "__main__":
    main()
