"""CUDA graphs per thread (reference_trainer/graphs.py) and the length buckets, on CPU.

The CPU runs the graphs' whole life cycle through ``EmulatedBackend`` (static buffers, copy in, a replay that
overwrites the *same* output tensors, copy out, ownership checks); only the capture itself needs a GPU
(test_graphs_gpu.py). What is checked here: the buckets, who may replay what, that a replay's outputs are
copied out before the next replay overwrites them, that two threads replaying at once get what one thread
gets, that a failed capture falls back to eager, and that none of it changes the training maths.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from trainer_helpers import read_jsonl

from reference_trainer.config import TrainConfig, preset_fields
from reference_trainer.data import DataConfig, SyntheticStream
from reference_trainer.graphs import (
    BucketedTarget,
    EmulatedBackend,
    GraphConfig,
    GraphOwnershipError,
    ThreadGraphs,
    bucket_for,
    bucket_lengths,
    fit_width,
    pad_positions,
)
from reference_trainer.scenarios import resolve
from reference_trainer.step import drafter_graph_blocker
from reference_trainer.target import FrozenTarget, load_target

FIXTURES = Path(__file__).with_name("fixtures")


# --------------------------------------------------------------------------------------------------------
# Buckets
# --------------------------------------------------------------------------------------------------------


def test_buckets_cover_the_range_in_a_few_aligned_lengths() -> None:
    assert bucket_lengths(2560, 3072, 4) == (2688, 2816, 2944, 3072)  # qwen presets: multiples of 64
    assert bucket_lengths(64, 128, 4) == (80, 96, 112, 128)  # tiny: multiples of 16
    assert bucket_lengths(2560, 3072, 1) == (3072,)
    assert bucket_lengths(2900, 3072, 4) == (2944, 3008, 3072)  # rounding merges buckets: fewer shapes, never more
    assert bucket_lengths(2048, 3000, 3)[-1] == 3000  # the last bucket is the padded width itself
    with pytest.raises(ValueError):
        bucket_lengths(128, 64, 2)


def test_bucket_for_picks_the_smallest_bucket_that_holds_the_batch() -> None:
    buckets = (2688, 2816, 2944, 3072)
    assert [bucket_for(n, buckets) for n in (2, 2688, 2689, 2944, 3072)] == [2688, 2688, 2816, 2944, 3072]
    with pytest.raises(ValueError, match="longer than the largest bucket"):
        bucket_for(3073, buckets)


def test_graph_config_buckets_and_validation() -> None:
    assert GraphConfig().buckets(2560, 3072) == ()  # off: the batch's own padded width, as before
    assert GraphConfig(mode="target").buckets(2560, 3072) == (3072,)  # graphs need a static shape: one bucket
    assert GraphConfig(length_buckets=4).buckets(2560, 3072) == (2688, 2816, 2944, 3072)
    with pytest.raises(ValueError, match="--cuda-graphs"):
        GraphConfig(mode="everything")
    with pytest.raises(ValueError, match="--length-buckets"):
        GraphConfig(length_buckets=-1)


def test_fit_width_and_pad_positions() -> None:
    ids = torch.arange(12).view(2, 6)
    assert fit_width(ids, 4).tolist() == [[0, 1, 2, 3], [6, 7, 8, 9]]
    assert fit_width(ids, 8).tolist() == [[0, 1, 2, 3, 4, 5, 0, 0], [6, 7, 8, 9, 10, 11, 0, 0]]
    hidden = torch.randn(2, 4, 3)
    padded = pad_positions(hidden, 6)
    assert torch.equal(padded[:, :4], hidden) and bool((padded[:, 4:] == 0).all())
    assert torch.equal(pad_positions(hidden, 3), hidden[:, :3])


# --------------------------------------------------------------------------------------------------------
# One thread's graphs: ownership, copy in / copy out
# --------------------------------------------------------------------------------------------------------


def _in_thread(name: str, fn: Any) -> Any:
    """Run ``fn`` in a new thread called ``name``; return its result or raise its exception here."""
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            box["value"] = fn()
        except BaseException as err:
            box["error"] = err

    thread = threading.Thread(target=body, name=name)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def test_a_replay_capture_or_release_from_another_thread_is_refused() -> None:
    graphs = ThreadGraphs(role="target-0 target forward", backend=EmulatedBackend())  # owned by this thread
    assert graphs.capture("k", _double, (torch.ones(3),), warmup_iters=1)
    with pytest.raises(GraphOwnershipError) as refused:
        _in_thread("drafter-7", lambda: graphs.replay("k", (torch.ones(3),), lambda out: out.clone()))
    message = str(refused.value)
    assert "'drafter-7'" in message and f"'{threading.current_thread().name}'" in message
    assert "target-0 target forward" in message and "its own" in message
    with pytest.raises(GraphOwnershipError):
        _in_thread("drafter-7", lambda: graphs.capture("k2", _double, (torch.ones(3),), warmup_iters=1))
    with pytest.raises(GraphOwnershipError):  # the owner is alive: nobody else may drop its graphs
        _in_thread("MainThread-helper", graphs.release)
    assert graphs.has("k")
    assert graphs.replay("k", (torch.full((3,), 5.0),), lambda out: out.clone()).tolist() == [10.0] * 3


def test_graphs_of_a_finished_thread_can_be_released_by_the_main_thread_only_then() -> None:
    made = _in_thread("target-3", lambda: ThreadGraphs(role="target-3 target forward", backend=EmulatedBackend()))
    assert made.owner.name == "target-3" and not made.owner.is_alive()
    made.release()  # the owner has ended: the run's supervisor cleans up
    assert made.graphs == {}


def test_outputs_are_copied_out_before_the_next_replay_overwrites_them() -> None:
    """A replay writes into the same static output tensor every time (as a CUDA graph does); the copy made by
    replay() right after it is what a consumer keeps."""
    graphs = ThreadGraphs(role="t", backend=EmulatedBackend())
    graphs.capture("k", _double, (torch.zeros(2),), warmup_iters=1)
    static = graphs.graphs["k"].outputs
    kept = graphs.replay("k", (torch.tensor([1.0, 2.0]),), lambda out: out.clone())
    raw = graphs.replay("k", (torch.tensor([3.0, 4.0]),), lambda out: out)  # no copy: the static tensor itself
    assert raw is static
    graphs.replay("k", (torch.tensor([5.0, 6.0]),), lambda out: out.clone())
    assert raw.tolist() == [10.0, 12.0]  # overwritten by the later replay: why replay() copies out
    assert kept.tolist() == [2.0, 4.0]  # the copy survives


class _FailingBackend(EmulatedBackend):
    kind = "failing"

    def capture(self, fn: Any, inputs: Any, warmup_iters: int) -> Any:
        raise RuntimeError("operation not permitted when stream is capturing\nmore detail")


def test_a_failed_capture_is_reported_once_and_that_bucket_runs_eagerly(tiny_target: FrozenTarget,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    graphs = ThreadGraphs(role="target-0 target forward", backend=_FailingBackend())
    bucketed = BucketedTarget(tiny_target, (96, 128), batch_size=2, graphs=graphs, warmup_iters=1)
    bucketed.prepare()
    err = capsys.readouterr().err
    assert err.count("capture of target-0 target forward") == 2 and "it runs eagerly" in err
    assert set(graphs.failures) == {("target", 2, 96), ("target", 2, 128)} and not graphs.graphs
    assert not graphs.capture(("target", 2, 96), tiny_target.hidden_states, (torch.zeros(2, 96, dtype=torch.long),), 1)
    assert capsys.readouterr().err == ""  # not retried, not said again
    batch = _stream().batch(0)
    torch.testing.assert_close(bucketed.forward(batch)[:, :60], tiny_target.hidden_states(batch.input_ids)[:, :60])


# --------------------------------------------------------------------------------------------------------
# The bucketed target forward: same states at every real position; two threads at once = one thread
# --------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_target() -> FrozenTarget:
    fields = preset_fields("tiny")
    torch.manual_seed(0)
    return load_target(fields["target"], fields["drafter"].target_layer_ids, torch.device("cpu"), torch.float32)


def _stream() -> SyntheticStream:
    return SyntheticStream(DataConfig(seq_len=128, min_seq_len=64, batch_size=2, vocab_size=2048, synthetic_vocab=64))


def _real_positions_match(got: torch.Tensor, want: torch.Tensor, lengths: torch.Tensor) -> None:
    assert got.shape == want.shape
    for row, length in enumerate(lengths.tolist()):
        torch.testing.assert_close(got[row, :length], want[row, :length], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("graphed", [False, True], ids=["eager", "emulated-graphs"])
def test_bucketed_target_gives_the_same_states_at_every_real_position(tiny_target: FrozenTarget,
                                                                     graphed: bool) -> None:
    buckets = bucket_lengths(64, 128, 4)
    graphs = ThreadGraphs(role="t", backend=EmulatedBackend()) if graphed else None
    bucketed = BucketedTarget(tiny_target, buckets, batch_size=2, graphs=graphs, warmup_iters=1)
    bucketed.prepare()
    assert graphs is None or len(graphs.graphs) == len(buckets)
    stream = _stream()
    seen = set()
    for index in range(8):
        batch = stream.batch(index)
        length = bucket_for(int(batch.lengths.max()), buckets)
        seen.add(length)
        got = bucketed.forward(batch)
        _real_positions_match(got, tiny_target.hidden_states(batch.input_ids), batch.lengths)
        assert bool((got[:, length:] == 0).all())  # past the bucket: zeros, never computed
    assert len(seen) >= 2  # the batches really used several buckets


def test_two_threads_replaying_at_once_get_what_one_thread_gets(tiny_target: FrozenTarget) -> None:
    """Each thread keeps every output while it goes on replaying (as q_hs holds them): the outputs must be
    copies, equal to the eager forward, and the same in both threads as in one thread alone."""
    buckets = bucket_lengths(64, 128, 4)
    stream = _stream()
    batches = [stream.batch(i) for i in range(8)]

    def produce() -> list[torch.Tensor]:
        graphs = ThreadGraphs(role=threading.current_thread().name, backend=EmulatedBackend())
        bucketed = BucketedTarget(tiny_target, buckets, batch_size=2, graphs=graphs, warmup_iters=1)
        bucketed.prepare()
        start.wait()  # both threads replay from here on, at the same time
        return [bucketed.forward(b) for b in batches]

    start = threading.Barrier(1)
    alone = _in_thread("target-0", produce)
    start = threading.Barrier(2)
    results: dict[str, list[torch.Tensor]] = {}
    threads = [threading.Thread(target=lambda n=n: results.__setitem__(n, produce()), name=n)
               for n in ("target-0", "target-1")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for got, batch in zip(alone, batches, strict=True):
        _real_positions_match(got, tiny_target.hidden_states(batch.input_ids), batch.lengths)
    for name in ("target-0", "target-1"):
        assert len(results[name]) == len(batches)
        for got, want in zip(results[name], alone, strict=True):
            assert torch.equal(got, want), name


# --------------------------------------------------------------------------------------------------------
# The training maths: the same loss curve as before any of this existed, with every new switch
# --------------------------------------------------------------------------------------------------------

SWITCHES = {
    "defaults": (),
    "length-buckets": ("--length-buckets", "4"),
    "cuda-graphs-target": ("--cuda-graphs", "target", "--length-buckets", "4"),
    "cuda-graphs-all": ("--cuda-graphs", "all", "--length-buckets", "4"),
    "ce-chunk": ("--ce-chunk-tokens", "40"),
}


# Every switch alone in the sequential loop; the threaded pipeline with none and with all of them.
CURVES = [(name, True) for name in SWITCHES] + [("defaults", False), ("cuda-graphs-all", False)]


@pytest.mark.parametrize("name, sequential", CURVES, ids=[f"{n}-{'sequential' if s else 'threaded'}" for n, s in CURVES])
def test_the_tiny_loss_curve_is_the_one_recorded_before(tiny_pipeline, tmp_path: Path, name: str,
                                                        sequential: bool) -> None:
    recorded = json.loads((FIXTURES / "tiny-loss-curve.json").read_text())
    steps = 8
    jsonl = tmp_path / "metrics.jsonl"
    run = tiny_pipeline(*SWITCHES[name], "--max-steps", str(steps), "--metrics-jsonl", str(jsonl),
                        sequential=sequential)
    assert run.run() == 0, run.errors
    rows = read_jsonl(jsonl)
    assert [r["step"] for r in rows] == list(range(1, steps + 1))
    assert [r["loss"] for r in rows] == pytest.approx(recorded["loss"][:steps], rel=1e-4)
    assert [r["accuracy"] for r in rows] == pytest.approx(recorded["accuracy"][:steps], abs=1e-6)
    summary = run.summary()
    assert summary["speed"]["cuda_graphs"] == ("off" if "graphs" not in name else name.rsplit("-", 1)[1])
    if "graphs" in name:
        roles = summary["graphs"]["sets"]
        assert roles and all(s["kind"] == "emulated" and s["captured"] and not s["failed"] for s in roles.values())
        want = {"MainThread target forward"} if sequential else {"target-0 target forward"}
        if name == "cuda-graphs-all":
            want |= {"MainThread drafter step"} if sequential else {"drafter-0 drafter step"}
        assert set(roles) == want  # each graph set is named after (and owned by) the thread that replays it


def test_drafter_graphs_with_two_replicas_and_grad_accum_take_the_eager_steps(tiny_pipeline, tmp_path: Path) -> None:
    """Gradients written by the graph are attached (one micro-batch) or accumulated by copy (several), then
    averaged across replicas: the parameters end where the eager run's do."""
    args = ("--drafter-devices", "cpu,cpu", "--grad-accum", "2", "--max-steps", "3")
    eager = tiny_pipeline(*args, "--checkpoint-dir", str(tmp_path / "eager"))
    graphed = tiny_pipeline(*args, "--cuda-graphs", "all", "--checkpoint-dir", str(tmp_path / "graphed"))
    assert eager.run() == 0 and graphed.run() == 0, graphed.errors
    assert graphed.summary()["replica_max_abs_diff"] == 0.0
    assert set(graphed.summary()["graphs"]["sets"]) == {"target-0 target forward", "drafter-0 drafter step",
                                                        "drafter-1 drafter step"}
    for got, want in zip(graphed.replicas[0].model.parameters(), eager.replicas[0].model.parameters(), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


def test_graphs_are_released_when_the_run_ends(tiny_pipeline) -> None:
    run = tiny_pipeline("--cuda-graphs", "all", "--max-steps", "2")
    assert run.run() == 0
    assert run.graph_sets and all(not g.graphs for g in run.graph_sets)
    assert all(p.grad is None for p in run.replicas[0].model.parameters())  # no gradient left in a graph's pool


# --------------------------------------------------------------------------------------------------------
# When the drafter step cannot be one graph, and the flags
# --------------------------------------------------------------------------------------------------------


def _tiny_config(**changes: Any) -> TrainConfig:
    fields = preset_fields("tiny")
    keys = ("target", "drafter", "objective", "data")
    return dataclasses.replace(TrainConfig(preset="tiny", **{k: fields[k] for k in keys}),
                               graphs=GraphConfig(mode="all"), **changes)


def test_the_drafter_step_stays_eager_where_a_graph_cannot_hold_it() -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda:0")
    plain = _tiny_config(checkpoint_layers=False)
    assert drafter_graph_blocker(plain, resolve(None), cuda) is None
    assert "RNG" in drafter_graph_blocker(_tiny_config(checkpoint_layers=True), resolve(None), cuda)
    assert drafter_graph_blocker(_tiny_config(checkpoint_layers=True), resolve(None), cpu) is None  # emulated
    chunked = dataclasses.replace(plain, objective=dataclasses.replace(plain.objective, loss="chunked"))
    assert "RNG" in drafter_graph_blocker(chunked, resolve(None), cuda)
    for name in ("drafter-bound", "host-sync"):
        assert name in drafter_graph_blocker(plain, resolve(name), cpu)
    longest = dataclasses.replace(plain, data=dataclasses.replace(plain.data, pad_to_longest=True))
    assert "width changes" in drafter_graph_blocker(longest, resolve(None), cpu)


def test_a_scenario_that_changes_the_drafter_step_keeps_it_eager_and_says_so(tiny_pipeline) -> None:
    run = tiny_pipeline("--cuda-graphs", "all", "--scenario", "drafter-bound", "--max-steps", "2")
    assert run.run() == 0
    summary = run.summary()
    assert "drafter-bound" in summary["graphs"]["drafter_step_eager_because"]
    assert set(summary["graphs"]["sets"]) == {"target-0 target forward"}


@pytest.mark.parametrize("flags, message", [
    (("--cuda-graphs", "sometimes"), "--cuda-graphs"),
    (("--length-buckets", "-2"), "--length-buckets"),
    (("--ce-chunk-tokens", "0"), "ce_chunk_tokens"),
])
def test_bad_graph_flags_are_usage_errors(tmp_path: Path, flags: tuple[str, ...], message: str) -> None:
    from trainer_helpers import tiny_args

    from reference_trainer.cli import parse_args
    from reference_trainer.errors import ExitCode, UserError

    with pytest.raises(UserError) as refused:
        parse_args(tiny_args(tmp_path, *flags))
    assert refused.value.exit_code == ExitCode.USAGE and message in str(refused.value)


def test_a_run_whose_captures_all_fail_trains_eagerly_and_says_so(tiny_pipeline, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import reference_trainer.train as train_module

    monkeypatch.setattr(train_module, "make_backend", lambda device: _FailingBackend())
    recorded = json.loads((FIXTURES / "tiny-loss-curve.json").read_text())
    jsonl = tmp_path / "metrics.jsonl"
    run = tiny_pipeline("--cuda-graphs", "all", "--length-buckets", "4", "--max-steps", "4",
                        "--metrics-jsonl", str(jsonl))
    assert run.run() == 0, run.errors
    assert [r["loss"] for r in read_jsonl(jsonl)] == pytest.approx(recorded["loss"][:4], rel=1e-4)
    sets = run.summary()["graphs"]["sets"]
    assert not sets["target-0 target forward"]["captured"] and len(sets["target-0 target forward"]["failed"]) == 4
    assert len(sets["drafter-0 drafter step"]["failed"]) == 1  # tried once, not every step
    err = capsys.readouterr().err
    assert err.count("drafter-0 drafter step") == 1 and err.count("it runs eagerly") == 5
