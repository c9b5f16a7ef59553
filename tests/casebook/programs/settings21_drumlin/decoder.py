"""Lidar tile decoder worker: turns the survey vendor's packed tiles into terrain patches.

At start-up it builds the vendor format's dequantisation tables; then it decodes tiles
(packed int16 heights + intensity), derives slope, curvature and roughness, cuts each
tile into patches and writes them to stdout as frames:
    <III n channels side> float32[n, channels, side, side] int32[n]

    python decoder.py --patches 32 --side 32
"""
import argparse
import os
import struct
import sys
import threading
import time

import numpy as np

BLOCKS = 12288


def watch_parent(ppid):
    while True:
        if os.getppid() != ppid:
            os._exit(0)
        time.sleep(0.5)


def build_tables(rng):
    """Dequantisation tables of the vendor format: one scale/offset pair per (block, code)."""
    codes = {}
    for block in range(BLOCKS):
        base = rng.standard_normal(64)
        for code in range(64):
            codes[(block, code)] = (float(abs(base[code]) + 0.1), float(base[(code * 7) % 64]))
    scale = np.array([codes[(b, c)][0] for b in range(BLOCKS) for c in range(64)], np.float32).reshape(BLOCKS, 64)
    offset = np.array([codes[(b, c)][1] for b in range(BLOCKS) for c in range(64)], np.float32).reshape(BLOCKS, 64)
    return scale, offset


def packed_tile(rng, size):
    """A synthetic vendor tile: packed heights, per-row block/code headers, intensity."""
    x = np.linspace(0, 4 * np.pi, size, dtype=np.float32)
    hills = np.sin(x[:, None] * rng.uniform(0.3, 1.5)) * np.cos(x[None, :] * rng.uniform(0.3, 1.5))
    heights = (hills * 8000 + rng.normal(0, 300, (size, size))).astype(np.int16)
    blocks = rng.integers(0, BLOCKS, size)
    code = rng.integers(0, 64, size)
    intensity = rng.integers(0, 4096, (size, size)).astype(np.uint16)
    return heights, blocks, code, intensity


def decode(tile, scale, offset, patches, side):
    heights, blocks, code, intensity = tile
    h = heights.astype(np.float32) * scale[blocks, code][:, None] / 8000.0 + offset[blocks, code][:, None]
    gy, gx = np.gradient(h)
    slope = np.hypot(gx, gy)
    curv = np.gradient(gx, axis=1) + np.gradient(gy, axis=0)
    rough = np.abs(h - (np.roll(h, 1, 0) + np.roll(h, -1, 0) + np.roll(h, 1, 1) + np.roll(h, -1, 1)) / 4)
    inten = intensity.astype(np.float32) / 4096.0
    stack = np.stack([h, slope, curv, rough, inten])
    size = h.shape[0]
    per_row = size // side
    out = np.empty((patches, 5, side, side), np.float32)
    labels = np.empty(patches, np.int32)
    for i in range(patches):
        r, c = divmod(i % (per_row * per_row), per_row)
        p = stack[:, r * side:(r + 1) * side, c * side:(c + 1) * side]
        # despike: clip each channel to 6 median absolute deviations around its median
        med = np.median(p, axis=(1, 2), keepdims=True)
        mad = np.median(np.abs(p - med), axis=(1, 2), keepdims=True) + 1e-6
        p = np.clip(p, med - 6 * mad, med + 6 * mad)
        out[i] = (p - p.mean(axis=(1, 2), keepdims=True)) / (p.std(axis=(1, 2), keepdims=True) + 1e-3)
        labels[i] = int(p[1].mean() > 0.9) + int(p[3].mean() > 0.35)
    return out, labels


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--patches", type=int, default=32)
    ap.add_argument("--side", type=int, default=32)
    ap.add_argument("--tile", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()
    rng = np.random.default_rng(args.seed)
    scale, offset = build_tables(np.random.default_rng(1234))
    out = sys.stdout.buffer
    try:
        while True:
            x, y = decode(packed_tile(rng, args.tile), scale, offset, args.patches, args.side)
            out.write(struct.pack("<III", x.shape[0], x.shape[1], x.shape[2]))
            out.write(x.tobytes())
            out.write(y.tobytes())
            out.flush()
    except (BrokenPipeError, OSError):
        os._exit(0)


if __name__ == "__main__":
    main()
