"""Site profile of the saltmarsh tile classifier (TOML, read once at start-up)."""
import tomllib


class Cfg(dict):
    __getattr__ = dict.__getitem__


def load(path):
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    return Cfg({k: Cfg(v) if isinstance(v, dict) else v for k, v in raw.items()})
