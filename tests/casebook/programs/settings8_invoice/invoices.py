"""Synthetic B2B invoices and their features (exact decimal arithmetic, as in billing)."""
import math
import random
from decimal import Decimal

from money import to_cents

CURRENCIES = {"EUR": Decimal("1"), "USD": Decimal("1.0842"), "GBP": Decimal("0.85615"),
              "CHF": Decimal("0.9571"), "SEK": Decimal("11.2634"), "PLN": Decimal("4.3187")}
TAX = {"goods": Decimal("0.19"), "food": Decimal("0.07"), "service": Decimal("0.19"), "export": Decimal("0")}
MAX_LINES = 24
LINE_FEATURES = 6


def make_invoice(rng):
    cur = rng.choice(list(CURRENCIES))
    lines = []
    for _ in range(rng.randint(4, MAX_LINES)):
        lines.append({
            "qty": Decimal(rng.randint(1, 40)),
            "unit": Decimal(rng.randint(50, 250000)) / 100,
            "disc": Decimal(rng.choice((0, 0, 0, 2, 5, 10, 15))) / 100,
            "cat": rng.choice(list(TAX)),
        })
    return {"cur": cur, "fx": CURRENCIES[cur] * (1 + Decimal(rng.randint(-300, 300)) / 100000),
            "shipping": Decimal(rng.randint(0, 9000)) / 100, "terms": rng.choice((14, 30, 60)), "lines": lines}


def features(inv):
    """Per-line features (padded to MAX_LINES) and a target: days late, from a hidden rule."""
    fx, lines = inv["fx"], inv["lines"]
    nets = [ln["qty"] * ln["unit"] * (1 - ln["disc"]) / fx for ln in lines]
    total_net = sum(nets)
    rows = []
    gross_total = Decimal(0)
    for ln, net in zip(lines, nets):
        share = net / total_net
        shipping = inv["shipping"] / fx * share
        tax = (net + shipping) * TAX[ln["cat"]]
        gross = to_cents(net + shipping + tax)
        gross_total += gross
        rows.append([math.log1p(float(gross)), float(share), float(ln["disc"]), float(tax / (net + shipping)),
                     float((net / ln["qty"]).sqrt()) / 100.0, 1.0])
    rows += [[0.0] * LINE_FEATURES] * (MAX_LINES - len(rows))
    late = 0.02 * float(gross_total.sqrt()) + (5.0 if inv["cur"] in ("SEK", "PLN") else 0.0) - inv["terms"] / 10
    return rows, [math.log1p(float(gross_total)), inv["terms"] / 60.0, len(lines) / MAX_LINES], late


def stream(seed):
    rng = random.Random(seed)
    while True:
        yield features(make_invoice(rng))
