"""Mean-teacher semi-supervised training (healthy).

A student is trained with AdamW on a few labelled examples plus a consistency loss against an EMA teacher on
unlabelled ones. The teacher is a deepcopy of the student with requires_grad off, updated by hand after every
optimizer step (never by an optimizer); the learning rate warms up linearly from exactly 0; gradients are
accumulated over 4 micro-batches before each step. Patterned after the EMA updates discussed in
SWivid/F5-TTS#631 (EMA once per optimizer step under accumulation) and willisma/SiT#6 (the EMA model never
requires grad).
"""
from __future__ import annotations

import argparse
import copy
import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class HParams:
    lr: float = 1e-3
    warmup_steps: int = 100
    accum: int = 4
    ema_decay: float = 0.99
    consistency_weight: float = 1.0
    labelled_bs: int = 16
    unlabelled_bs: int = 64


class Net(nn.Module):
    def __init__(self, d_in: int = 40, d_hidden: int = 128, n_classes: int = 6) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d_in, d_hidden), nn.SiLU(), nn.Dropout(0.1),
                                  nn.Linear(d_hidden, d_hidden), nn.SiLU())
        self.head = nn.Linear(d_hidden, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class EMATeacher:
    def __init__(self, student: nn.Module, decay: float) -> None:
        self.module = copy.deepcopy(student).requires_grad_(False).eval()
        self.decay = decay
        self.updates = 0

    @torch.no_grad()
    def update(self, student: nn.Module) -> None:
        self.updates += 1
        d = min(self.decay, (1 + self.updates) / (10 + self.updates))  # ramp the decay up early on
        for t, s in zip(self.module.parameters(), student.parameters()):
            t.mul_(d).add_(s.detach(), alpha=1 - d)
        for t, s in zip(self.module.buffers(), student.buffers()):
            t.copy_(s)


class Toy:
    """Six Gaussian blobs in 40-d; only a few points carry labels."""

    def __init__(self, seed: int = 0) -> None:
        self.g = torch.Generator().manual_seed(seed)
        self.means = torch.randn(6, 40, generator=self.g) * 0.35

    def sample(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(0, 6, (n,), generator=self.g)
        return self.means[y] + torch.randn(n, 40, generator=self.g), y


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lr", type=float, default=HParams.lr)
    ap.add_argument("--accum", type=int, default=HParams.accum)
    ap.add_argument("--max-steps", type=int, default=10**9)
    ns = ap.parse_args()
    hp = HParams(lr=ns.lr, accum=ns.accum)
    torch.set_num_threads(1)
    torch.manual_seed(0)

    data = Toy()
    student = Net()
    teacher = EMATeacher(student, hp.ema_decay)
    opt = torch.optim.AdamW(student.parameters(), lr=hp.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, s / hp.warmup_steps))

    step = 0
    micro = 0
    t0 = time.perf_counter()
    while step < ns.max_steps:
        xl, yl = data.sample(hp.labelled_bs)
        xu, _ = data.sample(hp.unlabelled_bs)
        noise = 0.2 * torch.randn_like(xu)
        sup = F.cross_entropy(student(xl), yl)
        with torch.no_grad():
            soft_labels = F.softmax(teacher.module(xu + noise), dim=-1)
        cons = F.mse_loss(F.softmax(student(xu), dim=-1), soft_labels)
        loss = (sup + hp.consistency_weight * cons) / hp.accum
        loss.backward()
        micro += 1
        if micro % hp.accum:
            continue
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        teacher.update(student)
        step += 1
        if step % 25 == 0:
            with torch.no_grad():
                xt, yt = data.sample(512)
                s_acc = (student(xt).argmax(-1) == yt).float().mean().item()
                t_acc = (teacher.module(xt).argmax(-1) == yt).float().mean().item()
            print(f"step {step:6d} lr {sched.get_last_lr()[0]:.2e} sup {sup.item():.3f} cons {cons.item():.4f} "
                  f"acc student {s_acc:.3f} teacher {t_acc:.3f} ({step / (time.perf_counter() - t0):.0f} opt steps/s)",
                  flush=True)


if __name__ == "__main__":
    main()
