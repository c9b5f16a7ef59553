import json

import numpy as np

from records import KINDS, SPECIES

SOURCES = ["walker", "dog", "kite", "boat", "drone", "raptor", "vehicle"]
SUBSTRATES = ["mud", "sand", "shingle", "saltmarsh", "mussel bed"]


def _record(rng, kind, site, minute):
    base = {"kind": kind, "site": site, "minute": minute, "observer": f"obs{int(rng.integers(0, 30)):02d}",
            "lat": float(53.0 + rng.normal(0, 0.2)), "lon": float(0.5 + rng.normal(0, 0.3))}
    if rng.random() < 0.2:
        base["notes"] = "partly obscured by haze"
    sp = SPECIES[int(rng.integers(0, len(SPECIES)))]

    def r(a, b):
        return float(rng.uniform(a, b))

    def i(a, b):
        return int(rng.integers(a, b))

    extra = {
        "count": {"species": sp, "adults": i(0, 900), "juveniles": i(0, 200), "method": "scan"},
        "flock": {"species": sp, "size": i(5, 5000), "spread_m": r(5, 400), "heading_deg": r(0, 360)},
        "resight": {"species": sp, "ring": f"R{i(0, 99999):05d}", "colour_code": "Y-GN/RR", "age": "adult"},
        "weather": {"wind_ms": r(0, 20), "wind_dir": r(0, 360), "visibility_km": r(0.2, 30), "rain": bool(i(0, 2))},
        "tide": {"height_m": r(-1, 7), "state": "rising", "minutes_to_high": i(-360, 360)},
        "disturbance": {"source": SOURCES[i(0, len(SOURCES))], "distance_m": r(5, 500), "birds_flushed": i(0, 3000)},
        "habitat": {"substrate": SUBSTRATES[i(0, len(SUBSTRATES))], "cover_pct": r(0, 100), "water_depth_cm": r(0, 40)},
        "feeding": {"species": sp, "pecks_per_min": r(0, 60), "prey": "Hydrobia", "success_rate": r(0, 1)},
        "roost": {"species": sp, "birds": i(10, 20000), "elevation_m": r(0, 4), "compact": bool(i(0, 2))},
        "moult": {"species": sp, "primary_score": i(0, 50), "body_pct": r(0, 100)},
        "predator": {"predator": "peregrine", "attacks": i(0, 6), "kills": i(0, 2)},
        "nest": {"species": sp, "eggs": i(0, 5), "stage": "incubation", "fenced": bool(i(0, 2))},
    }[kind]
    base.update(extra)
    return base


def build_spool(cfg):
    """Survey sheets as uploaded by the field app: one JSON array of mixed observation records each."""
    rng = np.random.default_rng(cfg.seed)
    weights = np.array([6, 4, 2, 1, 1, 2, 1, 3, 2, 1, 1, 1], dtype=float)
    weights /= weights.sum()
    sheets = []
    for _ in range(cfg.sheets):
        site = int(rng.integers(0, cfg.sites))
        kinds = rng.choice(len(KINDS), size=cfg.records_per_sheet, p=weights)
        recs = [_record(rng, KINDS[k], site, m) for m, k in enumerate(kinds)]
        sheets.append(json.dumps(recs).encode())
    return sheets
