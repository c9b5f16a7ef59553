"""Two tasks on one shared trunk, alternating batch by batch (round-robin task sampling).

Each step only one head is in the graph; the other head's .grad stays None for that step (set_to_none=True).
"""
import itertools
import time

import torch
from torch import nn
from torch.nn import functional as F

torch.set_num_threads(1)


class Trunk(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(30, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())

    def forward(self, x):
        return self.net(x)


trunk = Trunk()
heads = nn.ModuleDict({"sentiment": nn.Linear(128, 3), "topic": nn.Linear(128, 12)})
params = list(trunk.parameters()) + list(heads.parameters())
optimizer = torch.optim.SGD(params, lr=0.05)

task_cycle = itertools.cycle(["sentiment", "topic"])
counts = {"sentiment": 0, "topic": 0}
tick = time.time()
for step in itertools.count(1):
    task = next(task_cycle)
    x = torch.randn(32, 30)
    n_cls = heads[task].out_features
    y = (x[:, :n_cls].argmax(-1) if task == "topic" else (x[:, 0] > 0).long() + (x[:, 1] > 1).long())
    loss = F.cross_entropy(heads[task](trunk(x)), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    counts[task] += 1
    time.sleep(0.01)
    if step % 60 == 0:
        print(f"[{time.time() - tick:6.1f}s] step {step} {task} loss {loss.item():.3f} batches {counts}", flush=True)
