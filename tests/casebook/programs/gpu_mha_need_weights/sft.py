"""Supervised fine-tuning of a small decoder-only LM on packed instruction/response sequences (loss on responses).

Modelled on pytorch/pytorch#100347 ("nn.MultiheadAttention doesn't use efficient scaled_dot_product_attention":
the default need_weights=True "silently uses the native implementation") and lyuwenyu/RT-DETR#678 (every call
site discards the weights, "but the default need_weights=True forces the unfused attention path and materialises
the full [B, H, N, N] matrix before it is thrown away"). Each layer here calls self.attn(h, h, h,
attn_mask=causal_mask) and keeps only the output: the 2048x2048 attention matrices are computed, kept for the
backward pass, averaged over heads into the returned weights, and dropped.

    python sft.py                     # as written: nn.MultiheadAttention's defaults (need_weights=True)
    python sft.py --fast-attention    # need_weights=False, is_causal=True: the fused SDPA kernel; the attention
                                      # weights are still computed, once every 200 steps, for the logged map
"""
import argparse
import queue
import threading
import time

import torch
import torch.nn.functional as F
from lm import CausalLM


def packer(vocab, seq_len, batch, pin, out):
    """Packs synthetic (instruction, response) pairs into rows; the loss mask covers response tokens only."""
    g = torch.Generator().manual_seed(0)
    while True:
        ids = torch.randint(3, vocab, (batch, seq_len + 1), generator=g)
        mask = torch.zeros(batch, seq_len, dtype=torch.bool)
        for row in range(batch):
            pos = 0
            while pos < seq_len:
                n_inst, n_resp = (int(v) for v in torch.randint(seq_len // 64, seq_len // 8, (2,), generator=g))
                mask[row, pos + n_inst:pos + n_inst + n_resp] = True
                pos += n_inst + n_resp
        if pin:
            ids, mask = ids.pin_memory(), mask.pin_memory()
        out.put((ids, mask))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--fast-attention", action="store_true")
    ap.add_argument("--log-every", type=int, default=10)
    args = ap.parse_args()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    vocab, d_model, heads, layers, seq, batch = (32000, 1024, 16, 8, 2048, 2) if gpu else (1000, 64, 4, 2, 128, 2)
    torch.manual_seed(0)
    model = CausalLM(vocab, d_model, heads, layers, seq, fast_attention=args.fast_attention).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5, betas=(0.9, 0.95), weight_decay=0.0)
    batches = queue.Queue(maxsize=4)
    threading.Thread(target=packer, args=(vocab, seq, batch, gpu, batches), name="packer", daemon=True).start()
    n_params = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"sft: {n_params:.0f}M params, seq {seq}, batch {batch}, fast_attention={args.fast_attention}", flush=True)

    def loop():
        step, tokens, t0 = 0, 0, time.time()
        while True:
            ids, mask = batches.get()
            ids, mask = ids.to(device, non_blocking=True), mask.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=gpu):
                logits = model(ids[:, :-1])
            ce = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten(), reduction="none")
            loss = (ce * mask.flatten()).sum() / mask.sum().clamp(min=1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            tokens += ids.shape[0] * (ids.shape[1] - 1)
            if step % args.log_every == 0:
                print(f"[sft] step {step} loss {loss.item():.3f} {tokens / (time.time() - t0):,.0f} tok/s", flush=True)
                tokens, t0 = 0, time.time()
            if args.fast_attention and step % 200 == 0:
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=gpu):
                    w = model.first_layer_attention(ids[:1, :min(256, seq)])
                ent = -(w.float().clamp_min(1e-9).log() * w.float()).sum(-1).mean()
                print(f"[sft] attention map at step {step}: mean entropy {ent.item():.2f}", flush=True)

    t = threading.Thread(target=loop, name="sft-loop")
    t.start()
    t.join()


if __name__ == "__main__":
    main()
