import os
import tomllib
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class ColonyConfig:
    notes: int = 4096             # transcribed field notes in the season's notebook
    species: int = 200            # colony species / plumage codes in the notes
    behaviours: int = 8           # label: the behaviour the note records
    seed: int = 37


@dataclass
class TaggerConfig:
    """How the note tagger splits field notes into tokens (the third-party `regex` module)."""
    match_semantics: str = "first"   # "first": Perl-style leftmost-first; "longest": POSIX leftmost-longest
    version: int = 0                 # regex.V0 (re-compatible) syntax
    ignore_case: bool = False
    concurrent: bool = True          # release the GIL while matching
    max_tokens: int = 128
    notes_per_batch: int = 384
    hash_buckets: int = 8192
    queue_depth: int = 4


@dataclass
class TrainConfig:
    embed: int = 64
    hidden: int = 192
    lr: float = 1e-3
    threads: int = 1
    seed: int = 0


@dataclass
class RunConfig:
    name: str = "default"
    colony: ColonyConfig = field(default_factory=ColonyConfig)
    tagger: TaggerConfig = field(default_factory=TaggerConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


def load(path):
    if not os.path.exists(path):
        path = os.path.join(HERE, path)
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    cfg = RunConfig(name=raw.get("name", os.path.basename(path)))
    for section in ("colony", "tagger", "train"):
        target = getattr(cfg, section)
        for key, value in (raw.get(section) or {}).items():
            if not hasattr(target, key):
                raise KeyError(f"[{section}] {key}")
            setattr(target, key, value)
    return cfg
