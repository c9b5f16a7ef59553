"""cudagraphs: CUDA-graph (reduce-overhead) captures, skips with their exact reasons, re-records, the
capturing threads, and the installed torch's known multi-thread hazard.

- Skips: every skip goes through ``cudagraph_utils.log_cudagraph_skip_and_bump_counter``, which logs on
  the ``cudagraphs`` artifact logger (at WARNING: passed on, the user sees it as before) and bumps
  ``counters["inductor"]["cudagraph_skips"]``. Skips the counter has but no message explains (a CPU graph
  only bumps the counter) are reported as such.
- Partitions (torch 2.11+ splits a graph around CPU ops instead of skipping): messages of
  ``torch._inductor.scheduler.__cudagraphs`` and ``counters["inductor"]["cudagraph_partitions"]``.
- Captures: the ``CUDAGRAPH_RECORDING`` compile callback, which runs in the recording thread. A compile id
  recorded again counts as a re-record.
- Replays: ``CUDAGraphNode.run_graph`` (where a recorded graph is replayed) is wrapped once the program
  imported the tree runtime, counting replays per thread; ``replays`` is null before that.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

from dflash_contract.board import CudagraphsKeys, PayloadKeys, ProbeName
from probes._common import MAX_RECENT, HookGuard, JsonDict, loaded_module, thread_name, torch_if_imported
from probes._torchlog import ArtifactTap, arm_taps, register_compile_start, unregister_compile_start


@dataclass(frozen=True, kw_only=True)
class Config:
    max_threads: int = 64


def multi_thread_hazard(torch_version: str, has_capture_lock: bool | None) -> str | None:
    """The known multi-thread hazard of CUDAGraph Trees for this torch.

    Up to 2.12 ``torch._inductor.cudagraph_trees`` sets up its per-thread tree manager only on the thread that
    imported it (and the autograd threads that copy its state), so a reduce-overhead graph run from any other
    thread hits a bare ``assert``. 2.13 sets it up lazily per thread and adds ``graph_capture_lock``, whose
    presence (``has_capture_lock``) marks a build with the fix even where the version string says otherwise.
    """
    try:
        major, minor = (int(p) for p in torch_version.split("+")[0].split(".")[:2])
    except ValueError:
        return None
    if has_capture_lock or (major, minor) >= (2, 13):
        return None
    return (
        f"torch {major}.{minor}: CUDAGraph Trees raise a bare AssertionError in Python threads other than the "
        "main and autograd threads (pytorch#123177, fixed in 2.13 by #184357): run reduce-overhead graphs "
        "from the main thread or upgrade"
    )


class CudagraphsProbe:
    name = "cudagraphs"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.guard = HookGuard()
        self._skip_reasons: deque[str] = deque(maxlen=MAX_RECENT)
        self._skip_messages = 0
        self._partition_messages: deque[str] = deque(maxlen=MAX_RECENT)
        self._captures = 0
        self._rerecords = 0
        self._recorded_ids: dict[str, int] = {}
        self._capture_threads: dict[str, int] = {}
        self._callback_registered = False
        self._replays: dict[str, int] = {}
        self._replay_patch: tuple[Any, Any] | None = None
        self._taps = [
            ArtifactTap("torch._inductor.cudagraph_utils.__cudagraphs", "cudagraphs", self._on_utils_record, self.guard),
            ArtifactTap("torch._inductor.scheduler.__cudagraphs", "cudagraphs", self._on_scheduler_record, self.guard),
        ]
        self._arm()

    def _on_utils_record(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.WARNING:
            return  # debug chatter of the tree runtime
        msg = record.getMessage()
        self._skip_messages += 1
        self._skip_reasons.append(msg[:500])

    def _on_scheduler_record(self, record: logging.LogRecord) -> None:
        msg = record.getMessage().strip()
        if msg.startswith("Created") or msg.startswith("Partition"):
            self._partition_messages.append(msg[:300])

    def _on_compile_start(self, args: Any) -> None:
        try:
            if getattr(args.callback_trigger, "name", "") != "CUDAGRAPH_RECORDING":
                return
            self._captures += 1
            cid = str(args.compile_id)
            if cid in self._recorded_ids:
                self._rerecords += 1
            if len(self._recorded_ids) < 1024:
                self._recorded_ids[cid] = self._recorded_ids.get(cid, 0) + 1
            name = thread_name()
            if name in self._capture_threads or len(self._capture_threads) < self.config.max_threads:
                self._capture_threads[name] = self._capture_threads.get(name, 0) + 1
        except Exception as exc:
            self.guard.failed(exc)

    def _patch_replay(self) -> None:
        # CUDAGraphNode.run_graph is the one place a recorded graph is replayed: count calls per thread
        # (~0.5 us per replay, a few replays per training step).
        trees = loaded_module("torch._inductor.cudagraph_trees")
        node = getattr(trees, "CUDAGraphNode", None)
        original = getattr(node, "run_graph", None)
        if node is None or original is None or self._replay_patch is not None:
            return
        replays = self._replays

        def run_graph(node_self: Any) -> None:
            try:
                name = thread_name()
                replays[name] = replays.get(name, 0) + 1
            except Exception as exc:
                self.guard.failed(exc)
            return original(node_self)

        node.run_graph = run_graph
        self._replay_patch = (node, original)

    def _arm(self) -> None:
        try:
            self._patch_replay()
        except Exception as exc:
            self.guard.failed(exc)
        arm_taps(self._taps, self.guard)
        if not self._callback_registered:
            self._callback_registered = register_compile_start(self._on_compile_start, self.guard)

    def snapshot(self, now_s: float) -> JsonDict:
        self._arm()
        torch = torch_if_imported()
        version = str(getattr(torch, "__version__", "")) or None
        inductor: dict[str, int] = {}
        utils = loaded_module("torch._dynamo.utils")
        if utils is not None:
            inductor = dict(utils.counters.get("inductor", {}))
        skips = int(inductor.get("cudagraph_skips", 0))
        reasons = list(self._skip_reasons)
        unexplained = max(0, skips - self._skip_messages)
        if unexplained:
            reasons.append(
                f"{unexplained} skip(s) counted without a logged reason (inductor only bumps the counter for "
                "graphs on CPU)"
            )
        trees = loaded_module("torch._inductor.cudagraph_trees")
        has_lock = hasattr(trees, "graph_capture_lock") if trees is not None else None
        cuda_available = bool(torch is not None and torch.cuda.is_available())
        return {
            PayloadKeys.STATUS: "ok",
            CudagraphsKeys.TORCH: version,
            CudagraphsKeys.CUDA_AVAILABLE: cuda_available,
            CudagraphsKeys.CAPTURES: self._captures,
            CudagraphsKeys.REPLAYS: sum(self._replays.values()) if self._replay_patch is not None else None,
            CudagraphsKeys.REPLAYS_BY_THREAD: dict(self._replays),
            CudagraphsKeys.SKIPS: max(skips, self._skip_messages),
            CudagraphsKeys.RERECORDS: self._rerecords,
            CudagraphsKeys.SKIP_REASONS: reasons[-MAX_RECENT:],
            CudagraphsKeys.PARTITIONS: int(inductor.get("cudagraph_partitions", 0)),
            CudagraphsKeys.PARTITION_MESSAGES: list(self._partition_messages),
            CudagraphsKeys.RECORDED_NON_STATIC_INPUTS: int(inductor.get("cudagraph_recorded_non_static_inputs", 0)),
            CudagraphsKeys.CAPTURE_THREADS: sorted(self._capture_threads),
            CudagraphsKeys.CAPTURES_BY_THREAD: dict(self._capture_threads),
            CudagraphsKeys.MULTI_THREAD_HAZARD: multi_thread_hazard(version, has_lock) if version else None,
            PayloadKeys.HOOK_ERRORS: self.guard.errors,
        }

    def close(self) -> None:
        if self._replay_patch is not None:
            node, original = self._replay_patch
            node.run_graph = original
            self._replay_patch = None
        for tap in self._taps:
            tap.disarm()
        if self._callback_registered:
            unregister_compile_start(self._on_compile_start)
            self._callback_registered = False


# What the probe registry (``probes/registry.py``) reads of this module: its board name, its Config, its class.
NAME = ProbeName.CUDAGRAPHS
PROBE = CudagraphsProbe
