"""What `dflash-diag attach` / `detach` do inside the process they joined (docs/attach.md).

Runs in the target, called by the fixed bootstrap ``probes/_attach_boot.py`` at a safe point of the
interpreter (a pending call, or Python 3.14's ``sys.remote_exec``), with the GIL held. Standard library
only (torch only through ``sys.modules``); never raises: every failure becomes an ``"error"`` in the
returned result.

- ``attach``: starts the requested probes as if the program had been started under them. When the
  program already runs a probe session (it calls ``probes.start()`` itself, e.g. with ``--probes none``),
  the missing probes are added to that session instead, so its ``step()`` and ``set_app()`` calls keep
  feeding the board. Objects the program would have registered itself (``watch_queue``/``watch_model``)
  are found by looking at the live threads' frames: ``queue.Queue`` instances and trainable
  ``torch.nn.Module`` instances held by a local variable or an attribute of one, named after it.
- ``detach``: undoes exactly what ``attach`` did (a session it started is closed, probes it added are
  removed, the import clock it installed is taken off ``sys.meta_path``) and compares the hook inventory
  with the one taken before the attach: ``hooks_left`` lists any difference.
- ``inventory``: the hook inventory alone (tests inspect a live process with it).

A lease (``doctor --attach``; ``attach --lease-pid``) ties the probes an attach started to a process outside:
the board thread detaches them, exactly as ``detach`` would, once that process is gone (``Lease`` in
probes/session.py). A detach that names a lease detaches only probes held for it; a later attach without a
lease makes leased probes a lasting install. Attach, detach and the lease's detach never overlap (one lock).

What cannot be undone, by design: modules stay imported (``probes.*``; importing them registered one
``os.register_at_fork`` handler, which does nothing without a session). No audit hook is ever added. The
session's ``atexit`` callback is unregistered on close; CPython cannot list atexit callbacks (and its
counter keeps unregistered slots), so the inventory does not show them.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import probes
from dflash_contract import proc
from dflash_contract.attach import ACTIONS, valid_lease
from probes import codedrift
from probes._common import JsonDict, thread_name
from probes.discover import discover_objects

MAX_LOGGERS = 4000  # the hook inventory looks at this many loggers at most

# What attach did, so detach can undo exactly that (None: not attached by dflash-diag attach).
_STATE: dict[str, Any] = {"attached": None}
# Attach and detach run in the main thread (a pending call), the lease's detach on the board thread.
_LOCK = threading.RLock()


def run(action: str, *, names: frozenset[str] = frozenset(), board_dir: str | None = None,
        discover: bool = True, attacher: JsonDict | None = None, lease: JsonDict | None = None,
        kernels: JsonDict | None = None, files_prefix: str | None = None) -> JsonDict:
    """Entry point of the bootstrap: one of ``ACTIONS``; a JSON-safe result with ``ok`` and ``error``.

    ``lease`` (``{"pid", "start_ticks"}``): for attach, the process the probes are held for; for detach, detach
    only probes held for it; for kernels, the command the recording is for (it stops when that one is gone).
    ``kernels`` and ``files_prefix``: the kernel recording's parameters and where its files go
    (``probes.kernels``)."""
    t0 = time.perf_counter()
    try:
        if action not in ACTIONS:  # the protocol's list (dflash_contract.attach)
            out = {"ok": False, "error": f"unknown action {action!r}"}
        elif action == "attach":
            with _LOCK:
                out = attach(names, board_dir=board_dir, discover=discover, attacher=attacher or {},
                             lease=_valid_lease(lease))
        elif action == "detach":
            with _LOCK:
                out = detach(owner=_valid_lease(lease))
        elif action == "kernels":
            from probes import kernels as kernel_recording

            out = kernel_recording.start(kernels or {}, files_prefix=files_prefix or "", lease=_valid_lease(lease))
        else:  # inventory
            out = {"ok": True, "error": None, "inventory": inventory()}
    except Exception as exc:  # never into the program: the caller writes the result file
        out = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
    out["thread"] = thread_name()
    out["cost_ms"] = 1e3 * (time.perf_counter() - t0)
    return out


# --- attach / detach ----------------------------------------------------------------------------------


def _valid_lease(lease: object) -> JsonDict | None:
    """``{"pid": int, "start_ticks": int}`` or None; ValueError for anything else (the bootstrap checked it too)."""
    if lease is None:
        return None
    if not valid_lease(lease) or not isinstance(lease, dict):  # the protocol's rule (dflash_contract.attach)
        raise ValueError("lease must be {pid, start_ticks}")
    return {"pid": lease["pid"], "start_ticks": lease["start_ticks"]}


def attach(names: frozenset[str], *, board_dir: str | None, discover: bool, attacher: JsonDict,
           lease: JsonDict | None = None) -> JsonDict:
    unknown = set(names) - probes.ALL_PROBES
    if unknown:
        return {"ok": False, "error": f"unknown probes: {', '.join(sorted(unknown))}"}
    if lease is not None and not proc.process_alive(lease["pid"], lease["start_ticks"]):
        return {"ok": False, "error": f"the command that asked for the probes (PID {lease['pid']}) is gone: "
                                      "nothing attached"}
    if _STATE["attached"] is not None:
        state = _STATE["attached"]
        session = probes.current()
        dropped = lease is None and state.get("lease") is not None
        if dropped:  # asked for without a lease: a lasting install now, not the leaseholder's to take out
            state["lease"] = None
            if session is not None:
                session.set_lease(None)
                session.set_attached({**(session.attached or {}), "lease": None})
                session.publish()
        return {"ok": True, "error": None, "already": True, "session": state["session"],
                "added": list(state["added"]), "enabled": sorted(session.enabled) if session else [],
                "board_path": session.board_path if session else None, "discovered": state["discovered"],
                "lease": state.get("lease"), "lease_dropped": dropped}
    before = inventory()
    hook_was_installed = codedrift.import_hook_installed()
    session = probes.current()
    if session is None:
        if "codedrift" in names:
            codedrift.install_import_hook()  # import times from now on
        config = probes.ProbesConfig(enabled=names, board_dir=board_dir)
        session = probes.start(config)
        kind, added = "new", sorted(names)
    else:
        kind, added = "existing", session.add_probes(names)
    # Recorded at once: whatever happens next, detach can undo this.
    state = {"session": kind, "added": added, "hook_was_installed": hook_was_installed, "inventory": before,
             "discovered": {"queues": [], "models": []}, "lease": lease, "recording_at_attach": _kernels_recording()}
    _STATE["attached"] = state
    if discover:
        try:
            state["discovered"] = discover_objects(session, queues="queues" in added,
                                                     models="checkpoint" in added or "health" in added)
        except Exception as exc:  # a strange object in a frame: the probes run, unnamed
            state["discovered"] = {"queues": [], "models": [], "error": f"{type(exc).__name__}: {exc}"[:300]}
    session.set_attached({"wall_s": time.time(), "probes": added, "session": kind, **attacher, "lease": lease})
    if lease is not None:
        from probes.session import Lease

        session.set_lease(Lease(lease["pid"], lease["start_ticks"], _owner_gone))
    session.publish()  # the board shows the new probes now, not at the next timer tick
    return {"ok": True, "error": None, "already": False, "session": kind, "added": added,
            "enabled": sorted(session.enabled), "board_path": session.board_path,
            "board_error": session.board_error, "discovered": state["discovered"], "lease": lease}


def _owner_gone() -> None:
    """The lease's on_lost, on the board thread: the command that attached the probes is gone, detach them.

    Skipped (asked again at the next wake-up) while an attach or detach runs in the main thread."""
    if not _LOCK.acquire(blocking=False):
        return
    try:
        state = _STATE["attached"]
        lease = state.get("lease") if state is not None else None
        if lease is None or proc.process_alive(lease["pid"], lease["start_ticks"]):
            return
        out = detach()
        # This very thread (the board's) is still alive in the inventory: it ends when this returns.
        hooks = [h for h in out.get("hooks_left") or [] if not h.startswith("threads:")]
        left = f"; {len(hooks)} hook(s) left: {'; '.join(hooks)[:300]}" if hooks else ""
        print(f"dflash-diag probes: PID {lease['pid']}, the dflash-diag command that attached them, is gone: "
              f"probes detached ({', '.join(out.get('removed') or []) or 'none'}){left}", file=sys.stderr, flush=True)
    finally:
        _LOCK.release()


def detach(owner: JsonDict | None = None) -> JsonDict:
    state = _STATE["attached"]
    if state is None:
        session = probes.current()
        why = ("its probes were started by the program itself (dflash-diag run or probes.start()), "
               "not by dflash-diag attach" if session is not None else "no probes run in it")
        return {"ok": False, "error": f"nothing to detach: {why}", "not_attached": True}
    if owner is not None and state.get("lease") != owner:
        return {"ok": False, "not_owner": True,
                "error": "the probes attached in this process are not held for this command (`dflash-diag attach` "
                         "without a lease made them a lasting install): left in place"}
    session = probes.current()
    removed: list[str] = []
    if session is not None:
        if state["session"] == "new":
            removed = sorted(session.enabled)
            probes.stop()
        else:
            session.set_lease(None)
            session.set_attached(None)  # before the publish remove_probes makes: the board says both at once
            removed = session.remove_probes(state["added"])
            session.publish()
    if not state["hook_was_installed"] and codedrift.import_hook_installed():
        codedrift.uninstall_import_hook()
    _STATE["attached"] = None
    after = inventory()
    left = hooks_left(state["inventory"], after)
    if _kernels_recording() or state.get("recording_at_attach"):
        # `record --kernels` ran at one of the two inventories: its thread, step hook and wrapper are its own and
        # leave with it (its tests check that they do), not something the probes left.
        left = [h for h in hooks_left(_without_recording(state["inventory"]), _without_recording(after))
                if not h.startswith(_RECORDING_HOOKS)]
    return {"ok": True, "error": None, "session": state["session"], "removed": removed, "hooks_left": left,
            "threads_left": after["threads"]}


# What a `record --kernels` recording (probes/kernels.py) changes while it runs, in the inventory's words.
_RECORDING_HOOKS = ("torch.autograd.profiler.", "torch.optim._global_optimizer_post_hooks")


def _kernels_recording() -> bool:
    recording = sys.modules.get("probes.kernels")
    return recording is not None and recording.recording() is not None


def _without_recording(inv: JsonDict) -> JsonDict:
    threads = inv.get("threads")
    if not isinstance(threads, list):
        return inv
    return {**inv, "threads": [t for t in threads if t != "dflash-diag-kernels"]}


# --- the hook inventory -----------------------------------------------------------------------------------


def _ref(obj: Any) -> str | None:
    """An identity-bearing description: equal only for the very same object."""
    if obj is None:
        return None
    name = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    module = getattr(obj, "__module__", None) or type(obj).__module__
    return f"{module}.{name}@{id(obj):x}"


def inventory() -> JsonDict:
    """Every place in this process where a tool like ours could leave a hook, described by identity."""
    sections: dict[str, Any] = {
        "sys.gettrace": lambda: _ref(sys.gettrace()),
        "sys.getprofile": lambda: _ref(sys.getprofile()),
        "threading.settrace": lambda: _ref(getattr(threading, "_trace_hook", None)),
        "threading.setprofile": lambda: _ref(getattr(threading, "_profile_hook", None)),
        "threading.excepthook": lambda: _ref(threading.excepthook),
        "sys.excepthook": lambda: _ref(sys.excepthook),
        "sys.unraisablehook": lambda: _ref(sys.unraisablehook),
        "sys.displayhook": lambda: _ref(sys.displayhook),
        "sys.meta_path": lambda: [_ref(f) for f in sys.meta_path],
        "sys.path_hooks": lambda: [_ref(h) for h in sys.path_hooks],
        "sys.path": lambda: list(sys.path),
        "sys.switchinterval": sys.getswitchinterval,
        "warnings.showwarning": lambda: _ref(sys.modules["warnings"].showwarning) if "warnings" in sys.modules else None,
        "signals": _signal_handlers,
        "loggers": _loggers,
        "threads": lambda: sorted(t.name for t in threading.enumerate() if t.name.startswith("dflash-diag")),
        "torch": _torch_hooks,
    }
    out: JsonDict = {}
    for key, read in sections.items():
        try:
            out[key] = read()
        except Exception as exc:  # one odd section must not cost the others (or the detach)
            out[key] = f"unreadable: {type(exc).__name__}"
    return out


def _signal_handlers() -> dict[str, str | None]:
    import signal

    out: dict[str, str | None] = {}
    for sig in signal.valid_signals():
        try:
            handler = signal.getsignal(sig)
        except (ValueError, OSError):
            continue
        if handler not in (signal.SIG_DFL, None):
            out[str(int(sig))] = _ref(handler) if callable(handler) else str(handler)
    return out


def _loggers() -> dict[str, JsonDict]:
    import logging

    out: dict[str, JsonDict] = {}
    items = [("", logging.getLogger())] + sorted(
        (name, lg) for name, lg in list(logging.Logger.manager.loggerDict.items()) if isinstance(lg, logging.Logger)
    )
    for name, lg in items[:MAX_LOGGERS]:
        if not (lg.handlers or lg.filters or lg.level != logging.NOTSET or not lg.propagate or lg.disabled):
            continue
        out[name or "<root>"] = {
            "level": lg.level,
            "handlers": [_ref(h) for h in lg.handlers],
            "filters": [_ref(f) for f in lg.filters],
            "propagate": lg.propagate,
            "disabled": lg.disabled,
        }
    return out


def _torch_hooks() -> JsonDict:
    """torch's global hook points (each read only if the program imported that module)."""
    mods = sys.modules
    out: JsonDict = {}
    tuc = mods.get("torch.utils.checkpoint")
    if tuc is not None:
        cls = getattr(tuc, "CheckpointFunction", None)
        out["checkpoint.CheckpointFunction.apply(own)"] = _ref(vars(cls).get("apply")) if cls is not None else None
        out["checkpoint._checkpoint_without_reentrant_generator"] = _ref(
            getattr(tuc, "_checkpoint_without_reentrant_generator", None))
    torch = mods.get("torch")
    tensor = getattr(torch, "Tensor", None)
    if tensor is not None:
        out["torch.Tensor.backward"] = _ref(vars(tensor).get("backward"))  # the health probe wraps it
    optim = mods.get("torch.optim.optimizer")
    if optim is not None:
        for attr in ("_global_optimizer_pre_hooks", "_global_optimizer_post_hooks"):
            hooks: Any = getattr(optim, attr, None)
            out[f"optim.{attr}"] = [_ref(h) for h in list(hooks.values())] if hasattr(hooks, "values") else None
    module = mods.get("torch.nn.modules.module")
    if module is not None:
        for attr in ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                     "_global_backward_pre_hooks", "_global_module_registration_hooks"):
            module_hooks: Any = getattr(module, attr, None)
            out[f"nn.{attr}"] = len(module_hooks) if hasattr(module_hooks, "__len__") else None
    callback = mods.get("torch._dynamo.callback")
    handler = getattr(callback, "callback_handler", None)
    if handler is not None:
        for attr in ("start_callbacks", "end_callbacks"):
            cbs = getattr(handler, attr, None)
            out[f"dynamo.callback_handler.{attr}"] = [_ref(c) for c in list(cbs)] if cbs is not None else None
    internal = mods.get("torch._logging._internal")
    state = getattr(internal, "log_state", None)
    if state is not None:
        out["logging.log_state.artifacts"] = sorted(str(a) for a in getattr(state, "artifact_names", ()))
        out["logging.log_state.clear(instance)"] = _ref(vars(state).get("clear")) if hasattr(state, "__dict__") else None
    trees = mods.get("torch._inductor.cudagraph_trees")
    node = getattr(trees, "CUDAGraphNode", None)
    if node is not None:
        out["cudagraph_trees.CUDAGraphNode.run_graph"] = _ref(getattr(node, "run_graph", None))
    profiler = mods.get("torch.autograd.profiler")
    if profiler is not None:  # `record --kernels` wraps it while it records; a running profiler sets the flag
        out["autograd.profiler._prepare_profiler"] = _ref(getattr(profiler, "_prepare_profiler", None))
        out["autograd.profiler._is_profiler_enabled"] = bool(getattr(profiler, "_is_profiler_enabled", False))
    dist = mods.get("torch.distributed")
    if dist is not None:  # the collectives probe wraps these
        for op in ("all_reduce", "barrier", "broadcast", "all_gather"):
            out[f"distributed.{op}"] = _ref(getattr(dist, op, None))
    cuda = mods.get("torch.cuda")
    if cuda is not None:
        out["cuda.empty_cache"] = _ref(getattr(cuda, "empty_cache", None))
    queues = mods.get("probes.queues")
    if queues is not None:
        out["queues.watched_now"] = sorted(
            name for name, st in list(_watched_queues(queues).items()) if type(st.queue).__module__ == queues.__name__
        )
    return out


def _watched_queues(queues_module: Any) -> dict[str, Any]:
    session = probes.current()
    probe = getattr(session, "_queues", None) if session is not None else None
    return dict(getattr(probe, "_queues", {})) if probe is not None else {}


def hooks_left(before: JsonDict, after: JsonDict) -> list[str]:
    """Entries of the inventory that differ (``key: before -> after``); empty when nothing was left behind."""
    out: list[str] = []
    for key in sorted(set(before) | set(after)):
        b, a = before.get(key), after.get(key)
        if isinstance(b, dict) and isinstance(a, dict) and key in ("torch", "loggers", "signals"):
            for sub in sorted(set(b) | set(a)):
                if b.get(sub) != a.get(sub):
                    out.append(f"{key}.{sub}: {b.get(sub)!r} -> {a.get(sub)!r}"[:400])
        elif b != a:
            out.append(f"{key}: {b!r} -> {a!r}"[:400])
    return out
