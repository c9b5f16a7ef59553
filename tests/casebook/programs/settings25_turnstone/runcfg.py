import os
import tomllib
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class CatalogueConfig:
    species: int = 96
    references: int = 16384       # reference sightings in the retrieval index
    feature_dim: int = 64
    index_dim: int = 32
    index_dtype: str = "float16"  # the stored index keeps half-precision embeddings
    seed: int = 13


@dataclass
class MiningConfig:
    queries_per_batch: int = 48
    negatives: int = 31
    rank_low: int = 8             # negatives are drawn by rank, power-law between these ranks
    rank_high: int = 4000
    rank_power: float = 1.4
    tie_break: str = "any"        # "stable": equal scores keep catalogue order (np.argsort kind="stable")
    queue_depth: int = 4


@dataclass
class TrainConfig:
    hidden: int = 448
    embed: int = 64
    temperature: float = 0.07
    lr: float = 1e-3
    threads: int = 1
    seed: int = 0


@dataclass
class RunConfig:
    name: str = "default"
    catalogue: CatalogueConfig = field(default_factory=CatalogueConfig)
    mining: MiningConfig = field(default_factory=MiningConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


def load(path):
    if not os.path.exists(path):
        path = os.path.join(HERE, path)
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    cfg = RunConfig(name=raw.get("name", os.path.basename(path)))
    for section in ("catalogue", "mining", "train"):
        target = getattr(cfg, section)
        for key, value in (raw.get(section) or {}).items():
            if not hasattr(target, key):
                raise KeyError(f"[{section}] {key}")
            setattr(target, key, value)
    return cfg
