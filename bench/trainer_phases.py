"""Where a training step's time goes, before and after each speed switch; threaded vs sequential; a larger preset.

One command on the H200 (about 6 minutes; ``--time-budget-s`` stops adding work before 8):

    python bench/trainer_phases.py --preset qwen3.5-4b --out phases/

Dry run on a CPU (no GPU figures: "N/A: no CUDA"):

    python bench/trainer_phases.py --preset tiny --out /tmp/phases --steps 2 --second-preset none

It writes ``phases.json`` and ``phases.md`` to ``--out``:

(a) Per phase (target forward, drafter inputs, drafter forward, loss, backward, optimizer) and GPU idle, for
    ``before`` (every switch at today's value), each switch alone, and all of them (``all``). The step runs
    in one thread on one stream (the sequential loop's work, phase by phase: step.py's functions). Phase
    times come from CUDA events between the phases (GPU time, gaps included); then a short torch.profiler
    window gives each phase's kernel time (a kernel belongs to the phase during which it was launched, the
    backward's kernels included: they launch from autograd's thread while the main thread is in backward)
    and the idle time (step span minus the union of all kernels). Also tok/s, MFU and peak memory.
(b) tok/s and MFU, threaded (target-0 + drafter-0 threads, one stream each, q_hs 2) vs sequential, for
    ``before`` and ``all``, windows alternating in one process (bench/trainer_throughput.py's windows), with
    the GPU idle share of each mode from a profiled window (the union of kernels on every stream).
(c) The second preset (``--second-preset``, default qwen3.5-9b) with its defaults: a few steps each mode.

MFU counts useful FLOPs as docs/benchmarks.md does (bench/trainer_throughput.py ``flops_per_batch``), against
the H200's measured bf16 ceiling. Trim: ``--variants before,all``, fewer ``--steps`` / ``--rounds``,
``--second-preset none``.
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

PHASES = ("target_forward", "drafter_inputs", "drafter_forward", "loss", "backward", "optimizer")
# Today's trainer: every switch at the value it had before the speed work.
BEFORE = {"checkpoint_layers": True, "fused_adamw": False, "compile_layers": False, "objective.loss": "chunked",
          "objective.mask_build": "mask_mod", "target.short_conv": "torch"}
CANDIDATES: dict[str, dict[str, Any]] = {
    "no-layer-checkpointing": {"checkpoint_layers": False},
    "fused-loss": {"objective.loss": "fused"},
    "fused-loss-compiled": {"objective.loss": "fused-compiled"},
    "anchor-block-mask": {"objective.mask_build": "anchors"},
    "compiled-layers": {"compile_layers": True},
    "fla-short-conv": {"target.short_conv": "fla"},
    "fused-adamw": {"fused_adamw": True},
}
# Everything on; the short conv as "auto" (fla where it imports, which the row's short_conv field records) so a
# machine without fla still measures the rest.
ALL = {k: v for switches in CANDIDATES.values() for k, v in switches.items()} | {
    "objective.loss": "fused-compiled", "target.short_conv": "auto"}
VARIANTS = {"before": {}, **CANDIDATES, "all": ALL}


def with_switches(config: TrainConfig, switches: dict[str, Any]) -> TrainConfig:
    out = config
    for key, value in {**BEFORE, **switches}.items():
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
        if self.cuda:
            torch.cuda.synchronize()
        out = dict.fromkeys(PHASES, 0.0)
        for (phase, start), (_, end) in zip(self.points, self.points[1:], strict=False):
            if phase is not None:
                out[phase] += start.elapsed_time(end) if self.cuda else (end - start) * 1e3
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


def phased_step(built: Built, index: int, mark: Callable[[str | None], None]) -> int:
    """The sequential loop's work for one batch, with a mark before each phase. Returns its real tokens."""
    config, replica = built.config, built.replicas[0]
    target = built.targets[config.target_devices[0]]
    batch = built.data.batch(index)
    mark("target_forward")
    hidden = step.target_forward(target, batch, built.scenario)
    mark("drafter_inputs")
    inputs = step.draft_inputs(replica, batch, config)
    mark("drafter_forward")
    out = step.draft_forward(replica, hidden, inputs)
    mark("loss")
    parts = step.draft_loss(replica, out, inputs, config.objective)
    mark("backward")
    parts.loss.backward()
    mark("optimizer")
    replicas.optimizer_step(replica, [], config.grad_clip)
    mark(None)
    return batch.num_tokens


