"""Inter-process tensor sharing policy, applied once at start-up by every entry point of the recommender jobs.

    descriptors  torch.multiprocessing's file_descriptor strategy: shared-memory segments are unlinked at
                 once and travel as file descriptors, so nothing is left in /dev/shm when a worker is
                 killed (the shared GPU hosts ran out of /dev/shm twice with leaked torch_* segments)
    named        the file_system strategy: segments are named files in /dev/shm, cleaned up by
                 torch_shm_manager

Both raise the soft open-files limit to the hard limit (the usual recipe against 'received 0 items of
ancdata' / 'Too many open files')."""
import resource

import torch.multiprocessing as tmp

STRATEGY = {"descriptors": "file_descriptor", "named": "file_system"}


def apply(profile):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tmp.set_sharing_strategy(STRATEGY[profile])
    return tmp.get_sharing_strategy()
