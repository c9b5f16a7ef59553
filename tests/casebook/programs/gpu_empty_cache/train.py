"""A trainer that hands its memory back to the driver after every step ('to avoid fragmentation')."""
import argparse
import threading

import torch
from torch import nn


def train(device):
    model = nn.Sequential(*[nn.Linear(4096, 4096) for _ in range(6)]).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    step = 0
    while True:
        x = torch.randn(2048, 4096, device=device)
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, loss
        torch.cuda.empty_cache()
        step += 1
        if step % 20 == 0:
            print(f"step={step}", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    t = threading.Thread(target=train, args=(a.device,), name="train-loop")
    t.start()
    t.join()
