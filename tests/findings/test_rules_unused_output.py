"""Work whose output nothing reads (analysis/findings/unused_output.py): the casebook's speech classifier that runs
its reconstruction decoder every step for a loss weighted 0.0, seen in the stack samples with the health probe's
tensors that get no gradient, and a decoder output assigned to a name the function never reads (the code on disk);
silent for the twin that skips the head, for a teacher read without gradient, and only information on a GPU. The
observations go through the whole analysis (classification, stages, the causal links)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from findings_builders import NOW_S, _ids, board, cuda_facts, observation, stack, thread_sample

from dflash_diag.analysis import analyse
from dflash_diag.analysis.findings.unused_output import _shared_module
from dflash_diag.model import Analysis, Frame, Observation, Severity
from dflash_diag.model.evidence import ProcessFacts, SourceLine

RULE = "wasted-unused-output"
PROG = "/srv/asr/speech_ctc.py"
MODULE = Frame("_call_impl", "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", 1784)
LINEAR = Frame("forward", "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", 125)
THREADING = Frame("Thread.run", "/usr/lib/python3.11/threading.py", 1010)
LINES = {53: "h = h + blk(h)", 54: 'out = {"logits": self.classifier(h)}', 56: 'out["recon"] = self.recon(h)',
         70: "out = self.model(feats, with_recon=with_recon)", 118: "loss = module.training_step(feats, labels, step)",
         119: "loss.backward()", 80: "teacher_out = self.teacher(feats).detach()",
         90: "recon = self.recon(h)"}


def _call(line: int, deeper: bool = True) -> tuple[Frame, ...]:
    """The fit loop inside the model's forward at ``line`` (inside a module under it when ``deeper``)."""
    inner = (LINEAR, MODULE) if deeper else ()
    outer = ((Frame("SpeechModel.forward", PROG, line), MODULE) if line in (53, 54, 56, 90) else
             (Frame("Module.distill", PROG, line),))
    return (*inner, *outer, Frame("Module.training_step", PROG, 70), MODULE,
            Frame("main.<locals>.fit", PROG, 118), THREADING)


BACKWARD = (Frame("_engine_run_backward", "/venv/lib/python3.11/site-packages/torch/autograd/graph.py", 829),
            Frame("main.<locals>.fit", PROG, 119), THREADING)
LOADER = (Frame("Condition.wait", "/usr/lib/python3.11/threading.py", 320),
          Frame("Queue.put", "/usr/lib/python3.11/queue.py", 140), Frame("data_worker", PROG, 97), THREADING)


def _health(stuck: int, examples: list[str], none_in_graph: int | None = 0) -> dict[str, Any]:
    return {"steps": 400, "groups": [{"group": "AdamW#0", "tensors": 24, "watched_tensors": 24, "stuck_tensors": stuck,
                                      "stuck_grad_none": stuck, "stuck_grad_zero": 0,
                                      "stuck_none_in_graph": none_in_graph if stuck else None,
                                      "stuck_examples": examples, "stuck_since_step": 1}]}


RECON = ["recon.0.weight", "recon.0.bias", "recon.2.weight"]


