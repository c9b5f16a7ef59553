import queue
import threading

import numpy as np
import torch
import torch.nn.functional as F

from ringio import Ring

GAIN_TABLES = {
    "nominal": 1.0 / 900.0,
    "field": 1.0 / 1000.0,
}


class WindowReader(threading.Thread):
    def __init__(self, archive, spec, seed, out, lane=0):
        super().__init__(name=f"window-reader-{lane}", daemon=True)
        self.archive = archive
        self.spec = spec
        self.out = out
        self.rng = np.random.default_rng(seed)
        self.gain = GAIN_TABLES[spec.gain_table]
        self.stats_lock = threading.Lock()
        self.windows_read = 0
        self.ring = Ring(spec.ring_entries, spec.sq_poll_idle_ms)
        a = archive.spec
        self.buf = np.empty((spec.batch_windows, a.channels, a.window_samples), dtype=np.int16)
        s = a.window_samples
        self.taper = torch.hann_window(s, periodic=False).pow(0.25)
        freqs = torch.fft.rfftfreq(s, d=0.01)
        self.band = ((freqs > spec.band_low_hz) & (freqs < spec.band_high_hz)).float()
        self.upper = ((freqs >= spec.band_high_hz) & (freqs < 3 * spec.band_high_hz)).float()
        self._stop = threading.Event()

    def _condition(self, raw):
        x = torch.from_numpy(raw.astype(np.float32))
        x.mul_(self.gain)
        x.sub_(x.mean(dim=2, keepdim=True))
        spec = torch.fft.rfft(x * self.taper, dim=2)
        hi = torch.fft.irfft(spec * self.upper, n=raw.shape[2], dim=2)
        x = torch.fft.irfft(spec * self.band, n=raw.shape[2], dim=2)
        env = torch.sqrt(F.avg_pool1d(x * x, 33, stride=1, padding=16))
        ratio = torch.log1p(F.avg_pool1d(hi * hi, 65, stride=1, padding=32) / (env * env + 1e-6))
        x = x / (x.std(dim=2, keepdim=True) + 1e-6)
        return torch.cat([x, env, ratio], dim=1)

    def _requests(self, picks):
        base = self.buf.ctypes.data
        wb = self.archive.window_bytes
        return [(self.archive.fd, base + i * wb, wb, self.archive.offset(idx))
                for i, idx in enumerate(picks)]

    def run(self):
        n = self.spec.batch_windows
        while not self._stop.is_set():
            picks = self.rng.choice(self.archive.count, size=n, replace=False)
            got = self.ring.read_many(self._requests(picks))
            if min(got) != self.archive.window_bytes:
                raise IOError("short read from archive")
            x = self._condition(self.buf)
            y = torch.from_numpy(self.archive.labels[picks])
            with self.stats_lock:
                self.windows_read += n
            self.out.put((x, y))

    def stop(self):
        self._stop.set()


def start_readers(archive, spec, seed):
    out = queue.Queue(maxsize=spec.queue_depth)
    readers = [WindowReader(archive, spec, seed + 97 * k, out, k) for k in range(spec.readers)]
    for r in readers:
        r.start()
    return out, readers
