"""Dense retriever fine-tuned from a small causal LM: mean-pooled last hidden state as the embedding, in-batch
InfoNCE between queries and passages. A miner thread assembles (query, passage) id batches.

Modelled on NVIDIA/Isaac-GR00T#734 ("Skip full-vocabulary logits the backbone never reads": the backbone only
consumes hidden_states[-1], but the causal-LM forward evaluates lm_head over every token), unslothai/unsloth#8576
(a hidden-states wrapper "paying for logits it discards", up to an OOM) and ggml-org/llama.cpp#25964 (embedding
requests still running the vocabulary projection): here every forward projects all positions of queries and
passages onto a 128k vocabulary, and only the hidden states are read.

  python train_retriever.py                 # embed() calls the causal-LM wrapper (as written)
  python train_retriever.py --hidden-only   # embed() calls the body; the head is used once per report
"""
from __future__ import annotations

import argparse
import queue
import threading
import time

import torch
import torch.nn.functional as F

from modeling_tiny import TinyConfig, TinyForCausalLM


def embed(lm: TinyForCausalLM, ids: torch.Tensor, hidden_only: bool) -> torch.Tensor:
    if hidden_only:
        last = lm.model(ids)[-1]
    else:
        out = lm(ids, output_hidden_states=True)
        last = out.hidden_states[-1]
    return F.normalize(last.float().mean(dim=1), dim=-1)


def miner(out: queue.Queue, cfg: TinyConfig, batch: int, q_len: int, p_len: int, device: torch.device) -> None:
    g = torch.Generator(device=device).manual_seed(5)
    while True:
        queries = torch.randint(0, cfg.vocab_size, (batch, q_len), device=device, generator=g)
        passages = torch.cat([queries[:, : q_len // 2],
                              torch.randint(0, cfg.vocab_size, (batch, p_len - q_len // 2), device=device,
                                            generator=g)], dim=1)
        out.put((queries, passages))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--hidden-only", action="store_true")
    args = ap.parse_args()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    cfg = TinyConfig() if gpu else TinyConfig(vocab_size=8_000, hidden_size=128, intermediate_size=256, num_layers=2)
    batch, q_len, p_len = (32, 64, 256) if gpu else (8, 16, 48)
    lm = TinyForCausalLM(cfg).to(device)
    opt = torch.optim.AdamW(lm.model.parameters(), lr=2e-5)
    pairs: queue.Queue = queue.Queue(maxsize=4)
    threading.Thread(target=miner, args=(pairs, cfg, batch, q_len, p_len, device), name="pair-miner",
                     daemon=True).start()

    def train() -> None:
        step, t0 = 0, time.time()
        while True:
            queries, passages = pairs.get()
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=gpu):
                q = embed(lm, queries, args.hidden_only)
                p = embed(lm, passages, args.hidden_only)
            scores = q @ p.T / 0.05
            loss = F.cross_entropy(scores, torch.arange(len(q), device=device))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            if step % 20 == 0:
                msg = f"[retriever] step {step} infonce {loss.item():.4f} {20 / (time.time() - t0):.1f} it/s"
                if args.hidden_only:  # the LM head still answers: next-token check on the last position only
                    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=gpu):
                        nxt = lm(queries[:2], logits_to_keep=1).logits.argmax(-1)
                    msg += f" next-token {nxt.flatten().tolist()}"
                print(msg, flush=True)
                t0 = time.time()

    worker = threading.Thread(target=train, name="retriever-train")
    worker.start()
    worker.join()


if __name__ == "__main__":
    main()
