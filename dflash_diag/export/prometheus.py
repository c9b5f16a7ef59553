"""The probes' readings of many processes as Prometheus / OpenMetrics metrics (``dflash-diag export``).

A ``prometheus_client`` custom collector: every scrape re-reads the boards (the PIDs given, or every board
in the board directory with ``--all``), so processes that start or exit between two scrapes appear and
disappear without a restart; per-GPU utilisation comes from NVML. Reading a board is a file read (~0.1 ms),
never a ptrace; :mod:`dflash_diag.export.serve` renders the page at most once a second, however many scrape.

Names: ``dflash_`` + the catalogue name of :mod:`probes.readings`, in Prometheus' base units (seconds,
``_ratio`` for 0..1 shares, ``_per_second``), counters with ``_total``. Every process series carries
``pid``, ``program`` (the script or module, not its arguments) and ``hostname``. docs/integrations.md
lists them; docs/grafana-dashboard.json charts them.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from dflash_contract.board import AppKeys
from dflash_diag.errors import DflashDiagError
from dflash_diag.model import NA, Board, GpuSample
from dflash_diag.sources.board import list_boards, read_board
from probes.readings import CATALOGUE, COUNTER, readings

PROCESS_LABELS = ("pid", "program", "hostname")
GPU_LABELS = ("gpu", "name", "uuid")


def prometheus_name(name: str) -> tuple[str, float]:
    """``dflash_<name>`` in base units, and the factor that converts the reading into them."""
    base, scale = name, 1.0
    if base.endswith("_ms"):
        base, scale = base[: -len("_ms")] + "_seconds", 1e-3
    elif base.endswith("_per_s"):
        base = base[: -len("_per_s")] + "_per_second"
    elif base.endswith("_s"):
        base = base[: -len("_s")] + "_seconds"
    elif base.endswith("_share"):
        base = base[: -len("_share")] + "_ratio"
    return f"dflash_{base}", scale


def program_of(argv: tuple[str, ...]) -> str:
    """What runs, without its arguments: ``python -m reference_trainer`` -> ``reference_trainer``."""
    args = list(argv)
    for i, arg in enumerate(args[:-1]):
        if arg == "-m":
            return args[i + 1][:80]
    for arg in args[1:]:
        if not arg.startswith("-"):
            return os.path.basename(arg)[:80]
    return os.path.basename(args[0])[:80] if args else "?"


@dataclass(frozen=True, slots=True)
class ScrapeStats:
    boards: int
    board_errors: int


GpuReader = Callable[[], "tuple[GpuSample, ...] | NA"]
BoardLister = Callable[[], "list[Board | DflashDiagError]"]


class BoardCollector(Collector):
    """Collects, at each scrape, the boards of ``pids`` (every board in ``board_dir`` when ``pids`` is None)."""

    def __init__(self, pids: Iterable[int] | None = None, *, board_dir: str | None = None,
                 gpus: GpuReader | None = None) -> None:
        # A one-shot iterator is kept as a tuple; any other iterable is read again at each scrape (a job's ranks,
        # found again after torchrun restarts them: cli/export.py's JobPids).
        self.pids: Iterable[int] | None = tuple(pids) if isinstance(pids, Iterator) else pids
        self.board_dir = board_dir
        self._gpus = gpus
        self._lock = threading.Lock()  # the HTTP server may scrape from several threads
        self.scrapes = 0
        self.last = ScrapeStats(0, 0)

    def describe(self) -> list[Metric]:
        return []  # no fixed set: the families depend on what the boards hold

    def _boards(self) -> list[tuple[int | None, Board | DflashDiagError]]:
        if self.pids is None:
            return [(None, b) for b in list_boards(self.board_dir)]
        out: list[tuple[int | None, Board | DflashDiagError]] = []
        for pid in self.pids:
            try:
                out.append((pid, read_board(pid, self.board_dir)))
            except DflashDiagError as exc:
                out.append((pid, exc))
        return out

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            self.scrapes += 1
            try:
                found = self._boards()
            except DflashDiagError as exc:  # the board directory itself is unusable
                found = [(None, exc)]
            yield from self._families(found)

    def _families(self, found: list[tuple[int | None, Board | DflashDiagError]]) -> Iterator[Metric]:
        up = GaugeMetricFamily("dflash_up", "1 when the process's probe board was read, 0 when it could not be "
                               "(reason: exited, no_board, refused)", labels=["pid", "reason"])
        age = GaugeMetricFamily("dflash_board_age_seconds", "seconds since the process last published its board",
                                labels=list(PROCESS_LABELS))
        families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}
        boards, errors = 0, 0
        now = time.time()
        for pid, item in found:
            if isinstance(item, Board):
                try:
                    # Built apart, then added: a board that breaks a reader costs its own process's series only,
                    # never the page (every scrape of every process answered empty, before).
                    labels = _process_labels(item)
                    samples = list(self._board_samples(item, labels))
                    board_age = item.age_s(now)
                except Exception:
                    errors += 1
                    up.add_metric([str(item.writer.pid), "invalid"], 0.0)
                    continue
                boards += 1
                up.add_metric([labels[0], ""], 1.0)
                age.add_metric(list(labels), board_age)
                for name, kind, help_text, label_names, values, value in samples:
                    family = families.get(name)
                    if family is None:
                        family = (CounterMetricFamily(name, help_text, labels=label_names) if kind == COUNTER
                                  else GaugeMetricFamily(name, help_text, labels=label_names))
                        families[name] = family
                    family.add_metric(values, value)
            else:
                errors += 1
                if pid is not None:
                    up.add_metric([str(pid), _reason(item)], 0.0)
        self.last = ScrapeStats(boards, errors)
        yield up
        yield age
        yield from families.values()
        yield from self._gpu_families()
        scrape = GaugeMetricFamily("dflash_exporter_boards", "boards read at this scrape, and the ones refused",
                                   labels=["outcome"])
        scrape.add_metric(["read"], float(boards))
        scrape.add_metric(["refused"], float(errors))
        yield scrape

    def _board_samples(self, board: Board, labels: tuple[str, ...]) -> Iterator[_Sample]:
        """Every series one board gives: (family name, kind, help, label names, label values, value)."""
        for reading in readings(board.probes, board.session):
            kind, extra, help_text = CATALOGUE[reading.name]
            name, scale = prometheus_name(reading.name)
            value = _finite(reading.value, scale)
            if value is not None:
                yield (name, kind, help_text, [*PROCESS_LABELS, *extra], [*labels, *(v for _, v in reading.labels)],
                       value)
        for key, name, help_text in ((AppKeys.TOKENS_PER_S, "dflash_app_tokens_per_second", "tokens per second the program reports"),
                                     (AppKeys.STEP, "dflash_app_step", "the training step the program reports")):
            raw = board.app.get(key) if isinstance(board.app, Mapping) else None
            value = _finite(raw, 1.0) if isinstance(raw, int | float) and not isinstance(raw, bool) else None
            if value is not None:
                yield name, "gauge", help_text, list(PROCESS_LABELS), list(labels), value

    def _gpu_families(self) -> Iterator[Metric]:
        if self._gpus is None:
            return
        sample = self._gpus()
        if isinstance(sample, NA):
            return
        util = GaugeMetricFamily("dflash_gpu_utilization_ratio", "share of the last sample period a kernel ran (NVML)",
                                 labels=list(GPU_LABELS))
        memory = GaugeMetricFamily("dflash_gpu_memory_used_bytes", "GPU memory in use (NVML)", labels=list(GPU_LABELS))
        for gpu in sample:
            labels = [str(gpu.index), gpu.name, gpu.uuid]
            if isinstance(gpu.util_pct, (int, float)):
                util.add_metric(labels, float(gpu.util_pct) / 100.0)
            if isinstance(gpu.memory_used_bytes, int):
                memory.add_metric(labels, float(gpu.memory_used_bytes))
        yield util
        yield memory


_Sample = tuple[str, str, str, list[str], list[str], float]


def _finite(value: Any, scale: float) -> float | None:
    """``value * scale`` as a finite float, else None (a number no float holds, or one that overflows)."""
    try:
        out = float(value) * scale
    except (OverflowError, TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _reason(error: DflashDiagError) -> str:
    """A small, stable label value (a message would make a new series per wording)."""
    from dflash_diag.errors import ExitCode

    if getattr(error, "exit_code", None) == ExitCode.NO_PROCESS:
        return "exited"
    return "no_board" if "has no probe board" in str(error) else "refused"


def _process_labels(board: Board) -> tuple[str, ...]:
    app_name = board.app.get(AppKeys.NAME) if isinstance(board.app, Mapping) else None
    program = app_name if isinstance(app_name, str) and app_name else program_of(board.writer.argv)
    return (str(board.writer.pid), program[:80], board.writer.hostname[:120])


def default_gpus() -> GpuReader | None:
    """NVML's readings when nvidia-ml-py is installed (N/A values are skipped), else None."""
    try:
        from dflash_diag.sources.nvml import NvmlSource
    except ImportError:
        return None
    source = NvmlSource()
    return source.sample


def registry_for(collector: BoardCollector) -> Any:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry
