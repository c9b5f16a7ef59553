from dataclasses import dataclass


@dataclass(frozen=True)
class RunConfig:
    d_model: int = 96
    seq_len: int = 48
    batch: int = 8
    writers: int = 2
    buffer: int = 6
    lr: float = 1e-3
