"""Profile of the collar-telemetry behaviour model (TOML, read once at start-up)."""
import tomllib


class Section(dict):
    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


def load(path):
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    return Section({k: Section(v) if isinstance(v, dict) else v for k, v in raw.items()})
