import os
import tomllib
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class NetworkConfig:
    stations: int = 40            # automatic weather stations in the corries
    archive_reports: int = 20000  # raw reports kept in the replay archive
    regimes: int = 5              # clear, valley cloud, föhn, frontal rain, snow shower
    seed: int = 31


@dataclass
class PoolConfig:
    """The report parser pool (multiprocessing.Pool, forked before the trainer starts)."""
    workers: int = 2
    chunksize: int = 64           # reports per task handed to a worker (Pool.imap chunksize)
    maxtasksperchild: int = 0     # 0 = workers live for the whole run
    start_method: str = "fork"
    warm_up: bool = True          # parse a few reports in every worker at start-up
    reports_per_batch: int = 384
    queue_depth: int = 4


@dataclass
class TrainConfig:
    hidden: int = 256
    lr: float = 1e-3
    threads: int = 1
    seed: int = 0


@dataclass
class RunConfig:
    name: str = "default"
    network: NetworkConfig = field(default_factory=NetworkConfig)
    pool: PoolConfig = field(default_factory=PoolConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


def load(path):
    if not os.path.exists(path):
        path = os.path.join(HERE, path)
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    cfg = RunConfig(name=raw.get("name", os.path.basename(path)))
    for section in ("network", "pool", "train"):
        target = getattr(cfg, section)
        for key, value in (raw.get(section) or {}).items():
            if not hasattr(target, key):
                raise KeyError(f"[{section}] {key}")
            setattr(target, key, value)
    return cfg
