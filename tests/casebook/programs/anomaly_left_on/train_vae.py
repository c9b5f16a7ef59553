"""Variational autoencoder on synthetic 8x8 patches.

Anomaly detection was switched on while chasing a NaN in the KL term two weeks ago.
"""
import time

import torch
import torch.nn.functional as F

torch.autograd.set_detect_anomaly(True)


class VAE(torch.nn.Module):
    def __init__(self, d=64, z=8):
        super().__init__()
        self.enc = torch.nn.Sequential(torch.nn.Linear(d, 96), torch.nn.ELU(), torch.nn.Linear(96, 2 * z))
        self.dec = torch.nn.Sequential(torch.nn.Linear(z, 96), torch.nn.ELU(), torch.nn.Linear(96, d))

    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, dim=-1)
        zs = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return self.dec(zs), mu, logvar


def elbo(x, recon, mu, logvar):
    rec = F.mse_loss(recon, x, reduction="sum") / x.shape[0]
    kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / x.shape[0]
    return rec + kl


def main():
    torch.set_num_threads(1)
    model = VAE()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    it, t0 = 0, time.time()
    while True:
        x = torch.rand(32, 64)
        loss = elbo(x, *model(x))
        opt.zero_grad()
        loss.backward()
        opt.step()
        it += 1
        if it % 100 == 0:
            print(f"iter {it} elbo {loss.item():.2f} ({it / (time.time() - t0):.0f} it/s)", flush=True)


if __name__ == "__main__":
    main()
