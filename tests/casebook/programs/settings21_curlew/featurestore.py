"""Habitat feature store: an in-memory SQLite snapshot of the survey grid, the tag registry
and the tide table, loaded at start-up and queried per GPS fix by the track loader."""
import math
import random
import sqlite3

CELL_SQL = ("SELECT elevation, inundation, mudflat, saltmarsh, shingle, disturbance "
            "FROM cells WHERE cell_id = ?")
TAG_SQL = "SELECT mass, wing, age, site FROM tags WHERE tag_id = ?"
TIDE_SQL = "SELECT level, rate FROM tides WHERE slot = ?"


def open_store(cfg, seed=0):
    rng = random.Random(seed)
    con = sqlite3.connect(":memory:", cached_statements=int(cfg["statement_cache"]))
    con.execute("CREATE TABLE cells (cell_id INTEGER PRIMARY KEY, elevation REAL, inundation REAL, "
                "mudflat REAL, saltmarsh REAL, shingle REAL, disturbance REAL)")
    con.execute("CREATE TABLE tags (tag_id INTEGER PRIMARY KEY, mass REAL, wing REAL, age INTEGER, "
                "site INTEGER)")
    con.execute("CREATE TABLE tides (slot INTEGER PRIMARY KEY, level REAL, rate REAL)")
    side = int(cfg["grid_side"])
    rows = []
    for c in range(side * side):
        x, y = divmod(c, side)
        elev = math.sin(x / 37.0) + math.cos(y / 23.0) + rng.gauss(0, 0.1)
        rows.append((c, elev, max(0.0, -elev), rng.random(), rng.random(), rng.random(), rng.random()))
    con.executemany("INSERT INTO cells VALUES (?,?,?,?,?,?,?)", rows)
    con.executemany("INSERT INTO tags VALUES (?,?,?,?,?)",
                    [(t, rng.gauss(750, 60), rng.gauss(300, 12), rng.randrange(1, 9), rng.randrange(6))
                     for t in range(int(cfg["tags"]))])
    con.executemany("INSERT INTO tides VALUES (?,?,?)",
                    [(s, 2.5 * math.sin(2 * math.pi * s / 149.0), 2 * math.pi / 149.0 * math.cos(
                        2 * math.pi * s / 149.0)) for s in range(int(cfg["tide_slots"]))])
    con.commit()
    return con


def cell_features(con, cell_id):
    return con.execute(CELL_SQL, (cell_id,)).fetchone()


def tag_features(con, tag_id):
    return con.execute(TAG_SQL, (tag_id,)).fetchone()


def tide_features(con, slot):
    return con.execute(TIDE_SQL, (slot,)).fetchone()
