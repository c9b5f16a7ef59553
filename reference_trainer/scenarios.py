"""``--scenario NAME``: reproduce one failure of the seed incident on purpose (docs/trainer.md).

Each scenario is a small, declarative change to the run: config overrides (``apply_to_config``), frozen
settings the per-batch code reads (``resolve``), and what runs beside the trainer (``Background``). All of them run on CPU with the tiny preset; where the real condition needs CUDA, the closest
CPU-observable version is used and the description says so.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import random
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from reference_trainer.graphs import CAPTURE_LOCK
from reference_trainer.threads import name_this_thread

if TYPE_CHECKING:
    from reference_trainer.config import TrainConfig

HOTFIX_MODULE = "reference_trainer_hotfix"


@dataclass(frozen=True)
class Scenario:
    """A scenario resolved once at start-up into frozen settings the trainer reads (``resolve``)."""

    name: str | None
    description: str = ""
    keyword_checkpoint_calls: bool = False
    force_gdn_fallback: bool = False
    eager_flex: bool = False
    target_repeat: int = 1
    drafter_repeat: int = 1
    sync_per_chunk: bool = False
    concurrent_first_compile: bool = False
    alloc_churn: bool = False
    gil_hog: bool = False
    stale_code: bool = False


def churn_allocator(device: torch.device) -> None:
    """The alloc-churn scenario, after each backward: varied sizes defeat the caching allocator's block reuse;
    on CUDA empty_cache() also hands every cached block back to the driver, so the next step pays cudaMalloc
    (and a device sync) again."""
    for _ in range(4):
        size = random.randint(1 << 16, 1 << 22)
        buf = torch.empty(size, dtype=torch.float32, device=device)
        buf.fill_(1.0)
        del buf
    if device.type == "cuda":
        # Never while another thread captures a CUDA graph: the allocator asserts that no capture is underway
        # when empty_cache() syncs (--cuda-graphs with several target threads).
        with CAPTURE_LOCK:
            torch.cuda.empty_cache()


class Background:
    """What a scenario runs beside the trainer (a GIL-hogging thread, a module edited on disk after import).

    ``start()`` once before the worker threads, ``stop()`` at the end; ``thread_names`` for the summary."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    @property
    def thread_names(self) -> list[str]:
        return [t.name for t in self._threads]

    def start(self) -> None:
        if self.scenario.stale_code:
            self._import_then_edit_on_disk()
        if self.scenario.gil_hog:
            thread = threading.Thread(target=self._hog, name="metrics-hog", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10.0)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def _hog(self) -> None:
        """Pure-Python work in bursts (a few ms, then 1 ms asleep): a metrics thread gone wrong. Every
        torch call of the worker threads now waits for the GIL, up to a switch interval (5 ms) each time."""
        name_this_thread("metrics-hog")
        total = 0
        while not self._stop.is_set():
            for i in range(20_000):
                total += i * i % 7
            time.sleep(0.001)

    def _import_then_edit_on_disk(self) -> None:
        """Import a module the trainer uses, then edit its source on disk: the process keeps the old code.

        A temp module (never a file of the repository), so the scenario cannot corrupt the checkout.
        """
        self._tmp = tempfile.TemporaryDirectory(prefix="reference-trainer-stale-")
        path = Path(self._tmp.name) / f"{HOTFIX_MODULE}.py"
        path.write_text("LOSS_SCALE = 1.0  # as imported\n")
        sys.path.insert(0, self._tmp.name)
        try:
            module = importlib.import_module(HOTFIX_MODULE)
        finally:
            sys.path.remove(self._tmp.name)
        assert module.LOSS_SCALE == 1.0
        time.sleep(0.05)
        path.write_text("LOSS_SCALE = 0.5  # edited on disk after import: the running process never sees it\n")
        future = time.time() + 1.0
        os.utime(path, (future, future))  # mtime clearly newer than the import, whatever the fs resolution


def _cpu_or(config: TrainConfig, cuda_value: str, cpu_value: str) -> str:
    on_cuda = any(d.startswith("cuda") for d in config.drafter_devices)
    return cuda_value if on_cuda else cpu_value


SCENARIOS: dict[str, str] = {
    "reentrant": "use_reentrant=True with keyword-only layer calls: draft layers silently get grad=None",
    "stale-code": "a module the trainer imported is edited on disk after import (the process runs old code)",
    "slow-fallback": "GatedDeltaNet forced onto its PyTorch reference and flex_attention run eagerly "
                     "(on CPU the GDN fallback is the norm; eager flex replaces the dense SDPA mask path)",
    "recompiles": "dynamic sequence lengths into torch.compile(dynamic=False): a recompile per new shape until "
                  "the recompile limit, then eager (backend aot_eager on CPU, inductor on CUDA)",
    "gil-hog": "an extra pure-Python thread 'metrics-hog' competes for the GIL",
    "drafter-bound": "the drafter does 4x its work (same gradient): q_hs fills, targets block in put",
    "target-bound": "the target runs its forward 4x: drafters starve in get",
    "host-sync": "a .item() after every loss chunk: the drafter thread waits on the device each chunk",
    "alloc-churn": "varied allocations every step, plus torch.cuda.empty_cache() on CUDA "
                   "(on CPU: allocator churn only)",
    "multi-thread-compile": "torch.compile'd drafter first called from two drafter threads at once "
                            "(aot_eager on CPU, inductor on CUDA)",
}


def resolve(name: str | None) -> Scenario:
    if name is None:
        return Scenario(name=None)
    base = Scenario(name=name, description=SCENARIOS[name])
    overrides: dict[str, Any] = {
        "reentrant": {"keyword_checkpoint_calls": True},
        "stale-code": {"stale_code": True},
        "slow-fallback": {"force_gdn_fallback": True, "eager_flex": True},
        "gil-hog": {"gil_hog": True},
        "drafter-bound": {"drafter_repeat": 4},
        "target-bound": {"target_repeat": 4},
        "host-sync": {"sync_per_chunk": True},
        "alloc-churn": {"alloc_churn": True},
        "multi-thread-compile": {"concurrent_first_compile": True},
    }.get(name, {})
    return dataclasses.replace(base, **overrides)


def apply_to_config(config: TrainConfig) -> TrainConfig:
    """Config-level changes a scenario needs (the rest are hooks)."""
    name = config.scenario
    if name == "reentrant":  # the failure lives in the draft layers' activation checkpointing: switch it on
        return dataclasses.replace(config, checkpoint_layers=True,
                                   objective=dataclasses.replace(config.objective, use_reentrant=True))
    if name == "recompiles":
        return dataclasses.replace(config, compile=True, data=dataclasses.replace(config.data, pad_to_longest=True),
                                   compile_backend=_cpu_or(config, "inductor", "aot_eager"))
    if name == "multi-thread-compile":
        devices = config.drafter_devices if len(config.drafter_devices) > 1 else config.drafter_devices * 2
        return dataclasses.replace(config, compile=True, drafter_devices=devices,
                                   compile_backend=_cpu_or(config, "inductor", "aot_eager"))
    return config
