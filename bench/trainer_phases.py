"""Where a training step's time goes, each speed switch alone and all together; threaded vs sequential; CUDA
graphs per thread checked (two threads replaying at once == one thread).

One command on the H200 (about 5 minutes; ``--time-budget-s`` stops adding work before 8):

    python bench/trainer_phases.py --preset qwen3.5-4b --out phases/

Dry run on a CPU (no GPU figures: "N/A: no CUDA"; graphs emulated):

    python bench/trainer_phases.py --preset tiny --out /tmp/phases --steps 2 --window-steps 4

It writes ``phases.json`` and ``phases.md`` to ``--out``:

(0) **Graph check**: the preset's target forward captured per length bucket by two threads, each with its own
    graphs, pool and stream, replaying at once: their outputs against one thread's and against the eager
    forward (max abs difference), and a replay from a thread that did not capture refused.
(a) Per phase (target forward, drafter inputs, drafter forward, loss, backward, the drafter step graph,
    optimizer, host work between steps) for ``defaults`` (the preset as shipped), each switch alone
    (``CANDIDATES``) and all of them (``all``). The step runs in one thread on one stream (the sequential
    loop's work, phase by phase: step.py's functions). Phase times come from CUDA events between the phases
    (GPU time, gaps included); a short torch.profiler window gives each phase's kernel time (a kernel belongs
    to the phase it was launched in) and so the GPU's idle time in each phase (phase time minus its kernels),
    and the idle share of the profiled step (span minus the union of kernels). Also tok/s, MFU, peak memory.
(b) tok/s and MFU, threaded (target-0 + drafter-0 threads, one stream each, q_hs 2) vs sequential, for the
    ``--modes`` variants, windows alternating in one process (bench/trainer_throughput.py's windows), with
    the GPU idle share of each mode from a profiled window (the union of kernels on every stream).
(c) Optionally a second preset (``--second-preset qwen3.5-9b``) with its defaults, both modes briefly.

Every measurement is guarded: one that fails (a capture, an OOM, a compile) is recorded with its error and
the rest still run. MFU counts useful FLOPs as docs/benchmarks.md does (bench/trainer_throughput.py
``flops_per_batch``: per *padded* batch, as before), against the H200's measured bf16 ceiling. Trim:
``--variants defaults,all``, fewer ``--steps`` / ``--rounds``, ``--modes none``, ``--graph-check false``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import gc
import json
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from trainer_throughput import BF16_PEAK_FLOPS, flops_per_batch, run_window

from reference_trainer import replicas, step
from reference_trainer.build import Built, build
from reference_trainer.cli import parse_args
from reference_trainer.config import TrainConfig
from reference_trainer.graphs import BucketedTarget, GraphOwnershipError, ThreadGraphs, make_backend

PHASES = ("target_forward", "drafter_inputs", "drafter_forward", "loss", "backward", "drafter_graph", "optimizer",
          "between_steps")
# Each switch of this round alone, on top of the preset's defaults (which already have every switch of the
# previous round on: docs/benchmarks.md, "where the time goes").
CANDIDATES: dict[str, dict[str, Any]] = {
    "length-buckets": {"graphs.length_buckets": 4},  # the target forward at 4 lengths: less padding computed
    "cuda-graphs-target": {"graphs.mode": "target"},  # the target forward as one graph (one bucket: full length)
    "cuda-graphs-all": {"graphs.mode": "all"},  # and the drafter step as one graph per thread
    "ce-chunk-8192": {"objective.ce_chunk_tokens": 8192},  # the loss in one chunk at 512 anchors (7680 rows)
}
ALL = {"graphs.mode": "all", "graphs.length_buckets": 4, "objective.ce_chunk_tokens": 8192}
VARIANTS = {"defaults": {}, **CANDIDATES, "all": ALL}


def with_switches(config: TrainConfig, switches: dict[str, Any]) -> TrainConfig:
    out = config
    for key, value in switches.items():
        part, _, name = key.rpartition(".")
        if part:
            out = dataclasses.replace(out, **{part: dataclasses.replace(getattr(out, part), **{name: value})})
        else:
            out = dataclasses.replace(out, **{name: value})
    if not torch.cuda.is_available():
        out = dataclasses.replace(out, compile_backend="aot_eager")  # CPU dry run: no C++ compile
    return out


# --------------------------------------------------------------------------------------------------------
# (a) phases
# --------------------------------------------------------------------------------------------------------


class Marks:
    """Phase boundaries: CUDA events on the current stream, or wall time on a CPU."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.points: list[tuple[str | None, Any]] = []

    def __call__(self, phase: str | None) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.points.append((phase, event))
        else:
            self.points.append((phase, time.perf_counter()))

    def phase_ms(self) -> dict[str, float]:
        """ms per phase; what lies between one step's end and the next step's start is ``between_steps``."""
        if self.cuda:
            torch.cuda.synchronize()  # SYNC: once, after the measured steps
        out = dict.fromkeys(PHASES, 0.0)
        for (phase, start), (_, end) in zip(self.points, self.points[1:], strict=False):
            out[phase or "between_steps"] += start.elapsed_time(end) if self.cuda else (end - start) * 1e3
        return out


