"""Workers that read the uploaded access logs.

  validate: one pass over the archive at start-up (line format, session sizes), then exit
  parse:    featurize random client sessions forever and stream float32 batches on stdout
"""
import argparse
import ctypes
import os
import signal
import struct
import sys

import numpy as np

import accesslog
import hardening


def validate(lines, per_session):
    if len(lines) % per_session:
        raise SystemExit(f"archive has {len(lines)} lines, not a multiple of {per_session}")
    bad = sum(1 for line in lines if line.count('"') != 6)
    if bad:
        raise SystemExit(f"{bad} malformed lines")
    print(len(lines) // per_session, flush=True)


def parse(lines, per_session, batch, seed):
    rng = np.random.default_rng(seed)
    feat = accesslog.SessionFeaturizer()
    sessions = len(lines) // per_session
    out = sys.stdout.buffer
    while True:
        xs = np.empty((batch, accesslog.FEATURES), dtype=np.float32)
        ys = np.empty(batch, dtype=np.int64)
        for i in range(batch):
            s = int(rng.integers(0, sessions)) * per_session
            xs[i], ys[i] = feat.session(lines[s:s + per_session])
        try:
            out.write(struct.pack("<II", batch, accesslog.FEATURES))
            out.write(xs.tobytes())
            out.write(ys.tobytes())
            out.flush()
        except OSError:
            os._exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("validate", "parse"))
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--archive", required=True)
    ap.add_argument("--hardening", required=True)
    ap.add_argument("--per-session", type=int, required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != args.parent:
        os._exit(0)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    hardening.apply(args.hardening)

    with open(args.archive) as f:
        lines = f.read().splitlines()
    if args.mode == "validate":
        validate(lines, args.per_session)
    else:
        parse(lines, args.per_session, args.batch, args.seed)


if __name__ == "__main__":
    main()
