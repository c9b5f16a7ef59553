"""The pipeline view: target vs drafter stage, the queue between them, and which stage is the bottleneck. Pure.

Evidence, in the order the verdict weighs it:
- starvation from the stacks: the share of samples target threads spend blocked in ``put`` (the queue is full:
  drafters are too slow) and drafter threads spend blocked in ``get`` (the queue is empty: targets too slow);
- the same shares measured in-process by the ``queues`` probe when the board has it (exact, not sampled);
- the queue's fill (depth / maxsize) and its trend over the window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from dflash_contract.board import AppKeys, ProbeName, QueueKeys, is_stale
from dflash_diag.analysis.threads import oversubscription
from dflash_diag.model import (
    NA,
    PIPELINE_STAGES,
    Board,
    Maybe,
    Observation,
    PipelineView,
    Stage,
    StageNames,
    StageStats,
    ThreadState,
    ThreadStats,
)
from dflash_diag.model.stats import stage_names

DEFAULT_QUEUE = "q_hs"
STARVED_SHARE = 0.15  # blocked this share of the time or more: the stage waits on the other one
NEVER_SHARE = 0.02  # below this, "never waits"
FULL_FILL = 0.75
EMPTY_FILL = 0.25
TREND_PER_S = 0.1  # items/s that count as rising/falling
# A stage is the bottleneck when the other one waits on it by this much more of its time than the other way round
# (plus two standard errors of the sampled shares): closer than that, the pipeline is balanced. A live screen keeps
# the stage it named while the difference stays at HOLD_MARGIN or more (hysteresis: no flip on noise).
VERDICT_MARGIN = 0.10
HOLD_MARGIN = 0.0
VERDICT_SIGMAS = 2.0
MAX_HISTORY = 120


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if value >= 0 else None


def stage_stats(stage: Stage, threads: Sequence[ThreadStats], board: Board | None) -> StageStats:
    # Helper threads (autograd workers) are not averaged in: their busy time is already in the stage's own
    # threads, which wait in backward() while a helper runs it.
    members = [t for t in threads if t.stage == stage and not t.helper]
    shares: dict[ThreadState, float] = {state: 0.0 for state in ThreadState}
    if members:
        for t in members:
            for state in ThreadState:
                shares[state] += t.shares.get(state, 0.0) / len(members)
    batches, tokens = _stage_rates(stage, board)
    return StageStats(
        stage=stage,
        threads=tuple(t.name for t in members),
        batches_per_s=batches,
        tokens_per_s=tokens,
        shares=MappingProxyType(shares),
    )


def _stage_rates(stage: Stage, board: Board | None) -> tuple[Maybe[float], Maybe[float]]:
    if board is None:
        na = NA("no probe board (run the trainer under `dflash-diag run` or import probes)")
        return na, na
    app = board.app if isinstance(board.app, Mapping) else {}
    if not app:
        na = NA("the board has no app section (not the reference trainer)")
        return na, na
    batches = _num(app.get(f"{stage}_batches_per_s"))
    tokens = _num(app.get(f"{stage}_tokens_per_s"))
    if tokens is None:
        tokens = _num(app.get(AppKeys.TOKENS_PER_S))  # one pipeline: both stages move the same tokens
    return (
        batches if batches is not None else NA(f"app section has no {stage}_batches_per_s"),
        tokens if tokens is not None else NA("app section has no tokens_per_s"),
    )


def _queue_payload(board: Board | None, name: str) -> tuple[str, Mapping[str, Any] | None]:
    if board is None:
        return name, None
    queues = board.probe(ProbeName.QUEUES)
    if not queues:
        return name, None
    entries = {k: v for k, v in queues.items() if isinstance(v, Mapping) and k != "status"}
    if name in entries:
        return name, entries[name]
    if len(entries) == 1:
        only = next(iter(entries))
        return only, entries[only]
    return name, None


def _missing_queue(board: Board | None, name: str) -> str:
    queues = board.probe(ProbeName.QUEUES) if board is not None else None
    if not queues:
        return "the board has no queues probe (watch the queue: session.watch_queue)"
    names = sorted(k for k, v in queues.items() if isinstance(v, Mapping) and k != "status")
    return f"no `{name}` among the watched queues ({', '.join(names) or 'none'})"


def _history(payload: Mapping[str, Any] | None, obs: Observation, name: str, board: Board | None) -> tuple[int, ...]:
    """The queue's depth over the observation's window (the same window as every other pane): the probe's own
    history, one point per publish, cut to the window; else the depths of the window's boards."""
    if payload is not None and isinstance(payload.get(QueueKeys.DEPTH_HISTORY), list):
        values = tuple(v for v in (_int(x) for x in payload[QueueKeys.DEPTH_HISTORY]) if v is not None)
        interval_s = board.interval_s if board is not None and board.interval_s > 0 else None
        keep = max(2, math.ceil(obs.window_s / interval_s)) if interval_s and obs.window_s > 0 else MAX_HISTORY
        return values[-min(keep, MAX_HISTORY):]
    return tuple(d for _, d in _board_depths(obs, name))[-MAX_HISTORY:]


