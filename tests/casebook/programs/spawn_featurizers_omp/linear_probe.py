"""Linear-probe evaluation of a frozen CNN: worker processes embed image batches, the main process fits the probe.

The embedding runs in a spawn-context multiprocessing pool (the CNN is too slow in the main process). Each worker
gets a few OpenMP threads "so the convolutions are parallel too".
"""
import multiprocessing as mp
import os
import time

import torch
import torch.nn.functional as F

import featurizer

WORKERS = 3
WORKER_OMP_THREADS = "4"
EMBED_DIM = featurizer.EMBED_DIM


def main():
    # The workers read this when their torch starts (spawn: a fresh interpreter each).
    os.environ["OMP_NUM_THREADS"] = WORKER_OMP_THREADS
    ctx = mp.get_context("spawn")
    probe = torch.nn.Linear(EMBED_DIM, 10)
    opt = torch.optim.SGD(probe.parameters(), lr=0.05)
    with ctx.Pool(WORKERS, initializer=featurizer.load_backbone) as pool:
        seen, t0 = 0, time.time()
        for i, (emb, labels) in enumerate(pool.imap(featurizer.embed_batch, range(10**9), chunksize=1)):
            loss = F.cross_entropy(probe(emb), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen += len(labels)
            if (i + 1) % 20 == 0:
                print(f"probe batches={i + 1} images/s={seen / (time.time() - t0):.0f} loss={loss.item():.3f}",
                      flush=True)


if __name__ == "__main__":
    main()
