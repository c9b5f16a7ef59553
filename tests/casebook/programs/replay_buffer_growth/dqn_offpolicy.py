#!/usr/bin/env python
"""Off-policy Q-learning on a toy arcade: a collector thread fills episode memory, the learner samples it."""
import argparse
import threading
import time

import numpy as np
import torch
import torch.nn as nn

from agent.env import ToyArcade
from agent.memory import EpisodeMemory


class QNet(nn.Module):
    def __init__(self, actions=6):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 16, 8, stride=4), nn.ReLU(), nn.Conv2d(16, 32, 4, stride=2), nn.ReLU(),
                                  nn.Flatten(), nn.Linear(32 * 6 * 6, 128), nn.ReLU(), nn.Linear(128, actions))

    def forward(self, frames):
        return self.body(frames.float() / 255.0)


def collect(env, memory, episodes_per_s):
    logits = np.zeros(6, dtype=np.float32)
    period = 1.0 / episodes_per_s
    while True:
        t = time.monotonic()
        memory.push(*env.rollout(logits))
        time.sleep(max(0.0, period - (time.monotonic() - t)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--capacity-steps", type=int, default=1_000_000)
    ap.add_argument("--episodes-per-s", type=float, default=16.0)
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    torch.set_num_threads(1)
    memory = EpisodeMemory(args.capacity_steps)
    env = ToyArcade(seed=3)
    threading.Thread(target=collect, args=(env, memory, args.episodes_per_s), name="collector", daemon=True).start()
    qnet = QNet()
    opt = torch.optim.RMSprop(qnet.parameters(), lr=2.5e-4)
    rng = np.random.default_rng(0)
    while len(memory) < 4:
        time.sleep(0.05)
    updates = 0
    while True:
        frames, actions, rewards = memory.sample(rng, args.batch)
        q = qnet(torch.from_numpy(frames)).gather(1, torch.from_numpy(actions)[:, None]).squeeze(1)
        loss = nn.functional.smooth_l1_loss(q, torch.from_numpy(rewards))
        opt.zero_grad()
        loss.backward()
        opt.step()
        updates += 1
        if updates % 20 == 0:
            print(f"update {updates} loss {loss.item():.4f} episodes {len(memory)} "
                  f"held {memory.bytes_held / 1e6:.0f} MB", flush=True)


if __name__ == "__main__":
    main()
