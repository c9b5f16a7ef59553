"""The job rules (analysis/findings/job.py) and the job's one report (analysis/job.py) on real stacks: py-spy dumps of
every rank of the casebook's torchrun programs, recorded by tests/fixtures/jobs/record.py. The probes' readings and a
launcher's report of failed ranks are laid over them where a test needs them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from job_fixtures import NOW, fixture_doc, load_job

from dflash_contract.board import CollectivesKeys as K
from dflash_diag.analysis.job import analyse_job
from dflash_diag.model import Severity
from dflash_diag.model.analysis import PHASE_HUNG
from dflash_diag.model.job import JobAnalysis, JobObservation


def _analyse(job: JobObservation) -> JobAnalysis:
    return analyse_job(job)


def _ids(a: JobAnalysis, at_least: Severity = Severity.INFO) -> set[str]:
    return {f.rule_id for f in a.findings if f.severity >= at_least}


def test_every_fixture_is_a_whole_job() -> None:
    for name, ranks in (("ddp_straggler", 4), ("ddp_uneven_shards", 3), ("ddp_rank0_barrier", 3),
                        ("ddp_thread_died", 3), ("ddp_healthy", 4)):
        doc = fixture_doc(name)
        assert [r["rank"] for r in doc["ranks"]] == list(range(ranks)), name
        assert all(len(doc["dumps"][str(r["pid"])]) >= 12 for r in doc["ranks"]), name


def test_the_straggler_is_named_with_where_its_time_goes() -> None:
    a = _analyse(load_job("ddp_straggler"))
    assert a.headline is not None and a.headline.rule_id == "rank-straggler"
    assert a.headline.text.startswith("rank 0 is the straggler: ranks 1-3 wait for it in all_reduce at train (train.py:")
    assert "metrics.py" in a.headline.text
    assert _ids(a, Severity.WARNING) == {"rank-straggler"}  # its own code, not more of the peers' work
    rows = {s.identity.rank: s for s in a.summaries}
    assert rows[0].collective_share < 0.3 < min(rows[r].collective_share for r in (1, 2, 3))
    assert all(rows[r].collective is not None and rows[r].collective.op == "all_reduce" for r in (1, 2, 3))


def test_uneven_shards_are_more_of_the_same_work() -> None:
    a = _analyse(load_job("ddp_uneven_shards"))
    assert a.headline is not None and a.headline.rule_id == "rank-straggler"
    assert a.headline.text.startswith("rank 1 is the straggler")
    assert a.headline.because == ("rank-uneven-input",)
    uneven = next(f for f in a.findings if f.rule_id == "rank-uneven-input")
    assert uneven.claim.startswith("rank 1 does more of the same work than its peers")


def test_a_collective_only_rank_0_calls_hangs_the_job_and_is_named() -> None:
    a = _analyse(load_job("ddp_rank0_barrier"))
    assert a.phase == PHASE_HUNG
    assert a.headline is not None and a.headline.rule_id == "collective-hang"
    assert a.headline.because == ("collective-mismatch",)
    text = a.headline.text
    assert "ranks 1, 2 wait in all_reduce at main (pretrain.py:" in text
    assert "rank 0 never entered it: it waits in another collective, barrier at save (ckpt.py:" in text
    assert "rank-straggler" not in _ids(a)
    # the waiting ranks' own "the run does not move" is the job's finding now, not three more
    assert not any(f.rule_id == "wait-chain" for f in a.findings)


def test_the_probes_number_the_hung_collective() -> None:
    def payload(seq: int, op: str, entered: int) -> dict[str, Any]:
        return {"status": "ok", K.ARMED: True, K.FROM_START: True, K.BACKEND: "gloo", K.ENTERED: entered,
                K.COMPLETED: entered - 1,
                K.CURRENT: [{K.SEQ: seq, K.OP: op, K.THREAD: "MainThread", K.SINCE_WALL_S: NOW - 40}],
                K.LAST: {K.SEQ: seq - 1, K.OP: "all_reduce"}, K.IN_COLLECTIVES_S: 41.0}

    boards = {0: [payload(94, "barrier", 94)] * 2, 1: [payload(94, "all_reduce", 94)] * 2,
              2: [payload(94, "all_reduce", 94)] * 2}
    a = _analyse(load_job("ddp_rank0_barrier", boards=boards))
    assert a.headline is not None
    assert "wait in all_reduce (collective #94)" in a.headline.text
    assert "(its collective #94 is barrier)" in a.headline.text
    rows = {s.identity.rank: s for s in a.summaries}
    assert rows[0].probe is not None and rows[0].probe.current_op == "barrier" and rows[0].probe.entered_in_window == 0


def _sequence(ops: list[str], *, from_start: bool = True) -> dict[str, Any]:
    return {"status": "ok", K.ARMED: True, K.FROM_START: from_start, K.ENTERED: len(ops), K.COMPLETED: len(ops),
            K.CURRENT: [], K.RECENT: [{K.SEQ: i + 1, K.OP: op, K.DURATION_MS: 1.0} for i, op in enumerate(ops)]}


def test_ranks_whose_collective_sequences_no_longer_line_up_are_a_critical_mismatch() -> None:
    """Rank 2 skipped one all_reduce: from there its calls pair with the others' next ones (wrong results)."""
    steps = ["all_reduce"] * 9 + ["broadcast"]
    good = steps * 3
    skipped = steps[:4] + steps[5:] + steps * 2
    boards = {0: [_sequence(good)], 1: [_sequence(good)], 2: [_sequence(skipped)], 3: [_sequence(good)]}
    a = _analyse(load_job("ddp_healthy", boards=boards))
    assert a.headline is not None and a.headline.rule_id == "collective-mismatch"
    assert a.headline.text.startswith("the ranks' collective calls no longer line up: at collective #9 ranks 0, 1, 3 "
                                      "made all_reduce, rank 2 made broadcast")
    # numbers from a probe that armed after the process group existed do not compare
    late = {r: [_sequence([e[K.OP] for e in b[0][K.RECENT]], from_start=False)] for r, b in boards.items()}
    assert "collective-mismatch" not in _ids(_analyse(load_job("ddp_healthy", boards=late)))


