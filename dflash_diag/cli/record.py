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
from dflash_diag.cli._job import add_job_flag, job_topology
from dflash_diag.cli._output import dump_json, finite_float, output_path_arg, pid_arg, rate_arg, shown
from dflash_diag.errors import AttachError, CommandError, ExitCode

DEFAULT_MAX_EVENTS = 1_000_000  # export.kernels' default, kept here so --help imports no exporter
if TYPE_CHECKING:
    from dflash_diag.model.job import JobTopology

DEFAULT_DURATION_S = 10.0
MAX_DURATION_S = 600.0
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
        parser.add_argument("pid", type=pid_arg, metavar="PID", help="the process to record")
        parser.add_argument("--duration", type=finite_float, default=None, metavar="S",
                            help=f"seconds to sample (default {DEFAULT_DURATION_S:g}, at most {MAX_DURATION_S:g}; "
                                 f"with --kernels: default {KERNELS_DURATION_S:g}, at most {KERNELS_MAX_DURATION_S:g}, "
                                 "and the bound on --steps)")
        parser.add_argument("-o", "--output", metavar="FILE", type=output_path_arg,
                            help="where to write (default: ./dflash-diag-trace-PID-TIME.json, "
                            "or .speedscope.json with --format speedscope)")
        parser.add_argument("--format", choices=FORMATS, default="chrome",
                            help="chrome (= perfetto): Trace Event Format JSON; speedscope: sampled stacks")
        parser.add_argument("--rate", type=rate_arg, default=None, metavar="HZ",
                            help="stack samples per second, or auto (default: 2-10 Hz by the CPU left free; "
                            "always capped so py-spy stays within its CPU budget)")
        parser.add_argument("--native", action="store_true",
                            help="include native frames (pauses the process briefly, at most 5%% of the time)")
        parser.add_argument("--force", action="store_true", help="replace an existing output that dflash-diag wrote")
        parser.add_argument("--json", action="store_true", help="print the result (path, counts) as JSON")
        parser.add_argument("--board-dir", metavar="DIR", help="where probe boards are (default: the per-user runtime dir)")
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
        add_job_flag(parser)

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        from dflash_diag.snapshot.output import prepare_file  # keeps --help fast
        from dflash_diag.sources.procfs import process_alive
        from dflash_diag.sources.pyspy import PySpy

        if args.kernels:
            return self._run_kernels(args)
        if args.steps is not None:
            raise CommandError("--steps counts the steps of a --kernels recording: add --kernels", ExitCode.USAGE)
        args.duration = DEFAULT_DURATION_S if args.duration is None else args.duration
        if not 0.5 <= args.duration <= MAX_DURATION_S:
            raise CommandError(f"--duration must be between 0.5 and {MAX_DURATION_S:g} seconds", ExitCode.USAGE)
        if args.rate is not None and not 0.2 <= args.rate <= 50:  # also refuses nan and inf
            raise CommandError(f"--rate {args.rate:g}: must be between 0.2 and 50 samples per second, or auto",
                               ExitCode.USAGE)
        if args.pid <= 0 or not process_alive(args.pid):
            raise CommandError(f"no process with PID {args.pid} (it exited or never existed)", ExitCode.NO_PROCESS)
        speedscope = args.format == "speedscope"
        suffix = ".speedscope.json" if speedscope else ".json"
        output = Path(args.output) if args.output is not None else Path(
            f"dflash-diag-trace-{args.pid}-{time.strftime('%Y%m%d-%H%M%S')}{suffix}")
        topology = job_topology(args.pid, args.job)
        PySpy(topology.ranks[0].pid if topology is not None else args.pid).check()  # fail fast, with the diagnosis
        prepared = prepare_file(output, force=args.force, is_ours=is_our_speedscope if speedscope else is_our_trace,
                                what="speedscope profile" if speedscope else "trace")
        try:
            doc, summary = (self._record_job(args, topology, speedscope) if topology is not None
                            else self._record(args, speedscope))
            data = (json.dumps(doc, allow_nan=False, separators=(",", ":")) + "\n").encode()
            path = prepared.commit(data)
        except BaseException:
            prepared.abandon()
            raise
        summary.update(path=str(path), format=args.format, bytes=len(data))
        if args.json:
            dump_json(summary)
        else:
            where = "https://www.speedscope.app" if speedscope else "https://ui.perfetto.dev or chrome://tracing"
            print(f"wrote {shown(path)}: {summary['threads']} threads, {summary['stack_samples']} stack samples over "
                  f"{summary['window_s']:.1f} s, {summary['findings']} findings; open it in {where}")
        return ExitCode.OK

    def _record_job(self, args: argparse.Namespace, topology: JobTopology,
                    speedscope: bool) -> tuple[dict[str, Any], dict[str, Any]]:
        """Every rank of the job in one window (doctor's), one file: a process track or profile per rank."""
        from dflash_diag.cli._job import observe_job
        from dflash_diag.cli._observe import sampler_config
        from dflash_diag.export.jobtrace import job_speedscope, job_trace

        config = sampler_config(args.duration, args.rate, args.board_dir, native=args.native)
        analysis = observe_job(topology, args.duration, config, progress=not args.json).analysis
        job = analysis.observation
        doc = (job_speedscope(analysis, tool_version=__version__) if speedscope
               else job_trace(analysis, tool_version=__version__))
        summary = {"pid": args.pid, "window_s": round(job.window_s, 3),
                   "stack_samples": sum(len(o.stacks) for o in job.ranks),
                   "threads": sum(len(a.threads) for a in analysis.ranks), "findings": len(analysis.findings),
                   "process_alive": any(o.process_alive for o in job.ranks), "ranks": len(job.ranks),
                   "events": len(doc.get("traceEvents", ())) if not speedscope else len(doc["profiles"])}
        return doc, summary

    def _record(self, args: argparse.Namespace, speedscope: bool) -> tuple[dict[str, Any], dict[str, Any]]:
        from dflash_diag.cli._observe import observe, sampler_config
        from dflash_diag.export.speedscope import speedscope as speedscope_doc
        from dflash_diag.export.trace import chrome_trace

        # doctor's window: the same sampling (a burst for a short window), the outside evidence and the one
        # analysis, so the trace's findings are linked (``because``) and held back in warm-up as doctor's are.
        config = sampler_config(args.duration, args.rate, args.board_dir, native=args.native)
        observed = observe(args.pid, args.duration, config, progress=not args.json)
        obs, threads, findings = observed.observation, observed.analysis.threads, observed.analysis.findings
        if not obs.stacks:
            raise AttachError(f"no stack sample of PID {args.pid} could be taken in {args.duration:g} s "
                              f"({'; '.join(obs.warnings) or 'the process exited'})", ExitCode.NO_PROCESS)
        if speedscope:
            doc = speedscope_doc(obs, threads, tool_version=__version__)
        else:
            doc = chrome_trace(obs, threads, findings, tool_version=__version__)
        summary = {"pid": args.pid, "window_s": round(obs.window_s, 3), "stack_samples": len(obs.stacks),
                   "threads": len(threads), "findings": len(findings), "process_alive": obs.process_alive,
                   "events": len(doc.get("traceEvents", ())) if not speedscope else len(doc["profiles"])}
        return doc, summary

    # --- --kernels ------------------------------------------------------------------------------------------------

    def _run_kernels(self, args: argparse.Namespace) -> int:
        from dflash_diag.cli._record_kernels import record_kernels
        from dflash_diag.snapshot.output import prepare_file
        from dflash_diag.sources.procfs import process_alive
        from dflash_diag.sources.pyspy import PySpy

        duration = _kernels_duration(args)
        if args.format == "speedscope":
            raise CommandError("--kernels writes a Perfetto / Chrome trace: leave out --format speedscope",
                               ExitCode.USAGE)
        if not MIN_MAX_EVENTS <= args.max_events <= MAX_MAX_EVENTS:
            raise CommandError(f"--max-events must be between {MIN_MAX_EVENTS:,} and {MAX_MAX_EVENTS:,}",
                               ExitCode.USAGE)
        if not 1.0 <= args.timeout <= 3600.0:
            raise CommandError("--timeout must be between 1 and 3600 seconds", ExitCode.USAGE)
        if args.rate is not None and not 0.2 <= args.rate <= 50:
            raise CommandError(f"--rate {args.rate:g}: must be between 0.2 and 50 samples per second, or auto",
                               ExitCode.USAGE)
        if args.pid <= 0 or not process_alive(args.pid):
            raise CommandError(f"no process with PID {args.pid} (it exited or never existed)", ExitCode.NO_PROCESS)
        output = Path(args.output) if args.output is not None else Path(
            f"dflash-diag-kernels-{args.pid}-{time.strftime('%Y%m%d-%H%M%S')}.json")
        PySpy(args.pid).check()  # our thread states need py-spy: fail before anything goes into the process
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
