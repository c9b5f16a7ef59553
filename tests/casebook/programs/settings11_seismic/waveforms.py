"""Synthetic three-component seismograms (deterministic): P and S wavelets with event-dependent arrival, magnitude and
azimuth, on coloured site noise. The decoder process produces them a few records at a time (as it would decode
miniSEED blocks); the record layout is shared with the trainer."""
import struct

import numpy as np

N_CHANNELS = 3
N_SAMPLES = 2000            # 20 s at 100 Hz
FS = 100.0
N_CLASSES = 4               # noise, local, regional, teleseismic
RECORD_HEADER = struct.Struct("<IIf")     # sequence number, class, log10 distance
RECORD_BYTES = RECORD_HEADER.size + N_CHANNELS * N_SAMPLES * 4
BLOCK = 4                   # records decoded (and written) together


class Synth:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.t = np.arange(N_SAMPLES, dtype=np.float64) / FS
        k = np.fft.rfftfreq(N_SAMPLES, 1 / FS)
        self.colour = 1.0 / np.sqrt(1.0 + (k / 2.0) ** 2)
        self.seq = 0

    def _wavelet(self, onset, freq, amp, decay):
        tt = np.clip(self.t[None, :] - onset[:, None], 0.0, None)
        return (amp[:, None] * np.sin(2 * np.pi * freq[:, None] * tt) * np.exp(-tt / decay[:, None])
                * (self.t[None, :] >= onset[:, None]))

    def block(self, n=BLOCK):
        """-> list of n records (bytes): header + float32 [3, N_SAMPLES] waveform"""
        rng = self.rng
        cls = rng.integers(0, N_CLASSES, n)
        dist_km = np.where(cls == 1, rng.uniform(5, 100, n), np.where(cls == 2, rng.uniform(100, 1500, n),
                                                                      rng.uniform(2000, 9000, n)))
        p_onset = rng.uniform(2.0, 6.0, n)
        s_onset = np.minimum(p_onset + dist_km / 8.0 * 0.42 * 1.4, 18.0)
        mag = rng.uniform(1.5, 6.5, n)
        amp = np.where(cls == 0, 0.0, 10 ** (0.5 * mag - 1.2 * np.log10(dist_km + 10) + 1.0))
        freq_p = np.where(cls == 1, 8.0, np.where(cls == 2, 3.0, 0.8)) * rng.uniform(0.8, 1.25, n)
        az = rng.uniform(0, 2 * np.pi, n)
        p = self._wavelet(p_onset, freq_p, amp, 0.5 + dist_km / 2000)
        s = self._wavelet(s_onset, freq_p * 0.6, 2.0 * amp, 1.0 + dist_km / 1000)
        noise = np.fft.irfft(np.fft.rfft(rng.standard_normal((n, N_CHANNELS, N_SAMPLES)), axis=-1) * self.colour,
                             n=N_SAMPLES, axis=-1)
        x = 0.05 * noise
        x[:, 0] += p * 0.9 + s * 0.2                       # Z
        x[:, 1] += p * 0.3 + s * np.cos(az)[:, None]       # N
        x[:, 2] += p * 0.3 + s * np.sin(az)[:, None]       # E
        x = x.astype(np.float32)
        logd = np.log10(dist_km)
        out = []
        for i in range(n):
            out.append(RECORD_HEADER.pack(self.seq, int(cls[i]), float(logd[i])) + x[i].tobytes())
            self.seq += 1
        return out
