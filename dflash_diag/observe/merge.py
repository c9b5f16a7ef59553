"""Several nodes' observations of one job as one (``doctor BUNDLE...``, pure).

Where the job's store cannot be reached, or its ranks run no probes, one helper per node writes that node's bundle
(``snapshot --node``, started by the scheduler: docs/jobs.md); each holds a job observation of its node's ranks.
Judged together they are one job: every rank's window side by side, so the rank the others wait for is seen
wherever it ran. The windows were taken by different helpers, a few seconds apart at best: the shares each rank's
window gives (in a collective, computing) compare across them; moments do not, and the merged observation says how
far apart the windows began.
"""

from __future__ import annotations

from dataclasses import replace

from dflash_diag.model.job import ASKED_PROCESS, JobObservation, JobTopology
from dflash_diag.model.mailbox import MailboxWindow
from dflash_diag.model.observation import Observation

WINDOWS_APART_NOTE_S = 30.0  # windows that began further apart than this are said to be far apart


class MergeError(ValueError):
    """Observations that are not one job's nodes (the message says which and why, in one line)."""


def _job_of(label: str, obs: Observation | JobObservation) -> JobObservation:
    if not isinstance(obs, JobObservation):
        raise MergeError(f"{label} holds one process (PID {obs.pid}), not a node's ranks: give each node's job "
                         "bundle (dflash-diag snapshot --node on every node)")
    return obs


def _world_size(label: str, job: JobObservation, world: int | None) -> int | None:
    size = job.topology.world_size
    if world is not None and size is not None and size != world:
        raise MergeError(f"{label}: WORLD_SIZE {size}, the others {world}: bundles of different jobs")
    return world if world is not None else size


def merge_node_observations(labelled: list[tuple[str, Observation | JobObservation]]) -> JobObservation:
    """One job observation of every node's ranks, by global rank; MergeError when they are not one job's nodes."""
    if len(labelled) < 2:
        raise MergeError("merging takes two or more node bundles")
    jobs = [(label, _job_of(label, obs)) for label, obs in labelled]
    world: int | None = None
    seen: dict[int, str] = {}
    rows = []
    for label, job in jobs:
        world = _world_size(label, job, world)
        for identity, obs in zip(job.topology.ranks, job.ranks, strict=True):
            if identity.rank is not None:
                if identity.rank in seen:
                    raise MergeError(f"rank {identity.rank} is in {seen[identity.rank]} and in {label}: give each "
                                     "node's bundle once")
                seen[identity.rank] = label
            rows.append((identity, obs))
    rows.sort(key=lambda row: (row[0].rank if row[0].rank is not None else 1 << 30, row[0].pid))
    starts = [job.started_wall_s for _, job in jobs]
    apart_s = max(starts) - min(starts)
    notes = [f"{len(jobs)} node bundles judged together ({', '.join(label for label, _ in jobs)}); their windows "
             f"began up to {apart_s:.1f} s apart"]
    if apart_s > WINDOWS_APART_NOTE_S:
        notes.append(f"the windows began {apart_s:.0f} s apart: a rank's share of its window compares across them, "
                     "a moment (who was where at once) does not")
    if world is not None and len(seen) < world:
        missing = sorted(set(range(world)) - set(seen))
        notes.append(f"{len(missing)} of WORLD_SIZE {world} ranks are in no bundle (ranks "
                     f"{', '.join(str(r) for r in missing[:16])}{' ...' if len(missing) > 16 else ''})")
    first = jobs[0][1]
    topology = JobTopology(asked_pid=first.topology.asked_pid, asked=ASKED_PROCESS, launcher_pid=None,
                           launcher_cmdline=(), ranks=tuple(identity for identity, _ in rows),
                           notes=tuple(notes) + tuple(n for _, job in jobs for n in job.topology.notes))
    mailbox = next((job.mailbox for _, job in jobs if isinstance(job.mailbox, MailboxWindow)), None)
    now = max((job.judged_at_wall_s for _, job in jobs), default=None)
    return JobObservation(
        topology=topology, ranks=tuple(replace(obs, now_wall_s=now) for _, obs in rows),
        started_wall_s=min(starts), window_s=max(job.window_s for _, job in jobs), launcher_alive=None,
        launcher=None, warnings=tuple(w for _, job in jobs for w in job.warnings), now_wall_s=now, mailbox=mailbox)
