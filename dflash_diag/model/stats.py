"""Aggregates over a window of samples: per thread, per pipeline stage, and the pipeline verdict."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dflash_diag.model.common import NA, Maybe
from dflash_diag.model.stacks import Frame
from dflash_diag.model.stage import PIPELINE_STAGES, Stage, StageNames
from dflash_diag.model.states import ThreadState


@dataclass(frozen=True, slots=True)
class ThreadStats:
    name: str
    os_thread_id: int | None
    stage: Stage  # by name pattern (configurable), the roles on the board, or inferred from queue use
    n_samples: int
    shares: Mapping[ThreadState, float]  # fractions of n_samples, summing to 1.0 when n_samples > 0
    cpu_pct: Maybe[float]  # from /proc, % of one core over the window
    gil_held_pct: float  # share of samples with owns_gil
    top_frame: Frame | None  # most frequent innermost Python frame
    gpu_index: int | None  # device the thread works on, when known (board or trainer config)
    timeline: tuple[ThreadState, ...]  # the state of each sample in time order (for the state strip)
    # monotonic time of each timeline entry, so strips of threads that appeared mid-window line up (empty when
    # unknown)
    timeline_s: tuple[float, ...] = ()
    # A helper thread works on behalf of a stage's own threads (PyTorch's autograd worker runs their backward):
    # listed with that stage, left out of the stage's mean shares, because the stage's threads already carry
    # that time while they wait for it. ``attribution`` says why the thread has its stage when its name does
    # not ("autograd worker: runs drafter-0's backward in 9 of 10 samples").
    helper: bool = False
    attribution: str = ""
    # The thread's entry point: its outermost frame outside threading.py (the target function of a
    # threading.Thread); threads that share it do the same job. None when no Python frame was seen.
    entry: Frame | None = None
    # From /proc schedstat: % of the window the thread was runnable but waited for a CPU (an oversubscribed
    # machine). With ``cpu_pct`` it tells how long the thread slept: 100 - cpu_pct - runq_pct.
    runq_pct: Maybe[float] = NA("not read")

    def __post_init__(self) -> None:
        # A stage given as its wire value ("drafter", from a document or a test) is the enum member all the same.
        object.__setattr__(self, "stage", Stage.of(self.stage))


@dataclass(frozen=True, slots=True)
class StageStats:
    stage: Stage
    threads: tuple[str, ...]
    batches_per_s: Maybe[float]
    tokens_per_s: Maybe[float]
    shares: Mapping[ThreadState, float]  # mean over the stage's threads

    def __post_init__(self) -> None:
        object.__setattr__(self, "stage", Stage.of(self.stage))


@dataclass(frozen=True, slots=True)
class PipelineView:
    target: StageStats
    drafter: StageStats
    queue_name: str  # "q_hs"
    queue_depth: Maybe[int]
    queue_maxsize: Maybe[int]
    queue_depth_history: tuple[int, ...]
    queue_trend_per_s: Maybe[float]  # slope of depth, items/s (> 0: backing up)
    producer_starved_share: Maybe[float]  # time target threads spend blocked in put
    consumer_starved_share: Maybe[float]  # time drafter threads spend blocked in get
    bottleneck: str  # a pipeline ``Stage`` value, "balanced", "unknown" (or "hung", set by the causal pass)
    verdict: str  # one line, from evidence
    queue_trend: str = ""  # "rising", "falling", "steady" (the verdict's words for queue_trend_per_s), "" unknown
    # The queue probe's measured blocked shares are averaged over the boards of the same window as the stacks;
    # the sampled ones (from the stacks) are kept next to them, so a screen can show both.
    producer_starved_sampled: Maybe[float] = NA("not computed")
    consumer_starved_sampled: Maybe[float] = NA("not computed")
    probe_boards: int = 0  # boards the probe shares are averaged over (0: the shares are sampled)
    # How the stages were told apart: "names" (thread-name patterns), "board" (roles the program published) or
    # "queues" (inferred: threads that put into a queue are the producer/target stage, those that get from it
    # the consumer/drafter stage); "" when no thread belongs to a stage.
    stages_from: str = ""
    # The words every output uses for the stages: the program's own when its threads use them, else the roles
    # ("the consumer stage of `q`"). ``target``/``drafter`` above and ``bottleneck`` stay wire values.
    names: StageNames = StageNames()
    # "CPUs oversubscribed: ..." when the computing threads waited for a CPU a good part of the window
    # (``analysis.threads.oversubscription``): the shares and this verdict follow the scheduler then. "" otherwise.
    cpu_note: str = ""


def stage_names(threads: Iterable[ThreadStats], *, queue: str = "") -> StageNames:
    """The words for a program's stages from its threads: its own (``target``/``drafter``) when they are called so,
    else the roles, and the name each stage's own threads share ("worker"). ``queue``: the queue the stages were
    inferred from, named in "the consumer stage of `q`"."""
    threads = tuple(threads)
    members = {stage: [t.name for t in threads if t.stage == stage and not t.helper] for stage in PIPELINE_STAGES}
    return StageNames.of_threads(members, queue=queue)
