"""Supervised fine-tuning of a tiny causal LM on an in-memory instruction set.

The examples live in memory as Python dicts (prompt, response, token lists): a few hundred thousand objects.
`memutil.keep_memory_flat()` (a heap watchdog) was added after an OOM on the login node.
"""
import random
import time

import torch
import torch.nn.functional as F

import memutil

VOCAB, DIM, SEQ = 512, 64, 32


def build_dataset(n=15_000, seed=0):
    rng = random.Random(seed)
    data = []
    for i in range(n):
        prompt = [rng.randrange(VOCAB) for _ in range(12)]
        response = [rng.randrange(VOCAB) for _ in range(12)]
        data.append({"id": i, "prompt": prompt, "response": response, "meta": {"src": "synthetic", "len": 24}})
    return data


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, DIM)
        self.mix = torch.nn.Linear(DIM, DIM)
        self.out = torch.nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        return self.out(torch.tanh(self.mix(self.emb(ids))))


def featurize(ex):
    ids = (ex["prompt"] + ex["response"])[:SEQ]
    return {"input_ids": ids + [0] * (SEQ - len(ids)), "attention_mask": [1] * len(ids) + [0] * (SEQ - len(ids)),
            "spans": [[i, i + 1] for i in range(0, len(ids), 2)], "meta": dict(ex["meta"])}


def collate(examples):
    feats = [featurize(ex) for ex in examples]
    return torch.tensor([f["input_ids"] for f in feats])


def main():
    torch.set_num_threads(1)
    data = build_dataset()
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rng = random.Random(1)
    seen = []  # per-example records of what was trained on, for the data-order audit at the end
    step, t0 = 0, time.time()
    while True:
        if step == 1:
            memutil.keep_memory_flat()  # from the first step on: the set-up's garbage is not a leak
        examples = rng.sample(data, 16)
        seen.append([{"id": ex["id"], "step": step, "first_tokens": ex["prompt"][:4]} for ex in examples])
        batch = collate(examples)
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 50 == 0:
            print(f"step {step} it/s {step / (time.time() - t0):.1f} loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
