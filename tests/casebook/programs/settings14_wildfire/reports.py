"""Synthetic fire-weather station reports, written as YAML documents the way the district's RAWS relay
archives them: one file per station-day with the station's metadata and 24 hourly observations, plus the
next day's outcome (the fire-danger class the district assessed)."""
import os

import numpy as np
import yaml

FUEL_MODELS = ("grass", "grass-shrub", "shrub", "timber-understory", "timber-litter", "slash")
FIELDS = ("temp_c", "rh_pct", "wind_kmh", "gust_kmh", "precip_mm", "fuel_moisture_pct", "solar_wm2")
CLASSES = 5     # low, moderate, high, very high, extreme
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)      # the relay writes with libyaml where it has it


def _station(rng, i):
    return {"id": f"RAWS-{4100 + i}", "name": f"Ridge {i:03d}", "elevation_m": int(rng.integers(300, 2600)),
            "aspect_deg": int(rng.integers(0, 360)), "slope_pct": int(rng.integers(0, 60)),
            "fuel_model": FUEL_MODELS[int(rng.integers(len(FUEL_MODELS)))],
            "lat": round(float(rng.uniform(36.0, 41.5)), 4), "lon": round(float(rng.uniform(-122.5, -118.0)), 4)}


def _day(rng, station, day):
    dry = rng.beta(2, 2)
    hours = np.arange(24)
    temp = 12 + 16 * dry + 8 * np.sin((hours - 9) / 24 * 2 * np.pi) + rng.normal(0, 1.2, 24)
    rh = np.clip(75 - 55 * dry - 1.2 * (temp - 20) + rng.normal(0, 4, 24), 3, 100)
    wind = np.abs(rng.normal(10 + 25 * dry * rng.random(), 6, 24))
    gust = wind * rng.uniform(1.2, 1.9, 24)
    precip = np.where(rng.random(24) < 0.08 * (1 - dry), rng.gamma(1.5, 1.5, 24), 0.0)
    fuel = np.clip(30 - 25 * dry + 0.3 * precip.cumsum() + rng.normal(0, 1, 24), 2, 40)
    solar = np.clip(900 * np.sin((hours - 6) / 12 * np.pi), 0, None) * (0.6 + 0.4 * dry)
    obs = [{"hour": int(h), "temp_c": round(float(temp[h]), 1), "rh_pct": round(float(rh[h]), 1),
            "wind_kmh": round(float(wind[h]), 1), "gust_kmh": round(float(gust[h]), 1),
            "precip_mm": round(float(precip[h]), 2), "fuel_moisture_pct": round(float(fuel[h]), 1),
            "solar_wm2": round(float(solar[h]), 0)} for h in hours]
    danger = 0.045 * temp.max() - 0.03 * rh.min() + 0.03 * gust.max() - 0.08 * fuel.min() - 0.3 * precip.sum()
    danger += 0.4 * (station["fuel_model"] in ("grass", "slash")) + rng.normal(0, 0.2)
    cls = int(np.clip(np.floor((danger + 0.9) * 1.6), 0, CLASSES - 1))
    return {"station": station, "date": f"2024-{6 + day // 30:02d}-{1 + day % 30:02d}", "source": "raws-relay",
            "qc": {"flags": [], "version": 3}, "observations": obs, "outcome": {"danger_class": cls}}


def write_spool(directory, stations, days, seed):
    """Writes stations x days report files and the station catalogue (stations.yaml) into `directory`; returns
    the report paths."""
    rng = np.random.default_rng(seed)
    paths, catalogue = [], []
    for i in range(stations):
        st = _station(rng, i)
        catalogue.append(st)
        for d in range(days):
            path = os.path.join(directory, f"{st['id']}_{d:03d}.yaml")
            with open(path, "w", encoding="utf-8") as fh:
                yaml.dump(_day(rng, st, d), fh, Dumper=DUMPER, sort_keys=False, default_flow_style=False)
            paths.append(path)
    with open(os.path.join(directory, "stations.yaml"), "w", encoding="utf-8") as fh:
        yaml.dump({"network": "district RAWS", "stations": catalogue}, fh, Dumper=DUMPER, sort_keys=False)
    return paths
