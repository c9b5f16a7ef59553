"""Our shards store images as ASCII pixmaps ("P3" netpbm), one record per image. This is the pure-Python reader
we wrote to avoid a Pillow dependency on the cluster image."""
import random


def encode_pixmap(width, height, rng):
    values = [str(rng.randrange(256)) for _ in range(width * height * 3)]
    return f"P3\n{width} {height}\n255\n" + " ".join(values) + "\n"


def decode_pixmap(record):
    """Returns (width, height, flat list of channel values)."""
    header, _, body = record.partition("\n255\n")
    width, height = (int(v) for v in header.split("\n")[1].split())
    out = []
    acc = -1
    for ch in body:
        if "0" <= ch <= "9":
            acc = (0 if acc < 0 else acc * 10) + (ord(ch) - 48)
        elif acc >= 0:
            out.append(acc)
            acc = -1
    if acc >= 0:
        out.append(acc)
    return width, height, out


def make_shard(n, width, height, seed=0):
    rng = random.Random(seed)
    return [encode_pixmap(width, height, rng) for _ in range(n)]
