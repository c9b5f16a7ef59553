"""Per-thread numeric precision for the distillation run: CPU autocast on or off and its
reduced-precision dtype (torch.set_autocast_enabled / set_autocast_dtype; the autocast
state belongs to the calling thread)."""
import torch

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def apply(profile):
    """Sets the calling thread's CPU autocast state from profile['precision']."""
    name = profile.get("precision", "fp32")
    dtype = DTYPES[name]
    enabled = dtype is not torch.float32
    torch.set_autocast_dtype("cpu", dtype if enabled else torch.bfloat16)
    torch.set_autocast_enabled("cpu", enabled)
    return name
