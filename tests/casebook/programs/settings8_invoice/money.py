"""Monetary arithmetic settings for the billing pipeline (imported once, at start-up).

Every thread's decimal context is copied from decimal.DefaultContext the first
time the thread touches decimal, so the profile is set there before any worker
starts.  'audit' keeps enough digits that chained FX conversions and pro-rata
splits never round before the final quantize to the cent (the reconciliation
job compares our totals with the ledger's to the cent); 'standard' is
Python's own 28-digit context.
"""
import decimal

PROFILES = {
    "audit": {"prec": 120, "rounding": decimal.ROUND_HALF_EVEN},
    "standard": {"prec": 28, "rounding": decimal.ROUND_HALF_EVEN},
}
CENT = decimal.Decimal("0.01")


def configure(profile):
    cfg = PROFILES[profile]
    decimal.DefaultContext.prec = cfg["prec"]
    decimal.DefaultContext.rounding = cfg["rounding"]
    decimal.DefaultContext.traps[decimal.InvalidOperation] = True
    decimal.setcontext(decimal.Context(prec=cfg["prec"], rounding=cfg["rounding"]))
    return cfg


def to_cents(x):
    return x.quantize(CENT)
