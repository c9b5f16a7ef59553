"""The threaded DFlash trainer: target threads -> q_hs -> drafter threads.

Read top to bottom:

1. ``build(config) -> Built`` (build.py): everything that lives as long as the models: the frozen target
   (one per distinct target device), the drafter replicas (one per drafter thread, identical at init), the
   data, the kernel report, the scenario's frozen settings, and the checkpoint to resume from.
2. ``Run(built)``: one run's state, all of it set in the constructor: the queue ``q_hs``, the ledger, the
   barrier, the counters, the probe session, the metrics sink.
3. ``Run._target_loop``: one thread per ``--target-devices`` entry (``target-0``, ...): claim a batch index,
   run the target forward, put the hidden states on ``q_hs``.
4. ``Run._drafter_loop``: one thread per ``--drafter-devices`` entry (``drafter-0``, ...). Several drafter
   threads train ONE drafter: each replica does forward+backward on its own batch, then, between two
   barriers, drafter-0 averages the gradients of all replicas into every replica; each replica then takes
   the same clipped AdamW step, so the replicas stay bit-identical (tested).
5. ``Run.run``: the main thread only supervises: signals, errors, the end of the run, the checkpoint and
   the summary.

With ``--ddp`` (torchrun, one process per rank) each rank runs all of the above on its own batches, and at every
step drafter-0 also averages the gradients over the ranks and agrees with them on when to stop (ddp.py).

Failure rules: every thread runs inside ``_guard``; the first exception anywhere sets ``stop``, breaks the
barrier, and the main thread exits non-zero with that error within seconds (queue waits use timeouts, never
a bare blocking call). SIGTERM / SIGHUP / Ctrl-C: the current step finishes, a checkpoint is written
atomically, exit 0; ``--resume`` continues with no lost step. CUDA stream rules: replicas.py. The per-batch
math: step.py. CPU-GPU synchronisation points are marked ``SYNC:``; there are none on the per-step path
except at log intervals (loss/accuracy to the host) and the optional ``--metrics-jsonl``.

CUDA graphs (``--cuda-graphs``, graphs.py): every thread that replays a graph captured it itself, into its own
pool on its own stream, at its start (target buckets) or on its first batch (the drafter step); the main
thread only releases them once their owners have ended.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from reference_trainer import checkpoint, ddp, replicas, scenarios, step
from reference_trainer.build import Built
from reference_trainer.config import TrainConfig
from reference_trainer.errors import ExitCode
from reference_trainer.graphs import BucketedTarget, GraphOwnershipError, ThreadGraphs, make_backend
from reference_trainer.loss import LossParts
from reference_trainer.metrics import Meter, banner_lines, make_sink
from reference_trainer.replicas import HiddenBatch, Replica
from reference_trainer.target import FrozenTarget
from reference_trainer.threads import get_until_stopped, name_this_thread, put_until_stopped

FAIL_AT_ENV = "REFERENCE_TRAINER_FAIL_AT"  # test-only fault injection: "target:3" or "drafter:2"


def _fault_point(role: str, count: int) -> None:
    """Test-only: ``REFERENCE_TRAINER_FAIL_AT=target:3`` raises in the 3rd batch of a target thread."""
    spec = os.environ.get(FAIL_AT_ENV)
    if spec and spec == f"{role}:{count}":
        raise RuntimeError(f"injected failure ({FAIL_AT_ENV}={spec})")


# --------------------------------------------------------------------------------------------------------
# 2. One run
# --------------------------------------------------------------------------------------------------------

_MODEL_FIELDS = ("preset", "target", "drafter", "objective", "data", "drafter_devices", "compile", "seed", "scenario")


class Run:
    """One training run over ``built``. ``config`` may differ from ``built.config`` in run control only
    (steps, seconds, logging, target threads, queue size); ``start`` overrides where it starts."""

    def __init__(self, built: Built, *, sequential: bool = False, config: TrainConfig | None = None,
                 start: checkpoint.Resume | None = None, save_at_end: bool = True) -> None:
        import probes

        cfg = config or built.config
        for name in _MODEL_FIELDS:
            if getattr(cfg, name) != getattr(built.config, name):
                raise ValueError(f"Run config differs from the built models in {name!r}")
        if not set(cfg.target_devices) <= set(built.targets):
            raise ValueError(f"no target built for {sorted(set(cfg.target_devices) - set(built.targets))}")
        start = start if start is not None else built.resume
        self.built, self.config, self.sequential, self.save_at_end = built, cfg, sequential, save_at_end
        self.replicas = built.replicas
        self.stop = threading.Event()  # set on error or at the end
        self.graceful = threading.Event()  # a signal: stop after this step
        self.errors: list[tuple[str, BaseException, str]] = []
        self.ledger = start.ledger()
        self.step = self.start_step = start.step
        self.finish = False
        self.stop_reason = ""
        self.meter = Meter(start.step, start.loss_first)
        self.results: list[list[LossParts]] = [[] for _ in self.replicas]  # this step's micro-batches, per replica
        self.tokens: list[int] = [0] * len(self.replicas)
        self.backward_done: list[Any] = [None] * len(self.replicas)
        self.grads_averaged: list[Any] = []
        self.barrier = threading.Barrier(len(self.replicas))
        self.first_call_lock = threading.Lock()
        # Triton's Autotuner keeps per-call state on the (process-global) kernel object, so two threads that
        # launch one autotuned kernel while either benchmarks a new shape key crash ("'NoneType' object is not
        # a mapping", seen on the H200 with two target threads). fla's GatedDeltaNet kernels autotune on keys
        # that follow the sequence length, so new keys appear all run long. Target threads therefore take
        # turns *issuing* their forward; the GPU work itself still overlaps (launches are asynchronous).
        cuda_targets = [d for d in cfg.target_devices if d.startswith("cuda")]
        self.target_launch_lock: contextlib.AbstractContextManager[Any] = (
            threading.Lock() if len(cuda_targets) > 1 else contextlib.nullcontext())
        self.target_streams = [torch.cuda.Stream(torch.device(d)) if d.startswith("cuda") else None
                               for d in cfg.target_devices]
        # Every ThreadGraphs made by this run's threads (each owned by its thread), released at the end.
        self.graph_sets: list[ThreadGraphs] = []
        self.graph_sets_lock = threading.Lock()
        # Host inputs of the drafter are pinned by their producer when a drafter is on CUDA (async copies).
        self.pin_host = any(d.startswith("cuda") for d in cfg.drafter_devices)
        self.drafter_graph_note = self._drafter_graph_note()
        self.background = scenarios.Background(built.scenario)
        # --ddp: this process is one rank of a torchrun job; its drafters start from rank 0's weights.
        self.ddp = ddp.join(cfg.drafter_devices[0]) if cfg.ddp else None
        self.lead = self.ddp is None or self.ddp.lead  # prints, checkpoints and writes the summary
        if self.ddp is not None:
            ddp.broadcast_initial(self.ddp, self.replicas)
        self.previous_handlers: dict[int, Any] = {}
        # Board dir / keep-board come from the environment (`dflash-diag run` sets them); the probe list from
        # --probes. If `dflash-diag run` already started a session, start() returns that one.
        # With wandb on, the probes' readings go into the run too (dflash/* beside loss and tok/s; an alert on a
        # critical finding), as `dflash-diag run --probes-to-wandb` does for any program.
        self.session = probes.start(dataclasses.replace(probes.config_from_env(), enabled=cfg.probes),
                                    wandb=True if cfg.wandb != "off" else None)
        self.q_hs: queue.Queue[HiddenBatch] = self.session.watch_queue("q_hs", queue.Queue(maxsize=cfg.queue_size))
        self.session.watch_model("drafter", self.replicas[0].model)
        self.thread_roles = self._thread_roles()
        self.app_config = {**cfg.flat(), "gdn_kernel": built.kernels.chunk_gated_delta_rule,
                           "short_conv": built.kernels.short_conv,
                           "attention": built.attention, "sequential": sequential}
        self.sink = make_sink(cfg.wandb, cfg.flat(), Path(cfg.checkpoint_dir))

    def _thread_roles(self) -> dict[str, dict[str, str]]:
        cfg = self.config
        if self.sequential:
            return {"MainThread": {"role": "sequential", "device": cfg.drafter_devices[0]}}
        roles = {f"target-{i}": {"role": "target", "device": d} for i, d in enumerate(cfg.target_devices)}
        roles.update({f"drafter-{i}": {"role": "drafter", "device": d} for i, d in enumerate(cfg.drafter_devices)})
        return roles

    # ---- CUDA graphs: made in the thread that will replay them ---------------------------------------------

    def _thread_graphs(self, role: str, device: torch.device) -> ThreadGraphs:
        """A ThreadGraphs owned by the calling thread, with its own backend (capture stream, memory pool)."""
        graphs = ThreadGraphs(role=role, backend=make_backend(device))
        with self.graph_sets_lock:
            self.graph_sets.append(graphs)
        return graphs

    def _bucketed_target(self, name: str, target: FrozenTarget) -> BucketedTarget | None:
        """This thread's target forward over length buckets (its own graphs with --cuda-graphs), or None: the
        batch at its padded width, as before."""
        cfg = self.config
        buckets = cfg.graphs.buckets(cfg.data.min_seq_len, cfg.data.seq_len)
        if not buckets:
            return None
        graphs = self._thread_graphs(f"{name} target forward", target.device) if cfg.graphs.target else None
        bucketed = BucketedTarget(target, buckets, cfg.data.batch_size, graphs, cfg.graphs.warmup_iters)
        # fla's kernels autotune during the warm-up: take the target threads' launch turn (see __init__).
        with self.target_launch_lock:
            bucketed.prepare()
        return bucketed

    def _drafter_graph_note(self) -> str | None:
        """Why --cuda-graphs all leaves the drafter step eager in this run (None: it does not)."""
        if not self.config.graphs.drafter:
            return None
        return step.drafter_graph_blocker(self.config, self.built.scenario, self.replicas[0].device)

    def _graphed_drafter(self, name: str, replica: Replica) -> step.GraphedDrafter | None:
        if not self.config.graphs.drafter or self.drafter_graph_note is not None:
            return None
        return step.GraphedDrafter(replica, self.config, self._thread_graphs(f"{name} drafter step", replica.device),
                                   loss_scale=1.0 / self.config.grad_accum)

    def _release_graphs(self) -> None:
        """After the threads ended: drop every graph (its pool goes with it). A thread that did not end in time
        keeps its graphs: only the owner may release them while it lives."""
        for graphs in self.graph_sets:
            with contextlib.suppress(GraphOwnershipError):
                graphs.release()

    # ---- thread plumbing -------------------------------------------------------------------------------

    def _guard(self, name: str, body: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            name_this_thread(name)
            try:
                body()
            except threading.BrokenBarrierError:
                if not self.errors and not self.stop.is_set():
                    self._fail(name, RuntimeError("drafter barrier broken"))
            except BaseException as err:  # any failure stops the whole run
                self._fail(name, err)

        return run

    def _fail(self, name: str, err: BaseException) -> None:
        self.errors.append((name, err, traceback.format_exc()))
        self.stop.set()
        with contextlib.suppress(Exception):
            self.barrier.abort()  # wake drafter threads waiting for a replica that will never come

    # ---- 3. target threads -----------------------------------------------------------------------------

    def _target_loop(self, rank: int) -> None:
        target = self.built.targets[self.config.target_devices[rank]]
        produced = 0
        with replicas.use_stream(target.device, self.target_streams[rank]):
            bucketed = self._bucketed_target(f"target-{rank}", target)  # captured here: this thread replays them
            while not self.stop.is_set():
                index = self.ledger.claim()
                batch = self.built.data.batch(self._data_index(index))
                produced += 1
                _fault_point("target", produced)
                with self.target_launch_lock:
                    hidden = step.target_forward(target, batch, self.built.scenario, bucketed)
                ready = replicas.mark_ready(target.device)
                # The drafter's host inputs (anchors, pinned copies) here, off the drafter thread's critical path.
                host = step.host_draft_inputs(batch, self.config, pin=self.pin_host)
                item = HiddenBatch(batch=batch, hidden=hidden, device=target.device, ready=ready,
                                   producer=f"target-{rank}", host=host)
                if not put_until_stopped(self.q_hs, item, self.stop):
                    return
                self.meter.counters.add_target_batch()

    # ---- 4. drafter threads ----------------------------------------------------------------------------

    def _drafter_work(self, replica: Replica, item: HiddenBatch, micro: int,
                      graphed: step.GraphedDrafter | None = None) -> None:
        """Forward + backward of micro-batch ``micro`` of this step (gradients accumulate; loss / accum)."""
        accum = self.config.grad_accum
        hidden = replicas.receive_hidden(item, replica.device)
        parts = step.drafter_forward_backward(replica, hidden, item.batch, self.config, self.built.scenario,
                                              loss_scale=1.0 / accum, host=item.host, graphed=graphed)
        if micro == 0:
            self.results[replica.rank], self.tokens[replica.rank] = [], 0
        self.results[replica.rank].append(parts)
        self.tokens[replica.rank] += item.batch.num_tokens
        if micro == accum - 1:
            self.backward_done[replica.rank] = replicas.mark_backward_done(replica, len(self.replicas))

    def _drafter_loop(self, rank: int) -> None:
        replica = self.replicas[rank]
        consumed = 0
        with replicas.use_stream(replica.device, replica.stream):
            graphed = self._graphed_drafter(f"drafter-{rank}", replica)  # this thread's; captured on first use
            while True:
                for micro in range(self.config.grad_accum):
                    item = get_until_stopped(self.q_hs, self.stop)
                    if item is None:
                        return
                    consumed += 1
                    _fault_point("drafter", consumed)
                    # First call compiles flex_attention / the drafter: torch <= 2.11 compile is not thread-safe
                    # (pytorch#126024, #123177): first calls are serialised (unless the scenario says otherwise).
                    first = consumed == 1 and not self.built.scenario.concurrent_first_compile
                    with self.first_call_lock if first else contextlib.nullcontext():
                        self._drafter_work(replica, item, micro, graphed)
                    self.ledger.consumed(item.batch.index)
                    del item
                self.barrier.wait()
                if rank == 0:
                    self._combine_and_decide()
                self.barrier.wait()
                replicas.optimizer_step(replica, self.grads_averaged, self.config.grad_clip)
                if rank == 0:
                    self._after_step()
                if self.finish:
                    return

    def _sequential_loop(self) -> None:
        """The baseline: one thread, target forward then drafter step, no queue."""
        replica = self.replicas[0]
        target = self.built.targets[self.config.target_devices[0]]
        with replicas.use_stream(replica.device, replica.stream):
            # One thread, two roles: each its own ThreadGraphs (own pool), both owned by this thread.
            bucketed = self._bucketed_target("MainThread", target)
            graphed = self._graphed_drafter("MainThread", replica)
            while True:
                for micro in range(self.config.grad_accum):
                    index = self.ledger.claim()
                    batch = self.built.data.batch(self._data_index(index))
                    hidden = step.target_forward(target, batch, self.built.scenario, bucketed)
                    self.meter.counters.add_target_batch()
                    host = step.host_draft_inputs(batch, self.config, pin=self.pin_host)
                    self._drafter_work(replica, HiddenBatch(batch=batch, hidden=hidden, device=target.device,
                                                            ready=None, producer="MainThread", host=host),
                                       micro, graphed)
                    self.ledger.consumed(index)
                self._combine_and_decide()
                replicas.optimizer_step(replica, self.grads_averaged, self.config.grad_clip)
                self._after_step()
                if self.finish:
                    return

    def _data_index(self, index: int) -> int:
        """The data stream's index of this run's ``index``-th batch (under --ddp every rank reads its own)."""
        return self.ddp.batch_index(index) if self.ddp is not None else index

    def _combine_and_decide(self) -> None:
        """Drafter-0, between the two barriers: average gradients over replicas (and ranks), decide whether to
        stop (every rank after the same step)."""
        if len(self.replicas) > 1:
            self.grads_averaged = replicas.average_gradients(self.replicas, self.backward_done)
        if self.ddp is not None:
            self.grads_averaged = ddp.sync_gradients(self.ddp, self.replicas)
        self.step += 1
        cfg = self.config
        if self.graceful.is_set():
            self.stop_reason = "signal"
        elif cfg.max_steps is not None and self.step >= cfg.max_steps:
            self.stop_reason = "max_steps"
        elif cfg.max_seconds is not None and time.monotonic() - self.meter.start_time >= cfg.max_seconds:
            self.stop_reason = "max_seconds"
        self.finish = bool(self.stop_reason)
        if self.ddp is not None and ddp.agree_to_stop(self.ddp, self.finish) and not self.finish:
            self.stop_reason, self.finish = "peer", True  # another rank reached its end: stop with it

    def _after_step(self) -> None:
        cfg, meter = self.config, self.meter
        parts = [p for micro_batches in self.results for p in micro_batches]
        step_ms = meter.record_step(parts, sum(self.tokens), self.q_hs.qsize())
        if cfg.metrics_jsonl:
            loss, accuracy = meter.step_values(parts)  # SYNC: every step, only with --metrics-jsonl
            with open(cfg.metrics_jsonl, "a") as handle:
                handle.write(json.dumps({"step": self.step, "loss": loss, "accuracy": accuracy,
                                         "batch_cursor": self.ledger.state()["cursor"]}) + "\n")
        if self.lead and (self.step % cfg.log_interval == 0 or self.step == self.start_step + 1 or self.finish):
            meter.close_window()  # SYNC: once per log line
            self._log_line(step_ms)
        if self.finish:
            # The last step's log line synced the device: the run's work is complete at this instant
            # (joining threads and writing the checkpoint are not part of the throughput).
            meter.end_time = time.monotonic()
        self.session.step(self.step)
        if self.lead and cfg.save_every and self.step % cfg.save_every == 0 and not self.finish:
            try:
                self.save_checkpoint()
            except OSError as err:  # a full disk must not end hours of training: the next save retries
                print(f"reference_trainer: warning: {checkpoint.write_failure('checkpoint', checkpoint.checkpoint_path(cfg), err)}"
                      "; training goes on", file=sys.stderr, flush=True)

    def _log_line(self, step_ms: float) -> None:
        rates = self.meter.window_rates()
        depth = self.q_hs.qsize()
        print(self.meter.log_line(self.step, rates, depth, self.config.queue_size, step_ms), flush=True)
        self.sink.log({**rates, "loss": self.meter.loss_last, "accuracy": self.meter.acc_last, "step_ms": step_ms,
                       "q_hs_depth": depth, "lr": self.replicas[0].scheduler.get_last_lr()[0]}, self.step)
        self._publish_app(step_ms=step_ms, **rates)

    def _publish_app(self, **metrics: Any) -> None:
        self.session.set_app(name="reference_trainer", step=self.step, loss=self.meter.loss_last,
                             accuracy=self.meter.acc_last, config=self.app_config, threads=self.thread_roles,
                             scenario=self.config.scenario, **metrics)

    def save_checkpoint(self) -> Path:
        return checkpoint.save(checkpoint.checkpoint_path(self.config), self.config, self.replicas[0], self.step,
                               self.ledger, self.meter.loss_first)

    # ---- 5. the supervisor -----------------------------------------------------------------------------

    def _install_signals(self) -> None:
        def handle(signum: int, frame: Any) -> None:
            if self.graceful.is_set():  # second signal: stop now, without the step
                self._fail("MainThread", KeyboardInterrupt(f"second {signal.Signals(signum).name}"))
                return
            print(f"{signal.Signals(signum).name}: finishing the current step, then checkpoint and exit",
                  file=sys.stderr, flush=True)
            self.graceful.set()

        # SIGHUP too: an ssh session that drops takes the trainer with it, and that must not lose the run.
        self.previous_handlers = {sig: signal.signal(sig, handle)
                                  for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}

    def banner(self) -> None:
        for line in banner_lines(self.built, self.config, self.sequential):
            print(line, flush=True)

    def run(self) -> int:
        for stale in checkpoint.remove_stale_temp_files(Path(self.config.checkpoint_dir)) if self.lead else ():
            print(f"reference_trainer: removed {stale}, a partial checkpoint of a writer that is gone", flush=True)
        if self.lead:
            self.banner()
        self._install_signals()
        self.meter.start_clock()
        self._publish_app(step_ms=None, tokens_per_s=None, target_batches_per_s=None, drafter_batches_per_s=None)
        self.background.start()
        threads: list[threading.Thread] = []
        if self.sequential:
            self._guard("MainThread", self._sequential_loop)()
        else:
            threads = [threading.Thread(target=self._guard(f"target-{i}", lambda i=i: self._target_loop(i)),
                                        name=f"target-{i}", daemon=True) for i in range(len(self.config.target_devices))]
            drafters = [threading.Thread(target=self._guard(f"drafter-{i}", lambda i=i: self._drafter_loop(i)),
                                         name=f"drafter-{i}", daemon=True) for i in range(len(self.replicas))]
            threads += drafters
            for thread in threads:
                thread.start()
            while any(t.is_alive() for t in drafters) and not self.errors:
                for t in drafters:
                    t.join(timeout=0.2)
        self.stop.set()
        for thread in threads:
            thread.join(timeout=10.0)
        self._release_graphs()
        self.background.stop()
        for sig, previous in self.previous_handlers.items():  # in-process callers (tests, bench) get theirs back
            signal.signal(sig, previous)
        return self._finish()

    def _finish(self) -> int:
        cfg = self.config
        if self.errors:
            name, err, trace = self.errors[0]
            self.session.close()
            self.sink.finish()
            if isinstance(err, KeyboardInterrupt):
                print(f"reference_trainer: interrupted ({err}); no checkpoint written", file=sys.stderr)
                return ExitCode.INTERRUPTED
            sys.stderr.write(trace)
            print(f"reference_trainer: thread {name} failed: {type(err).__name__}: {err}; run stopped",
                  file=sys.stderr, flush=True)
            return ExitCode.THREAD_FAILED
        drift = ddp.rank_max_abs_diff(self.ddp, self.replicas) if self.ddp is not None else None  # every rank
        if not self.lead:
            self.sink.finish()
            self.session.close()
            ddp.leave(self.ddp)  # type: ignore[arg-type]
            return ExitCode.OK
        target = checkpoint.checkpoint_path(cfg)
        try:
            path = self.save_checkpoint() if self.save_at_end else None
            summary = self.summary()
            if self.ddp is not None:
                summary["ddp"] = {"world_size": self.ddp.world_size, "backend": self.ddp.backend,
                                  "rank_max_abs_diff": drift}
            summary["checkpoint"] = str(path) if path else None
            if cfg.summary_json:
                target = Path(cfg.summary_json)
                checkpoint.atomic_write_bytes(target, lambda h: h.write(json.dumps(summary, indent=2).encode()))
        except OSError as err:
            what = "summary" if target != checkpoint.checkpoint_path(cfg) else "checkpoint"
            print(f"reference_trainer: error: {checkpoint.write_failure(what, target, err)}", file=sys.stderr, flush=True)
            self.sink.finish()
            self.session.close()
            return ExitCode.WRITE_FAILED
        print(f"done: {self.stop_reason}, step {self.step}, {summary['tokens_per_s']:,.0f} tok/s, "
              f"loss {summary['loss_first']} -> {summary['loss_last']}, checkpoint {path}", flush=True)
        self.sink.finish()
        self.session.close()
        if self.ddp is not None:
            ddp.leave(self.ddp)
        return ExitCode.OK

    def summary(self) -> dict[str, Any]:
        m, c, built = self.meter, self.meter.counters, self.built
        end = m.end_time if m.end_time is not None else time.monotonic()
        return {
            "steps": self.step,
            "steps_this_run": self.step - self.start_step,
            "resumed_from_step": self.start_step if self.config.resume else None,
            "stop_reason": self.stop_reason,
            "elapsed_s": end - m.start_time,
            "tokens": c.tokens,
            **m.run_rates(self.step - self.start_step),
            "queue_depth_mean": c.depth_sum / max(1, c.depth_samples),
            "loss_first": m.loss_first,
            "loss_last": m.loss_last,
            "accuracy_last": m.acc_last,
            "threads": self.thread_roles,
            "extra_threads": self.background.thread_names,
            "preset": self.config.preset,
            "scenario": self.config.scenario,
            "sequential": self.sequential,
            "gdn_kernel": built.kernels.chunk_gated_delta_rule,
            "gdn_kernel_line": built.kernels.line(),
            "short_conv": built.kernels.short_conv,
            "speed": {"loss": self.config.objective.loss, "block_mask": self.config.objective.mask_build,
                      "checkpoint_layers": self.config.checkpoint_layers, "compile_layers": self.config.compile_layers,
                      "fused_adamw": self.config.fused_adamw, "cuda_graphs": self.config.graphs.mode,
                      "length_buckets": list(self.config.graphs.buckets(self.config.data.min_seq_len,
                                                                        self.config.data.seq_len)),
                      "ce_chunk_tokens": self.config.objective.ce_chunk_tokens},
            "graphs": {"drafter_step_eager_because": self.drafter_graph_note,
                       "sets": {g.role: g.describe() for g in self.graph_sets}},
            "attention": built.attention,
            "use_reentrant": self.config.objective.use_reentrant,
            "torch": torch.__version__,
            "replica_max_abs_diff": replicas.replica_max_abs_diff(self.replicas),
        }
