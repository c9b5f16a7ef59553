"""Distils a frozen bout encoder into a small student that classifies dotterel call types.

A dispatcher thread draws padded batches of synthetic song bouts and hands them to a pool of labeller
threads running the frozen teacher (teacher.py); the student trains on the teacher's soft labels in order."""
import argparse
import concurrent.futures
import queue
import shutil
import signal
import sys
import tempfile
import threading
import tomllib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import songs
import teacher


class Student(nn.Module):
    """A small bout transformer trained on the teacher's soft labels and pooled embeddings."""

    def __init__(self, n_features, width, heads, layers, n_classes, t_dim):
        super().__init__()
        self.proj = nn.Linear(n_features, width)
        layer = nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.fc = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, n_classes))
        self.emb = nn.Linear(width, t_dim)

    def forward(self, x, pad):
        h = self.encoder(self.proj(x), src_key_padding_mask=pad)
        h = h.masked_fill(pad.unsqueeze(-1), 0.0)
        z = h.sum(1) / (~pad).sum(1, keepdim=True).clamp(min=1)
        return self.fc(z), self.emb(z)


class Dispatcher(threading.Thread):
    def __init__(self, pool, model, cfg, depth, seed):
        super().__init__(name="bout-dispatcher", daemon=True)
        self.pool, self.model, self.cfg = pool, model, cfg
        self.q = queue.Queue(maxsize=depth)
        self.rng = np.random.default_rng(seed)
        self.stop = threading.Event()

    def _job(self, x, pad, kinds):
        xt, pt = torch.from_numpy(x), torch.from_numpy(pad)
        probs, emb = teacher.label(self.model, xt, pt, self.cfg["temperature"])
        return xt, pt, torch.from_numpy(kinds), probs, emb

    def run(self):
        while not self.stop.is_set():
            x, pad, kinds = songs.padded_batch(self.rng, self.cfg["batch"], self.cfg["max_len"])
            try:
                fut = self.pool.submit(self._job, x, pad, kinds)
            except RuntimeError:
                return
            while not self.stop.is_set():
                try:
                    self.q.put(fut, timeout=0.5)
                    break
                except queue.Full:
                    continue


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/upland_fast.toml")
    args = ap.parse_args()
    with open(args.config, "rb") as f:
        cfg = tomllib.load(f)
    tcfg, bcfg, run = cfg["teacher"], cfg["bouts"], cfg["train"]

    scratch = tempfile.mkdtemp(prefix="dotterel-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    pool, disp = None, None
    try:
        torch.set_num_threads(run["threads"])
        teacher.configure(tcfg["fastpath"])
        t_model = teacher.build(tcfg, songs.FEATURES, len(songs.CALL_TYPES), run["seed"])
        rng = np.random.default_rng(run["seed"])
        x0, pad0, _ = songs.padded_batch(rng, bcfg["batch"], bcfg["max_len"])
        gap = teacher.parity_check(t_model, torch.from_numpy(x0), torch.from_numpy(pad0))
        print(f"teacher parity fast/regular: max diff {gap:.2e}", flush=True)

        student = Student(songs.FEATURES, run["width"], run["heads"], run["layers"], len(songs.CALL_TYPES),
                          tcfg["d_model"])
        opt = torch.optim.AdamW(student.parameters(), lr=run["lr"], weight_decay=0.01)
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=tcfg["labellers"], thread_name_prefix="labeller")
        disp = Dispatcher(pool, t_model, dict(bcfg, temperature=tcfg["temperature"]), bcfg["in_flight"],
                          bcfg["seed"])
        disp.start()
        step = 0
        while True:
            x, pad, kinds, probs, t_emb = disp.q.get().result()
            logits, s_emb = student(x, pad)
            kd = F.kl_div(F.log_softmax(logits / tcfg["temperature"], -1), probs, reduction="batchmean")
            ce = F.cross_entropy(logits, kinds)
            loss = run["alpha"] * kd + (1 - run["alpha"]) * ce + run["beta"] * F.mse_loss(s_emb, t_emb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            print(f"step {step} loss {loss.item():.4f} kd {kd.item():.4f}", flush=True)
            step += 1
    finally:
        if disp is not None:
            disp.stop.set()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
