"""`dflash-diag doctor`: sample a process for a few seconds and name what is wrong, with evidence and the fix."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dflash_diag.cli._args import add_target_args, add_window_args, target_from_args, window_from_args
from dflash_diag.cli._output import console as make_console
from dflash_diag.cli._output import dump_json, output_path_arg, print_lines
from dflash_diag.errors import AttachError, CommandError, ExitCode
from dflash_diag.model import Analysis, Observation, Severity
from dflash_diag.view.findings import finding_json, headline_json

if TYPE_CHECKING:
    from dflash_diag.inject.request import Lease
    from dflash_diag.model.job import JobAnalysis
    from dflash_diag.model.kernels import KernelTrace
    from dflash_diag.observe import Target, Window

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
        add_target_args(parser)
        add_window_args(parser)
        parser.add_argument("--json", action="store_true",
                            help=f"print machine-readable JSON (schema {DOCTOR_SCHEMA}, docs/findings.md)")
        parser.add_argument("--fail-on", choices=sorted(_FAIL_ON), metavar="LEVEL",
                            help="exit with code 10 when a finding at LEVEL (info|warning|critical) or above is raised")
        parser.add_argument("--kernels-trace", metavar="FILE", type=output_path_arg,
                            help="a torch.profiler trace of this process (`dflash-diag record --kernels`, or a trace "
                                 "torch.profiler exported) to weigh as evidence: GPU idle between kernels, who "
                                 "launched them, launch-bound gaps (docs/findings.md)")
        parser.add_argument("--attach", action="store_true",
                            help="when the process runs without (all) probes, attach them for the diagnosis and detach "
                                 "them afterwards (`dflash-diag attach`, docs/attach.md)")
        from dflash_diag.inject.method import METHODS

        parser.add_argument("--attach-method", default="auto", choices=METHODS,
                            help="with --attach: how to get in (default auto)")

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        window = window_from_args(args)
        kernels = None
        if args.kernels_trace is not None:  # read (and refused) before any sampling
            from pathlib import Path

            from dflash_diag.sources.kernel_trace import read_trace_file

            kernels = read_trace_file(Path(args.kernels_trace), pid=args.pid)
        target = target_from_args(args)
        if target.job is not None:
            return _run_job(args, target, window)
        if args.attach:
            from dflash_diag.cli._signals import terminate_like_ctrl_c

            with terminate_like_ctrl_c():
                analysis, report = _diagnose_attached(args, target, window, kernels)
        else:
            analysis, report = diagnose(target, window, progress=not args.json, kernels=kernels)
        if args.json:
            dump_json(report)
        else:
            print_findings(report)
        if any(f.rule_id == "process-zombie" for f in analysis.findings):
            return ExitCode.NO_PROCESS  # it has exited: the report says so, the code is every command's (3)
        if args.fail_on and any(f.severity >= _FAIL_ON[args.fail_on] for f in analysis.findings):
            return ExitCode.FINDINGS
        return ExitCode.OK


def _run_job(args: argparse.Namespace, target: Target, window: Window) -> int:
    """A launcher or a rank: every rank in one window, the job's findings (docs/jobs.md)."""
    from dflash_diag.analysis.job import analyse_job
    from dflash_diag.cli._job import job_report_json, print_job_report
    from dflash_diag.cli._observe import observe_shown
    from dflash_diag.model.job import JobObservation

    if args.attach:
        raise CommandError("--attach looks at one process: for probes in every rank start the job under them "
                           "(dflash-diag run -- torchrun ...), or pass --no-job", ExitCode.USAGE)
    job = observe_shown(target, window, show_progress=not args.json)
    assert isinstance(job, JobObservation)
    analysis: JobAnalysis = analyse_job(job)
    report = job_report_json(args.pid, analysis, DOCTOR_SCHEMA)
    if args.json:
        dump_json(report)
    else:
        print_job_report(analysis, report)
    if args.fail_on and any(f.severity >= _FAIL_ON[args.fail_on] for f in analysis.findings):
        return ExitCode.FINDINGS
    return ExitCode.OK


def _diagnose_attached(args: argparse.Namespace, target: Target, window: Window,
                       kernels: KernelTrace | None) -> tuple[Analysis, dict[str, Any]]:
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
        analysis, report = diagnose(target, window, progress=not args.json, kernels=kernels)
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


def diagnose(target: Target, window: Window, *, progress: bool = True,
             kernels: KernelTrace | None = None) -> tuple[Analysis, dict[str, Any]]:
    """Observe one process (a zombie from /proc alone) and analyse it (``analysis.analyse``), with its
    torch.profiler trace (``kernels``) as evidence when one was given; the analysis and the JSON report."""
    from dflash_diag.analysis import analyse
    from dflash_diag.cli._observe import observe_shown

    obs = observe_shown(target, window, show_progress=progress, zombie_ok=True,
                        finish=None if kernels is None else lambda o: replace(o, kernels=kernels))
    assert isinstance(obs, Observation)
    analysis = analyse(obs)
    return analysis, report_json(target.pid, analysis)


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
                           "stages_from": pipeline.stages_from}),
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
