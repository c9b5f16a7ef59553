import queue
import subprocess
import threading

import numpy as np
import torch

import sitecfg
from archive import Spool


class ClipLoader(threading.Thread):
    """Pulls runs of consecutive clips out of the recorder shards with the vendor's extraction script,
    turns every clip into a log band-energy spectrogram and queues (spectrograms, call type) batches."""

    def __init__(self, cfg, seed):
        super().__init__(name="clip-loader", daemon=True)
        self.cfg = cfg
        self.rng = np.random.default_rng(seed)
        self.out = queue.Queue(maxsize=cfg.loader.queue_depth)
        self.ready = threading.Event()
        self.count_lock = threading.Lock()
        self.clips = 0
        self.spool = None
        self.stop = threading.Event()

    def band_matrix(self):
        l, a = self.cfg.loader, self.cfg.archive
        bins = l.frame // 2 + 1
        edges = np.geomspace(150.0, a.sample_rate / 2, l.bands + 2) / (a.sample_rate / 2) * (bins - 1)
        m = np.zeros((l.bands, bins), dtype=np.float32)
        for b in range(l.bands):
            lo, mid, hi = edges[b], edges[b + 1], edges[b + 2]
            k = np.arange(bins)
            m[b] = np.clip(np.minimum((k - lo) / (mid - lo + 1e-6), (hi - k) / (hi - mid + 1e-6)), 0, None)
        return m

    def extract(self, shard, first, count):
        l = self.cfg.loader
        res = subprocess.run(["bash", sitecfg.script_path(self.cfg), self.spool.paths[shard], str(first),
                              str(count), str(self.spool.clip_bytes)], stdout=subprocess.PIPE, check=True)
        return np.frombuffer(res.stdout, dtype="<i2").reshape(count, -1)

    def run(self):
        try:
            self.produce()
        except subprocess.CalledProcessError as exc:
            if exc.returncode >= 0 and not self.stop.is_set():
                raise                 # a real extraction failure; a signal means the run is being stopped
        except Exception:
            if not self.stop.is_set():
                raise

    def produce(self):
        l, a = self.cfg.loader, self.cfg.archive
        self.spool = Spool(self.cfg)
        bands = self.band_matrix()
        window = np.hanning(l.frame).astype(np.float32)
        self.ready.set()
        while True:
            pcm, types = [], []
            for _ in range(l.calls_per_batch):
                shard = int(self.rng.integers(0, a.shards))
                first = int(self.rng.integers(0, a.clips_per_shard - l.clips_per_call + 1))
                pcm.append(self.extract(shard, first, l.clips_per_call))
                types.append(self.spool.labels[shard][first:first + l.clips_per_call])
            x = np.concatenate(pcm).astype(np.float32) / 32768.0
            n_frames = 1 + (x.shape[1] - l.frame) // l.hop
            idx = np.arange(l.frame)[None, :] + l.hop * np.arange(n_frames)[:, None]
            spec = np.abs(np.fft.rfft(x[:, idx] * window, axis=-1)) ** 2
            feats = np.log1p(spec @ bands.T).transpose(0, 2, 1)
            feats = (feats - feats.mean(axis=(1, 2), keepdims=True)) / (feats.std(axis=(1, 2), keepdims=True) + 1e-3)
            with self.count_lock:
                self.clips += len(feats)
            self.out.put((torch.from_numpy(feats[:, None].astype(np.float32)),
                          torch.from_numpy(np.concatenate(types).astype(np.int64))))
