"""Varlen collation: documents packed into a fixed [batch, max_tokens] buffer, with the longest real length."""
from __future__ import annotations

import random

import torch


def collate(rng: random.Random, batch: int, max_tokens: int, vocab: int, device: torch.device,
            bucket: int = 0) -> tuple[torch.Tensor, int]:
    longest = rng.randint(max_tokens // 8, max_tokens)  # documents come from length-sorted shards
    lengths = [rng.randint(longest // 2, longest) for _ in range(batch)]
    ids = torch.randint(1, vocab, (batch, max_tokens), device=device)
    keep = torch.arange(max_tokens, device=device)[None, :] < torch.tensor(lengths, device=device)[:, None]
    ids = ids * keep
    max_len = max(lengths)
    if bucket:
        max_len = min(max_tokens, -(-max_len // bucket) * bucket)
    return ids, max_len
