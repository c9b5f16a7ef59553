"""Observations of the scheduler's view for the rule tests: Python threads that compute in torch ops (their stacks),
native pool threads (only /proc sees them), children, the cgroup, the machine's load, the environment, a board."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from findings_builders import NOW_S, board, stack, thread_sample

from dflash_diag.model import NA, Board, Frame, Observation, ProcThreadSample
from dflash_diag.model.evidence import ProcessFacts
from dflash_diag.model.sched import (
    ChildSched,
    EnvSetting,
    OsFacts,
    OutsideWait,
    Pressure,
    ProcessIo,
    SchedSample,
    TaskSched,
)

TORCH_OP = Frame("Linear.forward", "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", 134)
SLEEP_LINE = Frame("main", "/app/train.py", 60)
PID = 4242
_NO_CGROUP = NA("no cgroup")
_NO_BOARD = NA("no board")


@dataclass
class Thread:
    name: str
    tid: int
    run: float  # share of the window on a CPU
    wait: float  # share of the window runnable, waiting for a CPU
    python: bool = True
    cpus: str = "0-1"
    vol_per_s: float = 10.0
    invol_per_s: float = 10.0
    frame: Frame = field(default_factory=lambda: Frame("fit_member", "/app/train.py", 40))
    computing: bool = True  # its stacks: in a torch op (True) or asleep at a sleep line
    stack_frames: tuple[Frame, ...] | None = None  # its stacks' frames, innermost first (overrides the above)
    nice: int = 0
    policy: int = 0
    gil: bool = False  # computing in Python code (holding the GIL, its own frame on top), not in a torch op
    kernel: float = 0.0  # part of ``run`` spent in the kernel (stime)
    minflt_per_s: float = 0.0  # page faults a second (minor, major)
    majflt_per_s: float = 0.0
    syscall: str | None = None  # the blocking call /proc's sweeps catch it in (when it waits)
    comm: str = "python"  # the kernel's name for it (a native pool's threads inherit the process's)


def scenario(threads: Sequence[Thread], *, window_s: float = 4.0, machine: int = 2, process_cpus: str = "0-1",
             procs_running: int | None = None, children: Sequence[tuple[int, int, float, float]] = (),
             children_started: Sequence[tuple[int, int, float, float]] = (), cgroup: Any = _NO_CGROUP,
             cgroup_end: Any = None, pressure: Sequence[Pressure] = (), pressure_end: Sequence[Pressure] = (),
             env: Sequence[tuple[str, str, str]] = (), boards: Sequence[Board] | NA = _NO_BOARD,
             outside_waits: Sequence[OutsideWait] = (), stderr: str | None = None, samples: int = 12,
             d_state: Sequence[str] = (), children_env: Sequence[tuple[str, str, str]] = (),
             thp_mode: str = "", clocksource: str = "", timerslack_ns: int | None = None,
             io: tuple[ProcessIo, ProcessIo] | None = None, lines: dict[str, str] | None = None) -> Observation:
    """``children``: (pid, threads, run share, wait share) present all window; ``children_started``: the same,
    appearing at the end; ``children_env``: (name, value, "child PID") of each child's environment."""
    stacks = []
    for i in range(samples):
        t = window_s * i / (samples - 1)
        rows = []
        for th in threads:
            if not th.python:
                continue
            if th.stack_frames is not None:
                rows.append(thread_sample(th.name, th.stack_frames, tid=th.tid, active=False))
            elif th.computing and th.gil:
                rows.append(thread_sample(th.name, (th.frame,), tid=th.tid, active=True, gil=True))
            elif th.computing:
                rows.append(thread_sample(th.name, (TORCH_OP, th.frame), tid=th.tid, active=True))
            else:
                rows.append(thread_sample(th.name, (Frame("main", "/app/train.py", 60),), tid=th.tid, active=False))
        stacks.append(stack(rows, t=t))
    proc = tuple(_sweep(threads, t, d_state) for t in (0.0, window_s / 2, window_s))
    sched = (SchedSample(monotonic_s=0.0, tasks=_tasks(threads, 0.0), children=_children(children, 0.0),
                         cgroup=cgroup, pressure=tuple(pressure), procs_running=procs_running,
                         children_listed=len(children), io=io[0] if io else None),
             SchedSample(monotonic_s=window_s, tasks=_tasks(threads, window_s),
                         children=_children(children, window_s) + _children(children_started, window_s),
                         cgroup=cgroup_end if cgroup_end is not None else cgroup,
                         pressure=tuple(pressure_end or pressure), procs_running=procs_running,
                         children_listed=len(children) + len(children_started), io=io[1] if io else None))
    facts = OsFacts(machine_cpus=machine, process_cpus=process_cpus,
                    process_cpu_count=len(_cpus(process_cpus)), env=tuple(EnvSetting(*e) for e in env),
                    libraries=("libgomp",), python_version="3.11",
                    children_env=tuple(EnvSetting(*e) for e in children_env), thp_mode=thp_mode,
                    clocksource=clocksource, timerslack_ns=timerslack_ns)
    process = ProcessFacts(state="S", start_wall_s=NOW_S - 600, stderr_target="/tmp/log", stderr_tail=stderr)
    return Observation(
        pid=PID, cmdline=("python", "train.py"), started_wall_s=NOW_S - window_s, window_s=window_s,
        stacks=tuple(stacks), proc=proc, gpus=NA("no NVML"),
        boards=tuple(boards) if not isinstance(boards, NA) else boards, process_alive=True, warnings=(),
        source_lines={"/app/train.py:60": "        time.sleep(2.0)", **(lines or {})}, process=process,
        sched=sched, os_facts=facts, outside_waits=tuple(outside_waits))


