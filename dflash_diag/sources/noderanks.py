"""The ranks of a job that run on this machine, found without a PID: for a helper started on every node of a job
(``srun --jobid ID --overlap --ntasks-per-node 1 dflash-diag snapshot --node``, ``kubectl exec POD -- dflash-diag
snapshot --node``), which knows the job but no process of it (docs/jobs.md, "Beyond one host").

Every process of this user (all of them for root) whose environment names it a rank (a valid RANK or LOCAL_RANK,
as a launcher sets them) is a candidate; ``job_id`` keeps those of one job (its SLURM_JOB_ID, TORCHELASTIC_RUN_ID
or MASTER_ADDR:MASTER_PORT). A rank's data-loader workers inherit its environment: a candidate whose parent is a
rank of the same RANK is a worker, not a rank. The ranks are grouped by their parent (the launcher: torchrun,
slurmstepd, a shell). The environment is read as ``sources.procfs`` reads it (bounded) and only those few
variables are compared; nothing of it is shown.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dflash_contract import proc
from dflash_diag.errors import AttachError
from dflash_diag.model.common import NA, Maybe
from dflash_diag.sources import procfs

MAX_PROCESSES = 65536  # /proc entries looked at, at most
_JOB_VARS = ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID")


@dataclass(frozen=True, slots=True)
class NodeJob:
    """One group of ranks on this machine: their common parent and the ranks' PIDs (by rank)."""

    parent_pid: int
    rank_pids: tuple[int, ...]
    ranks: tuple[int, ...]


def _small(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() and len(text) <= 8 else None


def _job_ids(env: dict[str, str]) -> set[str]:
    ids = {env[name] for name in _JOB_VARS if env.get(name)}
    if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        ids.add(f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}")
    return ids


def _pids(proc_root: str = "/proc") -> Iterable[int]:
    try:
        names = os.listdir(proc_root)
    except OSError:
        return ()
    return [int(n) for n in names[:MAX_PROCESSES] if n.isdigit()]


def find_node_jobs(job_id: str | None = None, *, pids: Callable[[], Iterable[int]] = _pids,
                   environ: Callable[[int], Maybe[dict[str, str]]] = procfs.read_environ,
                   parent: Callable[[int], int | None] | None = None,
                   owner: Callable[[int], int | None] = proc.owner_uid,
                   uid: int | None = None) -> Maybe[tuple[NodeJob, ...]]:
    """The groups of ranks on this machine (of job ``job_id`` when given), largest first; NA when there is none."""
    me = os.getuid() if uid is None else uid
    parent = parent or _ppid
    found: dict[int, tuple[int, str | None, int]] = {}  # pid -> (rank, its RANK text, parent)
    for pid in pids():
        if pid == os.getpid() or (me != 0 and owner(pid) != me):
            continue
        try:
            env = environ(pid)
        except (AttachError, OSError):
            continue  # gone meanwhile
        if isinstance(env, NA):
            continue
        rank = _small(env.get("RANK"))
        if rank is None:
            rank = _small(env.get("LOCAL_RANK"))
        if rank is None or (job_id is not None and job_id not in _job_ids(env)):
            continue
        ppid = parent(pid)
        if ppid is not None:
            found[pid] = (rank, env.get("RANK"), ppid)
    ranks = {pid: row for pid, row in found.items()
             if not (row[2] in found and found[row[2]][:2] == row[:2])}  # a worker: its parent is its rank
    groups: dict[int, list[tuple[int, int]]] = {}
    for pid, (rank, _, ppid) in ranks.items():
        groups.setdefault(ppid, []).append((rank, pid))
    if not groups:
        which = f"of job {job_id} " if job_id is not None else ""
        return NA(f"no rank {which}runs on this machine (no process of this user has RANK or LOCAL_RANK "
                  "in its environment" + (f" and {job_id} as SLURM_JOB_ID, TORCHELASTIC_RUN_ID or "
                                          "MASTER_ADDR:MASTER_PORT" if job_id is not None else "") + ")")
    jobs = [NodeJob(parent_pid=ppid, rank_pids=tuple(p for _, p in sorted(members)),
                    ranks=tuple(r for r, _ in sorted(members))) for ppid, members in groups.items()]
    return tuple(sorted(jobs, key=lambda j: (-len(j.ranks), j.parent_pid)))


def _ppid(pid: int) -> int | None:
    stat = proc.read_stat(pid)
    return stat.ppid if stat is not None else None
