"""``--ddp``: the reference trainer as a torchrun job of 2 ranks (gloo on CPU, tiny preset). The ranks read different
batches and still end with the very same drafter (their gradients are averaged across ranks every step), stop
after the same step whoever's clock runs out first, and only rank 0 logs, checkpoints and writes the summary."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from subprocess import CompletedProcess

import pytest
from trainer_helpers import ROOT, read_json, tiny_args


def _torchrun(tmp_path: Path, *extra: str, timeout_s: float = 400.0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DFLASH_DIAG_BOARD_DIR": str(tmp_path / "board"),
           "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    # a port of its own (not torchrun's default 29500): the module's two jobs run at the same time
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(_free_port()),
            "-m", "reference_trainer", "--ddp", *tiny_args(tmp_path, "--probes", "none", *extra)]
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout_s)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[tuple[Path, CompletedProcess[str]]]]]:
    """The module's two torchrun jobs, started together at the first test that reads one (they share nothing; each
    test reads its own): a job's startup is mostly waiting, and two of them wait at once."""

    def job(name: str, *extra: str) -> tuple[Path, CompletedProcess[str]]:
        where = tmp_path_factory.mktemp(name)
        return where, _torchrun(where, *extra, "--summary-json", str(where / "summary.json"))

    with ThreadPoolExecutor(max_workers=2) as pool:
        yield {"max_steps": pool.submit(job, "max_steps", "--max-steps", "20"),
               "max_seconds": pool.submit(job, "max_seconds", "--max-seconds", "6")}


@pytest.mark.slow
def test_two_ranks_train_one_drafter_and_stay_identical(jobs: dict[str, Future[tuple[Path, CompletedProcess[str]]]]
                                                        ) -> None:
    tmp_path, result = jobs["max_steps"].result()
    summary_path = tmp_path / "summary.json"
    assert result.returncode == 0, result.stderr[-3000:]
    summary = read_json(summary_path)
    assert summary["steps"] == 20 and summary["stop_reason"] == "max_steps"
    assert summary["ddp"]["world_size"] == 2 and summary["ddp"]["backend"] == "gloo"
    # The ranks trained on different batches (ddp.batch_index): identical weights at the end prove that every step
    # took the gradient averaged over both ranks.
    assert summary["ddp"]["rank_max_abs_diff"] == 0.0
    assert summary["loss_last"] < summary["loss_first"] - 5
    assert [line for line in result.stdout.splitlines() if line.startswith("done:")].__len__() == 1  # rank 0 only
    assert (tmp_path / "ckpt" / "checkpoint.pt").is_file()


@pytest.mark.slow
def test_the_ranks_stop_after_the_same_step_when_one_clock_runs_out(
        jobs: dict[str, Future[tuple[Path, CompletedProcess[str]]]]) -> None:
    """--max-seconds is read on each rank's clock: whoever reaches it first, both stop after one step (a rank that
    stopped alone would leave its peer waiting in the gradient all_reduce for good)."""
    tmp_path, result = jobs["max_seconds"].result()
    summary_path = tmp_path / "summary.json"
    assert result.returncode == 0, result.stderr[-3000:]
    summary = read_json(summary_path)
    assert summary["stop_reason"] in ("max_seconds", "peer") and summary["ddp"]["rank_max_abs_diff"] == 0.0


def test_batch_indices_are_disjoint_across_ranks() -> None:
    from reference_trainer.ddp import Ddp

    ranks = [Ddp(rank=r, world_size=3, local_rank=r, backend="gloo", control=None) for r in range(3)]
    seen = [d.batch_index(i) for d in ranks for i in range(50)]
    assert sorted(seen) == list(range(150))


@pytest.mark.parametrize("args, env, needle", [
    ([], {}, "--ddp: RANK, WORLD_SIZE and MASTER_ADDR are not set: launch it with torchrun"),
    (["--resume"], {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}, "--ddp does not resume yet"),
])
def test_ddp_flag_mistakes_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str],
                                        needle: str) -> None:
    from reference_trainer.cli import main

    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(tiny_args(tmp_path, "--probes", "none", "--ddp", *args)) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert "Traceback" not in err and len(errors) == 1 and needle in errors[0], err
