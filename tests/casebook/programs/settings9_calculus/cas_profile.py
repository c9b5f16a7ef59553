"""Memory profile for the symbolic data-generation side of the run.

SymPy memoizes expression construction and most of its algorithms in one
process-wide LRU cache whose size it reads from SYMPY_CACHE_SIZE when it is
first imported.  The cache grows with every distinct expression a generator
has seen, so long-running generators on small instances cap it ('lean');
'standard' leaves room for the working set of a training run.
"""
import os
import sys

CACHE_SIZES = {"lean": 16, "standard": 4096}


def apply(profile):
    if "sympy" in sys.modules:
        raise RuntimeError("cas_profile.apply must run before sympy is imported")
    os.environ["SYMPY_CACHE_SIZE"] = str(CACHE_SIZES[profile])
    return CACHE_SIZES[profile]
