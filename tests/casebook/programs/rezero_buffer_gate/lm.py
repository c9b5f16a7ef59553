"""Next-token model over a synthetic Markov corpus, with ReZero blocks.  Run: python lm.py"""
import threading
import time
from collections import deque

import torch
import torch.nn.functional as F

from blocks import ReZeroStack

VOCAB = 300


class Corpus(threading.Thread):
    """Fills a small deque of (input, target) windows in the background."""

    def __init__(self, seq=32, batch=16):
        super().__init__(name="corpus-reader", daemon=True)
        self.buf, self.cv = deque(maxlen=8), threading.Condition()
        self.seq, self.batch = seq, batch
        g = torch.Generator().manual_seed(5)
        self.transition = torch.randint(0, VOCAB, (VOCAB,), generator=g)

    def run(self):
        while True:
            start = torch.randint(0, VOCAB, (self.batch, 1))
            cols = [start]
            for _ in range(self.seq):
                cols.append(self.transition[cols[-1]])
            window = torch.cat(cols, 1)
            with self.cv:
                while len(self.buf) == self.buf.maxlen:
                    self.cv.wait()
                self.buf.append((window[:, :-1], window[:, 1:]))
                self.cv.notify_all()
            time.sleep(0.006)

    def next(self):
        with self.cv:
            while not self.buf:
                self.cv.wait()
            item = self.buf.popleft()
            self.cv.notify_all()
            return item


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    corpus = Corpus()
    corpus.start()
    model = ReZeroStack(VOCAB)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, betas=(0.9, 0.95))
    for it in range(1, 10**9):
        x, y = corpus.next()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if it % 50 == 0:
            print(f"it {it}: loss={loss.item():.3f} ppl={loss.exp().item():.1f}", flush=True)


if __name__ == "__main__":
    main()
