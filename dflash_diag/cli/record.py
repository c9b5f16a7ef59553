"""`dflash-diag record`: sample a process for a while and write a timeline for Perfetto / chrome://tracing, or
its sampled stacks for speedscope."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dflash_diag import __version__
from dflash_diag.cli._job import add_job_flag, job_topology
from dflash_diag.cli._output import dump_json, finite_float, output_path_arg, pid_arg, rate_arg, shown
from dflash_diag.errors import AttachError, CommandError, ExitCode

if TYPE_CHECKING:
    from dflash_diag.model.job import JobTopology

DEFAULT_DURATION_S = 10.0
MAX_DURATION_S = 600.0
FORMATS = ("chrome", "perfetto", "speedscope")


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

      dflash-diag record 12345 --duration 20 -o trace.json
      dflash-diag record 12345 --format speedscope -o stacks.speedscope.json
    """

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("pid", type=pid_arg, metavar="PID", help="the process to record")
        parser.add_argument("--duration", type=finite_float, default=DEFAULT_DURATION_S, metavar="S",
                            help=f"seconds to sample (default {DEFAULT_DURATION_S:g}, at most {MAX_DURATION_S:g})")
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
        add_job_flag(parser)

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        from dflash_diag.snapshot.output import prepare_file  # keeps --help fast
        from dflash_diag.sources.procfs import process_alive
        from dflash_diag.sources.pyspy import PySpy

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
