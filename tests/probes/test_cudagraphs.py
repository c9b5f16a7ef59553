"""cudagraphs: skip reasons through torch's own skip function, the H200 partition messages, hazards."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch._dynamo.utils as du
import torch._inductor.cudagraph_utils as cgu

from probes.cudagraphs import Config, CudagraphsProbe, multi_thread_hazard

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "h200" / "cudagraph_partition_cpu_input.json"


def test_skip_reason_from_torchs_skip_function() -> None:
    du.counters.clear()
    probe = CudagraphsProbe(Config())
    try:
        cgu.log_cudagraph_skip_and_bump_counter(cgu.format_default_skip_message("mutated inputs (1 instances)"))
        reading = probe.snapshot(0.0)
    finally:
        probe.close()
    assert reading["skips"] == 1
    assert reading["skip_reasons"] == ["skipping cudagraphs due to mutated inputs (1 instances)"]
    assert reading["captures"] == 0


def test_unexplained_counter_skips_are_reported() -> None:
    du.counters.clear()
    probe = CudagraphsProbe(Config())
    du.counters["inductor"]["cudagraph_skips"] += 2  # what a CPU graph under reduce-overhead does
    reading = probe.snapshot(0.0)
    probe.close()
    assert reading["skips"] == 2 and "without a logged reason" in reading["skip_reasons"][-1]


def test_h200_partition_messages() -> None:
    recorded = json.loads(FIXTURE.read_text())
    du.counters.clear()
    probe = CudagraphsProbe(Config())
    try:
        for entry in recorded["cudagraphs_logger_messages"]:
            logging.getLogger(entry["logger"]).debug(entry["msg"])
        for key, n in recorded["counters_inductor"].items():
            du.counters["inductor"][key] += n
        reading = probe.snapshot(0.0)
    finally:
        probe.close()
        du.counters.clear()
    assert reading["partitions"] == 2
    assert reading["partition_messages"][0] == "Created 2 graph partitions: 1 cudagraphable, 1 non-cudagraphable"
    assert any("non-cudagraphable" in m for m in reading["partition_messages"][1:])
    assert reading["recorded_non_static_inputs"] == 2


def test_capture_callback_counts_captures_threads_and_rerecords() -> None:
    from torch._dynamo.callback import CallbackTrigger, callback_handler

    probe = CudagraphsProbe(Config())
    try:
        for cid in ("0/0", "1/0", "0/0"):
            with callback_handler.install_callbacks(CallbackTrigger.CUDAGRAPH_RECORDING, cid):
                pass
        reading = probe.snapshot(0.0)
    finally:
        probe.close()
    assert reading["captures"] == 3 and reading["rerecords"] == 1
    assert reading["capture_threads"] == ["MainThread"]


def test_multi_thread_hazard_by_version() -> None:
    assert "pytorch#123177" in multi_thread_hazard("2.11.0+cu130", None)
    assert multi_thread_hazard("2.12.1", False) is not None
    assert multi_thread_hazard("2.13.0+cpu", None) is None
    assert multi_thread_hazard("2.11.0", True) is None


def test_replays_counted_per_thread_through_the_tree_runtime() -> None:
    import threading
    from types import SimpleNamespace

    import torch._inductor.cudagraph_trees as cgt

    probe = CudagraphsProbe(Config())
    replayed: list[int] = []
    # torch 2.14's run_graph first asks whether the graph launches any kernel at all
    node = SimpleNamespace(graph=SimpleNamespace(replay=lambda: replayed.append(1)),
                           wrapped_function=SimpleNamespace(kernel_free_cudagraph=False))
    try:
        assert probe.snapshot(0.0)["replays"] == 0  # armed: the tree runtime is imported
        cgt.CUDAGraphNode.run_graph(node)  # the real method, on a stand-in node (no CUDA here)
        t = threading.Thread(target=cgt.CUDAGraphNode.run_graph, args=(node,), name="drafter-0")
        t.start()
        t.join(10)
        reading = probe.snapshot(0.0)
    finally:
        probe.close()
    assert replayed == [1, 1]
    assert reading["replays"] == 2 and reading["replays_by_thread"] == {"MainThread": 1, "drafter-0": 1}
    assert cgt.CUDAGraphNode.run_graph.__module__ == "torch._inductor.cudagraph_trees"  # restored
