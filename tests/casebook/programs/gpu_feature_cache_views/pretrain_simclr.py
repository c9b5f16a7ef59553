"""SimCLR-style contrastive pretraining of a small CNN on 64x64 crops, with a kNN monitor fed by a per-sample
embedding cache.

Modelled on pytorch/pytorch#50432 ("if you take a slice of a tensor and then lose the reference to the original,
then the original disappears from the GC while still being tracked by PyTorch ... add a .clone() after your
slice") and konstmish/prodigy#22 ("Slicing creates a view to the original data, keeping the original data in
memory"). The model returns one tensor [backbone features (1024) | projection (128)]; the cache stores
`out[j, 1024:]` for each sample: a view that keeps its step's whole (256, 1152) output alive, 9x what the cache
means to hold. GPU memory grows by 0.6-1.2 MB a step (bf16 or fp32 output) through the first epoch of 1.28M images
(3-6 GB), and a step's block is only freed once all 256 of its samples come round again, near the end of the next
epoch (peak 6-12 GB; the process is capped at 20 GiB with set_per_process_memory_fraction).

    python pretrain_simclr.py                   # --cache dict: a dict of row views of the step's output
    python pretrain_simclr.py --cache tensor    # a preallocated (N, 128) table written with index_copy_
"""
import argparse
import queue
import threading
import time

import torch
import torch.nn.functional as F
from feature_cache import DictCache, TensorCache
from torch import nn

FEAT, PROJ = 1024, 128


class Encoder(nn.Module):
    def __init__(self, width=64):
        super().__init__()

        def stage(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(cout),
                                 nn.ReLU(inplace=True), nn.Conv2d(cout, cout, 3, padding=1, bias=False),
                                 nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

        self.backbone = nn.Sequential(stage(3, width), stage(width, 2 * width), stage(2 * width, 4 * width),
                                      stage(4 * width, 8 * width), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                      nn.Linear(8 * width, FEAT))
        self.projector = nn.Sequential(nn.Linear(FEAT, 1024), nn.ReLU(inplace=True), nn.Linear(1024, PROJ))

    def forward(self, x):
        h = self.backbone(x)
        return torch.cat([h, F.normalize(self.projector(h), dim=1)], 1)  # [features | embedding]


def nt_xent(z1, z2, tau=0.2):
    z = torch.cat([z1, z2])
    sim = z @ z.T / tau
    sim.fill_diagonal_(float("-inf"))
    n = z1.shape[0]
    labels = torch.cat([torch.arange(n, 2 * n, device=z.device), torch.arange(0, n, device=z.device)])
    return F.cross_entropy(sim, labels)


def epoch_indices(n_images, batch, g):
    """Shuffled, without replacement: every index once per epoch."""
    while True:
        perm = torch.randperm(n_images, generator=g)
        for k in range(0, n_images - batch + 1, batch):
            yield perm[k:k + batch]


def views_producer(n_images, batch, pin, out, seed=0):
    """Two random crops + flips of each sampled image; images are synthesised from their index."""
    g = torch.Generator().manual_seed(seed)
    for idx in epoch_indices(n_images, batch, g):
        base = torch.sin(idx[:, None, None, None].float() * torch.linspace(0.1, 3.0, 72)[None, None, :, None]
                         + torch.linspace(0, 6.28, 72)[None, None, None, :] + torch.arange(3)[None, :, None, None])
        i1, j1, i2, j2 = (int(v) for v in torch.randint(0, 8, (4,), generator=g))
        v1, v2 = base[:, :, i1:i1 + 64, j1:j1 + 64], base[:, :, i2:i2 + 64, j2:j2 + 64].flip(3)
        v1 = v1 + 0.1 * torch.randn(v1.shape, generator=g)
        v2 = v2 + 0.1 * torch.randn(v2.shape, generator=g)
        if pin:
            v1, v2 = v1.pin_memory(), v2.pin_memory()
        out.put((idx.tolist(), v1, v2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--cache", choices=("dict", "tensor"), default="dict")
    ap.add_argument("--log-every", type=int, default=50)
    args = ap.parse_args()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    n_images, batch, width = (1_281_167, 256, 64) if gpu else (20_000, 16, 8)
    if gpu:
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, 20 * 2**30 / total), torch.cuda.current_device())
    torch.manual_seed(0)
    model = Encoder(width).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.9, weight_decay=1e-6)
    cache = DictCache() if args.cache == "dict" else TensorCache(n_images, PROJ, device)
    views = queue.Queue(maxsize=6)
    threading.Thread(target=views_producer, args=(n_images, batch, gpu, views), name="views", daemon=True).start()
    gen = torch.Generator().manual_seed(1)
    print(f"simclr: {n_images:,} images, batch {batch}, cache={args.cache}", flush=True)

    step, t0 = 0, time.time()
    while True:
        idx, v1, v2 = views.get()
        v1 = v1.to(device, non_blocking=True).to(memory_format=torch.channels_last)
        v2 = v2.to(device, non_blocking=True).to(memory_format=torch.channels_last)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=gpu):
            out1, out2 = model(v1), model(v2)
        loss = nt_xent(out1[:, FEAT:].float(), out2[:, FEAT:].float())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        cache.store(idx, out1.detach()[:, FEAT:])
        step += 1
        if step % args.log_every == 0:
            mem = torch.cuda.memory_allocated(device) / 2**30 if gpu else 0.0
            bank = cache.sample(512, gen)
            spread = bank.float().std(0).mean().item()
            print(f"step {step} loss {loss.item():.3f} cache {len(cache):,} spread {spread:.3f} "
                  f"alloc {mem:.2f} GiB {args.log_every / (time.time() - t0):.2f} steps/s", flush=True)
            t0 = time.time()


if __name__ == "__main__":
    main()