def _cpus(text: str) -> set[int]:
    from dflash_diag.model.sched import parse_cpu_list

    return set(parse_cpu_list(text))


def _sweep(threads: Sequence[Thread], t: float, d_state: Sequence[str]) -> tuple[ProcThreadSample, ...]:
    return tuple(ProcThreadSample(tid=th.tid, comm=th.comm,
                                  state="D" if th.name in d_state else ("S" if _waits(th) else "R"),
                                  utime_s=(th.run - th.kernel) * t, stime_s=th.kernel * t,
                                  run_ns=int(th.run * t * 1e9), runq_wait_ns=int(th.wait * t * 1e9), monotonic_s=t,
                                  nice=th.nice, policy=th.policy, minflt=int(th.minflt_per_s * t),
                                  majflt=int(th.majflt_per_s * t), syscall=th.syscall) for th in threads)


def _waits(th: Thread) -> bool:
    return th.stack_frames is not None or (th.python and not th.computing)


def _tasks(threads: Sequence[Thread], t: float) -> tuple[TaskSched, ...]:
    return tuple(TaskSched(tid=th.tid, comm=th.comm, voluntary_switches=int(th.vol_per_s * t),
                           involuntary_switches=int(th.invol_per_s * t), cpus_allowed=th.cpus) for th in threads)


def _children(children: Sequence[tuple[int, int, float, float]], t: float) -> tuple[ChildSched, ...]:
    return tuple(ChildSched(pid=pid, comm="python", threads=n, run_ns=int(run * n * t * 1e9),
                            runq_wait_ns=int(wait * n * t * 1e9), start_ticks=pid) for pid, n, run, wait in children)


def pools(n: int, *, run: float, wait: float, first_tid: int = 1000) -> list[Thread]:
    """``n`` native pool threads (OpenMP workers: /proc sees them, py-spy does not)."""
    return [Thread(f"omp-{i}", first_tid + i, run, wait, python=False, vol_per_s=3000.0, invol_per_s=200.0)
            for i in range(n)]


def ensemble(members: int = 4, *, run: float = 0.05, wait: float = 0.6) -> list[Thread]:
    """The issue's example's Python threads: a sleeping main thread and ``members`` computing pool threads."""
    return [Thread("MainThread", PID, 0.001, 0.0, computing=False)] + [
        Thread(f"member_{i}", 100 + i, run, wait, vol_per_s=3000.0, invol_per_s=600.0) for i in range(members)]


def settings_board(payload: dict[str, Any], *, wall_time_s: float = NOW_S, seq: int = 10,
                   gil: dict[str, Any] | None = None, syncs: dict[str, Any] | None = None) -> Board:
    probes: dict[str, dict[str, Any]] = {"settings": payload}
    if gil is not None:
        probes["gil"] = gil
    if syncs is not None:
        probes["syncs"] = syncs
    return board(probes, {}, wall_time_s=wall_time_s, seq=seq)
