"""The burrow-visit schema shared with the annotation tool, built with the profile's settings."""
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


def build(sc):
    config = ConfigDict(revalidate_instances=sc["revalidate_instances"], extra="forbid")

    class Weather(BaseModel):
        model_config = config
        wind_ms: float = Field(ge=0, le=60)
        rain: bool
        visibility_km: float = Field(ge=0)

    class Box(BaseModel):
        """One detector box (normalised image coordinates) on one frame of the visit."""
        model_config = config
        frame: int = Field(ge=0)
        x: float = Field(ge=0, le=1)
        y: float = Field(ge=0, le=1)
        w: float = Field(gt=0, le=1)
        h: float = Field(gt=0, le=1)
        score: float = Field(ge=0, le=1)
        label: Literal["adult", "chick", "fish", "gull", "rabbit"]

    class Visit(BaseModel):
        model_config = config
        burrow: str = Field(pattern=r"^SK-[0-9]{2}-[0-9]{3}$")
        camera: str = Field(pattern=r"^CAM[0-9]{3}$")
        start: datetime
        duration_s: float = Field(gt=0)
        frame_scores: list[float]
        fish: int = Field(ge=0)
        boxes: list[Box]
        behaviour: Literal["provisioning", "arrival", "departure", "maintenance", "loafing"]
        weather: Weather
        flags: list[str]

    class BurrowHistory(BaseModel):
        """The last visits of one burrow, in time order: one training example."""
        model_config = config
        burrow: str
        visits: list[Visit]

    return Visit, BurrowHistory
