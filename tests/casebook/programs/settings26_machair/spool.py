"""Replay spool of machair station telemetry: one JSON object per line, as the station loggers upload them
(station id, timestamp, site state, and a list of sensor readings printed with full precision)."""
import json

import numpy as np


def build_spool(cfg):
    s = cfg.site
    rng = np.random.default_rng(s.seed)
    protos = rng.normal(0.0, 1.0, size=(s.states, s.sensors))
    lines = []
    for i in range(s.spool_records):
        state = int(rng.integers(0, s.states))
        readings = protos[state] + rng.normal(0.0, 9.0, size=s.sensors)
        rec = {"station": f"UIST-{int(rng.integers(1, 90)):03d}", "ts": 1_700_000_000 + 600 * i,
               "state": state, "battery_v": round(float(rng.uniform(3.3, 4.2)), 3),
               "readings": [float(v) for v in readings]}
        lines.append(json.dumps(rec))
    return lines
