"""One thread of a stage slower than its peers (analysis/stages.slow_thread, findings' stage-slow-thread): a
mechanism over per-thread samples, not a name. Samples built as py-spy gives them: a worker pool fed by a queue,
worker-1 in a per-row Python loop 40% of its time, worker-0 never."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "findings"))

from findings_builders import observation, thread_sample

from dflash_diag.analysis.causal import link
from dflash_diag.analysis.findings import pipeline as pipeline_rules
from dflash_diag.analysis.findings import run_families
from dflash_diag.analysis.findings._context import Context
from dflash_diag.analysis.stages import StageAssignment, slow_thread
from dflash_diag.model import Frame, StackSample, Stage, ThreadSample, ThreadState, ThreadStats
from dflash_diag.model.stats import stage_names

S = ThreadState
PROG = "/home/u/proj/prog.py"
TORCH = "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py"
QUEUE = "/usr/lib/python3.11/queue.py"
ENTRY = Frame("worker", PROG, 50)
HARD = (Frame("hard_examples_python", PROG, 44), Frame("worker", PROG, 57))
TRAIN = (Frame("Linear.forward", TORCH, 134), Frame("worker", PROG, 51))
WAIT = (Frame("Condition.wait", "/usr/lib/python3.11/threading.py", 331), Frame("Queue.get", QUEUE, 171),
        Frame("worker", PROG, 50))
PUT = (Frame("Condition.wait", "/usr/lib/python3.11/threading.py", 331), Frame("Queue.put", QUEUE, 140),
       Frame("make_batches", PROG, 26))


def _worker(name: str, tid: int, plan: list[tuple[tuple[Frame, ...], ThreadState]]
            ) -> tuple[ThreadStats, list[tuple[ThreadSample, ThreadState]]]:
    rows = [(thread_sample(name, frames, tid=tid), state) for frames, state in plan]
    shares = {s: sum(1 for _, st in plan if st is s) / len(plan) for s in ThreadState}
    stats = ThreadStats(name=name, os_thread_id=tid, stage=Stage.DRAFTER, n_samples=len(plan), shares=shares,
                        cpu_pct=90.0, gil_held_pct=0.0, top_frame=plan[0][0][0], gpu_index=None,
                        timeline=tuple(st for _, st in plan), entry=ENTRY)
    return stats, rows


def _pool(hard_share: float = 0.4, n: int = 60) -> list[tuple[ThreadStats, list[tuple[ThreadSample, ThreadState]]]]:
    hard = round(hard_share * n)
    slow = [(HARD, S.PYTHON)] * hard + [(TRAIN, S.NATIVE)] * (n - hard)
    fast = [(TRAIN, S.NATIVE)] * (n - 6) + [(WAIT, S.QUEUE_GET)] * 6
    return [_worker("worker-0", 11, fast), _worker("worker-1", 12, slow)]


def test_the_thread_that_does_what_its_peers_do_not_is_named_with_its_function_and_line() -> None:
    found = slow_thread(Stage.DRAFTER, _pool())
    assert found is not None
    assert (found.thread, found.peer, found.spot.function, found.spot.site) == (
        "worker-1", "worker-0", "hard_examples_python", "prog.py:44")
    assert round(found.spot.share, 2) == 0.40 and found.peer_share == 0.0


def test_more_time_in_the_jobs_own_function_is_not_what_makes_a_thread_slow() -> None:
    """CI's loaded box, attached: worker-1 in its per-row loop most of its samples, so few in `worker` (the job both
    threads run), while worker-0 spent all of its samples there. Both differences stand out; the extra function is
    the cause, the job's own function is what is left beside it."""
    # worker-1 also waits on the queue now and then: worker-0's lead in `worker` (83 points) is the larger number.
    slow = [(HARD, S.PYTHON)] * 45 + [(TRAIN, S.NATIVE)] * 10 + [(WAIT, S.QUEUE_GET)] * 5
    fast = [(TRAIN, S.NATIVE)] * 60
    found = slow_thread(Stage.DRAFTER, [_worker("worker-0", 11, fast), _worker("worker-1", 12, slow)])
    assert found is not None and (found.thread, found.spot.function) == ("worker-1", "hard_examples_python")
    # With nothing else standing out (worker-1's other time spread over seven functions, 10% each), the job's own
    # function still may.
    spread = [((Frame(f"step_{i}", PROG, 70 + i), Frame("worker", PROG, 58)), S.PYTHON) for i in range(7) for _ in
              range(6)] + [(TRAIN, S.NATIVE)] * 18
    only = slow_thread(Stage.DRAFTER, [_worker("worker-0", 11, fast), _worker("worker-1", 12, spread)])
    assert only is not None and (only.thread, only.spot.function) == ("worker-0", "worker")


