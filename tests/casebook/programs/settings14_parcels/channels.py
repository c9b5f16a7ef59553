"""Inter-process channels of the parcel jobs. The queue backend is a setting ([channels] backend):

    managed   multiprocessing.Manager().Queue(): a queue.Queue living in the manager's server process, reached
              through a proxy; it can be handed to Pool workers and to processes started later, and it
              outlives a scanner that crashes mid-put
    pipe      multiprocessing.Queue(): a pipe plus a feeder thread in each producer, shared by inheritance

Both kinds share the same put/get(timeout) interface. The manager also serves the run's shared counters
(a managed dict) whatever the backend."""
import multiprocessing as mp
import signal
import sys
import tomllib
from multiprocessing.managers import SyncManager


def load_config(path):
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def _manager_init():
    # a scheduler's SIGTERM to the whole process group: leave through the server's normal exit path, which
    # removes the listener socket's directory
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))


def start_manager():
    manager = SyncManager()
    manager.start(initializer=_manager_init)
    return manager, manager.dict()


def make_queue(backend, maxsize, manager):
    if backend == "managed":
        return manager.Queue(maxsize)
    if backend == "pipe":
        return mp.Queue(maxsize)
    raise ValueError(f"unknown channel backend {backend!r}")
