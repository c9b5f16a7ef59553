"""Train a small regressor with a live terminal dashboard."""
import time

import torch

from termui import Dashboard


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.SiLU()) for _ in range(6)])
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    dash = Dashboard()
    for _ in range(4000):
        dash.push(0.0)
    dash.start()
    step, t0 = 0, time.time()
    while True:
        x = torch.randn(32, 64)
        loss = (net(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        dash.push(loss.item())
        step += 1
        if step % 100 == 0:
            print(f"step {step:5d} {step / (time.time() - t0):.0f} steps/s", flush=True)


if __name__ == "__main__":
    main()
