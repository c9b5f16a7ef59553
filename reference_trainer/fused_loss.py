"""Weighted CE over the frozen lm_head with the input gradient computed in the forward pass (``--loss fused``).

The lm_head is frozen, so the only gradient the loss must produce is the one for its input, and it is
known the moment a chunk's logits are: d(sum w*CE)/d(logits) = w * (softmax - onehot), then
d/d(hidden) = that @ W. So each chunk does one matmul for the logits and one for the gradient, and keeps
only the [rows, H] gradient (42 MB for 8192 x 2560 bf16); the backward is a scale by the upstream gradient.
The checkpointed chunked CE (``--loss chunked``, loss.chunked_loss) instead runs each chunk's matmul and
softmax twice (forward, then recomputed in backward) plus the gradient matmul, and holds an fp32
log-softmax beside the fp32 logits.

Anchor positions (k = 0) never carry weight, so their rows are dropped before the matmul by a reshape
(``[B, N, bs, H][:, :, 1:]``): 1/16 less lm_head work, no data-dependent shape, no host sync. Padding
blocks keep their rows (dropping them would need ``nonzero``, a sync) at weight 0.

``compiled=True`` fuses each chunk's softmax-gradient epilogue with torch.compile, so the fp32 math happens
in registers on the bf16 logits instead of in an fp32 copy of the chunk (CUDA; an extra switch because it
compiles per device and chunk shape).
"""

from __future__ import annotations

from typing import Any

import torch

from reference_trainer.loss import LossParts


def _epilogue(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One chunk: (sum CE*w, correct trained positions, d(sum CE*w)/d(logits) in the logits' dtype)."""
    logits32 = logits.float()  # eager: one fp32 copy of the chunk (the same tensor when already fp32)
    lse = torch.logsumexp(logits32, dim=-1)
    target = logits32.gather(1, labels[:, None]).squeeze(1)
    loss_sum = ((lse - target) * weights).sum()
    correct = ((logits32.argmax(-1) == labels) & (weights > 0)).sum()
    grad = logits32.sub_(lse[:, None]).exp_()  # softmax, in place (the logits are not needed any more)
    grad.scatter_add_(1, labels[:, None], torch.full_like(target[:, None], -1.0))
    grad.mul_(weights[:, None])
    return loss_sum, correct, grad.to(logits.dtype)


_COMPILED_EPILOGUE: Any = None


def _compiled_epilogue() -> Any:
    global _COMPILED_EPILOGUE
    if _COMPILED_EPILOGUE is None:
        _COMPILED_EPILOGUE = torch.compile(_epilogue, dynamic=False)
    return _COMPILED_EPILOGUE


def _add(loss_sum: torch.Tensor, correct: torch.Tensor, chunk_loss: torch.Tensor, chunk_correct: torch.Tensor,
         sync_per_chunk: bool) -> tuple[torch.Tensor, torch.Tensor]:
    if sync_per_chunk:
        float(chunk_loss.item())  # SYNC (the host-sync scenario): a per-chunk .item() stalls the CPU on the GPU
    return loss_sum + chunk_loss, correct + chunk_correct


class _FrozenHeadCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor,
                chunk_rows: int, compiled: bool, sync_per_chunk: bool) -> tuple[torch.Tensor, ...]:
        epilogue = _compiled_epilogue() if compiled else _epilogue
        compute = weight.dtype  # bf16 on CUDA (the target's dtype), fp32 on CPU; casts are explicit here
        grad = torch.empty(hidden.shape, dtype=compute, device=hidden.device)
        loss_sum = torch.zeros((), dtype=torch.float32, device=hidden.device)
        correct = torch.zeros((), dtype=torch.long, device=hidden.device)
        with torch.autocast(hidden.device.type, enabled=False):
            for start in range(0, hidden.shape[0], chunk_rows):
                part = slice(start, start + chunk_rows)
                logits = hidden[part].to(compute) @ weight.t()
                chunk_loss, chunk_correct, grad_logits = epilogue(logits, labels[part], weights[part])
                del logits
                torch.mm(grad_logits, weight, out=grad[part])
                loss_sum, correct = _add(loss_sum, correct, chunk_loss, chunk_correct, sync_per_chunk)
        weight_sum = weights.sum()
        scale = 1.0 / weight_sum.clamp_min(1e-6)
        ctx.save_for_backward(grad, scale)
        ctx.input_dtype = hidden.dtype
        ctx.mark_non_differentiable(weight_sum, correct)
        return loss_sum * scale, weight_sum, correct

    @staticmethod
    def backward(ctx: Any, grad_loss: torch.Tensor, *unused: Any) -> tuple[Any, ...]:
        grad, scale = ctx.saved_tensors
        return (grad * (grad_loss * scale)).to(ctx.input_dtype), None, None, None, None, None, None


def fused_loss(hidden: torch.Tensor, lm_head_weight: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor,
               block_size: int, chunk_tokens: int, compiled: bool = False, sync_per_chunk: bool = False) -> LossParts:
    """Same value, gradient and counts as ``loss.chunked_loss`` (tested), without recompute or the k = 0 rows.

    hidden [B, N*bs, H], labels and weights [B, N*bs]."""
    batch, positions, size = hidden.shape
    blocks = positions // block_size
    kept_h = hidden.view(batch, blocks, block_size, size)[:, :, 1:].reshape(-1, size)
    kept_y = labels.view(batch, blocks, block_size)[:, :, 1:].reshape(-1)
    kept_w = weights.view(batch, blocks, block_size)[:, :, 1:].reshape(-1).to(torch.float32)
    loss, weight_sum, correct = _FrozenHeadCE.apply(kept_h, lm_head_weight.detach(), kept_y, kept_w, chunk_tokens,
                                                    compiled, sync_per_chunk)
    return LossParts(loss=loss, weight_sum=weight_sum, correct=correct, trained=(kept_w > 0).sum())
