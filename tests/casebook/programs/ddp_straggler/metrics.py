"""Run metrics for the dashboard: the loss curve and a smoothed density of the prediction confidence, in plain
Python, refreshed after every step."""

import math

GRID = [i / 399 for i in range(400)]
BANDWIDTHS = (0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.065, 0.08, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3)


class RunMetrics:
    def __init__(self) -> None:
        self.losses: list[float] = []
        self.density: dict[float, list[float]] = {}

    def update(self, step: int, loss: float, logits) -> None:
        self.losses.append(loss)
        confs = []
        for a, b in logits.tolist():
            p = 1.0 / (1.0 + math.exp(b - a))
            confs.append(max(p, 1.0 - p))
        for bw in BANDWIDTHS:
            self.density[bw] = [sum(math.exp(-(((g - c) / bw) ** 2)) for c in confs) / len(confs) for g in GRID]
        recent = self.losses[-200:]
        self.ema = sum(recent) / len(recent)
