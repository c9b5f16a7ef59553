"""Observation records of the shorebird survey app (one JSON array per survey sheet)."""
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

SPECIES = ["dunlin", "knot", "sanderling", "redshank", "curlew", "oystercatcher", "turnstone", "grey plover"]


class _Obs(BaseModel):
    site: int
    minute: int
    observer: str
    lat: float
    lon: float
    notes: str | None = None


class Count(_Obs):
    kind: Literal["count"]
    species: str
    adults: int
    juveniles: int
    method: str


class Flock(_Obs):
    kind: Literal["flock"]
    species: str
    size: int
    spread_m: float
    heading_deg: float


class Resight(_Obs):
    kind: Literal["resight"]
    species: str
    ring: str
    colour_code: str
    age: str


class Weather(_Obs):
    kind: Literal["weather"]
    wind_ms: float
    wind_dir: float
    visibility_km: float
    rain: bool


class Tide(_Obs):
    kind: Literal["tide"]
    height_m: float
    state: str
    minutes_to_high: int


class Disturbance(_Obs):
    kind: Literal["disturbance"]
    source: str
    distance_m: float
    birds_flushed: int


class Habitat(_Obs):
    kind: Literal["habitat"]
    substrate: str
    cover_pct: float
    water_depth_cm: float


class Feeding(_Obs):
    kind: Literal["feeding"]
    species: str
    pecks_per_min: float
    prey: str
    success_rate: float


class Roost(_Obs):
    kind: Literal["roost"]
    species: str
    birds: int
    elevation_m: float
    compact: bool


class Moult(_Obs):
    kind: Literal["moult"]
    species: str
    primary_score: int
    body_pct: float


class Predator(_Obs):
    kind: Literal["predator"]
    predator: str
    attacks: int
    kills: int


class Nest(_Obs):
    kind: Literal["nest"]
    species: str
    eggs: int
    stage: str
    fenced: bool


RECORD_TYPES = (Count, Flock, Resight, Weather, Tide, Disturbance, Habitat, Feeding, Roost, Moult, Predator, Nest)
KINDS = [t.model_fields["kind"].annotation.__args__[0] for t in RECORD_TYPES]


def sheet_adapter(schema):
    """Validator for one survey sheet; the profile chooses whether the union is tagged by a field."""
    config = ConfigDict(strict=schema.strict, cache_strings=schema.cache_strings, extra=schema.extra)
    for t in RECORD_TYPES:
        t.model_config.update(config)
        t.model_rebuild(force=True)
    record = Union[RECORD_TYPES]
    if schema.discriminator:
        record = Annotated[record, Field(discriminator=schema.discriminator)]
    return TypeAdapter(list[record])
