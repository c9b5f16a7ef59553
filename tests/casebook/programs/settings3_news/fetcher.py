"""Asynchronous shard fetcher, run in a separate (spawned) worker process.

Articles live in many small JSONL shards on object storage; the fetcher keeps a
handful of shard downloads in flight, parses/tokenises each article as it
arrives and ships ready-made batches (hashed uni+bi-gram ids, bag offsets,
labels) to the trainer process over a multiprocessing queue.

Here the "object store" is simulated: shards are generated deterministically
from their name and streamed in chunks, yielding to the event loop between
chunks like a real HTTP body would.
"""
import asyncio
import json
import logging
import os
import queue as _queue
import random
import signal
import zlib

TOPICS = ("world", "business", "sports", "science", "tech", "health", "culture", "travel")
N_BUCKETS = 1 << 16

_rng0 = random.Random(2024)
_SYL = ["ka", "lo", "mi", "ne", "su", "ra", "ti", "vo", "pe", "da", "gu", "zen", "tor", "mal", "bri", "sto"]
COMMON = ["".join(_rng0.choice(_SYL) for _ in range(_rng0.randint(1, 3))) for _ in range(1500)]
TOPIC_WORDS = [["".join(_rng0.choice(_SYL) for _ in range(3)) + t[:2] for _ in range(60)] for t in TOPICS]

log = logging.getLogger("fetcher")


def _article(rng, topic):
    n = rng.randint(30, 70)
    words = [rng.choice(TOPIC_WORDS[topic]) if rng.random() < 0.25 else rng.choice(COMMON) for _ in range(n)]
    title = " ".join(words[:6]).title()
    return {"id": rng.getrandbits(48), "title": title, "body": " ".join(words[6:]) + ".", "topic": TOPICS[topic]}


class ObjectStore:
    """Deterministic fake object store: a shard is ~40 JSON lines, served in chunks."""

    async def stream(self, shard, chunk_lines=4):
        rng = random.Random(zlib.crc32(shard.encode()))
        lines = [json.dumps(_article(rng, rng.randrange(len(TOPICS)))) for _ in range(40)]
        for i in range(0, len(lines), chunk_lines):
            await asyncio.sleep(0)            # network read
            yield "\n".join(lines[i:i + chunk_lines]) + "\n"


def _hash_ids(tokens):
    ids = [zlib.crc32(t.encode()) % N_BUCKETS for t in tokens]
    ids += [(a * 1000003 + b) % N_BUCKETS for a, b in zip(ids, ids[1:])]
    return ids


async def parse_article(line):
    doc = json.loads(line)
    toks = (doc["title"] + " " + doc["body"]).lower().replace(".", " ").split()
    return _hash_ids(toks), TOPICS.index(doc["topic"])


READ_TIMEOUT = 30.0


async def fetch_shard(store, shard, out):
    buf = ""
    body = store.stream(shard).__aiter__()
    while True:
        try:   # per-read timeout, as with any network body
            chunk = await asyncio.wait_for(body.__anext__(), READ_TIMEOUT)
        except StopAsyncIteration:
            break
        buf += chunk
        *lines, buf = buf.split("\n")
        for line in lines:
            if line:
                await out.put(await parse_article(line))


async def shard_worker(store, names, out):
    async for shard in names:
        await fetch_shard(store, shard, out)


async def shard_names(prefix, start, step):
    i = start
    while True:
        yield f"{prefix}/part-{i:06d}.jsonl"
        i += step


async def batcher(inq, mpq, stop, batch):
    parent = os.getppid()
    while not stop.is_set() and os.getppid() == parent:
        ids, offs, labels = [], [], []
        for _ in range(batch):
            tok, lab = await inq.get()
            offs.append(len(ids))
            ids.extend(tok)
            labels.append(lab)
        while not stop.is_set() and os.getppid() == parent:
            try:
                mpq.put_nowait((ids, offs, labels))
                break
            except _queue.Full:
                await asyncio.sleep(0.005)


async def fetch_main(mpq, stop, batch, in_flight, seed):
    store = ObjectStore()
    inq = asyncio.Queue(maxsize=4 * batch)
    workers = [asyncio.create_task(shard_worker(store, shard_names(f"news/{seed}", k, in_flight), inq))
               for k in range(in_flight)]
    await batcher(inq, mpq, stop, batch)
    for w in workers:
        w.cancel()


def _worker_signals():
    # Shutdown is driven by the parent (stop event, then terminate()); a
    # terminal Ctrl-C reaching the whole process group must not kill us mid-put.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_fetcher(mpq, stop, batch=64, in_flight=8, seed=0, log_path=None):
    """Entry point of the worker process."""
    _worker_signals()
    if log_path:
        logging.basicConfig(filename=log_path, level=logging.INFO,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")
    log.info("fetcher pid=%d", os.getpid())
    mpq.cancel_join_thread()      # don't block exit on batches nobody will read
    asyncio.run(fetch_main(mpq, stop, batch, in_flight, seed))


async def _scan(prefix, n_shards):
    store = ObjectStore()
    counts = [0] * len(TOPICS)
    for k in range(n_shards):
        async for chunk in store.stream(f"{prefix}/part-{k:06d}.jsonl"):
            for line in chunk.splitlines():
                counts[TOPICS.index(json.loads(line)["topic"])] += 1
    return counts


def scan_manifest(result_q, prefix, n_shards, log_path=None):
    """One-off worker: scan the first shards to get the label prior."""
    _worker_signals()
    if log_path:
        logging.basicConfig(filename=log_path, level=logging.INFO,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")
    result_q.put(asyncio.run(_scan(prefix, n_shards)))
