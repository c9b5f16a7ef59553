"""The probe session: builds the enabled probes, and publishes their readings to the board.

Publishing never runs on the training thread: ``step()`` only notes the step and, when a publish is due
(at most every ``publish_interval_s``), sets an Event. One daemon thread waits on that Event with a
``timer_interval_s`` timeout (so programs that never call ``step()`` still publish), gathers the probes'
snapshots, and writes the board. It sleeps between publishes; it never spins.

Probes that `doctor --attach` put into the process are leased to it: on each of its wake-ups (at most every
``publish_interval_s``, at least every ``timer_interval_s``) the board thread also checks that the command
still runs (one read of ``/proc/PID/stat``) and, when it is gone, calls the lease's ``on_lost`` (which detaches
them). No other thread is added for it.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import queue as _queue
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dflash_contract import proc
from dflash_contract.board import BOARD_SCHEMA, ProbeName, SessionKeys
from dflash_contract.redact import redact_text, redact_tree
from probes import (  # the session's own API hands to these (watch_queue, watch_model; the board to the mailbox)
    checkpoint,
    mailbox,
    queues,
)
from probes._common import JsonDict, Probe, error_payload, json_safe, thread_tids, torch_if_imported
from probes.board_writer import BoardPublisher, writer_identity
from probes.discover import discover_objects
from probes.registry import BY_NAME
from probes.wandb_log import WandbLogger

if TYPE_CHECKING:
    from probes.config import ProbesConfig

# After this many consecutive snapshot failures a probe is switched off (its last error stays on the board).
MAX_CONSECUTIVE_ERRORS = 5
# When a session that discovers (`dflash-diag run`) looks for the program's queues: seconds after start, then
# every DISCOVER_EVERY_S (probes/discover.py; each look is bounded: its cost in docs/probes.md).
DISCOVER_AT_S = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
DISCOVER_EVERY_S = 60.0


@dataclasses.dataclass(frozen=True)
class Lease:
    """The process some probes are held for (the command that attached them): ``on_lost`` runs, on the board
    thread, once it is gone (a PID alone is reused: the start time tells it is the same process)."""

    pid: int
    start_ticks: int
    on_lost: Callable[[], object]

    def held(self) -> bool:
        return proc.process_alive(self.pid, self.start_ticks)


def _build(name: str, config: ProbesConfig) -> Probe:
    """Probe ``name`` (the registry's class) from its Config."""
    spec = BY_NAME.get(name)
    if spec is None:
        raise ValueError(f"unknown probe {name!r}")
    return spec.build(config.config_of(name))


def _new_slot(name: str, config: ProbesConfig) -> _Slot:
    slot = _Slot()
    try:
        slot.probe = _build(name, config)
    except Exception as exc:
        slot.failed(exc)
        slot.disabled = True
    return slot


def _close_quietly(slot: _Slot) -> None:
    if slot.probe is not None:
        try:
            slot.probe.close()
        except Exception:
            pass


class _Slot:
    """One probe and its error accounting."""

    __slots__ = ("probe", "errors", "consecutive", "last_error", "disabled")

    def __init__(self) -> None:
        self.probe: Probe | None = None
        self.errors = 0
        self.consecutive = 0
        self.last_error: str | None = None
        self.disabled = False

    def failed(self, exc: BaseException) -> None:
        self.errors += 1
        self.consecutive += 1
        self.last_error = f"{type(exc).__name__}: {exc}"[:300]
        if self.consecutive >= MAX_CONSECUTIVE_ERRORS:
            self.disabled = True


class ProbeSession:
    """Probes of this process plus the board they publish to. Every public method is safe to call from
    any thread and never raises into the program (failures are counted and shown on the board)."""

    def __init__(self, config: ProbesConfig) -> None:
        self.config = config
        self._closed = False
        self._pid = os.getpid()
        self._app: dict[str, Any] = {}
        self._app_cache: dict[str, tuple[Any, Any]] = {}  # key -> (JSON-safe value, its redaction)
        self._steps = 0
        self._step: int | None = None
        self._last_step_wall_s: float | None = None
        self._last_publish_mono = -float("inf")
        self._publish_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.board_error: str | None = None
        self.publish_errors = 0
        self.publishes = 0
        self.publish_cost_s = 0.0
        self._attached: dict[str, Any] | None = None  # set by `dflash-diag attach` (probes/attach.py)
        self._lease: Lease | None = None  # set by an attach that holds its probes for a command (doctor --attach)
        self.lease_checks = 0
        # Replaced, never mutated, once built: the board thread iterates the dict it read (add/remove_probes).
        self._slots: dict[str, _Slot] = {name: _new_slot(name, config) for name in sorted(config.enabled)}
        self._queues: queues.QueuesProbe | None = None
        self._checkpoint: checkpoint.CheckpointProbe | None = None
        self._mailbox: mailbox.MailboxProbe | None = None
        self._refresh_probe_refs()
        self._started_mono = time.monotonic()
        self._discoveries = 0
        self.discovered_queues: list[str] = []
        self.discover_cost_s = 0.0
        self._wandb: WandbLogger | None = WandbLogger(config.wandb_interval_s) if config.wandb else None
        torch = torch_if_imported()
        self._identity = writer_identity(str(torch.__version__) if torch is not None else None)
        self._writer: BoardPublisher | None = None
        try:
            self._writer = BoardPublisher(None if config.board_dir is None else Path(config.board_dir))
        except (OSError, ValueError) as exc:
            self.board_error = str(exc)
            print(f"dflash-diag probes: WARNING: the probes are on but NO BOARD will be written: {exc}",
                  file=sys.stderr, flush=True)
        if self._writer is not None and self._writer.warning:
            print(f"dflash-diag probes: WARNING: {self._writer.warning}", file=sys.stderr, flush=True)
        self.publish()
        self._thread = threading.Thread(target=self._timer_loop, name="dflash-diag-board", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def _probe_of(self, name: str, cls: type) -> Any:
        slot = self._slots.get(name)
        return slot.probe if slot is not None and isinstance(slot.probe, cls) else None

    def _refresh_probe_refs(self) -> None:
        self._queues = self._probe_of("queues", queues.QueuesProbe)
        self._checkpoint = self._probe_of("checkpoint", checkpoint.CheckpointProbe)
        self._mailbox = self._probe_of(ProbeName.MAILBOX, mailbox.MailboxProbe)

    # --- the public API ---------------------------------------------------------------------------

    @property
    def board_path(self) -> str | None:
        return str(self._writer.path) if self._writer is not None else None

    def watch_queue(self, name: str, q: _queue.Queue) -> _queue.Queue:
        """Register ``q`` under ``name``; returns the queue to use (the same object, instrumented)."""
        probe = self._queues
        if probe is None or self._closed:
            return q
        try:
            return probe.watch(name, q)
        except Exception as exc:
            self._slots["queues"].failed(exc)
            return q

    def watch_model(self, name: str, model: Any) -> None:
        """Name ``model``'s parameters for the grad-None check (which runs before each optimizer step); the
        health probe arms on it too (the program has imported torch.optim by then)."""
        if self._closed:
            return
        for slot_name in ("checkpoint", "health"):
            slot = self._slots.get(slot_name)
            probe = slot.probe if slot is not None else None
            if probe is None:
                continue
            try:
                probe.watch_model(name, model)  # type: ignore[attr-defined]
            except Exception as exc:
                slot.failed(exc)  # type: ignore[union-attr]

    def set_app(self, **fields: Any) -> None:
        """Merge ``fields`` into the board's "app" section (made JSON-safe when published)."""
        self._app.update(fields)

    def log_to_wandb(self, enabled: bool = True) -> None:
        """Log (or stop logging) the readings into the program's active wandb run, from the board thread."""
        if enabled and self._wandb is None:
            self._wandb = WandbLogger(self.config.wandb_interval_s)
        elif not enabled:
            self._wandb = None

    def step(self, step: int | None = None) -> None:
        """Once per training step, from any thread: ~1 us; asks the board thread to publish when due."""
        if self._closed:
            return
        self._steps += 1
        if step is not None:
            self._step = step
        self._last_step_wall_s = time.time()
        if time.monotonic() - self._last_publish_mono >= self.config.publish_interval_s:
            self._wake.set()

    @property
    def enabled(self) -> frozenset[str]:
        return self.config.enabled

    def add_probes(self, names: Iterable[str]) -> list[str]:
        """Start the named probes that are not running yet (used by `dflash-diag attach`); the names started."""
        new = sorted(set(names) - set(self._slots))
        if not new or self._closed:
            return []
        built = {name: _new_slot(name, self.config) for name in new}
        with self._publish_lock:  # not while the board thread is in the middle of a snapshot
            self._slots = dict(sorted({**self._slots, **built}.items()))
            self.config = dataclasses.replace(self.config, enabled=self.config.enabled | frozenset(new))
            self._refresh_probe_refs()
        self._wake.set()
        return new

    def remove_probes(self, names: Iterable[str]) -> list[str]:
        """Stop the named probes and undo their hooks (used by `dflash-diag detach`); the names stopped."""
        gone = sorted(set(names) & set(self._slots))
        if not gone:
            return []
        with self._publish_lock:  # a publish in flight would re-arm a probe's hooks after its close()
            old = self._slots
            self._slots = {name: slot for name, slot in old.items() if name not in gone}
            self.config = dataclasses.replace(self.config, enabled=self.config.enabled - frozenset(gone))
            self._refresh_probe_refs()
            for name in gone:
                _close_quietly(old[name])
        self.publish()
        return gone

    @property
    def attached(self) -> dict[str, Any] | None:
        """What `dflash-diag attach` noted (the board's ``session.attached``), None when nothing was attached."""
        return self._attached

    def set_attached(self, info: dict[str, Any] | None) -> None:
        """Note on the board that probes were added from outside (`dflash-diag attach`), or clear the note."""
        self._attached = None if info is None else dict(info)

    def set_lease(self, lease: Lease | None) -> None:
        """Hold probes for a process outside (see :class:`Lease`), or stop holding them (None)."""
        self._lease = lease

    def check_lease(self) -> bool:
        """On the board thread: False (after ``on_lost`` ran) when the lease's process is gone, else True.
        ``on_lost`` clears the lease when it acted; if it could not yet, the next wake-up asks again."""
        lease = self._lease
        if lease is None:
            return True
        self.lease_checks += 1
        if lease.held():
            return True
        try:
            lease.on_lost()
        except Exception as exc:  # never into the program; the board says what happened
            self.board_error = f"lease: {type(exc).__name__}: {exc}"[:300]
        return False

    def close(self) -> None:
        """Final publish, probes unhooked, board removed (unless keep_board). Idempotent."""
        if self._closed or os.getpid() != self._pid:
            return
        self._stop.set()
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        self.publish(final=True)
        # Under the publish lock: a publish still in flight (the board thread did not stop in time) must not
        # re-arm a probe's hooks after its close().
        locked = self._publish_lock.acquire(timeout=2.0)
        try:
            self._closed = True
            for slot in self._slots.values():
                _close_quietly(slot)
        finally:
            if locked:
                self._publish_lock.release()
        if self._writer is not None and not self.config.keep_board:
            self._writer.remove()
        try:
            atexit.unregister(self.close)
        except Exception:
            pass

    def forget_after_fork(self) -> None:
        """In a forked child: this session belongs to the parent (its board, its threads)."""
        self._closed = True
        self._writer = None

    # --- publishing -------------------------------------------------------------------------------

    def _timer_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=self.config.timer_interval_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            if not self.check_lease() and self._stop.is_set():
                break  # the lease's owner is gone and its probes closed this session
            wait_s = self.config.publish_interval_s - (time.monotonic() - self._last_publish_mono)
            if wait_s > 0 and self._stop.wait(wait_s):
                break
            self._maybe_discover()
            self.publish()

    def _maybe_discover(self) -> None:
        """Under `dflash-diag run`, find the queues the program made since the last look (probes/discover.py):
        at 1, 2, 4, 8, 16 and 32 s after start (a pipeline is built in its first seconds), then once a minute.
        On this thread, bounded, never raising into the program."""
        if not self.config.discover or self._queues is None or self._closed:
            return
        n = self._discoveries
        due_s = DISCOVER_AT_S[n] if n < len(DISCOVER_AT_S) else DISCOVER_AT_S[-1] + DISCOVER_EVERY_S * (
            n - len(DISCOVER_AT_S) + 1)
        if time.monotonic() - self._started_mono < due_s:
            return
        self._discoveries += 1
        t0 = time.perf_counter()
        try:
            found = discover_objects(self, queues=True, models=False)
            self.discovered_queues = sorted(set(self.discovered_queues) | set(found.get("queues", [])))
        except Exception as exc:
            self._slots["queues"].failed(exc)
        finally:
            self.discover_cost_s += time.perf_counter() - t0

    def publish(self, final: bool = False) -> bool:
        """Gather every probe's reading and write the board. Returns False if it did not write."""
        if self._closed or not self._publish_lock.acquire(blocking=False):
            return False
        try:
            t0 = time.perf_counter()
            self._last_publish_mono = time.monotonic()
            document = self._document(final)
            build_s = time.perf_counter() - t0
            if self._mailbox is not None:  # its thread posts a summary of these readings to the job's store
                self._mailbox.note_board(document)
            wandb = self._wandb
            if wandb is not None:
                # Before the board's fsync: the readings land in the wandb row that is open while they are fresh.
                wandb.maybe_log(document, force=final)  # never raises; its cost is counted on its own
            t1 = time.perf_counter()
            if self._writer is not None:
                self._writer.write(document)
            self.publishes += 1
            self.publish_cost_s += build_s + time.perf_counter() - t1
            return True
        except Exception as exc:
            self.publish_errors += 1
            self.board_error = f"{type(exc).__name__}: {exc}"[:300]
            return False
        finally:
            self._publish_lock.release()

    def snapshot_probes(self) -> dict[str, JsonDict]:
        now_s = time.monotonic()
        out: dict[str, JsonDict] = {}
        for name, slot in self._slots.items():
            if slot.probe is None or slot.disabled:
                out[name] = error_payload(slot.last_error or "probe disabled", slot.errors)
                continue
            try:
                payload = slot.probe.snapshot(now_s)
                slot.consecutive = 0
            except Exception as exc:
                slot.failed(exc)
                payload = error_payload(slot.last_error or "error", slot.errors)
            out[name] = payload
        return out

    def _redacted_app(self) -> JsonDict:
        """The app section, JSON-safe and redacted; an entry equal to the last publish's reuses its redaction
        (the config rarely changes; the step and rates are numbers), so publishing stays cheap."""
        out: JsonDict = {}
        for key, value in list(self._app.items()):
            safe = json_safe(value)
            hit = self._app_cache.get(key)
            if hit is None or hit[0] != safe:
                hit = (safe, redact_tree(safe, key=str(key)))
                self._app_cache[key] = hit
            out[redact_text(str(key))] = hit[1]
        return out

    def _document(self, final: bool) -> JsonDict:
        if self._identity.get("torch") is None:
            torch = torch_if_imported()  # the bootstrap starts before the program imports torch
            if torch is not None:
                self._identity["torch"] = str(getattr(torch, "__version__", "")) or None
        return json_safe(
            {
                "schema": BOARD_SCHEMA,
                "writer": self._identity,
                "seq": 0,  # set by the writer
                "wall_time_s": time.time(),
                "interval_s": self.config.timer_interval_s,
                "publish_interval_s": self.config.publish_interval_s,
                "final": final,
                "threads": {str(tid): name for tid, name in thread_tids().items()},
                "probes": self.snapshot_probes(),
                "app": self._redacted_app(),
                "session": {
                    SessionKeys.ENABLED: sorted(self.config.enabled),
                    SessionKeys.STEPS: self._steps,
                    SessionKeys.STEP: self._step,
                    SessionKeys.LAST_STEP_WALL_S: self._last_step_wall_s,
                    SessionKeys.PUBLISHES: self.publishes,
                    SessionKeys.PUBLISH_ERRORS: self.publish_errors,
                    SessionKeys.PUBLISH_COST_MS_MEAN: 1e3 * self.publish_cost_s / self.publishes if self.publishes else None,
                    SessionKeys.BOARD_ERROR: self.board_error,
                    SessionKeys.WANDB: self._wandb.status() if self._wandb is not None else {"enabled": False},
                    SessionKeys.ATTACHED: self._attached,
                },
            }
        )
