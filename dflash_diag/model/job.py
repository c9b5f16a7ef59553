"""A distributed job seen as one: a launcher (``torchrun``) and its ranks, each a process with its threads and its
worker processes, sampled in one window; and what the analysis makes of it (one row per rank, the job's findings).

Found by ``sources.job`` (the process tree and each rank's RANK / LOCAL_RANK / WORLD_SIZE from /proc), sampled by
``sources.jobcollect``, analysed by ``analysis.job``; read by ``doctor``, ``top``, ``snapshot``, ``record`` and
``export`` (docs/jobs.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from dflash_diag.model.analysis import PHASE_STEADY, Analysis
from dflash_diag.model.evidence import ProcessFacts
from dflash_diag.model.findings import Finding, Headline, Severity, healthy
from dflash_diag.model.mailbox import MailboxVerdict, MailboxWindow
from dflash_diag.model.observation import Observation

# What the PID the user named turned out to be.
ASKED_LAUNCHER = "launcher"  # the launcher (torchrun, torch.distributed.run): its children are the ranks
ASKED_RANK = "rank"  # one rank: its launcher (the parent) and the peers were found from it
ASKED_PROCESS = "process"  # a rank without a launcher we can see (started by hand, or another launcher's child)


@dataclass(frozen=True, slots=True)
class RankIdentity:
    """One rank process, as its environment (set by the launcher) names it. None: the variable was not set."""

    pid: int
    start_ticks: int | None  # with the PID, identifies the process (PIDs are reused)
    rank: int | None  # RANK: the global rank
    local_rank: int | None  # LOCAL_RANK: the rank on this node
    world_size: int | None  # WORLD_SIZE
    local_world_size: int | None  # LOCAL_WORLD_SIZE: ranks the launcher started on this node
    restart_count: int | None = None  # TORCHELASTIC_RESTART_COUNT: how often the launcher restarted the group
    max_restarts: int | None = None  # TORCHELASTIC_MAX_RESTARTS
    workers: tuple[int, ...] = ()  # its Python child processes (data-loader workers) when the job was found

    @property
    def label(self) -> str:
        """``rank 2``, or ``PID 1234`` for a process without a RANK."""
        return f"rank {self.rank}" if self.rank is not None else f"PID {self.pid}"


@dataclass(frozen=True, slots=True)
class JobTopology:
    """The launcher and the ranks it started on this machine (or the peers of a rank without a launcher)."""

    asked_pid: int
    asked: str  # ASKED_*
    launcher_pid: int | None
    launcher_cmdline: tuple[str, ...]  # redacted
    ranks: tuple[RankIdentity, ...]  # by rank, then PID
    notes: tuple[str, ...] = ()  # what could not be read, ranks on other nodes

    @property
    def world_size(self) -> int | None:
        sizes = {r.world_size for r in self.ranks if r.world_size is not None}
        return max(sizes) if sizes else None

    @property
    def local_world_size(self) -> int | None:
        sizes = {r.local_world_size for r in self.ranks if r.local_world_size is not None}
        return max(sizes) if sizes else None

    @property
    def missing_local_ranks(self) -> tuple[int, ...]:
        """Local ranks the launcher started (LOCAL_WORLD_SIZE) that no live process holds now."""
        size = self.local_world_size
        if size is None or self.launcher_pid is None:
            return ()
        held = {r.local_rank for r in self.ranks if r.local_rank is not None}
        return tuple(i for i in range(size) if i not in held)

    @property
    def restart_count(self) -> int | None:
        counts = [r.restart_count for r in self.ranks if r.restart_count is not None]
        return max(counts) if counts else None


@dataclass(frozen=True, slots=True)
class JobObservation:
    """Every rank of a job sampled over one window: one :class:`Observation` per rank, in the topology's order."""

    topology: JobTopology
    ranks: tuple[Observation, ...]
    started_wall_s: float
    window_s: float
    launcher_alive: bool | None  # None: no launcher
    launcher: ProcessFacts | None = None  # the launcher's run state and stderr (its report of failed ranks)
    warnings: tuple[str, ...] = ()
    now_wall_s: float | None = None  # what the analysis takes as "now" (each rank's observation holds the same)
    # Every rank on every node as its probes posted it to the job's store over the window (model.mailbox); a string:
    # why it could not be read; None: not read (no rank elsewhere, or no store address in the ranks' environment).
    mailbox: MailboxWindow | str | None = None

    @property
    def judged_at_wall_s(self) -> float:
        """The wall-clock time the analysis takes as "now": recorded with the observation, else the window's end."""
        return self.now_wall_s if self.now_wall_s is not None else self.started_wall_s + self.window_s


