import os
import tomllib
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class SurveyConfig:
    clips_per_batch: int = 48     # 2 s reedbed recordings per batch
    sample_rate: int = 16000
    seconds: float = 2.0
    call_types: int = 5           # silence, boom, grunt, wind gust, rail squeal
    seed: int = 23


@dataclass
class DecoderConfig:
    """Environment of the spectrogram decoder child (python decoder.py)."""
    n_fft: int = 512
    hop: int = 256
    bands: int = 40
    omp_threads: int = 1
    malloc_arena_max: int = 2     # MALLOC_ARENA_MAX for the child (it is single-threaded)
    malloc_perturb: int = 0       # MALLOC_PERTURB_ byte for the child; 0 = not set
    queue_depth: int = 4


@dataclass
class TrainConfig:
    channels: int = 32
    lr: float = 1e-3
    threads: int = 1
    seed: int = 0


@dataclass
class RunConfig:
    name: str = "default"
    survey: SurveyConfig = field(default_factory=SurveyConfig)
    decoder: DecoderConfig = field(default_factory=DecoderConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


def load(path):
    if not os.path.exists(path):
        path = os.path.join(HERE, path)
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    cfg = RunConfig(name=raw.get("name", os.path.basename(path)))
    for section in ("survey", "decoder", "train"):
        target = getattr(cfg, section)
        for key, value in (raw.get(section) or {}).items():
            if not hasattr(target, key):
                raise KeyError(f"[{section}] {key}")
            setattr(target, key, value)
    return cfg


def decoder_env(cfg):
    """The decoder child's environment: the parent's, plus the profile's runtime settings."""
    d = cfg.decoder
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(d.omp_threads)
    env["MALLOC_ARENA_MAX"] = str(d.malloc_arena_max)
    if d.malloc_perturb:
        env["MALLOC_PERTURB_"] = str(d.malloc_perturb)
    else:
        env.pop("MALLOC_PERTURB_", None)
    return env
