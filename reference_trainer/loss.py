"""The DFlash training objective: anchors, blocks, the block attention mask, and the chunked weighted CE.

For each sequence, up to ``num_anchors`` random anchor positions are drawn (sorted). Block ``i`` is the
anchor token followed by ``block_size - 1`` mask tokens, at positions ``anchor_i .. anchor_i + 15``.
Draft position ``k`` predicts ``input_ids[anchor + k]`` ("same-position" labels; k = 0 is the given
anchor and is excluded), weighted by ``exp(-(k-1)/gamma)`` so early positions (the ones speculative
decoding accepts first) count most. Loss = sum(CE * w) / sum(w).

The attention mask, for a query in block ``i`` and a key ``j`` (keys = S context positions, then the
N*16 block tokens):
- context key ``j < S``: visible iff ``j < anchor_i`` (strictly before the anchor: the target's hidden
  state at the anchor already encodes the anchor's successor, so it must stay hidden);
- block key: visible iff it belongs to block ``i`` (bidirectional within a block, blind across blocks);
- a padding block (fewer valid anchors than ``num_anchors``) sees nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

LOSSES = ("chunked", "fused", "fused-compiled")
MASK_BUILDS = ("mask_mod", "anchors")


@dataclass(frozen=True, kw_only=True)
class ObjectiveConfig:
    block_size: int = 16
    num_anchors: int = 512
    loss_decay_gamma: float = 7.0  # the DFlash recipe: 7 for block 16
    ce_chunk_tokens: int = 2048  # positions per lm_head+CE chunk (x vocab = the logits one chunk holds)
    use_reentrant: bool = False
    attention: str = "auto"  # auto (flex on CUDA, dense SDPA on CPU) | flex | flex-eager | sdpa
    # chunked: checkpointed chunks of fp32 logits (recomputed in backward) | fused: the input gradient in the
    # forward pass, k = 0 rows dropped (fused_loss.py) | fused-compiled: its epilogue torch.compile'd
    loss: str = "fused"
    # The flex BlockMask: mask_mod (every pair; the default until measured on the H200) | from the sorted anchors
    mask_build: str = "mask_mod"

    def __post_init__(self) -> None:
        if self.block_size < 2:
            raise ValueError(f"block_size must be >= 2, got {self.block_size}")
        if self.num_anchors < 1:
            raise ValueError(f"num_anchors must be >= 1, got {self.num_anchors}")
        if self.ce_chunk_tokens < 1:
            raise ValueError(f"ce_chunk_tokens must be >= 1, got {self.ce_chunk_tokens}")
        if not self.loss_decay_gamma > 0:
            raise ValueError("loss_decay_gamma must be > 0")
        if self.attention not in ("auto", "flex", "flex-eager", "sdpa"):
            raise ValueError(f"attention must be auto, flex, flex-eager or sdpa, got {self.attention!r}")
        if self.loss not in LOSSES:
            raise ValueError(f"--loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        if self.mask_build not in MASK_BUILDS:
            raise ValueError(f"--block-mask must be one of {', '.join(MASK_BUILDS)}, got {self.mask_build!r}")


@dataclass
class Blocks:
    """Everything the drafter needs for one batch, on one device."""

    anchors: torch.Tensor  # [B, N] long, sorted per row (padding anchors are 0)
    block_valid: torch.Tensor  # [B, N] bool
    block_ids: torch.Tensor  # [B, N*bs] long: anchor token then mask tokens
    position_ids: torch.Tensor  # [B, S + N*bs]: context positions then block positions
    labels: torch.Tensor  # [B, N*bs] long
    weights: torch.Tensor  # [B, N*bs] float: decay x in-bounds x loss_mask x (k > 0) x valid block


def sample_anchors(loss_mask: torch.Tensor, lengths: torch.Tensor, num_anchors: int,
                   generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Up to ``num_anchors`` distinct random anchors per row, sorted; CPU tensors in, CPU tensors out.

    The published recipe's rule: position p is a valid anchor iff the anchor token itself and its first
    target are both supervised (loss_mask[p] and loss_mask[p + 1], with p + 1 inside the sequence).
    """
    batch, seq = loss_mask.shape
    anchors = torch.zeros(batch, num_anchors, dtype=torch.long)
    valid = torch.zeros(batch, num_anchors, dtype=torch.bool)
    for row in range(batch):
        length = int(lengths[row])
        both_trained = (loss_mask[row, : length - 1] > 0) & (loss_mask[row, 1:length] > 0)
        candidates = torch.nonzero(both_trained, as_tuple=True)[0]  # p: p+1 < length, mask[p] and mask[p+1]
        take = min(num_anchors, candidates.numel())
        if take == 0:
            continue
        pick = candidates[torch.randperm(candidates.numel(), generator=generator)[:take]]
        anchors[row, :take] = torch.sort(pick).values
        valid[row, :take] = True
    return anchors, valid


