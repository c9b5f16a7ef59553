"""Ingest worker: appends the stations' newest station-days to the archive and prunes
the oldest ones, so the archive holds a rolling window of `retention` rows."""
import argparse
import ctypes
import os
import signal
import time

import numpy as np

import airstore


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--journal-mode", required=True)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--every-ms", type=float, default=5.0)
    ap.add_argument("--retention", type=int, default=24000)
    args = ap.parse_args()
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != args.parent:
        os._exit(0)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))

    con = airstore.connect(args.db, args.journal_mode, args.timeout)
    rng = np.random.default_rng(7)
    while True:
        rows = airstore.make_rows(rng, args.rows)
        with con:
            con.executemany("INSERT INTO readings (station, episode, profile) VALUES (?, ?, ?)", rows)
            con.execute("DELETE FROM readings WHERE id <= (SELECT max(id) FROM readings) - ?",
                        (args.retention,))
        time.sleep(args.every_ms / 1000.0)


if __name__ == "__main__":
    main()
