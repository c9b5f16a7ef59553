"""Settings shared with the on-device keyboard model.

The teacher is the int8 suggestion model that ships in the keyboard app.  Its
quantized kernels come from the process-wide quantized engine: 'mobile' uses
the phones' engine (QNNPACK) so the soft labels match what users see
bit-for-bit; 'server' uses the x86 engine of the training hosts.
"""
import torch

ENGINES = {"mobile": "qnnpack", "server": "x86"}


def apply(profile):
    engine = ENGINES[profile]
    if engine not in torch.backends.quantized.supported_engines:
        raise RuntimeError(f"quantized engine {engine} not built in")
    torch.backends.quantized.engine = engine
    return engine