def test_threads_that_spend_their_time_alike_have_no_slow_one() -> None:
    alike = [_worker(name, tid, [(HARD, S.PYTHON)] * 20 + [(TRAIN, S.NATIVE)] * 40)
             for name, tid in (("worker-0", 11), ("worker-1", 12))]
    assert slow_thread(Stage.DRAFTER, alike) is None
    assert slow_thread(Stage.DRAFTER, _pool(hard_share=0.1)) is None  # 10%: below what a thread's slowness is
    assert slow_thread(Stage.DRAFTER, _pool(n=8)) is None  # 8 samples each: an anecdote
    assert slow_thread(Stage.TARGET, _pool()) is None  # the other stage's threads are not this stage's


def test_the_thread_waiting_more_on_the_queue_is_the_fast_one_not_the_slow_one() -> None:
    """worker-0 waits in get 10% of the time (it is the faster one): time on the pipeline's queue never counts."""
    found = slow_thread(Stage.DRAFTER, _pool())
    assert found is not None and found.thread == "worker-1"


def _context(pool: list[tuple[ThreadStats, list[tuple[ThreadSample, ThreadState]]]]) -> Context:
    from dflash_diag.analysis.pipeline import pipeline_view

    producer_rows = [(thread_sample("producer", PUT, tid=10), S.QUEUE_PUT)] * 60
    producer = ThreadStats(name="producer", os_thread_id=10, stage=Stage.TARGET, n_samples=60,
                           shares={S.QUEUE_PUT: 1.0}, cpu_pct=2.0, gil_held_pct=0.0, top_frame=PUT[0],
                           gpu_index=None, timeline=(S.QUEUE_PUT,) * 60, entry=Frame("make_batches", PROG, 22))
    threads = (producer, *(stats for stats, _ in pool))
    stacks = tuple(StackSample(pid=4242, monotonic_s=float(i), wall_s=float(i), duration_s=0.01, native=False,
                               threads=(producer_rows[i][0], *(rows[i][0] for _, rows in pool)))
                   for i in range(60))
    obs = observation(stacks=stacks)
    now = obs.started_wall_s + obs.window_s
    pipe = pipeline_view(obs, threads, queue_name="q", now_wall_s=now, stages_from="queues")
    return Context(obs=obs, threads=threads, pipeline=pipe, now_wall_s=now,
                   assignment=StageAssignment(stages={10: Stage.TARGET, 11: Stage.DRAFTER, 12: Stage.DRAFTER},
                                              how="queues", queue="q"))


def test_the_headline_names_the_slow_thread_and_its_hot_line() -> None:
    """The issue's program: "its time goes to: worker 90%, hard_examples_python 10%; no cause found" became the
    stage verdict because of worker-1's loop, with the line to look at."""
    ctx = _context(_pool())
    assert stage_names(ctx.threads).threads(Stage.DRAFTER) == "worker threads"
    findings = run_families(ctx, (("pipeline", pipeline_rules),))
    _, headline, _ = link(findings)
    assert headline is not None and headline.rule_id == "pipeline-bottleneck-drafter"
    assert headline.because == ("stage-slow-thread",)
    assert headline.text.startswith("the consumer stage of `q` limits throughput: producer threads are blocked in put")
    assert ("because worker-1 is the slow thread of the consumer stage of `q`: 40% of its time in "
            "hard_examples_python (prog.py:44), where worker-0 spends 0%") in headline.text
    assert "hard_examples_python (prog.py:44)" in headline.remedy
