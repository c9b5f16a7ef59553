"""A torch function or dispatch mode between the program's code and torch's ops (``findings.interposition``):
built observations with the frames py-spy reports for each (the recorded real run is tests/casebook's
settings5_molprop, replayed in the casebook lane)."""

from __future__ import annotations

from dataclasses import replace

from findings_builders import NOW_S, observation, stack, thread_sample

from dflash_diag.analysis import analyse
from dflash_diag.model import Frame, Severity

SITE = "/venv/lib/python3.11/site-packages"
TRAIN = "/app/train.py"
STEP = Frame("train_step", TRAIN, 30)
OP = Frame("forward", f"{SITE}/torch/nn/modules/linear.py", 125)
DEVICE_MODE = Frame("DeviceContext.__torch_function__", f"{SITE}/torch/utils/_device.py", 122)
OWN_MODE = Frame("AuditMode.__torch_function__", "/app/audit.py", 14)
FAKE_MODE = Frame("FakeTensorMode.__torch_dispatch__", f"{SITE}/torch/_subclasses/fake_tensor.py", 1400)
DYNAMO = Frame("_compile", f"{SITE}/torch/_dynamo/convert_frame.py", 700)


def _trainer(inside: int, machinery: tuple[Frame, ...], *, total: int = 20):  # type: ignore[no-untyped-def]
    """One training thread: ``inside`` of ``total`` samples in ``machinery`` (innermost first, then the step),
    the rest in a torch op."""
    stacks = [stack([thread_sample("trainer", (*machinery, STEP) if i < inside else (OP, STEP), tid=11)], t=i * 0.2)
              for i in range(total)]
    obs = observation(stacks=stacks)
    return analyse(replace(obs, source_lines={f"{TRAIN}:30": "        loss = model(x).sum()"}, now_wall_s=NOW_S))


def _found(analysis):  # type: ignore[no-untyped-def]
    return [f for f in analysis.findings if f.rule_id == "op-interposition"]


def test_a_default_device_mode_on_the_training_thread_is_named_with_what_pushes_it_and_its_cost() -> None:
    # 8 of 20 samples inside the mode: 6 with its handler the innermost Python frame, 2 in the op it forwards to.
    analysis = _trainer(6, (DEVICE_MODE,))
    analysis_op = _trainer(2, (OP, DEVICE_MODE))
    (finding,) = _found(analysis)
    assert finding.severity is Severity.WARNING and abs(finding.impact - 0.30) < 1e-9
    assert "torch.set_default_device" in finding.claim and "DeviceContext.__torch_function__" in finding.claim
    assert "train_step (train.py:30)" in finding.claim
    # In the op it forwards to, the handler is not what costs: said, not warned.
    (quiet,) = _found(analysis_op)
    assert quiet.severity is Severity.INFO and quiet.impact == 0.0


def test_a_programs_own_mode_is_said_as_its_own_and_a_brief_one_is_not_named() -> None:
    (own,) = _found(_trainer(5, (OWN_MODE,)))
    assert "the program's own torch function or dispatch mode" in own.claim and "audit.py:14" in own.claim
    assert _found(_trainer(1, (OWN_MODE,))) == []


def test_torch_compile_tracing_through_its_fake_tensors_is_compiling_not_a_mode_left_on() -> None:
    assert _found(_trainer(12, (FAKE_MODE, DYNAMO))) == []
