"""Replayed auction logs (deterministic) and the per-auction bookkeeping of the bid-landscape pipeline."""
import numpy as np
from prometheus_client import Counter, Gauge, Histogram

EXCHANGES = ("adx", "openrtb-a", "openrtb-b", "direct")
FORMATS = ("banner", "video", "native")
N_FEATURES = 24

BIDS = Counter("bidder_auctions_total", "auctions replayed", ["exchange", "format"])
WINS = Counter("bidder_wins_total", "auctions won", ["exchange"])
SPEND = Counter("bidder_spend_micros_total", "second-price spend", ["exchange"])
PRICE = Histogram("bidder_clearing_price", "clearing price (CPM)", ["exchange"],
                  buckets=(0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0))
SHADE = Histogram("bidder_shading_ratio", "clearing price over our bid",
                  buckets=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0))
LAT = Histogram("bidder_exchange_latency_ms", "exchange response time", ["exchange"],
                buckets=(2, 5, 10, 20, 35, 50, 75, 100, 150))
MARGIN = Histogram("bidder_bid_floor_ratio", "our bid over the floor", ["format"],
                   buckets=(0.5, 0.8, 1.0, 1.2, 1.5, 2.0, 3.0, 5.0))
LAST_TS = Gauge("bidder_replay_last_ts", "timestamp of the last replayed auction", multiprocess_mode="max")


class AuctionLog:
    def __init__(self, n=200_000, seed=3):
        rng = np.random.default_rng(seed)
        self.n = n
        self.exchange = rng.integers(0, len(EXCHANGES), n)
        self.format = rng.integers(0, len(FORMATS), n)
        self.x = rng.standard_normal((n, N_FEATURES)).astype(np.float32)
        w = rng.standard_normal(N_FEATURES).astype(np.float32) / 4
        self.floor = np.exp(rng.normal(-1.0, 0.6, n)).round(3)
        self.bid = (self.floor * np.exp(self.x @ w + rng.normal(0.2, 0.3, n))).round(3)
        self.second = (self.bid * rng.uniform(0.3, 1.2, n)).round(3)
        self.latency = rng.gamma(2.0, 12.0, n).round(1)
        self.ts = 1_714_560_000_000 + np.cumsum(rng.integers(1, 40, n))

    def batch(self, start, size):
        idx = np.arange(start, start + size) % self.n
        return idx


def book(log, idx):
    """Per-auction bookkeeping: who cleared, at what price; the replay's metrics. -> (won, price) lists."""
    won, price = [], []
    columns = (log.exchange[idx], log.format[idx], log.floor[idx], log.bid[idx], log.second[idx], log.latency[idx],
               log.ts[idx])
    for ex, fm, floor, bid, second, lat, ts in zip(*(c.tolist() for c in columns), strict=False):
        exchange = EXCHANGES[ex]
        BIDS.labels(exchange, FORMATS[fm]).inc()
        LAT.labels(exchange).observe(lat)
        MARGIN.labels(FORMATS[fm]).observe(bid / floor)
        ok = bid >= floor and bid >= second and lat < 120.0
        clearing = max(floor, second) if ok else 0.0
        if ok:
            WINS.labels(exchange).inc()
            SPEND.labels(exchange).inc(clearing * 1000.0)
            PRICE.labels(exchange).observe(clearing)
            SHADE.observe(clearing / bid)
        LAST_TS.set(ts)
        won.append(1.0 if ok else 0.0)
        price.append(clearing)
    return won, price
