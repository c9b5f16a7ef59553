"""`dflash-diag doctor`: sample a process for a few seconds and name what is wrong, with evidence and the fix."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dflash_diag.cli._job import add_job_flag, job_topology
from dflash_diag.cli._observe import BURST_MAX_S, sampler_config
from dflash_diag.cli._output import console as make_console
from dflash_diag.cli._output import dump_json, finite_float, output_path_arg, pid_arg, print_lines, rate_arg
from dflash_diag.errors import AttachError, CommandError, ExitCode
from dflash_diag.model import Analysis, Observation, Severity
from dflash_diag.sources.config import BURST_RATE_HZ, MAX_RATE_HZ, MIN_RATE_HZ, SamplerConfig
from dflash_diag.view.findings import finding_json, headline_json
from dflash_diag.view.report import stage_names_json

if TYPE_CHECKING:
    from dflash_diag.inject.request import Lease
    from dflash_diag.model.job import JobTopology
    from dflash_diag.model.kernels import KernelTrace

DEFAULT_DURATION_S = 5.0
MAX_DURATION_S = 600.0
ATTACH_TIMEOUT_S = 30.0  # --attach: each of the attach and the detach (`attach --timeout`'s default)
DOCTOR_SCHEMA = "dflash-diag.doctor/1"
_FAIL_ON = {"info": Severity.INFO, "warning": Severity.WARNING, "critical": Severity.CRITICAL}


class DoctorCommand:
    """Name what limits a slow (or stuck) PyTorch training process and why: one headline, then the evidence.

    Samples the process for a few seconds (py-spy stacks, /proc, NVML, its stderr when it goes to a file, its
    source files on disk, and the probe board when it runs under probes), links each cause to the symptom it
    explains, and prints the headline ("the drafter stage limits throughput ... because ..."), then every
    finding: severity, rule id, the claim, the numbers behind it and the fix. Works on any threaded program:
    stages are told apart by thread names or, failing that, by who puts into and who gets from a queue.
    Every rule is described in docs/findings.md.

      dflash-diag doctor 12345
      dflash-diag doctor 12345 --duration 10 --json
      dflash-diag doctor 12345 --fail-on warning     # exit 10 when a warning or worse is found (CI, scripts)
      dflash-diag doctor 12345 --attach              # no probes in it? attach them for the diagnosis, then detach
      dflash-diag doctor TORCHRUN_PID                # a torchrun job (or any rank's PID): every rank, one window
    """

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("pid", type=pid_arg, metavar="PID", help="the process to examine")
        parser.add_argument("--duration", type=finite_float, default=DEFAULT_DURATION_S, metavar="S",
                            help=f"seconds to sample (default {DEFAULT_DURATION_S:g})")
        parser.add_argument("--rate", type=rate_arg, default=None, metavar="HZ",
                            help=f"stack samples per second, or auto (2-10 Hz by the CPU left free); default: "
                            f"{BURST_RATE_HZ:g} Hz for windows up to {BURST_MAX_S:g} s (py-spy may use half a core "
                            "while it samples), auto for longer ones")
        parser.add_argument("--json", action="store_true",
                            help=f"print machine-readable JSON (schema {DOCTOR_SCHEMA}, docs/findings.md)")
        parser.add_argument("--fail-on", choices=sorted(_FAIL_ON), metavar="LEVEL",
                            help="exit with code 10 when a finding at LEVEL (info|warning|critical) or above is raised")
        parser.add_argument("--board-dir", metavar="DIR", help="where probe boards are (default: the per-user runtime dir)")
        parser.add_argument("--target-pattern", metavar="GLOBS",
                            help="thread names of the target (producer) stage, comma-separated fnmatch patterns "
                            "(default target-*; when no thread matches, stages are inferred from queue use)")
        parser.add_argument("--drafter-pattern", metavar="GLOBS",
                            help="thread names of the drafter (consumer) stage (default drafter-*)")
        parser.add_argument("--kernels-trace", metavar="FILE", type=output_path_arg,
                            help="a torch.profiler trace of this process (`dflash-diag record --kernels`, or a trace "
                                 "torch.profiler exported) to weigh as evidence: GPU idle between kernels, who "
                                 "launched them, launch-bound gaps (docs/findings.md)")
        parser.add_argument("--kernel-window", action="store_true",
                            help="also run torch.profiler inside the process for the window and weigh its kernels "
                                 "(as `record --kernels`); off by default until its cost after the window is "
                                 "measured nil (bench/gpu_evidence_cost.py, docs/benchmarks.md)")
        parser.add_argument("--attach", action="store_true",
                            help="when the process runs without (all) probes, attach them for the diagnosis and detach "
                                 "them afterwards (`dflash-diag attach`, docs/attach.md)")
        from dflash_diag.inject.method import METHODS

        parser.add_argument("--attach-method", default="auto", choices=METHODS,
                            help="with --attach: how to get in (default auto)")
        add_job_flag(parser)

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        if not 0.5 <= args.duration <= MAX_DURATION_S:
            raise CommandError(f"--duration must be between 0.5 and {MAX_DURATION_S:g} seconds", ExitCode.USAGE)
        if args.pid <= 0:
            raise CommandError(f"PID must be a positive integer, got {args.pid}", ExitCode.USAGE)
        if args.rate is not None and not MIN_RATE_HZ <= args.rate <= MAX_RATE_HZ:  # also refuses nan and inf
            raise CommandError(f"--rate {args.rate:g}: must be between {MIN_RATE_HZ:g} and {MAX_RATE_HZ:g} samples "
                               "per second, or auto", ExitCode.USAGE)
        for flag, value in (("--target-pattern", args.target_pattern), ("--drafter-pattern", args.drafter_pattern)):
            if value is not None and not value.strip(" ,"):
                raise CommandError(f"{flag} needs at least one pattern (e.g. 'producer-*')", ExitCode.USAGE)
        args.kernels = None
        if args.kernel_window and args.kernels_trace is not None:
            raise CommandError("--kernel-window records a trace of its own: drop --kernels-trace", ExitCode.USAGE)
        if args.kernels_trace is not None:  # read (and refused) before any sampling
            from pathlib import Path

            from dflash_diag.sources.kernel_trace import read_trace_file

            args.kernels = read_trace_file(Path(args.kernels_trace), pid=args.pid)
        topology = job_topology(args.pid, args.job)
        if topology is not None:
            return _run_job(args, topology)
        if args.attach:
            from dflash_diag.cli._signals import terminate_like_ctrl_c

            with terminate_like_ctrl_c():
                analysis, report = _diagnose_attached(args)
        else:
            analysis, report = _diagnose(args)
        if args.json:
            dump_json(report)
        else:
            print_findings(report)
        if any(f.rule_id == "process-zombie" for f in analysis.findings):
            return ExitCode.NO_PROCESS  # it has exited: the report says so, the code is every command's (3)
        if args.fail_on and any(f.severity >= _FAIL_ON[args.fail_on] for f in analysis.findings):
            return ExitCode.FINDINGS
        return ExitCode.OK


def _run_job(args: argparse.Namespace, topology: JobTopology) -> int:
    """A launcher or a rank: every rank in one window, the job's findings (cli/_job.py, docs/jobs.md)."""
    from dflash_diag.analysis.threads import StagePatterns
    from dflash_diag.cli._job import check_job_args, job_report_json, observe_job, print_job_report

    check_job_args(args)
    patterns = StagePatterns.parse(target=args.target_pattern, drafter=args.drafter_pattern)
    observed = observe_job(topology, args.duration, sampler_config(args.duration, args.rate, args.board_dir),
                           progress=not args.json, patterns=patterns)
    analysis = observed.analysis
    report = job_report_json(args.pid, analysis, DOCTOR_SCHEMA)
    if args.json:
        dump_json(report)
    else:
        print_job_report(analysis, report)
    if args.fail_on and any(f.severity >= _FAIL_ON[args.fail_on] for f in analysis.findings):
        return ExitCode.FINDINGS
    return ExitCode.OK


