"""Impression log: length-prefixed adlog.Impression records (recordio-style shards).

A replayed day of traffic is generated at start-up into in-memory shards; the
reader walks the shards record by record, like the production tailer does.
"""
import random
import struct

import impression_pb2

_LEN = struct.Struct("<I")
DEVICES = ["phone", "tablet", "desktop", "tv"]
OSES = ["android", "ios", "windows", "macos", "linux"]
GEOS = ["US", "DE", "FR", "BR", "IN", "JP", "GB", "CA", "MX", "KR"]
SLOTS = ["page_cat", "ad_kw", "user_seg", "site", "creative"]
WORDS = ("cheap flights hotel deals running shoes laptop sale phone case wireless earbuds garden furniture "
         "coffee maker winter jacket car insurance yoga mat pizza delivery gaming chair smart watch protein "
         "powder sunglasses backpack mortgage rates credit card travel bag office desk led lamp baby stroller "
         "dog food kitchen knife camping tent bike helmet").split()


def build_shards(n_shards=4, per_shard=1500, seed=3):
    rng = random.Random(seed)
    shards = []
    for s in range(n_shards):
        out = bytearray()
        for i in range(per_shard):
            imp = impression_pb2.Impression(
                request_id=f"{s:02d}-{i:08x}-{rng.getrandbits(32):08x}",
                ts_us=1_700_000_000_000_000 + rng.randrange(86_400_000_000),
                user_id=rng.getrandbits(40), ad_id=rng.randrange(200_000), campaign_id=rng.randrange(3000),
                clicked=rng.random() < 0.08, dwell_ms=rng.randrange(60_000),
            )
            imp.context.device = rng.choice(DEVICES)
            imp.context.os = rng.choice(OSES)
            imp.context.geo = rng.choice(GEOS)
            imp.context.hour = rng.randrange(24)
            for _ in range(rng.randint(4, 10)):
                imp.features.add(slot=rng.choice(SLOTS), value=f"v{rng.randrange(50_000)}", weight=rng.random())
            imp.dense.extend(rng.gauss(0.0, 1.0) for _ in range(13))
            imp.history.extend(rng.randrange(200_000) for _ in range(rng.randint(0, 8)))
            imp.query = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 7)))
            imp.ad_title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12)))
            blob = imp.SerializeToString()
            out += _LEN.pack(len(blob)) + blob
        shards.append(bytes(out))
    return shards


def records(shard):
    off = 0
    while off < len(shard):
        (n,) = _LEN.unpack_from(shard, off)
        yield shard[off + 4:off + 4 + n]
        off += 4 + n
