import os
import tomllib
from dataclasses import dataclass, field


@dataclass
class LexiconOptions:
    compounds: int = 8000
    min_parts: int = 6
    max_parts: int = 14
    zipf: float = 0.9
    seed: int = 1


@dataclass
class TokenizerOptions:
    vocab_size: int = 4000
    training_lines: int = 5000
    word_cache: int = 10000
    unk_token: str = "[UNK]"
    pad_multiple: int = 1
    max_tokens: int = 256
    parallelism: bool = True


@dataclass
class FeedOptions:
    batch_records: int = 256
    reagents_per_record: int = 40
    queue_depth: int = 4


@dataclass
class TrainOptions:
    embed_dim: int = 192
    hidden: int = 768
    classes: int = 10
    lr: float = 2e-3
    threads: int = 1
    seed: int = 0


@dataclass
class Options:
    name: str = "default"
    lexicon: LexiconOptions = field(default_factory=LexiconOptions)
    tokenizer: TokenizerOptions = field(default_factory=TokenizerOptions)
    feed: FeedOptions = field(default_factory=FeedOptions)
    train: TrainOptions = field(default_factory=TrainOptions)


def _merge(target, table):
    for k, v in (table or {}).items():
        if not hasattr(target, k):
            raise KeyError(f"{type(target).__name__}.{k}")
        setattr(target, k, v)


def load(path):
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    opts = Options(name=raw.get("name", os.path.basename(path)))
    for section in ("lexicon", "tokenizer", "feed", "train"):
        _merge(getattr(opts, section), raw.get(section))
    os.environ["TOKENIZERS_PARALLELISM"] = "true" if opts.tokenizer.parallelism else "false"
    return opts
