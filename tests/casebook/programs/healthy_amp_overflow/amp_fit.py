"""fp16 autocast with a GradScaler and the fused AdamW, on CPU.

The scaler grows its scale every few clean steps (growth_interval=4), so it overflows again and again: each time
it skips that optimizer step and halves the scale. That is how dynamic loss scaling works.
"""
import time

import torch
import torch.nn as nn

DEV = "cpu"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 10))

    def forward(self, x):
        return self.f(x)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(2)
    net = Net().to(DEV)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, fused=True)
    scaler = torch.amp.GradScaler(DEV, init_scale=2.0 ** 16, growth_interval=4)
    skipped = 0
    for it in range(1, 10 ** 9):
        x = torch.randn(64, 64, device=DEV) * 4
        y = torch.randint(0, 10, (64,), device=DEV)
        with torch.autocast(DEV, dtype=torch.float16):
            loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        before = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        skipped += int(scaler.get_scale() < before)
        time.sleep(0.008)
        if it % 40 == 0:
            print(f"it {it} loss {loss.item():.3f} scale {scaler.get_scale():.0f} skipped {skipped}", flush=True)


if __name__ == "__main__":
    main()
