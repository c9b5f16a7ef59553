"""`dflash-diag doctor`: sample a process (or a job) for a few seconds and name what is wrong, with evidence and the
fix; or judge a saved observation (a snapshot bundle, ``--save-observation``'s file) the same way, offline.

Flags and flow only: the window is ``observe``'s, the diagnosis ``analysis.analyse``, the report ``view.doctor``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dflash_diag.cli._args import (
    add_target_args,
    add_window_args,
    target_from_args,
    window_from_args,
    window_given,
)
from dflash_diag.cli._output import console as make_console
from dflash_diag.cli._output import dump_json, output_path_arg, pid_arg, print_lines
from dflash_diag.errors import AttachError, CommandError, ExitCode
from dflash_diag.model import Severity
from dflash_diag.view.doctor import DOCTOR_SCHEMA, doctor_doc, doctor_lines

if TYPE_CHECKING:
    from dflash_diag.inject.request import Lease
    from dflash_diag.model import Analysis, Observation
    from dflash_diag.model.analysis import Diagnosis
    from dflash_diag.model.job import JobObservation
    from dflash_diag.model.kernels import KernelTrace
    from dflash_diag.observe import Target, Window
    from dflash_diag.snapshot.output import PreparedFile

ATTACH_TIMEOUT_S = 30.0  # --attach: each of the attach and the detach (`attach --timeout`'s default)
_FAIL_ON = {"info": Severity.INFO, "warning": Severity.WARNING, "critical": Severity.CRITICAL}


class DoctorCommand:
    """Name what limits a slow (or stuck) PyTorch training process and why: one headline, then the evidence.

    Samples the process for a few seconds (py-spy stacks, /proc, NVML, its stderr when it goes to a file, its
    source files on disk, and the probe board when it runs under probes), links each cause to the symptom it
    explains, and prints the headline ("the drafter stage limits throughput ... because ..."), then every
    finding: severity, rule id, the claim, the numbers behind it and the fix. Works on any threaded program:
    stages are told apart by thread names or, failing that, by who puts into and who gets from a queue.
    Every rule is described in docs/findings.md. What it sampled can be saved and judged again offline, with the
    same report (docs/observations.md).

      dflash-diag doctor 12345
      dflash-diag doctor 12345 --duration 10 --json
      dflash-diag doctor 12345 --fail-on warning     # exit 10 when a warning or worse is found (CI, scripts)
      dflash-diag doctor 12345 --attach              # no probes in it? attach them for the diagnosis, then detach
      dflash-diag doctor TORCHRUN_PID                # a torchrun job (or any rank's PID): every rank, one window
      dflash-diag doctor 12345 --save-observation obs.json   # ... and keep what was sampled (private, 0600)
      dflash-diag doctor --replay obs.json           # the same report, offline
      dflash-diag doctor bug.tar.gz                  # a snapshot bundle's report, as doctor would have given it
      dflash-diag doctor node0.tar.gz node1.tar.gz   # one job's per-node bundles (snapshot --node), judged as one
    """

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("pid", nargs="?", metavar="PID|BUNDLE",
                            help="the process to examine (a torchrun launcher or a rank: the whole job); or a snapshot "
                                 "bundle (.tar.gz or directory) to judge offline, as --replay does")
        parser.add_argument("more_bundles", nargs="*", metavar="BUNDLE",
                            help="more bundles of the same job, one per node (`snapshot --node` on every node): every "
                                 "rank judged together, as one job (docs/jobs.md)")
        add_target_args(parser, pid_help=None)
        add_window_args(parser)
        parser.add_argument("--json", action="store_true",
                            help=f"print machine-readable JSON (schema {DOCTOR_SCHEMA}, docs/findings.md)")
        parser.add_argument("--fail-on", choices=sorted(_FAIL_ON), metavar="LEVEL",
                            help="exit with code 10 when a finding at LEVEL (info|warning|critical) or above is raised")
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
        parser.add_argument("--no-native-stacks", action="store_true",
                            help="when the window names no cause, doctor takes native (C/C++) stacks for 2.5 s more to "
                                 "say where the time goes below the Python lines (py-spy --native pauses the process "
                                 "while it reads each: ~0.4 s once, then milliseconds); this skips them")
        parser.add_argument("--save-observation", metavar="FILE", type=output_path_arg,
                            help="also write what was sampled (schema dflash-diag.observation/1, private 0600) for "
                                 "`doctor --replay FILE` to judge again offline (docs/observations.md)")
        parser.add_argument("--force", action="store_true",
                            help="with --save-observation: replace an observation file dflash-diag wrote")
        parser.add_argument("--replay", metavar="FILE",
                            help="judge a saved observation (--save-observation's file, or a snapshot bundle) instead "
                                 "of a live process: the same report, offline (stage patterns may be given anew)")

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        if args.more_bundles:
            return _finish(args, _merged(args))
        replay = _replay_source(args)
        if replay is not None:
            return _finish(args, _replayed(args, replay))
        window = window_from_args(args)
        if args.kernel_window and args.kernels_trace is not None:
            raise CommandError("--kernel-window records a trace of its own: drop --kernels-trace", ExitCode.USAGE)
        kernels = None
        if args.kernels_trace is not None:  # read (and refused) before any sampling
            from dflash_diag.sources.kernel_trace import read_trace_file

            kernels = read_trace_file(Path(args.kernels_trace), pid=args.pid)
        target = target_from_args(args)
        if target.job is not None and args.attach:
            raise CommandError("--attach looks at one process: for probes in every rank start the job under them "
                               "(dflash-diag run -- torchrun ...), or pass --no-job", ExitCode.USAGE)
        if target.job is not None and args.kernel_window:
            raise CommandError("--kernel-window records one process: pass --no-job, or a rank's PID with --no-job",
                               ExitCode.USAGE)
        saved = _reserve_observation_file(args)  # a bad --save-observation fails before seconds of sampling
        try:
            attached: dict[str, Any] | None = None
            if args.attach:
                from dflash_diag.cli._signals import terminate_like_ctrl_c

                with terminate_like_ctrl_c():
                    obs, attached = _observe_attached(args, target, window, kernels)
            else:
                obs = _observe_live(args, target, window, kernels)
            obs, judged = _native_second_look(args, obs)
            if saved is not None:
                _save_observation(saved, obs)
        finally:
            if saved is not None:
                saved.abandon()  # a no-op once committed
        return _finish(args, obs, attached, judged)


def _native_second_look(args: argparse.Namespace, obs: Observation | JobObservation
                        ) -> tuple[Observation | JobObservation, Analysis | None]:
    """The settings from the environment that the process's busiest installed code reads (``with_env_reads``, for
    every live window); then a short native profile after the window (``observe.native_look``): of the process when
    the window names no cause (where the limiting threads' time goes below their Python lines), and of a busy process
    a thread waits on whose CPU goes largely to the kernel (which system calls). Skipped with --no-native-stacks, for
    a job, and when neither is wanted (native stacks pause a process while each sample is read): then the analysis
    that said so is returned with the observation, to be reported as it is (None: the observation is still to be
    judged)."""
    from dflash_diag.model import Observation as ProcessObservation

    if not isinstance(obs, ProcessObservation):
        return obs, None
    from dflash_diag.observe.native_look import with_env_reads

    if obs.process_alive:
        obs = with_env_reads(obs)  # no stop of the process: its environ and the packages' files, read from outside
    if args.no_native_stacks:
        return obs, None
    from dflash_diag.analysis import analyse
    from dflash_diag.analysis.libc import MECHANISM_ENV
    from dflash_diag.analysis.native import looks_below, wants_native_look
    from dflash_diag.analysis.peers import peers_to_look_at

    analysis = analyse(obs)
    own = wants_native_look(analysis)
    peers = peers_to_look_at(analysis)  # a busy process a thread waits on, its CPU largely in system calls
    if not own and not peers:
        return obs, analysis
    from dflash_diag.cli._observe import progress_bar
    from dflash_diag.observe.native_look import NATIVE_LOOK_S, native_look

    if not own:
        label = f"its CPU in the kernel: native stacks of process {', '.join(map(str, peers))}"
    else:
        label = "the cause's C calls: native stacks of PID" if looks_below(analysis) else "no cause yet: native stacks of PID"
    with progress_bar(label, NATIVE_LOOK_S, not args.json) as progress:
        return native_look(obs, progress=progress, peers=peers, own=own, peer_env=MECHANISM_ENV), None


def _replay_source(args: argparse.Namespace) -> str | None:
    """The file to replay (``--replay FILE``, or a positional that is no PID), else None; the PID parsed."""
    positional = args.pid
    if args.replay is not None and positional is not None:
        raise CommandError("give a PID or --replay FILE, not both", ExitCode.USAGE)
    source = args.replay
    if source is None and positional is not None and not positional.strip().isdigit():
        source = positional  # `doctor bug.tar.gz`
    if source is None:
        if positional is None:
            raise CommandError("nothing to examine: give a PID (doctor 12345), or a saved observation or snapshot "
                               "bundle (doctor --replay obs.json)", ExitCode.USAGE)
        try:
            args.pid = pid_arg(positional)
        except argparse.ArgumentTypeError as exc:
            raise CommandError(str(exc), ExitCode.USAGE) from None
        return None
    live = [*window_given(args), *(flag for flag, given in (
        ("--attach", args.attach), ("--kernels-trace", args.kernels_trace is not None),
        ("--kernel-window", args.kernel_window), ("--job" if args.job else "--no-job", args.job is not None),
        ("--board-dir", args.board_dir is not None), ("--save-observation", args.save_observation is not None))
        if given)]
    if live:
        raise CommandError(f"{', '.join(live)}: a replay judges the window it was given, offline; leave "
                           f"{'it' if len(live) == 1 else 'them'} out", ExitCode.USAGE)
    return str(source)


def _merged(args: argparse.Namespace) -> JobObservation:
    """``doctor BUNDLE BUNDLE...``: one job's per-node bundles judged as one job."""
    from dflash_diag.observe.merge import MergeError, merge_node_observations

    sources = [args.pid, *args.more_bundles]
    if args.replay is not None:
        raise CommandError("give the bundles as arguments, without --replay", ExitCode.USAGE)
    pids = [s for s in sources if str(s).strip().isdigit()]
    if pids:
        raise CommandError(f"{pids[0]} is a PID: several arguments are bundles of one job, one per node; examine a "
                           "live process alone (doctor PID)", ExitCode.USAGE)
    _replay_source(argparse.Namespace(**{**vars(args), "pid": sources[0]}))  # the live-only flags refused alike
    try:
        return merge_node_observations([(str(s), _replayed(args, str(s))) for s in sources])
    except MergeError as exc:
        raise CommandError(str(exc), ExitCode.BAD_INPUT) from None


def _replayed(args: argparse.Namespace, source: str) -> Observation | JobObservation:
    """The saved observation (a file or a bundle's), its stage patterns replaced when new ones were given."""
    from dflash_diag.cli._args import patterns_from_args
    from dflash_diag.model.job import JobObservation
    from dflash_diag.snapshot.bundle import load_observation

    obs = load_observation(source)
    if args.target_pattern is None and args.drafter_pattern is None:
        return obs
    patterns = patterns_from_args(args)
    if isinstance(obs, JobObservation):
        return replace(obs, ranks=tuple(replace(o, patterns=patterns) for o in obs.ranks))
    return replace(obs, patterns=patterns)


def _finish(args: argparse.Namespace, obs: Observation | JobObservation, attached: dict[str, Any] | None = None,
            judged: Analysis | None = None) -> int:
    """Judge, report (JSON or text: ``view.doctor``), and the exit code the findings call for."""
    from dflash_diag.analysis import analyse

    analysis = judged if judged is not None else analyse(obs)
    report: dict[str, Any] = dict(doctor_doc(analysis))
    if attached is not None:
        report["attached"] = attached
    if args.json:
        dump_json(report)
    else:
        print_lines(make_console(), doctor_lines(report))  # type: ignore[arg-type]
    return exit_code(analysis, args.fail_on)


def exit_code(analysis: Diagnosis, fail_on: str | None) -> int:
    if any(f.rule_id == "process-zombie" for f in analysis.findings):
        return ExitCode.NO_PROCESS  # it has exited: the report says so, the code is every command's (3)
    if fail_on and any(f.severity >= _FAIL_ON[fail_on] for f in analysis.findings):
        return ExitCode.FINDINGS
    return ExitCode.OK


def is_our_observation(data: bytes) -> bool:
    """A file ``--save-observation`` wrote (its schema), which ``--force`` may replace."""
    from dflash_diag.observe.codec import ObservationFormatError, parse_document

    try:
        doc = parse_document(data)
    except ObservationFormatError:
        return False
    tool = doc.get("tool")
    return isinstance(tool, dict) and tool.get("name") == "dflash-diag"


def _reserve_observation_file(args: argparse.Namespace) -> PreparedFile | None:
    if args.save_observation is None:
        if args.force:
            raise CommandError("--force replaces a --save-observation file: give --save-observation FILE",
                               ExitCode.USAGE)
        return None
    from dflash_diag.snapshot.output import prepare_file

    return prepare_file(Path(args.save_observation), force=args.force, is_ours=is_our_observation,
                        what="saved observation", flag="--save-observation")


def _save_observation(saved: PreparedFile, obs: Observation | JobObservation) -> None:
    from dflash_diag import __version__
    from dflash_diag.observe.codec import ObservationFormatError, encode_observation

    try:
        data = encode_observation(obs, tool_version=__version__)
    except ObservationFormatError as exc:
        raise CommandError(f"--save-observation: {exc}", ExitCode.CANNOT_WRITE) from None
    saved.commit(data)


def _observe_live(args: argparse.Namespace, target: Target, window: Window,
                  kernels: KernelTrace | None) -> Observation | JobObservation:
    """The window of a live target: with torch.profiler in the process for it (``--kernel-window``), or sampled
    from outside with a given trace as evidence."""
    if args.kernel_window:
        from dflash_diag.cli._kernel_window import observe_with_kernel_window

        return observe_with_kernel_window(args, target, window)
    return observe_target(target, window, progress=not args.json, kernels=kernels)


def observe_target(target: Target, window: Window, *, progress: bool = True,
                   kernels: KernelTrace | None = None) -> Observation | JobObservation:
    """Observe a process (a zombie from /proc alone) or a job, with its torch.profiler trace (``kernels``) as
    evidence when one was given."""
    from dflash_diag.cli._observe import observe_shown

    return observe_shown(target, window, show_progress=progress, zombie_ok=True,
                         finish=None if kernels is None else lambda o: replace(o, kernels=kernels))


def _observe_attached(args: argparse.Namespace, target: Target, window: Window,
                      kernels: KernelTrace | None) -> tuple[Observation | JobObservation, dict[str, Any] | None]:
    """`--attach`: probes in, the window, probes out, on every exit this command sees: done, an error, Ctrl-C,
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
        obs = _observe_live(args, target, window, kernels)
    except (KeyboardInterrupt, Terminated):
        interrupted = True
        raise
    finally:
        if attached is not None or (interrupted and steps):
            with deferred():  # a second Ctrl-C or SIGTERM must not cut the detach short (it is bounded)
                _detach_after_diagnosis(args, lease, said_attached=attached is not None)
    return obs, attached


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
