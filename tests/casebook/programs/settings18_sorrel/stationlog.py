"""Station-log decoder worker: replays the aerobiology network's hourly station logs
and writes one CSV record per station-hour on stdout (the network's exchange format).

    python stationlog.py --parent PID --stations N --hours N
"""
import argparse
import math
import os
import random
import sys
import threading
import time

FIELDS = ("station", "hour", "temp_c", "rh", "wind_ms", "precip_mm", "pressure_hpa",
          "grass", "birch", "ragweed", "target")


def watch_parent(ppid):
    while True:
        if os.getppid() != ppid:
            os._exit(0)
        time.sleep(0.5)


def station_hours(n_stations, n_hours, seed=17):
    rng = random.Random(seed)
    phase = [rng.uniform(0, 6.28) for _ in range(n_stations)]
    while True:
        for h in range(n_hours):
            day = h / 24.0
            for s in range(n_stations):
                season = max(0.0, math.sin(day / 58.0 + phase[s]))
                temp = 12 + 9 * math.sin(2 * math.pi * (h % 24) / 24) + rng.gauss(0, 1.5)
                rh = min(100.0, max(15.0, 70 - 2 * (temp - 12) + rng.gauss(0, 6)))
                wind = abs(rng.gauss(3, 1.5))
                rain = max(0.0, rng.gauss(-0.5, 1.0))
                grass = season * (40 + 3 * temp) * (0.2 if rain > 0 else 1.0)
                yield (s, h, temp, rh, wind, rain, 1013 + rng.gauss(0, 6), grass,
                       0.5 * grass * rng.random(), 0.1 * grass * rng.random(),
                       grass * (1.1 - 0.02 * rh / 10) + rng.gauss(0, 3))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--stations", type=int, default=40)
    ap.add_argument("--hours", type=int, default=24 * 365)
    args = ap.parse_args()
    threading.Thread(target=watch_parent, args=(args.parent,), daemon=True).start()
    out = sys.stdout
    out.write(",".join(FIELDS) + "\n")
    lines = []
    try:
        for rec in station_hours(args.stations, args.hours):
            lines.append("%d,%d,%.2f,%.1f,%.2f,%.2f,%.1f,%.1f,%.1f,%.1f,%.2f\n" % rec)
            if len(lines) == args.stations:
                out.write("".join(lines))
                out.flush()
                lines = []
    except BrokenPipeError:
        pass


if __name__ == "__main__":
    main()
