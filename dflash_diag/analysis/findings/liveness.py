"""Is the process alive and publishing: a dead process, a board that stopped updating (hung?), no probes."""

from __future__ import annotations

from collections.abc import Iterator

from dflash_contract.board import AppKeys, stale_after_s
from dflash_diag.analysis.findings._context import Context
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.model import Finding, Severity
from dflash_diag.model.findings import NOTE, STATE, SYMPTOM

RULES = (
    RuleSpec("process-exited", kind=STATE),
    RuleSpec("no-probes", kind=NOTE, slows=False),
    RuleSpec("board-stale", kind=SYMPTOM, hang=True),
)


def check(ctx: Context) -> Iterator[Finding]:
    obs = ctx.obs
    if not obs.process_alive:
        yield Finding(
            rule_id="process-exited",
            severity=Severity.WARNING,
            claim=f"process {obs.pid} exited while it was being sampled",
            evidence=(("samples taken", str(len(obs.stacks))), ("window", f"{obs.window_s:.1f} s")),
            remedy="Look at its log for the exit reason; findings below only cover the time it was alive.",
            impact=0.0,
            kind=STATE,
        )
    board = ctx.board
    if board is None:
        yield Finding(
            rule_id="no-probes",
            severity=Severity.INFO,
            claim="no probe board: findings come from stacks, /proc and NVML only",
            evidence=(("board", str(obs.boards) if not isinstance(obs.boards, tuple) else "none published"),),
            remedy=f"Add the probes to the running process with `dflash-diag attach {obs.pid}` (or run "
            f"`dflash-diag doctor {obs.pid} --attach`), or start it under `dflash-diag run -- python train.py ...`: "
            "checkpoint, compile, allocator, GIL, thread-death and stale-code findings need them.",
            impact=0.0,
            kind=NOTE,
        )
        return
    age_s = board.age_s(ctx.now_wall_s)
    limit_s = stale_after_s(board.interval_s)  # the one staleness rule of every reader (docs/board.md)
    if obs.process_alive and age_s > limit_s:
        yield Finding(
            rule_id="board-stale",
            severity=Severity.WARNING,
            claim=f"no board update for {age_s:.0f} s: the training loop looks hung or stuck in one step",
            evidence=(("last update", f"{age_s:.1f} s ago"), ("expected every", f"{board.interval_s:.1f} s"),
                      ("last step", str(board.app.get(AppKeys.STEP, "unknown")))),
            remedy="Look at the stacks (`dflash-diag snapshot PID`): a deadlock, a GPU hang or a stuck collective "
            "shows as every worker blocked in the same place.",
            impact=0.5,
            kind=SYMPTOM,
        )
