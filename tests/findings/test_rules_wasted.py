"""The wasted-work family (analysis/findings/wasted.py): full-vocabulary logits nobody reads."""

from __future__ import annotations

from findings_builders import (
    HEALTHY_APP,
    HEALTHY_PROBES,
    _one,
    _run,
    board,
    stack,
    thread_sample,
)

from dflash_diag.model import Frame


def test_full_vocab_logits_in_target_stacks() -> None:
    frames = (Frame("compute_logits", "/app/target.py", 55), Frame("run_target", "/app/target.py", 10))
    stacks = [stack([thread_sample("target-0", frames, tid=11)], t=i) for i in range(3)]
    f = _one(_run(stacks=stacks), "wasted-full-vocab-logits")
    assert "target.py:55" in dict(f.evidence)["target samples in logits"]


def test_full_vocab_logits_from_config_flag() -> None:
    app = {**HEALTHY_APP, "config": {**HEALTHY_APP["config"], "target_full_logits": True}}
    assert _one(_run(boards=(board(HEALTHY_PROBES, app),)), "wasted-full-vocab-logits")


def test_logits_in_drafter_threads_are_not_waste() -> None:
    frames = (Frame("chunked_logits", "/app/loss.py", 55),)
    stacks = [stack([thread_sample("drafter-0", frames, tid=12)])]
    assert _run(stacks=stacks) == ()
