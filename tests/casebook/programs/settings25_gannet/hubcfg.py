import os
import tomllib
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class ColonyConfig:
    stations: int = 900           # nest-box loggers, one persistent connection each
    channels: int = 3             # nest temperature, pressure pad, activity
    record_len: int = 8192
    states: int = 4               # absent, incubating, brooding, chick-rearing
    seed: int = 17


@dataclass
class HubConfig:
    """Event loop of the station hub (the thread that keeps one connection per nest-box logger)."""
    selector: str = "epoll"       # epoll | poll | select
    tcp_nodelay: bool = True
    keepalive: bool = True
    stream_limit_kb: int = 64
    connect_timeout_s: float = 5.0


@dataclass
class PollConfig:
    polls_per_batch: int = 128    # stations read per batch, one after the other
    window: int = 96
    queue_depth: int = 4


@dataclass
class TrainConfig:
    channels: int = 96
    lr: float = 1e-3
    threads: int = 1
    seed: int = 0


@dataclass
class GannetConfig:
    name: str = "default"
    colony: ColonyConfig = field(default_factory=ColonyConfig)
    hub: HubConfig = field(default_factory=HubConfig)
    poll: PollConfig = field(default_factory=PollConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


def load(path):
    if not os.path.exists(path):
        path = os.path.join(HERE, path)
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    cfg = GannetConfig(name=raw.get("name", os.path.basename(path)))
    for section in ("colony", "hub", "poll", "train"):
        target = getattr(cfg, section)
        for key, value in (raw.get(section) or {}).items():
            if not hasattr(target, key):
                raise KeyError(f"[{section}] {key}")
            setattr(target, key, value)
    return cfg
