"""Find the job a PID belongs to: the launcher (``torchrun``) and the ranks it started, from the process tree and
each process's environment (read from /proc like the rest: bounded, validated, never shown).

A launcher sets RANK, LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE in every rank's environment (torchrun, the
older ``torch.distributed.launch``, ``accelerate launch`` and DeepSpeed's launcher all do); torchrun adds
TORCHELASTIC_RESTART_COUNT and TORCHELASTIC_MAX_RESTARTS. So:

- a PID whose environment holds a valid RANK / LOCAL_RANK is a rank; its parent is its launcher when the parent
  is not a rank itself and has other rank children of the same job (same TORCHELASTIC_RUN_ID and MASTER_PORT);
- any other PID is searched down to ``MAX_DEPTH`` levels (``dflash-diag run`` -> torchrun -> ranks, a shell
  script -> torchrun -> ranks) for rank processes; their common parent is the launcher.

Only ranks on this machine are visible: the others (WORLD_SIZE > the ranks found) are named in a note. What the
environment holds is used to group and number processes; no value of it leaves this module but the numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from dflash_contract import proc
from dflash_contract.redact import secret_values
from dflash_diag.errors import AttachError
from dflash_diag.model import Maybe
from dflash_diag.model.job import ASKED_LAUNCHER, ASKED_PROCESS, ASKED_RANK, JobTopology, RankIdentity
from dflash_diag.model.text import printable
from dflash_diag.sources import procfs
from dflash_diag.sources.redaction import ProcessRedactor

MAX_DEPTH = 3  # dflash-diag run -> torchrun -> ranks is two; a shell script in front makes three
MAX_VISITED = 512  # processes looked at, at most, below the PID asked about
MAX_RANKS = 1024  # ranks of one job on one machine, at most (8 per GPU node is usual)
MAX_RANK_VALUE = 1 << 20  # RANK / WORLD_SIZE above this are not a launcher's
MAX_WORKERS_LISTED = 8  # Python children of a rank named in the topology
_RANK_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")
# Two ranks are of one job when these agree (launchers set them; a rank started by hand may lack them).
_JOB_KEY_VARS = ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE")


def _int_var(env: Mapping[str, str], name: str, low: int, high: int) -> int | None:
    """A small non-negative integer from the environment, or None when unset or not one (``" 3"``, ``3.0``,
    ``-1``, a 40-digit number are not)."""
    text = env.get(name)
    if text is None or not (0 < len(text) <= 8 and text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value if low <= value <= high else None


def rank_identity(pid: int, env: Mapping[str, str], start_ticks: int | None) -> RankIdentity | None:
    """The rank a process is, from its environment; None when it is not one (no valid RANK or LOCAL_RANK, or a
    rank outside its WORLD_SIZE)."""
    rank = _int_var(env, "RANK", 0, MAX_RANK_VALUE)
    local = _int_var(env, "LOCAL_RANK", 0, MAX_RANK_VALUE)
    world = _int_var(env, "WORLD_SIZE", 1, MAX_RANK_VALUE)
    local_world = _int_var(env, "LOCAL_WORLD_SIZE", 1, MAX_RANK_VALUE)
    if rank is None and local is None:
        return None
    if (rank is not None and world is not None and rank >= world) or (
            local is not None and local_world is not None and local >= local_world):
        return None  # numbers no launcher writes: not a rank we can place
    return RankIdentity(pid=pid, start_ticks=start_ticks, rank=rank, local_rank=local, world_size=world,
                        local_world_size=local_world,
                        restart_count=_int_var(env, "TORCHELASTIC_RESTART_COUNT", 0, MAX_RANK_VALUE),
                        max_restarts=_int_var(env, "TORCHELASTIC_MAX_RESTARTS", 0, MAX_RANK_VALUE))


def _job_key(env: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(env.get(name, "")[:256] for name in _JOB_KEY_VARS)


@dataclass(frozen=True)
class ProcessTree:
    """The readers ``find_job`` uses; the real /proc by default, fakes in tests."""

    environ: Callable[[int], Maybe[dict[str, str]]] = procfs.read_environ
    children: Callable[[int], tuple[int, ...]] = field(default_factory=lambda: procfs.all_children)
    python_children: Callable[[int], tuple[int, ...]] = procfs.python_children
    stat: Callable[[int], proc.Stat | None] = proc.read_stat
    cmdline: Callable[[int], tuple[str, ...]] = procfs.read_cmdline


def _environ(tree: ProcessTree, pid: int) -> dict[str, str] | None:
    try:
        env = tree.environ(pid)
    except (AttachError, OSError):
        return None  # it exited meanwhile, or its /proc entry cannot be read (a kernel thread, another namespace)
    return env if isinstance(env, dict) else None


def _identity(tree: ProcessTree, pid: int) -> tuple[RankIdentity, tuple[str, ...]] | None:
    env = _environ(tree, pid)
    if env is None:
        return None
    stat = tree.stat(pid)
    if stat is None or stat.state in ("Z", "X"):
        return None
    found = rank_identity(pid, env, stat.start_time_ticks)
    return (found, _job_key(env)) if found is not None else None


def _with_workers(tree: ProcessTree, rank: RankIdentity) -> RankIdentity:
    return replace(rank, workers=tree.python_children(rank.pid)[:MAX_WORKERS_LISTED])


def find_job(pid: int, tree: ProcessTree | None = None) -> JobTopology | None:
    """The job ``pid`` launches or belongs to; None when it is neither a rank nor has ranks below it."""
    tree = tree or ProcessTree()
    if not proc.is_valid_pid(pid):
        return None
    own = _identity(tree, pid)
    if own is not None:
        return _from_rank(tree, pid, *own)
    return _from_launcher(tree, pid)


def _from_rank(tree: ProcessTree, pid: int, identity: RankIdentity, key: tuple[str, ...],
               depth: int = 0) -> JobTopology:
    stat = tree.stat(pid)
    parent = stat.ppid if stat is not None else 0
    above = _identity(tree, parent) if proc.is_valid_pid(parent) and parent > 1 else None
    if above is not None and above[1] == key and above[0].rank == identity.rank and depth < MAX_DEPTH:
        # A data-loader worker inherits its rank's environment: the job is its rank's.
        job = _from_rank(tree, parent, above[0], key, depth + 1)
        return replace(job, notes=(*job.notes, f"PID {pid} is a worker process of {above[0].label} (PID {parent})"))
    peers: list[RankIdentity] = []
    if proc.is_valid_pid(parent) and parent > 1 and above is None:
        for child in _children(tree, parent):
            found = _identity(tree, child)
            if found is not None and found[1] == key:
                peers.append(found[0])
    if len(peers) >= 1 and any(p.pid == pid for p in peers):
        return _topology(tree, pid, ASKED_RANK, parent, peers)
    return _topology(tree, pid, ASKED_PROCESS, None, [identity])


def _from_launcher(tree: ProcessTree, pid: int) -> JobTopology | None:
    """Ranks below ``pid`` (breadth first, a few levels), grouped by their parent: the first such group is the job."""
    level = [pid]
    visited = 0
    found_levels: list[dict[int, list[tuple[RankIdentity, tuple[str, ...]]]]] = []
    for _ in range(MAX_DEPTH):
        groups: dict[int, list[tuple[RankIdentity, tuple[str, ...]]]] = {}
        next_level: list[int] = []
        for parent in level:
            for child in _children(tree, parent):
                visited += 1
                if visited > MAX_VISITED:
                    break
                found = _identity(tree, child)
                if found is not None:
                    groups.setdefault(parent, []).append(found)
                else:
                    next_level.append(child)
        if groups:
            found_levels.append(groups)
            if pid != 1:
                break  # the nearest ranks are the job
        level = next_level
        if not level or visited > MAX_VISITED:
            break
    if not found_levels:
        return None
    jobs = sum(len({m[1] for m in members}) for groups in found_levels for members in groups.values())
    if pid == 1 and jobs > 1:
        # PID 1 is the machine's (or a container's) init: every job runs below it. One job below it is a
        # container's; several are everyone's, none of them what `doctor 1` asked about.
        return None
    groups = found_levels[0]
    parent, members = next(iter(groups.items()))
    key = members[0][1]
    ranks = [m[0] for m in members if m[1] == key]
    others = len(groups) - 1 + sum(1 for m in members if m[1] != key)
    note = (f"{others} other group(s) of ranks run below PID {pid}: only those of PID {parent} are shown",) \
        if others else ()
    return _topology(tree, pid, ASKED_LAUNCHER, parent, ranks, note)


def _children(tree: ProcessTree, pid: int) -> tuple[int, ...]:
    try:
        return tuple(c for c in tree.children(pid) if proc.is_valid_pid(c))
    except (AttachError, OSError):
        return ()


def _topology(tree: ProcessTree, asked: int, how: str, launcher: int | None, ranks: list[RankIdentity],
              notes: tuple[str, ...] = ()) -> JobTopology:
    ranks = sorted(ranks, key=lambda r: (r.rank if r.rank is not None else MAX_RANK_VALUE, r.pid))[:MAX_RANKS]
    ranks = [_with_workers(tree, r) for r in ranks]
    cmdline: tuple[str, ...] = ()
    if launcher is not None:
        try:
            argv = tree.cmdline(launcher)
            cmdline = tuple(printable(a) for a in _launcher_redactor(tree, launcher, argv).argv(argv))
        except (AttachError, OSError):
            cmdline = ()
    out = list(notes)
    world = max((r.world_size for r in ranks if r.world_size is not None), default=None)
    if world is not None and world > len(ranks):
        out.append(f"WORLD_SIZE is {world}: {world - len(ranks)} rank(s) run elsewhere (another node, or exited) "
                   "and are not sampled; run dflash-diag there too")
    if how == ASKED_PROCESS:
        out.append(f"PID {asked} is a rank (RANK={ranks[0].rank}) without a launcher among its parents: only it is "
                   "sampled; point at the launcher, or at each rank, to see its peers")
    return JobTopology(asked_pid=asked, asked=how, launcher_pid=launcher, launcher_cmdline=cmdline,
                       ranks=tuple(ranks), notes=tuple(out))


def _launcher_redactor(tree: ProcessTree, launcher: int, argv: tuple[str, ...]) -> ProcessRedactor:
    """The launcher's command line is redacted like any process's: by the rules, then every secret value of its own
    argv and environment wherever else it appears in it (``--token X ... --mirror X``), as a single process's is."""
    return ProcessRedactor(secret_values(_environ(tree, launcher) or {}, argv))


