"""A stand-in arcade environment: 64x64 RGB frames, 6 actions."""
import numpy as np


class ToyArcade:
    def __init__(self, seed, episode_len=128):
        self.rng = np.random.default_rng(seed)
        self.episode_len = episode_len

    def rollout(self, policy_logits):
        frames = self.rng.integers(0, 256, size=(self.episode_len, 3, 64, 64), dtype=np.uint8)
        actions = self.rng.integers(0, policy_logits.shape[-1], size=self.episode_len).astype(np.int64)
        rewards = self.rng.standard_normal(self.episode_len).astype(np.float32)
        return frames, actions, rewards
