"""The CUDA stream rules of replicas.py, checked on CPU with a recording fake of the stream calls.

No GPU here, and the bugs these rules prevent are races (a copy reading a buffer before the producer wrote
it, or after the allocator handed it to someone else), so the order of the stream calls is what is
checked. The fake models PyTorch's documented behaviour: a copy between two CUDA devices runs on the
*source* device's current stream of the calling thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from reference_trainer.data import Batch
from reference_trainer.drafter import DFlashDraftModel, DrafterConfig
from reference_trainer.replicas import HiddenBatch, Replica, StreamOps, receive_hidden, replica_max_abs_diff

CUDA0, CUDA1 = torch.device("cuda:0"), torch.device("cuda:1")


@dataclass(frozen=True)
class FakeStream:
    name: str


@dataclass(frozen=True)
class FakeEvent:
    name: str


@dataclass
class RecordingOps(StreamOps):
    """Records every stream call in order; this thread's current stream per device is ``current:<device>``."""

    log: list[tuple[Any, ...]] = field(default_factory=list)

    def current_stream(self, device: torch.device) -> FakeStream:
        return FakeStream(f"current:{device}")

    def new_event(self) -> FakeEvent:
        return FakeEvent(f"event-{len(self.log)}")

    def record(self, event: Any, stream: Any) -> None:
        self.log.append(("record", event, stream))

    def wait_event(self, stream: Any, event: Any) -> None:
        self.log.append(("wait_event", stream, event))

    def wait_stream(self, stream: Any, other: Any) -> None:
        self.log.append(("wait_stream", stream, other))

    def record_stream(self, tensor: torch.Tensor, stream: Any) -> None:
        self.log.append(("record_stream", id(tensor), stream))

    def copy_to(self, tensor: torch.Tensor, source: torch.device, device: torch.device) -> torch.Tensor:
        stream = self.current_stream(source) if source != device else None
        self.log.append(("copy", id(tensor), stream))
        return tensor.clone()

    def index(self, entry: tuple[Any, ...]) -> int:
        return self.log.index(entry)


def _item(device: torch.device) -> HiddenBatch:
    batch = Batch(index=0, input_ids=torch.zeros(1, 4, dtype=torch.long), loss_mask=torch.ones(1, 4),
                  lengths=torch.tensor([4]))
    return HiddenBatch(batch=batch, hidden=torch.randn(1, 4, 8), device=device, ready=FakeEvent("ready"),
                       producer="target-0")


def test_cross_device_hand_off_copies_on_a_stream_that_waited_and_keeps_the_source_alive() -> None:
    ops = RecordingOps()
    item = _item(CUDA0)
    receive_hidden(item, CUDA1, ops)
    copies = [e for e in ops.log if e[0] == "copy"]
    assert len(copies) == 1
    copy_stream = copies[0][2]
    assert copy_stream == FakeStream("current:cuda:0")  # PyTorch's rule: the source device's current stream
    # That stream waited for the producer's event before the copy was issued...
    assert ops.index(("wait_event", copy_stream, item.ready)) < ops.index(copies[0])
    # ...and the source buffer is marked in use by it, so the allocator cannot reuse it before the copy ends.
    assert ("record_stream", id(item.hidden), copy_stream) in ops.log


def test_same_device_hand_off_waits_on_the_consumer_stream_without_a_copy() -> None:
    ops = RecordingOps()
    item = _item(CUDA0)
    hidden = receive_hidden(item, CUDA0, ops)
    assert hidden is item.hidden and not [e for e in ops.log if e[0] == "copy"]
    consumer = FakeStream("current:cuda:0")
    assert ops.log == [("wait_event", consumer, item.ready), ("record_stream", id(item.hidden), consumer)]


def _replica(rank: int, device: torch.device, seed: int) -> Replica:
    torch.manual_seed(seed)
    config = DrafterConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                           head_dim=8, intermediate_size=24, num_target_layers=4, mask_token_id=9, vocab_size=10)
    model = DFlashDraftModel(config)
    optimizer = torch.optim.AdamW(model.parameters())
    return Replica(rank=rank, device=device, model=model, embed_weight=torch.zeros(1), lm_head_weight=torch.zeros(1),
                   optimizer=optimizer, scheduler=torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0),
                   forward=model, stream=FakeStream(f"replica-{rank}"))


def test_replica_comparison_waits_for_every_replica_stream_before_reading() -> None:
    ops = RecordingOps()
    group = [_replica(0, CUDA0, seed=0), _replica(1, CUDA1, seed=0), _replica(2, CUDA0, seed=0)]
    assert replica_max_abs_diff(group, ops) == 0.0
    first_read = next(i for i, e in enumerate(ops.log) if e[0] == "copy")
    waits = ops.log[:first_read]
    for replica in group:  # the stream the copy runs on, and the comparing stream, waited for each replica
        assert ("wait_stream", FakeStream(f"current:{replica.device}"), replica.stream) in waits
    with torch.no_grad():
        next(group[1].model.parameters()).add_(0.5)
    assert replica_max_abs_diff(group, RecordingOps()) == 0.5
