"""Discovery: the queues (and trainable models) a program's threads hold, found by looking at their frames, so the
probes can watch what the program would have registered itself (``session.watch_queue``/``watch_model``).

``dflash-diag attach`` discovers once, when it starts the probes in a running program. ``dflash-diag run`` starts
them before the program has made anything, so its session looks again while the program runs
(``probes.session``: a few times early, then rarely): a queue made after start-up is found either way. Bounded:
at most ``MAX_FRAMES_PER_THREAD`` frames per thread, ``MAX_LOCALS`` locals and ``MAX_ATTRS`` attributes each,
one level into lists and tuples; the frames are read with the collector held off (``_common.current_frames``).
"""

from __future__ import annotations

import os
import queue
import sys
import types
from typing import Any

from probes._common import JsonDict, current_frames

# Discovery bounds (what one look costs: bench/discover_cost.py, docs/probes.md).
MAX_FRAMES_PER_THREAD = 48
MAX_LOCALS = 256
MAX_ATTRS = 256
MAX_CONTAINER_ITEMS = 16
MAX_FOUND = 16
# Frames of the probes' own machinery are not the program's: discovery skips them.
_OWN_PREFIXES = (os.path.dirname(os.path.abspath(__file__)) + os.sep, "<string>")


def discover_objects(session: Any, *, queues: bool, models: bool) -> JsonDict:
    """Register the queues and trainable models the program's threads hold (what it would have registered)."""
    found_queues: dict[int, tuple[str, Any]] = {}
    found_models: dict[int, tuple[str, Any]] = {}
    module_cls = _module_class() if models else None
    counts: dict[int, int] = {}
    frames = current_frames()
    try:
        for top in list(frames.values()):
            frame: Any = top
            depth = 0
            while frame is not None and depth < MAX_FRAMES_PER_THREAD:
                if not frame.f_code.co_filename.startswith(_OWN_PREFIXES):
                    _scan_frame(frame, found_queues if queues else None, found_models, module_cls, counts)
                frame = frame.f_back
                depth += 1
    finally:
        del frames
    out: JsonDict = {"queues": [], "models": []}
    for name, q in _unique_names(found_queues.values()):
        session.watch_queue(name, q)
        out["queues"].append(name)
    registered: set[int] = set()
    for name, m in sorted(_unique_names(found_models.values()), key=lambda nm: -counts.get(id(nm[1]), 0)):
        params = {id(p) for p in m.parameters()}
        if params <= registered or len(out["models"]) >= 8:
            continue  # a part of a model already registered (its layers): the whole model names them better
        registered |= params
        session.watch_model(name, m)
        out["models"].append(name)
    return out


def _scan_frame(frame: Any, queues: dict[int, tuple[str, Any]] | None, models: dict[int, tuple[str, Any]],
                module_cls: type | None, counts: dict[int, int]) -> None:
    try:
        local_items = list(frame.f_locals.items())[:MAX_LOCALS]
    except Exception:
        return
    for var, value in local_items:
        if not isinstance(var, str):
            continue
        try:
            _scan_value(var, value, queues, models, module_cls, counts)
        except Exception:
            continue  # an object that misbehaves when looked at (a proxy): skip it


def _scan_value(var: str, value: Any, queues: dict[int, tuple[str, Any]] | None,
                models: dict[int, tuple[str, Any]], module_cls: type | None, counts: dict[int, int]) -> None:
    _consider(var, value, queues, models, module_cls, counts)
    if var.startswith("__"):
        return
    prefix = "" if var == "self" else f"{var}."
    for attr, child in _attrs(value):
        _consider(f"{prefix}{attr}", child, queues, models, module_cls, counts)
        if issubclass(type(child), (list, tuple)):
            for i, item in enumerate(child[:MAX_CONTAINER_ITEMS]):
                for sub, grandchild in _attrs(item):
                    _consider(f"{prefix}{attr}[{i}].{sub}", grandchild, queues, models, module_cls, counts)


# Looked at through ``type()`` only, never ``isinstance``: isinstance reads ``__class__`` through the object's own
# ``__getattribute__``, which some objects hook (torch.distributed.reduce_op warned "deprecated" into the program's
# stderr on every scan). Modules are not walked: their globals are not a training loop's objects.
_SKIPPED = (int, float, str, bytes, bool, type(None), types.ModuleType)


def _attrs(value: Any) -> list[tuple[str, Any]]:
    if issubclass(type(value), _SKIPPED):
        return []
    try:
        d = object.__getattribute__(value, "__dict__")
    except Exception:
        return []
    if not isinstance(d, dict):
        return []
    try:
        return [(k, v) for k, v in list(d.items())[:MAX_ATTRS] if isinstance(k, str) and not k.startswith("__")]
    except Exception:
        return []


def _consider(name: str, value: Any, queues: dict[int, tuple[str, Any]] | None,
              models: dict[int, tuple[str, Any]], module_cls: type | None, counts: dict[int, int]) -> None:
    if name == "self":
        return  # a method's own object: named by whoever holds it
    if queues is not None and issubclass(type(value), queue.Queue):
        if id(value) in queues or len(queues) < MAX_FOUND:
            _keep_shortest(queues, name, value)
    elif module_cls is not None and issubclass(type(value), module_cls):
        if id(value) not in counts:
            counts[id(value)] = _param_count(value)
        if counts[id(value)] > 0 and (id(value) in models or len(models) < MAX_FOUND):
            _keep_shortest(models, name, value)


def _keep_shortest(found: dict[int, tuple[str, Any]], name: str, value: Any) -> None:
    known = found.get(id(value))
    if known is None or len(name) < len(known[0]):
        found[id(value)] = (name, value)


def _unique_names(items: Any) -> list[tuple[str, Any]]:
    """Short names (the last component: ``self.q_hs`` -> ``q_hs``) where unambiguous, else the whole path."""
    ordered = sorted(items, key=lambda nv: nv[0])
    shorts = [name.rsplit(".", 1)[-1] for name, _ in ordered]
    out: list[tuple[str, Any]] = []
    used: set[str] = set()
    for (name, value), short in zip(ordered, shorts, strict=True):
        pick = short if shorts.count(short) == 1 else name
        unique, n = pick, 2
        while unique in used:
            unique, n = f"{pick}#{n}", n + 1
        used.add(unique)
        out.append((unique, value))
    return out


def _module_class() -> type | None:
    nn = sys.modules.get("torch.nn")
    return getattr(nn, "Module", None) if nn is not None else None


def _param_count(model: Any) -> int:
    try:
        return sum(1 for p in model.parameters() if p.requires_grad)
    except Exception:
        return 0


