"""Blind reverberation-time estimator: octave-band energy envelopes of room impulse responses -> per-band RT60.

The training loop synthesises its own batch every step (image-source early reflections + exponential tail, 6 octave
bands x 128 bins, linear power) and fits an MLP to log RT60.

usage: python train.py [--fp-mode ieee|ftz] [--batch 256] [--steps N]
"""
import argparse
import signal
import time

import numerics


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fp-mode", choices=numerics.MODES, default="ieee")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10_000_000)
    ap.add_argument("--lr", type=float, default=1e-3)
    return ap.parse_args()


ARGS = parse_args()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from acoustics import N_BANDS, N_BINS, RoomSimulator  # noqa: E402
from torch import nn  # noqa: E402


class RT60Net(nn.Module):
    def __init__(self, hidden=256):
        super().__init__()
        self.env = nn.Sequential(nn.Linear(N_BANDS * N_BINS, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU())
        self.geo = nn.Linear(4, hidden)
        self.head = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, N_BANDS))

    def forward(self, env, feats):
        return self.head(self.env(env) + self.geo(feats))


def main():
    numerics.configure(ARGS.fp_mode)
    torch.set_num_threads(1)
    torch.manual_seed(0)

    def on_signal(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    sim = RoomSimulator(ARGS.batch)
    model = RT60Net()
    opt = torch.optim.AdamW(model.parameters(), lr=ARGS.lr, weight_decay=1e-4, foreach=True)
    step, t0, s0 = 0, time.perf_counter(), 0
    while step < ARGS.steps:
        env, target, feats = sim.sample()
        loss = F.smooth_l1_loss(model(env, feats), target, beta=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if step % 10 == 0:
            now = time.perf_counter()
            print(f"step {step} loss {loss.item():.4f} steps/s={(step - s0) / (now - t0):.1f}", flush=True)
            t0, s0 = now, step


if __name__ == "__main__":
    main()
