"""Target forward for drafter training: the target only has to provide hidden states, but the forward was copied
from the evaluation script and still projects onto the whole vocabulary."""
import argparse
import queue
import threading

import torch
from torch import nn

VOCAB, WIDTH = 151_936, 2048


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.layers = nn.ModuleList(nn.Linear(WIDTH, WIDTH) for _ in range(2))

    def forward(self, ids):
        h = self.embed(ids)
        for layer in self.layers:
            h = h + torch.relu(layer(h))
        return h


def target_worker(q, device):
    backbone = Backbone().to(device, torch.bfloat16).eval()
    lm_head = nn.Linear(WIDTH, VOCAB, bias=False).to(device, torch.bfloat16).eval()
    with torch.no_grad():
        while True:
            ids = torch.randint(0, VOCAB, (4, 2048), device=device)
            hidden = backbone(ids)
            logits = lm_head(hidden)  # copied from eval: full-vocabulary projection
            q.put(hidden.float())


def drafter_worker(q, device):
    head = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.SiLU(), nn.Linear(WIDTH, WIDTH)).to(device)
    opt = torch.optim.SGD(head.parameters(), lr=1e-3)
    n = 0
    while True:
        h = q.get()
        loss = (head(h[:, :-1]) - h[:, 1:]).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        n += 1
        if n % 20 == 0:
            print(f"drafter batches {n} loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    q = queue.Queue(maxsize=2)
    threading.Thread(target=target_worker, args=(q, a.device), name="tgt-worker", daemon=True).start()
    d = threading.Thread(target=drafter_worker, args=(q, a.device), name="dft-worker")
    d.start()
    d.join()
