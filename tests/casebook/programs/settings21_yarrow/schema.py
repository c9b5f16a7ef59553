"""The telemetry schema shared with the gateway's validator (one reading of one sensor)."""
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, TypeAdapter
from typing_extensions import TypedDict

SITE = r"^GH-[0-9]{4}-[a-d]$"
BAY = r"^B[0-9]{3}$"
CONTROLLER = r"^CTL-[0-9A-F]{6}$"
CHANNEL = r"^(ch|aux)[0-9]{1,2}$"
SENSOR = r"^(soil_moist|soil_temp|air_temp|rel_hum|par|co2|ec|leaf_wet)_[0-9]{2}$"
TS = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$"
UNIT = r"^(pct|degC|umol/m2s|ppm|mS/cm)$"
FIRMWARE = r"^[0-9]+\.[0-9]+\.[0-9]+$"


def upload_adapter(sc):
    """A validator for one upload (a list of readings), built with the profile's settings."""

    class Reading(TypedDict):
        __pydantic_config__ = ConfigDict(regex_engine=sc["regex_engine"], strict=False)
        site: Annotated[str, Field(pattern=SITE)]
        bay: Annotated[str, Field(pattern=BAY)]
        controller: Annotated[str, Field(pattern=CONTROLLER)]
        channel: Annotated[str, Field(pattern=CHANNEL)]
        sensor: Annotated[str, Field(pattern=SENSOR)]
        ts: Annotated[str, Field(pattern=TS)]
        unit: Annotated[str, Field(pattern=UNIT)]
        firmware: Annotated[str, Field(pattern=FIRMWARE)]
        status: Literal["OK", "STALE", "FAULT"]
        value: float
        seq: Annotated[int, Field(ge=0)]

    return TypeAdapter(list[Reading])
