"""Train a tiny causal LM on a streaming shard reader; checkpoint the reader's cursor every 30 steps so the run
can resume mid-shard.

The trainer is slower than the reader, so the queue fills and the reader sits in ``put`` holding
``cursor_lock``; at the first checkpoint the trainer asks for ``reader.state_dict()`` (which takes the same lock)
before it takes the next batch: neither can move again. A watchdog thread keeps printing that the step counter
is stuck.
"""
import argparse
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from streaming.reader import ShardReader


class TinyLM(nn.Module):
    def __init__(self, vocab=512, d=64, ctx=128):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(ctx, d))
        layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2)
        self.lm_head = nn.Linear(d, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(ctx), persistent=False)

    def forward(self, idx):
        t = idx.shape[1]
        h = self.tok(idx) + self.pos[:t]
        return self.lm_head(self.blocks(h, mask=self.mask[:t, :t], is_causal=True))


class Progress:
    def __init__(self):
        self.step = 0
        self.lock = threading.Lock()


def watchdog(progress, every_s):
    last, since = -1, time.time()
    while True:
        time.sleep(every_s)
        with progress.lock:
            step = progress.step
        if step == last:
            print(f"[watchdog] no progress for {time.time() - since:.0f}s (step {step})", flush=True)
        else:
            last, since = step, time.time()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt-every", type=int, default=30)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    reader = ShardReader()
    reader.start()
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    progress = Progress()
    threading.Thread(target=watchdog, args=(progress, 2.0), name="watchdog", daemon=True).start()

    step = 0
    t0 = time.time()
    while True:
        if step and step % args.ckpt_every == 0:
            print(f"[ckpt] step {step}: saving reader cursor", flush=True)
            state = {"model": model.state_dict(), "reader": reader.state_dict(), "step": step}
            print(f"[ckpt] saved (shard {state['reader']['shard']} offset {state['reader']['offset']})", flush=True)
        shard, offset, chunk = reader.next()
        x, y = chunk[:, :-1], chunk[:, 1:]
        loss = F.cross_entropy(model(x).reshape(-1, 512), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        with progress.lock:
            progress.step = step
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.3f} shard {shard} offset {offset} "
                  f"{step / (time.time() - t0):.1f} it/s", flush=True)


if __name__ == "__main__":
    main()