def _probe_share(obs: Observation, name: str, key: str) -> tuple[float | None, int]:
    """A queue probe's blocked share averaged over every board of the window, weighted by the time each board's
    reading covers (its ``window_s``): the same window as the sampled shares, not the newest 0.5 s."""
    total = weight = 0.0
    boards = 0
    for board in obs.boards if isinstance(obs.boards, tuple) else ():
        _, payload = _queue_payload(board, name)
        share = _num(payload.get(key)) if payload is not None else None
        if share is None:
            continue
        covered = _num(payload.get("window_s")) if payload is not None else None
        w = covered if covered is not None and covered > 0 else board.interval_s
        total += share * w
        weight += w
        boards += 1
    return (total / weight if weight > 0 else None), boards


def _board_depths(obs: Observation, name: str) -> list[tuple[float, int]]:
    """(wall_time_s, depth) of the queue in every distinct board of the window."""
    out = []
    boards = obs.boards if isinstance(obs.boards, tuple) else ()
    for board in boards:
        _, payload = _queue_payload(board, name)
        depth = _int(payload.get(QueueKeys.DEPTH)) if payload is not None else None
        if depth is not None:
            out.append((board.wall_time_s, depth))
    return out


def _slope(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope (y per x unit), None with fewer than 2 distinct x."""
    if len(points) < 2:
        return None
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    var = sum((p[0] - mx) ** 2 for p in points)
    if var <= 0:
        return None
    return sum((p[0] - mx) * (p[1] - my) for p in points) / var


def _trend(obs: Observation, name: str, history: tuple[int, ...], board: Board | None) -> Maybe[float]:
    depths = _board_depths(obs, name)
    slope = _slope([(t, float(d)) for t, d in depths]) if len(depths) >= 3 else None
    if slope is None and len(history) >= 3 and board is not None and board.interval_s > 0:
        # depth_history holds one point per publish, ``interval_s`` apart.
        slope = _slope([(i * board.interval_s, float(d)) for i, d in enumerate(history)])
    if slope is None:
        return NA("needs 3 or more queue readings" if board is not None else "no queue probe")
    return slope


def _mean_share(threads: Sequence[ThreadStats], stage: Stage, state: ThreadState) -> Maybe[float]:
    members = [t for t in threads if t.stage == stage and t.n_samples > 0]
    if not members:
        return NA(f"no {stage.role} threads sampled")
    return sum(t.shares.get(state, 0.0) for t in members) / len(members)


def _stage_samples(threads: Sequence[ThreadStats], stage: Stage) -> int:
    """Stack samples behind a stage's sampled shares (its own threads, not the helpers)."""
    return sum(t.n_samples for t in threads if t.stage == stage and not t.helper)


def pipeline_view(
    obs: Observation,
    threads: tuple[ThreadStats, ...],
    *,
    queue_name: str = DEFAULT_QUEUE,
    now_wall_s: float | None = None,
    stages_from: str = "",
    previous: str = "",
) -> PipelineView:
    """Stage rates, the queue, starvation shares and a one-line verdict naming the bottleneck stage.

    ``now_wall_s`` (default: the end of the window) is when the view is made: a stale board (the contract's
    one rule, ``dflash_contract.board.is_stale``): its rates and queue are not trusted. ``previous``: the
    bottleneck a live screen showed last (its hysteresis, :func:`_verdict`); "" for a single window.
    """
    now = now_wall_s if now_wall_s is not None else obs.started_wall_s + obs.window_s
    board = obs.board
    stale = board is not None and is_stale(board.age_s(now), board.interval_s)
    live_board = None if stale else board
    target = stage_stats(Stage.TARGET, threads, live_board)
    drafter = stage_stats(Stage.DRAFTER, threads, live_board)
    no_board = obs.boards if isinstance(obs.boards, NA) else NA("no probe board")  # the reader's reason
    if stale and board is not None:
        na = NA(f"board stale: no update for {board.age_s(now):.0f} s")
        target = _with_rates(target, na)
        drafter = _with_rates(drafter, na)
    elif board is None:
        target = _with_rates(target, no_board)
        drafter = _with_rates(drafter, no_board)

    qname, payload = _queue_payload(live_board, queue_name)
    if payload is not None:
        depth: Maybe[int] = _int(payload.get(QueueKeys.DEPTH)) if _int(payload.get(QueueKeys.DEPTH)) is not None else NA("bad depth")
        maxsize_raw = _int(payload.get(QueueKeys.MAXSIZE))
        maxsize: Maybe[int] = (
            maxsize_raw if maxsize_raw else NA("unbounded queue" if maxsize_raw == 0 else "no maxsize")
        )
    else:
        reason = (
            f"board stale: no update for {board.age_s(now):.0f} s" if stale and board is not None
            else no_board.reason if board is None
            else _missing_queue(live_board, queue_name)
        )
        depth, maxsize = NA(reason), NA(reason)
    history = _history(payload, obs, qname, live_board) if payload is not None else ()
    trend = _trend(obs, qname, history, live_board) if payload is not None else NA("no queue probe")

    put_stack = _mean_share(threads, Stage.TARGET, ThreadState.QUEUE_PUT)
    get_stack = _mean_share(threads, Stage.DRAFTER, ThreadState.QUEUE_GET)
    put_probe, n_put = _probe_share(obs, qname, QueueKeys.PUT_BLOCKED_SHARE) if payload is not None else (None, 0)
    get_probe, n_get = _probe_share(obs, qname, QueueKeys.GET_BLOCKED_SHARE) if payload is not None else (None, 0)
    producer: Maybe[float] = put_probe if put_probe is not None else put_stack
    consumer: Maybe[float] = get_probe if get_probe is not None else get_stack

    names = stage_names(threads, queue=qname if stages_from == "queues" else "")
    bottleneck, verdict = _verdict(
        _Evidence(qname, depth, maxsize, trend,
                  _Wait(producer, 0 if put_probe is not None else _stage_samples(threads, Stage.TARGET)),
                  _Wait(consumer, 0 if get_probe is not None else _stage_samples(threads, Stage.DRAFTER)),
                  bool(target.threads), bool(drafter.threads)),
        names, previous=previous,
    )
    return PipelineView(
        target=target,
        drafter=drafter,
        queue_name=qname,
        queue_depth=depth,
        queue_maxsize=maxsize,
        queue_depth_history=history,
        queue_trend_per_s=trend,
        producer_starved_share=producer,
        consumer_starved_share=consumer,
        bottleneck=bottleneck,
        verdict=verdict,
        queue_trend=trend_word(trend),
        producer_starved_sampled=put_stack,
        consumer_starved_sampled=get_stack,
        probe_boards=max(n_put, n_get),
        stages_from=stages_from if (target.threads or drafter.threads) else "",
        names=names,
        cpu_note=over.text() if (over := oversubscription(threads)) is not None else "",
    )



def _with_rates(stage: StageStats, na: NA) -> StageStats:
    return StageStats(stage=stage.stage, threads=stage.threads, batches_per_s=na, tokens_per_s=na, shares=stage.shares)


def trend_word(trend: Maybe[float]) -> str:
    """The one word every pane uses for the queue's trend: rising / falling / steady ("" when unknown)."""
    if isinstance(trend, NA):
        return ""
    if trend >= TREND_PER_S:
        return "rising"
    if trend <= -TREND_PER_S:
        return "falling"
    return "steady"


def _queue_phrase(name: str, depth: Maybe[int], maxsize: Maybe[int], trend: Maybe[float]) -> str | None:
    if isinstance(depth, NA):
        return None
    text = f"{name} {depth}/{maxsize}" if not isinstance(maxsize, NA) else f"{name} depth {depth}"
    word = trend_word(trend)
    if word == "steady":
        text += " steady"
    elif word:
        text += f" {word} {trend:+.1f}/s"
    return text


def _share_phrase(who: str, wait: _Wait, did: str, never: str) -> str | None:
    if wait.share is None:
        return None
    text = f"{who} {never}" if wait.share < NEVER_SHARE else f"{who} {did} {wait.share:.0%} of the time"
    return text + (" (probe)" if wait.measured else "")


@dataclass(frozen=True, slots=True)
class _Wait:
    """One stage's blocked share on the queue and the samples behind it (0: measured by the queue probe, exact)."""

    value: Maybe[float]
    n_samples: int

    @property
    def share(self) -> float | None:
        return None if isinstance(self.value, NA) else float(self.value)

    @property
    def measured(self) -> bool:
        return self.share is not None and self.n_samples == 0

    def variance(self) -> float:
        """The sampled share's variance (a proportion of ``n_samples``); 0 when measured or unknown."""
        share = self.share
        if share is None or self.n_samples <= 0:
            return 0.0
        return share * (1.0 - share) / self.n_samples


@dataclass(frozen=True, slots=True)
class _Evidence:
    queue: str
    depth: Maybe[int]
    maxsize: Maybe[int]
    trend: Maybe[float]
    put: _Wait  # the producer stage blocked in put (the queue is full: the consumers are slower)
    get: _Wait  # the consumer stage blocked in get (the queue is empty: the producers are slower)
    have_producers: bool
    have_consumers: bool


def _scores(e: _Evidence) -> tuple[float, float, float | None]:
    """(evidence the consumer stage is the bottleneck, evidence the producer stage is, the queue's fill)."""
    fill = None
    if not isinstance(e.depth, NA) and not isinstance(e.maxsize, NA) and e.maxsize > 0:
        fill = e.depth / e.maxsize
    rising = not isinstance(e.trend, NA) and e.trend >= TREND_PER_S
    falling = not isinstance(e.trend, NA) and e.trend <= -TREND_PER_S
    consumer_score = producer_score = 0.0
    if e.put.share is not None and e.put.share >= STARVED_SHARE:
        consumer_score += e.put.share
    if e.get.share is not None and e.get.share >= STARVED_SHARE:
        producer_score += e.get.share
    if fill is not None:
        if fill >= FULL_FILL or (fill >= 0.5 and rising):
            consumer_score += 0.25 + (0.25 if rising else 0.0)
        elif fill <= EMPTY_FILL and not rising:
            producer_score += 0.1 + (0.15 if falling else 0.0)
    return consumer_score, producer_score, fill


def _clear(e: _Evidence, slow: Stage, *, held: bool) -> bool:
    """Whether the waits tell ``slow`` is the bottleneck: the other stage waits on it ``VERDICT_MARGIN`` more of its
    time than it waits on the other one, beyond sampling noise (two standard errors of the sampled shares); a stage
    already shown keeps its place while the difference stays at ``HOLD_MARGIN``."""
    waiting, waited = (e.put, e.get) if slow is Stage.DRAFTER else (e.get, e.put)
    if waiting.share is None:
        return False
    difference = waiting.share - (waited.share or 0.0)
    if held:
        return difference >= HOLD_MARGIN
    return difference >= VERDICT_MARGIN + VERDICT_SIGMAS * math.sqrt(waiting.variance() + waited.variance())


def _verdict(e: _Evidence, names: StageNames, *, previous: str = "") -> tuple[str, str]:
    """The bottleneck stage and the one-line verdict, in the program's words.

    A stage is named only with a margin: the other stage waits on it by ``VERDICT_MARGIN`` more of its time than
    it waits on the other, beyond sampling noise, or the queue's fill says so; else the answer is "balanced". A live
    screen passes the bottleneck it showed last (``previous``): it stays while its evidence still leans its way
    (``HOLD_MARGIN``), and the other stage takes over only with the full margin -- a verdict that flips on noise
    is no answer.
    """
    if not e.have_producers and not e.have_consumers and isinstance(e.depth, NA):
        return "unknown", "unknown: no thread matches the target/drafter name patterns or uses a queue, and no queue probe"
    consumer_score, producer_score, fill = _scores(e)
    queue = _queue_phrase(e.queue, e.depth, e.maxsize, e.trend)
    put_text = _share_phrase(names.threads(Stage.TARGET), e.put, "blocked in put", "never block in put")
    get_text = _share_phrase(names.threads(Stage.DRAFTER), e.get, "wait in get", "never wait")

    def named(slow: Stage) -> bool:
        score, other = (consumer_score, producer_score) if slow is Stage.DRAFTER else (producer_score, consumer_score)
        if score <= 0:
            return False
        if previous == slow:
            return _clear(e, slow, held=True)
        if score < 1.5 * other:
            return False
        if fill is not None and (fill >= FULL_FILL if slow is Stage.DRAFTER else fill <= EMPTY_FILL):
            return True  # the queue itself says which side keeps up (full: the consumers lag; empty: the producers)
        return _clear(e, slow, held=False)

    # The stage shown last is judged first, with the lower bar: it keeps its place unless the evidence turned.
    order = sorted(PIPELINE_STAGES, key=lambda s: s != previous)
    for slow in order:
        if named(slow):
            parts = [queue, put_text, get_text] if slow is Stage.DRAFTER else [queue, get_text, put_text]
            return slow, f"{names.bound(slow)}: " + ", ".join(p for p in parts if p)
    evidence = ", ".join(p for p in (queue, put_text, get_text) if p)
    if e.put.share is None and e.get.share is None and fill is None:
        missing = names.threads(Stage.TARGET if not e.have_producers else Stage.DRAFTER)
        return "unknown", f"unknown: no {missing} sampled and no queue probe"
    within = f" ({evidence})" if evidence else ""
    apart = abs((e.put.share or 0.0) - (e.get.share or 0.0)) >= VERDICT_MARGIN
    if consumer_score > 0 and producer_score > 0 and not apart:
        return "balanced", "balanced: both stages wait on each other about as much" + within
    if consumer_score > 0 or producer_score > 0:
        noise = " beyond sampling noise (too few samples)" if apart else ""
        return "balanced", f"balanced: neither stage waits on the other by a clear margin{noise}" + within
    return "balanced", "balanced: " + (evidence or "neither stage waits on the other")
