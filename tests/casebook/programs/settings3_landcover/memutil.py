"""Process-level memory knobs applied by our data pipelines.

We had a node where the loader occasionally stalled for seconds inside the
kernel while faulting in a fresh batch buffer; the stack pointed at THP
compaction, and numpy's own tracker has a report of exactly that
(numpy/numpy#31590: MADV_HUGEPAGE on heap allocations can trigger synchronous
reclaim/compaction).  Since then the loaders call `configure_numpy_memory()`
before building their augmentation buffers.
"""
import numpy as np

try:  # numpy >= 2
    from numpy._core.multiarray import _set_madvise_hugepage, _get_madvise_hugepage
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core.multiarray import _set_madvise_hugepage, _get_madvise_hugepage


def configure_numpy_memory(hugepages):
    """Set numpy's MADV_HUGEPAGE hint for large (>=4 MiB) array buffers.

    Returns the previous value.  Process-wide: affects every thread's numpy
    allocations from now on.
    """
    return _set_madvise_hugepage(bool(hugepages))


def numpy_hugepages_enabled():
    return bool(_get_madvise_hugepage())
