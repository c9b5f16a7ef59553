"""AIS position reports (the subset of message types 1-3 fields we keep), stored as fixed 32-byte records in
per-day shard files, as the receiver network's archiver writes them; and the segmenter that turns a vessel's
reports into fixed-length track segments."""
import os

import numpy as np

AIS = np.dtype([("mmsi", "<u4"), ("t", "<u4"), ("lat", "<f4"), ("lon", "<f4"), ("sog", "<f4"), ("cog", "<f4"),
                ("heading", "<u2"), ("status", "<u1"), ("vtype", "<u1"), ("pad", "<u4")])
assert AIS.itemsize == 32
VESSEL_TYPES = ("cargo", "tanker", "fishing", "passenger", "tug", "pleasure")
SEG = 32
N_FEAT = 9


def write_shards(outdir, n_shards, vessels_per_shard, seed=0):
    rng = np.random.default_rng(seed)
    paths = []
    for s in range(n_shards):
        parts = []
        for v in range(vessels_per_shard):
            vtype = rng.integers(0, len(VESSEL_TYPES))
            n = int(rng.integers(40, 130))
            speed = (12, 11, 6, 18, 8, 5)[vtype] * rng.uniform(0.6, 1.3)
            turn = (0.5, 0.4, 8.0, 1.0, 6.0, 4.0)[vtype]
            cog = rng.uniform(0, 360) + np.cumsum(rng.normal(0, turn, n))
            sog = np.clip(speed + rng.normal(0, 0.1 * speed + (vtype == 2) * 2, n), 0, 30)
            if vtype == 2:
                sog[rng.random(n) < 0.3] *= 0.2           # trawling
            dt = rng.integers(2, 30 if vtype != 0 else 180, n)
            t = np.cumsum(dt)
            step = sog * dt / 3600 / 60
            lat = 54 + np.cumsum(step * np.cos(np.radians(cog)))
            lon = 10 + np.cumsum(step * np.sin(np.radians(cog)) / np.cos(np.radians(54)))
            rec = np.zeros(n, AIS)
            rec["mmsi"] = 211_000_000 + s * 100_000 + v
            rec["t"], rec["lat"], rec["lon"], rec["sog"] = t, lat, lon, sog
            rec["cog"] = np.mod(cog, 360)
            rec["heading"] = np.mod(cog + rng.normal(0, 3, n), 360).astype(np.uint16)
            rec["status"] = np.where(sog < 0.5, 1, 0) if vtype != 2 else 7
            rec["vtype"] = vtype
            parts.append(rec)
        allrec = np.concatenate(parts)
        allrec = allrec[np.argsort(allrec["t"], kind="stable")]     # receivers write in arrival order
        path = os.path.join(outdir, f"ais-{s:03d}.bin")
        allrec.tofile(path)
        paths.append(path)
    return paths


def shard_features(recs):
    """Per-report features for a whole shard at once, reports sorted by (vessel, time); differences are taken
    within each vessel's track. -> (feats [N, N_FEAT] float32, track bounds [(lo, hi, vessel type)])."""
    order = np.lexsort((recs["t"], recs["mmsi"]))
    r = recs[order]
    first = np.ones(len(r), bool)
    first[1:] = r["mmsi"][1:] != r["mmsi"][:-1]
    t = r["t"].astype(np.float64)
    lat, lon = r["lat"].astype(np.float64), r["lon"].astype(np.float64)
    cog = np.radians(r["cog"].astype(np.float64))
    dt = np.where(first, 0.0, np.diff(t, prepend=t[0]))
    dlat = np.where(first, 0.0, np.diff(lat, prepend=lat[0])) * 60
    dlon = np.where(first, 0.0, np.diff(lon, prepend=lon[0])) * 60 * np.cos(np.radians(lat))
    dcog = np.where(first, 0.0, np.angle(np.exp(1j * np.diff(cog, prepend=cog[0]))))
    feats = np.stack([np.log1p(dt) / 5, dlat * 10, dlon * 10, r["sog"] / 20, np.sin(cog), np.cos(cog),
                      np.clip(dcog, -1, 1), r["status"] == 1, r["status"] == 7], 1).astype(np.float32)
    starts = np.flatnonzero(first)
    ends = np.append(starts[1:], len(r))
    return feats, list(zip(starts.tolist(), ends.tolist(), r["vtype"][starts].tolist())), dt


def segments(feats, dt, lo, hi, max_gap_s=1800):
    """Cut one vessel's reports [lo, hi) into SEG-report segments, dropping segments that span a reception gap."""
    out = []
    for i in range(lo + 1, hi - SEG + 1, SEG):
        if dt[i:i + SEG].max() <= max_gap_s:
            out.append(feats[i:i + SEG])
    return out
