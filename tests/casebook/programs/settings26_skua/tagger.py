import queue
import threading
import zlib

import numpy as np
import regex
import torch

from notebook import build_notebook

# counts with an optional unit, or a word / hyphenated compound (colony-site names, plumage codes)
TOKEN = r"\d+(?:\.\d+)?(?:\s*(?:m|min|birds?))?|[a-z]+(?:-[a-z]+)*"


def compile_tokenizer(t):
    flags = regex.V1 if t.version == 1 else regex.V0
    if t.match_semantics == "longest":
        flags |= regex.POSIX
    if t.ignore_case:
        flags |= regex.IGNORECASE
    return regex.compile(TOKEN, flags)


class NoteTagger(threading.Thread):
    """Splits field notes into tokens, hashes them into buckets and queues (token ids, offsets, behaviour)."""

    def __init__(self, cfg, seed):
        super().__init__(name="note-tagger", daemon=True)
        self.cfg = cfg
        self.rng = np.random.default_rng(seed)
        self.out = queue.Queue(maxsize=cfg.tagger.queue_depth)
        self.ready = threading.Event()
        self.count_lock = threading.Lock()
        self.tagged = 0

    def run(self):
        t = self.cfg.tagger
        notes, labels = build_notebook(self.cfg)
        pattern = compile_tokenizer(t)
        buckets = {}
        self.ready.set()
        while True:
            idx = self.rng.integers(0, len(notes), size=t.notes_per_batch)
            ids, offsets = [], []
            for i in idx:
                toks = pattern.findall(notes[i], concurrent=t.concurrent)[:t.max_tokens]
                offsets.append(len(ids))
                for tok in toks:
                    b = buckets.get(tok)
                    if b is None:
                        b = buckets[tok] = zlib.crc32(tok.encode()) % t.hash_buckets
                    ids.append(b)
            y = np.array([labels[i] for i in idx], dtype=np.int64)
            with self.count_lock:
                self.tagged += len(idx)
            self.out.put((torch.tensor(ids, dtype=torch.long), torch.tensor(offsets, dtype=torch.long),
                          torch.from_numpy(y)))
