"""ROI fingerprints: the de-duplication window keys each ROI by a digest of its bytes.

The algorithm is a setting ([fingerprint] algorithm in the imager profile): any hashlib name (sha256, sha3_512,
blake2b, ...) or an xxhash one (xxh3_64, xxh64, xxh3_128)."""
import hashlib
import tomllib

import xxhash


def load_profile(path):
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def make_hasher(algorithm):
    """-> a function bytes-like -> digest bytes."""
    if algorithm.startswith("xxh"):
        ctor = getattr(xxhash, algorithm)
        return lambda data: ctor(data).digest()
    hashlib.new(algorithm)                                   # fail early on a bad name
    return lambda data: hashlib.new(algorithm, data).digest()
