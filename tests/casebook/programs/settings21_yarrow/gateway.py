"""Greenhouse gateway replay: streams the controller's telemetry uploads to stdout.

Each upload is one JSON array of sensor readings for every bay of the house (the format
the climate controllers post to the gateway), written as <I length> + payload. The replay
cycles through a capture generated at start-up; it exits when its parent goes away.

    python gateway.py --bays 128 --sensors 16 --slots 4
"""
import argparse
import json
import os
import random
import struct
import sys
import threading
import time

KINDS = [("soil_moist", "pct"), ("soil_temp", "degC"), ("air_temp", "degC"), ("rel_hum", "pct"),
         ("par", "umol/m2s"), ("co2", "ppm"), ("ec", "mS/cm"), ("leaf_wet", "pct")]


def watch_parent(ppid):
    while True:
        if os.getppid() != ppid:
            os._exit(0)
        time.sleep(0.5)


def upload(rng, house, bays, sensors, slots, t0):
    out = []
    for b in range(bays):
        dry = rng.random()
        for s in range(sensors):
            kind, unit = KINDS[s % len(KINDS)]
            for k in range(slots):
                ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t0 + 300 * k))
                out.append({
                    "site": f"GH-{house:04d}-{'abcd'[b % 4]}",
                    "bay": f"B{b:03d}",
                    "controller": f"CTL-{(house * 131 + b) & 0xFFFFFF:06X}",
                    "channel": f"{'ch' if s < 12 else 'aux'}{s % 12}",
                    "sensor": f"{kind}_{s // len(KINDS):02d}",
                    "ts": f"{ts}.{rng.randrange(1000):03d}Z",
                    "unit": unit,
                    "firmware": f"4.{rng.randrange(20)}.{rng.randrange(10)}",
                    "status": "OK" if rng.random() > 0.02 else "STALE",
                    "value": round((1.0 - dry) * 40 + rng.gauss(0, 3) if kind == "soil_moist"
                                   else rng.gauss(20, 5), 3),
                    "seq": k,
                })
    return json.dumps(out, separators=(",", ":")).encode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bays", type=int, default=128)
    ap.add_argument("--sensors", type=int, default=16)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--capture", type=int, default=24)
    args = ap.parse_args()
    threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()
    rng = random.Random(7)
    t0 = 1714560000
    capture = [upload(rng, 400 + i, args.bays, args.sensors, args.slots, t0 + 1200 * i)
               for i in range(args.capture)]
    out = sys.stdout.buffer
    try:
        while True:
            for payload in capture:
                out.write(struct.pack("<I", len(payload)))
                out.write(payload)
                out.flush()
    except (BrokenPipeError, OSError):
        os._exit(0)


if __name__ == "__main__":
    main()
