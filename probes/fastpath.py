"""fastpath: are the fast kernels importable and actually bound, or is the model on a slow fallback?

- flash-linear-attention (``fla``) and ``causal_conv1d``: importable (``find_spec``, no import), version,
  and whether the program imported them.
- transformers' GatedDeltaNet models (Qwen3-Next, Qwen3.5): which ``chunk_gated_delta_rule`` the loaded
  modeling module bound (transformers' hub-kernel wrapper keeps ``is_new_implementation`` in its closure).
- flex_attention: "eager" once torch warns "flex_attention called without torch.compile()", else
  "compiled" when it ran under torch.compile, "unused" when the module was never imported.
- fallback warnings: a non-printing handler on the ``transformers`` logger keeps transformers' "falling
  back to its reference PyTorch implementation" warnings, and a chained ``warnings.showwarning`` keeps
  torch's flex_attention one. Both still reach the user exactly as before.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import sys
import warnings
from collections import deque
from dataclasses import dataclass
from typing import Any

from dflash_contract.board import FastpathKeys, PayloadKeys, ProbeName
from probes._common import MAX_RECENT, HookGuard, JsonDict, loaded_module, torch_if_imported

_GDN_MODULES = (
    "transformers.models.qwen3_next.modeling_qwen3_next",
    "transformers.models.qwen3_5.modeling_qwen3_5",
    "transformers.models.qwen3_5_moe.modeling_qwen3_5_moe",
)
# kernel -> module attributes that hold transformers' wrapper (5.2x names first, older ones after)
_GDN_KERNELS = (
    ("chunk_gated_delta_rule", ("torch_chunk_gated_delta_rule", "chunk_gated_delta_rule")),
    ("fused_recurrent_gated_delta_rule", ("torch_recurrent_gated_delta_rule", "fused_recurrent_gated_delta_rule")),
    ("causal_conv1d_fn", ("causal_conv1d_fn",)),
    ("causal_conv1d_update", ("causal_conv1d_update",)),
)
_FLEX_EAGER = "flex_attention called without torch.compile()"
_FALLBACK_MARKERS = ("falling back to", "fast path is not available", "fall back to", "torch implementation")


@dataclass(frozen=True, kw_only=True)
class Config:
    pass


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


_MAX_WRAPPER_HOPS = 24  # wrappers walked before giving up: transformers nests 2-4 today


def _inner_callables(obj: Any) -> list[Any]:
    """What a wrapper may delegate to: ``__wrapped__``, the functions its closure holds, a module's ``forward``.

    transformers <= 5.24 binds a ``functools.wraps`` closure; 5.25 binds an ``nn.Module`` instance (``Func``)
    whose ``forward`` closes over that closure. Walking every shape, not one version's, keeps the reading
    working the day the wrapping changes again.
    """
    inner: list[Any] = []
    wrapped = getattr(obj, "__wrapped__", None)
    if wrapped is not None:
        inner.append(wrapped)
    func = getattr(obj, "__func__", obj)  # a bound method's function
    if getattr(func, "__code__", None) is None:  # not a Python function: a module standing in for one
        forward = getattr(type(obj), "forward", None)
        if getattr(forward, "__code__", None) is not None:
            inner.append(forward)
        return inner
    for cell in func.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if callable(value) and not isinstance(value, type):
            inner.append(value)
    return inner


def _implementation_flag(fn: Any) -> bool | None:
    """transformers' hub-kernel wrapper keeps its choice in an ``is_new_implementation`` closure cell."""
    code = getattr(fn, "__code__", None)
    cells = getattr(fn, "__closure__", None)
    if code is None or not cells:
        return None
    cell = dict(zip(code.co_freevars, cells, strict=False)).get("is_new_implementation")
    if cell is None:
        return None
    try:
        value = cell.cell_contents
    except ValueError:
        return None
    return value if isinstance(value, bool) else None


def bound_kernel(fn: Any) -> str | None:
    """"fla"/"torch_fallback" for the function a transformers modeling module bound, None when unknowable.

    transformers >= 5.2x wraps it (the choice sits in the wrapper's ``is_new_implementation`` closure; 5.25
    puts that wrapper inside an ``nn.Module``); older versions bind the fla function itself or their own
    ``torch_*`` fallback. The walk is breadth-first over every wrapper shape and bounded.
    """
    queue: deque[Any] = deque([fn])
    seen: set[int] = set()
    innermost_name: tuple[str, str] | None = None
    while queue and len(seen) < _MAX_WRAPPER_HOPS:
        obj = queue.popleft()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        module = str(getattr(obj, "__module__", "") or "")
        name = str(getattr(obj, "__name__", "") or "")
        if module.split(".")[0] in ("fla", "causal_conv1d"):
            return "fla"
        flag = _implementation_flag(getattr(obj, "__func__", obj))
        if flag is not None:
            return "fla" if flag else "torch_fallback"
        if module.startswith("transformers.") and name.startswith("torch_"):
            innermost_name = (module, name)
        queue.extend(_inner_callables(obj))
    return "torch_fallback" if innermost_name is not None else None


