"""Embedding exporter: runs in its own process so that writing shards never holds the trainer's GIL.

Each message from the trainer is one training step's export: the tracks' ids, their 128-d embeddings and their
nearest neighbours in the trainer's memory bank. Per message it writes

    shard-<step>.npy       the embeddings (float16, uncompressed: the index builder memory-maps them)
    shard-<step>.jsonl.gz  one JSON line per track: catalogue metadata, neighbour ids and cosine scores, which the
                           index builder's QA job diffs between exports

and keeps only the newest `keep_shards` of each.
"""
import gzip
import io
import json
import os
import signal

import numpy as np

from audio import Catalogue


class ShardWriter:
    def __init__(self, outdir, cfg):
        self.outdir = outdir
        self.keep = cfg["export"]["keep_shards"]
        self.gzip_opts = dict(cfg["export"]["gzip"])
        self.written = []

    def _path(self, step, suffix):
        return os.path.join(self.outdir, f"shard-{step:09d}{suffix}")

    def write(self, step, ids, emb, nn_ids, nn_scores):
        np.save(self._path(step, ".npy"), emb)
        raw = gzip.GzipFile(self._path(step, ".jsonl.gz"), "wb", **self.gzip_opts)
        with io.TextIOWrapper(raw, encoding="utf-8", newline="\n") as fh:
            for tid, nbrs, scores in zip(ids.tolist(), nn_ids.tolist(), nn_scores.tolist()):
                rec = Catalogue.metadata(tid)
                rec["neighbours"] = [f"TRK{j:08d}" for j in nbrs]
                rec["scores"] = [round(s, 4) for s in scores]
                fh.write(json.dumps(rec, separators=(",", ":")))
                fh.write("\n")
        self.written.append(step)
        while len(self.written) > self.keep:
            old = self.written.pop(0)
            for suffix in (".npy", ".jsonl.gz"):
                try:
                    os.unlink(self._path(old, suffix))
                except FileNotFoundError:
                    pass


def run(inbox, outdir, cfg):
    """Process entry point."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)          # the trainer decides when to stop
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    writer = ShardWriter(outdir, cfg)
    while True:
        msg = inbox.get()
        if msg is None:
            break
        writer.write(*msg)
