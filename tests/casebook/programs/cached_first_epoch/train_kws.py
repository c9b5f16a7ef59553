"""Keyword spotting on log-mel features. Clips come from the feature service (one round trip per batch), so the
dataset memoises each clip's features the first time it is read: the first epoch fills the cache (16000 clips x
32 KB), later epochs read it. A loader thread batches ahead of the training loop through a small queue."""
import queue
import threading
import time

import numpy as np
import torch
from torch import nn

N_CLIPS = 16000
N_MELS, N_FRAMES = 64, 128
SERVICE_RTT_S = 0.06


class CachedFeatures:
    def __init__(self, n_clips, seed=0):
        self.n = n_clips
        self.seed = seed
        self._cache = {}

    def _featurize(self, idx):
        rng = np.random.default_rng(self.seed + idx)
        wave = rng.standard_normal(N_FRAMES * 64).astype(np.float32)
        frames = wave.reshape(N_FRAMES, 64)
        spec = np.abs(np.fft.rfft(frames, n=2 * N_MELS - 2, axis=1))[:, :N_MELS].astype(np.float32)
        return np.log1p(spec), int(idx % 12)

    def fetch(self, indices):
        missing = [i for i in indices if i not in self._cache]
        if missing:
            time.sleep(SERVICE_RTT_S)  # one round trip to the feature service for the batch
            for i in missing:
                self._cache[i] = self._featurize(i)
        return [self._cache[i] for i in indices]


def loader(ds, out, batch=32):
    order = np.random.default_rng(1)
    while True:
        for start in range(0, ds.n, batch):
            idx = order.integers(0, ds.n, batch) if len(ds._cache) >= ds.n else range(start, start + batch)
            items = ds.fetch([int(i) for i in idx])
            x = torch.from_numpy(np.stack([f for f, _ in items]))
            y = torch.tensor([label for _, label in items])
            out.put((x, y))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 8, 5, stride=2), nn.ReLU(), nn.Conv2d(8, 16, 5, stride=2), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(4))
        self.fc = nn.Linear(16 * 16, 12)

    def forward(self, x):
        return self.fc(self.conv(x[:, None]).flatten(1))


def main():
    torch.set_num_threads(1)
    ds = CachedFeatures(N_CLIPS)
    batches = queue.Queue(maxsize=4)
    threading.Thread(target=loader, args=(ds, batches), name="feature-loader", daemon=True).start()
    model = SmallCNN()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    t0 = time.time()
    for step in range(1, 10**9):
        x, y = batches.get()
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 25 == 0:
            print(f"[{time.time() - t0:5.1f}s] step {step} loss {loss.item():.3f} cached {len(ds._cache)}/{ds.n}",
                  flush=True)


if __name__ == "__main__":
    main()
