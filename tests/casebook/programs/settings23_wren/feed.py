import queue
import threading

import numpy as np
import torch


class RecordFeed(threading.Thread):
    def __init__(self, lexicon, tokenizer, opts, classes, seed):
        super().__init__(name="record-feed", daemon=True)
        self.lexicon = lexicon
        self.tokenizer = tokenizer
        self.opts = opts
        self.classes = classes
        self.rng = np.random.default_rng(seed)
        self.out = queue.Queue(maxsize=opts.queue_depth)
        self.tally_lock = threading.Lock()
        self.tokens_emitted = 0

    def run(self):
        edges = np.linspace(-2.0, 2.0, self.classes - 1)
        while True:
            texts, score = self.lexicon.sample(self.rng, self.opts.batch_records, self.opts.reagents_per_record)
            enc = self.tokenizer.encode_batch(texts)
            ids = torch.tensor([e.ids for e in enc], dtype=torch.long)
            mask = torch.tensor([e.attention_mask for e in enc], dtype=torch.float32)
            y = torch.from_numpy(np.digitize(score, edges).astype(np.int64))
            with self.tally_lock:
                self.tokens_emitted += int(mask.sum().item())
            self.out.put((ids, mask, y))
