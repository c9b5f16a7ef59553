"""Tide-gauge archive, time-major as the telemetry arrives: one record per station per 15 minutes.

record = <d f f f f H : unix time, water level (m), air pressure (hPa - 1000),
                        wind u, wind v (m/s), QC flags
"""
import os
import struct

import numpy as np

RECORD = struct.Struct("<dffffH")
DTYPE = np.dtype([("t", "<f8"), ("level", "<f4"), ("press", "<f4"), ("u", "<f4"), ("v", "<f4"),
                  ("flags", "<u2")])
assert DTYPE.itemsize == RECORD.size
STEP_S = 900
FLAG_SPIKE = 1
CONSTITUENTS = ((12.4206, 1.0), (12.0, 0.45), (25.8193, 0.4), (23.9345, 0.3))   # M2, S2, O1, K1 (hours, m)


def build_archive(root, n_stations=24, days=90, seed=7):
    rng = np.random.default_rng(seed)
    n = days * 86400 // STEP_S
    hours = np.arange(n) * STEP_S / 3600.0
    rec = np.zeros((n, n_stations), dtype=DTYPE)
    rec["t"] = (1.7e9 + np.arange(n) * STEP_S)[:, None]
    for s in range(n_stations):
        level = sum(a * rng.uniform(0.5, 1.5) * np.cos(2 * np.pi * hours / p + rng.uniform(0, 6.3))
                    for p, a in CONSTITUENTS)
        press = np.cumsum(rng.normal(0, 0.3, n)) * 0.2
        rec["level"][:, s] = level - 0.01 * press + rng.normal(0, 0.02, n)
        rec["press"][:, s] = press
        rec["u"][:, s], rec["v"][:, s] = rng.normal(0, 4, n), rng.normal(0, 4, n)
        rec["flags"][:, s] = np.where(rng.random(n) < 0.01, FLAG_SPIKE, 0)
    path = os.path.join(root, "gauges.bin")
    rec.tofile(path)
    return Archive(path, n, n_stations)


class Archive:
    def __init__(self, path, n_times, n_stations):
        self.fd = os.open(path, os.O_RDONLY)
        self.n_times, self.n_stations = n_times, n_stations

    def record(self, t, station):
        off = (t * self.n_stations + station) * RECORD.size
        return RECORD.unpack(os.pread(self.fd, RECORD.size, off))

    def window(self, station, t0, count):
        """Channels of `count` consecutive records; a flagged record repeats the previous one."""
        rows, last = [], None
        for t in range(t0, t0 + count):
            rec = self.record(t, station)
            if rec[5] & FLAG_SPIKE and last is not None:
                rec = last
            rows.append(rec[1:5])
            last = rec
        return np.array(rows, dtype=np.float32)

    def close(self):
        os.close(self.fd)
