"""Synthetic product catalog (JSON lines, deterministic) and the block decoder of the feature pipeline."""
import json
import random

import numpy as np
from catalog_schema import CATEGORIES, FIELDS

BLOCK = 128
TITLE_WORDS = ("steel cotton wireless organic compact pro mini max ultra classic travel kids outdoor smart "
               "premium eco portable digital vintage").split()


def catalog_lines(n=8192, seed=4):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        cat = rng.randrange(len(CATEGORIES))
        rec = {"sku": f"SKU{i:07d}", "title": " ".join(rng.choices(TITLE_WORDS, k=rng.randint(3, 7))),
               "brand": f"brand{rng.randrange(300)}", "category": CATEGORIES[cat],
               "price": round(rng.lognormvariate(3.0, 0.8), 2),
               "attrs": {f"a{k}": rng.randrange(20) for k in rng.sample(range(12), 4)},
               "views": rng.randrange(1, 5000), "buys": rng.randrange(0, 80)}
        assert set(rec) == set(FIELDS)
        out.append(json.dumps(rec).encode())
    return out


def decode_block(lines):
    """Decode a block of catalog lines with the fastest JSON backend available in this environment."""
    try:
        import orjson
        loads = orjson.loads
    except ImportError:
        try:
            import ujson
            loads = ujson.loads
        except ImportError:
            loads = json.loads
    return [loads(line) for line in lines]


def featurize(records, vocab=4096):
    """-> (title token ids [n, 8], brand id, category id, dense [n, 4])"""
    toks = np.zeros((len(records), 8), dtype=np.int64)
    brand = np.empty(len(records), dtype=np.int64)
    cat = np.empty(len(records), dtype=np.int64)
    dense = np.empty((len(records), 4), dtype=np.float32)
    for r, rec in enumerate(records):
        words = rec["title"].split()[:8]
        toks[r, :len(words)] = [hash(w) % (vocab - 1) + 1 for w in words]
        brand[r] = int(rec["brand"][5:])
        cat[r] = CATEGORIES.index(rec["category"])
        dense[r] = (np.log1p(rec["price"]), np.log1p(rec["views"]), rec["buys"] / (rec["views"] + 1.0),
                    len(rec["attrs"]) / 12.0)
    return toks, brand, cat, dense