def _observation(pattern: list[tuple[Frame, ...]], *, health: dict[str, Any] | None = None, device: str = "cpu",
                 unused: tuple[tuple[int, str], ...] = ()) -> Observation:
    """60 samples of the fit loop cycling through ``pattern``, the loader blocked in put; the board's health probe
    (when given) and the app's device; the code facts of the forward (``unused``: its lines never read)."""
    stacks = [stack([thread_sample("feature-loader", LOADER, tid=11, active=False),
                     thread_sample("fit-loop", frames, tid=12, active=True)], t=i * 0.05)
              for i, frames in enumerate(pattern * (60 // len(pattern)))]
    probes = {"health": health} if health is not None else {}
    boards = (board(probes, {"config": {"device": device}}),)
    obs = observation(boards, stacks)
    code = tuple(SourceLine(filename=PROG, line=n, function="SpeechModel.forward", text=LINES[n],
                            unused_outputs=unused) for n in (53, 54, 56, 90))
    facts = cuda_facts() if device == "cuda" else ProcessFacts(state="S", start_wall_s=NOW_S - 120.0,
                                                                stderr_target=None, stderr_tail=None, uses_cuda=False)
    return replace(obs, source_lines={f"{PROG}:{n}": t for n, t in LINES.items()}, process=facts, code=code)


def _analyse(obs: Observation) -> Analysis:
    return analyse(obs, now_wall_s=NOW_S)


PLANTED = [_call(56), _call(56), _call(53), _call(54), BACKWARD]  # 40% in the decoder


def test_a_head_whose_tensors_get_no_gradient_runs_every_step_for_nothing_a_warning_on_cpu() -> None:
    """The planted program under the health probe: recon's tensors get no gradient, the loss's graph reaches none,
    and 40% of the fit loop's samples are inside `self.recon(h)`."""
    f = next(f for f in _analyse(_observation(PLANTED, health=_health(6, RECON))).findings if f.rule_id == RULE)
    assert f.severity == Severity.WARNING
    assert f.claim.startswith("speech_ctc.py:56 (SpeechModel.forward) computes an output that nothing reads (its "
                              "module's 6 trainable tensors in AdamW#0 get no gradient and the loss's autograd graph "
                              "reaches none of them, e.g. recon.0.weight (health probe)): 40% of fit-loop's samples")
    ev = dict(f.evidence)
    assert ev["the call"] == 'speech_ctc.py:56 (SpeechModel.forward) `out["recon"] = self.recon(h)`'
    assert ev["fit-loop inside the call"].startswith("40% of its 60 samples")
    assert "requires_grad_(False)" in f.remedy and f.impact > 0.0


def test_an_output_assigned_to_a_name_never_read_is_wasted_from_the_code_alone() -> None:
    """From outside, no probe: `recon = self.recon(h)` and the function never reads `recon`."""
    obs = _observation([_call(90), _call(90), _call(53), _call(54), BACKWARD],
                       unused=((90, "recon = self.recon(h)"),))
    f = next(f for f in _analyse(obs).findings if f.rule_id == RULE)
    assert f.severity == Severity.WARNING and "assigned to a name its function never reads" in f.claim


def test_the_twin_that_skips_the_head_and_a_read_output_are_silent() -> None:
    """The twin freezes the head (no stuck tensors: frozen ones are not watched) and skips it: nothing. The same
    samples without the health probe's tensors or the code's unread name: the output may be read, nothing."""
    twin = [_call(53), _call(53), _call(54), BACKWARD]
    assert RULE not in _ids(_analyse(_observation(twin, health=_health(0, []))).findings)
    assert RULE not in _ids(_analyse(_observation(PLANTED, health=_health(0, []))).findings)
    assert RULE not in _ids(_analyse(_observation(PLANTED)).findings)
    # The graph reaches them (they are trained on, their gradient is None for another reason): not this.
    assert RULE not in _ids(_analyse(_observation(PLANTED, health=_health(6, RECON, none_in_graph=2))).findings)


def test_a_teacher_read_without_gradient_is_not_an_unused_output() -> None:
    """A teacher's output is detached and read as the target: its tensors get no gradient by design."""
    teacher = [_call(80), _call(80), _call(53), BACKWARD]
    health = _health(6, ["teacher.0.weight", "teacher.0.bias", "teacher.2.weight"])
    assert RULE not in _ids(_analyse(_observation(teacher, health=health)).findings)


def test_on_a_gpu_the_samples_do_not_measure_the_kernels_information_only() -> None:
    f = next(f for f in _analyse(_observation(PLANTED, health=_health(6, RECON), device="cuda")).findings
             if f.rule_id == RULE)
    assert f.severity == Severity.INFO and "the samples measure launching them, not their GPU time" in f.claim


@pytest.mark.parametrize(("names", "module"), [
    (["recon.0.weight", "recon.0.bias", "recon.2.weight"], "recon"),
    (["recon.weight", "recon.bias"], "recon"),
    (["model.decoder.layers.0.fc.weight", "model.decoder.layers.1.fc.weight"], "layers"),
    (["model.recon.0.weight", "model.aux.1.weight"], None),  # parts at named children: model's output may be read
    (["tensor 3 (4, 4)"], None),
    ([], None),
])
def test_the_module_shared_by_the_tensors_without_gradient(names: list[str], module: str | None) -> None:
    assert _shared_module(names) == module
