import os
import tomllib
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class CorpusConfig:
    syllables: int = 72           # syllable inventory of the survey's song catalogue
    song_types: int = 12
    prompt_len: int = 40          # recorded syllables the teacher continues
    seed: int = 5


@dataclass
class TeacherConfig:
    """Generation settings of the frozen song-continuation teacher (a small causal LM)."""
    layers: int = 2
    width: int = 64
    heads: int = 4
    attn_implementation: str = "sdpa"
    use_cache: bool = True
    do_sample: bool = True
    top_k: int = 24
    temperature: float = 0.9
    new_syllables: int = 11
    warm_start_steps: int = 12    # one-off fit of the teacher to the catalogue grammar at start-up


@dataclass
class AugmentConfig:
    prompts_per_batch: int = 32
    queue_depth: int = 4


@dataclass
class TrainConfig:
    width: int = 112
    layers: int = 2
    lr: float = 3e-4
    threads: int = 1
    seed: int = 0


@dataclass
class SongConfig:
    name: str = "default"
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    teacher: TeacherConfig = field(default_factory=TeacherConfig)
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


def load(path):
    if not os.path.exists(path):
        path = os.path.join(HERE, path)
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    cfg = SongConfig(name=raw.get("name", os.path.basename(path)))
    for section in ("corpus", "teacher", "augment", "train"):
        target = getattr(cfg, section)
        for key, value in (raw.get(section) or {}).items():
            if not hasattr(target, key):
                raise KeyError(f"[{section}] {key}")
            setattr(target, key, value)
    return cfg
