"""The DFlash objective: anchors, blocks/labels/weights, the block mask, the chunked loss."""

from __future__ import annotations

import math

import pytest
import torch

from reference_trainer.loss import (
    ObjectiveConfig,
    build_blocks,
    chunked_loss,
    decay_weights,
    dense_block_mask,
    flex_block_mask,
    reference_loss,
    sample_anchors,
)


def brute_force_mask(anchors: torch.Tensor, valid: torch.Tensor, seq_len: int, bs: int) -> torch.Tensor:
    """The mask by its definition, one (query, key) pair at a time."""
    batch, num = anchors.shape
    q_len, kv_len = num * bs, seq_len + num * bs
    out = torch.zeros(batch, q_len, kv_len, dtype=torch.bool)
    for b in range(batch):
        for q in range(q_len):
            block = q // bs
            if not valid[b, block]:
                continue  # padding blocks see nothing
            for kv in range(kv_len):
                if kv < seq_len:
                    out[b, q, kv] = kv < anchors[b, block]  # context strictly before the anchor
                else:
                    out[b, q, kv] = (kv - seq_len) // bs == block  # own block only, both directions
    return out


@pytest.fixture
def anchors_case() -> tuple[torch.Tensor, torch.Tensor, int, int]:
    seq_len, bs = 24, 4
    loss_mask = torch.ones(3, seq_len)
    loss_mask[1, :10] = 0  # a prompt: no anchors whose next token is untrained
    lengths = torch.tensor([24, 20, 5])  # row 2 is short: padding blocks
    anchors, valid = sample_anchors(loss_mask, lengths, 6, torch.Generator().manual_seed(3))
    return anchors, valid, seq_len, bs


def test_anchors_are_sorted_distinct_and_valid() -> None:
    loss_mask = torch.ones(2, 50)
    loss_mask[0, :20] = 0
    lengths = torch.tensor([50, 9])
    anchors, valid = sample_anchors(loss_mask, lengths, 16, torch.Generator().manual_seed(0))
    for row in range(2):
        picked = anchors[row][valid[row]]
        assert torch.equal(picked, picked.sort().values) and picked.unique().numel() == picked.numel()
        assert bool(((picked + 1) < lengths[row]).all())
        assert bool((loss_mask[row, picked] == 1).all()) and bool((loss_mask[row, picked + 1] == 1).all())
    assert int(valid[0].sum()) == 16 and 19 not in anchors[0].tolist()  # 19: last prompt token, not supervised
    assert int(valid[1].sum()) == 8  # only positions 0..7 have a next token inside a length-9 sequence


def test_dense_mask_matches_brute_force(anchors_case) -> None:
    anchors, valid, seq_len, bs = anchors_case
    assert not bool(valid.all()), "the case must contain padding blocks"
    expected = brute_force_mask(anchors, valid, seq_len, bs)
    dense = dense_block_mask(anchors, valid, seq_len, bs)[:, 0]
    rows_valid = valid.repeat_interleave(bs, dim=1)
    assert torch.equal(dense[rows_valid], expected[rows_valid])
    # Padding rows see only their own diagonal (SDPA would NaN on an empty row); their weight is 0.
    pad = dense[~rows_valid]
    assert bool((pad.sum(-1) == 1).all())


def test_flex_block_mask_matches_brute_force(anchors_case) -> None:
    anchors, valid, seq_len, bs = anchors_case
    expected = brute_force_mask(anchors, valid, seq_len, bs)
    block_mask = flex_block_mask(anchors, valid, seq_len, bs)
    batch, q_len, kv_len = expected.shape
    b = torch.arange(batch)[:, None, None]
    q = torch.arange(q_len)[None, :, None]
    kv = torch.arange(kv_len)[None, None, :]
    evaluated = block_mask.mask_mod(b, torch.zeros_like(b), q, kv)
    assert torch.equal(evaluated.expand_as(expected), expected)


