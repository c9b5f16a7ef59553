"""Synthetic rooms (shoebox, Sabine/Eyring decay) and their octave-band energy envelopes.

Each example is a room: dimensions, per-band wall absorption, the source/receiver distance. The simulator produces the
octave-band energy envelope of its impulse response (direct sound, a handful of early reflections from the
image-source model, the exponential late tail), on a 1 s grid, normalised to the direct sound, in linear power.
"""
import math

import torch

BANDS = (125, 250, 500, 1000, 2000, 4000)
N_BANDS = len(BANDS)
N_BINS = 128
WINDOW_S = 1.0
C_SOUND = 343.0
LN_1E6 = 6.0 * math.log(10.0)       # 60 dB in nepers of power
AIR = torch.tensor([0.0, 0.0, 0.0003, 0.0008, 0.0022, 0.0068])   # air absorption per metre, by band


class RoomSimulator:
    def __init__(self, batch, seed=0):
        self.batch = batch
        self.gen = torch.Generator().manual_seed(seed)
        self.t = torch.linspace(0.0, WINDOW_S, N_BINS)

    def _uniform(self, *shape, lo, hi):
        return torch.rand(*shape, generator=self.gen) * (hi - lo) + lo

    def sample(self):
        """-> (envelopes [B, bands*bins], targets [B, bands] = log RT60, features [B, 4])"""
        b = self.batch
        dims = self._uniform(b, 3, lo=2.5, hi=9.0)
        dims[:, 2] = self._uniform(b, lo=2.4, hi=4.0)
        volume = dims.prod(1)
        surface = 2 * (dims[:, 0] * dims[:, 1] + dims[:, 0] * dims[:, 2] + dims[:, 1] * dims[:, 2])
        base = self._uniform(b, 1, lo=0.12, hi=0.36)
        tilt = self._uniform(b, 1, lo=0.00, hi=0.08)
        alpha = (base + tilt * torch.arange(N_BANDS)).clamp(0.05, 0.95)
        # Eyring reverberation time per band, with air absorption
        rt60 = 0.161 * volume[:, None] / (-surface[:, None] * torch.log1p(-alpha) + 4 * AIR * volume[:, None])
        dist = self._uniform(b, 1, lo=1.0, hi=6.0)
        t = self.t
        delay = dist / C_SOUND
        decay = torch.exp(-LN_1E6 * (t[None, None, :] - delay[..., None]).clamp(min=0.0) / rt60[..., None])
        # early reflections: six first-order images, each a short burst on top of the tail
        early = torch.zeros(b, 1, N_BINS)
        for k in range(6):
            d_img = dist + dims[:, k % 3:k % 3 + 1] * (1.0 + 0.5 * k)
            idx = ((d_img / C_SOUND) / WINDOW_S * (N_BINS - 1)).round().long().clamp(max=N_BINS - 1)
            early.scatter_add_(2, idx[..., None], (dist / d_img)[..., None] ** 2)
        envelope = decay * (1.0 + early * (1.0 - alpha[..., None]))
        feats = torch.cat([volume[:, None].log(), surface[:, None].log(), dist.log(), base], 1)
        return envelope.reshape(b, -1), rt60.log(), feats
