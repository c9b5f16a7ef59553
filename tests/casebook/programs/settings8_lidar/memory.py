"""glibc allocator settings for long jobs on shared nodes.

The point-cloud batches are large and short-lived; on the shared labelling
nodes the pods are killed on RSS, so by default we keep big buffers out of the
heap: they are mapped on demand and handed straight back to the kernel when
freed, and the heap top is trimmed early.  The 'steady' profile pins glibc's
own ceiling instead (buffers are recycled inside the heap).
"""
import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

PROFILES = {
    "lean": {"mmap_threshold": 128 << 10, "trim_threshold": 256 << 10},
    "steady": {"mmap_threshold": 32 << 20, "trim_threshold": 64 << 20},
}

_applied = {}


def apply(profile):
    """Pin the allocator thresholds for the whole process (all threads, all arenas)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    cfg = PROFILES[profile]
    ok = libc.mallopt(M_MMAP_THRESHOLD, cfg["mmap_threshold"]) == 1
    ok &= libc.mallopt(M_TRIM_THRESHOLD, cfg["trim_threshold"]) == 1
    _applied.update(cfg, profile=profile, ok=bool(ok))
    return dict(_applied)