def _element_mask(block_mask, batch: int, q_len: int, kv_len: int, tile: int) -> torch.Tensor:
    """What flex computes from a BlockMask: full tiles all True, partial tiles by mask_mod, the rest False."""
    out = torch.zeros(batch, q_len, kv_len, dtype=torch.bool)
    for b in range(batch):
        for r in range(block_mask.kv_num_blocks.shape[-1]):
            partial = block_mask.kv_indices[b, 0, r, : block_mask.kv_num_blocks[b, 0, r]].tolist()
            full = block_mask.full_kv_indices[b, 0, r, : block_mask.full_kv_num_blocks[b, 0, r]].tolist()
            assert not set(partial) & set(full)
            q = torch.arange(r * tile, min((r + 1) * tile, q_len))
            for c in partial + full:
                kv = torch.arange(c * tile, min((c + 1) * tile, kv_len))
                if c in full:
                    out[b, q[:, None], kv[None, :]] = True
                else:
                    bb = torch.tensor(b)
                    out[b, q[:, None], kv[None, :]] = block_mask.mask_mod(bb, bb, q[:, None], kv[None, :])
    return out


@pytest.mark.parametrize("seed", range(4))
def test_block_mask_from_sorted_anchors_is_the_mask(seed: int) -> None:
    """The anchors-derived tile table (no mask_mod over every pair) gives flex exactly the defined mask."""
    seq_len, bs, tile = 64, 4, 8
    loss_mask = torch.ones(3, seq_len)
    loss_mask[1, :30] = 0
    lengths = torch.tensor([64, 50, 9])
    anchors, valid = sample_anchors(loss_mask, lengths, 12, torch.Generator().manual_seed(seed))
    expected = brute_force_mask(anchors, valid, seq_len, bs)
    batch, q_len, kv_len = expected.shape
    fast = flex_block_mask(anchors, valid, seq_len, bs, build="anchors", tile=tile)
    assert torch.equal(_element_mask(fast, batch, q_len, kv_len, tile), expected)
    assert int(fast.full_kv_num_blocks.sum()) > 0  # the case has full context tiles (they skip mask_mod)
    exact = flex_block_mask(anchors, valid, seq_len, bs, build="mask_mod", tile=tile)
    assert torch.equal(_element_mask(exact, batch, q_len, kv_len, tile), expected)
    assert torch.equal(fast.full_kv_num_blocks, exact.full_kv_num_blocks)  # the same full tiles


def test_flex_mask_past_the_last_block_is_false_not_an_out_of_bounds_read(anchors_case) -> None:
    """flex_attention works in 128-row tiles: in a partial last tile the kernel evaluates mask_mod for rows
    past Q_LEN, whose block index is past the anchors tensor (on the GPU, an unchecked read)."""
    anchors, valid, seq_len, bs = anchors_case
    block_mask = flex_block_mask(anchors, valid, seq_len, bs)
    q_len = anchors.shape[1] * bs
    b = torch.arange(anchors.shape[0])[:, None, None]
    q = torch.arange(q_len, q_len + 128)[None, :, None]
    kv = torch.arange(seq_len + q_len)[None, None, :]
    assert not bool(block_mask.mask_mod(b, torch.zeros_like(b), q, kv).any())


def test_blocks_labels_weights() -> None:
    config = ObjectiveConfig(block_size=4, num_anchors=3, ce_chunk_tokens=8)
    ids = torch.arange(100, 120).view(1, 20)
    loss_mask = torch.ones(1, 20)
    loss_mask[0, 6] = 0
    anchors, valid = torch.tensor([[4, 17, 0]]), torch.tensor([[True, True, False]])
    blocks = build_blocks(ids, loss_mask, torch.tensor([19]), anchors, valid, mask_token_id=7, config=config)
    assert blocks.block_ids.tolist() == [[104, 7, 7, 7, 117, 7, 7, 7, 100, 7, 7, 7]]
    assert blocks.labels[0, :8].tolist() == [104, 105, 106, 107, 117, 118, 119, 119]  # same position; clamped
    w = decay_weights(4, 7.0)
    assert w[0] == 0 and math.isclose(float(w[1]), 1.0) and math.isclose(float(w[3]), math.exp(-2 / 7), rel_tol=1e-6)
    weights = blocks.weights[0]
    assert weights[0] == 0  # the anchor itself
    assert weights[2] == 0  # loss_mask 0 at position 6
    assert weights[6] == 0 and weights[7] == 0  # positions 19, 20 are past length 19
    assert bool((weights[8:] == 0).all())  # padding block
    assert math.isclose(float(weights[5]), 1.0) and math.isclose(float(weights[3]), float(w[3]), rel_tol=1e-6)
    assert blocks.position_ids[0, 20:24].tolist() == [4, 5, 6, 7]


