"""Per-thread NumPy numerics profile for the featurizer threads.

NumPy keeps its floating-point error policy and its ufunc buffer size per thread
(per context), so every worker thread applies the profile itself when it starts.
"""
import numpy as np


def apply(profile):
    np.seterr(over=profile.get("overflow", "warn"), invalid="ignore", divide="ignore",
              under="ignore")
    np.setbufsize(int(profile.get("ufunc_buffer", 8192)))
    return {"bufsize": np.getbufsize(), "err": np.geterr()}