def _diagnose(args: argparse.Namespace) -> tuple[Analysis, dict[str, Any]]:
    if getattr(args, "kernel_window", False):
        from dflash_diag.cli._kernel_window import diagnose_with_kernel_window

        return diagnose_with_kernel_window(args)
    return diagnose(args.pid, args.duration, board_dir=args.board_dir, progress=not args.json,
                    target_pattern=args.target_pattern, drafter_pattern=args.drafter_pattern,
                    config=sampler_config(args.duration, args.rate, args.board_dir),
                    kernels=getattr(args, "kernels", None))


def _diagnose_attached(args: argparse.Namespace) -> tuple[Analysis, dict[str, Any]]:
    """`--attach`: probes in, the diagnosis, probes out, on every exit this command sees: done, an error, Ctrl-C,
    SIGTERM, SIGHUP (the signal's exit code after the detach). The probes are leased to this command, so on
    the exit it cannot see (SIGKILL) they detach by themselves (probes/session.py's Lease)."""
    from dflash_diag.cli._signals import deferred
    from dflash_diag.errors import Terminated
    from dflash_diag.inject.request import Lease

    lease = Lease.for_target(args.pid)  # None: another PID namespace (said when the probes go in)
    steps: list[str] = []  # the injection's progress: non-empty once the request may have reached the process
    attached: dict[str, Any] | None = None
    interrupted = False
    try:
        attached = _attach_for_diagnosis(args, lease, steps.append)
        analysis, report = _diagnose(args)
    except (KeyboardInterrupt, Terminated):
        interrupted = True
        raise
    finally:
        if attached is not None or (interrupted and steps):
            with deferred():  # a second Ctrl-C or SIGTERM must not cut the detach short (it is bounded)
                _detach_after_diagnosis(args, lease, said_attached=attached is not None)
    if attached is not None:
        report["attached"] = attached
    return analysis, report


