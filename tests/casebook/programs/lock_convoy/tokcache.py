"""A tiny byte-pair tokenizer with a shared, thread-safe memo so that repeated documents are not re-tokenized."""
import threading

_CACHE = {}
_CACHE_LOCK = threading.Lock()
_MERGES = None


def load_merges(n_merges=676):
    global _MERGES
    alphabet = "etaoinshrdlcumwfgypbvkjxqz"
    merges = {}
    rank = 0
    for a in alphabet:
        for b in alphabet:
            if rank >= n_merges:
                break
            merges[(a, b)] = rank
            rank += 1
    _MERGES = merges


def _bpe_merge(word):
    parts = list(word)
    while len(parts) > 1:
        best, best_rank = None, None
        for i in range(len(parts) - 1):
            r = _MERGES.get((parts[i][-1], parts[i + 1][0]))
            if r is not None and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best is None:
            break
        parts[best:best + 2] = [parts[best] + parts[best + 1]]
    return parts


def encode_cached(doc):
    # One lock for the memo: dict access from many loader threads must not race.
    with _CACHE_LOCK:
        ids = _CACHE.get(doc)
        if ids is None:
            ids = [hash(piece) % 4096 for word in doc.split() for piece in _bpe_merge(word)]
            _CACHE[doc] = ids
        return ids
