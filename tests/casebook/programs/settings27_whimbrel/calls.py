"""Synthetic nocturnal flight calls (pitch contours of 24 species) and the two-view augmenter
that feeds a rank's contrastive trainer from a background thread."""
import queue
import threading

import torch


class CallBank:
    def __init__(self, species, length, seed):
        g = torch.Generator().manual_seed(seed)
        t = torch.linspace(0.0, 1.0, length)
        start = 2.0 + 6.0 * torch.rand(species, 1, generator=g)          # kHz
        sweep = 4.0 * (torch.rand(species, 1, generator=g) - 0.5)
        wobble = 0.6 * torch.rand(species, 1, generator=g)
        rate = 3.0 + 9.0 * torch.rand(species, 1, generator=g)
        self.contours = start + sweep * t + wobble * torch.sin(2 * torch.pi * rate * t)
        env = torch.exp(-((t - 0.5) ** 2) / 0.05)
        self.envelopes = env.expand(species, length).clone()
        self.species = species
        self.length = length

    def draw(self, n, g):
        y = torch.randint(0, self.species, (n,), generator=g)
        return torch.stack([self.contours[y], self.envelopes[y]], dim=1), y


def augment(x, g):
    n, _, length = x.shape
    shift = int(torch.randint(-length // 8, length // 8 + 1, (1,), generator=g))
    x = torch.roll(x, shift, dims=2)
    gain = 0.7 + 0.6 * torch.rand(n, 1, 1, generator=g)
    x = x * gain + 0.15 * torch.randn(x.shape, generator=g)
    keep = (torch.rand(n, 1, length, generator=g) > 0.1).float()     # dropped frames
    return x * keep


class ViewFeeder(threading.Thread):
    """Draws a batch of calls and makes two augmented views of each, ahead of the trainer."""

    def __init__(self, bank, batch, depth, seed):
        super().__init__(name="view-feeder", daemon=True)
        self.bank, self.batch = bank, batch
        self.out = queue.Queue(maxsize=depth)
        self.g = torch.Generator().manual_seed(seed)
        self.made = 0
        self._count_lock = threading.Lock()

    def run(self):
        with torch.no_grad():
            while True:
                x, y = self.bank.draw(self.batch, self.g)
                v1, v2 = augment(x, self.g), augment(x, self.g)
                self.out.put((v1, v2, y))
                with self._count_lock:
                    self.made += 1
