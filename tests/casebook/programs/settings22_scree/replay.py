"""Replay store: an in-memory SQLite database of the rover's episodes.

episodes(id) <- segments(episode_id) <- steps(segment_id). Each episode is stored as its
segments of `segment_len` transitions (the unit the n-step targets and the curriculum
statistics are computed on) and the segments' transitions. When the store holds more
than `capacity` episodes, the oldest episode is evicted: its steps by id range, then its
segments, then the episode row. Batches are drawn uniformly over the stored transitions.
"""
import sqlite3

import numpy as np

SCHEMA = """
CREATE TABLE episodes (id INTEGER PRIMARY KEY, seed INTEGER, length INTEGER, ret REAL,
                       first_step INTEGER, last_step INTEGER);
CREATE TABLE segments (id INTEGER PRIMARY KEY, episode_id INTEGER NOT NULL REFERENCES episodes(id),
                       start INTEGER, ret REAL);
CREATE TABLE steps (id INTEGER PRIMARY KEY, segment_id INTEGER NOT NULL REFERENCES segments(id),
                    obs BLOB, action INTEGER, reward REAL, next_obs BLOB, done INTEGER);
"""


class ReplayStore:
    def __init__(self, cfg):
        self.con = sqlite3.connect(":memory:", check_same_thread=False)
        self.con.execute(f"PRAGMA foreign_keys = {cfg['foreign_keys']}")
        self.con.executescript(SCHEMA)
        self.capacity = int(cfg["capacity"])
        self.segment_len = int(cfg["segment_len"])
        self.next_step = 0
        self.next_segment = 0
        self.next_episode = 0
        self.oldest = 0
        self.first_live_step = 0

    def add_episode(self, seed, transitions):
        ep = self.next_episode
        self.next_episode += 1
        first = self.next_step
        con = self.con
        con.execute("INSERT INTO episodes VALUES (?,?,?,?,?,?)",
                    (ep, seed, len(transitions), float(sum(t[2] for t in transitions)), first,
                     first + len(transitions) - 1))
        rows = []
        for k in range(0, len(transitions), self.segment_len):
            seg = transitions[k:k + self.segment_len]
            sid = self.next_segment
            self.next_segment += 1
            con.execute("INSERT INTO segments VALUES (?,?,?,?)", (sid, ep, k, float(sum(t[2] for t in seg))))
            for obs, action, reward, nxt, done in seg:
                rows.append((self.next_step, sid, obs.tobytes(), action, reward, nxt.tobytes(), int(done)))
                self.next_step += 1
        con.executemany("INSERT INTO steps VALUES (?,?,?,?,?,?,?)", rows)
        while self.next_episode - self.oldest > self.capacity:
            self.evict_oldest()
        con.commit()

    def evict_oldest(self):
        con = self.con
        first, last = con.execute("SELECT first_step, last_step FROM episodes WHERE id = ?",
                                  (self.oldest,)).fetchone()
        con.execute("DELETE FROM steps WHERE id BETWEEN ? AND ?", (first, last))
        con.execute("DELETE FROM segments WHERE episode_id = ?", (self.oldest,))
        con.execute("DELETE FROM episodes WHERE id = ?", (self.oldest,))
        self.oldest += 1
        self.first_live_step = last + 1

    def size(self):
        return self.next_step - self.first_live_step

    def sample(self, rng, batch, obs_dim):
        ids = rng.integers(self.first_live_step, self.next_step, batch).tolist()
        marks = ",".join("?" * len(ids))
        rows = self.con.execute(
            f"SELECT obs, action, reward, next_obs, done FROM steps WHERE id IN ({marks})", ids).fetchall()
        obs = np.frombuffer(b"".join(r[0] for r in rows), np.float32).reshape(-1, obs_dim).copy()
        nxt = np.frombuffer(b"".join(r[3] for r in rows), np.float32).reshape(-1, obs_dim).copy()
        act = np.fromiter((r[1] for r in rows), np.int64, len(rows))
        rew = np.fromiter((r[2] for r in rows), np.float32, len(rows))
        done = np.fromiter((r[4] for r in rows), np.float32, len(rows))
        return obs, act, rew, nxt, done
