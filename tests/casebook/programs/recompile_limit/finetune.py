"""Fine-tune with a compiled forward. Buckets were removed to 'save padding' (lengths vary freely now)."""
import queue
import random
import threading
import time

import torch
from torch import nn

torch.manual_seed(0)


class Encoder(nn.Module):
    def __init__(self, d=96):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.b = nn.Linear(d, d)

    def forward(self, x):
        h = torch.relu(self.a(x))
        return (self.b(h) * x).mean(dim=1)


def feeder(out_q):
    rnd = random.Random(1)
    while True:
        out_q.put(torch.randn(8, rnd.randint(8, 200), 96))


def optimise(in_q):
    model = Encoder()
    fwd = torch.compile(model, dynamic=False, backend="aot_eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    k, t0 = 0, time.time()
    while True:
        x = in_q.get()
        loss = fwd(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        k += 1
        if k % 20 == 0:
            print(f"{k} updates, {k / (time.time() - t0):.1f}/s", flush=True)


if __name__ == "__main__":
    q = queue.Queue(16)
    threading.Thread(target=feeder, args=(q,), name="feeder", daemon=True).start()
    worker = threading.Thread(target=optimise, args=(q,), name="optimiser")
    worker.start()
    worker.join()
