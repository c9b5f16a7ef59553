"""`dflash-diag snapshot --node`: the job's ranks on this machine, found without a PID, so that one command run on
every node by the scheduler (srun --overlap, kubectl exec) writes a bundle per node (docs/jobs.md). The search
(sources/noderanks.py) on a planted process table, then the real command on a real torchrun job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from multinode_bed import free_port

from dflash_diag.model.common import NA
from dflash_diag.sources.noderanks import NodeJob, find_node_jobs
from dflash_diag.sources.procfs import all_children

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "dflash_diag"]

# pid -> (environment, parent); 20 is torchrun, 21-22 its ranks, 23 rank 21's data-loader worker; 30-31 another
# job (srun's ranks under slurmstepd 29); 40 a rank of another user.
TABLE = {
    20: ({"PATH": "/bin"}, 1),
    21: ({"RANK": "0", "LOCAL_RANK": "0", "TORCHELASTIC_RUN_ID": "abc", "MASTER_ADDR": "n0", "MASTER_PORT": "1"}, 20),
    22: ({"RANK": "1", "LOCAL_RANK": "1", "TORCHELASTIC_RUN_ID": "abc", "MASTER_ADDR": "n0", "MASTER_PORT": "1"}, 20),
    23: ({"RANK": "0", "LOCAL_RANK": "0", "TORCHELASTIC_RUN_ID": "abc", "MASTER_ADDR": "n0", "MASTER_PORT": "1"}, 21),
    30: ({"RANK": "4", "SLURM_JOB_ID": "777", "MASTER_ADDR": "n1", "MASTER_PORT": "2"}, 29),
    31: ({"RANK": "5", "SLURM_JOB_ID": "777", "MASTER_ADDR": "n1", "MASTER_PORT": "2"}, 29),
    40: ({"RANK": "0", "SLURM_JOB_ID": "777"}, 39),
}


def _find(job_id: str | None) -> object:
    return find_node_jobs(job_id, pids=lambda: TABLE, environ=lambda pid: TABLE[pid][0],
                          parent=lambda pid: TABLE[pid][1], owner=lambda pid: 2 if pid == 40 else 1, uid=1)


def test_the_ranks_are_grouped_by_launcher_workers_and_other_users_left_out() -> None:
    assert _find("abc") == (NodeJob(parent_pid=20, rank_pids=(21, 22), ranks=(0, 1)),)
    assert _find("777") == (NodeJob(parent_pid=29, rank_pids=(30, 31), ranks=(4, 5)),)
    assert _find("n0:1") == _find("abc")
    both = _find(None)
    assert [j.parent_pid for j in both] == [20, 29]  # type: ignore[union-attr]
    nothing = _find("999")
    assert isinstance(nothing, NA) and "no rank of job 999 runs on this machine" in nothing.reason


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_snapshot_node_writes_the_bundle_of_this_machines_ranks_without_a_pid(tmp_path: Path) -> None:
    run_id = f"node-{os.getpid()}"
    log = tmp_path / "job.log"
    # A bound on the ranks' lives as well as the kill below: a rank left behind trained on for half an hour.
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "TRAIN_STEPS": "6000"}
    with log.open("wb") as out:
        job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                                "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-id",
                                run_id, str(ROOT / "tests/casebook/programs/mn_healthy/train.py")], cwd=tmp_path,
                               env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while "[rank 1] step 20 " not in log.read_text(errors="replace"):
            assert job.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")[-2000:]
            time.sleep(0.5)
        bundle = tmp_path / "node.tar.gz"
        snap = subprocess.run([*CLI, "snapshot", "--node", "--job-id", run_id, "-o", str(bundle), "--json",
                               "--duration", "1"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
                              stdin=subprocess.DEVNULL)
        assert snap.returncode == 0, snap.stderr
        with tarfile.open(bundle) as tar:
            names = {Path(m.name).name for m in tar.getmembers()}
            doc = json.loads(tar.extractfile(next(m for m in tar.getmembers()  # type: ignore[union-attr]
                                                  if m.name.endswith("/snapshot.json"))).read())
        assert {"stacks.txt", "rank1-stacks.txt"} <= names, sorted(names)  # rank 0 on top, rank 1 beside
        assert [r["rank"] for r in doc["job"]["ranks"]] == [0, 1] and doc["job"]["launcher_pid"] == job.pid
        wrong = subprocess.run([*CLI, "snapshot", "--node", "--job-id", "no-such-job"], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=60)
        assert wrong.returncode == 3 and "no rank of job no-such-job runs on this machine" in wrong.stderr
        assert len(wrong.stderr.strip().splitlines()) == 1
    finally:
        ranks = all_children(job.pid)  # torchrun starts each rank in a session of its own: the group kill misses them
        try:
            os.killpg(job.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for rank in ranks:
            try:
                os.kill(rank, signal.SIGKILL)
            except ProcessLookupError:
                pass
        job.wait(timeout=30)
        deadline = time.monotonic() + 10.0  # SIGKILL is delivered, not instant: the kernel tears each rank down
        while any(_alive(rank) for rank in ranks) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(rank) for rank in ranks), ranks


def _alive(pid: int) -> bool:
    """Not gone and not a zombie (a killed rank waits for init to reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
