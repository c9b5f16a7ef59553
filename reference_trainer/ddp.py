"""``--ddp``: one trainer process per rank (launched by torchrun), the drafters of every rank kept in sync through
torch.distributed: gloo on CPU, NCCL on GPU.

Inside a rank nothing changes: target threads, q_hs, drafter threads and their replicas. Across ranks, at every
optimizer step, between the two drafter barriers (drafter-0's thread, after the in-process gradient average):

1. ``sync_gradients``: one all_reduce of the lead replica's gradients, flattened, divided by the world size, and
   copied back into every replica of the rank: every replica of every rank takes the same AdamW step;
2. ``agree_to_stop``: one all_reduce (MAX) of "this rank wants to stop" (its --max-steps, --max-seconds or a
   signal), so every rank stops after the same step and none waits in a collective its peers never enter. With
   NCCL it travels on a gloo group of its own: a CPU flag, no device sync on the step path.

Each rank reads its own batches (``batch_index``: the rank's n-th batch is the stream's ``n * world + rank``-th).
At start every rank takes rank 0's drafter weights (``broadcast_initial``); at the end ``rank_max_abs_diff`` says
how far any rank's drafter drifted from rank 0's (0.0: identical; the summary's ``ddp.rank_max_abs_diff``).
Rank 0 alone prints, checkpoints and writes the summary.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from reference_trainer.replicas import CUDA, Replica, StreamOps


@dataclass(frozen=True)
class Ddp:
    rank: int
    world_size: int
    local_rank: int
    backend: str  # "gloo" | "nccl"
    control: Any  # the process group the stop flag travels in (gloo)

    @property
    def lead(self) -> bool:
        return self.rank == 0

    def batch_index(self, local: int) -> int:
        """The data stream's index of this rank's ``local``-th batch: the ranks read disjoint batches."""
        return local * self.world_size + self.rank


def local_rank() -> int:
    text = os.environ.get("LOCAL_RANK", "0")
    return int(text) if text.isdigit() else 0


def launched_by_torchrun() -> bool:
    return all(os.environ.get(name, "").isdigit() for name in ("RANK", "WORLD_SIZE")) and "MASTER_ADDR" in os.environ


def join(drafter_device: str) -> Ddp:
    """Join the job torchrun started (env://): NCCL when this rank's drafters are on CUDA, else gloo."""
    backend = "nccl" if drafter_device.startswith("cuda") else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(torch.device(drafter_device))
    dist.init_process_group(backend=backend)
    control = dist.new_group(backend="gloo") if backend == "nccl" else dist.group.WORLD
    return Ddp(rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=local_rank(), backend=backend,
               control=control)


def leave(ddp: Ddp) -> None:
    dist.destroy_process_group()


@torch.no_grad()
def broadcast_initial(ddp: Ddp, replicas: Sequence[Replica]) -> None:
    """Every rank starts from rank 0's drafter (the seeds make them equal already; this makes it a rule)."""
    lead = replicas[0]
    for index, param in enumerate(lead.model.parameters()):
        dist.broadcast(param.data, src=0)
        for other in replicas[1:]:
            list(other.model.parameters())[index].data.copy_(param.data)


@torch.no_grad()
def sync_gradients(ddp: Ddp, replicas: Sequence[Replica], ops: StreamOps = CUDA) -> list[Any]:
    """Average the lead replica's gradients over the ranks and copy them into every replica of this rank.

    Returns the events every replica's stream waits on before its optimizer step (as ``average_gradients``)."""
    lead = replicas[0]
    grads = [p.grad for p in lead.model.parameters() if p.grad is not None]
    if grads:
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)  # on this thread's current stream of the lead device (NCCL) or the CPU (gloo)
        flat /= ddp.world_size
        offset = 0
        for grad in grads:
            grad.copy_(flat[offset:offset + grad.numel()].view_as(grad))
            offset += grad.numel()
        params = [list(r.model.parameters()) for r in replicas]
        for index, param in enumerate(params[0]):
            if param.grad is None:
                continue
            for other, replica in zip(params[1:], replicas[1:], strict=True):
                other[index].grad.copy_(ops.copy_to(param.grad, lead.device, replica.device))
    events = []
    for device in sorted({r.device for r in replicas if r.device.type == "cuda"}, key=str):
        event = ops.new_event()
        ops.record(event, ops.current_stream(device))  # no sync: the replicas' streams wait on these
        events.append(event)
    return events


def agree_to_stop(ddp: Ddp, wants_to_stop: bool) -> bool:
    """True on every rank when any rank wants to stop after this step (one small CPU all_reduce)."""
    flag = torch.tensor([1 if wants_to_stop else 0], dtype=torch.int32)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=ddp.control)
    return bool(flag.item())


@torch.no_grad()
def rank_max_abs_diff(ddp: Ddp, replicas: Sequence[Replica]) -> float:
    """The largest difference between this rank's drafter and rank 0's, over every rank (end of run only: a
    broadcast of the whole drafter and a device sync)."""
    lead = replicas[0]
    flat = torch.cat([p.detach().reshape(-1).float() for p in lead.model.parameters()])
    reference = flat.clone()
    dist.broadcast(reference, src=0)
    worst = (flat - reference).abs().max().reshape(1)
    worst = worst.to(torch.device(lead.device)) if lead.device.type == "cuda" else worst
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    return float(worst.item())  # SYNC: once, at the end of the run
