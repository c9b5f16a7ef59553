"""Starts the XRF export parser worker (a child process) with the run's interpreter
settings."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def worker_env(worker):
    """Environment for the parser worker: the interpreter's memory allocator
    (PYTHONMALLOC: 'pymalloc', 'malloc', 'debug', ...) and faulthandler."""
    env = dict(os.environ)
    env["PYTHONMALLOC"] = str(worker.get("allocator", "pymalloc"))
    if worker.get("faulthandler", False):
        env["PYTHONFAULTHANDLER"] = "1"
    env.pop("PYTHONDEVMODE", None)
    return env


def start_parser(scanner, worker):
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "xrfparse.py"), "--parent", str(os.getpid()),
         "--elements", str(scanner["elements"]),
         "--sections", str(scanner["sections_per_batch"]),
         "--rows", str(scanner["rows_per_section"])],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=worker_env(worker))
