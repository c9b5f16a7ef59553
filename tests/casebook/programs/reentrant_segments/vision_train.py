"""A small conv net for 32x32 images with activation checkpointing over its stages (to fit bigger batches).

The checkpointing call is the classic one from older tutorials (reentrant, the default before torch 2.4).
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint_sequential


def conv_bn(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class SmallNet(nn.Module):
    def __init__(self, num_classes=10, segments=3):
        super().__init__()
        self.features = nn.Sequential(
            conv_bn(3, 16), conv_bn(16, 32, 2), conv_bn(32, 32), conv_bn(32, 64, 2), conv_bn(64, 64),
            conv_bn(64, 64, 2),
        )
        self.classifier = nn.Linear(64, num_classes)
        self.segments = segments

    def forward(self, x):
        if self.training:
            x = checkpoint_sequential(self.features, self.segments, x, use_reentrant=True)
        else:
            x = self.features(x)
        return self.classifier(F.adaptive_avg_pool2d(x, 1).flatten(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=0.05)
    args = ap.parse_args()
    torch.set_num_threads(1)
    net = SmallNet().train()
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    seen, tic = 0, time.time()
    batch_idx = 0
    while True:
        images = torch.randn(args.batch_size, 3, 32, 32)
        targets = torch.randint(0, 10, (args.batch_size,))
        out = net(images)
        loss = F.cross_entropy(out, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        batch_idx += 1
        seen += images.shape[0]
        time.sleep(0.005)
        if batch_idx % 20 == 0:
            print(f"Train batch {batch_idx}\tLoss: {loss.item():.6f}\t{seen / (time.time() - tic):.0f} img/s", flush=True)


if __name__ == "__main__":
    main()
