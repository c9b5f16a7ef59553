"""Vocabulary projections a CUDA program runs, found in short discovery windows (part of the ``allocator`` probe).

On a GPU a full-vocabulary projection (``logits = lm_head(h)``: a [tokens x vocabulary] tensor, gigabytes at a
250K vocabulary) runs asynchronously: its thread is sampled elsewhere, and its cost is memory and kernel time. To
see it, a global module forward hook (``torch.nn.modules.module.register_module_forward_hook``) is installed for
one publish interval at a time (``window_s``, every ``every_s``), then removed: for each module call it reads the
module's weight shape (a dict lookup for the modules that have none); a module whose 2-D weight has at least
``MIN_VOCAB`` rows and whose output's last dimension is that many is a vocabulary projection, recorded with the
program's line that called it (the first frame outside torch, the probes and installed packages), the thread,
the output's shape and bytes, and whether autograd recorded it (``torch.is_grad_enabled()``). Bounded: at most
``MAX_SITES`` sites. Cost: one Python call per module forward during the window only. The hook does not change
what runs: a compiled module is not recompiled by it (it fires for the compiled module as a whole, whose inner
projections it then does not see), and torch's warning about compiled modules under global hooks is filtered for
the window (the program's output stays the same).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import warnings
from types import FrameType
from typing import Any

from dflash_contract.board import AllocatorKeys
from probes._common import HookGuard, JsonDict, thread_name

# torch warns once when a compiled module runs while a global hook is installed: the program's output must not change
# because the window is open (the compiled module's own forward is not hooked twice here: the hook only reads).
_COMPILE_HOOK_WARNING = r"Using `torch\.compile\(module\)` when there are global hooks"
MIN_VOCAB = 32_768  # rows of a projection onto a vocabulary (GPT-2: 50,257; Llama: 32,000-128,256; Qwen: 151-248K)
MAX_SITES = 16
_PROBES_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LIBRARY_MARKERS = ("/site-packages/", "/dist-packages/")


class VocabWatch:
    def __init__(self, *, window_s: float = 0.5, every_s: float = 120.0) -> None:
        self.window_s = window_s
        self.every_s = every_s
        self.guard = HookGuard()
        self._lock = threading.Lock()
        self._handle: Any = None
        self._opened_s: float | None = None
        self._next_s = 0.0
        self._torch_dir: str | None = None
        self._sites: dict[tuple[str, str], JsonDict] = {}
        self._filter: Any = None

    def tick(self, torch: Any, now_s: float | None = None) -> None:
        """From the publishing thread: open a discovery window when one is due, close it once it has lasted."""
        now = time.monotonic() if now_s is None else now_s
        if self._handle is not None:
            if self._opened_s is not None and now - self._opened_s >= self.window_s:
                self.close()
            return
        if now < self._next_s:
            return
        module = sys.modules.get("torch.nn.modules.module")
        register = getattr(module, "register_module_forward_hook", None)
        if register is None:
            return
        self._torch_dir = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
        warnings.filterwarnings("ignore", message=_COMPILE_HOOK_WARNING, category=UserWarning)
        self._filter = warnings.filters[0]
        self._handle = register(self._hook)
        self._opened_s = now
        self._next_s = now + self.every_s

    def _hook(self, module: Any, args: Any, output: Any) -> None:
        try:
            weight = module.__dict__.get("_parameters", {}).get("weight")
            if weight is None or weight.dim() != 2 or weight.shape[0] < MIN_VOCAB:
                return
            shape = getattr(output, "shape", None)
            if shape is None or not len(shape) or shape[-1] != weight.shape[0]:
                return
            import torch  # imported by the program already: the hook runs inside its forward

            site = self._caller()
            key = (site, thread_name())
            with self._lock:
                row = self._sites.get(key)
                if row is None:
                    if len(self._sites) >= MAX_SITES:
                        return
                    row = self._sites[key] = {AllocatorKeys.SITE: site, AllocatorKeys.THREAD: key[1],
                                              AllocatorKeys.CALLS: 0}
                row[AllocatorKeys.CALLS] += 1
                row[AllocatorKeys.SHAPE] = [int(d) for d in shape]
                row[AllocatorKeys.OUTPUT_BYTES] = int(output.numel()) * int(output.element_size())
                row[AllocatorKeys.GRAD] = bool(torch.is_grad_enabled())
                row[AllocatorKeys.WINDOW_S] = self.window_s
        except Exception as exc:  # never into the program's forward
            self.guard.failed(exc)

    def _caller(self, depth_limit: int = 40) -> str:
        """``file:line`` of the first frame of the program's own code above the module call."""
        frame: FrameType | None = sys._getframe(2)
        skip = (self._torch_dir or "\0", _PROBES_DIR)
        for _ in range(depth_limit):
            if frame is None:
                break
            path = frame.f_code.co_filename
            if not path.startswith(skip) and not any(m in path for m in _LIBRARY_MARKERS) and not path.startswith("<"):
                parts = path.replace(os.sep, "/").split("/")
                return f"{'/'.join(parts[-2:])}:{frame.f_lineno}"  # as the checkpoint probe names its sites
            frame = frame.f_back
        return "?"

    def rows(self) -> list[JsonDict]:
        with self._lock:
            return [dict(r) for r in self._sites.values()]

    def close(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
            self._opened_s = None
        if self._filter is not None:
            try:
                warnings.filters.remove(self._filter)
            except ValueError:
                pass  # the program reset the filters
            self._filter = None
