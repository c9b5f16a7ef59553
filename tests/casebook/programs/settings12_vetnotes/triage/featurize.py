"""Note featurizer: lower-cased word unigrams and bigrams plus character 4-grams of the rendered note, hashed into
a fixed id space (the hashing trick; no vocabulary to ship), returned in EmbeddingBag's flat-ids + offsets form."""
import re
import zlib

import torch

BUCKETS = 1 << 15
_WORD = re.compile(r"[a-z0-9][a-z0-9.+\-/]*")


def note_ids(text):
    text = text.lower()
    words = _WORD.findall(text)
    ids = [zlib.crc32(w.encode()) for w in words]
    ids += [zlib.crc32(f"{a} {b}".encode()) for a, b in zip(words, words[1:])]
    compact = " ".join(words)
    ids += [zlib.crc32(compact[i:i + 4].encode()) ^ 0x5bd1e995 for i in range(0, max(len(compact) - 3, 0), 3)]
    return [i % BUCKETS for i in ids]


def collate(notes, labels):
    flat, offsets = [], []
    for text in notes:
        offsets.append(len(flat))
        flat.extend(note_ids(text))
    return (torch.tensor(flat, dtype=torch.int64), torch.tensor(offsets, dtype=torch.int64),
            torch.tensor(labels, dtype=torch.int64))
