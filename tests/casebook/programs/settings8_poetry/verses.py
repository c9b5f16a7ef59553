"""Synthetic verse corpus, syllabifier and vocabulary."""
import random
import re

_ONSETS = ["b", "br", "c", "ch", "d", "dr", "f", "fl", "g", "gr", "h", "l", "m", "n", "p", "pl",
           "r", "s", "st", "sh", "t", "th", "tr", "v", "w", "wh"]
_NUCLEI = ["a", "e", "i", "o", "u", "ea", "ee", "ou", "ai", "oa", "y"]
_CODAS = ["", "", "n", "r", "s", "t", "ng", "ld", "st", "th", "ck"]
_WORD = re.compile(r"[a-z]+|[,.;!?]")
_SYLLABLE = re.compile(r"[^aeiouy]*[aeiouy]+(?:[^aeiouy]+$|[^aeiouy](?=[^aeiouy]))?")

PAD, BOL, EOL = 0, 1, 2


def make_lexicon(rng, n=3000):
    words = set()
    while len(words) < n:
        k = rng.choice((1, 1, 2, 2, 3))
        words.add("".join(rng.choice(_ONSETS) + rng.choice(_NUCLEI) + rng.choice(_CODAS) for _ in range(k)))
    return sorted(words)


def make_line(rng, lexicon):
    words = [rng.choice(lexicon) for _ in range(rng.randint(5, 9))]
    return " ".join(words) + rng.choice((",", ".", ";", "", "!"))


class Vocab:
    def __init__(self, size):
        self.size = size
        self.index = {"<pad>": PAD, "<bol>": BOL, "<eol>": EOL}

    def id(self, piece):
        i = self.index.get(piece)
        if i is None:
            i = len(self.index) if len(self.index) < self.size else 3 + hash(piece) % (self.size - 3)
            self.index[piece] = i
        return i


def encode(line, vocab):
    ids = [BOL]
    for tok in _WORD.findall(line.lower()):
        ids.extend(vocab.id(p) for p in (_SYLLABLE.findall(tok) or [tok]))
    ids.append(EOL)
    return ids


class Corpus:
    def __init__(self, seed=13, n_lines=20000):
        rng = random.Random(seed)
        lexicon = make_lexicon(rng)
        self.lines = [make_line(rng, lexicon) for _ in range(n_lines)]
        self.rng = rng

    def stanza(self, n=4):
        start = self.rng.randrange(len(self.lines) - n)
        return self.lines[start:start + n]
