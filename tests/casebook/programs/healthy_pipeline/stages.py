"""Two-stage feature distillation, written as a small framework: a Stage owns its threads."""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import torch


@dataclass
class Stage:
    name: str
    work: Callable[[], None]
    replicas: int = 1
    threads: list[threading.Thread] = field(default_factory=list)

    def launch(self) -> None:
        for i in range(self.replicas):
            t = threading.Thread(target=self.work, name=f"{self.name}.{i}", daemon=True)
            t.start()
            self.threads.append(t)


def build(width: int = 384, depth: int = 3, device: str = "cpu") -> tuple[Stage, Stage, list[float]]:
    hand_off: queue.Queue = queue.Queue(maxsize=32)
    rates: list[float] = []
    teacher = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(depth)]).to(device).eval()
    student = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.Linear(width, width)).to(device)
    opt = torch.optim.SGD(student.parameters(), lr=1e-3)

    def produce() -> None:
        while True:
            x = torch.randn(256, width, device=device)
            with torch.no_grad():
                y = teacher(x)
            hand_off.put((x, y))

    def consume() -> None:
        n, t0 = 0, time.time()
        while True:
            x, y = hand_off.get()
            loss = torch.nn.functional.mse_loss(student(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            n += 1
            if n % 50 == 0:
                rates.append(n / (time.time() - t0))
                print(f"consumed {n} ({rates[-1]:.0f}/s) loss={loss.item():.4f}", flush=True)

    return Stage("produce", produce, replicas=1), Stage("consume", consume, replicas=1), rates
