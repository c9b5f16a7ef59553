"""Per-layer wall-clock timing through forward hooks, for the "where does the step go" table in the logs.

Two clocks: "sync" brackets every layer with torch.cuda.synchronize() and time.perf_counter() (exact per layer,
the way latency-profiling helpers time GPU layers); "events" records a CUDA event before and after each layer
and reads them once per report.
"""
from __future__ import annotations

import time
from collections import defaultdict

import torch
from torch import nn


class LayerTimer:
    def __init__(self, model: nn.Module, clock: str = "sync") -> None:
        self.clock = clock
        self.cuda = next(model.parameters()).is_cuda
        self.total_s: dict[str, float] = defaultdict(float)
        self._open: dict[str, object] = {}
        self._pending: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []
        for name, module in model.named_modules():
            if name and not list(module.children()):  # the leaves: convs, norms, activations, linears
                module.register_forward_pre_hook(self._enter(name))
                module.register_forward_hook(self._leave(name))

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def _enter(self, name: str):
        def hook(module, args):
            if self.clock == "events" and self.cuda:
                start = torch.cuda.Event(enable_timing=True)
                start.record()
                self._open[name] = start
            else:
                self._sync()
                self._open[name] = time.perf_counter()
        return hook

    def _leave(self, name: str):
        def hook(module, args, output):
            if self.clock == "events" and self.cuda:
                end = torch.cuda.Event(enable_timing=True)
                end.record()
                self._pending.append((name, self._open.pop(name), end))
            else:
                self._sync()
                self.total_s[name] += time.perf_counter() - self._open.pop(name)
        return hook

    def report(self, top: int = 3) -> str:
        if self._pending:
            self._pending[-1][2].synchronize()  # one wait per report
            for name, start, end in self._pending:
                self.total_s[name] += start.elapsed_time(end) / 1e3
            self._pending.clear()
        worst = sorted(self.total_s.items(), key=lambda kv: -kv[1])[:top]
        return ", ".join(f"{name} {secs * 1e3:.0f}ms" for name, secs in worst)