def test_a_dead_training_thread_hangs_its_peers_and_explains_the_hang() -> None:
    a = _analyse(load_job("ddp_thread_died"))
    assert a.headline is not None and a.headline.rule_id == "collective-hang"
    assert "ranks 0, 1 wait in all_reduce at Trainer.run (worker_train.py:" in a.headline.text
    assert "rank 2 never entered it: its MainThread sleeps" in a.headline.text
    assert a.headline.because == ("thread-died",)
    died = next(f for f in a.findings if f.rule_id == "thread-died")
    assert died.claim.startswith("rank 2: 1 thread(s) died of an uncaught exception: trainer")


def test_the_healthy_job_gets_no_warning_and_alike_findings_once() -> None:
    a = _analyse(load_job("ddp_healthy"))
    assert not _ids(a, Severity.WARNING), [f.claim for f in a.findings]
    assert all(s.collective is not None and s.collective.op == "all_reduce" for s in a.summaries)
    alike = [f for f in a.findings if f.rule_id == "no-probes"]
    assert len(alike) == 1 and alike[0].claim.startswith("ranks 0-3: ") and "(alike on 4 ranks)" in alike[0].claim


def test_a_missing_rank_and_the_launchers_report_name_the_death() -> None:
    report = ("[rank1]: ValueError: record 120 does not decode\n"
              "E1202 02:52:33.289000 4251 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1)"
              " local_rank: 1 (pid: 4295) of binary: /venv/bin/python3\n"
              "W1202 02:52:33.300000 4251 torch/distributed/elastic/agent/server/api.py:700] [default] Worker group "
              "FAILED. 2/3 attempts left; will restart worker group\n")
    job = load_job("ddp_healthy", drop_rank=1, launcher_stderr=report, restart_count=1)
    a = _analyse(job)
    died = next(f for f in a.findings if f.rule_id == "rank-died")
    assert died.severity == Severity.CRITICAL
    assert died.claim.startswith("a rank died: local rank 1 is gone: the launcher (PID ")
    seen = [v for k, v in died.evidence if k == "seen"]
    assert "local rank 1 (PID 4295) failed with exit code 1: ValueError: record 120 does not decode" in seen
    assert "the launcher restarted the group 1 time(s) of 3 allowed (2 attempts left)" in seen