_LAUNCHER_SCRIPTS = frozenset({"torchrun"})
_LAUNCHER_MODULES = frozenset({"torch.distributed.run", "torch.distributed.launch"})


def is_launcher_argv(argv: tuple[str, ...] | list[str]) -> bool:
    """``python .../torchrun ...`` or ``python -m torch.distributed.run ...`` (as the probes' bootstrap tells)."""
    args = list(argv[1:])
    while args and args[0].startswith("-") and args[0] not in ("-m", "-c", "-"):
        args = args[2:] if args[0] in ("-X", "-W") else args[1:]
    if len(args) >= 2 and args[0] == "-m":
        return args[1] in _LAUNCHER_MODULES
    return bool(args) and args[0] not in ("-c", "-") and args[0].rsplit("/", 1)[-1] in _LAUNCHER_SCRIPTS


def is_launcher_command(command: tuple[str, ...] | list[str]) -> bool:
    """A command line as typed (``torchrun ...``, ``python -m torch.distributed.run ...``) that starts ranks."""
    return bool(command) and (command[0].rsplit("/", 1)[-1] in _LAUNCHER_SCRIPTS or is_launcher_argv(command))


def job_processes(topology: JobTopology) -> tuple[int, ...]:
    """Every PID of the job: the ranks, in order."""
    return tuple(r.pid for r in topology.ranks)


def is_rank(pid: int) -> bool:
    """Whether the process's environment names it a rank (the CLI's quick test, before a job is looked for)."""
    try:
        env = procfs.read_environ(pid)
    except (AttachError, OSError):
        return False
    return isinstance(env, dict) and rank_identity(pid, env, None) is not None


__all__ = ["ProcessTree", "find_job", "is_launcher_argv", "is_launcher_command", "is_rank", "job_processes", "rank_identity"]
