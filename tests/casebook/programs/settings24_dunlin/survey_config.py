import os
import tomllib
from dataclasses import dataclass, field


@dataclass
class SchemaConfig:
    discriminator: str = "kind"       # field that tags each observation record ("" = untagged union)
    strict: bool = False
    cache_strings: str = "all"
    extra: str = "ignore"


@dataclass
class SpoolConfig:
    sheets: int = 64
    records_per_sheet: int = 360
    sites: int = 40
    seed: int = 8


@dataclass
class IngestConfig:
    sheets_per_batch: int = 1
    queue_depth: int = 4


@dataclass
class TrainConfig:
    hidden: int = 768
    lr: float = 1e-3
    threads: int = 1
    seed: int = 0


@dataclass
class SurveyConfig:
    name: str = "default"
    schema: SchemaConfig = field(default_factory=SchemaConfig)
    spool: SpoolConfig = field(default_factory=SpoolConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


def load(path):
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    cfg = SurveyConfig(name=raw.get("name", os.path.basename(path)))
    for section in ("schema", "spool", "ingest", "train"):
        target = getattr(cfg, section)
        for key, value in (raw.get(section) or {}).items():
            if not hasattr(target, key):
                raise KeyError(f"[{section}] {key}")
            setattr(target, key, value)
    return cfg
