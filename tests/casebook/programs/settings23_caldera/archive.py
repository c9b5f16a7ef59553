import os

import numpy as np

EVENT_KINDS = ("noise", "tremor", "long_period", "volcano_tectonic", "explosion", "rockfall")


class WaveformArchive:
    """Synthetic multi-station waveform windows staged in an in-memory file."""

    def __init__(self, spec):
        self.spec = spec
        self.window_bytes = spec.channels * spec.window_samples * 2
        self.count = spec.stations * spec.windows_per_station
        self.fd = os.memfd_create("caldera-archive", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, self.count * self.window_bytes)
        self.labels = np.zeros(self.count, dtype=np.int64)
        self.station_of = np.zeros(self.count, dtype=np.int64)
        self._stage()

    def _stage(self):
        spec = self.spec
        rng = np.random.default_rng(spec.seed)
        t = np.arange(spec.window_samples, dtype=np.float32) / 100.0
        block = 64
        for start in range(0, self.count, block):
            n = min(block, self.count - start)
            kinds = rng.integers(0, len(EVENT_KINDS), size=n)
            noise = rng.standard_normal((n, spec.channels, spec.window_samples)).astype(np.float32)
            onset = rng.integers(200, spec.window_samples // 2, size=n)
            amp = rng.uniform(0.4, 2.5, size=n)
            for j in range(n):
                k = kinds[j]
                if k == 0:
                    continue
                freq = (0.8, 1.6, 6.0, 3.0, 9.0)[k - 1]
                decay = (0.05, 0.4, 1.5, 0.2, 3.0)[k - 1]
                tt = np.clip(t - onset[j] / 100.0, 0, None)
                env = (tt > 0) * np.exp(-decay * tt)
                sig = amp[j] * env * np.sin(2 * np.pi * freq * tt)
                noise[j] += sig[None, :] * np.array([1.0, 0.7, 0.4], dtype=np.float32)[:, None]
            data = np.clip(noise * 900.0, -32767, 32767).astype(np.int16)
            os.pwrite(self.fd, data.tobytes(), start * self.window_bytes)
            self.labels[start:start + n] = kinds
            self.station_of[start:start + n] = (np.arange(start, start + n) // spec.windows_per_station)

    def offset(self, index):
        return int(index) * self.window_bytes

    def close(self):
        os.close(self.fd)
