"""Numerical health checks for training runs.

NaNs in the keyword-spotting models tended to show up deep inside one block
long before the loss went bad, so every module's output (and every module's
gradient on the way back) is checked for non-finite values; the first
offending module is reported by name.

policy "always": the checks stay registered for the whole run.
policy "first":  only the first step is checked (a start-up sanity pass).
"""
import torch
from torch.nn.modules import module as _module

_names = {}
_bad = []


def _finite(t):
    return not isinstance(t, torch.Tensor) or bool(torch.isfinite(t).all())


def _fwd(mod, inputs, output):
    outs = output if isinstance(output, tuple) else (output,)
    if not all(_finite(o) for o in outs) and not _bad:
        _bad.append(("forward", _names.get(id(mod), type(mod).__name__)))


def _bwd(mod, grad_input, grad_output):
    if not all(_finite(g) for g in grad_output if g is not None) and not _bad:
        _bad.append(("backward", _names.get(id(mod), type(mod).__name__)))


class HealthChecks:
    def __init__(self, model, policy="always"):
        self.policy = policy
        for name, m in model.named_modules():
            _names[id(m)] = name or "<root>"
        self._handles = [
            _module.register_module_forward_hook(_fwd),
            _module.register_module_full_backward_hook(_bwd),
        ]

    def after_step(self, step):
        if _bad:
            where, name = _bad[0]
            raise FloatingPointError(f"non-finite values in {where} of {name} at step {step}")
        if self.policy == "first" and self._handles:
            for h in self._handles:
                h.remove()
            self._handles = []
