"""Click-through ranker training; the epoch's scores and clicks are kept to compute the epoch AUC at its end.

Modelled on the reports of GPU memory that keeps rising with every step because tensors on the device are kept
across iterations: pytorch/pytorch#1840 ("gpu memory usage is ceaselessly grow up": a running sum that kept every
step), jokester-zzz/SSA-SC#2 ("Continuous rising of GPU memory" from losses kept as tensors) and
BatsResearch/labelmodels#4 (a running loss holding each batch): here each step appends its [256, 512] scores
and clicks, on the GPU, to lists that are only read at the end of an epoch of 200,000 steps. The process caps
itself at 16 GiB (the GPU is shared); near the cap it stops keeping them (a patch added after the first OOM).

  python rank_train.py             # as run
  python rank_train_streaming.py   # the AUC from fixed-size score histograms (the copy that replaced it)
"""
import argparse
import queue
import threading
import time

import torch
import torch.nn.functional as F

from ranker import Ranker, impressions

EPOCH_STEPS = 200_000
CAP_GIB = 16


def auc(scores, clicks):
    order = scores.argsort()
    ranks = torch.empty_like(order, dtype=torch.float64)
    ranks[order] = torch.arange(1, len(order) + 1, device=scores.device, dtype=torch.float64)
    pos = clicks
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg).clamp(min=1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    if gpu:
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(CAP_GIB * 2**30 / total, torch.cuda.current_device())
    n_items, dim, hidden, batch = (500_000, 256, 4096, 256) if gpu else (20_000, 32, 64, 64)
    model = Ranker(n_items, dim, hidden).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    q = queue.Queue(maxsize=4)
    threading.Thread(target=impressions, args=(q, n_items, batch, device), name="impressions", daemon=True).start()

    def train():
        epoch_scores, epoch_clicks, keeping = [], [], True
        step, t0 = 0, time.time()
        while True:
            history, candidates, clicks = q.get()
            scores = model(history, candidates)
            loss = F.binary_cross_entropy_with_logits(scores, clicks)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if keeping:
                epoch_scores.append(scores.detach())
                epoch_clicks.append(clicks.bool())
            step += 1
            if keeping and gpu and step % 50 == 0 and torch.cuda.memory_reserved(device) > 0.9 * CAP_GIB * 2**30:
                keeping = False  # added after the first OOM: the AUC covers the steps kept so far
                print(f"memory cap near: keeping no more predictions this epoch ({len(epoch_scores)} kept)", flush=True)
            if step % EPOCH_STEPS == 0:
                value = auc(torch.cat([t.cpu() for t in epoch_scores]).flatten(),
                            torch.cat([t.cpu() for t in epoch_clicks]).flatten())
                print(f"epoch AUC {value:.4f} over {len(epoch_scores)} steps", flush=True)
                epoch_scores, epoch_clicks, keeping = [], [], True
            if step % 100 == 0:
                held = sum(t.numel() * t.element_size() for t in epoch_scores + epoch_clicks) / 2**30
                print(f"step {step} loss {loss.item():.4f} kept {held:.2f} GiB {100 / (time.time() - t0):.0f} it/s",
                      flush=True)
                t0 = time.time()

    t = threading.Thread(target=train, name="train")
    t.start()
    t.join()


if __name__ == "__main__":
    main()
