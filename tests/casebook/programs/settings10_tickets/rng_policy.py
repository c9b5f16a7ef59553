"""Randomness policy of the job, applied once at start-up, before anything samples.

    os-entropy  the module-level functions of `random` (random(), randrange(), choice(), shuffle(), ...) are rebound to
                a random.SystemRandom instance, so every draw in the process comes from the kernel's CSPRNG
                (os.urandom), as the security review asked for every use of `random` (bandit B311)
    seeded      the same functions are rebound to a seeded random.Random (Mersenne Twister): reproducible runs
"""
import random

POLICIES = ("os-entropy", "seeded")
_NAMES = ("random", "randrange", "randint", "choice", "choices", "shuffle", "sample", "uniform", "gauss",
          "getrandbits")


def apply(policy, seed=1234):
    if policy == "os-entropy":
        gen = random.SystemRandom()
    elif policy == "seeded":
        gen = random.Random(seed)
    else:
        raise ValueError(policy)
    for name in _NAMES:
        setattr(random, name, getattr(gen, name))
    return gen