@pytest.mark.parametrize("chunk", [1, 7, 64, 10_000])
@pytest.mark.parametrize("reentrant", [False, True])
def test_chunked_loss_equals_unchunked(chunk: int, reentrant: bool) -> None:
    torch.manual_seed(0)
    hidden = torch.randn(2, 24, 16, requires_grad=True)
    head = torch.randn(50, 16) * 0.3
    labels = torch.randint(0, 50, (2, 24))
    weights = torch.rand(2, 24) * (torch.rand(2, 24) > 0.3)
    ref = reference_loss(hidden, head, labels, weights)
    (ref_grad,) = torch.autograd.grad(ref, hidden)
    parts = chunked_loss(hidden, head, labels, weights, chunk, use_reentrant=reentrant)
    parts.loss.backward()  # reentrant checkpointing refuses autograd.grad
    grad = hidden.grad
    torch.testing.assert_close(parts.loss, ref)
    torch.testing.assert_close(grad, ref_grad)
    logits = hidden.detach() @ head.T
    expected_correct = int(((logits.argmax(-1) == labels) & (weights > 0)).sum())
    assert int(parts.correct) == expected_correct and int(parts.trained) == int((weights > 0).sum())


def _blocks_case(seed: int, bs: int = 4, blocks: int = 6, size: int = 16, vocab: int = 50
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(2, blocks * bs, size, generator=gen, requires_grad=True)
    head = torch.randn(vocab, size, generator=gen) * 0.3
    labels = torch.randint(0, vocab, (2, blocks * bs), generator=gen)
    weights = torch.rand(2, blocks * bs, generator=gen) * (torch.rand(2, blocks * bs, generator=gen) > 0.3)
    weights.view(2, blocks, bs)[:, :, 0] = 0  # k = 0: the anchor is given, never trained (as build_blocks makes)
    weights.view(2, blocks, bs)[1, -2:] = 0  # padding blocks
    return hidden, head, labels, weights


@pytest.mark.parametrize("chunk", [1, 7, 64, 10_000])
def test_fused_loss_equals_the_definition_value_gradient_and_counts(chunk: int) -> None:
    from reference_trainer.fused_loss import fused_loss

    hidden, head, labels, weights = _blocks_case(seed=chunk)
    ref = reference_loss(hidden, head, labels, weights)
    (ref_grad,) = torch.autograd.grad(ref, hidden)
    parts = fused_loss(hidden, head, labels, weights, block_size=4, chunk_tokens=chunk)
    (grad,) = torch.autograd.grad(parts.loss * 3.0, hidden)  # the upstream gradient scales it
    torch.testing.assert_close(parts.loss, ref)
    torch.testing.assert_close(grad, 3.0 * ref_grad)
    chunked = chunked_loss(hidden, head, labels, weights, chunk)
    assert int(parts.correct) == int(chunked.correct) and int(parts.trained) == int(chunked.trained)
    torch.testing.assert_close(parts.weight_sum, chunked.weight_sum)


def test_fused_loss_with_a_bf16_head_matches_within_bf16_precision() -> None:
    from reference_trainer.fused_loss import fused_loss

    hidden, head, labels, weights = _blocks_case(seed=5, size=64, vocab=300)
    ref = reference_loss(hidden, head, labels, weights)
    (ref_grad,) = torch.autograd.grad(ref, hidden)
    parts = fused_loss(hidden, head.bfloat16(), labels, weights, block_size=4, chunk_tokens=16)
    (grad,) = torch.autograd.grad(parts.loss, hidden)
    assert grad.dtype == hidden.dtype
    torch.testing.assert_close(parts.loss, ref, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(grad, ref_grad, rtol=5e-2, atol=5e-3)


@pytest.mark.slow
def test_fused_loss_with_the_compiled_epilogue_equals_the_definition() -> None:
    """The torch.compile'd softmax-gradient epilogue (inductor; ~15 s to compile on a CPU)."""
    from reference_trainer.fused_loss import fused_loss

    hidden, head, labels, weights = _blocks_case(seed=3)
    ref = reference_loss(hidden, head, labels, weights)
    (ref_grad,) = torch.autograd.grad(ref, hidden)
    parts = fused_loss(hidden, head, labels, weights, block_size=4, chunk_tokens=16, compiled=True)
    (grad,) = torch.autograd.grad(parts.loss, hidden)
    torch.testing.assert_close(parts.loss, ref)
    torch.testing.assert_close(grad, ref_grad)
