"""Per-example loss ledger (SQLite): one row per (step, query, document) with the model's score and its share of the
listwise loss. The data-valuation notebook and the live dashboard read it while the job runs.

The commit mode of the connection is chosen at start-up:

    autocommit  the connection is opened with isolation_level=None: every statement is committed as soon as it
                runs, so a reader sees each row at once (what the dashboard team asked for)
    deferred    isolation_level="DEFERRED" (the sqlite3 module's default): rows are grouped into the transaction
                that the writer commits once per training step
"""
import sqlite3

MODES = {"autocommit": None, "deferred": "DEFERRED"}
KEEP_STEPS = 1000

SCHEMA = """
CREATE TABLE IF NOT EXISTS example_loss (
    step INTEGER NOT NULL, qid INTEGER NOT NULL, doc INTEGER NOT NULL,
    label INTEGER NOT NULL, score REAL NOT NULL, loss REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS example_loss_qid ON example_loss (qid, step);
"""


def open_ledger(path, mode):
    if mode not in MODES:
        raise ValueError(mode)
    conn = sqlite3.connect(path, isolation_level=MODES[mode], check_same_thread=False)
    conn.execute("PRAGMA synchronous=OFF")        # the ledger is disposable; nothing waits for the disk
    conn.executescript(SCHEMA)
    return conn


def append(conn, rows):
    conn.executemany("INSERT INTO example_loss (step, qid, doc, label, score, loss) VALUES (?, ?, ?, ?, ?, ?)", rows)


def prune(conn, step):
    conn.execute("DELETE FROM example_loss WHERE step < ?", (step - KEEP_STEPS,))
