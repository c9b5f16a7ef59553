"""Fetch-and-decode stage: each clip is spooled as it streams in (the wave reader needs a seekable
file), parsed, and turned into log band energies; two pool threads work on a batch at once and a
batcher thread queues finished batches for the trainer."""
import concurrent.futures as cf
import queue
import tempfile
import threading
import wave

import numpy as np


class ClipDecoder:
    def __init__(self, client, spool_dir, spool_max_bytes, n_fft, hop, bands, sr):
        self.client, self.dir, self.max = client, spool_dir, spool_max_bytes
        self.n_fft, self.hop = n_fft, hop
        freqs = np.fft.rfftfreq(n_fft, 1.0 / sr)
        edges = np.geomspace(300.0, sr / 2, bands + 2)
        fb = np.zeros((len(freqs), bands), np.float32)
        for b in range(bands):
            lo, mid, hi = edges[b:b + 3]
            fb[:, b] = np.clip(np.minimum((freqs - lo) / (mid - lo), (hi - freqs) / (hi - mid)), 0, None)
        self.fb = fb
        self.window = np.hanning(n_fft).astype(np.float32)

    def fetch(self, i):
        with tempfile.SpooledTemporaryFile(max_size=self.max, dir=self.dir) as spool:
            for chunk in self.client.stream(i):
                spool.write(chunk)
            spool.seek(0)
            with wave.open(spool, "rb") as w:
                pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2")
        return pcm.astype(np.float32) / 32768.0

    def features(self, pcm_batch):
        x = np.stack(pcm_batch)
        frames = np.lib.stride_tricks.sliding_window_view(x, self.n_fft, axis=1)[:, ::self.hop]
        spec = np.abs(np.fft.rfft(frames * self.window, axis=-1)) ** 2
        e = np.log(spec @ self.fb + 1e-6)
        e -= e.mean(axis=(1, 2), keepdims=True)
        return np.ascontiguousarray(e.transpose(0, 2, 1), np.float32)


class Batcher(threading.Thread):
    def __init__(self, decoder, labels, batch, workers, depth, seed):
        super().__init__(name="batcher", daemon=True)
        self.decoder, self.labels, self.batch = decoder, labels, batch
        self.pool = cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="clip-fetch")
        self.out = queue.Queue(maxsize=depth)
        self.rng = np.random.default_rng(seed)
        self.done = 0
        self._lock = threading.Lock()

    def run(self):
        import torch
        while True:
            idx = self.rng.integers(0, len(self.labels), self.batch)
            pcm = list(self.pool.map(self.decoder.fetch, idx, chunksize=8))
            x = torch.from_numpy(self.decoder.features(pcm))
            self.out.put((x, torch.from_numpy(self.labels[idx])))
            with self._lock:
                self.done += 1
