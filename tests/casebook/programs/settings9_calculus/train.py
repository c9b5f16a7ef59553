"""Seq2seq-style derivative model: a small causal transformer reads f in prefix
notation and learns to write f' (teacher forcing on the tokens after <sep>).

    generator thread (SymPy: random f, diff, expand, prefix tokens) --(queue)--> trainer (main thread)

usage: python train.py [--worker-profile lean|standard] [--batch 16] [--steps N]
"""
import argparse
import queue
import signal
import threading
import time

import torch
import torch.nn.functional as F
from torch import nn

import cas_profile

MAX_LEN = 96


class DerivLM(nn.Module):
    def __init__(self, vocab, dim=128, layers=2, heads=4):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(MAX_LEN, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, ids):
        t = ids.shape[1]
        h = self.tok(ids) + self.pos(torch.arange(t))
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        return self.out(self.norm(self.blocks(h, mask=mask, is_causal=True)))


def generator(q, halt, batch, seed):
    import exprgen                      # imports sympy: after cas_profile.apply
    gen = exprgen.Generator(seed)
    while not halt.is_set():
        rows = []
        while len(rows) < batch:
            f, df = gen.pair()
            toks = exprgen.encode(f, df, MAX_LEN + 1)
            if len(toks) <= MAX_LEN and toks[-1] == exprgen.EOS:
                rows.append(toks)
        width = max(len(r) for r in rows)
        ids = torch.full((batch, width), exprgen.PAD, dtype=torch.long)
        target_mask = torch.zeros((batch, width), dtype=torch.bool)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = torch.tensor(r)
            target_mask[i, r.index(exprgen.SEP) + 1:len(r)] = True
        while not halt.is_set():
            try:
                q.put((ids, target_mask), timeout=0.2)
                break
            except queue.Full:
                pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker-profile", choices=sorted(cas_profile.CACHE_SIZES), default="lean")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--lr", type=float, default=3e-4)
    args = ap.parse_args()

    cas_profile.apply(args.worker_profile)
    import exprgen
    torch.set_num_threads(1)      # one core for the trainer, the other for the SymPy generator
    torch.manual_seed(0)
    halt = threading.Event()

    def on_signal(signum, frame):
        halt.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    q = queue.Queue(maxsize=6)
    th = threading.Thread(target=generator, args=(q, halt, args.batch, 11), name="sympy-generator", daemon=True)
    th.start()

    model = DerivLM(len(exprgen.VOCAB))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    step, t0, s0 = 0, time.perf_counter(), 0
    try:
        while step < args.steps:
            ids, target_mask = q.get()
            logits = model(ids[:, :-1])
            targets = ids[:, 1:].masked_fill(~target_mask[:, 1:], -100)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            if step % 10 == 0:
                now = time.perf_counter()
                print(f"step {step} loss {loss.item():.4f} steps/s={(step - s0) / (now - t0):.1f}", flush=True)
                t0, s0 = now, step
    finally:
        halt.set()
        th.join(timeout=1)


if __name__ == "__main__":
    main()
