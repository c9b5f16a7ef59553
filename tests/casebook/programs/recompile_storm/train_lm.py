"""Variable-length LM fine-tuning: a batcher pool packs documents, one Trainer thread optimises.

Usage: python train_lm.py [--steps N]
"""
from __future__ import annotations

import argparse
import logging
import queue
import threading
from concurrent.futures import ThreadPoolExecutor

from lm.batching import Batcher
from lm.trainer import Trainer

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(threadName)s %(message)s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10**9)
    args = parser.parse_args()
    batches: queue.Queue = queue.Queue(maxsize=16)
    stop = threading.Event()
    batcher = Batcher(vocab=512)
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="batcher")
    for _ in range(2):
        pool.submit(batcher.fill, batches, stop)
    trainer = Trainer(vocab=512)
    worker = threading.Thread(target=trainer.run, args=(batches, args.steps), name="Trainer", daemon=True)
    worker.start()
    worker.join()
    stop.set()


if __name__ == "__main__":
    main()
