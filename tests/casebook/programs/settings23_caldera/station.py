import tomllib
from dataclasses import dataclass, field


@dataclass
class ArchiveSpec:
    stations: int = 16
    windows_per_station: int = 200
    channels: int = 3
    window_samples: int = 4096
    seed: int = 5


@dataclass
class ReaderSpec:
    batch_windows: int = 64
    readers: int = 1
    queue_depth: int = 3
    ring_entries: int = 64
    sq_poll_idle_ms: int = 0
    gain_table: str = "nominal"
    band_low_hz: float = 0.5
    band_high_hz: float = 12.0


@dataclass
class TrainSpec:
    threads: int = 1
    lr: float = 1e-3
    seed: int = 0
    report_every: int = 1


@dataclass
class Profile:
    name: str = "default"
    archive: ArchiveSpec = field(default_factory=ArchiveSpec)
    reader: ReaderSpec = field(default_factory=ReaderSpec)
    train: TrainSpec = field(default_factory=TrainSpec)


def _fill(obj, table):
    for key, value in table.items():
        if not hasattr(obj, key):
            raise KeyError(f"unknown setting {key!r} for {type(obj).__name__}")
        setattr(obj, key, value)
    return obj


def load(path):
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    prof = Profile(name=raw.get("name", path))
    _fill(prof.archive, raw.get("archive", {}))
    _fill(prof.reader, raw.get("reader", {}))
    _fill(prof.train, raw.get("train", {}))
    return prof
