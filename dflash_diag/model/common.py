"""Missing data is a value: ``NA("no NVML: libnvidia-ml.so not found")`` instead of None or an exception."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class NA:
    """A reading that is not available, with the reason a user can act on."""

    reason: str

    def __str__(self) -> str:
        return f"N/A: {self.reason}"

    def __bool__(self) -> bool:
        return False


Maybe = T | NA


def is_na(value: object) -> bool:
    """True when ``value`` is an :class:`NA`."""
    return isinstance(value, NA)
