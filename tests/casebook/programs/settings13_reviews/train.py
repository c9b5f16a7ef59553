"""Star-rating classifier for product reviews (1-5 stars) with a small Transformer encoder.

    start-up          a review corpus is synthesised and a byte-level BPE vocabulary learnt from it and saved
                      (tokenizer.json) into a scratch directory
    reader thread     shuffles the corpus and hands out chunks of (text, stars)
    tokenizer thread  encodes each chunk with the tokenizer built by textpipe.build_tokenizer (the HF
                      `tokenizers` library; truncation and padding from the tokenizer settings file) into id and
                      attention-mask tensors
    main thread       trains the encoder (padding positions masked out of attention and pooling)

The tokenizer settings (truncation, padding) come from a JSON file shared with the serving exporter,
--tokenizer-settings.

usage: python train.py [--tokenizer-settings configs/tokenizer_serving.json] [--batch 16] [--steps N]

The serving settings pad every batch to a fixed 128 tokens (the exporter's static shape) where most reviews are
a few dozen tokens long and a batch's longest is about 80; public reports of fixed max-length padding against
per-batch (dynamic) padding: huggingface/transformers#4842, QData/TextAttack#737,
deepspeedai/DeepSpeedExamples#849, yoyolicoris/music-spectrogram-diffusion-pytorch#35.
"""
import argparse
import os
import queue
import random
import shutil
import signal
import tempfile
import threading
import time

import torch
import torch.nn.functional as F
from torch import nn

import corpus
import textpipe

HERE = os.path.dirname(os.path.abspath(__file__))


def cli():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer-settings", default=os.path.join(HERE, "configs", "tokenizer_serving.json"))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--reviews", type=int, default=20000)
    ap.add_argument("--steps", type=int, default=2 ** 62)
    ap.add_argument("--lr", type=float, default=5e-4)
    return ap.parse_args()


def put(q, item, stop):
    while not stop.is_set():
        try:
            q.put(item, timeout=0.5)
            return True
        except queue.Full:
            pass
    return False


class ReviewReader(threading.Thread):
    def __init__(self, reviews, batch, out, stop):
        super().__init__(name="review-reader", daemon=True)
        self.reviews, self.batch, self.out, self.stop = list(reviews), batch, out, stop

    def run(self):
        rng = random.Random(1)
        while not self.stop.is_set():
            rng.shuffle(self.reviews)
            for i in range(0, len(self.reviews) - self.batch + 1, self.batch):
                if not put(self.out, self.reviews[i:i + self.batch], self.stop):
                    return


class TokenizerWorker(threading.Thread):
    def __init__(self, tok, inbox, out, stop):
        super().__init__(name="tokenizer", daemon=True)
        self.tok, self.inbox, self.out, self.stop = tok, inbox, out, stop
        self.error = None

    def run(self):
        try:
            while not self.stop.is_set():
                try:
                    chunk = self.inbox.get(timeout=0.5)
                except queue.Empty:
                    continue
                encs = self.tok.encode_batch([text for text, _ in chunk])
                ids = torch.tensor([e.ids for e in encs])
                mask = torch.tensor([e.attention_mask for e in encs], dtype=torch.bool)
                stars = torch.tensor([s for _, s in chunk])
                if not put(self.out, (ids, mask, stars), self.stop):
                    return
        except Exception as exc:        # noqa: BLE001 - reported by the main thread
            self.error = exc


class ReviewEncoder(nn.Module):
    def __init__(self, vocab, d=64, heads=4, layers=2, max_len=512, classes=5):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.1, batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, classes))

    def forward(self, ids, mask):
        pos = torch.arange(ids.shape[1])
        h = self.encoder(self.tok(ids) + self.pos(pos)[None], src_key_padding_mask=~mask)
        m = mask.unsqueeze(-1).float()
        return self.head((h * m).sum(1) / m.sum(1).clamp(min=1))


class Interrupted(BaseException):
    pass


def main():
    args = cli()
    if not os.path.isabs(args.tokenizer_settings) and not os.path.exists(args.tokenizer_settings):
        args.tokenizer_settings = os.path.join(HERE, args.tokenizer_settings)   # relative to the program's folder
    settings = textpipe.load_settings(args.tokenizer_settings)
    torch.set_num_threads(1)
    torch.manual_seed(0)

    def on_signal(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Interrupted()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    stop = threading.Event()
    scratch = None
    threads = []
    try:
        scratch = tempfile.mkdtemp(prefix="reviews-")
        reviews = corpus.corpus(args.reviews, seed=2)
        vocab_path = os.path.join(scratch, "tokenizer.json")
        textpipe.learn_vocab([text for text, _ in reviews[:8000]], vocab_path)
        tok = textpipe.build_tokenizer(vocab_path, settings)
        raw = queue.Queue(maxsize=8)
        batches = queue.Queue(maxsize=4)
        tokenizer = TokenizerWorker(tok, raw, batches, stop)
        threads = [ReviewReader(reviews, args.batch, raw, stop), tokenizer]
        for t in threads:
            t.start()

        model = ReviewEncoder(tok.get_vocab_size())
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
        step, tick, tick_step = 0, time.monotonic(), 0
        while step < args.steps:
            try:
                ids, mask, stars = batches.get(timeout=2.0)
            except queue.Empty:
                if tokenizer.error is not None or not all(t.is_alive() for t in threads):
                    raise RuntimeError(f"tokenizer pipeline stopped: {tokenizer.error!r}")
                continue
            loss = F.cross_entropy(model(ids, mask), stars)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            if step % 25 == 0:
                now = time.monotonic()
                print(f"step {step} loss {loss.item():.4f} rate {(step - tick_step) / (now - tick):.1f}/s",
                      flush=True)
                tick, tick_step = now, step
    except Interrupted:
        print("interrupted, stopping the tokenizer threads", flush=True)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=2)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
