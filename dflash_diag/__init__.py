"""dflash-diag: see where the threads of a PyTorch training process spend their time, and why.

Layers, one import direction (enforced by tests/test_layers.py):
``model`` (frozen dataclasses) <- ``sources`` (all I/O) <- ``analysis`` (pure functions)
<- ``tui`` / ``snapshot`` / ``cli``.
"""

__version__ = "0.1.0"
