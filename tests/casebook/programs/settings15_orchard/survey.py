"""Drone survey records of an orchard: one record per tree crown tile (row, tree, 16x16 NDVI patch, canopy
height stats, irrigation zone), stored in shards of JSON lines with the patch zlib-compressed and base64'd
the way the survey uploader writes them; the target is the tree's yield in kg."""
import base64
import json
import zlib

import numpy as np

PATCH = 16
ZONES = 12


def write_shard(path, seed, tiles):
    rng = np.random.default_rng(seed)
    zone_gain = np.random.default_rng(0).normal(0, 0.3, ZONES)
    vigour = rng.uniform(0.2, 0.9, tiles)
    yy, xx = np.mgrid[:PATCH, :PATCH]
    cy = PATCH / 2 + rng.normal(0, 1, tiles)[:, None, None]
    cx = PATCH / 2 + rng.normal(0, 1, tiles)[:, None, None]
    r = np.hypot(yy[None] - cy, xx[None] - cx)
    v = vigour[:, None, None]
    patches = np.clip(v * np.exp(-(r / (4 + 3 * v)) ** 2) + rng.normal(0, 0.03, r.shape), 0, 1).astype(np.float16)
    zone = rng.integers(ZONES, size=tiles)
    height = rng.normal(2.5 + 2 * vigour[:, None], 0.3, (tiles, 3))
    kg = np.maximum(0.0, 40 * vigour + 8 * height[:, 0] + 10 * zone_gain[zone] + rng.normal(0, 3, tiles))
    with open(path, "w", encoding="utf-8") as fh:
        for t in range(tiles):
            rec = {"row": t // 40, "tree": t % 40, "zone": int(zone[t]),
                   "height": [round(float(h), 3) for h in height[t]],
                   "ndvi": base64.b64encode(zlib.compress(patches[t].tobytes(), 1)).decode("ascii"),
                   "yield_kg": round(float(kg[t]), 2)}
            fh.write(json.dumps(rec) + "\n")


def decode_shard(path):
    """-> (patches float32 [n,16,16], tabular float32 [n,4], zone int64 [n], yield float32 [n])"""
    patches, tab, zone, y = [], [], [], []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            raw = zlib.decompress(base64.b64decode(rec["ndvi"]))
            patches.append(np.frombuffer(raw, dtype=np.float16).reshape(PATCH, PATCH))
            tab.append(rec["height"] + [rec["row"] / 40.0])
            zone.append(rec["zone"])
            y.append(rec["yield_kg"])
    return (np.stack(patches).astype(np.float32), np.asarray(tab, dtype=np.float32),
            np.asarray(zone, dtype=np.int64), np.asarray(y, dtype=np.float32))
