from dataclasses import dataclass


@dataclass(frozen=True)
class RunConfig:
    d_model: int = 96
    seq_len: int = 256
    batch: int = 4
    writers: int = 1
    buffer: int = 6
    lr: float = 1e-3
