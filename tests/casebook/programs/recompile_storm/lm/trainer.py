from __future__ import annotations

import logging
import queue

import torch
import torch.nn.functional as F
from torch import nn

log = logging.getLogger("lm.trainer")


class TinyLM(nn.Module):
    def __init__(self, vocab: int, dim: int = 128) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(dim, 4, 4 * dim, batch_first=True) for _ in range(2))
        self.out = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.emb(tokens)
        for block in self.blocks:
            h = block(h)
        return self.out(h)


def token_loss(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    logits, targets = logits[:, :-1], tokens[:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), label_smoothing=0.1)


@torch.compile(dynamic=False, backend="aot_eager")  # inductor: see issue #31 (numerics)
@torch.no_grad()
def batch_metrics(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    # accuracy, entropy and z-loss for the dashboard, fused by the compiler
    logits, targets = logits[:, :-1].float(), tokens[:, 1:]
    acc = (logits.argmax(-1) == targets).float().mean()
    logp = torch.log_softmax(logits, dim=-1)
    entropy = -(logp.exp() * logp).sum(-1).mean()
    z = torch.logsumexp(logits, dim=-1).pow(2).mean()
    return torch.stack([acc, entropy, z])


class Trainer:
    def __init__(self, vocab: int) -> None:
        self.model = TinyLM(vocab)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-4)

    def run(self, batches: queue.Queue, steps: int) -> None:
        # the recompile warnings were noisy: allow plenty of cached graphs (per thread on recent torch)
        torch._dynamo.config.recompile_limit = 1024
        torch._dynamo.config.accumulated_recompile_limit = 4096
        for step in range(steps):
            tokens = batches.get()
            logits = self.model(tokens)
            loss = token_loss(logits, tokens)
            loss.backward()
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
            acc, entropy, z = batch_metrics(logits.detach(), tokens).tolist()
            log.info("step %d len %d loss %.3f acc %.3f H %.2f z %.1f", step, tokens.shape[1], loss.item(), acc,
                     entropy, z)
