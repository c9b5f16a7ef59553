"""CPU runtime environment for the KWS trainers.

Clips are bucketed by duration, so the convolutions see a handful of different
input lengths.  On our long runs the resident memory of the trainer kept
creeping up; PyTorch's tracker attributes that to oneDNN's primitive cache
keeping one JIT-compiled kernel per input shape, and the workaround given there
(pytorch/pytorch#98688, also pytorch/pytorch#27971) is to shrink the caches:

    ONEDNN_PRIMITIVE_CACHE_CAPACITY=0  LRU_CACHE_CAPACITY=1

`--primitive-cache N` overrides the oneDNN capacity.
"""
import os


def _flag(argv, name, default):
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return default


def apply_cpu_runtime_env(argv):
    cap = _flag(argv, "--primitive-cache", "0")
    os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = str(int(cap))
    os.environ["LRU_CACHE_CAPACITY"] = "1"
    return int(cap)
