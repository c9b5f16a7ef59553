"""Masked-LM pretraining on raw text: a reader thread streams lines from the corpus, the trainer thread tokenizes
each batch and trains on it.

Modelled on AnswerDotAI/ModernBERT#236 (training without pretokenization ran at ~30% of the paper's speed on
H100s: "the bottleneck is the data loader" packing on the main thread) and OpenNMT/OpenNMT-tf#799 ("online
tokenization ... GPU usage frequently goes down to 0%"): the WordPiece encoding happens in the training thread,
between two steps, while the GPU has nothing queued.

  python train_lm.py                 # tokenize each batch in the training loop (as written)
  python train_lm.py --pretokenize   # tokenize the shard once at start-up; the reader serves token ids
"""
from __future__ import annotations

import argparse
import queue
import random
import threading
import time

import torch
import torch.nn.functional as F
from torch import nn

from wordpiece import WordPiece, random_line


class Encoder(nn.Module):
    def __init__(self, vocab: int, width: int, depth: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
            for _ in range(depth))
        self.mlm = nn.Linear(width, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.tok(ids)
        for layer in self.layers:
            h = h + layer(h)
        return self.mlm(h)


class CorpusReader(threading.Thread):
    """Serves batches from the shard in memory: raw lines, or their token ids when the shard was pretokenized."""

    def __init__(self, out: queue.Queue, batch: int, shard: list[str], pretokenized: list[list[int]] | None) -> None:
        super().__init__(name="corpus-reader", daemon=True)
        self.out, self.batch, self.shard, self.pretokenized = out, batch, shard, pretokenized

    def run(self) -> None:
        rng = random.Random(7)
        while True:
            rows = rng.sample(range(len(self.shard)), self.batch)
            if self.pretokenized is None:
                self.out.put([self.shard[i] for i in rows])
            else:
                self.out.put(torch.tensor([self.pretokenized[i] for i in rows]))


def mask_tokens(ids: torch.Tensor, mask_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    chosen = (torch.rand(ids.shape, device=ids.device) < 0.15) & (ids > 3)
    return torch.where(chosen, torch.full_like(ids, mask_id), ids), torch.where(chosen, ids, torch.full_like(ids, -100))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--pretokenize", action="store_true")
    args = ap.parse_args()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    width, depth, batch, seq, words = (1024, 4, 64, 256, 90) if gpu else (128, 2, 8, 64, 24)
    tok = WordPiece.synthetic(8000)
    model = Encoder(len(tok.ids), width, depth).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    rng = random.Random(11)
    shard = [random_line(rng, words) for _ in range(4096 if gpu else 512)]  # stands in for one corpus shard
    pretokenized = None
    if args.pretokenize:
        t0 = time.time()
        pretokenized = [tok.encode(text, seq) for text in shard]
        print(f"pretokenized {len(pretokenized)} lines in {time.time() - t0:.1f}s", flush=True)
    lines: queue.Queue = queue.Queue(maxsize=8)
    CorpusReader(lines, batch, shard, pretokenized).start()

    def train() -> None:
        step, t0 = 0, time.time()
        while True:
            item = lines.get()
            if isinstance(item, list):
                ids = torch.tensor([tok.encode(text, seq) for text in item])
            else:
                ids = item
            inputs, labels = mask_tokens(ids.to(device, non_blocking=True), tok.ids["[UNK]"])
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=gpu):
                logits = model(inputs)
            loss = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=-100)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            if step % 10 == 0:
                print(f"train step {step} mlm loss {loss.item():.3f} {10 * batch / (time.time() - t0):.0f} lines/s",
                      flush=True)
                t0 = time.time()

    trainer = threading.Thread(target=train, name="mlm-trainer")
    trainer.start()
    trainer.join()


if __name__ == "__main__":
    main()
