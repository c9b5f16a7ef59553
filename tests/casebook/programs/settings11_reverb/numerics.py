"""Floating-point environment of the job, set once at start-up, before any tensor math.

    ieee  gradual underflow kept: results below the smallest normal float are computed exactly (subnormals), so the
          synthetic decay curves match the reference acoustics toolbox bit for bit (the validation set was produced
          with it, and the QA diff of the first batches is exact only in this mode)
    ftz   results that underflow are flushed to zero and subnormal inputs read as zero (FTZ + DAZ)
"""
import torch

MODES = ("ieee", "ftz")


def configure(mode):
    if mode not in MODES:
        raise ValueError(mode)
    torch.set_flush_denormal(mode == "ftz")
    return mode