class ProfileMarks:
    """Phase boundaries as ``phase:NAME`` profiler ranges on this thread."""

    def __init__(self) -> None:
        self.open: Any = None

    def __call__(self, phase: str | None) -> None:
        if self.open is not None:
            self.open.__exit__(None, None, None)
            self.open = None
        if phase is not None:
            self.open = torch.profiler.record_function(f"phase:{phase}")
            self.open.__enter__()


@dataclasses.dataclass
class Runners:
    """The bench thread's own graphs (it captures and replays them itself), as a run's threads have theirs."""

    bucketed: BucketedTarget | None
    graphed: step.GraphedDrafter | None
    sets: list[ThreadGraphs]

    def release(self) -> None:
        for graphs in self.sets:
            graphs.release()
        if self.graphed is not None:
            self.graphed.replica.optimizer.zero_grad(set_to_none=True)  # no gradient left in a graph's pool

    def describe(self) -> dict[str, Any]:
        return {g.role: g.describe() for g in self.sets}


def make_runners(built: Built) -> Runners:
    """What Run makes per thread (train.py ``_bucketed_target``, ``_graphed_drafter``), for this thread."""
    config, replica = built.config, built.replicas[0]
    target = built.targets[config.target_devices[0]]
    sets: list[ThreadGraphs] = []
    bucketed = None
    buckets = config.graphs.buckets(config.data.min_seq_len, config.data.seq_len)
    if buckets:
        graphs = ThreadGraphs(role="bench target forward", backend=make_backend(target.device)) \
            if config.graphs.target else None
        sets += [graphs] if graphs else []
        bucketed = BucketedTarget(target, buckets, config.data.batch_size, graphs, config.graphs.warmup_iters)
        bucketed.prepare()
    graphed = None
    if config.graphs.drafter and step.drafter_graph_blocker(config, built.scenario, replica.device) is None:
        graphs = ThreadGraphs(role="bench drafter step", backend=make_backend(replica.device))
        sets.append(graphs)
        graphed = step.GraphedDrafter(replica, config, graphs, loss_scale=1.0)
    return Runners(bucketed=bucketed, graphed=graphed, sets=sets)


def phased_step(built: Built, index: int, mark: Callable[[str | None], None],
                runners: Runners | None = None) -> tuple[int, torch.Tensor]:
    """The sequential loop's work for one batch, with a mark before each phase. Returns its real tokens and its
    loss (a device scalar: read after the timed steps, never inside them)."""
    config, replica = built.config, built.replicas[0]
    target = built.targets[config.target_devices[0]]
    runners = runners or Runners(None, None, [])
    batch = built.data.batch(index)
    mark("target_forward")
    hidden = step.target_forward(target, batch, built.scenario, runners.bucketed)
    mark("drafter_inputs")
    host = step.host_draft_inputs(batch, config, pin=replica.device.type == "cuda")
    parts = None
    if runners.graphed is not None:
        mark("drafter_graph")
        parts = runners.graphed.step(hidden, host)  # None: the capture failed, the eager step follows
    if parts is None:
        inputs = step.draft_inputs(replica, batch, config, host)
        mark("drafter_forward")
        out = step.draft_forward(replica, hidden, inputs)
        mark("loss")
        parts = step.draft_loss(replica, out, inputs, config.objective)
        mark("backward")
        parts.loss.backward()
    mark("optimizer")
    replicas.optimizer_step(replica, [], config.grad_clip)
    mark(None)
    return batch.num_tokens, parts.loss.detach()


