#!/usr/bin/env python
"""Fine-tune an intent classifier from a warm-start checkpoint.

The checkpoint is memory-mapped and loaded with ``load_state_dict(..., assign=True)`` so that the weights are
not copied a second time.  The Trainer, though, has already built its AdamW over ``model.parameters()`` in its
constructor, and ``assign=True`` swaps every Parameter of the module for a new one: AdamW keeps the old tensors
(which get no gradient and never move) while the forward pass runs on the new ones (which get gradients that
nobody applies).  The loss stays where it started and the run goes on at full speed.

Modelled on the warning added to ``Module.load_state_dict`` with ``assign`` (pytorch/pytorch#102212,
pytorch/tutorials#2522: "the optimizer must be created after the call to load_state_dict") and on
pytorch/pytorch#14467 ("Optimizer warning when parameters 'change'").
"""
import argparse
import os
import tempfile
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from modeling import IntentClassifier, IntentConfig


@dataclass
class TrainingArguments:
    learning_rate: float = 3e-3
    weight_decay: float = 0.01
    batch_size: int = 32
    max_steps: int = 10_000_000
    logging_steps: int = 100
    seed: int = 17


def synthetic_utterances(config, n_batches, batch_size, seed):
    """Utterances whose intent is decided by which block of the vocabulary most of their tokens come from."""
    g = torch.Generator().manual_seed(seed)
    block = config.vocab_size // config.num_intents
    for _ in range(n_batches):
        labels = torch.randint(0, config.num_intents, (batch_size,), generator=g)
        lengths = torch.randint(6, 20, (batch_size,), generator=g)
        ids = []
        for label, length in zip(labels.tolist(), lengths.tolist()):
            own = torch.randint(label * block, (label + 1) * block, (length,), generator=g)
            noise = torch.randint(0, config.vocab_size, (length,), generator=g)
            keep = torch.rand(length, generator=g) < 0.7
            ids.append(torch.where(keep, own, noise))
        offsets = torch.tensor([0] + lengths.cumsum(0)[:-1].tolist())
        yield torch.cat(ids), offsets, labels


class Trainer:
    def __init__(self, model, args: TrainingArguments):
        self.model = model
        self.args = args
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate,
                                           weight_decay=args.weight_decay)
        self.global_step = 0

    def warm_start(self, checkpoint_path):
        state = torch.load(checkpoint_path, mmap=True, weights_only=True)
        missing, unexpected = self.model.load_state_dict(state, strict=True, assign=True)
        print(f"[warm-start] loaded {checkpoint_path} (missing={len(missing)}, unexpected={len(unexpected)})",
              flush=True)

    def train(self):
        self.model.train()
        t0 = time.time()
        for input_ids, offsets, labels in synthetic_utterances(self.model.config, self.args.max_steps,
                                                               self.args.batch_size, self.args.seed):
            logits = self.model(input_ids, offsets)
            loss = F.cross_entropy(logits, labels)
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.global_step += 1
            if self.global_step % self.args.logging_steps == 0:
                acc = (logits.argmax(-1) == labels).float().mean().item()
                w = self.model.classifier.weight
                print(f"{{'step': {self.global_step}, 'loss': {loss.item():.4f}, 'acc': {acc:.3f}, "
                      f"'classifier_abs_sum': {w.detach().abs().sum().item():.6f}, "
                      f"'steps_per_s': {self.global_step / (time.time() - t0):.1f}}}", flush=True)


def make_pretrained_checkpoint(config, path):
    """Stands for the checkpoint of the pre-training run (a different seed, same architecture)."""
    torch.manual_seed(1234)
    torch.save(IntentClassifier(config).state_dict(), path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--checkpoint", default="")
    cli = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    config = IntentConfig()
    args = TrainingArguments(learning_rate=cli.lr, batch_size=cli.batch_size)
    checkpoint = cli.checkpoint
    if not checkpoint:
        os.makedirs("runs", exist_ok=True)
        checkpoint = os.path.join(tempfile.mkdtemp(prefix="intent-ckpt-", dir="runs"), "pytorch_model.bin")
        make_pretrained_checkpoint(config, checkpoint)

    model = IntentClassifier(config)
    trainer = Trainer(model, args)
    trainer.warm_start(checkpoint)
    trainer.train()


if __name__ == "__main__":
    main()
