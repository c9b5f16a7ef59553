"""Data-governance guard (PEP 578 audit hook).

Consortium rule: training jobs may only read sequence data from approved
roots.  `install(policy)` registers a process-wide audit hook:

  paths    - every file open is resolved and checked against the approved roots
  network  - only socket connects are checked (files are trusted)
"""
import os
import sys
import fnmatch

_state = {"policy": "paths", "roots": (), "opens": 0, "denied": 0}
_DENY_PATTERNS = ("*/.ssh/*", "*/.aws/*", "*.pem", "*/secrets/*", "/etc/shadow")


def _hook(event, args):
    policy = _state["policy"]
    if event == "socket.connect":
        addr = args[1]
        if isinstance(addr, tuple) and addr and addr[0] not in ("127.0.0.1", "localhost", "::1"):
            _state["denied"] += 1
            raise PermissionError(f"egress blocked: {addr!r}")
        return
    if event != "open" or policy != "paths":
        return
    path = args[0]
    if not isinstance(path, (str, bytes)):
        return
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    real = os.path.realpath(path)
    _state["opens"] += 1
    for pat in _DENY_PATTERNS:
        if fnmatch.fnmatch(real, pat):
            _state["denied"] += 1
            raise PermissionError(f"governance: {real} is not an approved input")
    if _state["roots"] and not any(real.startswith(r) for r in _state["roots"]) and not real.startswith(sys.prefix) \
            and not real.startswith(sys.base_prefix):
        _state["denied"] += 1
        raise PermissionError(f"governance: {real} outside approved roots")


def install(policy="paths", roots=()):
    _state["policy"] = policy
    _state["roots"] = tuple(os.path.realpath(r) for r in roots)
    sys.addaudithook(_hook)


def stats():
    return dict(_state)
