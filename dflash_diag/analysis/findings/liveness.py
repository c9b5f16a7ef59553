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
    RuleSpec("board-stopped", kind=NOTE, slows=False),
)

# A program thread computing in this share of its samples, or whose stack moved, is running: the process is not hung.
RUNNING_SHARE = 0.10
_TOOL_THREADS = "dflash-diag-"


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
    if not obs.process_alive or age_s <= limit_s:
        return
    running = _running(ctx)
    if running and _runs_on(ctx):
        # The board's writer is a thread of its own: a board that stops while the program's threads run is the
        # writer stopped (its writes refused, its thread blocked), not the training.
        yield Finding(
            rule_id="board-stopped",
            severity=Severity.INFO,
            claim=f"no board update for {age_s:.0f} s while the program's threads run: the probes stopped publishing "
                  "(their writes refused, or their thread blocked or not getting a CPU), not the training; what the "
                  "board says is that old",
            evidence=(("last update", f"{age_s:.1f} s ago"), ("expected every", f"{board.interval_s:.1f} s"),
                      ("threads that ran in the window", ", ".join(running[:4]))),
            remedy=f"`dflash-diag board {obs.pid}` shows the probes' last words; a program that refuses file opens "
                   "(an audit hook, a sandbox) or a full disk stops the board: give the board directory "
                   "(DFLASH_DIAG_BOARD_DIR) a place the program may write.",
            impact=0.0,
            kind=NOTE,
        )
    else:
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


def _running(ctx: Context) -> list[str]:
    """The program's threads that computed or whose stacks moved in the window (the tool's own left out)."""
    return [n.name for n in ctx.waits.threads if not n.name.startswith(_TOOL_THREADS)
            and (n.computing_share >= RUNNING_SHARE or n.stack_changed)]


def _runs_on(ctx: Context) -> bool:
    """The process made progress in the window and was not stopped at its end (a stopped process's last stacks can
    read as computing)."""
    sweeps = [s for s in ctx.obs.proc if s]
    stopped = bool(sweeps) and all(t.state in ("T", "t") for t in sweeps[-1])
    return not stopped and ctx.waits.progress
