"""Core-scan decoder worker: reads the scan archive, calibrates each spectrum to
reflectance, removes the continuum and streams framed float32 batches on stdout.

    python decoder.py --parent PID --archive PATH --batch N
"""
import argparse
import os
import struct
import sys
import threading
import time

import numpy as np

import corescan


def watch_parent(ppid):
    while True:
        if os.getppid() != ppid:
            os._exit(0)
        time.sleep(0.5)


def open_archive(path):
    with open(path, "rb") as f:
        if f.read(len(corescan.HEADER)) != corescan.HEADER:
            raise SystemExit("not a core-scan archive")
        n_rows, n_bands = (int(v) for v in np.fromfile(f, dtype=np.uint32, count=2))
        dark = np.fromfile(f, dtype=np.float32, count=n_bands)
        white = np.fromfile(f, dtype=np.float32, count=n_bands)
        offset = f.tell()
    counts = np.memmap(path, dtype=np.uint16, mode="r", offset=offset, shape=(n_rows, n_bands))
    labels = np.memmap(path, dtype=np.uint8, mode="r", offset=offset + 2 * n_rows * n_bands,
                       shape=(n_rows,))
    return counts, labels, dark, white


def continuum_removed(refl, knots):
    """Divide each spectrum by a piecewise-linear upper hull through per-segment maxima."""
    out = np.empty_like(refl)
    n = refl.shape[1]
    edges = np.linspace(0, n, knots + 1).astype(int)
    for i, row in enumerate(refl):
        xs, ys = [0], [float(row[0])]
        for a, b in zip(edges[:-1], edges[1:]):
            j = a + int(np.argmax(row[a:b]))
            xs.append(j)
            ys.append(float(row[j]))
        xs.append(n - 1)
        ys.append(float(row[-1]))
        hull = np.interp(np.arange(n), xs, ys)
        out[i] = row / np.maximum(hull, 1e-3)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--archive", required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--knots", type=int, default=12)
    args = ap.parse_args()
    threading.Thread(target=watch_parent, args=(args.parent,), daemon=True).start()

    counts, labels, dark, white = open_archive(args.archive)
    span = white - dark
    rng = np.random.default_rng(5)
    out = sys.stdout.buffer
    while True:
        idx = np.sort(rng.choice(counts.shape[0], args.batch, replace=False))
        raw = counts[idx].astype(np.float32)
        refl = (raw - dark) / span
        x = continuum_removed(refl, args.knots).astype(np.float32)
        y = labels[idx].astype(np.int64)
        try:
            out.write(struct.pack("<III", x.shape[0], x.shape[1], 0))
            out.write(x.tobytes())
            out.write(y.tobytes())
            out.flush()
        except BrokenPipeError:
            return


if __name__ == "__main__":
    main()
