"""The view model of ``top``: the immutable :class:`~dflash_diag.view.frame.TopFrame`, its plain-text pieces and
the ``--batch`` report (text and JSON). Depends on :mod:`dflash_diag.model` only; the TUI and the command use it."""
