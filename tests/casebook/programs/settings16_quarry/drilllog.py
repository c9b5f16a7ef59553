"""Synthetic ASCII drill-core logs (LAS-like), their parser, and the window featurizer."""
import math
import os
import random

import numpy as np

CURVES = ("DEPT", "GR", "RHOB", "NPHI", "DT", "PEF", "CALI", "RES")
LITHOLOGIES = ("shale", "sandstone", "limestone", "dolomite", "coal", "anhydrite")
WINDOW = 24
N_FEATURES = 5 * (len(CURVES) - 1)


def write_wells(directory, n_wells, rows, seed):
    rng = random.Random(seed)
    paths = []
    for w in range(n_wells):
        path = os.path.join(directory, f"well_{w:03d}.las")
        depth = 1200.0 + rng.random() * 300
        lith = rng.randrange(len(LITHOLOGIES))
        with open(path, "w") as f:
            f.write("~VERSION INFORMATION\n VERS. 2.0 : CWLS LOG ASCII STANDARD\n")
            f.write("~CURVE INFORMATION\n" + "".join(f" {c}.  : curve\n" for c in CURVES))
            f.write("~ASCII " + " ".join(CURVES) + " LITH\n")
            for r in range(rows):
                if rng.random() < 0.02:
                    lith = rng.randrange(len(LITHOLOGIES))
                base = 40 + 18 * lith
                vals = (
                    depth + r * 0.1524,
                    base + rng.gauss(0, 14),
                    2.2 + 0.07 * lith + rng.gauss(0, 0.08),
                    0.30 - 0.03 * lith + rng.gauss(0, 0.05),
                    60 + 9 * lith + rng.gauss(0, 8),
                    2.0 + 0.5 * lith + rng.gauss(0, 0.6),
                    8.5 + rng.gauss(0, 0.3),
                    math.exp(rng.gauss(lith * 0.4, 0.5)),
                )
                f.write(" ".join(f"{v:.4f}" for v in vals) + f" {lith}\n")
        paths.append(path)
    return paths


def read_las(path):
    """Parse the ~ASCII section of a LAS file into (values[rows, curves-1], lith[rows])."""
    with open(path) as f:
        text = f.read()
    rows = [line.split() for line in text[text.index("~ASCII"):].splitlines()[1:]]
    values = np.array([[float(v) for v in r[1:len(CURVES)]] for r in rows], dtype=np.float64)
    lith = np.array([int(r[-1]) for r in rows], dtype=np.int64)
    return values, lith


def batch_features(windows, liths):
    """Per-curve mean, spread, range, mean absolute step and depth trend of each window.

    windows: (n, WINDOW, curves) values, liths: (n, WINDOW) lithology codes."""
    k = np.arange(WINDOW) - WINDOW / 2
    feats = np.concatenate([
        windows.mean(1), windows.std(1), windows.max(1) - windows.min(1),
        np.abs(np.diff(windows, axis=1)).mean(1),
        (k[None, :, None] * windows).sum(1) / WINDOW ** 2], axis=1)
    counts = (liths[:, :, None] == np.arange(len(LITHOLOGIES))[None, None]).sum(1)
    return feats.astype(np.float32), counts.argmax(1)


def _die_with_parent(parent):
    import ctypes
    import signal
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)


def worker_main(argv):
    """Parse worker: stream (features, labels) batches of random windows as raw bytes and
    report per-window quality-control gauges to the statsd agent ($STATSD_HOST:$STATSD_PORT)."""
    import argparse
    import signal
    import struct
    import sys

    import qc
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("wells", nargs="+")
    args = ap.parse_args(argv)
    _die_with_parent(args.parent)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    wells = [read_las(p) for p in args.wells]
    stats = qc.StatsClient(prefix="las")
    rng = random.Random(args.seed)
    out = sys.stdout.buffer
    n_curves = len(CURVES) - 1
    names = [c.lower() for c in CURVES[1:]]
    while True:
        picks = [rng.randrange(len(wells)) for _ in range(args.batch)]
        starts = [rng.randrange(len(wells[w][0]) - WINDOW) for w in picks]
        windows = np.stack([wells[w][0][s:s + WINDOW] for w, s in zip(picks, starts)])
        liths = np.stack([wells[w][1][s:s + WINDOW] for w, s in zip(picks, starts)])
        feats, labels = batch_features(windows, liths)
        # QC: spread and range gauges per curve and window, lithology and well counters.
        spreads = feats[:, n_curves:2 * n_curves].tolist()
        ranges = feats[:, 2 * n_curves:3 * n_curves].tolist()
        for w, srow, rrow, lab in zip(picks, spreads, ranges, labels.tolist()):
            for name, spread, span in zip(names, srow, rrow):
                stats.gauge(f"well{w}.{name}.spread", spread)
                stats.gauge(f"well{w}.{name}.range", span)
            stats.incr(f"lith.{LITHOLOGIES[lab]}")
            stats.incr(f"well{w}.windows")
        try:
            out.write(struct.pack("<II", args.batch, N_FEATURES))
            out.write(feats.tobytes())
            out.write(labels.astype(np.int64).tobytes())
            out.flush()
        except (BrokenPipeError, OSError):
            os._exit(0)


if __name__ == "__main__":
    import sys
    worker_main(sys.argv[1:])
