"""The liveness family (analysis/findings/liveness.py): a board that stopped updating, a process that exited."""

from __future__ import annotations

from findings_builders import (
    NOW_S,
    _one,
    _run,
)

from dflash_diag.model import Severity


def test_stale_board_on_a_live_process_says_hung() -> None:
    f = _one(_run(now=NOW_S + 120), "board-stale")
    assert "120 s" in f.claim


def test_exited_process() -> None:
    assert _one(_run(alive=False), "process-exited").severity == Severity.WARNING


def test_a_stale_board_while_the_programs_threads_run_is_the_probes_stopping_not_a_hang() -> None:
    """The board's writer is a thread of its own: a board that stopped while the training thread computes (its
    stacks in a torch op) says the probes stopped publishing, as information, and never "looks hung" (an audit
    hook that refused the board's writes made that false warning on a training process)."""
    from dataclasses import replace

    from findings_builders import healthy_board, observation, stack, thread_sample

    from dflash_diag.analysis import analyse
    from dflash_diag.model import Frame

    op = Frame("forward", "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", 125)
    step = Frame("train_step", "/app/train.py", 30)
    stacks = [stack([thread_sample("trainer", (op, step), tid=11)], t=i * 0.2) for i in range(12)]
    findings = analyse(replace(observation((healthy_board(),), stacks), now_wall_s=NOW_S + 120)).findings
    assert "board-stale" not in {f.rule_id for f in findings}
    stopped = _one(findings, "board-stopped")
    assert stopped.severity == Severity.INFO and "not the training" in stopped.claim and "120 s" in stopped.claim
    assert ("threads that ran in the window", "trainer") in stopped.evidence
