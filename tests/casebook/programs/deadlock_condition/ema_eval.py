#!/usr/bin/env python3
"""Image-classifier training with a shadow (EMA) copy that an evaluation thread scores.

Every `sync_every` steps the training loop asks the evaluator for a fresh snapshot of the EMA weights and waits
until it is published, so that the logged eval score matches the step it is logged at.
"""
from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    width: int = 32
    batch: int = 32
    lr: float = 2e-3
    ema_decay: float = 0.99
    sync_every: int = 40


@dataclass
class SharedState:
    """What the trainer and the evaluator share. `params_lock` guards the live weights."""
    params_lock: threading.Lock = field(default_factory=threading.Lock)
    published: threading.Condition = field(default_factory=threading.Condition)
    snapshot_requested: threading.Event = field(default_factory=threading.Event)
    snapshot_version: int = 0
    eval_scores: list = field(default_factory=list)


class SmallConvNet(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, width, 3, padding=1)
        self.c2 = nn.Conv2d(width, width, 3, padding=1)
        self.fc = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.c1(x))
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(x.mean((2, 3)))


class Evaluator(threading.Thread):
    def __init__(self, model: nn.Module, shared: SharedState, cfg: Config) -> None:
        super().__init__(name="ema-evaluator", daemon=True)
        self.shared = shared
        self.cfg = cfg
        self.ema = copy.deepcopy(model).eval()
        self.live = model
        self.probe = torch.randn(64, 3, 16, 16)

    def run(self) -> None:
        while True:
            self.shared.snapshot_requested.wait()
            self.shared.snapshot_requested.clear()
            self.refresh_ema()
            with torch.no_grad():
                score = self.ema(self.probe).softmax(-1).max(-1).values.mean().item()
            self.shared.eval_scores.append(score)

    def refresh_ema(self) -> None:
        with self.shared.params_lock:  # read the live weights while nobody steps them
            with torch.no_grad():
                for e, p in zip(self.ema.parameters(), self.live.parameters()):
                    e.mul_(self.cfg.ema_decay).add_(p, alpha=1 - self.cfg.ema_decay)
        with self.shared.published:
            self.shared.snapshot_version += 1
            self.shared.published.notify_all()


class Trainer:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.model = SmallConvNet(cfg.width)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=cfg.lr, momentum=0.9)
        self.shared = SharedState()
        self.evaluator = Evaluator(self.model, self.shared, cfg)

    def step(self) -> float:
        x = torch.randn(self.cfg.batch, 3, 16, 16)
        y = torch.randint(0, 10, (self.cfg.batch,))
        loss = F.cross_entropy(self.model(x), y)
        self.opt.zero_grad()
        loss.backward()
        with self.shared.params_lock:
            self.opt.step()
            if self.step_no % self.cfg.sync_every == 0:
                self.wait_for_snapshot()
        return loss.item()

    def wait_for_snapshot(self) -> None:
        with self.shared.published:
            want = self.shared.snapshot_version + 1
            print(f"step {self.step_no}: waiting for EMA snapshot v{want}", flush=True)
            self.shared.snapshot_requested.set()
            while self.shared.snapshot_version < want:
                self.shared.published.wait()

    def fit(self) -> None:
        self.evaluator.start()
        self.step_no = 0
        t0 = time.time()
        while True:
            self.step_no += 1
            loss = self.step()
            if self.step_no % 20 == 0:
                print(f"[{time.time() - t0:6.1f}s] step {self.step_no} loss={loss:.3f} "
                      f"evals={len(self.shared.eval_scores)}", flush=True)


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(1)
    Trainer(Config()).fit()


if __name__ == "__main__":
    main()
