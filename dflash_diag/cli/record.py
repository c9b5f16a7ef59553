"""`dflash-diag record`: sample a process for a while and write a timeline for Perfetto / chrome://tracing, or
its sampled stacks for speedscope."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dflash_contract.attach import KERNELS_MAX_DURATION_S, KERNELS_MAX_STEPS
from dflash_diag import __version__
from dflash_diag.cli._args import add_target_args, add_window_args, target_from_args, window_from_args
from dflash_diag.cli._output import dump_json, finite_float, output_path_arg, shown
from dflash_diag.errors import AttachError, CommandError, ExitCode
from dflash_diag.observe.window import MAX_DURATION_S

DEFAULT_MAX_EVENTS = 1_000_000  # export.kernels' default, kept here so --help imports no exporter
if TYPE_CHECKING:
    from dflash_diag.model import Analysis
    from dflash_diag.model.job import JobAnalysis

DEFAULT_DURATION_S = 10.0  # a timeline wants a longer window than a diagnosis
FORMATS = ("chrome", "perfetto", "speedscope")
# --kernels: torch.profiler's events grow fast (tens of thousands a second on a GPU trainer) and stopping and
# exporting them holds the process's GIL for a time that grows with them: short windows by default.
KERNELS_DURATION_S = 3.0
KERNELS_STEPS_CAP_S = 30.0  # --steps without --duration: the most it waits for them
MIN_MAX_EVENTS, MAX_MAX_EVENTS = 1_000, 10_000_000


def is_our_trace(data: bytes) -> bool:
    """A Trace Event Format file that dflash-diag wrote (``otherData.generator``)."""
    doc = _json_object(data)
    other = doc.get("otherData") if doc is not None else None
    return isinstance(other, dict) and other.get("generator") == "dflash-diag"


def is_our_speedscope(data: bytes) -> bool:
    doc = _json_object(data)
    exporter = doc.get("exporter") if doc is not None else None
    return isinstance(exporter, str) and exporter.startswith("dflash-diag ")


def _json_object(data: bytes) -> dict[str, Any] | None:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


class RecordCommand:
    """Record a timeline of every thread: Perfetto / chrome://tracing JSON (default) or a speedscope profile.

    Samples the process like doctor (py-spy stacks, /proc, NVML, the probe board) for --duration seconds
    and writes one track per thread with its states over time (python, native, GPU wait, GIL wait, put,
    get, compile, recompute, idle) and the innermost frame as slice names, counter tracks for each watched
    queue's depth, tok/s, steps/s and per-GPU utilisation, and instant events for recompiles, graph breaks,
    CUDA-graph captures and skips, and the findings. Open it at https://ui.perfetto.dev or chrome://tracing.
    With --format speedscope: the sampled stacks, one profile per thread, for https://www.speedscope.app.
    The file is private to you (0600) and written atomically; an existing file is replaced only with
    --force and only if dflash-diag wrote it.

    With --kernels, torch.profiler is also started inside the running process (through the attach machinery:
    no restart, no launch flag) for --steps optimizer steps or --duration seconds, then stopped and taken out;
    the trace then also holds every CUDA kernel (one track per stream, each tied to the call that launched it),
    the CPU ops of every thread on that thread's track, and the optimizer steps (docs/integrations.md).
    A recording can crash the process it records. torch's all-threads profiler (torch 2.13) crashed a
    training process now and then when stopped beside its threads' ops; the stop is now ordered against that
    race (the profiler's callback taken out first, the calls in flight drained: no process lost in the soak of
    docs/benchmarks.md), but the profiler is torch's code running inside your process, with races of its own
    we may not know: on a run you cannot afford to lose, record after a checkpoint.

      dflash-diag record 12345 --duration 20 -o trace.json
      dflash-diag record 12345 --format speedscope -o stacks.speedscope.json
      dflash-diag record --kernels 12345 --steps 5 -o kernels.json
    """

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        add_target_args(parser, pid_help="the process to record")
        add_window_args(parser, default_s=DEFAULT_DURATION_S,
                        duration_help=f"seconds to sample (default {DEFAULT_DURATION_S:g}, at most {MAX_DURATION_S:g}; "
                                      f"with --kernels: default {KERNELS_DURATION_S:g}, at most "
                                      f"{KERNELS_MAX_DURATION_S:g}, and the bound on --steps)")
        parser.add_argument("-o", "--output", metavar="FILE", type=output_path_arg,
                            help="where to write (default: ./dflash-diag-trace-PID-TIME.json, "
                            "or .speedscope.json with --format speedscope)")
        parser.add_argument("--format", choices=FORMATS, default="chrome",
                            help="chrome (= perfetto): Trace Event Format JSON; speedscope: sampled stacks")
        parser.add_argument("--force", action="store_true", help="replace an existing output that dflash-diag wrote")
        parser.add_argument("--json", action="store_true", help="print the result (path, counts) as JSON")
        from dflash_diag.inject.injection import DEFAULT_TIMEOUT_S
        from dflash_diag.inject.method import METHODS

        kernels = parser.add_argument_group("kernels (torch.profiler inside the running process)")
        kernels.add_argument("--kernels", action="store_true",
                             help="also record torch.profiler in the process: CUDA kernels, CUDA calls and CPU ops of "
                                  "every thread, on the same timeline (needs torch in the process). torch's profiler "
                                  "runs inside the process: a recording can crash it (see above)")
        kernels.add_argument("--steps", type=int, default=None, metavar="N",
                             help=f"with --kernels: stop after N optimizer steps (at most --duration, default "
                                  f"{KERNELS_STEPS_CAP_S:g} s then)")
        kernels.add_argument("--max-events", type=int, default=DEFAULT_MAX_EVENTS, metavar="N",
                             help=f"with --kernels: at most N events in the trace (default {DEFAULT_MAX_EVENTS:,}); "
                                  "past it torch's latest events are left out and the trace says where it was cut")
        kernels.add_argument("--method", choices=METHODS, default="auto",
                             help="with --kernels: how to get into the process (as `dflash-diag attach`)")
        kernels.add_argument("--timeout", type=finite_float, default=DEFAULT_TIMEOUT_S, metavar="S",
                             help=f"with --kernels: give up starting the profiler after S seconds (default "
                                  f"{DEFAULT_TIMEOUT_S:g})")

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        from dflash_diag.analysis import analyse
        from dflash_diag.cli._observe import observe_shown
        from dflash_diag.observe import check_reachable
        from dflash_diag.snapshot.output import prepare_file  # keeps --help fast

        if args.kernels:
            return self._run_kernels(args)
        if args.steps is not None:
            raise CommandError("--steps counts the steps of a --kernels recording: add --kernels", ExitCode.USAGE)
        window = window_from_args(args, DEFAULT_DURATION_S)
        target = target_from_args(args)
        check_reachable(target)  # fail fast, with the diagnosis, before the output is reserved
        speedscope = args.format == "speedscope"
        suffix = ".speedscope.json" if speedscope else ".json"
        output = Path(args.output) if args.output is not None else Path(
            f"dflash-diag-trace-{args.pid}-{time.strftime('%Y%m%d-%H%M%S')}{suffix}")
        prepared = prepare_file(output, force=args.force, is_ours=is_our_speedscope if speedscope else is_our_trace,
                                what="speedscope profile" if speedscope else "trace")
        try:
            # doctor's window: the same sampling (a burst for a short window), the outside evidence and the one
            # analysis, so the trace's findings are linked (``because``) and held back in warm-up as doctor's are.
            analysis = analyse(observe_shown(target, window, show_progress=not args.json))
            if not _summary(args.pid, analysis, {}, speedscope=False)["stack_samples"]:  # stopped: nothing to draw
                raise AttachError(f"no stack sample of PID {args.pid} could be taken in {window.duration_s:g} s "
                                  "(the process cannot run: stopped or in uninterruptible sleep)", ExitCode.NO_PROCESS)
            doc = _document(analysis, speedscope)
            data = (json.dumps(doc, allow_nan=False, separators=(",", ":")) + "\n").encode()
            path = prepared.commit(data)
        except BaseException:
            prepared.abandon()
            raise
        summary = _summary(args.pid, analysis, doc, speedscope)
        summary.update(path=str(path), format=args.format, bytes=len(data))
        if args.json:
            dump_json(summary)
        else:
            where = "https://www.speedscope.app" if speedscope else "https://ui.perfetto.dev or chrome://tracing"
            print(f"wrote {shown(path)}: {summary['threads']} threads, {summary['stack_samples']} stack samples over "
                  f"{summary['window_s']:.1f} s, {summary['findings']} findings; open it in {where}")
        return ExitCode.OK

    # --- --kernels ------------------------------------------------------------------------------------------------

    def _run_kernels(self, args: argparse.Namespace) -> int:
        from dflash_diag.cli._record_kernels import record_kernels
        from dflash_diag.observe import Target, check_reachable
        from dflash_diag.snapshot.output import prepare_file

        duration = _kernels_duration(args)
        if args.format == "speedscope":
            raise CommandError("--kernels writes a Perfetto / Chrome trace: leave out --format speedscope",
                               ExitCode.USAGE)
        if not MIN_MAX_EVENTS <= args.max_events <= MAX_MAX_EVENTS:
            raise CommandError(f"--max-events must be between {MIN_MAX_EVENTS:,} and {MAX_MAX_EVENTS:,}",
                               ExitCode.USAGE)
        if not 1.0 <= args.timeout <= 3600.0:
            raise CommandError("--timeout must be between 1 and 3600 seconds", ExitCode.USAGE)
        if args.job:
            raise CommandError("--kernels records one process: pass a rank's PID (and leave out --job)",
                               ExitCode.USAGE)
        output = Path(args.output) if args.output is not None else Path(
            f"dflash-diag-kernels-{args.pid}-{time.strftime('%Y%m%d-%H%M%S')}.json")
        # Our thread states need py-spy: fail before anything goes into the process.
        check_reachable(Target(args.pid, board_dir=args.board_dir))
        prepared = prepare_file(output, force=args.force, is_ours=is_our_trace, what="trace")
        try:
            doc, summary = record_kernels(args, duration)
            data = (json.dumps(doc, allow_nan=False, separators=(",", ":")) + "\n").encode()
            path = prepared.commit(data)
        except BaseException:
            prepared.abandon()
            raise
        summary.update(path=str(path), bytes=len(data))
        if args.json:
            dump_json(summary)
        else:
            _print_kernels(path, summary)
        return ExitCode.OK


def _kernels_duration(args: argparse.Namespace) -> float:
    if args.steps is not None and not 1 <= args.steps <= KERNELS_MAX_STEPS:
        raise CommandError(f"--steps must be between 1 and {KERNELS_MAX_STEPS}", ExitCode.USAGE)
    duration = args.duration if args.duration is not None else (
        KERNELS_STEPS_CAP_S if args.steps is not None else KERNELS_DURATION_S)
    if not 0.5 <= duration <= KERNELS_MAX_DURATION_S:
        raise CommandError(f"--duration with --kernels must be between 0.5 and {KERNELS_MAX_DURATION_S:g} seconds "
                           "(torch.profiler's events grow fast: record a few steps)", ExitCode.USAGE)
    return float(duration)


def _print_kernels(path: Path, s: dict[str, Any]) -> None:
    steps = f", {s['steps']} optimizer steps" if s.get("steps") else ""
    gpu = (f"{s['gpu_spans']:,} GPU kernels/copies on {s['streams']} stream{'s' if s['streams'] != 1 else ''}, "
           if s.get("gpu_spans") else "no GPU work (CPU ops only), ")
    print(f"wrote {shown(path)}: {gpu}{s['host_spans']:,} CPU ops and CUDA calls on {s['torch_threads']} threads, "
          f"{s['stack_samples']} stack samples of {s['threads']} threads over {s['window_s']:.1f} s{steps}, "
          f"{s['findings']} findings; open it in https://ui.perfetto.dev")
    clock = s.get("clock") or {}
    unc = clock.get("uncertainty_us")
    print(f"  the profiler ran {s['profiled_s']:.1f} s in PID {s['pid']} and stopped ({s['reason']}); stopping it took "
          f"{s['stop_ms']:.0f} ms and exporting {s['export_ms']:.0f} ms there (its GIL held); clocks aligned "
          + (f"within {unc:.0f} us ({clock.get('method')})" if unc is not None else f"by {clock.get('method')}"))
    if s.get("left_out"):
        print(f"  cut at {s['cut_at_s']:.2f} s: {s['left_out']:,} later events of torch.profiler left out "
              "(--max-events); a shorter --duration or fewer --steps records less")
    for line in s.get("headlines") or []:
        print(f"  {line}")


def _document(analysis: Analysis | JobAnalysis, speedscope: bool) -> dict[str, Any]:
    """The trace (or the speedscope profile) of one process's window, or of every rank's: a track per rank."""
    from dflash_diag.model.job import JobAnalysis

    if isinstance(analysis, JobAnalysis):
        from dflash_diag.export.jobtrace import job_speedscope, job_trace

        return (job_speedscope(analysis, tool_version=__version__) if speedscope
                else job_trace(analysis, tool_version=__version__))
    from dflash_diag.export.speedscope import speedscope as speedscope_doc
    from dflash_diag.export.trace import chrome_trace

    obs = analysis.observation
    if speedscope:
        return speedscope_doc(obs, analysis.threads, tool_version=__version__)
    return chrome_trace(obs, analysis.threads, analysis.findings, tool_version=__version__)


def _summary(pid: int, analysis: Analysis | JobAnalysis, doc: dict[str, Any], speedscope: bool) -> dict[str, Any]:
    """What ``record --json`` prints: the window's counts, summed over the ranks of a job."""
    from dflash_diag.model.job import JobAnalysis

    observations = analysis.observation.ranks if isinstance(analysis, JobAnalysis) else (analysis.observation,)
    processes = analysis.ranks if isinstance(analysis, JobAnalysis) else (analysis,)
    out = {"pid": pid, "window_s": round(analysis.observation.window_s, 3),
           "stack_samples": sum(len(o.stacks) for o in observations),
           "threads": sum(len(a.threads) for a in processes), "findings": len(analysis.findings),
           "process_alive": any(o.process_alive for o in observations),
           "events": len(doc["profiles"]) if speedscope else len(doc.get("traceEvents", ()))}
    if isinstance(analysis, JobAnalysis):
        out["ranks"] = len(observations)
    return out
