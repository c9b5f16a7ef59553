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
from types import MappingProxyType
from typing import Any

from dflash_contract.board import AppKeys, ProbeName, QueueKeys, is_stale
from dflash_diag.model import (
    NA,
    Board,
    Maybe,
    Observation,
    PipelineView,
    StageStats,
    ThreadState,
    ThreadStats,
)

DEFAULT_QUEUE = "q_hs"
STARVED_SHARE = 0.15  # blocked this share of the time or more: the stage waits on the other one
NEVER_SHARE = 0.02  # below this, "never waits"
FULL_FILL = 0.75
EMPTY_FILL = 0.25
TREND_PER_S = 0.1  # items/s that count as rising/falling
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


def stage_stats(stage: str, threads: Sequence[ThreadStats], board: Board | None) -> StageStats:
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


def _stage_rates(stage: str, board: Board | None) -> tuple[Maybe[float], Maybe[float]]:
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


def _mean_share(threads: Sequence[ThreadStats], stage: str, state: ThreadState) -> Maybe[float]:
    members = [t for t in threads if t.stage == stage and t.n_samples > 0]
    if not members:
        return NA(f"no {stage} threads sampled")
    return sum(t.shares.get(state, 0.0) for t in members) / len(members)


def pipeline_view(
    obs: Observation,
    threads: tuple[ThreadStats, ...],
    *,
    queue_name: str = DEFAULT_QUEUE,
    now_wall_s: float | None = None,
    stages_from: str = "",
) -> PipelineView:
    """Stage rates, the queue, starvation shares and a one-line verdict naming the bottleneck stage.

    ``now_wall_s`` (default: the end of the window) is when the view is made: a stale board (the contract's
    one rule, ``dflash_contract.board.is_stale``): its rates and queue are not trusted.
    """
    now = now_wall_s if now_wall_s is not None else obs.started_wall_s + obs.window_s
    board = obs.board
    stale = board is not None and is_stale(board.age_s(now), board.interval_s)
    live_board = None if stale else board
    target = stage_stats("target", threads, live_board)
    drafter = stage_stats("drafter", threads, live_board)
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

    put_stack = _mean_share(threads, "target", ThreadState.QUEUE_PUT)
    get_stack = _mean_share(threads, "drafter", ThreadState.QUEUE_GET)
    put_probe, n_put = _probe_share(obs, qname, QueueKeys.PUT_BLOCKED_SHARE) if payload is not None else (None, 0)
    get_probe, n_get = _probe_share(obs, qname, QueueKeys.GET_BLOCKED_SHARE) if payload is not None else (None, 0)
    producer: Maybe[float] = put_probe if put_probe is not None else put_stack
    consumer: Maybe[float] = get_probe if get_probe is not None else get_stack

    bottleneck, verdict = _verdict(
        qname, depth, maxsize, trend, producer, consumer, put_probe is not None, get_probe is not None,
        bool(target.threads), bool(drafter.threads),
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


def _share_phrase(who: str, share: Maybe[float], never: str) -> str | None:
    if isinstance(share, NA):
        return None
    if share < NEVER_SHARE:
        return never
    return f"{who} {share:.0%} of the time"


def _verdict(
    qname: str,
    depth: Maybe[int],
    maxsize: Maybe[int],
    trend: Maybe[float],
    producer: Maybe[float],
    consumer: Maybe[float],
    producer_measured: bool,
    consumer_measured: bool,
    have_targets: bool,
    have_drafters: bool,
) -> tuple[str, str]:
    if not have_targets and not have_drafters and isinstance(depth, NA):
        return "unknown", "unknown: no thread matches the target/drafter name patterns, and no queue probe"
    fill = None
    if not isinstance(depth, NA) and not isinstance(maxsize, NA) and maxsize > 0:
        fill = depth / maxsize
    rising = not isinstance(trend, NA) and trend >= TREND_PER_S
    falling = not isinstance(trend, NA) and trend <= -TREND_PER_S
    put = producer if not isinstance(producer, NA) else None
    get = consumer if not isinstance(consumer, NA) else None

    drafter_score = 0.0  # evidence that drafters are the bottleneck (queue full, targets blocked in put)
    target_score = 0.0
    if put is not None and put >= STARVED_SHARE:
        drafter_score += put
    if get is not None and get >= STARVED_SHARE:
        target_score += get
    if fill is not None:
        if fill >= FULL_FILL or (fill >= 0.5 and rising):
            drafter_score += 0.25 + (0.25 if rising else 0.0)
        elif fill <= EMPTY_FILL and not rising:
            target_score += 0.1 + (0.15 if falling else 0.0)

    queue = _queue_phrase(qname, depth, maxsize, trend)
    put_text = _share_phrase("targets blocked in put", producer, "targets never block in put")
    get_text = _share_phrase("drafters wait in get", consumer, "drafters never wait")
    if put_text and producer_measured:
        put_text += " (probe)"
    if get_text and consumer_measured:
        get_text += " (probe)"

    if drafter_score > 0 and drafter_score >= 1.5 * target_score:
        parts = [queue, put_text, get_text]
        return "drafter", "drafter-bound: " + ", ".join(p for p in parts if p)
    if target_score > 0 and target_score >= 1.5 * drafter_score:
        parts = [queue, get_text, put_text]
        return "target", "target-bound: " + ", ".join(p for p in parts if p)
    parts = [queue, put_text, get_text]
    evidence = ", ".join(p for p in parts if p)
    if put is None and get is None and fill is None:
        missing = "no target-* threads" if not have_targets else "no drafter-* threads"
        return "unknown", f"unknown: {missing} sampled and no queue probe"
    if drafter_score > 0 and target_score > 0:
        return "balanced", "mixed: both stages wait on each other" + (f" ({evidence})" if evidence else "")
    return "balanced", "balanced: " + (evidence or "neither stage waits on the other")
