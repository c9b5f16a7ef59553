import os
import tomllib
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class SiteConfig:
    """Environment of the acoustic pipeline's tool processes."""
    shell_env: str = ""           # file every non-interactive bash sources first (exported as BASH_ENV)
    locale: str = "C"             # LC_ALL for the extraction tools
    tmp_prefix: str = "shrike-spool-"


@dataclass
class ArchiveConfig:
    shards: int = 16
    clips_per_shard: int = 32
    sample_rate: int = 8000
    clip_seconds: float = 1.0
    call_types: int = 6
    compress_level: int = 1
    seed: int = 23


@dataclass
class LoaderConfig:
    extract_script: str = "tools/extract_clips.sh"
    clips_per_call: int = 8
    calls_per_batch: int = 4
    frame: int = 256
    hop: int = 128
    bands: int = 40
    queue_depth: int = 4


@dataclass
class TrainConfig:
    channels: int = 24
    lr: float = 1e-3
    threads: int = 1
    seed: int = 0


@dataclass
class ShrikeConfig:
    name: str = "default"
    site: SiteConfig = field(default_factory=SiteConfig)
    archive: ArchiveConfig = field(default_factory=ArchiveConfig)
    loader: LoaderConfig = field(default_factory=LoaderConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


def _path(p):
    return p if os.path.isabs(p) else os.path.join(HERE, p)


def load(path):
    if not os.path.exists(path):
        path = os.path.join(HERE, path)
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    cfg = ShrikeConfig(name=raw.get("name", os.path.basename(path)))
    for section in ("site", "archive", "loader", "train"):
        target = getattr(cfg, section)
        for key, value in (raw.get(section) or {}).items():
            if not hasattr(target, key):
                raise KeyError(f"[{section}] {key}")
            setattr(target, key, value)
    # environment inherited by every tool process of the pipeline
    os.environ["SITE_ROOT"] = HERE
    os.environ["LC_ALL"] = cfg.site.locale
    if cfg.site.shell_env:
        os.environ["BASH_ENV"] = _path(cfg.site.shell_env)
    else:
        os.environ.pop("BASH_ENV", None)
    return cfg


def script_path(cfg):
    return _path(cfg.loader.extract_script)
