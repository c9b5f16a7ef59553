import os
import tomllib
from dataclasses import dataclass, field


@dataclass
class ArchiveProfile:
    scenes: int = 24
    bands: int = 6
    size: int = 256
    classes: int = 6
    seed: int = 2


@dataclass
class UplinkProfile:
    """Socket options the tile server applies to every client connection."""
    nodelay: bool = True
    keepalive: bool = True
    send_buffer_kb: int = 4096
    max_pacing_mbit: int = 0          # 0: no cap on the connection's pacing rate


@dataclass
class TileProfile:
    patch: int = 32
    patches_per_batch: int = 64
    queue_depth: int = 4
    cloud_fraction: float = 0.1


@dataclass
class TrainProfile:
    width: int = 24
    lr: float = 1e-3
    threads: int = 1
    seed: int = 0


@dataclass
class Profile:
    name: str = "default"
    archive: ArchiveProfile = field(default_factory=ArchiveProfile)
    uplink: UplinkProfile = field(default_factory=UplinkProfile)
    tiles: TileProfile = field(default_factory=TileProfile)
    train: TrainProfile = field(default_factory=TrainProfile)


def read(path):
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    prof = Profile(name=raw.get("name", os.path.basename(path)))
    for section in ("archive", "uplink", "tiles", "train"):
        target = getattr(prof, section)
        for key, value in (raw.get(section) or {}).items():
            if not hasattr(target, key):
                raise KeyError(f"[{section}] {key}")
            setattr(target, key, value)
    return prof
