"""Recorder archive: shards of gzip-compressed 16-bit PCM clips of shrike calls, as the field recorders'
offload tool writes them (one raw stream per shard, fixed-length clips back to back). Built once at
start-up in a temporary spool directory that is removed when the run ends."""
import gzip
import os
import shutil
import tempfile

import numpy as np


def _clips(rng, n, sr, seconds, call_types):
    t = np.arange(int(sr * seconds), dtype=np.float32) / sr
    types = rng.integers(0, call_types, size=n)
    f0 = 900.0 + 420.0 * types + rng.normal(0, 40, size=n)
    rate = 2.0 + 1.5 * (types % 3) + rng.normal(0, 0.2, size=n)
    depth = (150.0 + 60.0 * (types % 2))[:, None]
    phase = 2 * np.pi * np.cumsum(f0[:, None] + depth * np.sin(2 * np.pi * rate[:, None] * t), axis=1) / sr
    env = (np.sin(2 * np.pi * (3.0 + (types[:, None] % 4)) * t) > -0.2).astype(np.float32)
    sig = env * (np.sin(phase) + 0.4 * np.sin(2 * phase) + 0.15 * np.sin(3 * phase))
    sig += rng.normal(0, 0.35, size=sig.shape)
    return (np.clip(sig * 8000, -32767, 32767)).astype("<i2"), types


def _remove_stale(prefix):
    """Spool directories left by runs that were killed before they could clean up."""
    base = tempfile.gettempdir()
    for name in os.listdir(base):
        if not name.startswith(prefix):
            continue
        try:
            with open(os.path.join(base, name, "owner.pid")) as fh:
                os.kill(int(fh.read()), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)
        except (OSError, ValueError):
            pass


class Spool:
    def __init__(self, cfg):
        a = cfg.archive
        _remove_stale(cfg.site.tmp_prefix)
        self.dir = tempfile.mkdtemp(prefix=cfg.site.tmp_prefix)
        with open(os.path.join(self.dir, "owner.pid"), "w") as fh:
            fh.write(str(os.getpid()))
        rng = np.random.default_rng(a.seed)
        self.clip_bytes = int(a.sample_rate * a.clip_seconds) * 2
        self.paths, self.labels = [], []
        for s in range(a.shards):
            pcm, types = _clips(rng, a.clips_per_shard, a.sample_rate, a.clip_seconds, a.call_types)
            path = os.path.join(self.dir, f"rec{s:03d}.pcm.gz")
            with gzip.open(path, "wb", compresslevel=a.compress_level) as fh:
                fh.write(pcm.tobytes())
            self.paths.append(path)
            self.labels.append(types)

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)
