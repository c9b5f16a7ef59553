"""Synthetic AIS position-report spool: one text line per fix, 32-fix track segments."""
import numpy as np

BEHAVIOURS = ("transit", "loitering", "dark_gap", "position_jump")
SEGMENT = 32


def checksum(body):
    c = 0
    for ch in body.encode("ascii"):
        c ^= ch
    return c


def write_spool(path, n_segments, seed=3):
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for s in range(n_segments):
            kind = int(rng.integers(0, len(BEHAVIOURS)))
            mmsi = 257000000 + int(rng.integers(0, 99999))
            lat, lon = 58.0 + rng.uniform(0, 3), 4.0 + rng.uniform(0, 6)
            sog, cog = rng.uniform(6, 16), rng.uniform(0, 360)
            ts = 1_700_000_000 + s * 1000
            for k in range(SEGMENT):
                dt = 10.0
                if kind == 1:
                    sog = abs(rng.normal(0.4, 0.3))
                    cog = (cog + rng.normal(0, 60)) % 360
                elif kind == 2 and k == SEGMENT // 2:
                    dt = 900.0
                else:
                    cog = (cog + rng.normal(0, 3)) % 360
                ts += dt
                d = sog * dt / 3600.0 / 60.0
                lat += d * np.cos(np.radians(cog))
                lon += d * np.sin(np.radians(cog)) / np.cos(np.radians(lat))
                if kind == 3 and k == SEGMENT // 2:
                    lat += rng.uniform(0.05, 0.2)
                body = (f"POS,{mmsi},{s},{kind},{ts:.0f},{lat:.6f},{lon:.6f},"
                        f"{sog:.1f},{cog:.1f}")
                f.write(f"${body}*{checksum(body):02X}\n")
    return n_segments
