"""A rover crossing a scree slope: a small continuous-state, discrete-action simulator.

State: position (x, y), heading, speed, wheel slip, battery and a 3 x 3 patch of the local
slope and rock-size map (24 features in all). Actions: hold, accelerate, brake, steer left,
steer right. Reward: progress across the slope, minus slip and battery use, with a penalty
and episode end on a slide. The behaviour policy is the scripted traverse controller with
epsilon noise; the learner trains a Q-network off-policy from the replay store.
"""
import numpy as np

OBS = 24
ACTIONS = 5


class ScreeSlope:
    def __init__(self, seed, side=64):
        rng = np.random.default_rng(seed)
        g = rng.standard_normal((side, side))
        for _ in range(3):
            g = (g + np.roll(g, 1, 0) + np.roll(g, -1, 0) + np.roll(g, 1, 1) + np.roll(g, -1, 1)) / 5
        self.slope = (0.35 + 0.25 * g / g.std()).astype(np.float32)
        self.rocks = np.abs(rng.standard_normal((side, side))).astype(np.float32)
        self.side = side
        self.rng = rng

    def reset(self):
        self.pos = np.array([1.0, self.rng.uniform(8, self.side - 8)], np.float32)
        self.heading = np.float32(0.0)
        self.speed = np.float32(0.0)
        self.slip = np.float32(0.0)
        self.battery = np.float32(1.0)
        return self.observe()

    def observe(self):
        ix = int(np.clip(self.pos[0], 1, self.side - 2))
        iy = int(np.clip(self.pos[1], 1, self.side - 2))
        patch_s = self.slope[ix - 1:ix + 2, iy - 1:iy + 2].ravel()
        patch_r = self.rocks[ix - 1:ix + 2, iy - 1:iy + 2].ravel()
        head = np.array([self.pos[0] / self.side, self.pos[1] / self.side, np.cos(self.heading),
                         np.sin(self.heading), self.speed, self.slip], np.float32)
        return np.concatenate([head, patch_s, patch_r]).astype(np.float32)

    def step(self, action):
        if action == 1:
            self.speed = min(self.speed + 0.1, 1.0)
        elif action == 2:
            self.speed = max(self.speed - 0.15, 0.0)
        elif action == 3:
            self.heading += 0.15
        elif action == 4:
            self.heading -= 0.15
        ix = int(np.clip(self.pos[0], 0, self.side - 1))
        iy = int(np.clip(self.pos[1], 0, self.side - 1))
        s, r = self.slope[ix, iy], self.rocks[ix, iy]
        self.slip = np.float32(np.clip(0.6 * self.slip + s * self.speed * (0.5 + 0.3 * r)
                                       + self.rng.normal(0, 0.02), 0, 2))
        dx = self.speed * np.cos(self.heading)
        dy = self.speed * np.sin(self.heading) - 0.3 * self.slip
        self.pos = self.pos + np.array([dx, dy], np.float32)
        self.battery -= 0.002 + 0.004 * self.speed
        slid = self.slip > 1.2 or not (0 <= self.pos[1] < self.side)
        done = bool(slid or self.pos[0] >= self.side - 1 or self.battery <= 0)
        reward = float(dx - 0.2 * self.slip - 0.01) - (5.0 if slid else 0.0)
        return self.observe(), reward, done

    def behaviour(self, obs, eps):
        if self.rng.random() < eps:
            return int(self.rng.integers(ACTIONS))
        if obs[5] > 0.5:
            return 2
        if obs[2] < 0.9:
            return 4 if obs[3] > 0 else 3
        return 1 if obs[4] < 0.6 else 0
