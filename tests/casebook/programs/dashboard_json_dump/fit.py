"""Online click-through-rate model (tiny MLP on hashed features), trained step by step, with the live dashboard
export of dashboard.py running beside it.

    python fit.py               # with the dashboard (the slow run)
    python fit.py --no-dashboard
"""
import argparse
import random
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from dashboard import LiveDashboard, default_path

N_FEATURES, N_BUCKETS, EMB = 8, 1000, 8
HISTORY = 12000  # points kept per curve


class CTRModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.tables = nn.ModuleList(nn.Embedding(N_BUCKETS, EMB) for _ in range(N_FEATURES))
        self.mlp = nn.Sequential(nn.Linear(N_FEATURES * EMB, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, feats):
        return self.mlp(torch.cat([t(feats[:, i]) for i, t in enumerate(self.tables)], dim=1)).squeeze(1)


def histogram(values, bins=64):
    lo, hi = min(values), max(values)
    width = (hi - lo) / bins or 1.0
    counts = [0.0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / width))] += 1.0
    return {"lo": lo, "hi": hi, "counts": counts}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-dashboard", action="store_true")
    ap.add_argument("--period", type=float, default=0.05)
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rng = random.Random(0)

    model = CTRModel()
    opt = torch.optim.Adagrad(model.parameters(), lr=0.05)
    true_w = torch.randn(N_FEATURES, N_BUCKETS) * 0.5

    # the dashboard state: a history per metric (pre-filled from the previous run's log) and weight histograms
    state_lock = threading.Lock()
    state = {
        "run": {"name": "ctr-online", "started": time.time()},
        "history": {k: [rng.random() for _ in range(HISTORY)] for k in ("loss", "auc_proxy", "lr", "grad_norm")},
        "weights": {},
    }
    if not args.no_dashboard:
        dash = LiveDashboard(state, state_lock, default_path(), period_s=args.period)
        dash.start()

    t0 = time.time()
    step = 0
    window_t, window_steps = time.time(), 0
    while True:
        feats = torch.randint(0, N_BUCKETS, (args.batch, N_FEATURES))
        logits_true = true_w.gather(1, feats.t()).sum(0)
        clicks = (torch.rand(args.batch) < torch.sigmoid(logits_true)).float()
        loss = F.binary_cross_entropy_with_logits(model(feats), clicks)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        window_steps += 1
        with state_lock:
            curve = state["history"]["loss"]
            curve.append(loss.item())
            if len(curve) > HISTORY:
                del curve[:-HISTORY]
        if step % 200 == 0:
            with state_lock:
                state["weights"] = {f"table{i}": histogram(t.weight.detach().flatten()[:512].tolist())
                                    for i, t in enumerate(model.tables)}
            now = time.time()
            print(f"[ctr] step {step} loss {loss.item():.4f} {window_steps / (now - window_t):.0f} steps/s "
                  f"(elapsed {now - t0:.1f}s)", flush=True)
            window_t, window_steps = now, 0


if __name__ == "__main__":
    main()
