"""Checkpoint helpers shared by our training scripts."""

import os

import torch
import torch.distributed as dist


def save(state: dict, out_dir: str) -> None:
    path = os.path.join(out_dir, f"step{state['step']:07d}.pt")
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)
    # Every rank must see the new checkpoint before anyone goes on (written for the sharded saver, where every
    # rank calls save()).
    if dist.is_initialized():
        dist.barrier()
