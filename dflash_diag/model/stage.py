"""The pipeline stages, named once: their wire values and the words a report uses for them.

A threaded trainer's pipeline has an upstream stage that puts into a queue (the *producer*) and a downstream
stage that gets from it (the *consumer*); every other thread is outside the pipeline. The enum's values are
the wire values every document already carries (the board's ``app.threads[name].role``, the ``stage`` of a
thread in ``--json``, rule ids like ``pipeline-bottleneck-drafter``): they are our reference trainer's words,
kept so that no reader breaks. What a *person* reads is :class:`StageNames`: the program's own words when its
threads use them (``target-0``, ``drafter-1``), else the roles ("the consumer stage of `q`", "worker threads").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType


class Stage(StrEnum):
    """A pipeline role. A ``str``: ``Stage.DRAFTER == "drafter"``, and JSON writes the value."""

    TARGET = "target"  # the producer stage: upstream of the pipeline's queue
    DRAFTER = "drafter"  # the consumer stage: downstream of it
    OTHER = "other"  # not a pipeline stage

    @property
    def role(self) -> str:
        """The role's plain word: ``producer``, ``consumer`` or ``other``."""
        return _ROLE[self]

    @property
    def other_side(self) -> Stage:
        """The stage across the queue (``OTHER`` for ``OTHER``)."""
        return _ACROSS[self]

    @classmethod
    def of(cls, value: object) -> Stage:
        """The stage a wire value names; ``OTHER`` for anything else (a foreign role, a typo, None)."""
        try:
            return cls(value)  # type: ignore[arg-type]
        except ValueError:
            return cls.OTHER


PIPELINE_STAGES: tuple[Stage, Stage] = (Stage.TARGET, Stage.DRAFTER)
STAGE_ORDER: Mapping[str, int] = MappingProxyType({Stage.TARGET: 0, Stage.DRAFTER: 1, Stage.OTHER: 2})
_ROLE = {Stage.TARGET: "producer", Stage.DRAFTER: "consumer", Stage.OTHER: "other"}
_ACROSS = {Stage.TARGET: Stage.DRAFTER, Stage.DRAFTER: Stage.TARGET, Stage.OTHER: Stage.OTHER}
# A thread's name without its index: "worker-1" -> "worker", "loader_03" -> "loader", "Thread-4 (run)" -> "Thread".
_INDEX = re.compile(r"[\s_\-.:#]*\d+$")


@dataclass(frozen=True, slots=True)
class StageNames:
    """The words for the stages of one program, chosen from its own naming.

    ``own_words``: the program's threads are called after our stage names (``target-*``/``drafter-*``), so
    "the drafter stage" means something to its author; otherwise the roles do ("the consumer stage of `q`").
    ``queue``: the pipeline queue's name when the stages were inferred from it. ``stems``: per stage, the
    name its threads share ("worker" for worker-0 and worker-1), so a claim can say "the worker threads".
    """

    own_words: bool = False
    queue: str = ""
    stems: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def word(self, stage: str) -> str:
        """One word for the stage: ``drafter`` (the program's) or ``consumer`` (its role)."""
        stage = Stage.of(stage)
        return stage.value if self.own_words or stage is Stage.OTHER else stage.role

    def label(self, stage: str) -> str:
        """The stage in a sentence: "the consumer stage of `q`", "the drafter stage"."""
        of_queue = f" of `{self.queue}`" if self.queue and not self.own_words and stage in PIPELINE_STAGES else ""
        return f"the {self.word(stage)} stage{of_queue}"

    def threads(self, stage: str) -> str:
        """The stage's threads: "worker threads" when they share a name, else "consumers" ("drafters")."""
        stem = self.stems.get(Stage.of(stage), "")
        return f"{stem} threads" if stem and not self.own_words else f"{self.word(stage)}s"

    def bound(self, stage: str) -> str:
        """The verdict's word: "consumer-bound", "drafter-bound"."""
        return f"{self.word(stage)}-bound"

    @classmethod
    def of_threads(cls, members: Mapping[str, Iterable[str]], *, queue: str = "") -> StageNames:
        """From each pipeline stage's thread names: the program's own words when a thread of every staffed stage
        carries its stage's name (``target-0``, ``drafter-1``), the shared stem of each stage's names."""
        staffed = {Stage.of(s): tuple(n) for s, n in members.items() if Stage.of(s) in PIPELINE_STAGES and tuple(n)}
        own = bool(staffed) and all(any(s.value in name.lower() for name in names) for s, names in staffed.items())
        stems = {s: stem for s, names in staffed.items() if (stem := common_stem(names))}
        return cls(own_words=own, queue=queue, stems=MappingProxyType(stems))


def common_stem(names: Iterable[str]) -> str:
    """The name every thread of a group shares once its index is dropped ("worker" for worker-0, worker-1); ""
    when they differ, or the stem is a generic one (Python's own "Thread-N" names say nothing)."""
    stems = {_INDEX.sub("", name.split(" (", 1)[0]).strip() for name in names}
    if len(stems) != 1:
        return ""
    stem = next(iter(stems))
    return "" if stem.lower() in ("", "thread", "dummy") else stem
