"""Utterance loading and acoustic features on the host: decode, speed perturbation, log-mel, SpecAugment."""
import math
import random

import torch
import torch.nn.functional as F

SAMPLE_RATE, N_FFT, HOP, N_MELS = 16000, 512, 160, 80


def mel_filterbank(n_mels=N_MELS, n_fft=N_FFT, sr=SAMPLE_RATE):
    def hz_to_mel(f):
        return 2595.0 * math.log10(1.0 + f / 700.0)

    mels = torch.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2), n_mels + 2)
    hz = 700.0 * (10 ** (mels / 2595.0) - 1.0)
    bins = torch.floor((n_fft + 1) * hz / sr).long()
    fb = torch.zeros(n_mels, n_fft // 2 + 1)
    for m in range(1, n_mels + 1):
        lo, mid, hi = bins[m - 1].item(), bins[m].item(), bins[m + 1].item()
        for k in range(lo, mid):
            fb[m - 1, k] = (k - lo) / max(mid - lo, 1)
        for k in range(mid, hi):
            fb[m - 1, k] = (hi - k) / max(hi - mid, 1)
    return fb


class UtteranceSet(torch.utils.data.Dataset):
    """Synthetic 'recordings': voiced harmonics with a drifting pitch plus noise, 3-9 s each, and a transcript."""

    def __init__(self, n_utts=20000, vocab=32, seed=0):
        self.n, self.vocab, self.seed = n_utts, vocab, seed
        self.fbank = mel_filterbank()
        self.window = torch.hann_window(N_FFT)

    def __len__(self):
        return self.n

    def decode(self, rng, seconds):
        n = int(seconds * SAMPLE_RATE)
        t = torch.arange(n) / SAMPLE_RATE
        f0 = 110 + 60 * torch.sin(2 * math.pi * rng.uniform(0.2, 1.0) * t)
        phase = 2 * math.pi * torch.cumsum(f0, 0) / SAMPLE_RATE
        wav = sum(torch.sin(k * phase) / k for k in range(1, 6))
        return wav + 0.05 * torch.randn(n)

    def __getitem__(self, i):
        rng = random.Random(self.seed * 1_000_003 + i)
        wav = self.decode(rng, rng.uniform(3.0, 9.0))
        speed = rng.choice([0.9, 1.0, 1.1])  # speed perturbation
        if speed != 1.0:
            wav = F.interpolate(wav[None, None], scale_factor=1 / speed, mode="linear", align_corners=False)[0, 0]
        spec = torch.stft(wav, N_FFT, HOP, window=self.window, return_complex=True).abs() ** 2
        feats = torch.log(self.fbank @ spec + 1e-6).T  # (frames, mels)
        feats = (feats - feats.mean(0)) / (feats.std(0) + 1e-5)
        for _ in range(2):  # SpecAugment: two frequency masks, two time masks
            f = rng.randrange(0, 15)
            f0 = rng.randrange(0, N_MELS - f)
            feats[:, f0:f0 + f] = 0
            w = rng.randrange(0, 40)
            t0 = rng.randrange(0, max(1, feats.shape[0] - w))
            feats[t0:t0 + w] = 0
        labels = torch.tensor([rng.randrange(1, self.vocab) for _ in range(int(feats.shape[0] / 25))])
        return feats, labels


def pad_collate(batch):
    feats, labels = zip(*batch)
    flen = torch.tensor([f.shape[0] for f in feats])
    llen = torch.tensor([len(lab) for lab in labels])
    x = torch.nn.utils.rnn.pad_sequence(feats, batch_first=True)
    y = torch.nn.utils.rnn.pad_sequence(labels, batch_first=True)
    return x, flen, y, llen
