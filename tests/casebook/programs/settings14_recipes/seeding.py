"""Run seeding for the recommender jobs: seed_everything(seed, numpy_api) seeds Python's `random`, NumPy's
global RandomState and torch, and returns the NumPy random source the data code draws from:

    global      the legacy global RandomState (the np.random.* functions), as the published experiments used:
                with it the samplers reproduce the paper's negative streams draw for draw
    generator   a numpy.random.Generator (PCG64) seeded from the same seed: the API NumPy recommends for new
                code; its streams differ from the legacy ones

Both sources offer the calls the samplers use (choice, random, normal, shuffle)."""
import random

import numpy as np
import torch

NUMPY_APIS = ("global", "generator")


def seed_everything(seed, numpy_api):
    if numpy_api not in NUMPY_APIS:
        raise ValueError(f"unknown numpy_api {numpy_api!r}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if numpy_api == "global":
        return np.random
    return np.random.default_rng(seed)
