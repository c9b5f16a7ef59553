"""dflash-diag: see where the threads of a PyTorch training process spend their time, and why.

Layers, one import direction (docs/architecture.md; enforced by tests/test_layers.py and
tests/test_import_cycles.py): ``model`` (frozen dataclasses) <- ``sources`` (all I/O) and ``analysis`` (pure
functions, which never import sources) <- ``view`` <- ``tui``; ``snapshot`` / ``export`` <- ``cli``.
"""

__version__ = "0.1.0"
