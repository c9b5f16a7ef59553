"""Synthetic one-second keyword clips -> log-spectrogram features."""
import numpy as np
import torch

SR = 8000
N_WORDS = 12
N_FFT, HOP = 256, 128


class ClipSynth:
    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.formants = self.rng.uniform(200, 3000, size=(N_WORDS, 3))
        self.window = torch.hann_window(N_FFT)

    def batch(self, n):
        words = self.rng.integers(0, N_WORDS, size=n)
        t = np.arange(SR, dtype=np.float32) / SR
        wav = np.empty((n, SR), dtype=np.float32)
        for i, w in enumerate(words):
            f = self.formants[w] * self.rng.uniform(0.95, 1.05)
            env = np.exp(-((t - self.rng.uniform(0.3, 0.7)) ** 2) / 0.02)
            wav[i] = env * (np.sin(2 * np.pi * f[0] * t) + 0.5 * np.sin(2 * np.pi * f[1] * t)
                            + 0.25 * np.sin(2 * np.pi * f[2] * t)) + 0.05 * self.rng.standard_normal(SR)
        spec = torch.stft(torch.from_numpy(wav), N_FFT, HOP, window=self.window, return_complex=True)
        feats = torch.log1p(spec.abs()[:, :64, :])          # [n, 64 bins, 63 frames]
        return feats.unsqueeze(1), torch.from_numpy(words)
