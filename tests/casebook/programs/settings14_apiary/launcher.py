"""Starts the hive logger export as a child process with its stdout on a pipe.

The logger's process settings come from the station config ([logger] table):

    hives          how many hives the export covers
    live_output    true: the logger runs with PYTHONUNBUFFERED=1, so every reading reaches the pipe (and the
                   log collector that tees the export on the field gateways) the moment it is printed;
                   false: the interpreter's default block buffering of a pipe (the variable is dropped from the
                   child's environment, whatever the parent has)
"""
import os
import subprocess
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))


def load_config(path):
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def logger_env(cfg):
    env = dict(os.environ)
    if cfg["logger"].get("live_output", False):
        env["PYTHONUNBUFFERED"] = "1"
    else:
        env.pop("PYTHONUNBUFFERED", None)
    return env


def start_logger(cfg, seed, cwd):
    return subprocess.Popen([sys.executable, os.path.join(HERE, "hivelog.py"), str(cfg["logger"]["hives"]),
                             str(seed)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, cwd=cwd, env=logger_env(cfg))
