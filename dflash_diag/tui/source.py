"""What the ``top`` app needs from a data source: frames, and a few controls. The command injects the real one
(:mod:`dflash_diag.cli.top_live`), tests a fake; the app never builds I/O itself."""

from __future__ import annotations

from typing import Protocol

from dflash_diag.view.frame import TopFrame


class TopSource(Protocol):
    """Where ``top`` gets its frames. ``poll`` is called from the sampler thread only."""

    @property
    def pid(self) -> int: ...

    @property
    def rate_hz(self) -> float | None:
        """The sampling rate asked for; None: auto (the source picks it by the CPU left free)."""
        ...

    def poll(self) -> TopFrame:
        """The newest frame. Raises :class:`~dflash_diag.errors.AttachError` when the process cannot be read."""
        ...

    def set_rate(self, rate_hz: float | None) -> float | None:
        """Ask for a new sampling rate (None: auto); returns the request as clamped."""
        ...

    def set_native(self, native: bool) -> bool:
        """Ask for native frames (rate-limited by the source); returns whether they are on."""
        ...

    def write_snapshot(self) -> str:
        """Write a bug-report bundle of the process; returns its path."""
        ...

    def close(self) -> None: ...
