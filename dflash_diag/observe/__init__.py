"""The observation layer: what is looked at (:class:`Target`: a process or a job, resolved once), for how long and
how fast (:class:`Window`), whether it can be looked at (:func:`check_reachable`), and the looking itself
(:func:`observe`, and ``observe.live.LiveObserver`` for ``top``'s live view), returning plain data that
``analysis.analyse`` judges and ``observe.codec`` writes and reads (``doctor --save-observation`` / ``--replay``).

It sits above ``sources`` (every read) and ``analysis`` and below ``snapshot`` and ``cli``: every command that takes
a window reads through here, so they sample alike and say alike what stops them.
"""

from dflash_diag.observe.collect import Progress, observe
from dflash_diag.observe.reach import Reach, check_reachable
from dflash_diag.observe.target import Target, resolve_target
from dflash_diag.observe.window import DEFAULT_DURATION_S, Window, WindowError

__all__ = ["DEFAULT_DURATION_S", "Progress", "Reach", "Target", "Window", "WindowError", "check_reachable", "observe",
           "resolve_target"]
