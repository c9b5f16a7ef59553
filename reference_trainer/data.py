"""Training data: a seeded synthetic token stream a drafter can learn, or a local JSONL of token ids.

Batch ``i`` is a pure function of (seed, i). That is what makes ``--resume`` exact with several producer
threads: the run records which batch indices the drafter consumed, and a resumed run regenerates the
rest. No downloads, ever.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch


class DataError(Exception):
    """A JSONL data file that is missing or malformed (the CLI turns it into one line)."""


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    seq_len: int = 3072  # every batch is padded to this many positions (static shapes for compile/flex)
    min_seq_len: int = 2048  # synthetic lengths are uniform in [min_seq_len, seq_len]
    batch_size: int = 1
    vocab_size: int = 248_320  # token ids drawn below min(vocab_size - 1, synthetic_vocab): never the mask id
    synthetic_vocab: int = 32_000
    prompt_share: float = 0.1  # synthetic: the first 10% of a sequence is "prompt" (loss_mask 0)
    seed: int = 0
    jsonl: str | None = None
    pad_to_longest: bool = False  # True: pad to the batch's longest sequence (dynamic shapes; recompiles scenario)

    def __post_init__(self) -> None:
        if not 2 <= self.min_seq_len <= self.seq_len:
            raise ValueError(f"need 2 <= min_seq_len ({self.min_seq_len}) <= seq_len ({self.seq_len})")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if not 0 <= self.prompt_share < 1:
            raise ValueError("prompt_share must be in [0, 1)")


@dataclass
class Batch:
    index: int
    input_ids: torch.Tensor  # [B, seq_len] long, right-padded with 0
    loss_mask: torch.Tensor  # [B, seq_len] float (0 on prompt and padding)
    lengths: torch.Tensor  # [B] long

    @property
    def num_tokens(self) -> int:
        return int(self.lengths.sum())


def _pad(rows: list[tuple[list[int], list[int]]], index: int, seq_len: int, to_longest: bool = False) -> Batch:
    if to_longest:
        seq_len = min(seq_len, max(len(tokens) for tokens, _ in rows))
    ids = torch.zeros(len(rows), seq_len, dtype=torch.long)
    mask = torch.zeros(len(rows), seq_len, dtype=torch.float)
    lengths = torch.zeros(len(rows), dtype=torch.long)
    for r, (tokens, loss_mask) in enumerate(rows):
        n = min(len(tokens), seq_len)
        ids[r, :n] = torch.as_tensor(tokens[:n])
        mask[r, :n] = torch.as_tensor(loss_mask[:n], dtype=torch.float)
        lengths[r] = n
    return Batch(index=index, input_ids=ids, loss_mask=mask, lengths=lengths)


class SyntheticStream:
    """A sparse first-order Markov chain: each token has 4 successors with probabilities 90/5/3/2%.

    Low entropy (about 0.45 nats per step) but not trivial: draft position k must predict k steps
    ahead, whose uncertainty compounds, so a drafter has to learn the transition table (from the anchor
    token and the target's hidden states) to push its loss from ln(V) down; "loss falls" and "accuracy
    rises" are real signals (tiny preset: ~3.8 and ~0.2 after 150 steps). With 70/15/10/5 % the k-step
    distributions flatten within a few steps and the decay-weighted loss barely moves. The table is drawn
    from ``seed``; batch ``i`` from ``(seed, i)``.
    """

    SUCCESSOR_PROBS = np.array([0.90, 0.05, 0.03, 0.02])

    def __init__(self, config: DataConfig) -> None:
        self.config = config
        self.token_range = max(2, min(config.vocab_size - 1, config.synthetic_vocab))
        rng = np.random.default_rng(config.seed)
        self.successors = rng.integers(0, self.token_range, size=(self.token_range, len(self.SUCCESSOR_PROBS)))

    def batch(self, index: int) -> Batch:
        cfg = self.config
        rng = np.random.default_rng([cfg.seed, index])
        rows = []
        for _ in range(cfg.batch_size):
            length = int(rng.integers(cfg.min_seq_len, cfg.seq_len + 1))
            choice = rng.choice(len(self.SUCCESSOR_PROBS), size=length, p=self.SUCCESSOR_PROBS)
            tokens = np.empty(length, dtype=np.int64)
            tokens[0] = rng.integers(0, self.token_range)
            for t in range(1, length):
                tokens[t] = self.successors[tokens[t - 1], choice[t]]
            prompt = int(length * cfg.prompt_share)
            rows.append((tokens.tolist(), [0] * prompt + [1] * (length - prompt)))
        return _pad(rows, index, cfg.seq_len, cfg.pad_to_longest)


class JsonlDataset:
    """``{"input_ids": [...], "loss_mask": [...]}`` per line; batch ``i`` takes lines ``i*B .. i*B+B-1``
    (cycling over the file: epochs). Every line is validated at start-up so a bad file fails in
    the first second with its line number, not hours into a run."""

    def __init__(self, config: DataConfig) -> None:
        self.config = config
        assert config.jsonl is not None
        path = Path(config.jsonl)
        if not path.is_file():
            raise DataError(f"--data {path}: no such file (give a JSONL file of {{input_ids, loss_mask}} lines)")
        self.rows: list[tuple[list[int], list[int]]] = []
        try:
            lines = path.read_text().splitlines()
        except (OSError, UnicodeDecodeError) as err:
            raise DataError(f"--data {path}: unreadable: {err}") from err
        for number, line in enumerate(lines, start=1):
            if line.strip():
                self.rows.append(self._parse(path, number, line))
        if not self.rows:
            raise DataError(f"--data {path}: no samples in it")

    def _parse(self, path: Path, number: int, line: str) -> tuple[list[int], list[int]]:
        where = f"--data {path}:{number}"
        try:
            obj = json.loads(line)
        except ValueError as err:
            raise DataError(f"{where}: not JSON ({err.msg})") from err
        if not isinstance(obj, dict) or "input_ids" not in obj:
            raise DataError(f"{where}: expected an object with input_ids (and optional loss_mask)")
        ids, mask = obj["input_ids"], obj.get("loss_mask")
        vocab = self.config.vocab_size
        if not isinstance(ids, list) or len(ids) < 2 or not all(
            isinstance(t, int) and not isinstance(t, bool) and 0 <= t < vocab for t in ids
        ):
            raise DataError(f"{where}: input_ids must be a list of >= 2 ints in [0, {vocab})")
        if mask is None:
            mask = [1] * len(ids)
        if not isinstance(mask, list) or len(mask) != len(ids) or not all(m in (0, 1) for m in mask):
            raise DataError(f"{where}: loss_mask must be a list of 0/1 as long as input_ids ({len(ids)})")
        return ids, mask

    def batch(self, index: int) -> Batch:
        size = self.config.batch_size
        rows = [self.rows[(index * size + r) % len(self.rows)] for r in range(size)]
        return _pad(rows, index, self.config.seq_len, self.config.pad_to_longest)


def make_source(config: DataConfig) -> SyntheticStream | JsonlDataset:
    return JsonlDataset(config) if config.jsonl else SyntheticStream(config)
