"""Resumable shard reader: a background thread that reads token windows from shards into a bounded queue and
keeps a cursor (shard, offset) so that a checkpoint can resume exactly where the trainer stopped.

The cursor and the queue must agree, so the reader publishes both under ``self.cursor_lock`` ... including the
blocking ``put`` (modelled on wso2/carbon-analytics-common#511 and vespa-engine/vespa#7346: a thread holds a lock
while it puts into a full queue, and the thread that would drain the queue first needs that lock).
"""
import queue
import threading

import torch


class ShardReader(threading.Thread):
    def __init__(self, n_shards=16, shard_tokens=200_000, window=129, batch=8, depth=6, seed=0):
        super().__init__(name="shard-reader", daemon=True)
        self.batches = queue.Queue(maxsize=depth)
        self.cursor_lock = threading.Lock()
        self.shard, self.offset = 0, 0
        self.n_shards, self.shard_tokens = n_shards, shard_tokens
        self.window, self.batch = window, batch
        self._g = torch.Generator().manual_seed(seed)
        self._tokens = self._load_shard(0)

    def _load_shard(self, idx):
        # synthetic shard: a noisy repeating pattern so that the LM has something to learn
        base = torch.arange(self.shard_tokens) % 97
        noise = torch.randint(0, 512, (self.shard_tokens,), generator=self._g)
        keep = torch.rand(self.shard_tokens, generator=self._g) < 0.8
        return torch.where(keep, base * 5 % 512, noise)

    def _next_batch(self):
        span = self.window * self.batch
        if self.offset + span > self.shard_tokens:
            self.shard = (self.shard + 1) % self.n_shards
            self.offset = 0
            self._tokens = self._load_shard(self.shard)
        chunk = self._tokens[self.offset:self.offset + span].view(self.batch, self.window)
        self.offset += span
        return chunk

    def run(self):
        while True:
            with self.cursor_lock:
                chunk = self._next_batch()
                # publish the batch and the cursor together
                self.batches.put((self.shard, self.offset, chunk))

    def state_dict(self):
        with self.cursor_lock:
            return {"shard": self.shard, "offset": self.offset, "queued": self.batches.qsize()}

    def next(self):
        return self.batches.get()
