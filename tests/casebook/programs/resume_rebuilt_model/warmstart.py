"""Warm-starting from a saved checkpoint (the pattern of many fine-tuning repos' `utils/checkpoint.py`)."""
import os
import tempfile

import torch


def snapshot_path(tag: str) -> str:
    return os.path.join(tempfile.gettempdir(), f"warmstart-{tag}-{os.getpid()}.pt")


def save_pretrained(model: torch.nn.Module, tag: str) -> str:
    path = snapshot_path(tag)
    torch.save({"state_dict": model.state_dict(), "arch": type(model).__name__}, path)
    return path


def load_pretrained(model_cls, path: str, **kwargs) -> torch.nn.Module:
    """Build a fresh model and fill it from the checkpoint (a new object, with new parameters)."""
    blob = torch.load(path, map_location="cpu", weights_only=True)
    model = model_cls(**kwargs)
    model.load_state_dict(blob["state_dict"])
    os.unlink(path)
    return model
