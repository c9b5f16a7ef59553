"""Continuous skill evaluator for the ground-temperature forecaster.

Reloads the newest weight snapshot the trainer publishes and scores a 30-member
perturbed-input ensemble on held-out borehole windows (CRPS, bias), forever.
Pure numpy (einsum without BLAS), one thread, niced so that it only soaks up idle CPU.
"""
import argparse
import ctypes
import json
import os
import signal
import time

import numpy as np

import boreholes


def die_with_parent(parent):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)


def forward(params, x):
    h = x
    n = len(params) // 2
    for i in range(n):
        w, b = params[f"w{i}"], params[f"b{i}"]
        h = np.einsum("bi,oi->bo", h, w, optimize=False) + b
        if i < n - 1:
            h = np.tanh(h)
    return h


def crps_ensemble(members, obs):
    m = np.sort(members, axis=0)
    k = m.shape[0]
    skill = np.abs(m - obs[None]).mean(0)
    weights = (2 * np.arange(1, k + 1) - k - 1)[:, None, None]
    spread = (weights * m).sum(0) / (k * k)
    return float((skill - spread).mean())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--snapshots", required=True)
    ap.add_argument("--report", required=True)
    ap.add_argument("--nice", type=int, default=10)
    args = ap.parse_args()
    die_with_parent(args.parent)
    os.nice(args.nice)  # background work: only what the trainer leaves over
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))

    series = boreholes.make_series(n_sites=6, days=3000, seed=99)
    x, y = boreholes.windows(series, np.random.default_rng(1), 512)
    rng = np.random.default_rng(2)
    latest, params, rounds = None, None, 0
    while True:
        path = os.path.join(args.snapshots, "latest.npz")
        if os.path.exists(path):
            stamp = os.stat(path).st_mtime_ns
            if stamp != latest:
                with np.load(path) as z:
                    params = {k: z[k].astype(np.float64) for k in z.files}
                latest = stamp
        if params is None:
            time.sleep(0.2)
            continue
        members = np.stack([forward(params, x + 0.05 * rng.standard_normal(x.shape))
                            for _ in range(30)])
        score = crps_ensemble(members, y)
        rounds += 1
        if rounds % 5 == 0:
            tmp = args.report + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"rounds": rounds, "crps": score,
                           "bias": float((members.mean(0) - y).mean())}, f)
            os.replace(tmp, args.report)


if __name__ == "__main__":
    main()
