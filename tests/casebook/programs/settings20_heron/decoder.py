"""Session decoder worker: turns raw clickstream sessions into fixed-size features.

Sessions are padded into a (sessions, max_events, event_dim) tensor (the layout the live
tap's ring uses), pooled under their masks and written to stdout as frames:
    <II n n_feat> float32[n, n_feat] int32[n]

    python decoder.py --parent PID --memlock current --batch 64 --max-events 5120 --dim 32
"""
import argparse
import os
import struct
import sys
import threading
import time

import numpy as np

import memlock


def watch_parent(ppid):
    while True:
        if os.getppid() != ppid:
            os._exit(0)
        time.sleep(0.5)


def session_batch(rng, n, max_events, dim):
    lengths = rng.integers(40, 280, size=n)
    labels = rng.integers(0, 4, size=n).astype(np.int32)
    padded = np.zeros((n, max_events, dim), dtype=np.float32)
    for i in range(n):
        L = lengths[i]
        ev = rng.standard_normal((L, dim), dtype=np.float32)
        ev[:, labels[i]] += 0.8
        padded[i, :L] = ev
    mask = np.arange(max_events)[None, :] < lengths[:, None]
    return padded, mask, lengths, labels


def features(padded, mask, lengths):
    n = padded.shape[0]
    m = max(int(lengths.max()), 1)
    x = padded[:, :m]
    mk = mask[:, :m, None]
    s = (x * mk).sum(1)
    mean = s / lengths[:, None]
    mx = np.where(mk, x, -np.inf).max(1)
    sq = ((x - mean[:, None]) ** 2 * mk).sum(1) / lengths[:, None]
    return np.concatenate([mean, mx, np.sqrt(sq)], axis=1).astype(np.float32).reshape(n, -1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--memlock", default="none")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--max-events", type=int, default=5120)
    ap.add_argument("--dim", type=int, default=32)
    args = ap.parse_args()
    threading.Thread(target=watch_parent, args=(args.parent,), daemon=True).start()
    memlock.lock(args.memlock)
    rng = np.random.default_rng(1)
    out = sys.stdout.buffer
    while True:
        padded, mask, lengths, labels = session_batch(rng, args.batch, args.max_events, args.dim)
        f = features(padded, mask, lengths)
        del padded
        try:
            out.write(struct.pack("<II", f.shape[0], f.shape[1]))
            out.write(f.tobytes())
            out.write(labels.tobytes())
            out.flush()
        except (BrokenPipeError, OSError):
            return


if __name__ == "__main__":
    main()
