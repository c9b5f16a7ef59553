"""Transfer a small 1-D conv backbone ("pretrained" on another task) to a new sensor-classification task with
staged unfreezing (healthy run)."""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from finetuning import BackboneFinetuning


class SensorNet(nn.Module):
    def __init__(self, channels=6, width=48, n_classes=5):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv1d(channels, width, 5, padding=2), nn.BatchNorm1d(width), nn.ReLU(),
            nn.Conv1d(width, width, 5, padding=2, stride=2), nn.BatchNorm1d(width), nn.ReLU(),
            nn.AdaptiveAvgPool1d(1), nn.Flatten())
        self.head = nn.Sequential(nn.Linear(width, 64), nn.ReLU(), nn.Linear(64, n_classes))

    def forward(self, x):
        return self.head(self.backbone(x))


def sensor_batches(batch_size, seed=0):
    g = torch.Generator().manual_seed(seed)
    freqs = torch.linspace(0.05, 0.3, 5)
    t = torch.arange(64).float()
    while True:
        y = torch.randint(0, 5, (batch_size,), generator=g)
        phase = torch.rand(batch_size, 6, 1, generator=g) * 6.28
        x = torch.sin(freqs[y][:, None, None] * t * 6.28 + phase) + 0.8 * torch.randn(batch_size, 6, 64, generator=g)
        yield x, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--unfreeze-at", type=int, default=100)
    ap.add_argument("--steps", type=int, default=10**9)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    model = SensorNet()
    # stands for the pretrained checkpoint of the backbone
    with torch.no_grad():
        for p in model.backbone.parameters():
            p.mul_(1.5)
    callback = BackboneFinetuning(unfreeze_at_step=args.unfreeze_at)
    callback.on_fit_start(model)
    optimizer = torch.optim.Adam([{"params": model.head.parameters(), "name": "head"}], lr=args.lr)

    t0 = time.time()
    model.train()
    for step, (x, y) in enumerate(sensor_batches(args.batch_size)):
        if step >= args.steps:
            break
        callback.on_train_batch_start(model, optimizer, step)
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            acc = (logits.argmax(1) == y).float().mean().item()
            groups = ",".join(g["name"] for g in optimizer.param_groups)
            print(f"[fit] step={step} loss={loss.item():.4f} acc={acc:.3f} groups={groups} "
                  f"{(step + 1) / (time.time() - t0):.0f} it/s", flush=True)


if __name__ == "__main__":
    main()