def test_a_restarted_group_that_runs_again_is_a_warning() -> None:
    a = _analyse(load_job("ddp_healthy", restart_count=2))
    died = next(f for f in a.findings if f.rule_id == "rank-died")
    assert died.severity == Severity.WARNING and "restarted the group 2 time(s)" in died.claim


def test_a_rank_that_exited_in_the_window_is_critical() -> None:
    job = load_job("ddp_healthy")
    gone = replace(job.ranks[3], process_alive=False)
    a = _analyse(replace(job, ranks=(*job.ranks[:3], gone)))
    died = next(f for f in a.findings if f.rule_id == "rank-died")
    assert died.severity == Severity.CRITICAL and "rank 3 (PID" in died.claim and "exited during the window" in died.claim


@pytest.mark.parametrize("name", ["ddp_straggler", "ddp_rank0_barrier"])
def test_one_rank_alone_is_judged_as_a_process(name: str) -> None:
    """A job of one sampled rank says nothing across ranks: its own analysis leads, prefixed with the rank."""
    job = load_job(name)
    # A rank started by hand (no launcher): nothing says its peers should be here.
    one = replace(job, ranks=job.ranks[1:2], launcher_alive=None,
                  topology=replace(job.topology, ranks=job.topology.ranks[1:2], launcher_pid=None))
    a = _analyse(one)
    assert not _ids(a) & {"rank-straggler", "collective-hang", "collective-mismatch"}
    assert a.headline is None or a.headline.text.startswith("rank 1: ")


def _with_run_delay(job: JobObservation, wait_by_rank: dict[int, float]) -> JobObservation:
    """Lay /proc sweeps over the recorded ranks: each rank's sampled threads on a CPU 40% of the window, runnable
    and waiting for one the given share."""
    from dflash_diag.model import ProcThreadSample

    ranks = []
    for identity, obs in zip(job.topology.ranks, job.ranks, strict=True):
        tids = sorted({t.os_thread_id for s in obs.stacks for t in s.threads if t.os_thread_id is not None})
        wait = wait_by_rank.get(identity.rank, 0.0)
        sweeps = tuple(tuple(ProcThreadSample(tid=tid, comm="python", state="R", utime_s=0.4 * t, stime_s=0.0,
                                              run_ns=int(0.4 * t * 1e9), runq_wait_ns=int(wait * t * 1e9),
                                              monotonic_s=t) for tid in tids) for t in (0.0, 2.0, 4.0))
        ranks.append(replace(obs, proc=sweeps))
    return replace(job, ranks=tuple(ranks))


def test_a_straggler_the_cpus_hold_back_says_so() -> None:
    job = load_job("ddp_straggler")
    a = _analyse(_with_run_delay(job, {0: 0.5, 1: 0.05, 2: 0.05, 3: 0.05}))
    assert a.headline is not None and a.headline.rule_id == "rank-straggler"
    assert "waited for a CPU 50% of the window (the waiting ranks' 5%): the CPUs it runs on hold it back" \
        in a.headline.text
    # Every rank waits alike (a loaded machine): nothing more is said; nor without /proc.
    alike = _analyse(_with_run_delay(job, {r: 0.45 for r in range(4)}))
    assert alike.headline is not None and "waited for a CPU" not in alike.headline.text
    assert "waited for a CPU" not in (_analyse(job).headline or alike.headline).text
