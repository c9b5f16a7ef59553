"""A small WordPiece tokenizer (greedy longest match, '##' continuation pieces), pure Python."""
from __future__ import annotations

import random

SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"] + ["th", "sh", "ch", "qu", "ng", "st"]


class WordPiece:
    def __init__(self, vocab: list[str], max_piece: int = 12) -> None:
        self.ids = {tok: i for i, tok in enumerate(vocab)}
        self.unk = self.ids["[UNK]"]
        self.max_piece = max_piece

    @classmethod
    def synthetic(cls, size: int, seed: int = 0) -> "WordPiece":
        rng = random.Random(seed)
        vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + list("abcdefghijklmnopqrstuvwxyz")
        vocab += ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]
        seen = set(vocab)
        while len(vocab) < size:
            piece = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3)))
            piece = piece if rng.random() < 0.5 else "##" + piece
            if piece not in seen:
                seen.add(piece)
                vocab.append(piece)
        return cls(vocab)

    def encode_word(self, word: str) -> list[int]:
        out, start = [], 0
        while start < len(word):
            end = min(len(word), start + self.max_piece)
            piece_id = None
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                piece_id = self.ids.get(piece)
                if piece_id is not None:
                    break
                end -= 1
            if piece_id is None:
                return [self.unk]
            out.append(piece_id)
            start = end
        return out

    def encode(self, text: str, max_len: int) -> list[int]:
        ids = [self.ids["[CLS]"]]
        for word in text.lower().split():
            ids.extend(self.encode_word(word))
            if len(ids) >= max_len:
                return ids[:max_len]
        return ids + [0] * (max_len - len(ids))


def random_line(rng: random.Random, words: int) -> str:
    return " ".join("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 5))) for _ in range(words))
