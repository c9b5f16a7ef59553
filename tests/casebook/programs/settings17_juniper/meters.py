"""Smart-meter export format: one reading per line, `YYYY-MM-DD HH:MM;meter;kwh`, where the
timestamp is the start of the half-hour in the site's civil time."""
import time

import numpy as np

SLOT_S = 1800


def write_export(path, meters, days, seed=0):
    rng = np.random.default_rng(seed)
    slots = days * 48
    t = np.arange(slots)
    hour = (t % 48) / 2.0
    daily = 0.25 + 0.35 * np.exp(-((hour - 8) ** 2) / 4) + 0.6 * np.exp(-((hour - 19) ** 2) / 6)
    weekly = 1.0 + 0.15 * (((t // 48) % 7) >= 5)
    start = time.mktime((2023, 1, 2, 0, 0, 0, 0, 0, -1))
    stamps = [time.strftime("%Y-%m-%d %H:%M", time.localtime(start + k * SLOT_S)) for k in range(slots)]
    with open(path, "w") as f:
        for m in range(meters):
            scale = rng.uniform(0.5, 2.0)
            kwh = scale * daily * weekly * rng.gamma(8.0, 1 / 8.0, size=slots)
            f.writelines(f"{s};meter-{m:04d};{v:.3f}\n" for s, v in zip(stamps, kwh))
    return slots


def parse_stamp(stamp):
    """'2023-03-26 02:30' (site civil time) -> epoch seconds, and the epoch of that day's midnight."""
    y, mo, d = int(stamp[0:4]), int(stamp[5:7]), int(stamp[8:10])
    hh, mi = int(stamp[11:13]), int(stamp[14:16])
    start = time.mktime((y, mo, d, hh, mi, 0, 0, 0, -1))
    midnight = time.mktime((y, mo, d, 0, 0, 0, 0, 0, -1))
    return start, midnight


def decode_window(lines):
    """Lines of one meter -> (kW per slot, seconds since local midnight, weekday) arrays."""
    n = len(lines)
    kw = np.empty(n, dtype=np.float32)
    tod = np.empty(n, dtype=np.float32)
    dow = np.empty(n, dtype=np.int64)
    for i, line in enumerate(lines):
        stamp, _meter, value = line.split(";")
        start, midnight = parse_stamp(stamp)
        y, mo, d = int(stamp[0:4]), int(stamp[5:7]), int(stamp[8:10])
        hh, mi = int(stamp[11:13]), int(stamp[14:16]) + 30
        end = time.mktime((y, mo, d, hh, mi, 0, 0, 0, -1))
        # Daylight-saving days have 23- or 25-hour days: normalise energy by the real duration.
        kw[i] = float(value) * 3600.0 / (end - start)
        tod[i] = start - midnight
        dow[i] = int(((midnight // 86400) + 3) % 7)
    return kw, tod, dow
