#!/usr/bin/env python
# Reproduces the setup asked for in huggingface/transformers#23419 ("Save checkpoint asynchronously on cpu to
# keep GPU training going"): the writer thread is busy, in code that releases the GIL (compression, file
# writes), while the training loop keeps its pace. Nothing is wrong here.
"""Regression MLP with frequent asynchronous checkpoints."""
import argparse
import logging
import os
import tempfile
import time

import torch
import torch.nn as nn

from trainlib.ckpt import AsyncCheckpointWriter

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(threadName)s %(message)s")
log = logging.getLogger("run")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--ckpt-every", type=int, default=50)
    ap.add_argument("--no-ckpt", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(512, 768), nn.ReLU(), nn.Linear(768, 768), nn.ReLU(),
                          nn.Linear(768, 1)).to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    out_dir = tempfile.mkdtemp(prefix="ckpt-", dir=os.getcwd())
    writer = None if args.no_ckpt else AsyncCheckpointWriter(os.path.join(out_dir, "last.pt.z"))
    step, t0 = 0, time.perf_counter()
    while True:
        x = torch.randn(64, 512, device=args.device)
        loss = (model(x).squeeze(-1) - x[:, :8].sum(-1)).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if writer is not None and step % args.ckpt_every == 0:
            writer.submit(step, {k: v.cpu() for k, v in model.state_dict().items()})
        if step % 50 == 0:
            log.info("step %d, %.1f steps/s, loss %.3f", step, step / (time.perf_counter() - t0), loss.item())


if __name__ == "__main__":
    main()
