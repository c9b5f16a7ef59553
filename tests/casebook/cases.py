"""The casebook: small threaded training programs written as different third parties would write them, each
with one planted cause (or none), and what ``doctor`` must say about each, attached from outside and under
``dflash-diag run``.

A program lives in ``programs/<name>/`` with its own layout, names and style; none imports the reference
trainer or this package. ``ready`` is a regex on the program's own output (stdout + stderr) that says it
reached the state to diagnose; ``settle_s`` more seconds let it get there fully.

Expectations per mode: ``rules`` must all be named (any severity); ``headline`` is the set of rule ids the
headline may lead with or give as its first cause; a healthy case must get no warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Expect:
    rules: frozenset[str] = frozenset()
    headline: frozenset[str] = frozenset()
    headline_text: str = ""  # a regex the headline's text must match (e.g. the hot function's name)


def _both(rules: set[str], headline: set[str] | None = None, text: str = "") -> dict[str, Expect]:
    e = Expect(frozenset(rules), frozenset(headline if headline is not None else rules), text)
    return {"outside": e, "probes": e}


HEALTHY = {"outside": Expect(), "probes": Expect()}


@dataclass(frozen=True)
class Case:
    name: str
    program: str  # directory under programs/
    argv: tuple[str, ...]  # after the interpreter, run in the program's directory
    cause: str  # what is planted, in one line
    expect: dict[str, Expect]
    ready: str
    settle_s: float = 2.0
    ready_timeout_s: float = 120.0
    action: str = ""  # "sigstop" | "edit:<path in the program dir>"
    gpu: bool = False  # needs CUDA (skipped on CPU)
    both: bool = False  # also run with the GPU cases (healthy programs that take --device)
    exits: bool = False
    healthy: bool = False
    family: str = ""  # the rule family it covers (docs/benchmarks.md table)
    miss: str = ""  # which of issue 9's five misses it reproduces, if any
    tags: tuple[str, ...] = field(default_factory=tuple)


CASES: tuple[Case, ...] = (
    Case(
        name="hang_dead_consumers",
        program="hang_dead_consumers",
        argv=("run_pipeline.py",),
        cause="both student (consumer) threads die of a shape error; teachers block in Queue.put forever",
        expect=_both({"pipeline-hang", "thread-died"}, {"pipeline-hang"}, r"student-0"),
        ready=r"Exception in thread student-\d(.|\n)*Exception in thread student-\d",
        family="hang", miss="1: hung pipeline read as slow",
    ),
)
