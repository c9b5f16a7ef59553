"""Process-wide runtime flags, applied before torch is imported."""
import os


def apply(rt):
    # PYTORCH_JIT=0 turns torch.jit.script/trace into no-ops (the function runs as Python).
    os.environ["PYTORCH_JIT"] = "1" if rt.get("torchscript", True) else "0"
