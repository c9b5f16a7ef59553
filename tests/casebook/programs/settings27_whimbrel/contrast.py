"""Momentum-contrast model: a query encoder, its momentum copy, the queue of negative keys and
the feature bank of the kNN monitor (both kept as module buffers so checkpoints carry them)."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def encoder(length, dim):
    return nn.Sequential(
        nn.Conv1d(2, 32, 9, stride=2, padding=4), nn.GELU(),
        nn.Conv1d(32, 64, 9, stride=2, padding=4), nn.GELU(),
        nn.Conv1d(64, 64, 9, stride=2, padding=4), nn.GELU(),
        nn.AdaptiveAvgPool1d(8), nn.Flatten(),
        nn.Linear(64 * 8, 256), nn.GELU(), nn.Linear(256, dim))


@torch.no_grad()
def gather_all(t):
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts)


class MoCo(nn.Module):
    def __init__(self, length, dim, queue_len, bank_len, temperature, momentum):
        super().__init__()
        self.encoder_q = encoder(length, dim)
        self.encoder_k = encoder(length, dim)
        for pq, pk in zip(self.encoder_q.parameters(), self.encoder_k.parameters(), strict=True):
            pk.data.copy_(pq.data)
            pk.requires_grad = False
        self.t, self.m = temperature, momentum
        self.register_buffer("queue", F.normalize(torch.randn(dim, queue_len), dim=0))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))
        self.register_buffer("bank", F.normalize(torch.randn(bank_len, dim), dim=1))
        self.register_buffer("bank_labels", torch.zeros(bank_len, dtype=torch.long))
        self.register_buffer("bank_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update(self):
        for pq, pk in zip(self.encoder_q.parameters(), self.encoder_k.parameters(), strict=True):
            pk.data.mul_(self.m).add_(pq.data, alpha=1.0 - self.m)

    @torch.no_grad()
    def _enqueue(self, keys, labels):
        n = keys.shape[0]
        p = int(self.queue_ptr)
        self.queue[:, p:p + n] = keys.T
        self.queue_ptr[0] = (p + n) % self.queue.shape[1]
        b = int(self.bank_ptr)
        self.bank[b:b + n] = keys
        self.bank_labels[b:b + n] = labels
        self.bank_ptr[0] = (b + n) % self.bank.shape[0]

    def forward(self, x_q, x_k, labels):
        q = F.normalize(self.encoder_q(x_q), dim=1)
        with torch.no_grad():
            self._momentum_update()
            k = F.normalize(self.encoder_k(x_k), dim=1)
        pos = (q * k).sum(1, keepdim=True)
        neg = q @ self.queue.clone().detach()
        logits = torch.cat([pos, neg], dim=1) / self.t
        loss = F.cross_entropy(logits, torch.zeros(len(q), dtype=torch.long))
        # every rank enqueues the keys of all ranks, so the queues stay identical everywhere
        self._enqueue(gather_all(k), gather_all(labels))
        return loss, q.detach()

    @torch.no_grad()
    def knn_accuracy(self, feats, labels, k=20):
        sim = feats @ self.bank.T
        top = sim.topk(k, dim=1).indices
        votes = torch.zeros(len(feats), int(self.bank_labels.max()) + 1)
        votes.scatter_add_(1, self.bank_labels[top], torch.ones(top.shape))
        return (votes.argmax(1) == labels).float().mean().item()
