"""Gradient reductions made once per micro-batch instead of once per optimizer step
(analysis/findings/collectives_rate.py): from the stack samples with the code's loop facts (the casebook's
gradient-averaging trainer, per tensor after every backward, against its twin that reduces once after the
micro-batch loop), and from the collectives and health probes' counts. The observations go through the whole
analysis (classification, stages, the causal links)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from findings_builders import NOW_S, _ids, board, cuda_facts, observation, stack, thread_sample

from dflash_diag.analysis import analyse
from dflash_diag.model import Analysis, Frame, Observation, Severity
from dflash_diag.model.evidence import SourceLine

RULE = "collective-per-microstep"
PROG = "/srv/dp/dp_train.py"
TORCH = "/venv/lib/python3.11/site-packages/torch"
THREADING = Frame("Thread.run", "/usr/lib/python3.11/threading.py", 1010)
# The program as written: the micro-batch loop (79) runs backward (85) and averages every gradient (86); the outer
# loop (78) steps (89). Its twin averages once, bucketed, after the micro-batch loop (88).
LINES = {37: "dist.all_reduce(p.grad)", 46: "dist.all_reduce(flat)", 80: "ids = batches.get()",
         82: "logits = model(ids[:, :-1])", 85: "loss.backward()", 86: "average_each(params, world)",
         88: "average_bucketed(params, world)", 89: "opt.step()"}
LOOPS = {37: (35, False, False), 46: (None, False, False), 80: (79, True, False), 82: (79, True, False),
         85: (79, True, False), 86: (79, True, False), 88: (78, True, True), 89: (78, True, True)}
FUNCS = {37: "average_each", 46: "average_bucketed"}


def _all_reduce(helper_line: int, call_line: int) -> tuple[Frame, ...]:
    return (Frame("all_reduce", f"{TORCH}/distributed/distributed_c10d.py", 2806),
            Frame("wrapper", f"{TORCH}/distributed/c10d_logger.py", 81),
            Frame(FUNCS[helper_line], PROG, helper_line), Frame("main.<locals>.train", PROG, call_line), THREADING)


def _at(line: int) -> tuple[Frame, ...]:
    return Frame("main.<locals>.train", PROG, line), THREADING


BACKWARD = (Frame("_engine_run_backward", f"{TORCH}/autograd/graph.py", 829),
            Frame("backward", f"{TORCH}/_tensor.py", 626), *_at(85))
FORWARD = (Frame("_call_impl", f"{TORCH}/nn/modules/module.py", 1784), *_at(82))
# Tensor parallelism: a reduction inside a module's forward is the model's math, not gradient averaging.
TP_FORWARD = (Frame("all_reduce", f"{TORCH}/distributed/distributed_c10d.py", 2806),
              Frame("forward", "/srv/dp/tp_layers.py", 40), *FORWARD)
SAMPLER = (Frame("Condition.wait", "/usr/lib/python3.11/threading.py", 320),
           Frame("Queue.put", "/usr/lib/python3.11/queue.py", 140),
           Frame("main.<locals>.sample", PROG, 74), THREADING)


def _code() -> tuple[SourceLine, ...]:
    return tuple(SourceLine(filename=PROG, line=n, function=FUNCS.get(n, "main.<locals>.train"), text=LINES[n],
                            loop_line=LOOPS[n][0], loop_backward=LOOPS[n][1], loop_step=LOOPS[n][2])
                 for n in LINES)


def _observation(pattern: list[tuple[Frame, ...]], boards: tuple[Any, ...] = ()) -> Observation:
    """60 samples of the training thread cycling through ``pattern`` (the sampler blocked in put), on a GPU."""
    stacks = [stack([thread_sample("sampler", SAMPLER, tid=11, active=False),
                     thread_sample("dp-worker", frames, tid=12, active=True)], t=i * 0.05)
              for i, frames in enumerate(pattern * (60 // len(pattern)))]
    obs = observation(boards, stacks)
    return replace(obs, source_lines={f"{PROG}:{n}": t for n, t in LINES.items()}, process=cuda_facts(),
                   code=_code())


def _analyse(obs: Observation) -> Analysis:
    return analyse(obs, now_wall_s=NOW_S)


PER_MICRO = _all_reduce(37, 86)
BUCKETED = _all_reduce(46, 88)


def test_reductions_after_every_backward_in_the_micro_batch_loop_are_a_warning_with_their_share() -> None:
    """The planted program: 29 gloo all_reduce calls after each micro-batch's backward, 40% of the thread's time."""
    f = next(f for f in _analyse(_observation([PER_MICRO, PER_MICRO, FORWARD, BACKWARD, BACKWARD])).findings
             if f.rule_id == RULE)
    assert f.severity == Severity.WARNING
    assert f.claim.startswith("dp-worker reduces gradients after every micro-batch, not once per optimizer step: "
                              "40% of its samples in all_reduce called at dp_train.py:86 (main.<locals>.train), "
                              "inside the loop at dp_train.py:79")
    ev = dict(f.evidence)
    assert ev["dp-worker in all_reduce per micro-batch"].startswith("40% of its 60 samples (at least ")
    assert ev["the micro-batch loop"] == "dp_train.py:79"
    assert "no_sync" in f.remedy and f.impact > 0.0


def test_a_small_share_is_information_and_below_it_nothing() -> None:
    small = [PER_MICRO] + [FORWARD, BACKWARD] * 2 + [BACKWARD]  # 1 in 6: 17%, lower bound ~12%
    f = next(f for f in _analyse(_observation(small)).findings if f.rule_id == RULE)
    assert f.severity == Severity.INFO
    rare = [PER_MICRO] + [FORWARD, BACKWARD] * 9 + [BACKWARD]  # 1 in 20: lower bound under 5%
    assert RULE not in _ids(_analyse(_observation(rare)).findings)


def test_the_twin_that_reduces_once_per_step_and_a_model_parallel_reduction_are_silent() -> None:
    """The twin's bucketed all_reduce runs in the loop that also steps; a reduction inside a module's forward is
    tensor parallelism. Both as often as the planted one."""
    twin = _analyse(_observation([BUCKETED, BUCKETED, FORWARD, BACKWARD, BACKWARD]))
    assert RULE not in _ids(twin.findings)
    tp = _analyse(_observation([TP_FORWARD, TP_FORWARD, FORWARD, BACKWARD, BACKWARD]))
    assert RULE not in _ids(tp.findings)


def test_a_thread_parked_in_one_reduction_is_not_called_a_per_micro_batch_reduction() -> None:
    """Every sample in the all_reduce: the rank waits for a peer that never comes (collective-hang's to say)."""
    assert RULE not in _ids(_analyse(_observation([PER_MICRO])).findings)


def _probe_boards(*, reduces: int, backwards: int, steps: int, ms: float) -> tuple[Any, ...]:
    """Two boards 4 s apart: the collectives probe's all_reduce count and time, the health probe's steps and
    backward calls, grown by the given amounts."""
    def one(t: float, k: int) -> Any:
        return board({"collectives": {"by_op": {"all_reduce": {"count": 100 + k * reduces, "total_ms": 50.0 + k * ms},
                                                "barrier": {"count": 1, "total_ms": 1.0}}},
                      "health": {"steps": 10 + k * steps, "backwards": 80 + k * backwards}},
                     wall_time_s=NOW_S - 4.0 + t, seq=10 + k)
    return one(0.0, 0), one(4.0, 1)


def test_the_probes_count_reductions_per_optimizer_step_against_backward_calls() -> None:
    """Under probes, with no sample inside the reductions (they are short): 232 all_reduce calls over 8 steps of 8
    micro-batches, 1.6 s of the 4 s inside them."""
    boards = _probe_boards(reduces=232, backwards=64, steps=8, ms=1600.0)
    f = next(f for f in _analyse(_observation([FORWARD, BACKWARD], boards)).findings if f.rule_id == RULE)
    assert f.severity == Severity.WARNING
    assert "29 all_reduce calls per optimizer step over 8 backward passes, 40% of the window inside them" in f.claim
    ev = dict(f.evidence)
    assert ev["backward() calls per optimizer step"] == "8.0 (health probe)"


def test_under_probes_one_reduction_per_step_or_no_accumulation_is_silent() -> None:
    once = _probe_boards(reduces=8, backwards=64, steps=8, ms=1600.0)  # bucketed, once per step
    assert RULE not in _ids(_analyse(_observation([FORWARD, BACKWARD], once)).findings)
    no_accum = _probe_boards(reduces=232, backwards=8, steps=8, ms=1600.0)  # per tensor, one backward a step
    assert RULE not in _ids(_analyse(_observation([FORWARD, BACKWARD], no_accum)).findings)
