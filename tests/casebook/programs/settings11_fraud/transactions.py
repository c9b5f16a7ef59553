"""Synthetic card transactions (deterministic) and the per-card feature engineering of the fraud model.

The feature code is shared with the online scoring service, instrumented the same way: one span per scored
transaction, with the features that drove the decision as attributes.
"""
import math
import random
from collections import deque

from opentelemetry import trace

N_CARDS = 4_000
N_MERCHANTS = 3_000
COUNTRIES = ("US", "GB", "DE", "FR", "ES", "IT", "NL", "BR", "MX", "IN", "SG", "NG")
MCC = (5411, 5812, 5999, 4111, 5732, 7995, 5967, 4829, 6011, 5311)
CHANNELS = ("chip", "contactless", "ecom", "moto", "atm")
N_FEATURES = 48
HISTORY = 96
MERCHANT_HISTORY = 64

tracer = trace.get_tracer("fraud.features")


class Stream:
    """Transactions in time order; a card's home country and typical spend are fixed."""

    def __init__(self, seed=11):
        self.rng = random.Random(seed)
        self.home = [self.rng.randrange(len(COUNTRIES)) for _ in range(N_CARDS)]
        self.spend = [math.exp(self.rng.gauss(3.2, 0.8)) for _ in range(N_CARDS)]
        self.merchant_risk = [self.rng.betavariate(1.2, 30.0) for _ in range(N_MERCHANTS)]
        self.ts = 1_714_560_000.0

    def next_batch(self, n):
        rng = self.rng
        out = []
        for _ in range(n):
            self.ts += rng.expovariate(40.0)
            card = rng.randrange(N_CARDS)
            merchant = rng.randrange(N_MERCHANTS)
            risky = rng.random() < self.merchant_risk[merchant] * 2.0
            country = rng.randrange(len(COUNTRIES)) if (risky or rng.random() < 0.05) else self.home[card]
            amount = round(self.spend[card] * math.exp(rng.gauss(1.2 if risky else 0.0, 0.6)), 2)
            out.append({"card": card, "merchant": merchant, "ts": self.ts, "amount": amount, "country": country,
                        "mcc": MCC[(merchant * 7) % len(MCC)], "channel": rng.randrange(len(CHANNELS)),
                        "fraud": 1.0 if (risky and rng.random() < 0.7) else 0.0})
        return out


class CardState:
    """Per-card history of one shard of cards (each pool worker owns one shard), loaded from the feature store's
    snapshot of the last hours before the replay starts."""

    def __init__(self, stream, shard, n_shards):
        self.home = stream.home
        self.hist = {}
        self.merchants = {}
        rng = random.Random(1000 + shard)
        for card in range(shard, N_CARDS, n_shards):
            past = sorted(stream.ts - rng.uniform(0.0, 100.0 * HISTORY) for _ in range(HISTORY))
            self.hist[card] = deque(((t, round(stream.spend[card] * math.exp(rng.gauss(0.0, 0.6)), 2),
                                      self.home[card] if rng.random() > 0.05 else rng.randrange(len(COUNTRIES)),
                                      rng.randrange(N_MERCHANTS)) for t in past), maxlen=HISTORY)
        for merchant in range(N_MERCHANTS):
            past = sorted(stream.ts - rng.uniform(0.0, 3000.0) for _ in range(MERCHANT_HISTORY))
            self.merchants[merchant] = deque(((t, round(math.exp(rng.gauss(3.2, 0.9)), 2)) for t in past),
                                             maxlen=MERCHANT_HISTORY)

    def features(self, txn):
        h = self.hist[txn["card"]]
        now, amount = txn["ts"], txn["amount"]
        last_10m = [a for t, a, _, _ in h if now - t < 600.0]
        last_hour = [a for t, a, _, _ in h if now - t < 3600.0]
        amounts = sorted(a for _, a, _, _ in h)
        n = len(amounts)
        mean = sum(amounts) / n
        var = sum((a - mean) ** 2 for a in amounts) / n
        median, p90 = amounts[n // 2], amounts[(9 * n) // 10]
        times = [t for t, _, _, _ in h]
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        gap_mean = sum(gaps) / len(gaps)
        gap_std = math.sqrt(sum((g - gap_mean) ** 2 for g in gaps) / len(gaps))
        gap = now - times[-1]
        foreign = float(txn["country"] != self.home[txn["card"]])
        countries = len({c for _, _, c, _ in h})
        merchants = len({m for _, _, _, m in h})
        seen_merchant = float(any(m == txn["merchant"] for _, _, _, m in h))
        same_amount = sum(1 for a in amounts if abs(a - amount) < 0.01)
        m = self.merchants[txn["merchant"]]
        m_amounts = sorted(a for _, a in m)
        m_mean = sum(m_amounts) / len(m_amounts)
        m_rank = sum(1 for a in m_amounts if a < amount) / len(m_amounts)
        m_recent = sum(1 for t, _ in m if now - t < 600.0)
        m.append((now, amount))
        hour = (now % 86400.0) / 3600.0
        f = [math.log1p(amount), (amount - mean) / math.sqrt(var + 1.0), math.log1p(amount / median),
             math.log1p(amount / p90), math.log1p(gap), math.log1p(gap_mean), math.log1p(gap_std) - math.log1p(gap_mean),
             float(len(last_10m)), float(len(last_hour)), math.log1p(sum(last_10m)), math.log1p(sum(last_hour)),
             foreign, float(countries), float(merchants), seen_merchant, float(same_amount), math.log1p(len(m)),
             math.log1p(amount / m_mean), m_rank, float(m_recent), math.sin(2 * math.pi * hour / 24), math.cos(2 * math.pi * hour / 24)]
        f += [1.0 if txn["channel"] == k else 0.0 for k in range(len(CHANNELS))]
        f += [1.0 if txn["mcc"] == k else 0.0 for k in MCC]
        f += [1.0 if txn["country"] == k else 0.0 for k in range(len(COUNTRIES))]
        f = f[:N_FEATURES] + [0.0] * (N_FEATURES - len(f))
        h.append((now, amount, txn["country"], txn["merchant"]))
        return f


def featurize_chunk(state, txns):
    """-> (features, labels) for a chunk of transactions of one shard."""
    feats, labels = [], []
    with tracer.start_as_current_span("features.chunk") as chunk_span:
        chunk_span.set_attribute("chunk.size", len(txns))
        for txn in txns:
            with tracer.start_as_current_span("features.txn") as span:
                f = state.features(txn)
                span.set_attribute("card.id", txn["card"])
                span.set_attribute("txn.amount", txn["amount"])
                span.set_attribute("feature.amount_z", f[1])
                span.set_attribute("feature.velocity_1h", f[8])
            feats.append(f)
            labels.append(txn["fraud"])
    return feats, labels
