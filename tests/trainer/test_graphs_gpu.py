"""CUDA graphs per thread on a real GPU (skipped without CUDA): real captures, real concurrent replays.

Run on the GPU machine: ``python -m pytest -q -m gpu tests/trainer/test_graphs_gpu.py`` (about a minute:
flex_attention compiles once for the drafter test). bench/trainer_phases.py runs the same two-thread check
on the real preset (its section 0).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from trainer_helpers import read_jsonl

from reference_trainer.config import preset_fields
from reference_trainer.data import DataConfig, SyntheticStream
from reference_trainer.graphs import (
    BucketedTarget,
    CudaBackend,
    GraphOwnershipError,
    ThreadGraphs,
    bucket_lengths,
)
from reference_trainer.target import FrozenTarget, load_target

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

CUDA = torch.device("cuda:0")
BUCKETS = bucket_lengths(64, 128, 4)


@pytest.fixture(scope="module")
def cuda_target() -> FrozenTarget:
    fields = preset_fields("tiny")
    torch.manual_seed(0)
    return load_target(fields["target"], fields["drafter"].target_layer_ids, CUDA, torch.bfloat16)


def _batches(count: int) -> list[Any]:
    stream = SyntheticStream(DataConfig(seq_len=128, min_seq_len=64, batch_size=2, vocab_size=2048, synthetic_vocab=64))
    return [stream.batch(i) for i in range(count)]


def _produce(target: FrozenTarget, batches: list[Any], start: threading.Barrier, out: dict[str, Any]) -> None:
    """One target thread: its own stream, its own graphs (captured here), all outputs kept while replaying."""
    name = threading.current_thread().name
    try:
        stream = torch.cuda.Stream(CUDA)
        with torch.cuda.stream(stream):
            graphs = ThreadGraphs(role=f"{name} target forward", backend=CudaBackend(CUDA))
            bucketed = BucketedTarget(target, BUCKETS, batch_size=2, graphs=graphs, warmup_iters=2)
            bucketed.prepare()
            assert not graphs.failures, graphs.failures  # no eager fallback racing fla's autotuner in two threads
            start.wait()
            results = [bucketed.forward(b) for b in batches]
            stream.synchronize()
        out[name] = (graphs, results)
    except BaseException as err:
        out[name] = err
        start.abort()


def _threads(target: FrozenTarget, batches: list[Any], names: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    start = threading.Barrier(len(names))
    threads = [threading.Thread(target=_produce, args=(target, batches, start, out), name=n) for n in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    for name in names:
        if isinstance(out.get(name), BaseException):
            raise out[name]
    return out


def test_two_threads_replaying_their_graphs_at_once_get_what_one_thread_gets(cuda_target: FrozenTarget) -> None:
    batches = _batches(12)
    alone = _threads(cuda_target, batches, ("target-0",))["target-0"]
    both = _threads(cuda_target, batches, ("target-0", "target-1"))
    graphs_alone, reference = alone
    assert set(graphs_alone.captured) == {("target", 2, n) for n in BUCKETS} and not graphs_alone.failures
    for name in ("target-0", "target-1"):
        graphs, results = both[name]
        assert not graphs.failures and graphs.backend.kind == "cuda"
        for got, want in zip(results, reference, strict=True):
            assert torch.equal(got, want), name  # same graph, same inputs: the same numbers, bit for bit
    for got, batch in zip(reference, batches, strict=True):  # and what the eager forward gives
        eager = cuda_target.hidden_states(batch.input_ids.to(CUDA))
        for row, length in enumerate(batch.lengths.tolist()):
            torch.testing.assert_close(got[row, :length].float(), eager[row, :length].float(), rtol=2e-2, atol=2e-2)


def test_a_replay_from_the_thread_that_did_not_capture_is_refused(cuda_target: FrozenTarget) -> None:
    graphs = ThreadGraphs(role="main target forward", backend=CudaBackend(CUDA))
    bucketed = BucketedTarget(cuda_target, BUCKETS, batch_size=2, graphs=graphs, warmup_iters=1)
    bucketed.prepare()
    batch = _batches(1)[0]
    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: errors.append(_catch(lambda: bucketed.forward(batch))), name="target-9")
    thread.start()
    thread.join()
    assert isinstance(errors[0], GraphOwnershipError) and "'target-9'" in str(errors[0])
    assert bucketed.forward(batch).shape == (2, 128, cuda_target.model.config.hidden_size * 2)
    graphs.release()


def _catch(fn: Any) -> BaseException | None:
    try:
        fn()
    except BaseException as err:
        return err
    return None


@pytest.mark.parametrize("sequential", [True, False], ids=["sequential", "threaded"])
def test_the_drafter_step_graph_trains_like_the_eager_step(tiny_pipeline, tmp_path: Path, sequential: bool) -> None:
    devices = ("--target-devices", "cuda:0", "--drafter-devices", "cuda:0", "--checkpoint-layers", "false",
               "--block-mask", "anchors")  # the GPU presets' settings the drafter graph runs with
    losses = {}
    for mode in ("off", "all"):
        jsonl = tmp_path / f"{mode}.jsonl"
        run = tiny_pipeline(*devices, "--cuda-graphs", mode, "--length-buckets", "4", "--max-steps", "6",
                            "--metrics-jsonl", str(jsonl), "--checkpoint-dir", str(tmp_path / mode),
                            sequential=sequential)
        assert run.run() == 0, run.errors
        if mode == "all":
            sets = run.summary()["graphs"]["sets"]
            assert any(r.endswith("drafter step") for r in sets)
            assert all(s["kind"] == "cuda" and s["captured"] and not s["failed"] for s in sets.values()), sets
        losses[mode] = [r["loss"] for r in read_jsonl(jsonl)]
    assert losses["all"] == pytest.approx(losses["off"], rel=2e-2)
    assert losses["all"][-1] < losses["all"][0]
