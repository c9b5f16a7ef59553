import queue
import threading
import urllib.request

import numpy as np
import torch


def get_array(url, timeout, dtype):
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        shape = tuple(int(s) for s in resp.headers["X-Shape"].split(","))
        body = resp.read()
    return np.frombuffer(body, dtype=dtype, count=int(np.prod(shape))).reshape(shape), body


class TrackFetcher(threading.Thread):
    """Fetches a window of every logger of one colony plus the sea-state grid around it from the colony
    service, cuts it into segments and queues (features, behaviour) batches."""

    def __init__(self, port, cfg, seed):
        super().__init__(name="track-fetcher", daemon=True)
        self.base = f"https://127.0.0.1:{port}"
        self.cfg = cfg
        self.rng = np.random.default_rng(seed)
        self.out = queue.Queue(maxsize=cfg.fetch.queue_depth)
        self.count_lock = threading.Lock()
        self.requests = 0

    def run(self):
        f, c = self.cfg.fetch, self.cfg.colony
        while True:
            colony = int(self.rng.integers(0, c.colonies))
            off = int(self.rng.integers(0, c.track_len - f.window))
            win, body = get_array(f"{self.base}/tracks/{colony}?offset={off}&n={f.window}", f.timeout_s,
                                  np.float32)
            labels = np.frombuffer(body, dtype=np.int8, offset=win.nbytes).reshape(win.shape[:2])
            sea, _ = get_array(f"{self.base}/sea/{colony * 8 + off // 512}", f.timeout_s, np.float32)
            birds, n, _ = win.shape
            k = n // f.segment
            seg = win.reshape(birds, k, f.segment, 6)
            rel = seg[..., :2] - seg[..., :1, :2]
            speed = np.hypot(seg[..., 2], seg[..., 3])[..., None]
            turn = np.diff(np.arctan2(seg[..., 3], seg[..., 2]), axis=2, prepend=0.0)[..., None]
            feats = np.concatenate([rel / 100.0, speed / 5.0, np.sin(turn), seg[..., 4:] / 5.0], axis=-1)
            sea_ctx = sea.mean(axis=(1, 2))                     # (3,) sea-state summary
            feats = np.concatenate([feats, np.broadcast_to(sea_ctx, feats.shape[:3] + (3,))], axis=-1)
            x = torch.from_numpy(np.ascontiguousarray(feats.reshape(birds * k, f.segment, -1).transpose(0, 2, 1),
                                                      dtype=np.float32))
            lab = labels.reshape(birds, k, f.segment)
            y = torch.from_numpy(np.apply_along_axis(np.bincount, 2, lab.astype(np.int64),
                                                     minlength=c.behaviours).argmax(-1).reshape(-1))
            with self.count_lock:
                self.requests += 2
            self.out.put((x, y))
