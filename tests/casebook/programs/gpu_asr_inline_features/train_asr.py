"""CTC speech recogniser: a conv-subsampling + Transformer encoder trained on log-mel features computed on the fly.

Modelled on Lightning-AI/pytorch-lightning#782's profile of a DataLoader without workers (19 of 19 seconds in
`get_train_batch`: `__getitem__` transforms run in the training process) and pytorch/pytorch#21630 ("how to
accelerate dataloader?"): the recipe's `num_workers: 0`, left from debugging, puts decoding, speed perturbation,
the STFT, the mel projection and SpecAugment of every utterance in the training loop, between steps; the GPU
waits for each batch to be built.

    python train_asr.py                    # --num-workers 0 (the recipe's value)
    python train_asr.py --num-workers 12   # the same Dataset and DataLoader, 12 persistent worker processes
"""
import argparse
import threading
import time

import torch
import torch.nn.functional as F
from features import N_MELS, UtteranceSet, pad_collate
from torch import nn


class Encoder(nn.Module):
    def __init__(self, dim=256, layers=8, heads=4, vocab=32):
        super().__init__()
        self.subsample = nn.Sequential(nn.Conv1d(N_MELS, dim, 3, stride=2, padding=1), nn.GELU(),
                                       nn.Conv1d(dim, dim, 3, stride=2, padding=1), nn.GELU())
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.ctc_head = nn.Linear(dim, vocab)

    def forward(self, feats, flen):
        h = self.subsample(feats.transpose(1, 2)).transpose(1, 2)
        hlen = (flen + 3) // 4
        pad = torch.arange(h.shape[1], device=h.device)[None, :] >= hlen[:, None]
        h = self.encoder(h, src_key_padding_mask=pad)
        return self.ctc_head(h).log_softmax(-1), hlen


class Throughput:
    """Audio seconds trained per wall second, reported by a side thread every few seconds."""

    def __init__(self):
        self.lock, self.audio_s, self.steps = threading.Lock(), 0.0, 0

    def add(self, audio_s):
        with self.lock:
            self.audio_s += audio_s
            self.steps += 1

    def report_forever(self, every_s=10.0):
        last, t0 = 0.0, time.time()
        while True:
            time.sleep(every_s)
            with self.lock:
                done, steps = self.audio_s, self.steps
            print(f"[meter] {(done - last) / (time.time() - t0):.0f}x realtime after {steps} steps", flush=True)
            last, t0 = done, time.time()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--num-workers", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=20)
    args = ap.parse_args()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    batch = args.batch_size or (32 if gpu else 4)
    torch.manual_seed(0)
    model = Encoder(dim=768 if gpu else 64, layers=12 if gpu else 2, heads=12 if gpu else 4).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    loader = torch.utils.data.DataLoader(
        UtteranceSet(), batch_size=batch, shuffle=True, collate_fn=pad_collate, num_workers=args.num_workers,
        pin_memory=gpu, persistent_workers=args.num_workers > 0, drop_last=True)
    meter = Throughput()
    threading.Thread(target=meter.report_forever, name="meter", daemon=True).start()
    print(f"asr: batch={batch} num_workers={args.num_workers} device={device}", flush=True)
    step, t0 = 0, time.time()
    while True:
        for feats, flen, labels, llen in loader:
            audio_s = float(flen.sum()) * 0.01  # host-side lengths: 10 ms frames
            feats, labels = feats.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            flen, llen = flen.to(device, non_blocking=True), llen.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=gpu):
                logp, hlen = model(feats, flen)
            loss = F.ctc_loss(logp.float().transpose(0, 1), labels, hlen, llen, zero_infinity=True)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            step += 1
            meter.add(audio_s)
            if step % args.log_every == 0:
                print(f"train step {step} ctc {loss.item():.3f} {args.log_every / (time.time() - t0):.2f} steps/s",
                      flush=True)
                t0 = time.time()


if __name__ == "__main__":
    main()
