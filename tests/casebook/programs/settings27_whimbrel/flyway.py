"""Run profile for the flight-call contrastive pre-training (read once at start-up)."""
import tomllib
from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    values: dict

    def __getattr__(self, key):
        try:
            return self.values[key]
        except KeyError:
            raise AttributeError(key) from None


@dataclass(frozen=True)
class Profile:
    name: str
    calls: Section
    moco: Section
    ddp: Section
    train: Section


def load(path):
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    return Profile(name=raw.get("name", path), calls=Section(raw["calls"]), moco=Section(raw["moco"]),
                   ddp=Section(raw["ddp"]), train=Section(raw["train"]))