def decay_weights(block_size: int, gamma: float, device: torch.device | None = None) -> torch.Tensor:
    """[bs] weights: 0 at k=0 (the anchor is given), exp(-(k-1)/gamma) for k >= 1."""
    k = torch.arange(block_size, dtype=torch.float, device=device)  # made on the device: no H2D copy
    w = torch.exp(-(k - 1).clamp_min(0) / gamma)
    w[0] = 0.0
    return w


def build_blocks(input_ids: torch.Tensor, loss_mask: torch.Tensor, lengths: torch.Tensor, anchors: torch.Tensor,
                 valid: torch.Tensor, mask_token_id: int, config: ObjectiveConfig) -> Blocks:
    """Block tokens, positions, labels and weights (all on ``input_ids.device``)."""
    device = input_ids.device
    batch, seq = input_ids.shape
    bs = config.block_size
    anchors, valid, lengths = anchors.to(device), valid.to(device), lengths.to(device)
    offsets = torch.arange(bs, device=device)
    label_pos = anchors[:, :, None] + offsets  # [B, N, bs]
    in_bounds = label_pos < lengths[:, None, None]
    gather_pos = label_pos.clamp_max(seq - 1).flatten(1)
    labels = torch.gather(input_ids, 1, gather_pos)
    trained = torch.gather(loss_mask.to(device).float(), 1, gather_pos).view_as(label_pos)
    weights = decay_weights(bs, config.loss_decay_gamma, device) * in_bounds * trained * valid[:, :, None]
    block_ids = torch.full_like(label_pos, mask_token_id)
    block_ids[:, :, 0] = torch.gather(input_ids, 1, anchors)
    context_pos = torch.arange(seq, device=device).expand(batch, seq)
    position_ids = torch.cat([context_pos, label_pos.flatten(1)], dim=1)
    return Blocks(anchors=anchors, block_valid=valid, block_ids=block_ids.flatten(1), position_ids=position_ids,
                  labels=labels, weights=weights.flatten(1))


def dense_block_mask(anchors: torch.Tensor, valid: torch.Tensor, seq_len: int, block_size: int) -> torch.Tensor:
    """[B, 1, N*bs, S + N*bs] bool mask for SDPA (the CPU path).

    A padding block's rows see only themselves (the diagonal) instead of nothing: SDPA turns an all-masked
    row into NaN, which would poison the backward even at weight 0. Their loss weight is 0, so this never
    changes the loss or any gradient; the BlockMask (CUDA) path lets them see nothing.
    """
    batch, num = anchors.shape
    q_len = num * block_size
    device = anchors.device
    q_block = torch.arange(q_len, device=device) // block_size  # [Q]
    kv_ctx = torch.arange(seq_len, device=device)  # [S]
    q_anchor = anchors[:, q_block]  # [B, Q]
    q_valid = valid[:, q_block]  # [B, Q]
    ctx = (kv_ctx[None, None, :] < q_anchor[:, :, None]) & q_valid[:, :, None]
    same_block = (q_block[:, None] == q_block[None, :])[None] & q_valid[:, :, None]
    diagonal = torch.eye(q_len, dtype=torch.bool, device=device)[None] & ~q_valid[:, :, None]
    return torch.cat([ctx, same_block | diagonal], dim=2)[:, None]


