"""Episode memory for off-policy learning: the collector pushes whole episodes, the learner samples steps."""
import threading

import numpy as np

# A safety net for shared machines: past this many bytes new episodes are dropped (with one warning).
HARD_LIMIT_BYTES = 2_500_000_000


class EpisodeMemory:
    def __init__(self, capacity_steps):
        self.capacity_steps = capacity_steps
        self._episodes = []
        self._lock = threading.Lock()
        self.bytes_held = 0
        self._warned = False

    def push(self, frames, actions, rewards):
        episode = {"frames": frames, "actions": actions, "rewards": rewards}
        size = frames.nbytes + actions.nbytes + rewards.nbytes
        with self._lock:
            if self.bytes_held + size > HARD_LIMIT_BYTES:
                if not self._warned:
                    print(f"memory: hard limit reached ({self.bytes_held / 1e9:.2f} GB), dropping episodes",
                          flush=True)
                    self._warned = True
                return
            self._episodes.append(episode)
            self.bytes_held += size
            # Evict the oldest episodes once we hold more than the capacity.
            while len(self._episodes) > self.capacity_steps:
                old = self._episodes.pop(0)
                self.bytes_held -= old["frames"].nbytes + old["actions"].nbytes + old["rewards"].nbytes

    def __len__(self):
        return len(self._episodes)

    def sample(self, rng, batch):
        with self._lock:
            picks = [self._episodes[i] for i in rng.integers(0, len(self._episodes), batch)]
        frames, actions, rewards = [], [], []
        for ep in picks:
            t = rng.integers(0, len(ep["actions"]))
            frames.append(ep["frames"][t])
            actions.append(ep["actions"][t])
            rewards.append(ep["rewards"][t])
        return np.stack(frames), np.array(actions), np.array(rewards, dtype=np.float32)
