"""A Python layer between the program's code and torch's ops: a torch function mode or dispatch mode (pushed by a
process- or thread-wide setting: ``torch.set_default_device``, ``with torch.device(...)``, a flop counter, a
debugging or tracing mode) or a tensor subclass with ``__torch_function__`` / ``__torch_dispatch__`` runs Python
for every torch call and tensor method of the thread it is on. Its stacks say so, wherever the program calls torch:
the handler's frame sits between the program's line and the op.

The cost is the share of a thread's samples whose innermost Python frame is the handler or torch's override
machinery: Python spent deciding how to run each op, or the op the handler forwards to (a few small ops a call
are mostly the first). A thread whose speed is the program's only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from dflash_diag.analysis.findings._context import Context, most_common_own_line, pct, rows_that_matter
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.model import Finding, Frame, Severity, ThreadSample, ThreadState
from dflash_diag.model.evidence import is_library_file

RULES = (RuleSpec("op-interposition", sampled=True),)

# A thread that matters has this share of its samples inside a handler (info), and this share with the handler
# or torch's override machinery the innermost Python frame (a warning: its time is the program's).
INFO_SHARE = 0.10
WARNING_SHARE = 0.15
MIN_ROWS = 8  # samples of the thread, at least

_HANDLERS = ("__torch_function__", "__torch_dispatch__")
# torch's own machinery around a handler: looking one up and calling it.
_MACHINERY = ("torch/overrides.py", "torch/utils/_python_dispatch.py", "torch/_tensor.py")
# torch's own modes, by the file their handler is in, and what pushes each onto a thread.
_PUSHED_BY = {
    "torch/utils/_device.py": "torch.set_default_device(...) or a `with torch.device(...):` block (a "
                              "DeviceContext mode on the thread)",
    "torch/utils/flop_counter.py": "a FlopCounterMode entered",
    "torch/_subclasses/fake_tensor.py": "a FakeTensorMode entered",
    "torch/utils/_mode_utils.py": "a mode entered",
    "torch/_subclasses/functional_tensor.py": "a functionalization mode",
    "torch/utils/checkpoint.py": "activation checkpointing's selective-checkpoint mode",
    "torch/distributed/tensor/": "DTensor (every op on a DTensor is dispatched in Python)",
    "torch/testing/": "a test helper's mode",
}


def check(ctx: Context) -> Iterator[Finding]:
    best: tuple[float, str, list[ThreadSample], int, str] | None = None
    # torch.compile traces through its own modes (fake tensors, proxies): that is compiling, weighed elsewhere.
    for stats, rows in rows_that_matter(ctx, MIN_ROWS, skip=frozenset({ThreadState.COMPILE})):
        inside = [t for t in rows if _handler(t) is not None]
        share = len(inside) / len(rows)
        if share >= INFO_SHARE and (best is None or share > best[0]):
            best = (share, stats.name, inside, len(rows), stats.stage.value)
    if best is None:
        return
    share, name, inside, n_rows, stage = best
    handlers = Counter(_handler(t) for t in inside)
    handler = handlers.most_common(1)[0][0]
    if handler is None:
        return
    at_handler = sum(1 for t in inside if _innermost_in_handler(t)) / n_rows
    what = _what(handler)
    site = most_common_own_line(ctx, inside)
    claim = (f"{name} runs every torch call through {handler.name} ({_where(handler)}), {what}: {pct(share)} of its "
             f"samples are inside it, {pct(at_handler)} with it or torch's override machinery the innermost Python "
             f"frame (Python deciding how to run each op)" + (f"; most often under {site}" if site else ""))
    warning = at_handler >= WARNING_SHARE
    yield Finding(
        rule_id="op-interposition", severity=Severity.WARNING if warning else Severity.INFO, claim=claim,
        evidence=((f"{name}'s samples inside {handler.name}", f"{len(inside)} of {n_rows} ({pct(share)})"),
                  ("with the handler or the override machinery innermost", pct(at_handler)),
                  ("handlers seen", ", ".join(f"{h.name} ({c})" for h, c in handlers.most_common(3) if h))),
        remedy=("Take the mode off the hot loop: set the default device back (torch.set_default_device(None)) or "
                "enter the device/mode only while building the model, create tensors with device= instead; run a "
                "counting or debugging mode for a few steps, not the whole run; keep tensor subclasses out of the "
                "inner loop (unwrap to plain tensors)."),
        impact=at_handler if warning else 0.0, stages=(stage,) if stage != "other" else ())


def _handler(thread: ThreadSample) -> Frame | None:
    """The innermost ``__torch_function__`` / ``__torch_dispatch__`` frame of the sample, if any."""
    return next((f for f in thread.frames if not f.native and f.name.rsplit(".", 1)[-1] in _HANDLERS), None)


def _innermost_in_handler(thread: ThreadSample) -> bool:
    python = [f for f in thread.frames if not f.native]
    if not python:
        return False
    inner = python[0]
    return inner.name.rsplit(".", 1)[-1] in _HANDLERS or any(m in inner.filename for m in _MACHINERY)


def _where(frame: Frame) -> str:
    path = frame.filename
    return path.split("site-packages/", 1)[-1] if "site-packages/" in path else f"{frame.short_filename}:{frame.line}"


def _what(frame: Frame) -> str:
    pushed = next((text for path, text in _PUSHED_BY.items() if path in frame.filename), None)
    if pushed is not None:
        return f"pushed by {pushed}"
    if not is_library_file(frame.filename):
        return "the program's own torch function or dispatch mode (or tensor subclass)"
    return "a library's torch function or dispatch mode (or tensor subclass)"