def kernel_times(trace: dict[str, Any]) -> dict[str, Any]:
    """Per phase: kernel ms (by launch time inside a ``phase:`` range); the span, busy (union) and idle ms."""
    events = trace.get("traceEvents", [])
    ranges = sorted((e["ts"], e["ts"] + e.get("dur", 0), e["name"][6:]) for e in events
                    if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("phase:"))
    launches = {e["args"]["correlation"]: e["ts"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e]
    busy = dict.fromkeys((*PHASES, "unattributed"), 0.0)
    for kernel in kernels:
        launched = launches.get(kernel.get("args", {}).get("correlation"))
        phase = next((name for start, end, name in ranges if launched is not None and start <= launched <= end),
                     "unattributed")
        busy[phase] = busy.get(phase, 0.0) + kernel["dur"] / 1e3
    return {"kernel_ms": busy, **_span_busy(kernels)}


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
        for index in range(args.warmup):
            phased_step(built, index, lambda _: None)
        marks, tokens = Marks(cuda), 0
        for index in range(args.steps):
            tokens += phased_step(built, args.warmup + index, marks)
        phase_ms = {k: v / args.steps for k, v in marks.phase_ms().items()}
        step_ms = sum(phase_ms.values())
        row: dict[str, Any] = {"variant": name, "short_conv": built.kernels.short_conv,
                               "gdn_kernel": built.kernels.chunk_gated_delta_rule, "phase_ms": phase_ms, "step_ms": step_ms,
                               "tokens_per_s": tokens / args.steps / (step_ms / 1e3),
                               "measure_s": time.monotonic() - build_s}
        flops = flops_per_batch(built)
        row["mfu_pct"] = 100.0 * flops / (step_ms / 1e3) / BF16_PEAK_FLOPS if cuda else None
        if cuda:
            row["peak_memory_gb"] = torch.cuda.max_memory_allocated() / 2**30
            with profiled(out_dir, name, cpu_ops=True) as window:
                for index in range(args.profile_steps):
                    phased_step(built, args.warmup + args.steps + index, ProfileMarks())
                torch.cuda.synchronize()
            times = kernel_times(window["trace"])
            row["kernel_ms"] = {k: v / args.profile_steps for k, v in times["kernel_ms"].items()}
            row["idle_ms"] = times["idle_ms"] / args.profile_steps
            row["gpu_idle_pct"] = 100.0 * times["idle_ms"] / max(1e-9, times["span_ms"])
        else:
            row.update(peak_memory_gb=None, kernel_ms=None, idle_ms=None, gpu_idle_pct=None,
                       gpu_note="N/A: no CUDA (phase times are wall time on the CPU)")
    return row


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
            spans = _span_busy([e for e in window["trace"].get("traceEvents", [])
                                if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e])
            out[mode]["gpu_idle_pct"] = 100.0 * spans["idle_ms"] / max(1e-9, spans["span_ms"])
    out["ratio_threaded_over_sequential"] = out["threaded"]["tokens_per_s"] / out["sequential"]["tokens_per_s"]
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


def markdown(result: dict[str, Any]) -> str:
    env = result["environment"]
    lines = [f"# Trainer phases: preset {result['preset']}", "",
             f"{env['device']}, torch {env['torch']}, transformers {env['transformers']}, fla "
             f"{env['flash_linear_attention']}, triton {env['triton']}, {env['date']}. Command: "
             f"`python {' '.join(env['argv'])}`.", ""]
    rows = [r for r in result["phases"] if "error" not in r]
    before = next((r for r in rows if r["variant"] == "before"), None)
    if rows:
        clock = "CUDA events, gaps included" if rows[0]["kernel_ms"] else "wall time, no CUDA"
        lines += [f"## Per phase (ms per step; {clock}; one thread, one stream)", "",
                  "| phase | " + " | ".join(r["variant"] for r in rows) + " |",
                  "|---|" + "---|" * len(rows)]
        for phase in PHASES:
            lines.append(f"| {phase} | " + " | ".join(_f(r["phase_ms"][phase]) for r in rows) + " |")
        lines.append("| GPU idle (profiler) | " + " | ".join(_f(r["idle_ms"]) for r in rows) + " |")
        lines.append("| **step** | " + " | ".join(f"**{_f(r['step_ms'])}**" for r in rows) + " |")
        if any(r["kernel_ms"] for r in rows):
            lines += ["", "## Kernel time per phase (ms per step; torch.profiler, by launch)", "",
                      "| phase | " + " | ".join(r["variant"] for r in rows) + " |", "|---|" + "---|" * len(rows)]
            for phase in (*PHASES, "unattributed"):
                lines.append(f"| {phase} | " + " | ".join(_f((r["kernel_ms"] or {}).get(phase)) for r in rows) + " |")
        lines += ["", "## Per variant (sequential, one stream)", "",
                  "| variant | short conv | step ms | tok/s | MFU | vs before | GPU idle | peak memory |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            ratio = r["tokens_per_s"] / before["tokens_per_s"] if before else None
            lines.append(f"| {r['variant']} | {r['short_conv']} | {_f(r['step_ms'])} | {_f(r['tokens_per_s'], ',.0f')} | "
                         f"{_f(r['mfu_pct'], '.1f', ' %')} | {_f(ratio, '.3f')} | {_f(r['gpu_idle_pct'], '.1f', ' %')} | "
                         f"{_f(r['peak_memory_gb'], '.1f', ' GiB')} |")
    for r in result["phases"]:
        if "error" in r:
            lines.append(f"\n{r['variant']}: {r['error']}")
    if result["modes"]:
        lines += ["", "## Threaded vs sequential (windows alternating in one process; medians)", "",
                  "| variant | mode | tok/s | MFU | GPU idle | threaded / sequential |", "|---|---|---|---|---|---|"]
        for m in result["modes"]:
            if "error" in m:
                lines.append(f"| {m['variant']} | {m['error']} | | | | |")
                continue
            for mode in ("threaded", "sequential"):
                lines.append(f"| {m['variant']} | {mode} | {_f(m[mode]['tokens_per_s'], ',.0f')} | "
                             f"{_f(m[mode]['mfu_pct'], '.1f', ' %')} | {_f(m[mode]['gpu_idle_pct'], '.1f', ' %')} | "
                             f"{_f(m['ratio_threaded_over_sequential'], '.3f') if mode == 'threaded' else ''} |")
    second = result.get("second_preset")
    if second:
        lines += ["", f"## Second preset: {second.get('preset')} (its defaults)", ""]
        if "error" in second:
            lines.append(second["error"])
        else:
            lines += ["| mode | tok/s | MFU | GPU idle | peak memory |", "|---|---|---|---|---|"]
            for mode in ("threaded", "sequential"):
                lines.append(f"| {mode} | {_f(second[mode]['tokens_per_s'], ',.0f')} | "
                             f"{_f(second[mode]['mfu_pct'], '.1f', ' %')} | "
                             f"{_f(second[mode]['gpu_idle_pct'], '.1f', ' %')} | {_f(second.get('peak_memory_gb'), '.1f', ' GiB')} |")
    if result["skipped"]:
        lines += ["", "Skipped (time budget): " + ", ".join(result["skipped"])]
    lines.append(f"\nTotal {result['elapsed_s']:.0f} s.")
    return "\n".join(lines) + "\n"


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
    parser.add_argument("--modes", default="before,all", help="variants to run threaded vs sequential (or none)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of threaded/sequential windows")
    parser.add_argument("--window-steps", type=int, default=10, help="drafter steps per window")
    parser.add_argument("--second-preset", default="qwen3.5-9b", help="a larger preset to run briefly, or none")
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
                              "before": BEFORE, "phases": [], "modes": [], "second_preset": None, "skipped": []}

    def in_budget(what: str) -> bool:
        # Compiling the layers (fwd + bwd, flex inside) takes about a minute more than any other measurement.
        reserve_s = 90.0 if "compiled-layers" in what else 0.0
        if time.monotonic() - begin < args.time_budget_s - reserve_s:
            return True
        result["skipped"].append(what)
        return False

    with tempfile.TemporaryDirectory(prefix="trainer-phases-") as tmp:
        base = base_config(args.preset, tmp)
        first = build(with_switches(base, {}))
        shared = dict(first.targets)  # the target is built once and shared by every variant
        print(f"built {args.preset} in {time.monotonic() - begin:.0f} s: {first.kernels.line()}", flush=True)
        del first
        free_memory()
        # Most important first, so a time budget cuts the least: before and all, the modes, the second preset,
        # then each switch alone (compiled layers last: its compile takes a minute).
        first_pass = [n for n in names if n in ("before", "all")]
        rest = sorted((n for n in names if n not in first_pass), key=lambda n: n == "compiled-layers")

        def phases(name: str) -> None:
            if in_budget(name):
                config = with_switches(base, VARIANTS[name])
                row = _guarded(name, lambda: measure_phases(name, build(config, targets=shared), args, out_dir))
                result["phases"].append(row)
                print(f"{name}: {json.dumps({k: row.get(k) for k in ('step_ms', 'tokens_per_s', 'mfu_pct', 'error')})}",
                      flush=True)

        for name in first_pass:
            phases(name)
        for name in modes:
            if in_budget(f"modes:{name}"):
                config = with_switches(base, VARIANTS[name])
                row = _guarded(name, lambda c=config, n=name: compare_modes(n, build(c, targets=shared), args, out_dir,
                                                                           args.rounds, args.window_steps))
                result["modes"].append(row)
                print(f"modes {name}: {json.dumps({k: row.get(k) for k in ('ratio_threaded_over_sequential', 'error')})}",
                      flush=True)
        shared.clear()
        free_memory()
        if args.second_preset != "none" and in_budget(f"second preset {args.second_preset}"):
            result["second_preset"] = {"preset": args.second_preset,
                                       **_guarded("defaults", lambda: second_preset(args, out_dir, tmp))}
            print(f"second preset: {json.dumps({k: result['second_preset'].get(k) for k in ('ratio_threaded_over_sequential', 'error')})}",
                  flush=True)
        if rest:
            free_memory()
            shared.update(build(with_switches(base, {})).targets)
            free_memory()
            for name in rest:
                phases(name)
        order = {n: i for i, n in enumerate(names)}
        result["phases"].sort(key=lambda r: order.get(r["variant"], len(order)))
    result["elapsed_s"] = time.monotonic() - begin
    (out_dir / "phases.json").write_text(json.dumps(result, indent=2, default=str))
    (out_dir / "phases.md").write_text(markdown(result))
    print(markdown(result))
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
