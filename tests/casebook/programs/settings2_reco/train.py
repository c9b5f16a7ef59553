"""Click-through-rate model trainer (CPU): a feature-assembly thread feeds a
training thread through a queue.Queue.

The feature thread builds batches of (dense features, categorical ids, click
label) from a synthetic log generator; the training thread runs a
DLRM-flavoured model (embedding bags for the categorical fields + a wide MLP
tower) with Adam.  Progress is printed about once a second as ``step N loss X``.

For bit-reproducible numbers across the heterogeneous fleet, the launcher sets
Intel MKL's Conditional Numerical Reproducibility mode through the
``MKL_CBWR`` environment variable before torch (and with it MKL) is loaded.
``MKL_CBWR=COMPATIBLE`` pins MKL to its generic SSE2-class code path; ``AUTO``
keeps the CPU-specific kernels and only fixes the code branch per machine.
See uoguelph-mlrg/Theano-MPI#12 (COMPATIBLE vs AUTO), pytorch/helion#3598 and
mathnet/mathnet-numerics#1070 for the same switch in other projects.

    python train.py             # MKL_CBWR=COMPATIBLE (fleet-wide identical results)
    python train.py --cnr-auto  # MKL_CBWR=AUTO

Measured on the 2-core CI box (3 alternating 30 s runs each, medians):
    python train.py            : 3.88 steps/s
    python train.py --cnr-auto : 9.69 steps/s  (60% fewer steps/s without the flag)
"""
import os
import sys

# Must happen before torch/MKL is imported: MKL reads it once at load time.
os.environ["MKL_CBWR"] = "AUTO" if "--cnr-auto" in sys.argv[1:] else "COMPATIBLE"

import argparse  # noqa: E402
import queue  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

BATCH = 1024
N_DENSE = 64
CARDINALITIES = [1000, 500, 200, 5000, 50, 300, 2000, 100]
EMB_DIM = 32


class CTRModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embs = nn.ModuleList(nn.EmbeddingBag(c, EMB_DIM, mode="sum") for c in CARDINALITIES)
        self.bottom = nn.Sequential(nn.Linear(N_DENSE, 256), nn.ReLU(), nn.Linear(256, EMB_DIM), nn.ReLU())
        d_in = EMB_DIM * (len(CARDINALITIES) + 1)
        self.top = nn.Sequential(
            nn.Linear(d_in, 1024), nn.ReLU(),
            nn.Linear(1024, 1024), nn.ReLU(),
            nn.Linear(1024, 512), nn.ReLU(),
            nn.Linear(512, 1),
        )

    def forward(self, dense, cats):
        parts = [self.bottom(dense)]
        for i, emb in enumerate(self.embs):
            parts.append(emb(cats[:, i].unsqueeze(1)))
        return self.top(torch.cat(parts, dim=1)).squeeze(1)


class ClickLog:
    def __init__(self, seed=0):
        self.g = torch.Generator().manual_seed(seed)
        self.w = torch.randn(N_DENSE, generator=self.g)

    def batch(self):
        dense = torch.randn(BATCH, N_DENSE, generator=self.g)
        cats = torch.stack([torch.randint(0, c, (BATCH,), generator=self.g) for c in CARDINALITIES], dim=1)
        logit = dense @ self.w * 0.3 + (cats[:, 0] % 7 == 0).float() - 0.5
        label = torch.bernoulli(torch.sigmoid(logit), generator=self.g)
        dense = torch.sign(dense) * torch.log1p(dense.abs())
        return dense, cats, label


def feature_loop(q, stop):
    log = ClickLog()
    while not stop.is_set():
        item = log.batch()
        while not stop.is_set():
            try:
                q.put(item, timeout=0.5)
                break
            except queue.Full:
                pass


def train_loop(q, stop):
    torch.manual_seed(0)
    model = CTRModel()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    step = 0
    last = time.time()
    while not stop.is_set():
        dense, cats, label = q.get()
        loss = F.binary_cross_entropy_with_logits(model(dense, cats), label)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        now = time.time()
        if now - last >= 1.0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
            last = now


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cnr-auto", action="store_true", help="MKL_CBWR=AUTO instead of COMPATIBLE")
    ap.parse_args()
    print(f"MKL_CBWR={os.environ['MKL_CBWR']} threads={torch.get_num_threads()}", flush=True)
    q = queue.Queue(maxsize=8)
    stop = threading.Event()
    feat = threading.Thread(target=feature_loop, args=(q, stop), name="feature-builder", daemon=True)
    trainer = threading.Thread(target=train_loop, args=(q, stop), name="trainer", daemon=True)
    feat.start()
    trainer.start()
    try:
        while trainer.is_alive():
            trainer.join(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()


if __name__ == "__main__":
    main()