class _WarningHandler(logging.Handler):
    def __init__(self, sink: deque[str]) -> None:
        super().__init__(level=logging.WARNING)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
            if any(m in msg for m in _FALLBACK_MARKERS):
                self.sink.append(msg.splitlines()[0][:300])
        except Exception:
            pass  # a logging handler must not raise into the program


class FastpathProbe:
    name = "fastpath"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.guard = HookGuard()
        self._warnings: deque[str] = deque(maxlen=MAX_RECENT)
        self._flex_eager = False
        self._handler = _WarningHandler(self._warnings)
        logging.getLogger("transformers").addHandler(self._handler)
        self._original_showwarning = warnings.showwarning
        warnings.showwarning = self._showwarning
        self._static = {
            FastpathKeys.FLA_IMPORTABLE: _importable("fla"),
            FastpathKeys.FLA_VERSION: _version("flash-linear-attention"),
            FastpathKeys.CAUSAL_CONV1D_IMPORTABLE: _importable("causal_conv1d"),
            FastpathKeys.CAUSAL_CONV1D_VERSION: _version("causal-conv1d"),
            FastpathKeys.TRITON_VERSION: _version("triton"),
        }

    def _showwarning(self, message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        try:
            text = str(message)
            if _FLEX_EAGER in text:
                self._flex_eager = True
                self._warnings.append(text.splitlines()[0][:300])
            elif any(m in text for m in _FALLBACK_MARKERS):
                self._warnings.append(text.splitlines()[0][:300])
        except Exception as exc:
            self.guard.failed(exc)
        self._original_showwarning(message, category, filename, lineno, file, line)

    def _gdn(self, cuda: bool) -> tuple[dict[str, str | None], bool | None, str]:
        kernels: dict[str, str | None] = {}
        for modname in _GDN_MODULES:
            mod = loaded_module(modname)
            if mod is None:
                continue
            for kernel, attrs in _GDN_KERNELS:
                fn = next((getattr(mod, a) for a in attrs if hasattr(mod, a)), None)
                if fn is not None:
                    kernels[f"{modname.rsplit('.', 1)[-1]}.{kernel}"] = bound_kernel(fn)
            flag = getattr(mod, "is_fast_path_available", None)
            if isinstance(flag, bool):
                kernels[f"{modname.rsplit('.', 1)[-1]}.is_fast_path_available"] = "fla" if flag else "torch_fallback"
        if not kernels:
            fast = None
            reason = "no transformers GatedDeltaNet model loaded"
        elif all(v is None for v in kernels.values()):
            fast = None
            reason = "this transformers version does not show which kernel it bound"
        else:
            fast = all(v == "fla" for v in kernels.values() if v is not None)
            reason = "fla kernels bound" if fast else "transformers bound the PyTorch reference implementation"
        if not kernels:
            pass  # no GatedDeltaNet model: why fla could not run it is beside the point
        elif fast is not True and not self._static[FastpathKeys.FLA_IMPORTABLE]:
            reason = "flash-linear-attention (fla) is not installed"
        elif fast is not True and not cuda:
            reason = "no CUDA: fla's Triton kernels need a GPU"
        return kernels, fast, reason

    def snapshot(self, now_s: float) -> JsonDict:
        torch = torch_if_imported()
        cuda = bool(torch is not None and torch.cuda.is_available())
        kernels, fast, reason = self._gdn(cuda)
        flex_module = loaded_module("torch.nn.attention.flex_attention")
        flex_imported = flex_module is not None
        # torch remembers that it warned (once per process), even when the warning came before the probes
        # started or was filtered out: that set is proof of an eager call.
        if "flex_attention_performance" in getattr(flex_module, "_WARNINGS_SHOWN", ()):
            self._flex_eager = True
        if self._flex_eager:
            flex = "eager"
        elif not flex_imported:
            flex = "unused"
        else:
            flex = "compiled_or_unused"  # torch warns on the first eager call; no warning yet
        return {
            PayloadKeys.STATUS: "ok",
            **self._static,
            FastpathKeys.FLA_IMPORTED: "fla" in sys.modules,
            FastpathKeys.CAUSAL_CONV1D_IMPORTED: "causal_conv1d" in sys.modules,
            FastpathKeys.CUDA_AVAILABLE: cuda,
            FastpathKeys.GDN_KERNELS: kernels,
            FastpathKeys.GDN_FAST_PATH: fast,
            FastpathKeys.GDN_REASON: reason,
            FastpathKeys.FAST_PATH_AVAILABLE: bool(cuda and self._static[FastpathKeys.FLA_IMPORTABLE]),
            FastpathKeys.FALLBACK: bool(fast is False or self._flex_eager or self._warnings),
            FastpathKeys.FLEX_ATTENTION: flex,
            FastpathKeys.FALLBACK_WARNINGS: list(self._warnings),
            PayloadKeys.HOOK_ERRORS: self.guard.errors,
        }

    def close(self) -> None:
        logging.getLogger("transformers").removeHandler(self._handler)
        if warnings.showwarning == self._showwarning:
            warnings.showwarning = self._original_showwarning


# What the probe registry (``probes/registry.py``) reads of this module: its board name, its Config, its class.
NAME = ProbeName.FASTPATH
PROBE = FastpathProbe
