"""Bootstrap of ``dflash-diag run``: starts the probes in a Python program without changing its code.

``dflash-diag run`` puts this directory first on PYTHONPATH, so the interpreter imports this file as
``sitecustomize`` at start-up. It:
1. takes itself off sys.path and PYTHONPATH again (the program sees its usual environment),
2. runs the ``sitecustomize`` that would otherwise have been imported (a venv's or the distro's),
3. claims the run: only the first Python process started under ``dflash-diag run`` gets probes (the
   token is removed from the environment, so subprocesses such as compile workers do not), and
4. installs the import clock (codedrift), then calls ``probes.start`` with the configuration from the
   environment. Any failure prints one line on stderr and the program runs unprobed.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))  # the directory that holds the probes package
TOKEN_ENV = "DFLASH_DIAG_RUN_TOKEN"


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


def _start_probes() -> None:
    if os.environ.pop(TOKEN_ENV, None) is None:
        return  # not the process `dflash-diag run` started (or one of its subprocesses)
    try:
        try:
            import probes
        except ImportError:
            sys.path.append(_ROOT)  # the program's interpreter does not have dflash-diag installed
            import probes
        from probes import codedrift

        config = probes.config_from_env()
        if "codedrift" in config.enabled:
            codedrift.install_import_hook()  # before the program's own imports: exact import times
        probes.start(config)
    except Exception as exc:
        print(f"dflash-diag run: probes not started: {type(exc).__name__}: {exc}", file=sys.stderr)


_unhook_path()
_chain_sitecustomize()
_start_probes()
