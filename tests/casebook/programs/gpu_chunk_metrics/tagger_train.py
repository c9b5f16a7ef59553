"""Token tagger (BIO-style labels) trained on long sequences; the loss is computed in chunks along the sequence to
bound the logits' memory, and the F1 report is fed chunk by chunk.

Modelled on Lightning-AI/torchmetrics#2638 ("Accuracy incurs a GPU/CPU sync point ... training is slowed") and
pytorch/ignite#240 ("GPU copying slow from loss functions": metrics copied from the GPU every iteration, ~20% of
the time): every chunk's confusion counts are copied to the host with .cpu() and its gold lengths read with
.tolist(), so the fit thread waits for the GPU 32 times per batch.

  python tagger_train.py                        # metrics streamed to the host per chunk
  python tagger_train.py --metrics on-device    # counts accumulated on the GPU, copied once per report
"""
import argparse
import logging
import queue
import threading
import time

import torch
import torch.nn.functional as F

log = logging.getLogger("tagger")

N_TAGS = 17


def make_encoder(vocab, width, depth, device):
    layers = [torch.nn.Embedding(vocab, width)]
    for _ in range(depth):
        layers += [torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width)]
    return torch.nn.Sequential(*layers).to(device)


def feed(out, vocab, batch, seq, device):
    """Stand-in for the corpus reader: token ids, gold tags, sentence lengths."""
    while True:
        ids = torch.randint(0, vocab, (batch, seq), device=device)
        tags = torch.randint(0, N_TAGS, (batch, seq), device=device)
        lengths = torch.randint(seq // 4, seq + 1, (batch,), device=device)
        out.put((ids, tags, lengths))


class Confusion:
    def __init__(self):
        self.counts = torch.zeros(N_TAGS * N_TAGS, dtype=torch.long)
        self.tokens = 0

    def update(self, counts_cpu, lengths):
        self.counts += counts_cpu
        self.tokens += sum(lengths)

    def macro_f1(self):
        m = self.counts.view(N_TAGS, N_TAGS).double()
        tp = m.diag()
        prec = tp / m.sum(0).clamp(min=1)
        rec = tp / m.sum(1).clamp(min=1)
        return float((2 * prec * rec / (prec + rec).clamp(min=1e-9)).mean())


def fit(batches, args, device):
    encoder = make_encoder(args.vocab, args.width, args.depth, device)
    classifier = torch.nn.Linear(args.width, N_TAGS).to(device)
    params = list(encoder.parameters()) + list(classifier.parameters())
    opt = torch.optim.Adam(params, lr=1e-4)
    conf = Confusion()
    on_device = torch.zeros(N_TAGS * N_TAGS, dtype=torch.long, device=device)
    n, t0 = 0, time.time()
    while True:
        ids, tags, lengths = batches.get()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            hidden = encoder(ids)
        # Chunked loss: the classifier's logits for one chunk at a time, gradients gathered on a detached copy of
        # the encoder output, then one backward through the encoder.
        cut = hidden.detach().float().requires_grad_()
        total = 0.0
        for lo in range(0, ids.shape[1], args.chunk):
            h = cut[:, lo:lo + args.chunk]
            gold = tags[:, lo:lo + args.chunk]
            logits = classifier(h)
            loss = F.cross_entropy(logits.flatten(0, 1), gold.flatten()) * (h.shape[1] / ids.shape[1])
            loss.backward()
            total = total + loss.detach()
            pred = logits.argmax(-1)
            cell = (gold * N_TAGS + pred).flatten()
            if args.metrics == "per-chunk":
                pair = torch.bincount(cell, minlength=N_TAGS * N_TAGS)
                chunk_len = (lengths - lo).clamp(0, args.chunk)
                conf.update(pair.cpu(), chunk_len.tolist())
            else:
                # Not bincount: on CUDA it reads the largest index on the host to size its output (a sync).
                on_device.index_add_(0, cell, torch.ones_like(cell))
        hidden.backward(cut.grad.to(hidden.dtype))
        opt.step()
        opt.zero_grad(set_to_none=True)
        n += 1
        if n % args.report == 0:
            if args.metrics == "on-device":
                conf.update(on_device.cpu(), lengths.tolist())
                on_device.zero_()
            log.info("batch %d loss %.4f macro-F1 %.3f (%.1f batch/s)", n, float(total), conf.macro_f1(),
                     args.report / (time.time() - t0))
            t0 = time.time()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--metrics", choices=["per-chunk", "on-device"], default="per-chunk")
    p.add_argument("--report", type=int, default=10)
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(threadName)s %(message)s")
    device = torch.device(args.device)
    if device.type == "cuda":
        args.vocab, args.width, args.depth, args.batch, args.seq, args.chunk = 50_000, 1024, 2, 8, 2048, 64
    else:
        args.vocab, args.width, args.depth, args.batch, args.seq, args.chunk = 5_000, 96, 1, 4, 256, 8
    log.info("tagger on %s, %d chunks per batch, metrics %s", device, args.seq // args.chunk, args.metrics)
    batches = queue.Queue(maxsize=6)
    threading.Thread(target=feed, args=(batches, args.vocab, args.batch, args.seq, device), name="corpus-reader",
                     daemon=True).start()
    worker = threading.Thread(target=fit, args=(batches, args, device), name="fit")
    worker.start()
    worker.join()


if __name__ == "__main__":
    main()