def _attach_for_diagnosis(args: argparse.Namespace, lease: Lease | None,
                          progress: Callable[[str], None]) -> dict[str, Any] | None:
    """`--attach`: start the probes missing from the process's board (none if it has them all)."""
    from dflash_contract.board import SessionKeys
    from dflash_diag.cli.attach import KNOWN_PROBES, outcome_json, run_injection
    from dflash_diag.errors import BoardError
    from dflash_diag.sources.board import read_board

    try:
        enabled = set(read_board(args.pid, args.board_dir).session.get(SessionKeys.ENABLED) or ())
    except BoardError:
        enabled = set()
    if set(KNOWN_PROBES) <= enabled:
        return None
    print(f"dflash-diag doctor: PID {args.pid} runs without {'some ' if enabled else ''}probes: attaching them "
          "for this diagnosis (they leave with this command)", file=sys.stderr, flush=True)
    if lease is None:
        print(f"dflash-diag doctor: PID {args.pid} runs in another PID namespace: the probes cannot hold a lease on "
              f"this command; should it be killed (SIGKILL), run `dflash-diag detach {args.pid}`", file=sys.stderr,
              flush=True)
    inject_args = argparse.Namespace(pid=args.pid, method=args.attach_method, timeout=ATTACH_TIMEOUT_S,
                                     board_dir=args.board_dir, json=True, verbose=False)
    outcome = run_injection(inject_args, "attach", list(KNOWN_PROBES), lease=lease, progress=progress)
    if not outcome.result.get("ok"):
        raise AttachError(f"PID {args.pid}: the probes did not start: {outcome.result.get('error')}", ExitCode.ATTACH_FAILED)
    return outcome_json(outcome)


def _detach_after_diagnosis(args: argparse.Namespace, lease: Lease | None, *, said_attached: bool) -> None:
    """Detach the probes this command's lease holds (none other); one line on stderr says what happened."""
    from dflash_diag.cli.attach import run_injection

    inject_args = argparse.Namespace(pid=args.pid, method=args.attach_method, timeout=ATTACH_TIMEOUT_S,
                                     board_dir=args.board_dir, json=True, verbose=False)
    try:
        result = run_injection(inject_args, "detach", [], lease=lease).result
    except Exception as exc:  # the diagnosis is done: report, do not lose it
        after = "the probes detach by themselves once this command has exited, or run" if lease else "run"
        print(f"dflash-diag doctor: detach failed: {exc}; {after} `dflash-diag detach {args.pid}`", file=sys.stderr,
              flush=True)
        return
    left = result.get("hooks_left") or []
    if result.get("not_attached") and not said_attached:
        return  # interrupted before the probes started: nothing to take out
    if result.get("not_owner"):
        print(f"dflash-diag doctor: probes left in PID {args.pid}: {result.get('error')}", file=sys.stderr, flush=True)
        return
    note = "" if result.get("ok") and not left else f" ({result.get('error') or left})"
    print(f"dflash-diag doctor: probes detached from PID {args.pid}{note}", file=sys.stderr, flush=True)


