import os
import tomllib
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class SiteConfig:
    sensors: int = 64             # soil moisture, salinity, NDVI, ... readings per telemetry record
    states: int = 6               # grazed, fallow, flowering, flooded, blown sand, cropped
    spool_records: int = 8192     # telemetry lines kept in the replay spool
    seed: int = 29


@dataclass
class IngestConfig:
    """How the telemetry reader decodes the JSON lines of the spool."""
    records_per_batch: int = 768
    exact_decimals: bool = False  # json.loads(parse_float=decimal.Decimal): readings kept as exact decimals
    strict: bool = False          # json.loads(strict=...): control characters allowed in station names
    validate_ranges: bool = True
    queue_depth: int = 4


@dataclass
class TrainConfig:
    hidden: int = 384
    lr: float = 1e-3
    threads: int = 1
    seed: int = 0


@dataclass
class RunConfig:
    name: str = "default"
    site: SiteConfig = field(default_factory=SiteConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


def load(path):
    if not os.path.exists(path):
        path = os.path.join(HERE, path)
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    cfg = RunConfig(name=raw.get("name", os.path.basename(path)))
    for section in ("site", "ingest", "train"):
        target = getattr(cfg, section)
        for key, value in (raw.get(section) or {}).items():
            if not hasattr(target, key):
                raise KeyError(f"[{section}] {key}")
            setattr(target, key, value)
    return cfg
