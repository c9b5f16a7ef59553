"""Starts the decoder worker with the site's dynamic-loader policy."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def loader_env(binding):
    """Environment for the decoder worker. `binding` is the site loader policy:
    'lazy' (the toolchain default), 'now' or 'not' (the ld.so LD_BIND_* switches)."""
    env = dict(os.environ)
    for var in ("LD_BIND_NOW", "LD_BIND_NOT"):
        env.pop(var, None)
    if binding in ("now", "not"):
        env["LD_BIND_" + binding.upper()] = "1"
    env["OMP_NUM_THREADS"] = "1"
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def start_decoder(archive, batch, knots, binding):
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "decoder.py"), "--parent", str(os.getpid()),
         "--archive", archive, "--batch", str(batch), "--knots", str(knots)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=loader_env(binding))
