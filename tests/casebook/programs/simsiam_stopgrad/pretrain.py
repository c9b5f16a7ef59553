"""SimSiam pre-training of a small MLP backbone on synthetic two-view data.

Modelled on Cadene/murel.bootstrap.pytorch#7 ("we deactivated the gradients (detach)... it was a really bad
idea") and the stop-gradient questions in PatrickHua/SimSiam#22 and vturrisi/solo-learn#135: the stop-gradient
is applied to the projector output in ``SimSiam.embed`` instead of only to z inside the loss, so the
backbone and projector (the first optimizer group) never get a gradient and never move; only the predictor
(the second group, fixed lr as in the paper) trains. The loss still goes down, a little.
"""
import argparse
import math
import time
from dataclasses import dataclass

import torch

from siamese.models import SimSiam
from siamese.views import TwoViewStream


@dataclass
class Config:
    base_lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 1e-4
    batch_size: int = 128
    total_steps: int = 1_000_000
    log_every: int = 50


def param_checksum(params):
    return sum(float(p.detach().double().abs().sum()) for p in params)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lr", type=float, default=Config.base_lr)
    ap.add_argument("--batch-size", type=int, default=Config.batch_size)
    args = ap.parse_args()
    cfg = Config(base_lr=args.lr, batch_size=args.batch_size)
    torch.set_num_threads(1)
    torch.manual_seed(0)

    model = SimSiam()
    groups = [
        {"name": "encoder", "params": list(model.backbone.parameters()) + list(model.projector.parameters()),
         "fix_lr": False},
        {"name": "predictor", "params": list(model.predictor.parameters()), "fix_lr": True},
    ]
    optimizer = torch.optim.SGD(groups, lr=cfg.base_lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    stream = TwoViewStream(batch=cfg.batch_size).start()

    t0 = time.time()
    for step, (x1, x2, _) in enumerate(stream, start=1):
        lr = cfg.base_lr * 0.5 * (1 + math.cos(math.pi * step / cfg.total_steps))
        for group in optimizer.param_groups:
            group["lr"] = cfg.base_lr if group["fix_lr"] else lr
        loss = model(x1, x2)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % cfg.log_every == 0:
            enc = param_checksum(optimizer.param_groups[0]["params"])
            pred = param_checksum(optimizer.param_groups[1]["params"])
            print(f"[ssl] step {step:5d} loss {loss.item():+.4f} lr {lr:.4f} |enc| {enc:.6f} |pred| {pred:.6f} "
                  f"{step / (time.time() - t0):.1f} it/s", flush=True)
        if step >= cfg.total_steps:
            break


if __name__ == "__main__":
    main()
