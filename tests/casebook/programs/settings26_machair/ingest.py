import decimal
import json
import queue
import threading

import numpy as np
import torch

from spool import build_spool


class TelemetryReader(threading.Thread):
    """Decodes batches of telemetry lines from the replay spool and queues (readings, site state) batches."""

    def __init__(self, cfg, seed):
        super().__init__(name="telemetry-reader", daemon=True)
        self.cfg = cfg
        self.rng = np.random.default_rng(seed)
        self.out = queue.Queue(maxsize=cfg.ingest.queue_depth)
        self.ready = threading.Event()
        self.count_lock = threading.Lock()
        self.decoded = 0

    def decode_options(self):
        opts = {"strict": self.cfg.ingest.strict}
        if self.cfg.ingest.exact_decimals:
            opts["parse_float"] = decimal.Decimal
        return opts

    def run(self):
        g = self.cfg.ingest
        lines = build_spool(self.cfg)
        opts = self.decode_options()
        lo, hi = -12.0, 12.0
        self.ready.set()
        while True:
            idx = self.rng.integers(0, len(lines), size=g.records_per_batch)
            recs = [json.loads(lines[i], **opts) for i in idx]
            x = np.array([r["readings"] for r in recs], dtype=np.float32)
            y = np.array([r["state"] for r in recs], dtype=np.int64)
            if g.validate_ranges:
                np.clip(x, lo, hi, out=x)
            with self.count_lock:
                self.decoded += len(recs)
            self.out.put((torch.from_numpy(x), torch.from_numpy(y)))
