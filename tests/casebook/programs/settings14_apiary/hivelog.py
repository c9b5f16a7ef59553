"""Hive logger export (its own process, started by train.py through launcher.start_logger): simulates the
apiary's hive scales and in-hive sensor boards and writes one CSV line per reading to stdout, like the vendor's
`hivelog --export csv` tool it stands in for.

    hive,tick,brood_c,outside_c,rh,weight_kg,co2_ppm,fanning,band_0..band_7,swarm

The last column is the label (the hive swarmed within the next three days of the record)."""
import os
import signal
import sys

import numpy as np

BANDS = 8
COLUMNS = (["hive", "tick", "brood_c", "outside_c", "rh", "weight_kg", "co2_ppm", "fanning"]
           + [f"band_{i}" for i in range(BANDS)] + ["swarm"])


class Apiary:
    """Each hive has a hidden swarm-readiness state that drifts up and resets when the colony swarms; the
    readiness shows in the brood temperature, a slow weight loss, the 400-500 Hz piping bands and fanning."""

    def __init__(self, hives, seed):
        self.rng = np.random.default_rng(seed)
        self.n = hives
        self.ready = self.rng.uniform(0, 1, hives)
        self.drift = self.rng.uniform(0.002, 0.012, hives)
        self.weight = self.rng.uniform(28, 55, hives)
        self.tick = 0

    def readings(self):
        rng, n = self.rng, self.n
        self.tick += 1
        day = 2 * np.pi * (self.tick % 96) / 96
        self.ready = np.clip(self.ready + self.drift * rng.uniform(0.2, 1.8, n), 0, 1.2)
        swarming = self.ready > 1.0
        self.ready[swarming] = rng.uniform(0, 0.2, int(swarming.sum()))
        self.weight += rng.normal(0.002, 0.02, n) - 0.01 * swarming - 0.004 * (self.ready > 0.7)
        outside = 14 + 8 * np.sin(day) + rng.normal(0, 1.0, n)
        brood = 34.6 + 0.9 * self.ready + rng.normal(0, 0.25, n)
        rh = np.clip(55 + 12 * np.cos(day) + rng.normal(0, 4, n), 10, 99)
        co2 = 900 + 1400 * self.ready + rng.normal(0, 120, n)
        fanning = np.clip(0.2 + 0.6 * self.ready * (outside > 18) + rng.normal(0, 0.1, n), 0, 1)
        base = rng.gamma(2.0, 0.3, (n, BANDS))
        base[:, 3:5] += 1.6 * self.ready[:, None] ** 2
        label = (self.ready > 0.82).astype(int)
        feats = np.column_stack([brood, outside, rh, self.weight, co2, fanning, base])
        return feats, label


def main():
    signal.signal(signal.SIGINT, signal.SIG_IGN)          # the trainer decides when we stop
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    hives, seed = int(sys.argv[1]), int(sys.argv[2])
    apiary = Apiary(hives, seed)
    print(*COLUMNS, sep=",")
    sys.stdout.flush()
    try:
        while True:
            feats, label = apiary.readings()
            tick = apiary.tick
            for h in range(hives):
                print(h, tick, *[f"{v:.3f}" for v in feats[h].tolist()], label[h], sep=",")
            if tick % 500 == 0:
                print(f"hivelog: tick {tick}", file=sys.stderr, flush=True)
    except BrokenPipeError:
        os._exit(0)


if __name__ == "__main__":
    main()
