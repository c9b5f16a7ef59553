"""MoCo-style contrastive pre-training of a feature projector, compiled with mode="reduce-overhead" (CUDA graphs)
to cut the per-step launch overhead of a small model. A loader thread makes the two augmented views.

Modelled on pytorch/pytorch#117281 ("Make cuda graphs skipped messages more informative": a user wondering why
"skipped due to mutated inputs") and #121861/#103985 (cudagraph trees skip a graph that mutates an input that is
neither a parameter/buffer nor a prior graph output): the negatives queue is a plain tensor passed to the
compiled step, which enqueues the new keys in place, so inductor skips CUDA graphs for the whole step and it runs
as ordinary kernels.

  python moco_pretrain.py                   # enqueue inside the compiled step (as written)
  python moco_pretrain.py --enqueue-eager   # compiled step is pure; the queue is updated after it, eagerly
"""
import argparse
import queue
import threading
import time

import torch
import torch.nn.functional as F
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
p.add_argument("--enqueue-eager", action="store_true")
args = p.parse_args()
device = torch.device(args.device)
GPU = device.type == "cuda"
FEAT, DIM, BATCH, QUEUE, TAU = (1024, 256, 256, 16384, 0.07) if GPU else (64, 32, 32, 512, 0.07)


def projector():
    return nn.Sequential(nn.Linear(FEAT, 2048 if GPU else 128), nn.ReLU(), nn.Linear(2048 if GPU else 128, DIM))


encoder_q = projector().to(device)
encoder_k = projector().to(device).requires_grad_(False)
encoder_k.load_state_dict(encoder_q.state_dict())
negatives = F.normalize(torch.randn(QUEUE, DIM, device=device), dim=1)
opt = torch.optim.SGD(encoder_q.parameters(), lr=0.03, momentum=0.9)


def contrastive(xq, xk, bank):
    q = F.normalize(encoder_q(xq), dim=1)
    with torch.no_grad():
        k = F.normalize(encoder_k(xk), dim=1)
    logits = torch.cat([(q * k).sum(1, keepdim=True), q @ bank.clone().T], dim=1) / TAU
    loss = F.cross_entropy(logits, torch.zeros(len(q), dtype=torch.long, device=q.device))
    return loss, k


def contrastive_and_enqueue(xq, xk, bank):
    loss, k = contrastive(xq, xk, bank)
    bank.copy_(torch.cat([k, bank[:-k.shape[0]]]))  # enqueue newest keys, drop the oldest
    return loss


def views(out):
    g = torch.Generator(device=device).manual_seed(0)
    base = torch.randn(4096, FEAT, device=device, generator=g)
    while True:
        idx = torch.randint(0, base.shape[0], (BATCH,), device=device, generator=g)
        x = base[idx]
        out.put((x + 0.1 * torch.randn_like(x), x + 0.1 * torch.randn_like(x)))


@torch.no_grad()
def momentum_update(m=0.99):
    for pk, pq in zip(encoder_k.parameters(), encoder_q.parameters()):
        pk.mul_(m).add_(pq.detach(), alpha=1 - m)


if __name__ == "__main__":
    step_fn = torch.compile(contrastive if args.enqueue_eager else contrastive_and_enqueue, mode="reduce-overhead")
    batches = queue.Queue(maxsize=8)
    threading.Thread(target=views, args=(batches,), name="view-maker", daemon=True).start()
    print(f"compiling the contrastive step (reduce-overhead), enqueue {'eager' if args.enqueue_eager else 'in graph'}",
          flush=True)
    step, t0 = 0, time.time()
    # CUDA graph trees want the main thread on this torch: the step runs here, the views come from a thread.
    while True:
        xq, xk = batches.get()
        if GPU:
            torch.compiler.cudagraph_mark_step_begin()
        if args.enqueue_eager:
            loss, k = step_fn(xq, xk, negatives)
            k = k.clone()  # a graph output: the next replay reuses its memory
        else:
            loss = step_fn(xq, xk, negatives)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        momentum_update()
        if args.enqueue_eager:  # after backward: the graph saved the queue for it
            with torch.no_grad():
                negatives.copy_(torch.cat([k, negatives[:-k.shape[0]]]))
        step += 1
        if step % 100 == 0:
            print(f"moco step {step} loss {loss.item():.3f} {100 / (time.time() - t0):.0f} it/s", flush=True)
            t0 = time.time()
