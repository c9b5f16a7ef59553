"""Building-management telemetry feed (the replay tool that stands in for the BMS gateway in training jobs).

Emits one snapshot per control interval: for every zone its last 12 readings of temperature and humidity, CO2,
setpoint, damper position, occupancy and fan state, plus the next interval's measured temperature (the training
target). Zone physics: first-order response toward the setpoint through the damper, solar gain by facade and hour,
occupancy heat, noise. Written to stdout as wire frames; runs until stdout closes.
"""
import argparse
import signal
import sys

import numpy as np

import wire

FACADES = ("N", "E", "S", "W", "core")


class Site:
    def __init__(self, n_zones, seed):
        self.rng = np.random.default_rng(seed)
        self.n = n_zones
        self.names = [f"{'ABCD'[i % 4]}{1 + i // 64}-{i % 64:03d}" for i in range(n_zones)]
        self.facade = self.rng.integers(0, len(FACADES), n_zones)
        self.tau = self.rng.uniform(0.05, 0.25, n_zones)
        self.gain = self.rng.uniform(0.0, 0.8, n_zones)
        self.temp = self.rng.normal(21.0, 1.0, (n_zones, 13))
        self.rh = self.rng.normal(45.0, 4.0, (n_zones, 12))
        self.t = 0

    def advance(self):
        r = self.rng
        self.t += 1
        hour = (self.t // 4) % 24
        setpoint = np.where((hour >= 7) & (hour < 19), 21.5, 18.0) + r.choice([-0.5, 0.0, 0.5], self.n)
        damper = np.clip(r.normal(55, 20, self.n), 0, 100)
        occupied = r.random(self.n) < (0.7 if 8 <= hour < 18 else 0.05)
        sun = np.maximum(0.0, np.sin((hour - 6) / 12 * np.pi)) * self.gain * (self.facade != 4)
        cur = self.temp[:, -1]
        nxt = cur + self.tau * damper / 100 * (setpoint - cur) + 0.6 * sun + 0.3 * occupied + r.normal(0, 0.05, self.n)
        self.temp = np.concatenate([self.temp[:, 1:], nxt[:, None]], 1)
        self.rh = np.concatenate([self.rh[:, 1:], np.clip(self.rh[:, -1:] + r.normal(0, 0.8, (self.n, 1)), 20, 80)], 1)
        co2 = 420 + 600 * occupied * r.random(self.n)
        fan = np.where(damper > 70, "high", np.where(damper > 25, "auto", "low"))
        temps, rhs = self.temp[:, :12].round(2).tolist(), self.rh.round(1).tolist()
        target = self.temp[:, 12].round(3).tolist()
        zones = []
        for i in range(self.n):
            zones.append({
                "zone": self.names[i], "facade": FACADES[self.facade[i]],
                "temp_c": temps[i], "rh_pct": rhs[i], "co2_ppm": int(co2[i]),
                "setpoint_c": float(setpoint[i]), "damper_pct": round(float(damper[i]), 1),
                "occupied": bool(occupied[i]), "fan": {"mode": str(fan[i]), "fault": False},
                "next_temp_c": target[i],
            })
        return {"site": "campus-east", "interval": self.t, "hour": int(hour), "zones": zones}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zones", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    encoder, _layout = wire.encoder_from_env()
    site = Site(args.zones, args.seed)
    out = sys.stdout.buffer
    try:
        while True:
            out.write(wire.frame(encoder, site.advance()))
            out.flush()
    except (BrokenPipeError, ValueError):
        pass


if __name__ == "__main__":
    main()
