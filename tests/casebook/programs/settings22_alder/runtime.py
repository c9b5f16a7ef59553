"""Process environment for a training run, taken from the profile's [runtime] table.

The launcher exports these before torch is imported, so that both ranks (the rank-1 worker
is started by rank 0 and inherits the environment) see the same settings.
"""
import os

EXPORTED = {
    "distributed_debug": "TORCH_DISTRIBUTED_DEBUG",
    "gloo_interface": "GLOO_SOCKET_IFNAME",
}


def export(rc):
    for key, var in EXPORTED.items():
        if key in rc:
            os.environ[var] = str(rc[key])
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
