"""Distil the keyboard's int8 suggestion model into a small causal-conv verse LM.

    labeller thread (read verses, run the int8 teacher) --(queue)--> student trainer (main thread)

usage: python train.py [--device-profile mobile|server] [--batch 16] [--seq 32]
"""
import argparse
import queue
import signal
import threading
import time

import torch
import torch.nn.functional as F
from torch import nn

import device_profile
from teacher import load_teacher
from verses import PAD, Corpus, Vocab, encode

VOCAB = 2048
TEMPERATURE = 2.0


class VerseLM(nn.Module):
    def __init__(self, dim=64, layers=2, kernel=3):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, dim, padding_idx=PAD)
        self.convs = nn.ModuleList(nn.Conv1d(dim, dim, kernel, padding=kernel - 1) for _ in range(layers))
        self.out = nn.Linear(dim, VOCAB)

    def forward(self, ids):
        h = self.emb(ids).transpose(1, 2)
        for conv in self.convs:
            h = h + F.gelu(conv(h)[..., :h.shape[-1]])      # drop the right padding: causal
        return self.out(h.transpose(1, 2))


def labeller(teacher, q, halt, batch, seq):
    corpus, vocab = Corpus(), Vocab(VOCAB)
    while not halt.is_set():
        rows = []
        for _ in range(batch):
            ids = [i for line in corpus.stanza(6) for i in encode(line, vocab)][:seq + 1]
            rows.append(ids + [PAD] * (seq + 1 - len(ids)))
        ids = torch.tensor(rows)
        with torch.no_grad():
            soft = F.softmax(teacher(ids[:, :-1]) / TEMPERATURE, dim=-1)
        while not halt.is_set():
            try:
                q.put((ids, soft), timeout=0.2)
                break
            except queue.Full:
                pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device-profile", choices=sorted(device_profile.ENGINES), default="mobile")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    args = ap.parse_args()

    device_profile.apply(args.device_profile)
    teacher = load_teacher(VOCAB)
    torch.manual_seed(3)
    halt = threading.Event()

    def on_signal(signum, frame):
        halt.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    q = queue.Queue(maxsize=4)
    th = threading.Thread(target=labeller, args=(teacher, q, halt, args.batch, args.seq), name="labeller",
                          daemon=True)
    th.start()

    student = VerseLM()
    opt = torch.optim.AdamW(student.parameters(), lr=args.lr)
    step, t0, s0 = 0, time.perf_counter(), 0
    try:
        while True:
            ids, soft = q.get()
            logits = student(ids[:, :-1])
            kd = F.kl_div(F.log_softmax(logits / TEMPERATURE, dim=-1), soft, reduction="batchmean")
            ce = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1), ignore_index=PAD)
            loss = 0.5 * kd * TEMPERATURE ** 2 + 0.5 * ce
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % 25 == 0:
                now = time.perf_counter()
                print(f"step {step} loss {loss.item():.4f} steps/s={(step - s0) / (now - t0):.1f}", flush=True)
                t0, s0 = now, step
    finally:
        halt.set()
        th.join(timeout=1)


if __name__ == "__main__":
    main()
