"""Synthetic support tickets (deterministic JSON records, as the helpdesk export writes them), the augmentation and
the hashed n-gram featurizer."""
import json
import random
from collections import Counter

import xxhash

INTENTS = [
    "refund", "login", "shipping", "billing", "cancel", "upgrade", "bug", "password", "invoice", "delivery",
    "account", "privacy", "export", "api", "mobile", "sso", "quota", "outage", "feedback", "pricing",
    "trial", "discount", "language", "other",
]
FILLER = ("hi team i have a question about my account and the thing is that it was working yesterday but now "
          "it is not please help me asap thanks a lot regards customer since last week after the update we "
          "cannot see anything on the dashboard when we click the button nothing happens at all").split()
AGENT = "thanks for reaching out we are looking into it and will get back to you shortly".split()
TOPIC_WORDS = {
    intent: [f"{intent}{suffix}" for suffix in ("", "s", "ed", "ing", "_issue", "_req", "_help", "_err")]
    for intent in INTENTS
}
BUCKETS = 1 << 14
MAX_IDS = 128
_PUNCT = str.maketrans({c: " " for c in ",.;:!?()[]\"'"})


def export_records(n=4096, seed=7):
    """The helpdesk export: one JSON document per ticket, with the customer's and the agent's messages."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        label = rng.randrange(len(INTENTS))
        messages = []
        for k in range(rng.randint(2, 4)):
            if k % 2:
                messages.append({"from": "agent", "ts": 1714560000 + 60 * k, "text": " ".join(AGENT)})
                continue
            words = rng.choices(FILLER, k=rng.randint(18, 40))
            for _ in range(rng.randint(1, 3)):
                words.insert(rng.randrange(len(words)), rng.choice(TOPIC_WORDS[INTENTS[label]]))
            messages.append({"from": "customer", "ts": 1714560000 + 60 * k, "text": " ".join(words).capitalize()})
        rec = {"id": 100000 + i, "created": "2024-05-01T12:00:00Z", "intent": INTENTS[label],
               "customer": {"plan": rng.choice(["free", "pro", "team"]), "region": rng.choice(["eu", "us", "apac"]),
                            "seats": rng.randint(1, 400), "tags": rng.sample(["vip", "churn-risk", "new", "edu"], 2)},
               "messages": messages, "meta": {"channel": rng.choice(["email", "chat", "web"]), "lang": "en"}}
        out.append(json.dumps(rec).encode())
    return out


def record_stream():
    records = export_records()
    while True:
        yield records[random.randrange(len(records))]


def augment(words, p_drop=0.1, p_swap=0.05):
    """Word dropout and adjacent swaps (the module-level `random` functions, as configured by rng_policy)."""
    out = [w for w in words if random.random() >= p_drop]
    for i in range(len(out) - 1):
        if random.random() < p_swap:
            out[i], out[i + 1] = out[i + 1], out[i]
    return out


def featurize(raw, p_feature_drop=0.05):
    """-> (label, ids, weights): unigrams, bigrams and skip-bigrams of the augmented customer messages, character
    trigrams of the long words, hashed into BUCKETS, each n-gram dropped with p_feature_drop, weighted by counts."""
    rec = json.loads(raw)
    text = " ".join(m["text"] for m in rec["messages"] if m["from"] == "customer")
    words = augment(text.lower().translate(_PUNCT).split())
    grams = list(words)
    grams.extend([a + " " + b for a, b in zip(words, words[1:], strict=False)])
    grams.extend([a + " _ " + b for a, b in zip(words, words[2:], strict=False)])
    for w in words:
        if len(w) > 8:
            padded = f"<{w}>"
            grams.extend([padded[i:i + 3] for i in range(len(padded) - 2)])
    kept = [g for g in grams if random.random() >= p_feature_drop]
    counts = Counter([xxhash.xxh32_intdigest(g.encode()) % BUCKETS for g in kept]).most_common(MAX_IDS)
    total = sum(c for _, c in counts)
    return INTENTS.index(rec["intent"]), [i for i, _ in counts], [c / total for _, c in counts]
