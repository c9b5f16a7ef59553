"""The checkpoint family (analysis/findings/checkpoint.py): parameters without gradients, recompute and its
machinery."""

from __future__ import annotations

from findings_builders import (
    _one,
    _run,
    healthy_board,
    stack,
    thread_sample,
    thread_stats,
)

from dflash_diag.model import Frame, Severity, ThreadState


def test_grad_none_is_critical_and_blames_reentrant() -> None:
    b = healthy_board(checkpoint={"calls": {"reentrant": 96, "non_reentrant": 0}, "grad_none_count": 57,
                                  "grad_none_params": ["layers.0.q.weight"], "trainable_params": 58,
                                  "sites": [{"site": "loss.py:88", "use_reentrant": True, "calls": 96}]})
    findings = _run(boards=(b,))
    f = _one(findings, "checkpoint-grad-none")
    assert f.severity == Severity.CRITICAL and findings[0] is f
    assert "use_reentrant=True" in f.claim
    assert _one(findings, "checkpoint-reentrant").severity == Severity.INFO


def test_recompute_heavy_from_thread_states() -> None:
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.CHECKPOINT: 0.6, ThreadState.NATIVE: 0.4}, tid=12,
                            n=60),)
    f = _one(_run(threads=threads), "checkpoint-recompute-heavy")
    assert "60%" in f.claim and "saved-tensor hooks" in dict(f.evidence)["mode"]
    assert f.severity == Severity.INFO  # recompute compute is a cost, not a fault


def test_checkpoint_hook_python_is_a_warning() -> None:
    hook = (Frame("unpack_hook", "/sp/torch/utils/checkpoint.py", 1120), Frame("backward", "/sp/torch/_tensor.py", 5))
    work = (Frame("mm", "libtorch.so", 0, native=True), Frame("loss", "/app/loss.py", 9))
    stacks = [stack([thread_sample("drafter-0", hook if i % 2 else work, tid=12, gil=bool(i % 2))], t=i)
              for i in range(20)]
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.CHECKPOINT: 0.5, ThreadState.NATIVE: 0.5}, tid=12,
                            n=20),)
    f = _one(_run(threads=threads, stacks=stacks), "checkpoint-recompute-heavy")
    assert f.severity == Severity.WARNING and "checkpoint machinery's own Python" in f.claim
    assert dict(f.evidence)["checkpoint Python holding the GIL"] == "50% at checkpoint.py:1120 (unpack_hook)"


def test_a_thread_in_backward_holding_the_gil_is_not_checkpoint_machinery() -> None:
    """torch/autograd/graph.py is also where every loss.backward() enters the engine: no checkpoint there."""
    entry = (Frame("_engine_run_backward", "/sp/torch/autograd/graph.py", 829),
             Frame("backward", "/sp/torch/autograd/__init__.py", 364), Frame("backward", "/sp/torch/_tensor.py", 630),
             Frame("train_step", "/app/main.py", 40))
    stacks = [stack([thread_sample("drafter-0", entry, tid=12, gil=True)], t=i) for i in range(20)]
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.NATIVE: 1.0}, tid=12, n=20),)
    assert "checkpoint-recompute-heavy" not in {f.rule_id for f in _run(threads=threads, stacks=stacks)}


def test_recompute_share_from_few_samples_is_not_enough() -> None:
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.CHECKPOINT: 0.5, ThreadState.NATIVE: 0.5}, tid=12,
                            n=6),)
    assert _run(threads=threads) == ()
