"""ViT-style patch transformer fine-tuning with mixed precision selected by --precision (default bf16).

Modelled on intel/auto-round#2393 ("Apply autocast only when mixed precision is enabled": an inverted condition
left a run that asked for mixed precision computing outside autocast) and Nerogar/OneTrainer#1481 (autocast was
silently disabled when the configured dtypes matched): the Precision helper predates bf16 support, so its
`enabled` test only knows "fp16"; with --precision bf16 the autocast context is entered with enabled=False and
every matmul runs in fp32 (the cuBLAS default, no TF32) instead of bf16 on the tensor cores.

  python vit_finetune.py                 # --precision bf16 (as run): autocast silently off
  python vit_finetune.py --amp force     # the helper's override, autocast on with the chosen dtype
"""
import argparse
import math
import queue
import threading
import time

import torch
import torch.nn.functional as F
from torch import nn

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


class Precision:
    def __init__(self, name, device_type, mode="auto"):
        self.dtype = DTYPES[name]
        self.device_type = device_type
        # Written when fp16 was the only mixed-precision option; bf16 was added to DTYPES later.
        self.enabled = (name == "fp16") if mode == "auto" else True

    def autocast(self):
        return torch.autocast(device_type=self.device_type, dtype=self.dtype, enabled=self.enabled)

    def loss_region(self):
        """The loss always in fp32, whatever the policy."""
        return torch.autocast(device_type=self.device_type, enabled=False)


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        return self.proj((a.softmax(-1) @ v).transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.n1, self.attn = nn.LayerNorm(dim), Attention(dim, heads)
        self.n2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))


class PatchTransformer(nn.Module):
    def __init__(self, patch_dim, dim, depth, heads, classes, patches):
        super().__init__()
        self.embed = nn.Linear(patch_dim, dim)
        self.pos = nn.Parameter(torch.zeros(1, patches, dim))
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(depth)])
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, classes)

    def forward(self, patches):
        return self.head(self.norm(self.blocks(self.embed(patches) + self.pos)).mean(1))


def augment_worker(out, batch, patches, patch_dim, classes, device):
    g = torch.Generator(device=device).manual_seed(0)
    while True:
        x = torch.rand(batch, patches, patch_dim, device=device, generator=g)
        x = (x - 0.5) / 0.25  # normalise
        out.put((x, torch.randint(0, classes, (batch,), device=device, generator=g)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--precision", choices=sorted(DTYPES), default="bf16")
    ap.add_argument("--amp", choices=("auto", "force"), default="auto")
    args = ap.parse_args()
    dev = torch.device(args.device)
    if dev.type == "cuda":
        batch, patches, patch_dim, dim, depth, heads = 64, 196, 768, 1024, 6, 16
    else:
        batch, patches, patch_dim, dim, depth, heads = 8, 16, 48, 96, 2, 4
    classes = 100
    prec = Precision(args.precision, dev.type, args.amp)
    print(f"precision {args.precision}: autocast enabled={prec.enabled} dtype={prec.dtype}", flush=True)
    model = PatchTransformer(patch_dim, dim, depth, heads, classes, patches).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.05)
    q = queue.Queue(maxsize=4)
    threading.Thread(target=augment_worker, args=(q, batch, patches, patch_dim, classes, dev), name="augment",
                     daemon=True).start()

    def train():
        step, t0 = 0, time.time()
        while True:
            x, y = q.get()
            with prec.autocast():
                logits = model(x)
            with prec.loss_region():
                loss = F.cross_entropy(logits.float(), y, label_smoothing=0.1)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            if step % 10 == 0:
                print(f"train: step {step} loss {loss.item():.4f} img/s {10 * batch / (time.time() - t0):.0f}",
                      flush=True)
                t0 = time.time()

    t = threading.Thread(target=train, name="finetune")
    t.start()
    t.join()


if __name__ == "__main__":
    main()
