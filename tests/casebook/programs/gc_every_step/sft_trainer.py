#!/usr/bin/env python
# Reproduces the mechanism of google/tunix#2086 ("Make the per-step gc.collect() in RLEngine configurable"): a
# full host garbage collection on every training step, over a large Python heap, is a stall inside the step.
"""Supervised fine-tuning of a tiny causal LM on a tokenized in-memory corpus, with Trainer-style callbacks."""
import gc
import random
import time
from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass
class TrainingArguments:
    per_device_batch: int = 8
    seq_len: int = 12
    learning_rate: float = 1e-3
    logging_steps: int = 10
    corpus_examples: int = 150_000


class TinyCausalLM(nn.Module):
    def __init__(self, vocab=512, dim=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.mix = nn.GRU(dim, dim, batch_first=True)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, ids):
        h, _ = self.mix(self.tok(ids))
        return self.lm_head(h)


def load_tokenized_corpus(n, seq_len, seed=0):
    rng = random.Random(seed)
    return [{"input_ids": [rng.randrange(512) for _ in range(seq_len)], "length": seq_len, "source": "web"}
            for _ in range(n)]


class TrainerCallback:
    def on_step_end(self, trainer, step):
        pass


class HostMemoryCallback(TrainerCallback):
    """Keeps host memory flat on long runs by releasing garbage after every optimizer step."""

    def on_step_end(self, trainer, step):
        self.release_host_memory()

    @staticmethod
    def release_host_memory():
        gc.collect()


class LoggingCallback(TrainerCallback):
    def __init__(self, every):
        self.every = every
        self.t0 = time.perf_counter()

    def on_step_end(self, trainer, step):
        if step % self.every == 0:
            rate = step / (time.perf_counter() - self.t0)
            print(f"{{'step': {step}, 'loss': {trainer.last_loss:.4f}, 'steps_per_s': {rate:.1f}}}", flush=True)


class Trainer:
    def __init__(self, model, args, corpus, callbacks):
        self.model, self.args, self.corpus, self.callbacks = model, args, corpus, callbacks
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
        self.last_loss = float("nan")

    def collate(self, rows):
        return torch.tensor([r["input_ids"] for r in rows])

    def train(self):
        rng = random.Random(1)
        step = 0
        while True:
            ids = self.collate(rng.sample(self.corpus, self.args.per_device_batch))
            logits = self.model(ids[:, :-1])
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()
            self.last_loss = loss.item()
            step += 1
            for cb in self.callbacks:
                cb.on_step_end(self, step)


def main():
    torch.set_num_threads(1)
    args = TrainingArguments()
    corpus = load_tokenized_corpus(args.corpus_examples, args.seq_len)
    trainer = Trainer(TinyCausalLM(), args, corpus, [HostMemoryCallback(), LoggingCallback(args.logging_steps)])
    trainer.train()


if __name__ == "__main__":
    main()
