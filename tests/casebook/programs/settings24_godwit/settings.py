import os
import tomllib
from dataclasses import dataclass, field


@dataclass
class RuntimeSettings:
    blas_threads: int = 1
    torch_threads: int = 1


@dataclass
class ArchiveSettings:
    volumes: int = 64
    elevations: int = 4
    azimuths: int = 240
    gates: int = 128
    classes: int = 8
    seed: int = 11


@dataclass
class FeatureSettings:
    height_bins: int = 24
    sectors: int = 12
    beam_modes: int = 6
    texture_lags: int = 8
    contraction_path: str = "greedy"
    dtype: str = "float32"


@dataclass
class LoaderSettings:
    volumes_per_batch: int = 24
    queue_depth: int = 4
    jitter: float = 0.15


@dataclass
class TrainSettings:
    hidden: int = 1024
    depth: int = 2
    lr: float = 1e-3
    weight_decay: float = 0.01
    seed: int = 0


@dataclass
class Settings:
    name: str = "default"
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    archive: ArchiveSettings = field(default_factory=ArchiveSettings)
    features: FeatureSettings = field(default_factory=FeatureSettings)
    loader: LoaderSettings = field(default_factory=LoaderSettings)
    train: TrainSettings = field(default_factory=TrainSettings)


def _apply(target, table):
    for key, value in (table or {}).items():
        if not hasattr(target, key):
            raise KeyError(f"{type(target).__name__}: unknown key {key!r}")
        setattr(target, key, value)


def load(path):
    """Read the profile; must run before numpy is imported (BLAS reads its thread count at load)."""
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    s = Settings(name=raw.get("name", os.path.basename(path)))
    for section in ("runtime", "archive", "features", "loader", "train"):
        _apply(getattr(s, section), raw.get(section))
    os.environ["OPENBLAS_NUM_THREADS"] = str(s.runtime.blas_threads)
    os.environ["OMP_NUM_THREADS"] = str(s.runtime.torch_threads)
    return s
