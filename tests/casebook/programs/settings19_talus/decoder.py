"""Waveform decoder worker (child process) for the rockfall monitoring array: replays
3-component geophone records, detects and windows events, and writes one frame per batch
on stdout: <II n_windows, n_features>, then float32 features [n, n_features] and int32
labels [n] (0 noise, 1 rockfall, 2 earthquake, 3 wind/traffic).

    python decoder.py --parent PID --channels 3 --window 2048 --batch 24
"""
import argparse
import os
import struct
import sys
import threading
import time

import numpy as np

N_BANDS = 32
CLASSES = 4


def watch_parent(ppid):
    while True:
        if os.getppid() != ppid:
            os._exit(0)
        time.sleep(0.5)


def synth_window(rng, channels, window, label):
    t = np.arange(window, dtype=np.float64) / 250.0
    x = rng.normal(0.0, 1.0, size=(channels, window))
    if label == 1:      # rockfall: emergent broadband bursts
        onset = rng.integers(200, window // 2)
        env = np.exp(-np.clip(t - t[onset], 0, None) * 3.0) * (t >= t[onset])
        x += 6.0 * env * rng.normal(0.0, 1.0, size=(channels, window))
    elif label == 2:    # earthquake: impulsive P then S, low frequency
        onset = rng.integers(200, window // 2)
        env = np.exp(-np.clip(t - t[onset], 0, None) * 1.2) * (t >= t[onset])
        x += 8.0 * env * np.sin(2 * np.pi * 4.0 * t)
    elif label == 3:    # wind/traffic: narrowband hum
        x += 2.5 * np.sin(2 * np.pi * rng.uniform(15, 40) * t)
    return x


def features(x):
    """Log band energies of each channel's spectrum, plus envelope statistics."""
    spec = np.abs(np.fft.rfft(x * np.hanning(x.shape[1]), axis=1)) ** 2
    bands = np.array_split(spec, N_BANDS, axis=1)
    energy = np.log1p(np.stack([b.sum(axis=1) for b in bands], axis=1))
    env = np.abs(x)
    kurt = ((env - env.mean(axis=1, keepdims=True)) ** 4).mean(axis=1) / (env.var(axis=1) ** 2)
    ratio = np.log1p(env.max(axis=1) / (np.median(env, axis=1) + 1e-6))
    return np.concatenate([energy.ravel(), kurt, ratio]).astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--window", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=24)
    args = ap.parse_args()
    threading.Thread(target=watch_parent, args=(args.parent,), daemon=True).start()
    rng = np.random.default_rng(5)
    out = sys.stdout.buffer
    try:
        while True:
            labels = rng.integers(0, CLASSES, size=args.batch).astype(np.int32)
            feats = np.stack([features(synth_window(rng, args.channels, args.window, int(k)))
                              for k in labels])
            out.write(struct.pack("<II", feats.shape[0], feats.shape[1]))
            out.write(feats.tobytes())
            out.write(labels.tobytes())
            out.flush()
    except BrokenPipeError:
        pass


if __name__ == "__main__":
    main()