def kernel_times(trace: dict[str, Any]) -> dict[str, Any]:
    """Per phase: kernel ms (by launch time inside a ``phase:`` range); the span, busy (union) and idle ms.

    Only what was launched from the first phase range on counts, and nothing before the window's last CUDA
    graph capture (``steady_kernels``): the captures and the unmarked step that follows them are set-up."""
    events = trace.get("traceEvents", [])
    ranges = sorted((e["ts"], e["ts"] + e.get("dur", 0), e["name"][6:]) for e in events
                    if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("phase:"))
    launches = {e["args"]["correlation"]: e["ts"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    first = ranges[0][0] if ranges else None

    def launched_in_window(kernel: dict[str, Any]) -> bool:
        launched = launches.get(kernel.get("args", {}).get("correlation"))
        return first is None or launched is None or launched >= first

    kernels = [k for k in steady_kernels(trace) if launched_in_window(k)]
    busy = dict.fromkeys((*PHASES, "unattributed"), 0.0)
    for kernel in kernels:
        launched = launches.get(kernel.get("args", {}).get("correlation"))
        phase = next((name for start, end, name in ranges if launched is not None and start <= launched <= end),
                     "unattributed")
        busy[phase] = busy.get(phase, 0.0) + kernel["dur"] / 1e3
    return {"kernel_ms": busy, **_span_busy(kernels)}


CAPTURE_CALLS = ("StreamEndCapture", "GraphInstantiate")


def steady_kernels(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """The GPU spans of a profiled run window, from the end of its last CUDA graph capture on: a run's threads
    capture their graphs on their first step (warm-up calls, a device sync), which is not the steady state
    the idle share describes. Without captures, every span (as before)."""
    events = trace.get("traceEvents", [])
    cut = max((e["ts"] + e.get("dur", 0) for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
               and any(call in str(e.get("name", "")) for call in CAPTURE_CALLS)), default=None)
    return [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e
            and (cut is None or e["ts"] >= cut)]


def _span_busy(kernels: list[dict[str, Any]]) -> dict[str, float]:
    """The span from the first kernel's start to the last one's end, the union of kernel time, the rest idle."""
    intervals = sorted((k["ts"], k["ts"] + k["dur"]) for k in kernels)
    if not intervals:
        return {"span_ms": 0.0, "busy_ms": 0.0, "idle_ms": 0.0}
    union, (cur_start, cur_end) = 0.0, intervals[0]
    for start, end in intervals[1:]:
        if start > cur_end:
            union += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    union += cur_end - cur_start
    span = intervals[-1][1] - intervals[0][0]
    span = max(span, max(end for _, end in intervals) - intervals[0][0])
    return {"span_ms": span / 1e3, "busy_ms": union / 1e3, "idle_ms": (span - union) / 1e3}


@contextlib.contextmanager
def profiled(out_dir: Path, name: str, cpu_ops: bool) -> Iterator[dict[str, Any]]:
    """A torch.profiler window with CUDA activity; yields a dict that holds the parsed trace afterwards."""
    result: dict[str, Any] = {}
    activities = [torch.profiler.ProfilerActivity.CUDA] + ([torch.profiler.ProfilerActivity.CPU] if cpu_ops else [])
    with torch.profiler.profile(activities=activities) as prof:
        yield result
    path = out_dir / f"trace-{name}.json"
    prof.export_chrome_trace(str(path))
    result["trace"] = json.loads(path.read_text())
    path.unlink()  # traces are large; the parsed figures go into phases.json


def measure_phases(name: str, built: Built, args: argparse.Namespace, out_dir: Path) -> dict[str, Any]:
    cuda = built.replicas[0].device.type == "cuda"
    replica = built.replicas[0]
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    build_s = time.monotonic()
    with replicas.use_stream(replica.device, replica.stream):
        runners = make_runners(built)  # target graphs captured here; the drafter's on its first step
        try:
            losses = [phased_step(built, index, lambda _: None, runners)[1] for index in range(args.warmup)]
            marks, tokens = Marks(cuda), 0
            for index in range(args.steps):
                step_tokens, loss = phased_step(built, args.warmup + index, marks, runners)
                tokens += step_tokens
                losses.append(loss)
            marks("target_forward")  # closes the last between_steps gap (the next step's start)
            phase_ms = {k: v / args.steps for k, v in marks.phase_ms().items()}
            step_ms = sum(phase_ms.values())
            row: dict[str, Any] = {"variant": name, "short_conv": built.kernels.short_conv,
                                   "gdn_kernel": built.kernels.chunk_gated_delta_rule, "phase_ms": phase_ms,
                                   "step_ms": step_ms, "tokens_per_s": tokens / args.steps / (step_ms / 1e3),
                                   "measure_s": time.monotonic() - build_s, "graphs": runners.describe(),
                                   # Every variant trains a fresh drafter (same seed) on the same batches: its
                                   # losses must be the defaults' within float reordering (markdown compares).
                                   "losses": [float(v) for v in losses]}  # after phase_ms' sync: no extra wait
            flops = flops_per_batch(built)
            row["mfu_pct"] = 100.0 * flops / (step_ms / 1e3) / BF16_PEAK_FLOPS if cuda else None
            if cuda:
                row["peak_memory_gb"] = torch.cuda.max_memory_allocated() / 2**30
                runners.release()
                next_index = args.warmup + args.steps
                with profiled(out_dir, name, cpu_ops=True) as window:
                    # Graphs captured anew inside the window: CUPTI may not report the kernels of a graph
                    # instantiated before it started recording. Their set-up (captures, one unmarked step)
                    # is left out of the figures (kernel_times).
                    runners = make_runners(built)
                    if runners.sets:  # the unmarked step that captures the drafter's graph
                        phased_step(built, next_index, lambda _: None, runners)
                        next_index += 1
                    for index in range(args.profile_steps):
                        phased_step(built, next_index + index, ProfileMarks(), runners)
                    torch.cuda.synchronize()  # SYNC: end of the profiled window
                row["graphs_profiled"] = runners.describe()  # a capture that failed under the profiler shows here
                times = kernel_times(window["trace"])
                row["kernel_ms"] = {k: v / args.profile_steps for k, v in times["kernel_ms"].items()}
                row["idle_ms"] = times["idle_ms"] / args.profile_steps
                row["gpu_idle_pct"] = 100.0 * times["idle_ms"] / max(1e-9, times["span_ms"])
                row.update(idle_by_phase(phase_ms, row["kernel_ms"]))
            else:
                row.update(peak_memory_gb=None, kernel_ms=None, idle_ms=None, gpu_idle_pct=None,
                           idle_by_phase_ms=None, gpu_idle_events_pct=None,
                           gpu_note="N/A: no CUDA (phase times are wall time on the CPU)")
        finally:
            runners.release()
    return row


def idle_by_phase(phase_ms: dict[str, float], kernel_ms: dict[str, float]) -> dict[str, Any]:
    """The GPU's idle time per phase: the phase's time on the GPU (CUDA events, unprofiled steps) minus the
    kernel time launched in it (profiled steps); and the idle share of the whole step measured that way.
    One stream runs the step, so a phase's kernels run between its two events: what is left is idle."""
    idle = {phase: max(0.0, phase_ms.get(phase, 0.0) - kernel_ms.get(phase, 0.0)) for phase in PHASES}
    step_ms = sum(phase_ms.values())
    busy = sum(kernel_ms.values())
    return {"idle_by_phase_ms": idle,
            "gpu_idle_events_pct": 100.0 * max(0.0, step_ms - busy) / step_ms if step_ms > 0 else None}


# --------------------------------------------------------------------------------------------------------
# (0) the graph check: two threads replaying at once == one thread
# --------------------------------------------------------------------------------------------------------


def graph_check(built: Built, batches: int = 6) -> dict[str, Any]:
    """Two threads, each with its own captured graphs of the target forward (every length bucket), replay the
    same batches at once; each thread keeps all its outputs while it goes on replaying (as q_hs holds them).
    Reports the largest difference to one thread alone and to the eager forward, and that a replay from a
    thread that did not capture is refused."""
    config = built.config
    target = built.targets[config.target_devices[0]]
    buckets = config.graphs.buckets(config.data.min_seq_len, config.data.seq_len) or \
        dataclasses.replace(config.graphs, length_buckets=4).buckets(config.data.min_seq_len, config.data.seq_len)
    data = [built.data.batch(10_000 + i) for i in range(batches)]
    out: dict[str, list[torch.Tensor]] = {}
    owned: dict[str, ThreadGraphs] = {}
    capture_s: dict[str, float] = {}
    errors: list[str] = []

    def produce(name: str, start: threading.Barrier) -> None:
        try:
            stream = torch.cuda.Stream(target.device) if target.device.type == "cuda" else None
            with replicas.use_stream(target.device, stream):
                graphs = ThreadGraphs(role=f"{name} target forward", backend=make_backend(target.device))
                owned[name] = graphs
                bucketed = BucketedTarget(target, buckets, config.data.batch_size, graphs, config.graphs.warmup_iters)
                began = time.monotonic()
                bucketed.prepare()
                capture_s[name] = time.monotonic() - began
                if graphs.failures:  # eager fallback from two threads would race fla's autotuner: stop here
                    raise RuntimeError(f"capture failed: {graphs.failures}")
                start.wait()
                out[name] = [bucketed.forward(b) for b in data]
                if stream is not None:
                    stream.synchronize()  # SYNC: the check reads the outputs
        except Exception as err:  # recorded: the check reports it instead of hanging
            errors.append(f"{name}: {type(err).__name__}: {err}")
            start.abort()

    def run(names: tuple[str, ...]) -> None:
        start = threading.Barrier(len(names))
        threads = [threading.Thread(target=produce, args=(n, start), name=n) for n in names]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    run(("alone",))
    run(("target-0", "target-1"))
    result: dict[str, Any] = {"buckets": list(buckets), "batches": batches, "capture_s": capture_s,
                              "errors": errors, "captured": {n: g.describe() for n, g in owned.items()}}
    if errors or len(out) < 3:
        result["ok"] = False
        return result

    def worst(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
        # SYNC: the check reads its differences (after the measurement, once per compared tensor)
        return max(float((x.float() - y.float()).abs().max()) for x, y in zip(a, b, strict=True))

    eager = []
    for batch in data:
        hidden = target.hidden_states(batch.input_ids.to(target.device))  # pageable copy: a sync, fine here
        eager.append(torch.stack([torch.cat([h[:n], torch.zeros_like(h[n:])]) for h, n in
                                  zip(hidden, [int(x) for x in batch.lengths], strict=True)]))
    real = [torch.stack([torch.cat([h[:n], torch.zeros_like(h[n:])]) for h, n in
                         zip(o, [int(x) for x in batch.lengths], strict=True)]) for o, batch in zip(out["alone"], data,
                                                                                                   strict=True)]
    result["max_abs_diff_two_threads_vs_one"] = max(worst(out["target-0"], out["alone"]),
                                                    worst(out["target-1"], out["alone"]))
    result["max_abs_diff_graph_vs_eager"] = worst(real, eager)
    try:
        owned["target-0"].replay(next(iter(owned["target-0"].graphs)), (), lambda o: o)
        result["foreign_replay"] = "NOT refused"
    except GraphOwnershipError:
        result["foreign_replay"] = "refused (GraphOwnershipError)"
    result["ok"] = (result["max_abs_diff_two_threads_vs_one"] == 0.0 and result["foreign_replay"].startswith("refused")
                    and all(not g.failures for g in owned.values()))
    for graphs in owned.values():
        graphs.release()
    return result


# --------------------------------------------------------------------------------------------------------
# (b) threaded vs sequential, (c) the second preset
# --------------------------------------------------------------------------------------------------------


def compare_modes(name: str, built: Built, args: argparse.Namespace, out_dir: Path, rounds: int,
                  steps: int) -> dict[str, Any]:
    cuda = built.replicas[0].device.type == "cuda"
    start = built.resume
    modes = ["threaded", "sequential"]
    for mode in modes:  # warm-up window per mode
        _, start = run_window(built, start, mode, max(2, steps // 2))
    windows: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for round_index in range(rounds):
        for mode in modes if round_index % 2 == 0 else modes[::-1]:
            summary, start = run_window(built, start, mode, steps)
            windows[mode].append(summary)
    flops = flops_per_batch(built)
    out: dict[str, Any] = {"variant": name, "flops_per_batch": flops}
    for mode in modes:
        tok = statistics.median(w["tokens_per_s"] for w in windows[mode])
        bps = statistics.median(w["drafter_batches_per_s"] for w in windows[mode])
        out[mode] = {"tokens_per_s": tok, "batches_per_s": bps, "windows_tokens_per_s":
                     [w["tokens_per_s"] for w in windows[mode]],
                     "mfu_pct": 100.0 * flops * bps / BF16_PEAK_FLOPS if cuda else None,
                     "gpu_idle_pct": None}
        if cuda:
            with profiled(out_dir, f"{name}-{mode}", cpu_ops=False) as window:
                _, start = run_window(built, start, mode, max(3, steps // 2))
            spans = _span_busy(steady_kernels(window["trace"]))
            out[mode]["gpu_idle_pct"] = 100.0 * spans["idle_ms"] / max(1e-9, spans["span_ms"])
    out["ratio_threaded_over_sequential"] = out["threaded"]["tokens_per_s"] / out["sequential"]["tokens_per_s"]
    out["graphs"] = {mode: windows[mode][-1].get("graphs") for mode in modes}
    return out


def base_config(preset: str, checkpoint_dir: str) -> TrainConfig:
    config, _ = parse_args(["--preset", preset, "--wandb", "off", "--probes", "none", "--queue-size", "2",
                            "--log-interval", "1000", "--checkpoint-dir", checkpoint_dir])
    return config


def free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def environment() -> dict[str, Any]:
    import importlib.metadata as md

    def version(dist: str) -> str | None:
        with contextlib.suppress(md.PackageNotFoundError):
            return md.version(dist)
        return None

    return {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "argv": sys.argv,
            "torch": torch.__version__, "transformers": version("transformers"),
            "flash_linear_attention": version("flash-linear-attention") or version("fla-core"),
            "triton": version("triton"), "python": sys.version.split()[0],
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
            "bf16_peak_flops": BF16_PEAK_FLOPS}


# --------------------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------------------


def _f(value: Any, fmt: str = ",.1f", unit: str = "") -> str:
    return "N/A" if value is None else f"{value:{fmt}}{unit}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def markdown(result: dict[str, Any]) -> str:
    env = result["environment"]
    lines = [f"# Trainer phases: preset {result['preset']}", "",
             f"{env['device']}, torch {env['torch']}, transformers {env['transformers']}, fla "
             f"{env['flash_linear_attention']}, triton {env['triton']}, {env['date']}. Command: "
             f"`python {' '.join(env['argv'])}`.", ""]
    check = result.get("graph_check")
    if check:
        lines += ["## CUDA graphs per thread: two threads replaying at once vs one thread", ""]
        if "error" in check or check.get("errors"):
            lines.append(f"Failed: {check.get('error') or '; '.join(check['errors'])}")
        else:
            lines += _table(["buckets", "batches", "max abs diff, two threads vs one", "max abs diff, graph vs eager "
                             "(real positions)", "replay from another thread", "capture s (per thread)", "same numbers"],
                            [[",".join(map(str, check["buckets"])), str(check["batches"]),
                              _f(check.get("max_abs_diff_two_threads_vs_one"), ".3g"),
                              _f(check.get("max_abs_diff_graph_vs_eager"), ".3g"), check.get("foreign_replay", "?"),
                              ", ".join(f"{k} {v:.1f}" for k, v in check["capture_s"].items()),
                              "yes" if check.get("ok") else "**no**"]])
        lines.append("")
    rows = [r for r in result["phases"] if "error" not in r]
    base = next((r for r in rows if r["variant"] == "defaults"), None)
    if rows:
        names = [r["variant"] for r in rows]
        clock = "CUDA events, gaps included" if rows[0]["kernel_ms"] else "wall time, no CUDA"
        lines += [f"## Per phase (ms per step; {clock}; one thread, one stream)", ""]
        table = [[phase] + [_f(r["phase_ms"].get(phase)) for r in rows] for phase in PHASES]
        table.append(["GPU idle (profiler)"] + [_f(r["idle_ms"]) for r in rows])
        table.append(["**step**"] + [f"**{_f(r['step_ms'])}**" for r in rows])
        lines += _table(["phase", *names], table)
        if any(r["kernel_ms"] for r in rows):
            lines += ["", "## Kernel time per phase (ms per step; torch.profiler, by launch)", ""]
            lines += _table(["phase", *names], [[phase] + [_f((r["kernel_ms"] or {}).get(phase)) for r in rows]
                                                for phase in (*PHASES, "unattributed")])
            lines += ["", "## GPU idle per phase (ms per step: the phase's GPU time minus its kernels)", ""]
            table = [[phase] + [_f((r["idle_by_phase_ms"] or {}).get(phase)) for r in rows] for phase in PHASES]
            table.append(["**share of the step**"] + [f"**{_f(r['gpu_idle_events_pct'], '.1f', ' %')}**" for r in rows])
            lines += _table(["phase", *names], table)
        lines += ["", "## Per variant (sequential, one stream)", ""]
        table = []
        for r in rows:
            ratio = r["tokens_per_s"] / base["tokens_per_s"] if base else None
            table.append([r["variant"], r["short_conv"], _f(r["step_ms"]), _f(r["tokens_per_s"], ",.0f"),
                          _f(r["mfu_pct"], ".1f", " %"), _f(ratio, ".3f"), _f(r["gpu_idle_events_pct"], ".1f", " %"),
                          _f(r["gpu_idle_pct"], ".1f", " %"), _f(r["peak_memory_gb"], ".1f", " GiB"),
                          _graph_summary(r.get("graphs"), r.get("graphs_profiled")),
                          _f(loss_rel_diff(r, base), ".2g")])
        lines += _table(["variant", "short conv", "step ms", "tok/s", "MFU", "vs defaults", "GPU idle (events)",
                         "GPU idle (profiler)", "peak memory", "graphs", "loss vs defaults"], table)
        if base and base.get("losses"):
            lines += ["", f"Loss vs defaults: the largest relative difference of the {len(base['losses'])} per-step "
                      f"losses (fresh drafter, same seed, same batches; defaults: {base['losses'][0]:.3f} -> "
                      f"{base['losses'][-1]:.3f})."]
    for r in result["phases"]:
        if "error" in r:
            lines.append(f"\n{r['variant']}: {r['error']}")
    if result["modes"]:
        lines += ["", "## Threaded vs sequential (windows alternating in one process; medians)", ""]
        table = []
        for m in result["modes"]:
            if "error" in m:
                table.append([m["variant"], m["error"], "", "", "", ""])
                continue
            for mode in ("threaded", "sequential"):
                table.append([m["variant"], mode, _f(m[mode]["tokens_per_s"], ",.0f"), _f(m[mode]["mfu_pct"], ".1f", " %"),
                              _f(m[mode]["gpu_idle_pct"], ".1f", " %"),
                              _f(m["ratio_threaded_over_sequential"], ".3f") if mode == "threaded" else ""])
        lines += _table(["variant", "mode", "tok/s", "MFU", "GPU idle (profiler)", "threaded / sequential"], table)
    second = result.get("second_preset")
    if second:
        lines += ["", f"## Second preset: {second.get('preset')} (its defaults)", ""]
        if "error" in second:
            lines.append(second["error"])
        else:
            lines += _table(["mode", "tok/s", "MFU", "GPU idle", "peak memory"],
                            [[mode, _f(second[mode]["tokens_per_s"], ",.0f"), _f(second[mode]["mfu_pct"], ".1f", " %"),
                              _f(second[mode]["gpu_idle_pct"], ".1f", " %"),
                              _f(second.get("peak_memory_gb"), ".1f", " GiB")] for mode in ("threaded", "sequential")])
    if result["skipped"]:
        lines += ["", "Skipped (time budget): " + ", ".join(result["skipped"])]
    lines.append(f"\nTotal {result['elapsed_s']:.0f} s.")
    return "\n".join(lines) + "\n"


def loss_rel_diff(row: dict[str, Any], base: dict[str, Any] | None) -> float | None:
    """Largest |loss - defaults' loss| / |defaults' loss| over the steps both ran (None without both)."""
    if not base or not row.get("losses") or not base.get("losses"):
        return None
    pairs = list(zip(row["losses"], base["losses"], strict=False))
    return max(abs(a - b) / max(abs(b), 1e-12) for a, b in pairs) if pairs else None


def _graph_summary(sets: dict[str, Any] | None, profiled: dict[str, Any] | None = None) -> str:
    """'target 4, drafter 1 (emulated)': graphs captured per role; failures named, also those of the profiled
    window's own captures."""
    if not sets:
        return "-"
    parts = []
    for role, info in sets.items():
        what = role.rsplit(" ", 2)[-2] if " " in role else role
        parts.append(f"{what} {len(info['captured'])}" + (f", {len(info['failed'])} failed" if info["failed"] else ""))
    kinds = {info["kind"] for info in sets.values()}
    text = ", ".join(parts) + ("" if kinds == {"cuda"} else f" ({'/'.join(sorted(kinds))})")
    failed_profiled = sum(len(info["failed"]) for info in (profiled or {}).values())
    return text + (f"; {failed_profiled} failed under the profiler" if failed_profiled else "")


# --------------------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------------------


def _guarded(name: str, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """One measurement; a failure (an OOM, a kernel that will not compile) is recorded, the rest goes on."""
    try:
        return work()
    except Exception as err:  # a benchmark reports what failed and keeps measuring
        traceback.print_exc()
        return {"variant": name, "error": f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"}
    finally:
        free_memory()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="qwen3.5-4b")
    parser.add_argument("--out", required=True, help="directory for phases.json and phases.md")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma list of {', '.join(VARIANTS)}")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured steps per variant")
    parser.add_argument("--steps", type=int, default=6, help="measured steps per variant (CUDA events)")
    parser.add_argument("--profile-steps", type=int, default=2, help="profiled steps per variant")
    parser.add_argument("--modes", default="defaults,all", help="variants to run threaded vs sequential (or none)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of threaded/sequential windows")
    parser.add_argument("--window-steps", type=int, default=10, help="drafter steps per window")
    parser.add_argument("--graph-check", default="true", choices=("true", "false"),
                        help="two threads replaying their own graphs at once vs one thread (section 0)")
    parser.add_argument("--second-preset", default="none", help="a larger preset to run briefly (qwen3.5-9b), or none")
    parser.add_argument("--time-budget-s", type=float, default=390.0,
                        help="start no new measurement after this many seconds (default 390: done within 8 min)")
    args = parser.parse_args()
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    modes = [] if args.modes == "none" else [v.strip() for v in args.modes.split(",") if v.strip()]
    unknown = set(names + modes) - set(VARIANTS)
    if unknown or not names or min(args.steps, args.warmup + 1, args.profile_steps, args.rounds) < 1:
        parser.error(f"unknown variants {sorted(unknown)} or counts < 1 (variants: {', '.join(VARIANTS)})")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    begin = time.monotonic()
    result: dict[str, Any] = {"preset": args.preset, "environment": environment(), "variants": {n: VARIANTS[n] for n in names},
                              "graph_check": None, "phases": [], "modes": [], "second_preset": None, "skipped": []}
    order = {n: i for i, n in enumerate(names)}

    def save() -> None:
        """After every measurement: a run cut short (a time limit, a crash) still leaves what it measured."""
        result["elapsed_s"] = time.monotonic() - begin
        result["phases"].sort(key=lambda r: order.get(r["variant"], len(order)))
        (out_dir / "phases.json").write_text(json.dumps(result, indent=2, default=str))
        (out_dir / "phases.md").write_text(markdown(result))

    def in_budget(what: str) -> bool:
        if time.monotonic() - begin < args.time_budget_s:
            return True
        result["skipped"].append(what)
        return False

    with tempfile.TemporaryDirectory(prefix="trainer-phases-") as tmp:
        base = base_config(args.preset, tmp)
        print(f"[{time.monotonic() - begin:5.0f} s] building {args.preset} (the first build compiles the draft layers)",
              flush=True)
        first = build(with_switches(base, {}))
        shared = dict(first.targets)  # the target is built once and shared by every variant
        print(f"[{time.monotonic() - begin:5.0f} s] built: {first.kernels.line()}", flush=True)
        if args.graph_check == "true":
            result["graph_check"] = _guarded("graph-check", lambda built=first: graph_check(built))
            print(f"[{time.monotonic() - begin:5.0f} s] graph check: " + json.dumps(
                {k: result["graph_check"].get(k) for k in ("ok", "max_abs_diff_two_threads_vs_one",
                                                           "max_abs_diff_graph_vs_eager", "foreign_replay", "error")}),
                flush=True)
            save()
        del first
        free_memory()

        def phases(name: str) -> None:
            if in_budget(name):
                print(f"[{time.monotonic() - begin:5.0f} s] phases {name}", flush=True)
                config = with_switches(base, VARIANTS[name])
                row = _guarded(name, lambda: measure_phases(name, build(config, targets=shared), args, out_dir))
                result["phases"].append(row)
                print(f"  {name}: {json.dumps({k: row.get(k) for k in ('step_ms', 'tokens_per_s', 'mfu_pct', 'gpu_idle_events_pct', 'gpu_idle_pct', 'error')})}",
                      flush=True)
                save()

        def compare(name: str) -> None:
            if in_budget(f"modes:{name}"):
                print(f"[{time.monotonic() - begin:5.0f} s] threaded vs sequential: {name}", flush=True)
                config = with_switches(base, VARIANTS[name])
                row = _guarded(name, lambda: compare_modes(name, build(config, targets=shared), args, out_dir,
                                                           args.rounds, args.window_steps))
                result["modes"].append(row)
                summary = {m: {k: row[m].get(k) for k in ("tokens_per_s", "mfu_pct", "gpu_idle_pct")}
                           for m in ("threaded", "sequential") if m in row}
                print(f"  {name}: ratio {row.get('ratio_threaded_over_sequential')} {json.dumps(summary)} "
                      f"{row.get('error', '')}", flush=True)
                save()

        # Most important first, so a time budget cuts the least: the defaults and everything on, both modes of
        # those, then each switch alone, then the second preset.
        for name in [n for n in names if n in ("defaults", "all")]:
            phases(name)
        for name in modes:
            compare(name)
        for name in [n for n in names if n not in ("defaults", "all")]:
            phases(name)
        shared.clear()
        free_memory()
        if args.second_preset != "none" and in_budget(f"second preset {args.second_preset}"):
            result["second_preset"] = {"preset": args.second_preset,
                                       **_guarded("defaults", lambda: second_preset(args, out_dir, tmp))}
            save()
    save()
    print(markdown(result))
    print(f"wrote {out_dir / 'phases.json'} and {out_dir / 'phases.md'}", flush=True)
    return 0


def second_preset(args: argparse.Namespace, out_dir: Path, tmp: str) -> dict[str, Any]:
    """The larger preset as a user gets it (its defaults; no compiled layers: a minute of compile for a few
    steps), both modes briefly."""
    config = base_config(args.second_preset, tmp)
    if not torch.cuda.is_available():
        config = dataclasses.replace(config, compile_backend="aot_eager")
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    row = compare_modes("all", build(config), args, out_dir, rounds=1, steps=max(4, args.window_steps // 2))
    row["preset"] = args.second_preset
    row["peak_memory_gb"] = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None
    return row


if __name__ == "__main__":
    sys.exit(main())
