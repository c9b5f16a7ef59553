"""Station profile for the shingle-spit call classifier (TOML, read once at start-up)."""
import tomllib
from types import SimpleNamespace


def load(path):
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    return SimpleNamespace(**{k: SimpleNamespace(**v) if isinstance(v, dict) else v for k, v in raw.items()})
