"""Air-quality station archive: hourly pollutant profiles in one SQLite table.

Each row is one station-day window: 6 pollutants (PM2.5, PM10, NO2, O3, SO2, CO) x 8
three-hourly readings as a float32 blob, and the episode class an analyst assigned.
"""
import sqlite3

import numpy as np

POLLUTANTS, SLOTS, CLASSES, STATIONS = 6, 8, 5, 40
FEATURES = POLLUTANTS * SLOTS

SCHEMA = """
CREATE TABLE IF NOT EXISTS readings (
    id INTEGER PRIMARY KEY,
    station INTEGER NOT NULL,
    episode INTEGER NOT NULL,
    profile BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS readings_station ON readings (station, id);
"""


def connect(path, journal_mode, timeout):
    con = sqlite3.connect(path, timeout=timeout)
    mode = con.execute(f"PRAGMA journal_mode = {journal_mode}").fetchone()[0]
    if mode.lower() != journal_mode.lower():
        raise RuntimeError(f"{path}: journal_mode {journal_mode} refused (got {mode})")
    return con


def make_rows(rng, n):
    """Synthetic station-days: the episode class shapes the pollutant curves."""
    episode = rng.integers(0, CLASSES, size=n)
    station = rng.integers(0, STATIONS, size=n)
    t = np.linspace(0, 1, SLOTS, dtype=np.float32)
    base = rng.gamma(2.0, 1.0, size=(n, POLLUTANTS, 1)).astype(np.float32)
    shape = np.stack([np.sin(np.pi * (t + 0.15 * k)) for k in range(CLASSES)])  # classes, slots
    bump = (0.4 + 0.3 * (episode[:, None, None] % 3)) * shape[episode][:, None, :]
    noise = rng.normal(0, 0.25, size=(n, POLLUTANTS, SLOTS)).astype(np.float32)
    prof = (base * (1 + bump) + noise).astype(np.float32)
    return [(int(s), int(e), p.tobytes()) for s, e, p in zip(station, episode, prof)]


def create(path, journal_mode, n_rows, seed=0):
    con = connect(path, journal_mode, timeout=10)
    con.executescript(SCHEMA)
    rng = np.random.default_rng(seed)
    with con:
        con.executemany("INSERT INTO readings (station, episode, profile) VALUES (?, ?, ?)",
                        make_rows(rng, n_rows))
    con.close()


def sample_batch(con, rng, queries, rows_per_query):
    """Draw a batch as a few station slices starting at random points of the archive."""
    lo, hi = con.execute("SELECT min(id), max(id) FROM readings").fetchone()
    profiles, labels = [], []
    for _ in range(queries):
        station = int(rng.integers(0, STATIONS))
        start = int(rng.integers(lo, max(lo + 1, hi - 40 * rows_per_query)))
        rows = con.execute(
            "SELECT episode, profile FROM readings WHERE station = ? AND id >= ? "
            "ORDER BY id LIMIT ?", (station, start, rows_per_query)).fetchall()
        for episode, blob in rows:
            labels.append(episode)
            profiles.append(np.frombuffer(blob, dtype=np.float32))
    x = np.log1p(np.maximum(np.stack(profiles), 0.0))
    return x, np.asarray(labels, dtype=np.int64)