def flex_block_mask(anchors: torch.Tensor, valid: torch.Tensor, seq_len: int, block_size: int,
                    build: str = "mask_mod", tile: int = 128) -> Any:
    """The same mask as a flex_attention BlockMask (the CUDA path): padding blocks see nothing.

    ``build="mask_mod"`` evaluates the mask function over every (query, key) pair (``create_block_mask``:
    92 M pairs per sequence at 512 anchors, every step); ``build="anchors"`` derives the tile table from
    the sorted anchors in a few small tensor ops (``anchor_tiles``). The same ``mask_mod`` decides the
    partial tiles either way."""
    from torch.nn.attention.flex_attention import BlockMask, create_block_mask

    batch, num = anchors.shape
    mask_mod = _dflash_mask_mod(anchors, valid, seq_len, block_size)
    q_len, kv_len = num * block_size, seq_len + num * block_size
    if build == "anchors" and tile % block_size == 0:
        partial, full = anchor_tiles(anchors, valid, seq_len, block_size, tile)
        return BlockMask.from_kv_blocks(*_kv_table(partial), *_kv_table(full), BLOCK_SIZE=tile, mask_mod=mask_mod,
                                        seq_lengths=(q_len, kv_len))
    return create_block_mask(mask_mod, batch, None, q_len, kv_len, device=anchors.device, BLOCK_SIZE=tile)