def diagnose(pid: int, duration_s: float, *, board_dir: str | None = None, progress: bool = True,
             target_pattern: str | None = None, drafter_pattern: str | None = None,
             config: SamplerConfig | None = None, kernels: KernelTrace | None = None) -> tuple[Analysis, dict[str, Any]]:
    """Sample ``pid`` and analyse it (``analysis.analyse``), with its torch.profiler trace (``kernels``) as evidence
    when one was given; the analysis and the JSON report."""
    from dflash_diag.analysis import analyse
    from dflash_diag.analysis.threads import StagePatterns
    from dflash_diag.cli._observe import observe
    from dflash_diag.sources.outside import OutsideReader
    from dflash_diag.sources.pyspy import PySpy

    outside = OutsideReader(pid)
    try:
        PySpy(pid).check()  # fail fast, with the diagnosis, before a progress bar appears
    except AttachError:
        if outside.process_facts().state != "Z":
            raise
        # A zombie has no memory to read: /proc still says what happened, and that is the diagnosis.
        obs = outside.enrich(_empty_observation(pid, duration_s))
        analysis = analyse(obs, now_wall_s=time.time())
        return analysis, report_json(pid, analysis)
    patterns = StagePatterns.parse(target=target_pattern, drafter=drafter_pattern)
    observed = observe(pid, duration_s, config or sampler_config(duration_s, None, board_dir), progress=progress,
                       patterns=patterns, finish=None if kernels is None else lambda obs: replace(obs, kernels=kernels))
    analysis = observed.analysis
    return analysis, report_json(pid, analysis)


def _empty_observation(pid: int, window_s: float) -> Observation:
    from dflash_diag.model import NA

    return Observation(pid=pid, cmdline=(), started_wall_s=time.time(), window_s=0.0, stacks=(), proc=(),
                       gpus=NA("not sampled: the process is a zombie"), boards=NA("not read: the process is a zombie"),
                       process_alive=False, warnings=(f"not sampled: PID {pid} is a zombie",))


def _console(stderr: bool = False) -> Any:
    return make_console(stderr=stderr)


def report_json(pid: int, analysis: Analysis) -> dict[str, Any]:
    from dflash_diag.analysis.kernels import summarise, summary_json
    from dflash_diag.model import NA
    from dflash_diag.view.waits import waits_json

    obs, findings, pipeline = analysis.observation, analysis.findings, analysis.pipeline
    return {
        "schema": DOCTOR_SCHEMA,
        "pid": pid,
        "window_s": round(obs.window_s, 3),
        "stack_samples": len(obs.stacks),
        "threads": len(analysis.threads),
        "process_alive": obs.process_alive,
        "phase": analysis.phase,
        "headline": headline_json(analysis.headline),
        "summary": {s.label: sum(1 for f in findings if f.severity == s) for s in reversed(Severity)},
        "healthy": analysis.healthy,
        "pipeline": ({"bottleneck": "unknown", "verdict": str(pipeline), "stages_from": ""} if isinstance(pipeline, NA)
                     else {"bottleneck": pipeline.bottleneck, "verdict": pipeline.verdict,
                           "stages_from": pipeline.stages_from, "stage_names": stage_names_json(pipeline.names)}),
        "findings": [finding_json(f) for f in findings],
        "waits": waits_json(analysis.waits),
        "kernels": None if obs.kernels is None else summary_json(summarise(obs.kernels)),
        "warnings": list(obs.warnings) + list(analysis.errors),
    }


def print_findings(report: dict[str, Any]) -> None:
    """The report as text: the header, the headline, the pipeline and waits, every finding (drawn from the report's
    own documents, view/findings.py), the summary."""
    from rich.markup import escape

    from dflash_diag.view.findings import finding_lines, headline_lines

    console = _console()
    console.print(f"[bold]dflash-diag doctor[/]: PID {report['pid']}, {report['window_s']:.1f} s sampled, "
                  f"{report['stack_samples']} stack samples of {report['threads']} threads"
                  + ("" if report["process_alive"] else " [red](the process exited)[/]"))
    if report["headline"] is not None:
        console.print()
        print_lines(console, headline_lines(report["headline"]))
    if report["pipeline"]["verdict"] and report["phase"] == "steady":
        console.print(f"pipeline: {escape(report['pipeline']['verdict'])}")
    path = report["waits"].get("path")
    if path:
        console.print(f"waits (root last): {escape(path)}")
    print_lines(console, [line for doc in report["findings"] for line in finding_lines(doc)])
    console.print()
    summary = report["summary"]
    if report["healthy"]:
        extra = f" ({summary['info']} informational)" if summary["info"] else ""
        console.print(f"[bold green]no findings[/]: nothing at warning level or above{extra}.")
    else:
        console.print(f"[bold]{summary['critical']} critical, {summary['warning']} warning, {summary['info']} info[/]"
                      " -- rules explained in docs/findings.md")
    for warning in report["warnings"]:
        console.print(f"[dim]note: {escape(warning)}[/]")
