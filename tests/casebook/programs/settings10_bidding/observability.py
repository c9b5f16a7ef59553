"""Job metrics (prometheus_client), set up before the library is first imported: prometheus_client chooses how it
stores every metric value when it is imported, from the environment.

    multiproc  values kept in per-process memory-mapped files under PROMETHEUS_MULTIPROC_DIR, so the exporter
               sidecar (the one the serving fleet's gunicorn workers use) can merge this job with its helpers
    inprocess  values kept in memory; the exporter reads this process's registry
"""
import os
import shutil
import tempfile

MODES = ("multiproc", "inprocess")
_DIRS = []


def setup(mode):
    if mode not in MODES:
        raise ValueError(mode)
    os.environ.pop("prometheus_multiproc_dir", None)
    if mode == "multiproc":
        path = tempfile.mkdtemp(prefix="bidder-metrics-")
        _DIRS.append(path)
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    else:
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    import prometheus_client
    return prometheus_client


def cleanup():
    for path in _DIRS:
        shutil.rmtree(path, ignore_errors=True)
