"""Checkpoints: what a run needs to continue exactly where it stopped, written so a crash never corrupts one.

A checkpoint holds the drafter, its optimiser and schedule, the step counter and the batch ledger (which
batch indices the drafters consumed). It is written to ``.checkpoint.pt.tmp-<pid>`` beside the target,
fsynced, then renamed over it: the previous checkpoint stays intact until the new one is complete, and a
failed write (a full disk) removes its temp file. A writer killed mid-write (``kill -9``) cannot clean up:
the next run removes temp files whose PID is gone (``remove_stale_temp_files``).
"""

from __future__ import annotations

import contextlib
import copy
import errno
import os
import re
import stat
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import torch

from reference_trainer.errors import UserError

if TYPE_CHECKING:
    from reference_trainer.config import TrainConfig
    from reference_trainer.replicas import Replica

CHECKPOINT_VERSION = 1
CHECKPOINT_NAME = "checkpoint.pt"


class BatchLedger:
    """Which batch indices the drafters consumed, so a resumed run regenerates exactly the rest.

    Producers may run ahead and several of them may deliver out of order: the state is the first
    unconsumed index plus the consumed indices beyond it.
    """

    def __init__(self, cursor: int = 0, consumed_ahead: Sequence[int] = ()) -> None:
        self._lock = threading.Lock()
        self._cursor = cursor
        self._next = cursor
        self._done = set(consumed_ahead)

    def claim(self) -> int:
        with self._lock:
            while self._next in self._done:
                self._next += 1
            index = self._next
            self._next += 1
            return index

    def consumed(self, index: int) -> None:
        with self._lock:
            self._done.add(index)
            while self._cursor in self._done:
                self._done.remove(self._cursor)
                self._cursor += 1

    def state(self) -> dict[str, Any]:
        with self._lock:
            return {"cursor": self._cursor, "consumed_ahead": sorted(self._done)}


@dataclass(frozen=True)
class Resume:
    """Where a run starts: step 0 and batch 0, or what a checkpoint recorded."""

    step: int = 0
    cursor: int = 0
    consumed_ahead: tuple[int, ...] = ()
    loss_first: float | None = None

    def ledger(self) -> BatchLedger:
        return BatchLedger(self.cursor, self.consumed_ahead)


def checkpoint_path(config: TrainConfig) -> Path:
    return Path(config.checkpoint_dir) / CHECKPOINT_NAME


def resume_path(config: TrainConfig) -> Path | None:
    if not config.resume:
        return None
    return checkpoint_path(config) if config.resume == "auto" else Path(config.resume)


def load_into(path: Path, config: TrainConfig, replicas: Sequence[Replica]) -> Resume:
    """Restore drafter, optimiser and schedule into every replica; the run's start point. UserError if unusable."""
    if not path.is_file():
        raise UserError(f"--resume: no checkpoint at {path} (run without --resume first, or give its path)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # any unpickling failure is a bad file
        raise UserError(f"--resume {path}: not a readable checkpoint ({type(err).__name__})") from err
    if not isinstance(state, dict) or state.get("version") != CHECKPOINT_VERSION:
        raise UserError(f"--resume {path}: not a reference_trainer checkpoint (version mismatch)")
    if state["drafter_config"] != config.drafter.official_config_dict():
        raise UserError(f"--resume {path}: written for a different drafter shape (preset "
                        f"{state.get('preset')!r}); use the same --preset")
    for replica in replicas:
        replica.model.load_state_dict(state["drafter"])
        # A copy each: Optimizer.load_state_dict keeps tensors that are already on the right device and dtype
        # (the CPU `step` counters always, on CPU the moment buffers too), so replicas loading one dict would
        # share them and every replica's step would advance them: replicas drift apart (issue 10).
        replica.optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))
        replica.scheduler.load_state_dict(state["scheduler"])
    ledger = state["ledger"]
    print(f"resumed from {path} at step {state['step']} (next batch index {ledger['cursor']})", flush=True)
    return Resume(step=int(state["step"]), cursor=int(ledger["cursor"]),
                  consumed_ahead=tuple(ledger["consumed_ahead"]), loss_first=state.get("loss_first"))


def save(path: Path, config: TrainConfig, lead: Replica, step: int, ledger: BatchLedger,
         loss_first: float | None) -> Path:
    """Write the checkpoint atomically (OSError, e.g. ENOSPC, propagates; the previous file is untouched)."""
    state = {
        "version": CHECKPOINT_VERSION,
        "preset": config.preset,
        "step": step,
        "ledger": ledger.state(),
        # SYNC: .cpu() waits for the last step's kernels (once, at the end or every --save-every steps).
        "drafter": {k: v.detach().cpu() for k, v in lead.model.state_dict().items()},
        "drafter_config": config.drafter.official_config_dict(),
        "optimizer": lead.optimizer.state_dict(),
        "scheduler": lead.scheduler.state_dict(),
        "loss_first": loss_first,
        "config": config.flat(),
    }
    atomic_write_bytes(path, lambda handle: _torch_save(state, handle))
    return path


def _torch_save(state: dict[str, Any], handle: BinaryIO) -> None:
    """torch.save, but a failed write stays an OSError: torch's zip writer turns the file's OSError (ENOSPC)
    into a RuntimeError ("unexpected pos"), which would read as a bug instead of a full disk."""
    try:
        torch.save(state, handle)
    except RuntimeError as err:
        cause = err.__cause__ or err.__context__
        if isinstance(cause, OSError):
            raise cause from err
        raise


def temp_path(path: Path, pid: int | None = None) -> Path:
    """Where ``atomic_write_bytes`` writes ``path`` first: ``.NAME.tmp-PID`` beside it."""
    return path.with_name(f".{path.name}.tmp-{os.getpid() if pid is None else pid}")


def _open_private(path: Path) -> BinaryIO:
    """A new file only this user can read (0600), truncated; the one place a checkpoint's bytes are written."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")


def atomic_write_bytes(path: Path, write: Callable[[Any], None]) -> None:
    """Write to a private temp file in the same directory, fsync, then rename: never a half-written file.

    On any failure (ENOSPC, EDQUOT, EIO...) the temp file is removed and ``path`` is left as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        with _open_private(tmp) as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def remove_stale_temp_files(directory: Path, name: str = CHECKPOINT_NAME) -> list[Path]:
    """Remove the temp files a killed writer left (``kill -9`` mid-write: ~6 GB each on the 4B preset).

    Only ``.NAME.tmp-PID`` regular files (never a link) owned by this user whose PID is no longer alive;
    anything else in the directory, including a live writer's temp file, is left alone."""
    pattern = re.compile(rf"\.{re.escape(name)}\.tmp-([0-9]{{1,10}})")
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed  # no directory yet: nothing to clean
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or int(match.group(1)) == os.getpid():
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or _pid_alive(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):
            os.unlink(entry.path)
            removed.append(Path(entry.path))
    return removed


def write_failure(what: str, path: Path, err: OSError) -> str:
    """One line for a failed write: what, where, why, what is kept, what to do."""
    reason = f"{err.strerror or err} ({errno.errorcode.get(err.errno or 0, 'error')})"
    kept = "the previous one is kept" if path.exists() else "none was written"
    return (f"could not write the {what} {path}: {reason}; {kept} (free space or choose another directory, "
            "then --resume)")
