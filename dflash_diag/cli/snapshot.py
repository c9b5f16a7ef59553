"""`dflash-diag snapshot`: write a complete, redacted bug-report bundle of a process (live, hung or dying)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dflash_diag.cli._args import add_target_args, add_window_args, target_from_args, window_from_args
from dflash_diag.cli._output import dump_json, output_path_arg, pid_arg, shown
from dflash_diag.errors import CommandError, ExitCode
from dflash_diag.view.findings import finding_json, finding_lines, plain_lines


class SnapshotCommand:
    """Write a bug-report bundle: findings, versions, config, env knobs, all stacks (native), board, GPUs, code hashes.

    The bundle is a .tar.gz (or a directory with --dir) holding report.md, snapshot.json (schema
    dflash-diag.snapshot/2), stacks.txt, board.json, nvml.json, timeline.svg and trace.json (open it in ui.perfetto.dev). Secrets (tokens, keys,
    passwords in the environment, argv and board) are redacted; the file is private to you (0600).
    Works on a hung process, and on one that dies meanwhile (it writes what it got and lists the rest).

      dflash-diag snapshot 12345                          # ./dflash-diag-snapshot-12345-<time>.tar.gz
      dflash-diag snapshot 12345 -o bug.tar.gz --force
      dflash-diag snapshot 12345 --dir -o bug/            # directory form
      dflash-diag snapshot --node --job-id $SLURM_JOB_ID -o $(hostname).tar.gz   # this node's ranks, no PID

    How to file a good report: docs/bug-reports.md. Compare two bundles: dflash-diag diff A B.
    """

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("pid", type=pid_arg, metavar="PID", nargs="?",
                            help="the process to snapshot (or --node: the job's ranks on this machine)")
        add_target_args(parser, pid_help=None)
        add_window_args(parser, duration_help="seconds of stack sampling for thread states and findings (doctor's "
                                              "window: default 5; the whole snapshot takes about this plus 1 s)")
        parser.add_argument("-o", "--output", metavar="FILE", type=output_path_arg,
                            help="where to write (default: ./dflash-diag-snapshot-PID-TIME.tar.gz)")
        parser.add_argument("--dir", action="store_true", help="write a directory instead of a .tar.gz")
        parser.add_argument("--force", action="store_true", help="overwrite an existing output")
        parser.add_argument("--json", action="store_true", help="print the result (path, findings, missing) as JSON")
        parser.add_argument("--node", action="store_true",
                            help="no PID: snapshot the job's ranks that run on this machine (the one group of ranks "
                                 "found, or --job-id's), for a helper started on every node (srun --overlap, "
                                 "kubectl exec; docs/jobs.md)")
        parser.add_argument("--job-id", metavar="ID", help="with --node: the job whose ranks to take: its "
                            "SLURM_JOB_ID, TORCHELASTIC_RUN_ID (torchrun --rdzv-id) or MASTER_ADDR:MASTER_PORT")

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        from dflash_diag.observe import check_reachable
        from dflash_diag.snapshot import take_snapshot

        window = window_from_args(args)
        if args.node:
            args.pid, args.job = _node_rank_pid(args), True
        elif args.pid is None:
            raise CommandError("give the PID to snapshot, or --node for the job's ranks on this machine", ExitCode.USAGE)
        elif args.job_id is not None:
            raise CommandError("--job-id goes with --node (a PID names its job already)", ExitCode.USAGE)
        target = target_from_args(args)
        # Refuse early what can never work (no such process, no py-spy, another user's process, not Python): an
        # empty bundle helps nobody. A hung or dying process passes this check and gets what can still be read.
        check_reachable(target)
        output = Path(args.output) if args.output is not None else None
        if output is not None and not args.dir and not output.name.endswith((".tar.gz", ".tgz")):
            raise CommandError(f"{shown(output)}: a bundle file must end in .tar.gz (or use --dir for a directory)",
                               ExitCode.USAGE)
        if not args.json and sys.stderr.isatty():
            print(f"snapshot of {target.label}: sampling {window.duration_s:g} s ...", file=sys.stderr)
        result = take_snapshot(target, window=window, output=output, as_dir=args.dir, force=args.force)
        if args.json:
            dump_json({"path": shown(result.path), "elapsed_s": round(result.elapsed_s, 3),
                       "alive_at_end": result.alive_at_end,
                       "findings": [finding_json(f) for f in result.findings],
                       "missing": [{"what": w, "why": y} for w, y in result.missing]})
            return ExitCode.OK
        serious = [f for f in result.findings if f.severity.label in ("warning", "critical")]
        print(f"wrote {shown(result.path)} in {result.elapsed_s:.1f} s: {len(result.findings)} findings"
              f" ({len(serious)} warning or critical)"
              + ("" if result.alive_at_end else "; the process exited during the snapshot"))
        for line in plain_lines((line for f in serious[:5] for line in finding_lines(finding_json(f), "claim")), "  "):
            print(shown(line))
        for what, why in result.missing:
            print(f"  missing: {shown(what)}: {shown(why)}", file=sys.stderr)
        return ExitCode.OK


def _node_rank_pid(args: argparse.Namespace) -> int:
    """--node: a rank of the one job on this machine (its launcher and peers are found from it, as for a PID)."""
    from dflash_diag.model.common import NA
    from dflash_diag.sources.noderanks import find_node_jobs

    if args.pid is not None:
        raise CommandError("--node takes no PID: it finds the job's ranks on this machine", ExitCode.USAGE)
    if args.job is False:
        raise CommandError("--node snapshots a job: leave out --no-job", ExitCode.USAGE)
    jobs = find_node_jobs(args.job_id)
    if isinstance(jobs, NA):
        raise CommandError(jobs.reason, ExitCode.NO_PROCESS)
    if len(jobs) > 1:
        groups = "; ".join(f"ranks {','.join(map(str, j.ranks[:8]))} under PID {j.parent_pid}" for j in jobs[:6])
        raise CommandError(f"{len(jobs)} groups of ranks run on this machine ({groups}): name the job with --job-id "
                           "ID, or give one launcher's PID instead of --node", ExitCode.USAGE)
    return jobs[0].rank_pids[0]
