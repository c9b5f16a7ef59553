"""Pure-Python byte-pair tokenizer over a synthetic corpus; one JSON record per line on stdout."""
import json
import random
import sys

VOCAB = 1024
MERGES = [(a, b) for a in range(32) for b in range(32)][:400]


def merge_pairs(symbols):
    for a, b in MERGES:  # apply every merge rule in order, the slow reference way
        out, i = [], 0
        while i < len(symbols):
            if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
                out.append((a * 32 + b) % VOCAB)
                i += 2
            else:
                out.append(symbols[i])
                i += 1
        symbols = out
    return symbols


def main():
    rng = random.Random(0)
    while True:
        text = [rng.randrange(32) for _ in range(120)]
        ids = merge_pairs(text)
        sys.stdout.write(json.dumps({"ids": ids, "label": rng.randrange(4)}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
