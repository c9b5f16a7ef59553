"""Bootstrap of ``dflash-diag run``: starts the probes in a Python program without changing its code.

``dflash-diag run`` puts this directory first on PYTHONPATH, so the interpreter imports this file as
``sitecustomize`` at start-up. It:
1. takes itself off sys.path and PYTHONPATH again (the program sees its usual environment),
2. runs the ``sitecustomize`` that would otherwise have been imported (a venv's or the distro's),
3. claims the run: only the first Python process started under ``dflash-diag run`` gets probes (the
   token is removed from the environment, so subprocesses such as compile workers do not) -- unless that
   process is a launcher of ranks (``torchrun``, ``python -m torch.distributed.run``): then the launcher
   runs unprobed, keeps this bootstrap on PYTHONPATH for the processes it starts, and each rank (a process
   whose environment has RANK or LOCAL_RANK) claims probes of its own; and
4. installs the import clock (codedrift), then calls ``probes.start`` with the configuration from the
   environment. Any failure prints one line on stderr and the program runs unprobed.
"""

from __future__ import annotations

import dataclasses
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Mapping

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))  # the directory that holds the probes package
TOKEN_ENV = "DFLASH_DIAG_RUN_TOKEN"
RANKS_ENV = "DFLASH_DIAG_RUN_RANKS"  # set by a launcher: the token is for its ranks, not for it
# Launchers that start one Python process per rank with RANK / LOCAL_RANK in its environment (docs/jobs.md).
_LAUNCHER_SCRIPTS = frozenset({"torchrun"})
_LAUNCHER_MODULES = frozenset({"torch.distributed.run", "torch.distributed.launch"})


def _is_launcher(argv: list[str]) -> bool:
    """``python .../torchrun ...`` or ``python -m torch.distributed.run ...`` (``sys.orig_argv``)."""
    args = argv[1:]
    while args and args[0].startswith("-") and args[0] not in ("-m", "-c", "-"):
        args = args[2:] if args[0] in ("-X", "-W") else args[1:]  # interpreter options (-u, -X dev, -W ...)
    if len(args) >= 2 and args[0] == "-m":
        return args[1] in _LAUNCHER_MODULES
    return bool(args) and args[0] not in ("-c", "-") and os.path.basename(args[0]) in _LAUNCHER_SCRIPTS


def _is_rank(environ: Mapping[str, str]) -> bool:
    return any(environ.get(name, "").isdigit() for name in ("RANK", "LOCAL_RANK"))


def _unhook_path() -> None:
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != _HERE]
    if parts:
        os.environ["PYTHONPATH"] = os.pathsep.join(parts)
    else:
        os.environ.pop("PYTHONPATH", None)


def _chain_sitecustomize() -> None:
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None or os.path.dirname(os.path.abspath(spec.origin or "")) == _HERE:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the same tolerance site.py has for a broken sitecustomize
        print(f"Error in sitecustomize (run under dflash-diag); set PYTHONVERBOSE for traceback: {exc}", file=sys.stderr)


def _launcher_passes_on() -> bool:
    """A launcher started by `dflash-diag run` leaves the token and this bootstrap to the ranks it starts."""
    if TOKEN_ENV not in os.environ or os.environ.get(RANKS_ENV) or not _is_launcher(list(getattr(sys, "orig_argv", []))):
        return False
    os.environ[RANKS_ENV] = "1"
    return True


def _start_probes() -> None:
    if os.environ.get(RANKS_ENV) and not _is_rank(os.environ):
        os.environ.pop(TOKEN_ENV, None)  # a launcher's helper process: not a rank, and its children neither
        return
    if os.environ.pop(TOKEN_ENV, None) is None:
        return  # not the process `dflash-diag run` started (or one of its subprocesses)
    try:
        try:
            import probes
        except ImportError:
            sys.path.append(_ROOT)  # the program's interpreter does not have dflash-diag installed
            import probes
        from probes import codedrift

        # The program does not know about the probes: they look for its queues themselves, once it has made them.
        config = dataclasses.replace(probes.config_from_env(), discover=True)
        if "codedrift" in config.enabled:
            codedrift.install_import_hook()  # before the program's own imports: exact import times
        probes.start(config)
    except Exception as exc:
        print(f"dflash-diag run: probes not started: {type(exc).__name__}: {exc}", file=sys.stderr)


if _launcher_passes_on():
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]  # the launcher's own imports
    _chain_sitecustomize()
else:
    _unhook_path()
    _chain_sitecustomize()
    _start_probes()
