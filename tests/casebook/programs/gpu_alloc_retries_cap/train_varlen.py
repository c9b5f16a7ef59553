"""Sequence-to-vector model on variable-length batches, sharing the GPU with another job: the run caps itself with
torch.cuda.set_per_process_memory_fraction, a prefetch thread puts the next batch on the GPU ahead of time, and a
batch that runs out of memory is skipped (fairseq's "OOM: skipping batch" recipe).

Modelled on pytorch/pytorch#35901 ("OOM error where ~50% of the GPU RAM cannot be utilised/reserved": the cache
split up by differently sized requests, cudaMalloc failing, every cached block freed and the allocation retried)
and FalkonML/falkon#22 ("With memory pressure allocations may fail due to fragmentation"): every batch has a
different length, so the cached blocks rarely fit the next request; near the cap the allocator frees its whole
cache and retries (num_alloc_retries), and each retry synchronises the device and calls cudaFree/cudaMalloc again.

  python train_varlen.py               # raw lengths (as run)
  python train_varlen.py --pad-to-max  # every batch padded to the longest length: one set of sizes
"""
import argparse
import collections
import queue
import random
import threading
import time

import torch
import torch.nn.functional as F
from torch import nn

CAP_GIB = 6.0


class Encoder(nn.Module):
    def __init__(self, d_in, width, depth):
        super().__init__()
        self.inp = nn.Linear(d_in, width)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
            for _ in range(depth))
        self.out = nn.Linear(width, 1)

    def forward(self, x, lengths):
        h = self.inp(x)
        for b in self.blocks:
            h = h + b(h)
        mask = (torch.arange(x.shape[1], device=x.device)[None, :] < lengths[:, None]).unsqueeze(-1)
        return self.out((h * mask).sum(1) / lengths[:, None]).squeeze(-1), h


def prefetch(out, batch, max_len, d_in, device, pad_to_max):
    rng = random.Random(0)
    while True:
        longest = rng.randint(max_len // 16, max_len)  # batches come from length-sorted shards
        lengths = [rng.randint(longest // 2, longest) for _ in range(batch)]
        t = max_len if pad_to_max else max(lengths)
        while True:
            try:
                x = torch.randn(batch, t, d_in, device=device)
                break
            except torch.cuda.OutOfMemoryError:  # the trainer holds the cap for now: try again shortly
                time.sleep(0.05)
        out.put((x, torch.tensor(lengths, device=device, dtype=torch.float32)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--pad-to-max", action="store_true")
    args = ap.parse_args()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    if gpu:
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(CAP_GIB * 2**30 / total, torch.cuda.current_device())
        batch, max_len, d_in, width, depth = 12, 2048, 1024, 1024, 4
    else:
        batch, max_len, d_in, width, depth = 4, 128, 32, 64, 2
    model = Encoder(d_in, width, depth).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    q = queue.Queue(maxsize=2)
    threading.Thread(target=prefetch, args=(q, batch, max_len, d_in, device, args.pad_to_max), name="prefetch",
                     daemon=True).start()
    spikes = collections.deque(maxlen=4)  # last hidden-state norms per token, for the loss-spike report

    def train():
        step, skipped, t0 = 0, 0, time.time()
        loss = torch.zeros((), device=device)
        while True:
            x, lengths = q.get()
            try:
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=gpu):
                    pred, hidden = model(x, lengths)
                loss = F.mse_loss(pred.float(), lengths / max_len)
                loss.backward()
                opt.step()
                spikes.append(hidden.detach().float().norm(dim=-1))
            except torch.cuda.OutOfMemoryError:
                pred = hidden = None
                skipped += 1
                print(f"| WARNING: ran out of memory on a batch of {tuple(x.shape)}, skipping batch", flush=True)
            opt.zero_grad(set_to_none=True)
            step += 1
            if step % 20 == 0:
                mem = ""
                if gpu:
                    stats = torch.cuda.memory_stats(device)
                    mem = (f" reserved {stats['reserved_bytes.all.current'] / 2**30:.2f} GiB"
                           f" retries {stats['num_alloc_retries']}")
                print(f"| epoch 001 | step {step} | loss {loss.item():.4f} | oom skipped {skipped} |"
                      f" {20 / (time.time() - t0):.1f} it/s |{mem}", flush=True)
                t0 = time.time()

    t = threading.Thread(target=train, name="trainer")
    t.start()
    t.join()


if __name__ == "__main__":
    main()
