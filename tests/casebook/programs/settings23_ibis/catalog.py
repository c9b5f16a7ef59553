import sqlite3

import numpy as np

SCHEMA = """
CREATE TABLE recorders (
    recorder TEXT PRIMARY KEY,
    gain REAL NOT NULL,
    habitat INTEGER NOT NULL
);
CREATE TABLE clips (
    id INTEGER PRIMARY KEY,
    site INTEGER NOT NULL,
    recorder TEXT NOT NULL,
    start_ms INTEGER NOT NULL,
    snr REAL NOT NULL,
    duration REAL NOT NULL
);
CREATE INDEX clips_by_site ON clips(site);
CREATE TABLE labels (
    recorder TEXT NOT NULL,
    start_ms INTEGER NOT NULL,
    species INTEGER NOT NULL,
    confidence REAL NOT NULL,
    annotator TEXT NOT NULL
);
"""

SITE_QUERY = """
SELECT c.id, c.snr, c.duration, r.gain, r.habitat, l.species, l.confidence
FROM clips AS c
JOIN labels AS l ON l.recorder = c.recorder AND l.start_ms = c.start_ms
JOIN recorders AS r ON r.recorder = c.recorder
WHERE c.site = ? AND l.confidence >= ?
"""


class ClipCatalog:
    """Survey clip catalog with annotations imported from the labelling export."""

    def __init__(self, settings):
        self.s = settings
        self.db = sqlite3.connect(":memory:")
        for name, value in settings.pragmas.items():
            self.db.execute(f"PRAGMA {name} = {value}")
        self.db.executescript(SCHEMA)
        self.embeddings = None
        self._ingest()
        self.db.execute("ANALYZE")

    def _ingest(self):
        s = self.s
        rng = np.random.default_rng(s.seed)
        n = s.sites * s.clips_per_site
        recorders = [f"AR{idx:04d}" for idx in range(s.recorders)]
        self.db.executemany(
            "INSERT INTO recorders VALUES (?, ?, ?)",
            [(r, float(rng.uniform(0.6, 1.4)), int(rng.integers(0, 6))) for r in recorders],
        )
        site = np.repeat(np.arange(s.sites), s.clips_per_site)
        rec_idx = rng.integers(0, s.recorders, size=n)
        start = rng.integers(0, 30 * 86_400_000, size=n)
        species = rng.integers(0, s.species, size=n)
        snr = rng.gamma(2.0, 4.0, size=n)
        dur = rng.uniform(1.0, 10.0, size=n)
        conf = rng.beta(5, 2, size=n)
        self.db.executemany(
            "INSERT INTO clips VALUES (?, ?, ?, ?, ?, ?)",
            [(i, int(site[i]), recorders[rec_idx[i]], int(start[i]), float(snr[i]), float(dur[i]))
             for i in range(n)],
        )
        order = rng.permutation(n)
        self.db.executemany(
            "INSERT INTO labels VALUES (?, ?, ?, ?, ?)",
            [(recorders[rec_idx[i]], int(start[i]), int(species[i]), float(conf[i]), f"a{i % 7}")
             for i in order],
        )
        self.db.commit()
        protos = rng.standard_normal((s.species, s.embedding_dim)).astype(np.float32)
        noise = rng.standard_normal((n, s.embedding_dim)).astype(np.float32)
        self.embeddings = protos[species] * 0.22 + noise

    def site_rows(self, site, min_confidence):
        return self.db.execute(SITE_QUERY, (int(site), float(min_confidence))).fetchall()
