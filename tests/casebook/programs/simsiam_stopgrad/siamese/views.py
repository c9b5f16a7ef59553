"""Two augmented views per sample, produced by a background thread (stands for the image decode/augment)."""
import queue
import threading

import torch


class TwoViewStream:
    def __init__(self, n_classes=10, dim=128, batch=128, depth=4, seed=0):
        self.queue = queue.Queue(maxsize=depth)
        g = torch.Generator().manual_seed(seed)
        self.prototypes = torch.randn(n_classes, dim, generator=g)
        self.batch, self.dim, self.n_classes = batch, dim, n_classes
        self.thread = threading.Thread(target=self._produce, name="augment-worker", daemon=True)

    def _augment(self, x, g):
        mask = (torch.rand(x.shape, generator=g) > 0.2).float()
        return x * mask * (1 + 0.1 * torch.randn(x.shape, generator=g)) + 0.3 * torch.randn(x.shape, generator=g)

    def _produce(self):
        g = torch.Generator().manual_seed(1)
        while True:
            y = torch.randint(0, self.n_classes, (self.batch,), generator=g)
            x = self.prototypes[y] + 0.5 * torch.randn(self.batch, self.dim, generator=g)
            self.queue.put((self._augment(x, g), self._augment(x, g), y))

    def start(self):
        self.thread.start()
        return self

    def __iter__(self):
        while True:
            yield self.queue.get()
