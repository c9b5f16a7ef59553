"""Where the py-spy binary is: an explicit path, ``$DFLASH_DIAG_PYSPY``, PATH, next to our interpreter, the
scripts directories of this Python (``pip install --user py-spy`` puts it there)."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

PYSPY_ENV = "DFLASH_DIAG_PYSPY"  # explicit path to the py-spy binary
INSTALL_HINT = "py-spy not found: pip install py-spy (or set DFLASH_DIAG_PYSPY=/path/to/py-spy)"


def find_pyspy(explicit: str | None = None) -> str | None:
    """Where the py-spy binary is: explicit path, $DFLASH_DIAG_PYSPY, PATH, next to sys.executable, scripts dirs."""
    if explicit is not None:
        return explicit if _is_executable(explicit) else None
    env = os.environ.get(PYSPY_ENV)
    if env:
        return env if _is_executable(env) else None
    on_path = shutil.which("py-spy")
    if on_path:
        return on_path
    candidates = [Path(sys.executable).parent / "py-spy"]
    for scheme in (None, f"{os.name}_user"):
        try:
            scripts = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        if scripts:
            candidates.append(Path(scripts) / "py-spy")
    for candidate in candidates:
        if _is_executable(str(candidate)):
            return str(candidate)
    return None


def _is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)
