"""Latent diffusion (DDPM, epsilon prediction) on VAE latents with a small UNet, plus a per-layer timing table.

Modelled on HuguesTHOMAS/KPConv-PyTorch#22 (a torch.cuda.synchronize() placed "to measure time spent in each part
of the training loop" made training ~25% slower), Tramac/torchscope#2 (a layer profiler asked to "sync cuda before
getting time" in its per-layer hooks) and pytorch/pytorch#18012 ("Using torch.cuda.synchronize causes 6 times
slower"). The LayerTimer's default clock brackets every leaf module with torch.cuda.synchronize(): ~190 host waits
a forward, the GPU drains its queue before each layer and idles while the next one is launched.

    python train_ddpm.py                  # LayerTimer(clock="sync"): synchronize around every layer
    python train_ddpm.py --clock events   # the same hooks record CUDA events, read once per report
"""
from __future__ import annotations

import argparse
import math
import queue
import threading
import time

import torch
import torch.nn.functional as F
from layer_timer import LayerTimer
from torch import nn


class ResBlock(nn.Module):
    def __init__(self, ch: int, t_dim: int) -> None:
        super().__init__()
        self.norm1, self.conv1 = nn.GroupNorm(8, ch), nn.Conv2d(ch, ch, 3, padding=1)
        self.t_proj = nn.Linear(t_dim, ch)
        self.norm2, self.conv2 = nn.GroupNorm(8, ch), nn.Conv2d(ch, ch, 3, padding=1)
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        h = self.conv1(self.act(self.norm1(x)))
        h = h + self.t_proj(temb)[:, :, None, None]
        return x + self.conv2(self.act(self.norm2(h)))


class TinyUNet(nn.Module):
    def __init__(self, in_ch: int = 4, ch: int = 128, blocks: int = 4, t_dim: int = 256) -> None:
        super().__init__()
        self.t_dim = t_dim
        self.t_mlp = nn.Sequential(nn.Linear(t_dim, t_dim), nn.SiLU(), nn.Linear(t_dim, t_dim))
        self.stem = nn.Conv2d(in_ch, ch, 3, padding=1)
        self.down_blocks = nn.ModuleList(ResBlock(ch, t_dim) for _ in range(blocks))
        self.down = nn.Conv2d(ch, 2 * ch, 3, stride=2, padding=1)
        self.mid_blocks = nn.ModuleList(ResBlock(2 * ch, t_dim) for _ in range(blocks))
        self.up = nn.ConvTranspose2d(2 * ch, ch, 2, stride=2)
        self.up_blocks = nn.ModuleList(ResBlock(ch, t_dim) for _ in range(blocks))
        self.head = nn.Sequential(nn.GroupNorm(8, ch), nn.SiLU(), nn.Conv2d(ch, in_ch, 3, padding=1))

    def timestep_embedding(self, t: torch.Tensor) -> torch.Tensor:
        half = self.t_dim // 2
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device) / half)
        args = t.float()[:, None] * freqs[None]
        return torch.cat([torch.sin(args), torch.cos(args)], 1)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        temb = self.t_mlp(self.timestep_embedding(t))
        h = self.stem(x)
        for blk in self.down_blocks:
            h = blk(h, temb)
        skip = h
        h = self.down(h)
        for blk in self.mid_blocks:
            h = blk(h, temb)
        h = self.up(h) + skip
        for blk in self.up_blocks:
            h = blk(h, temb)
        return self.head(h)


class LatentFeeder(threading.Thread):
    """Serves batches of cached VAE latents (here: structured noise), held in pinned host memory."""

    def __init__(self, batch: int, size: int, pin: bool, out: queue.Queue, cached_batches: int = 32) -> None:
        super().__init__(name="latent-feeder", daemon=True)
        g = torch.Generator().manual_seed(0)
        self.cache = []
        for _ in range(cached_batches):
            lat = F.avg_pool2d(torch.randn(batch, 4, 2 * size, 2 * size, generator=g), 2) * 2.0
            self.cache.append(lat.pin_memory() if pin else lat)
        self.out = out

    def run(self) -> None:
        i = 0
        while True:
            self.out.put(self.cache[i % len(self.cache)])
            i += 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--clock", choices=("sync", "events"), default="sync")
    ap.add_argument("--report-every", type=int, default=50)
    args = ap.parse_args()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    batch, size, ch = (64, 32, 128) if cuda else (4, 16, 32)
    torch.manual_seed(0)

    model = TinyUNet(ch=ch).to(device)
    timer = LayerTimer(model, clock=args.clock)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.0)
    betas = torch.linspace(1e-4, 0.02, 1000, device=device)
    alphas_bar = torch.cumprod(1 - betas, 0)
    latents: queue.Queue = queue.Queue(maxsize=4)
    LatentFeeder(batch, size, cuda, latents).start()
    print(f"[ddpm] device={device} batch={batch} latents={size}x{size} clock={args.clock} "
          f"timed layers={sum(1 for n, m in model.named_modules() if n and not list(m.children()))}", flush=True)

    def train() -> None:
        step, t0 = 0, time.perf_counter()
        while True:
            x0 = latents.get().to(device, non_blocking=True)
            t = torch.randint(0, 1000, (x0.shape[0],), device=device)
            noise = torch.randn_like(x0)
            a = alphas_bar[t].sqrt()[:, None, None, None]
            xt = a * x0 + (1 - a * a).sqrt() * noise
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda):
                loss = F.mse_loss(model(xt, t).float(), noise)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % args.report_every == 0:
                rate = args.report_every * x0.shape[0] / (time.perf_counter() - t0)
                print(f"[ddpm] step {step} loss {loss.item():.4f} {rate:,.0f} img/s | slowest: {timer.report()}",
                      flush=True)
                t0 = time.perf_counter()

    trainer = threading.Thread(target=train, name="trainer")
    trainer.start()
    trainer.join()


if __name__ == "__main__":
    main()
