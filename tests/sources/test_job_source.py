"""Finding a job from any of its PIDs (sources/job.py) on a fake process tree, and from a real one; the per-rank
rate of the job collector and its handling of a rank that cannot be sampled (sources/jobcollect.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dflash_contract.proc import Stat
from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.model import NA, Observation
from dflash_diag.model.job import ASKED_LAUNCHER, ASKED_PROCESS, ASKED_RANK
from dflash_diag.sources.config import SamplerConfig, SamplerIO
from dflash_diag.sources.job import ProcessTree, find_job, rank_identity
from dflash_diag.sources.jobcollect import MIN_RANK_RATE_HZ, JobCollector, rank_config


def _rank_env(rank: int, world: int = 3, port: str = "29500", **extra: str) -> dict[str, str]:
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
            "MASTER_ADDR": "localhost", "MASTER_PORT": port, "TORCHELASTIC_RUN_ID": "job-a",
            "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0", **extra}


class FakeTree:
    """PID -> (parent, environment, children, Python children)."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}
        self.env: dict[int, dict[str, str]] = {}
        self.kids: dict[int, list[int]] = {}

    def add(self, pid: int, parent: int, env: dict[str, str] | None = None) -> None:
        self.parent[pid] = parent
        self.env[pid] = env or {"PATH": "/usr/bin"}
        self.kids.setdefault(parent, []).append(pid)

    def tree(self) -> ProcessTree:
        def environ(pid: int) -> dict[str, str] | NA:
            if pid not in self.env:
                raise AttachError(f"no process {pid}", ExitCode.NO_PROCESS)
            return self.env[pid]

        def stat(pid: int) -> Stat | None:
            return Stat("python3", "S", self.parent[pid], 0, 0, 1000 + pid) if pid in self.parent else None

        return ProcessTree(environ=environ, children=lambda p: tuple(self.kids.get(p, ())),
                           python_children=lambda p: tuple(c for c in self.kids.get(p, ()) if c not in self.env
                                                           or "RANK" not in self.env[c]),
                           stat=stat, cmdline=lambda p: ("python3", "torchrun", "--nproc-per-node", "3", "t.py"))


@pytest.fixture
def torchrun_tree() -> FakeTree:
    """run (10) -> torchrun (20) -> ranks 31, 32, 33, each with a data-loader worker (41, 42, 43)."""
    t = FakeTree()
    t.add(10, 1)
    t.add(20, 10)
    for i, pid in enumerate((31, 32, 33)):
        t.add(pid, 20, _rank_env(i))
        t.add(41 + i, pid, _rank_env(i))  # a forked worker inherits the rank's environment
    return t


def test_the_launcher_finds_its_ranks_in_order_with_their_workers(torchrun_tree: FakeTree) -> None:
    job = find_job(20, torchrun_tree.tree())
    assert job is not None and job.asked == ASKED_LAUNCHER and job.launcher_pid == 20
    assert [(r.rank, r.pid) for r in job.ranks] == [(0, 31), (1, 32), (2, 33)]
    assert job.world_size == 3 and job.missing_local_ranks == ()
    assert job.launcher_cmdline[1] == "torchrun"


def test_the_launchers_command_line_loses_every_secret_it_knows_as_a_single_process_would(
        torchrun_tree: FakeTree) -> None:
    """A secret of the launcher's argv (``--api-token X``) also sits bare further on (``--mirror X``), one of its
    environment (``LAUNCH_DB_PASSWORD``) in a path: the rules alone miss both; the launcher's known values do not."""
    from dataclasses import replace

    torchrun_tree.env[20] = {"PATH": "/usr/bin", "LAUNCH_DB_PASSWORD": "launcherEnvPassw0rd"}
    argv = ("python3", "torchrun", "--nproc-per-node", "3", "t.py", "--api-token", "launcherArgToken0123",
            "--mirror", "launcherArgToken0123", "--out", "/runs/launcherEnvPassw0rd/ckpt")
    tree = replace(torchrun_tree.tree(), cmdline=lambda pid: argv)
    job = find_job(20, tree)
    assert job is not None and job.launcher_pid == 20
    shown = " ".join(job.launcher_cmdline)
    assert "launcherArgToken0123" not in shown and "launcherEnvPassw0rd" not in shown, shown
    assert job.launcher_cmdline[:5] == argv[:5] and "/runs/<redacted>/ckpt" in shown


def test_a_wrapper_above_the_launcher_finds_the_same_job(torchrun_tree: FakeTree) -> None:
    job = find_job(10, torchrun_tree.tree())  # dflash-diag run's PID, or a shell script's
    assert job is not None and job.launcher_pid == 20 and [r.pid for r in job.ranks] == [31, 32, 33]


def test_any_rank_finds_its_launcher_and_peers(torchrun_tree: FakeTree) -> None:
    job = find_job(32, torchrun_tree.tree())
    assert job is not None and job.asked == ASKED_RANK and job.asked_pid == 32 and job.launcher_pid == 20
    assert [r.rank for r in job.ranks] == [0, 1, 2]


def test_a_ranks_data_loader_worker_finds_its_ranks_job(torchrun_tree: FakeTree) -> None:
    job = find_job(42, torchrun_tree.tree())  # rank 1's worker: it inherited RANK=1
    assert job is not None and job.launcher_pid == 20 and [r.pid for r in job.ranks] == [31, 32, 33]
    assert any("PID 42 is a worker process of rank 1 (PID 32)" in n for n in job.notes)


def test_a_rank_without_a_launcher_is_a_job_of_one_with_a_note() -> None:
    t = FakeTree()
    t.add(50, 1, _rank_env(3, world=8))
    job = find_job(50, t.tree())
    assert job is not None and job.asked == ASKED_PROCESS and job.launcher_pid is None
    assert [r.rank for r in job.ranks] == [3]
    assert any("7 rank(s) run elsewhere" in n for n in job.notes) and any("without a launcher" in n for n in job.notes)


