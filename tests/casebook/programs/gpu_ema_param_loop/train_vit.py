"""Image classification with a small ViT on 32x32 images, an EMA copy of the weights updated after every step.

Modelled on huggingface/pytorch-image-models#1553 ("the EMA used here is pretty slow"; one out-of-place update per
tensor), open-mmlab/mmengine#281 and #519 (EMA update speed), ecmwf/WeatherGenerator#2551 (a per-parameter Python
EMA loop: ~100 ms an update, ~10 ms fused) and pytorch/pytorch#71683 (a foreach lerp "saves the number of kernel
calls"). Here ModelEmaLoop walks the ~300 state_dict entries of a 24-block ViT after each step, with four small
kernels and a temporary per entry: about 1,200 tiny launches that the GPU waits on while Python issues them.

    python train_vit.py                      # --ema loop (as written)
    python train_vit.py --ema foreach        # the same EMA, one _foreach_lerp_ over all float tensors
"""
import argparse
import queue
import threading
import time

import torch
import torch.nn.functional as F
from ema import ModelEmaForeach, ModelEmaLoop
from torch import nn


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, c))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    def __init__(self, depth=24, dim=256, heads=4, patch=4, classes=100):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, (32 // patch) ** 2 + 1, dim) * 0.02)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, img):
        x = self.patch(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x[:, 0]))


def loader(batch, out):
    """Random-crop + flip augmentation of a synthetic uint8 image set, on the host."""
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (4096, 3, 36, 36), dtype=torch.uint8, generator=g)
    labels = torch.randint(0, 100, (4096,), generator=g)
    while True:
        idx = torch.randint(0, 4096, (batch,), generator=g)
        i, j = (int(v) for v in torch.randint(0, 5, (2,), generator=g))
        x = images[idx, :, i:i + 32, j:j + 32]
        if torch.rand(1, generator=g).item() < 0.5:
            x = x.flip(3)
        out.put((x.contiguous(), labels[idx]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--ema", choices=("loop", "foreach"), default="loop")
    ap.add_argument("--log-every", type=int, default=50)
    args = ap.parse_args()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    batch, depth, dim = (128, 24, 256) if gpu else (16, 6, 64)
    torch.manual_seed(0)
    model = ViT(depth=depth, dim=dim).to(device)
    ema = (ModelEmaLoop if args.ema == "loop" else ModelEmaForeach)(model)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.05, fused=gpu)
    mean = torch.tensor([0.5, 0.5, 0.5], device=device).view(1, 3, 1, 1) * 255
    batches = queue.Queue(maxsize=8)
    threading.Thread(target=loader, args=(batch, batches), name="augment", daemon=True).start()
    print(f"vit depth={depth} dim={dim} batch={batch} ema={args.ema} "
          f"state_dict entries={len(model.state_dict())}", flush=True)

    def fit():
        step, seen, t0 = 0, 0, time.time()
        while True:
            x, y = batches.get()
            x = (x.to(device, non_blocking=True).float() - mean) / 64.0
            y = y.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=gpu):
                loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            ema.update(model)
            step += 1
            seen += x.shape[0]
            if step % args.log_every == 0:
                dt = time.time() - t0
                print(f"epoch 0 step {step} loss {loss.item():.3f} {seen / dt:,.0f} img/s", flush=True)
                seen, t0 = 0, time.time()

    t = threading.Thread(target=fit, name="fit")
    t.start()
    t.join()


if __name__ == "__main__":
    main()
