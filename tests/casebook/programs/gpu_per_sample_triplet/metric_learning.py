#!/usr/bin/env python3
# Metric learning for product images (embeddings precomputed by a frozen backbone), triplet loss with
# batch-hard mining.
#
# Modelled on engichang1467/Open-Rig3R#33 ("Encoder loops over views one at a time, starving the GPU (5.2x
# slower than folding)") and turboderp/exllama#234 (batched sampling loops over the batch: "the loop sends many
# small cuda kernels"): the hard negative of each anchor is mined in a Python loop over the batch, a handful of
# tiny kernels per anchor, forward and backward.
#
#   ./metric_learning.py                   # per-anchor mining loop (as written)
#   ./metric_learning.py --batched-mining  # one distance matrix for the whole batch
import argparse
import queue
import time
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn.functional as F

MARGIN = 0.2
BATCH, CLASSES, FEAT, HIDDEN, EMB = 512, 64, 1024, 4096, 256

parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
parser.add_argument("--batched-mining", action="store_true")
args = parser.parse_args()
torch.backends.cuda.matmul.allow_tf32 = True  # the MLP head's fp32 matmuls on the tensor cores (Ampere and later)
dev = torch.device(args.device)
if dev.type == "cpu":
    BATCH, FEAT, HIDDEN, EMB = 64, 128, 256, 64

batches = queue.Queue(maxsize=8)


# Class prototypes stand in for the cached backbone features; a batch is prototypes plus augmentation noise.
prototypes = torch.randn(CLASSES, FEAT, device=dev)


def sample_batch(g):
    labels = torch.randint(0, CLASSES, (BATCH,), device=dev, generator=g)
    feats = prototypes[labels] + 2.0 * torch.randn(BATCH, FEAT, device=dev, generator=g)
    return feats, labels


def producer():
    g = torch.Generator(device=dev).manual_seed(0)
    while True:
        batches.put(sample_batch(g))


head = torch.nn.Sequential(torch.nn.Linear(FEAT, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, HIDDEN),
                           torch.nn.ReLU(), torch.nn.Linear(HIDDEN, EMB)).to(dev)
opt = torch.optim.SGD(head.parameters(), lr=0.05, momentum=0.9)


def triplet_loss_loop(emb, labels):
    loss = emb.new_zeros(())
    for i in range(emb.shape[0]):
        d = (emb[i] - emb).pow(2).sum(-1)
        same = labels == labels[i]
        hardest_pos = torch.where(same, d, torch.zeros_like(d)).max()
        hardest_neg = torch.where(same, torch.full_like(d, 1e4), d).min()
        loss = loss + F.relu(hardest_pos - hardest_neg + MARGIN)
    return loss / emb.shape[0]


def triplet_loss_batched(emb, labels):
    d = torch.cdist(emb, emb).pow(2)
    same = labels[:, None] == labels[None, :]
    hardest_pos = torch.where(same, d, torch.zeros_like(d)).max(1).values
    hardest_neg = torch.where(same, torch.full_like(d, 1e4), d).min(1).values
    return F.relu(hardest_pos - hardest_neg + MARGIN).mean()


pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loader")
pool.submit(producer)
loss_fn = triplet_loss_batched if args.batched_mining else triplet_loss_loop
print(f"mining={'batched' if args.batched_mining else 'per-anchor'} batch={BATCH} device={dev}", flush=True)
step, t0 = 0, time.time()
while True:
    feats, labels = batches.get()
    emb = F.normalize(head(feats), dim=-1)
    loss = loss_fn(emb, labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    if step % 20 == 0:
        print(f"step {step} triplet {loss.item():.4f} {20 / (time.time() - t0):.2f} step/s", flush=True)
        t0 = time.time()
