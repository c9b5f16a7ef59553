"""Causal-LM pretraining with gradient accumulation and a non-finite guard on every micro-batch.

Modelled on two public reports: torchtitan's per-micro-batch loss check (pytorch/torchtitan#3863 raised on a NaN
loss with `bool(torch.isfinite(loss))` on each micro-batch; #3873, "Avoid per-microbatch D2H caused by isfinite",
moved it off the hot path) and huggingface/transformers#33693 ("7% of training time with Trainer is spent on a
single line: torch.isnan(tr_loss_step) or torch.isinf(tr_loss_step)"). Here each micro-batch reads its token
count with int(mask.sum()) to normalise the loss and checks bool(torch.isfinite(loss)) before backward: the host
waits for the GPU twice per micro-batch, 16 times a step.

    python pretrain_guarded.py                    # guard on every micro-batch (as shipped)
    python pretrain_guarded.py --guard deferred   # flags and counts stay on the GPU, read once per log line
"""
from __future__ import annotations

import argparse
import queue
import threading
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class Config:
    vocab: int = 32_000
    width: int = 1024
    heads: int = 16
    layers: int = 4
    seq: int = 256
    micro_batch: int = 4
    accum: int = 8
    lr: float = 3e-4
    log_every: int = 10


SMALL = Config(vocab=2_000, width=128, heads=4, layers=2, seq=64, micro_batch=2, accum=8)


class Block(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.ln1 = nn.LayerNorm(cfg.width)
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width, bias=False)
        self.proj = nn.Linear(cfg.width, cfg.width, bias=False)
        self.ln2 = nn.LayerNorm(cfg.width)
        self.up = nn.Linear(cfg.width, 4 * cfg.width, bias=False)
        self.down = nn.Linear(4 * cfg.width, cfg.width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads).unbind(2)
        att = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, c))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class TinyLM(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab, cfg.width)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.LayerNorm(cfg.width)
        self.head = nn.Linear(cfg.width, cfg.vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        for blk in self.blocks:
            h = blk(h)
        return self.head(self.norm(h))


class Batcher(threading.Thread):
    """Packs random 'documents' into fixed-length rows with a padding mask, on the training device."""

    def __init__(self, cfg: Config, device: torch.device, out: queue.Queue) -> None:
        super().__init__(name="batcher", daemon=True)
        self.cfg, self.device, self.out = cfg, device, out

    def run(self) -> None:
        cfg = self.cfg
        while True:
            ids = torch.randint(0, cfg.vocab, (cfg.micro_batch, cfg.seq + 1), device=self.device)
            lengths = torch.randint(cfg.seq // 2, cfg.seq + 1, (cfg.micro_batch, 1), device=self.device)
            mask = torch.arange(cfg.seq, device=self.device)[None, :] < lengths
            self.out.put((ids, mask))


class Trainer(threading.Thread):
    def __init__(self, cfg: Config, device: torch.device, batches: queue.Queue, guard: str) -> None:
        super().__init__(name="trainer")
        self.cfg, self.device, self.batches, self.guard = cfg, device, batches, guard
        self.model = TinyLM(cfg).to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=0.1)
        self.amp = device.type == "cuda"

    def micro_loss(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.amp):
            logits = self.model(ids[:, :-1])
        ce = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten(), reduction="none")
        return (ce * mask.flatten()).sum(), mask.sum()

    def run(self) -> None:
        cfg, step, skipped, t0 = self.cfg, 0, 0, time.perf_counter()
        bad = torch.zeros((), dtype=torch.bool, device=self.device)
        while True:
            total = torch.zeros((), device=self.device)
            for _ in range(cfg.accum):
                ids, mask = self.batches.get()
                loss_sum, count = self.micro_loss(ids, mask)
                if self.guard == "every-micro-batch":
                    n_tokens = int(count)  # host needs the count to normalise
                    loss = loss_sum / max(n_tokens, 1) / cfg.accum
                    if not bool(torch.isfinite(loss)):  # skip a poisoned micro-batch before it reaches the grads
                        skipped += 1
                        continue
                else:
                    loss = loss_sum / count.clamp(min=1) / cfg.accum
                    bad |= ~torch.isfinite(loss)
                loss.backward()
                total += loss.detach()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
            step += 1
            if step % cfg.log_every == 0:
                if self.guard == "deferred" and bool(bad):
                    raise RuntimeError(f"non-finite loss within steps {step - cfg.log_every + 1}..{step}")
                rate = cfg.log_every * cfg.accum * cfg.micro_batch * cfg.seq / (time.perf_counter() - t0)
                print(f"step {step} loss {total.item():.3f} skipped {skipped} tok/s {rate:,.0f}", flush=True)
                t0 = time.perf_counter()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--guard", choices=("every-micro-batch", "deferred"), default="every-micro-batch")
    args = ap.parse_args()
    device = torch.device(args.device)
    cfg = Config() if device.type == "cuda" else SMALL
    torch.manual_seed(0)
    print(f"device={device} guard={args.guard} width={cfg.width} accum={cfg.accum}", flush=True)
    batches: queue.Queue = queue.Queue(maxsize=2 * cfg.accum)
    Batcher(cfg, device, batches).start()
    trainer = Trainer(cfg, device, batches, args.guard)
    trainer.start()
    trainer.join()


if __name__ == "__main__":
    main()
