# Reading the QA shard: JSON lines of (question, passage, answer span), tokenised with a word vocabulary.
import json
import random
import re
import threading

WORD = re.compile(r"[a-z]+|[0-9]+|[^\sa-z0-9]")
Q_LEN = 16
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "shi", "vo", "an", "el", "or", "us", "be", "di"]


def fake_shard(n_records, seed=0):
    rng = random.Random(seed)

    def sentence(k):
        return " ".join("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(k))

    out = []
    for _ in range(n_records):
        passage = ". ".join(sentence(rng.randint(8, 16)) for _ in range(rng.randint(6, 10)))
        out.append(json.dumps({"question": sentence(rng.randint(6, 12)) + "?", "passage": passage,
                               "answer_start": rng.randint(0, 40)}))
    return out


def build_vocab(lines, size=8000):
    counts = {}
    for line in lines:
        rec = json.loads(line)
        for tok in WORD.findall((rec["question"] + " " + rec["passage"]).lower()):
            counts[tok] = counts.get(tok, 0) + 1
    words = sorted(counts, key=counts.get, reverse=True)[: size - 2]
    return {w: i + 2 for i, w in enumerate(words)}  # 0 pad, 1 unk


class BatchReader(threading.Thread):
    """Parses and tokenises records into padded id lists; the trainer turns them into tensors."""

    def __init__(self, lines, vocab, batch_size, max_len, out):
        super().__init__(name="batch-reader", daemon=True)
        self.lines, self.vocab, self.batch_size, self.max_len, self.out = lines, vocab, batch_size, max_len, out

    def encode(self, text):
        return [self.vocab.get(tok, 1) for tok in WORD.findall(text.lower())]

    def run(self):
        i = 0
        while True:
            rows, questions, starts = [], [], []
            for _ in range(self.batch_size):
                rec = json.loads(self.lines[i % len(self.lines)])
                i += 1
                q = self.encode(rec["question"])[:Q_LEN]
                ids = self.encode(rec["passage"])[: self.max_len]
                questions.append(q + [0] * (Q_LEN - len(q)))
                rows.append(ids + [0] * (self.max_len - len(ids)))
                starts.append(min(rec["answer_start"], self.max_len - 1))
            self.out.put((rows, questions, starts))
