import argparse
import os
import subprocess
import sys
import time

import torch
import torch.nn as nn

import runprofile
from tiles import TileLoader

HERE = os.path.dirname(os.path.abspath(__file__))


class CoverNet(nn.Module):
    def __init__(self, in_ch, width, classes):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(in_ch, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(2 * width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(2 * width, classes)

    def forward(self, x):
        return self.head(self.body(x).flatten(1))


def start_tile_server(prof):
    a, u = prof.archive, prof.uplink
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "tileserver.py"), "--scenes", str(a.scenes), "--bands", str(a.bands),
         "--size", str(a.size), "--classes", str(a.classes), "--seed", str(a.seed),
         "--nodelay", str(int(u.nodelay)), "--keepalive", str(int(u.keepalive)),
         "--send-buffer-kb", str(u.send_buffer_kb), "--max-pacing-mbit", str(u.max_pacing_mbit)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, cwd=HERE)
    return proc, int(proc.stdout.readline())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/archive_review.toml")
    args = ap.parse_args()
    prof = runprofile.read(args.config)
    torch.set_num_threads(prof.train.threads)
    torch.manual_seed(prof.train.seed)

    server, port = start_tile_server(prof)
    loader = TileLoader(prof, port, prof.train.seed + 3)
    loader.start()
    print(f"{prof.name}: tile server on port {port}", flush=True)

    model = CoverNet(prof.archive.bands + 5, prof.train.width, prof.archive.classes)
    opt = torch.optim.Adam(model.parameters(), lr=prof.train.lr)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    last = time.perf_counter()
    try:
        while True:
            x, y = loader.out.get()
            logits = model(x)
            loss = loss_fn(logits, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            now = time.perf_counter()
            acc = (logits.argmax(1) == y).float().mean().item()
            print(f"step {step} loss {loss.item():.4f} acc {acc:.3f} dt {1000 * (now - last):.1f}ms", flush=True)
            last = now
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
