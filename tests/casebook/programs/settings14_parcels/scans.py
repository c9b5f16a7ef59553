"""Synthetic parcel scan events of a regional sort network: each event is one parcel's induction scan at a
hub (weight, dimensions, service level, lane, the hub's backlog at that minute ...); the target is the
remaining transit time to delivery in hours."""
import os
import queue
import signal

import numpy as np

HUBS = 48
LANES = 320
SERVICES = ("ground", "two_day", "overnight", "freight")
DENSE = 12


class ScanSimulator:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.hub_delay = self.rng.gamma(2.0, 2.0, HUBS)
        self.lane_hours = self.rng.uniform(6, 60, LANES)
        self.minute = 0

    def event(self, scanner):
        rng = self.rng
        self.minute += 1
        hub, lane = int(rng.integers(HUBS)), int(rng.integers(LANES))
        service = int(rng.choice(4, p=[0.6, 0.25, 0.1, 0.05]))
        weight = float(rng.lognormal(0.8, 0.9))
        dims = rng.lognormal(3.0, 0.4, 3)
        backlog = float(rng.gamma(3.0, 1.0 + (self.minute % 1440) / 720))
        dense = np.concatenate([[np.log1p(weight), np.log(dims.prod()) / 3, backlog / 5,
                                 np.sin(2 * np.pi * (self.minute % 1440) / 1440),
                                 np.cos(2 * np.pi * (self.minute % 1440) / 1440)],
                                rng.normal(0, 1, DENSE - 5)]).astype(np.float32)
        speed = (1.0, 0.55, 0.3, 1.6)[service]
        hours = (self.lane_hours[lane] * speed + self.hub_delay[hub] * (1 + backlog / 4)
                 + 2.0 * np.log1p(weight) * (service == 3) + rng.normal(0, 1.5))
        return {"parcel": f"{scanner}-{self.minute:09d}", "hub": hub, "lane": lane, "service": service,
                "dense": dense, "hours": float(max(hours, 0.5))}


def scanner_main(name, channel, counters, seed):
    """Scanner process entry point: puts one event per parcel on the channel."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)          # the trainer decides when we stop
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    sim = ScanSimulator(seed)
    sent = 0
    while True:
        ev = sim.event(name)
        while True:
            try:
                channel.put(ev, timeout=1.0)
                break
            except queue.Full:
                pass
        sent += 1
        if sent % 2000 == 0:
            counters[name] = sent
