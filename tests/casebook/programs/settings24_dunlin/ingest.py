import queue
import threading

import numpy as np
import torch

from records import KINDS, SPECIES, sheet_adapter
from spool import build_spool

KIND_INDEX = {k: i for i, k in enumerate(KINDS)}
SPECIES_INDEX = {s: i for i, s in enumerate(SPECIES)}
NUMERIC = ("adults", "juveniles", "size", "spread_m", "heading_deg", "wind_ms", "wind_dir", "visibility_km",
           "height_m", "minutes_to_high", "distance_m", "birds_flushed", "cover_pct", "water_depth_cm",
           "pecks_per_min", "success_rate", "birds", "elevation_m", "primary_score", "body_pct", "attacks",
           "kills", "eggs")
FEATURES = len(KINDS) + len(SPECIES) + len(NUMERIC) + 3


class SheetIngest(threading.Thread):
    """Validates uploaded survey sheets against the observation schema and turns every record into a
    feature row; the target is the sheet's disturbance level (birds flushed over the sheet, log-binned)."""

    def __init__(self, cfg, seed):
        super().__init__(name="sheet-ingest", daemon=True)
        self.cfg = cfg
        self.rng = np.random.default_rng(seed)
        self.out = queue.Queue(maxsize=cfg.ingest.queue_depth)
        self.ready = threading.Event()
        self.count_lock = threading.Lock()
        self.records = 0

    def _rows(self, records):
        n_k, n_s = len(KINDS), len(SPECIES)
        kind = np.fromiter((KIND_INDEX[r.kind] for r in records), dtype=np.int64, count=len(records))
        species = np.fromiter((SPECIES_INDEX.get(getattr(r, "species", None), -1) for r in records),
                              dtype=np.int64, count=len(records))
        fields = [r.__dict__ for r in records]
        numeric = np.array([[f.get(name) or 0.0 for name in NUMERIC] for f in fields], dtype=np.float32)
        where = np.array([(f["minute"] / 360.0, f["lat"] - 53.0, f["lon"] - 0.5) for f in fields], dtype=np.float32)
        x = np.zeros((len(records), FEATURES), dtype=np.float32)
        rows = np.arange(len(records))
        x[rows, kind] = 1.0
        has = species >= 0
        x[rows[has], n_k + species[has]] = 1.0
        x[:, n_k + n_s:n_k + n_s + len(NUMERIC)] = np.log1p(np.abs(numeric))
        x[:, -3:] = where
        flushed = float(numeric[:, NUMERIC.index("birds_flushed")].sum())
        y = np.full(len(records), min(int(np.log1p(flushed) / 2.5), 3), dtype=np.int64)
        return x, y

    def run(self):
        spool = build_spool(self.cfg.spool)
        adapter = sheet_adapter(self.cfg.schema)
        self.ready.set()
        while True:
            xs, ys = [], []
            for _ in range(self.cfg.ingest.sheets_per_batch):
                raw = spool[int(self.rng.integers(0, len(spool)))]
                records = adapter.validate_json(raw)
                x, y = self._rows(records)
                xs.append(x)
                ys.append(y)
            with self.count_lock:
                self.records += sum(len(y) for y in ys)
            self.out.put((torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))))