@dataclass(frozen=True, slots=True)
class CollectiveWait:
    """A collective a rank's thread was in: the torch.distributed call and the program's line that made it."""

    op: str  # all_reduce, barrier, wait (on a work handle), init_process_group ...
    site: str  # the program's innermost frame: "train_step (train.py:40)"; "" when none
    share: float  # of the rank's samples (0..1)


@dataclass(frozen=True, slots=True)
class ProbeCollective:
    """What the ``collectives`` probe of one rank published: its sequence of collective calls."""

    entered: int  # collective calls entered so far (the sequence number of the newest)
    completed: int  # ... and returned from
    current_op: str | None  # the call it is in now (None: none)
    current_seq: int | None
    current_for_s: float | None  # how long it has been in it, at the board's time
    last_op: str | None  # the newest call it returned from
    in_collectives_s: float | None  # time spent inside collective calls since the probe armed
    backend: str | None
    entered_in_window: int | None = None  # calls entered between the window's first and newest board
    # (sequence number, operation) of the calls the window's boards listed as recent, oldest first
    recent: tuple[tuple[int, str], ...] = ()
    from_start: bool = False  # numbered from the rank's first call: the numbers compare across ranks


@dataclass(frozen=True, slots=True)
class RankSummary:
    """One rank in one row: where it is, how much of its time goes to waiting on its peers, what limits it."""

    identity: RankIdentity
    alive: bool
    n_samples: int
    thread: str  # the thread that makes the collective calls (else the busiest): the rank's training thread
    collective_share: float  # of that thread's samples, in a collective call
    collective: CollectiveWait | None  # the one it waits in most
    now: CollectiveWait | None  # the one it is in at the newest sample (None: not in one)
    computing_share: float  # of that thread's samples, working (python, native, compile, recompute)
    hot: str  # where that thread computes: "augment (data.py:12) 70%"; "" when it does not
    where: str  # its innermost program frame at the newest sample
    progress: bool  # anything moved in the rank over the window (the wait-for graph's judgement)
    step: int | None  # the probes' step counter, when the rank runs under probes
    probe: ProbeCollective | None  # the collectives probe's readings, when the rank runs under probes
    headline: str  # the rank's own analysis' headline ("" when none)
    severity: Severity | None  # of that headline
    cpu_pct: float | None  # % of one core the rank used over the window
    workers: int  # Python child processes sampled beside it
    exited: bool = False  # it exited during the window


@dataclass(frozen=True, slots=True)
class JobAnalysis:
    """What the job does: each rank's own analysis, one summary row per rank, the job's findings and headline."""

    observation: JobObservation
    ranks: tuple[Analysis, ...]  # in the topology's order
    summaries: tuple[RankSummary, ...]
    findings: tuple[Finding, ...]  # the job's findings, then each rank's (the claim says which rank)
    headline: Headline | None
    phase: str = PHASE_STEADY
    errors: tuple[str, ...] = ()
    mailbox: MailboxVerdict | None = None  # every rank on every node, as the job's mailbox showed it

    @property
    def healthy(self) -> bool:
        """No finding at warning level or above (of the job, or of any rank)."""
        return healthy(self.findings)
