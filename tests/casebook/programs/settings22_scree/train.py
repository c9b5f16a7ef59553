"""Off-policy Q-learning for a rover traversing scree slopes, from a replay store.

The actor thread drives the simulator (rover.py) with the scripted traverse controller
plus epsilon noise, stores each finished episode in the replay store (replay.py, an
in-memory SQLite database opened with the profile's [replay] settings; the oldest episode
is evicted once the store is full) and draws training batches from it into a queue. The
main thread trains the Q-network (double DQN with a target network). The store is seeded
at start-up with the archived traverses of the previous campaign.

    python train.py                                # configs/field_audit.toml
    python train.py --config configs/field_fast.toml
"""
import argparse
import os
import queue
import signal
import threading
import tomllib

import numpy as np
import replay
import rover
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join("configs", "field_audit.toml")


def load_config(path):
    for cand in (path, os.path.join(HERE, path)):
        if os.path.exists(cand):
            with open(cand, "rb") as f:
                return tomllib.load(f)
    raise SystemExit(f"config not found: {path}")


def seed_archive(store, episodes, rng):
    """Load the archived traverses (synthesised here) into the store."""
    for e in range(episodes):
        n = int(rng.integers(80, 161))
        obs = rng.standard_normal((n + 1, rover.OBS), dtype=np.float32)
        act = rng.integers(0, rover.ACTIONS, n)
        rew = rng.normal(0.1, 0.3, n)
        trans = [(obs[i], int(act[i]), float(rew[i]), obs[i + 1], i == n - 1) for i in range(n)]
        store.add_episode(-1 - e, trans)


def actor(store, ac, out, stop, ready):
    rng = np.random.default_rng(11)
    seed_archive(store, store.capacity, rng)
    ready.set()
    sim = rover.ScreeSlope(seed=7)
    episode = 0
    while not stop.is_set():
        obs = sim.reset()
        trans, done = [], False
        while not done and len(trans) < ac["max_steps"]:
            a = sim.behaviour(obs, ac["epsilon"])
            nxt, r, done = sim.step(a)
            trans.append((obs, a, r, nxt, done))
            obs = nxt
        store.add_episode(episode, trans)
        episode += 1
        for _ in range(ac["batches_per_episode"]):
            o, a, r, n, d = store.sample(rng, ac["batch"], rover.OBS)
            batch = tuple(torch.from_numpy(v) for v in (o, a, r, n, d))
            while not stop.is_set():
                try:
                    out.put(batch, timeout=0.2)
                    break
                except queue.Full:
                    continue


def qnet(h):
    return nn.Sequential(nn.Linear(rover.OBS, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, h),
                         nn.ReLU(), nn.Linear(h, rover.ACTIONS))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    cfg = load_config(args.config)
    rc, ac, tr = cfg["replay"], cfg["actor"], cfg["train"]

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    torch.set_num_threads(1)
    torch.manual_seed(0)

    store = replay.ReplayStore(rc)
    q = queue.Queue(maxsize=tr["queue_depth"])
    ready = threading.Event()
    act = threading.Thread(target=actor, name="actor", daemon=True, args=(store, ac, q, stop, ready))
    act.start()
    net, target = qnet(tr["hidden"]), qnet(tr["hidden"])
    target.load_state_dict(net.state_dict())
    opt = torch.optim.Adam(net.parameters(), lr=tr["lr"])
    gamma = tr["gamma"]
    step = 0
    try:
        while not stop.is_set() and step < args.steps:
            try:
                o, a, r, n, d = q.get(timeout=0.5)
            except queue.Empty:
                if not act.is_alive() and not stop.is_set():
                    raise SystemExit("the actor stopped") from None
                continue
            with torch.no_grad():
                best = net(n).argmax(1, keepdim=True)
                y = r + gamma * (1 - d) * target(n).gather(1, best).squeeze(1)
            qsa = net(o).gather(1, a.unsqueeze(1)).squeeze(1)
            loss = nn.functional.smooth_l1_loss(qsa, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 10.0)
            opt.step()
            step += 1
            if step % tr["target_every"] == 0:
                target.load_state_dict(net.state_dict())
            print(f"step {step} loss {loss.item():.5f}", flush=True)
    finally:
        stop.set()
        act.join(timeout=5)


if __name__ == "__main__":
    main()
