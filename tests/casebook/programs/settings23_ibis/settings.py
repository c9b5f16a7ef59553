import tomllib
from dataclasses import dataclass, field


@dataclass
class CatalogSettings:
    sites: int = 40
    clips_per_site: int = 200
    recorders: int = 120
    species: int = 40
    embedding_dim: int = 96
    seed: int = 3
    pragmas: dict = field(default_factory=dict)


@dataclass
class LoaderSettings:
    queue_depth: int = 4
    min_clips: int = 32
    shuffle: bool = True


@dataclass
class TrainSettings:
    hidden: int = 768
    depth: int = 3
    lr: float = 1e-3
    weight_decay: float = 0.0
    threads: int = 1
    seed: int = 0


@dataclass
class RunSettings:
    name: str
    catalog: CatalogSettings
    loader: LoaderSettings
    train: TrainSettings


def _build(cls, table):
    obj = cls()
    for key, value in (table or {}).items():
        if not hasattr(obj, key):
            raise KeyError(f"{cls.__name__}: unknown key {key!r}")
        setattr(obj, key, value)
    return obj


def read(path):
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    return RunSettings(
        name=raw.get("name", path),
        catalog=_build(CatalogSettings, raw.get("catalog")),
        loader=_build(LoaderSettings, raw.get("loader")),
        train=_build(TrainSettings, raw.get("train")),
    )
