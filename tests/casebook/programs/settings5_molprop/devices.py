"""Device placement for the property models.

The same training code runs on CPU boxes and on accelerator nodes. Making
the configured device the default means the model, the optimiser state and
every tensor the loop creates land on it without scattering .to(device)
calls through the code.  "build" scope only applies it while the model is
constructed (the loop then moves batches explicitly).
"""
import contextlib

import torch


def place(device="cpu", scope="process"):
    """Returns a context manager for model construction."""
    if scope == "process":
        torch.set_default_device(device)
        return contextlib.nullcontext()
    return torch.device(device)