def test_a_missing_local_rank_is_counted(torchrun_tree: FakeTree) -> None:
    del torchrun_tree.env[32]  # rank 1 exited: /proc no longer has it
    torchrun_tree.kids[20].remove(32)
    job = find_job(31, torchrun_tree.tree())
    assert job is not None and job.missing_local_ranks == (1,)


def test_ranks_of_another_job_under_the_same_parent_are_left_out(torchrun_tree: FakeTree) -> None:
    torchrun_tree.add(34, 20, _rank_env(0, port="29999"))  # another job's rank 0 under the same parent
    job = find_job(20, torchrun_tree.tree())
    assert job is not None and [r.pid for r in job.ranks] == [31, 32, 33]
    assert any("other group" in n for n in job.notes)


def test_pid_1_with_several_jobs_below_it_is_no_job(torchrun_tree: FakeTree) -> None:
    """`doctor 1` on a machine where others run torchrun jobs: init is no launcher of theirs; a container whose
    init has one job below it still is that job's."""
    torchrun_tree.add(50, 1)
    for i, pid in enumerate((51, 52)):
        torchrun_tree.add(pid, 50, _rank_env(i, world=2, port="29999"))
    assert find_job(1, torchrun_tree.tree()) is None
    alone = FakeTree()
    alone.add(20, 1)
    for i, pid in enumerate((31, 32)):
        alone.add(pid, 20, _rank_env(i, world=2))
    job = find_job(1, alone.tree())
    assert job is not None and [r.pid for r in job.ranks] == [31, 32]


def test_a_process_that_is_no_job_is_none() -> None:
    t = FakeTree()
    t.add(60, 1)
    t.add(61, 60)
    assert find_job(60, t.tree()) is None
    assert find_job(0, t.tree()) is None


@pytest.mark.parametrize("env", [
    {"RANK": "x"}, {"RANK": "-1"}, {"RANK": " 1"}, {"RANK": "1.0"}, {"RANK": "9" * 40},
    {"RANK": "4", "WORLD_SIZE": "4"},  # a rank outside its world
    {"LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"},
    {"WORLD_SIZE": "4"},  # no rank at all
])
def test_environment_values_no_launcher_writes_are_not_a_rank(env: dict[str, str]) -> None:
    assert rank_identity(1, env, None) is None


def test_restart_counts_are_read() -> None:
    r = rank_identity(7, _rank_env(1, TORCHELASTIC_RESTART_COUNT="2", TORCHELASTIC_MAX_RESTARTS="5"), 123)
    assert r is not None and (r.rank, r.restart_count, r.max_restarts, r.start_ticks) == (1, 2, 5, 123)


def test_the_job_burst_is_shared_between_the_ranks() -> None:
    burst = SamplerConfig(rate_hz=20.0, burst=True)
    assert rank_config(burst, 4).rate_hz == 5.0
    assert rank_config(burst, 8).rate_hz == MIN_RANK_RATE_HZ
    assert rank_config(burst, 1).rate_hz == 20.0
    asked = SamplerConfig(rate_hz=3.0)
    assert rank_config(asked, 4) is asked  # a rate asked for is per rank


class _FakeCollector:
    def __init__(self, pid: int, config: SamplerConfig, io: SamplerIO) -> None:
        self.pid, self.config = pid, config

    def collect(self, duration_s: float, progress: object = None) -> Observation:
        if self.pid == 32:
            raise AttachError("py-spy: permission denied", ExitCode.PERMISSION)
        return Observation(pid=self.pid, cmdline=(), started_wall_s=0.0, window_s=duration_s, stacks=(), proc=(),
                           gpus=NA("fake"), boards=NA("fake"), process_alive=True, warnings=())


def test_a_rank_that_cannot_be_sampled_is_an_empty_observation_that_says_why(torchrun_tree: FakeTree) -> None:
    job = find_job(20, torchrun_tree.tree())
    assert job is not None
    seen: list[int] = []
    collector = JobCollector(job, SamplerConfig(rate_hz=20.0, burst=True), io=SamplerIO(),
                             factory=lambda pid, config, io: (seen.append(pid), _FakeCollector(pid, config, io))[1],
                             enrich=lambda pid, obs: obs, launcher_facts=lambda pid: None)
    out = collector.collect(0.5)
    assert sorted(seen) == [31, 32, 33] and collector.rank_rate_hz == pytest.approx(20.0 / 3)
    assert [o.pid for o in out.ranks] == [31, 32, 33]
    assert out.ranks[1].stacks == () and "permission denied" in out.ranks[1].warnings[0]
    assert out.ranks[0].warnings == ()


@pytest.mark.slow
def test_a_real_torchrun_job_is_found_from_the_launcher_and_from_a_rank(tmp_path: Path) -> None:
    script = tmp_path / "wait.py"
    script.write_text("import time\ntime.sleep(60)\n")
    launcher = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                                 "--monitor-interval", "1", str(script)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        job = None
        while time.monotonic() < deadline:
            job = find_job(launcher.pid)
            if job is not None and len(job.ranks) == 2:
                break
            time.sleep(0.5)
        assert job is not None and len(job.ranks) == 2, job
        assert [r.rank for r in job.ranks] == [0, 1] and job.launcher_pid == launcher.pid
        from_rank = find_job(job.ranks[1].pid)
        assert from_rank is not None and from_rank.launcher_pid == launcher.pid and from_rank.asked == ASKED_RANK
    finally:
        ranks = [r.pid for r in job.ranks] if job is not None else []
        for pid in [launcher.pid, *ranks]:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        launcher.wait(timeout=30)
