"""Process start-up settings shared by the lab's training scripts.

The same scripts run on Linux workstations and on macOS laptops; "spawn" is
the only start method available everywhere and is safe with threads, so it is
the default here (set once, for the whole interpreter).
"""
import multiprocessing as mp

DEFAULT_START_METHOD = "spawn"


def configure_processes(method=None):
    mp.set_start_method(method or DEFAULT_START_METHOD, force=True)
    return mp.get_start_method()
