"""Log the probes' readings into the program's own wandb run, beside its metrics (``probes.start(wandb=True)``).

How it stays aligned with the program's steps, and why this way: the board thread calls
``run.log(readings, commit=False)``. wandb merges an uncommitted log into the row that is open, the one the
program's next ``run.log`` commits, so the ``dflash/*`` series land in the very rows (the same ``_step``) as
the program's loss and tok/s: the same x-axis, no interpolation, which is what wandb asks of metrics meant
to be read together. The alternative wandb documents for asynchronous loggers, a custom x-axis
(``define_metric("dflash/*", step_metric=...)``), still needs each ``run.log`` to either commit a row of its own
or not: a committing log from this thread would advance wandb's step under the program, and the program's
next ``run.log(..., step=N)`` would then be dropped as non-monotonic. ``commit=False`` never moves the step,
so the program's own logging is untouched whatever style it uses. Logging starts once the program has
logged (wandb's step moved): before that the open row may be one the program never writes (its first
explicit ``step`` can be later), and the readings would make a row of their own. The program's training
step is logged as ``dflash/probes/step``, so the alignment can be checked.

Never hurts the run: wandb is never imported here (the program imported it, or there is no run to log
to); it is looked up at each publish, so a run started or finished later is followed; at most one log per
``interval_s``; every wandb error is swallowed, counted and published on the board
(``session.wandb``). A critical finding the process can see in its own board (:func:`dflash_contract.readings.critical_alerts`)
raises ``run.alert`` once per run and rule.

The run syncs to the cloud, and metric keys hold names the program chose (``dflash/queue/<name>/depth``): every
label and alert text goes through the one redactor first, its rules and the secret values of the program's own
environment and argv, as the board's readers do (a queue named with a token is ``q__redacted_``).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from dflash_contract.readings import Reading, critical_alerts, readings
from dflash_contract.redact import redact_text, scrub_text, secret_values
from probes._common import JsonDict, loaded_module

DEFAULT_INTERVAL_S = 2.0  # wandb: "run.log() is not intended to be called more than a few times per second"
ALERT_WAIT_S = 300  # wandb's own rate limit between two alerts of the same title
MAX_REMEMBERED_LABELS = 4096


class WandbLogger:
    """Called by the board thread after each publish; logs when due. Every method never raises."""

    def __init__(self, interval_s: float = DEFAULT_INTERVAL_S, clock: Any = time.monotonic) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._last_log_s = -float("inf")
        self._run: Any = None
        self._first_row: int | None = None  # wandb's open row when the run was first seen
        self._run_id: str | None = None
        self._alerted: set[str] = set()
        self.logs = 0
        self.alerts = 0
        self.errors = 0
        self.last_error: str | None = None
        self.cost_s = 0.0
        # The program's own secrets, read once: a queue named after its database password must not become a key.
        self._secrets = tuple(sorted(secret_values(os.environ, sys.argv), key=len, reverse=True))
        self._clean_labels: dict[str, str] = {}

    def status(self) -> JsonDict:
        """The board's ``session.wandb`` section."""
        return {
            "enabled": True,
            "run_id": self._run_id,
            "logs": self.logs,
            "alerts": self.alerts,
            "errors": self.errors,
            "last_error": self.last_error,
            "interval_s": self.interval_s,
            "log_cost_ms_mean": 1e3 * self.cost_s / self.logs if self.logs else None,
        }

    def maybe_log(self, document: JsonDict, *, force: bool = False) -> bool:
        """Log ``document``'s readings into the active wandb run when one is active and a log is due."""
        try:
            run = _active_run()
            if run is None:
                self._run = None
                return False
            now = self._clock()
            if run is not self._run:
                self._follow(run)
            row = getattr(run, "step", None)
            if row == self._first_row and not force:
                # Until the program has logged once, the open row is one it may never write to (its first
                # explicit step can be later): readings logged there would make a row of their own.
                return False
            if not force and now - self._last_log_s < self.interval_s:
                return False
            self._last_log_s = now
            probes = document.get("probes") or {}
            t0 = time.perf_counter()
            metrics = self._metrics(probes, document.get("session"))
            if metrics:
                run.log(metrics, commit=False)  # into the program's open row: see the module docstring
                self.logs += 1
            self._alert(run, probes)
            self.cost_s += time.perf_counter() - t0
            return bool(metrics)
        except Exception as exc:  # wandb must never break the run
            self.errors += 1
            self.last_error = f"{type(exc).__name__}: {exc}"[:300]
            return False

    def _clean(self, text: str) -> str:
        """``text`` without secrets (the rules, then the program's known values); labels are remembered."""
        hit = self._clean_labels.get(text)
        if hit is None:
            hit = scrub_text(redact_text(text), self._secrets)
            if len(self._clean_labels) < MAX_REMEMBERED_LABELS:
                self._clean_labels[text] = hit
        return hit

    def _metrics(self, probes: JsonDict, session: Any) -> dict[str, float]:
        """The readings keyed for ``run.log``, their label values (queue names) redacted before they make a key."""
        out: dict[str, float] = {}
        for r in readings(probes, session):
            labels = tuple((k, self._clean(v)) for k, v in r.labels)
            out[Reading(r.name, r.value, labels).wandb_key] = r.value
        return out

    def _follow(self, run: Any) -> None:
        self._run = run
        self._first_row = getattr(run, "step", None)
        self._run_id = str(getattr(run, "id", None) or "") or None
        self._alerted = set()
        self._last_log_s = -float("inf")

    def _alert(self, run: Any, probes: JsonDict) -> None:
        for alert in critical_alerts(probes):
            if alert.rule_id in self._alerted:
                continue
            self._alerted.add(alert.rule_id)  # once per run, even if wandb refuses it
            title, text = self._clean(f"dflash-diag: {alert.title}"), self._clean(f"[{alert.rule_id}] {alert.text}")
            run.alert(title=title, text=text, level="ERROR", wait_duration=ALERT_WAIT_S)
            self.alerts += 1


def _active_run() -> Any:
    """``wandb.run`` when the program imported wandb and a run is active and not finished, else None."""
    wandb = loaded_module("wandb")
    run = getattr(wandb, "run", None) if wandb is not None else None
    if run is None or getattr(run, "_is_finished", False):
        return None
    return run
