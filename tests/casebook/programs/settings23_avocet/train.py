import argparse
import time

import torch
import torch.nn as nn

import tuning
from ingest import TelemetryIngest
from telemetry import BEHAVIOURS, build_pool


class BehaviourNet(nn.Module):
    def __init__(self, fixes, fields, hidden, classes):
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(), nn.Linear(fixes * fields, hidden), nn.GELU(),
            nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, classes),
        )

    def forward(self, x):
        return self.net(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/estuary_replay.toml")
    args = ap.parse_args()
    s = tuning.load(args.config)
    torch.set_num_threads(s.model.threads)
    torch.manual_seed(s.model.seed)
    records, labels = build_pool(s.tags)
    ingest = TelemetryIngest(records, labels, s)
    ingest.start()
    print(f"{s.name}: {len(records)} uplink records pooled", flush=True)

    model = BehaviourNet(s.tags.fixes_per_window, 10, s.model.hidden, len(BEHAVIOURS))
    opt = torch.optim.AdamW(model.parameters(), lr=s.model.lr)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    last = time.perf_counter()
    while True:
        x, y = ingest.out.get()
        logits = model(x)
        loss = loss_fn(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        now = time.perf_counter()
        print(f"step {step} loss {loss.item():.4f} windows {len(y)} dt {1000 * (now - last):.1f}ms", flush=True)
        last = now


if __name__ == "__main__":
    main()
