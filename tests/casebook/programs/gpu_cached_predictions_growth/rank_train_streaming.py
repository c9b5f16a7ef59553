"""rank_train.py with a streaming AUC: scores binned into fixed-size histograms per label on the GPU (read once
per 100-step report); only the last few batches are kept (a bounded ring, for debugging)."""
import argparse
import collections
import queue
import threading
import time

import torch
import torch.nn.functional as F

from rank_train import CAP_GIB
from ranker import Ranker, impressions

BINS = 4096


def streaming_auc(hist_pos, hist_neg):
    cum_neg = hist_neg.cumsum(0) - hist_neg
    wins = (hist_pos * (cum_neg + 0.5 * hist_neg)).sum()
    return float(wins / (hist_pos.sum() * hist_neg.sum()).clamp(min=1))


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
        hist_pos = torch.zeros(BINS, device=device, dtype=torch.float64)
        hist_neg = torch.zeros(BINS, device=device, dtype=torch.float64)
        recent = collections.deque(maxlen=8)
        step, t0 = 0, time.time()
        while True:
            history, candidates, clicks = q.get()
            scores = model(history, candidates)
            loss = F.binary_cross_entropy_with_logits(scores, clicks)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            bins = (torch.sigmoid(scores.detach()) * (BINS - 1)).long().flatten()
            hist_pos += torch.bincount(bins, weights=clicks.flatten(), minlength=BINS)
            hist_neg += torch.bincount(bins, weights=1 - clicks.flatten(), minlength=BINS)
            recent.append((scores.detach(), clicks))
            step += 1
            if step % 100 == 0:
                print(f"step {step} loss {loss.item():.4f} auc {streaming_auc(hist_pos, hist_neg):.4f} "
                      f"{100 / (time.time() - t0):.0f} it/s", flush=True)
                t0 = time.time()

    t = threading.Thread(target=train, name="train")
    t.start()
    t.join()


if __name__ == "__main__":
    main()
