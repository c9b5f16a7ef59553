"""The station's clip archive: 16-bit mono WAV clips of ringed plover, oystercatcher, little tern,
turnstone and surf-only background, synthesised at start-up and handed out by a client that streams
each clip in chunks, the way the archive service sends them."""
import io
import wave

import numpy as np

SPECIES = ("ringed-plover", "oystercatcher", "little-tern", "turnstone", "surf")


def _clip(rng, kind, sr, n):
    t = np.arange(n) / sr
    surf = np.convolve(rng.normal(0, 0.2, n), np.ones(32) / 32, mode="same")
    sig = surf.copy()
    if kind < 4:
        f0 = (2400.0, 3200.0, 5200.0, 4100.0)[kind]
        rate = (9.0, 4.0, 14.0, 7.0)[kind]
        for start in rng.uniform(0.05, 1.1, 3):
            env = np.exp(-((t - start - 0.08) ** 2) / 0.0015)
            sweep = f0 * (1.0 + 0.15 * np.sin(2 * np.pi * rate * t))
            sig += 0.5 * env * np.sin(2 * np.pi * np.cumsum(sweep) / sr)
    return np.clip(sig * 12000, -32767, 32767).astype("<i2")


def build(n_clips, sr, seconds, seed):
    rng = np.random.default_rng(seed)
    n = int(sr * seconds)
    blobs, labels = [], []
    for _ in range(n_clips):
        kind = int(rng.integers(0, len(SPECIES)))
        buf = io.BytesIO()
        with wave.open(buf, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(sr)
            w.writeframes(_clip(rng, kind, sr, n).tobytes())
        blobs.append(buf.getvalue())
        labels.append(kind)
    return blobs, np.array(labels, np.int64)


class ArchiveClient:
    """Streams a clip as a sequence of chunks (memoryview slices of the stored blob)."""

    def __init__(self, blobs, chunk_bytes):
        self.blobs, self.chunk = blobs, chunk_bytes

    def stream(self, i):
        view = memoryview(self.blobs[i])
        for off in range(0, len(view), self.chunk):
            yield view[off:off + self.chunk]
