"""Constant-velocity Kalman filter over GNSS displacement series of glacier stations.

kalman_track is TorchScript-compiled: the per-epoch recurrence runs in the TorchScript
interpreter instead of Python.
"""
import torch


@torch.jit.script
def kalman_track(z: torch.Tensor, q: float, r: float) -> torch.Tensor:
    # z: (batch, steps, channels) noisy positions -> (batch, steps, 2 * channels)
    b, n, c = z.shape
    x = torch.zeros(b, c)
    v = torch.zeros(b, c)
    pxx = torch.ones(b, c)
    pxv = torch.zeros(b, c)
    pvv = torch.ones(b, c)
    out = []
    for t in range(n):
        x = x + v
        pxx = pxx + 2.0 * pxv + pvv + q
        pxv = pxv + pvv
        pvv = pvv + q
        s = pxx + r
        kx = pxx / s
        kv = pxv / s
        innov = z[:, t] - x
        x = x + kx * innov
        v = v + kv * innov
        pvv = pvv - kv * pxv
        pxv = pxv - kx * pxv
        pxx = pxx - kx * pxx
        out.append(torch.cat([x, v], dim=1))
    return torch.stack(out, dim=1)


class StationSampler:
    def __init__(self, st, seed=0):
        self.b, self.c, self.n = st["batch"], st["channels"], st["steps"]
        self.g = torch.Generator().manual_seed(seed)

    def batch(self):
        y = torch.randint(0, 3, (self.b,), generator=self.g)
        speed = (y.float() + 0.5)[:, None, None] * 0.05
        t = torch.arange(self.n, dtype=torch.float32)[None, :, None]
        z = speed * t + 0.3 * torch.randn(self.b, self.n, self.c, generator=self.g)
        track = kalman_track(z, 1e-3, 0.09)
        feats = torch.cat([track[:, -1], track.mean(1), track.std(1)], dim=1)
        return feats, y
