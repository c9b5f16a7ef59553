"""Sparse MoE language-model pre-training: a data thread streams token blocks, the learner thread trains.

Modelled on facebookresearch/fairchem#2195/#2203 (a loss that counts valid samples through a boolean mask,
torch.nonzero(...).numel() and a branch on torch.all(loss.isfinite()): the GPU idle 45% of the step) and on
deepmodeling/deepmd-kit#3361 (applying a mask costs ~3 ms a step: aten::nonzero synchronises): the experts'
tokens are picked with nonzero and boolean masks, and a capacity check branches on a device tensor.

  python run_moe.py                     # dispatch by nonzero / boolean masks (as written)
  python run_moe.py --dispatch static   # capacity-padded dispatch with fixed shapes
"""
from __future__ import annotations

import argparse
import queue
import threading
import time

import torch
import torch.nn.functional as F
from torch import nn

from moe.layers import MoEBlock

PRESETS = {
    "cuda": dict(vocab=32_000, width=1024, hidden=2048, experts=8, layers=2, batch=8, seq=512),
    "cpu": dict(vocab=2_000, width=96, hidden=192, experts=8, layers=2, batch=4, seq=64),
}


class MoELM(nn.Module):
    def __init__(self, vocab, width, hidden, experts, layers, dispatch):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(MoEBlock(width, hidden, experts, dispatch) for _ in range(layers))
        self.out = nn.Linear(width, vocab, bias=False)

    def forward(self, ids):
        h = self.embed(ids)
        for b in self.blocks:
            h = b(h)
        return self.out(h)


def stream_blocks(q, p, device):
    g = torch.Generator(device=device).manual_seed(1)
    while True:
        q.put(torch.randint(0, p["vocab"], (p["batch"], p["seq"] + 1), device=device, generator=g))


def learner(q, p, device, dispatch):
    model = MoELM(p["vocab"], p["width"], p["hidden"], p["experts"], p["layers"], dispatch).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4)
    it, t0 = 0, time.time()
    while True:
        block = q.get()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits = model(block[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), block[:, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        it += 1
        if it % 20 == 0:
            ffns = [b.ffn for b in model.blocks]
            if dispatch == "static":
                dropped = int(sum(f.dropped for f in ffns))
                for f in ffns:
                    f.dropped = None
                note = f"dropped tokens {dropped}"
            else:
                note = f"overflow events {sum(f.overflow_events for f in ffns)}"
            print(f"[learner] it {it} loss {loss.item():.3f} {note} {20 / (time.time() - t0):.1f} it/s", flush=True)
            t0 = time.time()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dispatch", choices=("gather", "static"), default="gather")
    args = ap.parse_args()
    device = torch.device(args.device)
    p = PRESETS[device.type]
    q = queue.Queue(maxsize=4)
    threading.Thread(target=stream_blocks, args=(q, p, device), name="token-stream", daemon=True).start()
    t = threading.Thread(target=learner, args=(q, p, device, args.dispatch), name="learner")
    t.start()
    t.join()


if __name__ == "__main__":
    main()
