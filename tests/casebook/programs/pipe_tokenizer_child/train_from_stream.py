"""Train a bag-of-tokens classifier from a record stream: the tokenizer runs as its own process and writes one
JSON record per line to our stdin pipe (the same tokenizer binary feeds the production indexer)."""
import json
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

VOCAB = 1024


def batches(stream, size=16):
    rows = []
    for line in stream:
        rec = json.loads(line)
        rows.append(rec)
        if len(rows) == size:
            yield rows
            rows = []


def to_tensor(rows):
    x = torch.zeros(len(rows), VOCAB)
    for i, r in enumerate(rows):
        x[i, r["ids"]] = 1.0
    return x, torch.tensor([r["label"] for r in rows])


def main():
    tok = subprocess.Popen([sys.executable, "tokenize_stream.py"], stdout=subprocess.PIPE, text=True, bufsize=1)
    torch.set_num_threads(1)
    clf = torch.nn.Linear(VOCAB, 4)
    opt = torch.optim.SGD(clf.parameters(), lr=0.1)
    t0 = time.time()
    for step, rows in enumerate(batches(tok.stdout), 1):
        x, y = to_tensor(rows)
        loss = F.cross_entropy(clf(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 20 == 0:
            print(f"step={step} rec/s={16 * step / (time.time() - t0):.0f} loss={loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
