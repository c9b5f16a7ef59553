import struct
import zlib

import numpy as np

FIX = struct.Struct("<IIiiHhhHBBhhh")
BEHAVIOURS = ("roosting", "foraging", "flying", "wading")


def build_pool(settings):
    """Raw tag uplink records, as they arrive from the base stations."""
    rng = np.random.default_rng(settings.seed)
    n = settings.pool_records
    behaviour = rng.integers(0, len(BEHAVIOURS), size=n)
    speed = np.choose(behaviour, [rng.gamma(1.0, 0.2, n), rng.gamma(2.0, 0.6, n),
                                  rng.gamma(9.0, 1.6, n), rng.gamma(2.0, 0.3, n)])
    alt = np.choose(behaviour, [rng.normal(2, 1, n), rng.normal(1, 1, n),
                                rng.normal(60, 25, n), rng.normal(0, 0.5, n)])
    accel = rng.normal(0, 1, (n, 3)) * (1 + behaviour[:, None])
    records = []
    for i in range(n):
        body = FIX.pack(
            int(rng.integers(1, 1 << 20)), 1_700_000_000 + i * 5,
            int(rng.normal(52.5, 0.2) * 1e7), int(rng.normal(4.7, 0.2) * 1e7),
            int(np.clip(speed[i] * 100, 0, 65535)), int(np.clip(alt[i] * 10, -32000, 32000)),
            int(rng.integers(0, 3600)), int(rng.integers(3400, 4200)),
            int(rng.integers(3, 14)), int(rng.integers(5, 40)),
            int(np.clip(accel[i, 0] * 1000, -32000, 32000)), int(np.clip(accel[i, 1] * 1000, -32000, 32000)),
            int(np.clip(accel[i, 2] * 1000, -32000, 32000)),
        )
        records.append(body + struct.pack("<I", zlib.crc32(body)))
    return records, behaviour
