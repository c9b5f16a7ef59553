"""mlockall(2) helper for the capture processes."""
import ctypes
import ctypes.util
import os

MCL_CURRENT = 1
MCL_FUTURE = 2
MODES = {"none": 0, "current": MCL_CURRENT, "all": MCL_CURRENT | MCL_FUTURE}


def lock(mode):
    flags = MODES[mode]
    if not flags:
        return 0
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.mlockall(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mlockall({mode}): {os.strerror(err)}")
    return flags