def anchor_tiles(anchors: torch.Tensor, valid: torch.Tensor, seq_len: int, block_size: int, tile: int
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """(partial, full) [B, query tiles, key tiles] bool: which tiles of the block mask have some / only True.

    A query tile holds ``tile // block_size`` whole blocks. Context keys j < anchor are visible, so a key tile
    is touched iff it starts before the tile's largest valid anchor, and full iff every block of the tile is
    valid and it ends at or before the smallest anchor. A tile's own block keys lie in the one or two key
    tiles at S + the tile's query range: partial (block-diagonal). Conservative where cheap: a tile marked
    partial may turn out empty under mask_mod; a full or untouched one never holds a wrong value."""
    batch, num = anchors.shape
    per_tile = tile // block_size
    q_len, kv_len = num * block_size, seq_len + num * block_size
    rows = -(-num // per_tile)
    pad = rows * per_tile - num
    a = torch.nn.functional.pad(anchors, (0, pad)).view(batch, rows, per_tile)
    v = torch.nn.functional.pad(valid, (0, pad)).view(batch, rows, per_tile)
    max_anchor = torch.where(v, a, 0).amax(-1, keepdim=True)  # [B, R, 1]
    min_anchor = torch.where(v, a, kv_len).amin(-1, keepdim=True)
    r = torch.arange(rows, device=anchors.device)
    complete = (v.all(-1) & ((r + 1) * tile <= q_len))[..., None]
    key_start = torch.arange(-(-kv_len // tile), device=anchors.device) * tile  # [C]
    key_end = key_start + tile
    ctx_any = (key_start < seq_len) & (key_start < max_anchor)
    full = complete & (key_end <= seq_len) & (key_end <= min_anchor)
    lo = (seq_len + r * tile) // tile
    hi = (seq_len + torch.clamp((r + 1) * tile, max=q_len) - 1) // tile
    own = v.any(-1, keepdim=True) & (key_start // tile >= lo[:, None]) & (key_start // tile <= hi[:, None])
    return (ctx_any | own) & ~full, full


def _kv_table(tiles: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """BlockMask's (num_blocks [B, 1, R], indices [B, 1, R, C]) for a [B, R, C] tile selection."""
    counts = tiles.sum(-1, dtype=torch.int32)[:, None]
    order = torch.argsort(tiles.to(torch.int8), dim=-1, descending=True, stable=True).to(torch.int32)[:, None]
    return counts, order


def _dflash_mask_mod(anchors: torch.Tensor, valid: torch.Tensor, seq_len: int, block_size: int) -> Any:
    num = anchors.shape[1]

    def mask_mod(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        block = q_idx // block_size
        # flex evaluates whole 128-row tiles: rows past Q_LEN have a block index past the anchors tensor, an
        # out-of-bounds read on the GPU. Clamp the index and mask those rows out (as upstream SpecForge does).
        safe = block.clamp(max=num - 1)
        is_ctx = kv_idx < seq_len
        ctx_ok = kv_idx < anchors[b, safe]
        same_block = (kv_idx - seq_len) // block_size == block
        return (block < num) & valid[b, safe] & ((is_ctx & ctx_ok) | (~is_ctx & same_block))

    return mask_mod


_COMPILED_FLEX: Any = None


def flex_attention_fn(compiled: bool) -> Any:
    """flex_attention, compiled once per process (eager flex materialises the whole score matrix)."""
    global _COMPILED_FLEX
    from torch.nn.attention.flex_attention import flex_attention

    if not compiled:
        return flex_attention
    if _COMPILED_FLEX is None:
        _COMPILED_FLEX = torch.compile(flex_attention, dynamic=False)
    return _COMPILED_FLEX


def _ce_chunk(hidden: torch.Tensor, lm_head_weight: torch.Tensor, labels: torch.Tensor,
              weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk: logits -> (sum CE*w, number of correct trained positions). Tensors positional (reentrant-safe)."""
    logits = F.linear(hidden, lm_head_weight).float()
    ce = F.cross_entropy(logits, labels, reduction="none")
    correct = ((logits.argmax(-1) == labels) & (weights > 0)).sum()
    return (ce * weights).sum(), correct


@dataclass
class LossParts:
    loss: torch.Tensor  # sum(CE*w)/sum(w), differentiable
    weight_sum: torch.Tensor
    correct: torch.Tensor  # trained positions where argmax == label
    trained: torch.Tensor  # positions with weight > 0


def chunked_loss(hidden: torch.Tensor, lm_head_weight: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor,
                 chunk_tokens: int, use_reentrant: bool = False, sync_per_chunk: bool = False) -> LossParts:
    """Weighted CE over the full vocab, ``chunk_tokens`` positions at a time under activation checkpointing.

    Only one chunk's logits ([chunk, vocab] fp32: 2048 x 248,320 x 4 B = 2 GB) exist at once, in the
    forward and again in the backward (recomputed), instead of 8 GB for 512 anchors x 16 positions.
    Weight-0 positions (k = 0, padding) are kept rather than filtered: filtering needs ``nonzero``, whose
    data-dependent size is a CPU-GPU sync, and they are at most 1/16 of the work on full batches.
    """
    flat_h = hidden.reshape(-1, hidden.shape[-1])
    flat_y, flat_w = labels.reshape(-1), weights.reshape(-1).to(torch.float32)
    loss_sum = flat_h.new_zeros((), dtype=torch.float32)
    correct = torch.zeros((), dtype=torch.long, device=flat_h.device)
    for start in range(0, flat_h.shape[0], chunk_tokens):
        part = slice(start, start + chunk_tokens)
        chunk_loss, chunk_correct = checkpoint(_ce_chunk, flat_h[part], lm_head_weight, flat_y[part], flat_w[part],
                                               use_reentrant=use_reentrant)
        if sync_per_chunk:
            float(chunk_loss.item())  # SYNC (the host-sync scenario): a per-chunk .item() stalls the CPU on the GPU
        loss_sum = loss_sum + chunk_loss
        correct = correct + chunk_correct
    weight_sum = flat_w.sum()
    return LossParts(loss=loss_sum / weight_sum.clamp_min(1e-6), weight_sum=weight_sum, correct=correct,
                     trained=(flat_w > 0).sum())


def reference_loss(hidden: torch.Tensor, lm_head_weight: torch.Tensor, labels: torch.Tensor,
                   weights: torch.Tensor) -> torch.Tensor:
    """Unchunked, uncheckpointed weighted CE: the definition ``chunked_loss`` is tested against."""
    logits = F.linear(hidden, lm_head_weight).float()
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
    w = weights.reshape(-1).float()
    return (ce * w).sum() / w.sum().clamp_min(1e-6)


def flops_per_position(hidden: int, vocab: int) -> float:
    """lm_head matmul FLOPs for one position: 2*H*V forward (used by the benchmark's MFU count)."""
    return 2.0 * hidden * vocab


__all__ = [
    "Blocks", "LossParts", "ObjectiveConfig", "build_blocks", "chunked_loss", "decay_weights", "dense_block_mask",
    "flex_attention_fn", "flex_block_mask", "reference_loss", "sample_anchors",
]
