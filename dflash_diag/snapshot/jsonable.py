"""Model objects to plain JSON values (and back for what `diff` needs): dataclasses, enums, NA, mappings."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from enum import Enum
from typing import Any

from dflash_diag.model import NA


def to_jsonable(value: Any) -> Any:
    """A JSON-safe copy: dataclasses become objects, enums their value, NA {"na": reason}, NaN/inf null."""
    if isinstance(value, NA):
        return {"na": value.reason}
    if isinstance(value, Enum):
        return value.value if not isinstance(value.value, int) else value.name.lower()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return out
    if isinstance(value, Mapping):
        return {_key(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _key(key: Any) -> str:
    if isinstance(key, Enum):
        return str(key.value)
    return str(key)


def na_or(value: Any) -> Any:
    """JSON for a Maybe value: the value, or {"na": reason}."""
    return to_jsonable(value)
