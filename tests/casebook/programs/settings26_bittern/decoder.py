"""Spectrogram decoder child: synthesises reedbed recordings (bittern booms, rail squeals, wind) and writes
log band-energy spectrograms of each batch to stdout as binary frames."""
import argparse
import struct
import sys

import numpy as np


def band_matrix(n_fft, bands, sr):
    freqs = np.fft.rfftfreq(n_fft, 1.0 / sr)
    edges = np.geomspace(40.0, sr / 2, bands + 2)
    m = np.zeros((len(freqs), bands), np.float32)
    for b in range(bands):
        lo, mid, hi = edges[b], edges[b + 1], edges[b + 2]
        up = (freqs - lo) / (mid - lo)
        down = (hi - freqs) / (hi - mid)
        m[:, b] = np.clip(np.minimum(up, down), 0.0, None)
    return m


class CallBank:
    """Recorded backgrounds and call templates, built once at start-up; clips are mixed from them."""

    def __init__(self, rng, length, sr, types, n_background=96):
        t = np.arange(length, dtype=np.float32) / sr
        self.background = rng.normal(0.0, 0.05, size=(n_background, length)).astype(np.float32)
        f0 = np.array([0.0, 160.0, 420.0, 0.0, 2600.0], np.float32)
        env = np.exp(-((t - length / sr / 2) ** 2) / 0.08).astype(np.float32)
        calls = [0.5 * env * np.sin(2 * np.pi * f0[k % 5] * t) for k in range(types)]
        gust = np.convolve(rng.normal(0.0, 1.0, size=length), np.ones(64) / 8.0, mode="same")
        calls[3] = 0.5 * env * gust / np.abs(gust).max()          # wind gust: low-passed noise burst
        self.calls = np.stack(calls).astype(np.float32)
        self.types = types

    def mix(self, rng, n):
        y = rng.integers(0, self.types, size=n)
        x = self.background[rng.integers(0, len(self.background), size=n)]
        shift = int(rng.integers(0, x.shape[1] // 4))
        x += np.roll(self.calls, shift, axis=1)[y] * rng.uniform(0.6, 1.4, size=(n, 1)).astype(np.float32)
        return x, y


def spectrogram(x, window, bands, hop):
    n_fft = len(window)
    frames = np.lib.stride_tricks.sliding_window_view(x, n_fft, axis=1)[:, ::hop]
    spec = np.fft.rfft(frames * window, axis=-1)
    power = np.square(spec.real) + np.square(spec.imag)
    e = np.log(power @ bands + 1e-6)
    e -= e.mean(axis=(1, 2), keepdims=True)
    e /= e.std(axis=(1, 2), keepdims=True) + 1e-5
    return np.ascontiguousarray(e.transpose(0, 2, 1), dtype=np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clips", type=int, default=48)
    ap.add_argument("--sr", type=int, default=16000)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--types", type=int, default=5)
    ap.add_argument("--n-fft", type=int, default=512)
    ap.add_argument("--hop", type=int, default=256)
    ap.add_argument("--bands", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    window = np.hanning(args.n_fft).astype(np.float32)
    bands = band_matrix(args.n_fft, args.bands, args.sr)
    length = int(args.sr * args.seconds)
    bank = CallBank(rng, length, args.sr, args.types)
    out = sys.stdout.buffer
    while True:
        x, y = bank.mix(rng, args.clips)
        feats = spectrogram(x, window, bands, args.hop)
        n, b, f = feats.shape
        out.write(struct.pack("<4I", n, b, f, 0))
        out.write(feats.tobytes())
        out.write(y.astype(np.int64).tobytes())
        out.flush()


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:     # the trainer went away
        sys.exit(0)
