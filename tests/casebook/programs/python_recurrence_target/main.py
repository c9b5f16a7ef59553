import queue
import sys
import threading
import time

import torch
from torch import nn

from config import RunConfig
from scan import ScanEncoder


class DraftHead(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.net(h)


class Job:
    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.hs_buffer: queue.Queue = queue.Queue(maxsize=cfg.buffer)
        self.encoder = ScanEncoder(cfg.d_model)
        self.head = DraftHead(cfg.d_model)
        self.seen = 0

    def write_hidden(self) -> None:
        while True:
            x = torch.randn(self.cfg.batch, self.cfg.seq_len, self.cfg.d_model)
            self.hs_buffer.put(self.encoder.scan_tokens(x))

    def learn(self) -> None:
        opt = torch.optim.AdamW(self.head.parameters(), lr=self.cfg.lr)
        start = time.time()
        while True:
            h = self.hs_buffer.get()
            pred = self.head(h[:, :-1])  # cheap: a 2-layer head
            loss = nn.functional.mse_loss(pred, h[:, 1:])
            loss.backward()
            opt.step()
            opt.zero_grad()
            self.seen += 1
            if self.seen % 20 == 0:
                sys.stdout.write(f"batches={self.seen} rate={self.seen / (time.time() - start):.1f}/s\n")
                sys.stdout.flush()


def main() -> None:
    torch.set_num_threads(1)  # the threads share the cores; no intra-op pool per thread
    job = Job(RunConfig())
    for i in range(job.cfg.writers):
        threading.Thread(target=job.write_hidden, name=f"hidden-writer-{i}", daemon=True).start()
    learner = threading.Thread(target=job.learn, name="draft-learner", daemon=True)
    learner.start()
    learner.join()


if __name__ == "__main__":
    main()
