"""The syncs probe: host<->device syncs counted per line through torch's sync debug mode and one targeted warnings
filter. CPU-only here: a stand-in for ``torch.cuda`` whose "sync" raises the very warning torch raises (in C, with
the calling line's frame: ``warnings.warn(..., stacklevel=2)`` from a helper is the same attribution)."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator

import pytest

from dflash_contract.board import SyncKeys
from probes.syncs import SYNC_MESSAGE, Config, SyncsProbe


class FakeCuda:
    """torch.cuda as the probe uses it; ``item()`` warns as c10 does when the mode is 1."""

    def __init__(self, initialized: bool = True, mode: int = 0) -> None:
        self.initialized = initialized
        self.mode = mode

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return self.initialized

    def get_sync_debug_mode(self) -> int:
        return self.mode

    def set_sync_debug_mode(self, mode: int) -> None:
        self.mode = mode

    def item(self) -> float:
        if self.mode == 1:
            warnings.warn(SYNC_MESSAGE, UserWarning, stacklevel=2)  # the caller's line, as torch's C warning
        return 1.0


@pytest.fixture
def shown() -> Iterator[list[warnings.WarningMessage]]:
    """What the program's own warning display receives (restored with the filters afterwards)."""
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("default")
        yield log


@pytest.fixture
def cuda(shown: list[warnings.WarningMessage]) -> FakeCuda:
    return FakeCuda()


def _lines(payload: dict) -> dict[tuple[str, str], int]:
    return {(row[SyncKeys.SITE].rsplit(":", 1)[0], row[SyncKeys.THREAD]): row[SyncKeys.COUNT]
            for row in payload[SyncKeys.TOP_LINES]}


def test_syncs_are_counted_per_line_and_thread_and_shown_nowhere(cuda: FakeCuda,
                                                                 shown: list[warnings.WarningMessage]) -> None:
    probe = SyncsProbe(Config(), cuda=cuda)
    assert probe.snapshot(0.0)["status"] == "ok" and cuda.mode == 1

    def loss_loop() -> None:
        for _ in range(25):
            cuda.item()

    worker = threading.Thread(target=loss_loop, name="drafter-0")
    worker.start()
    worker.join()
    for _ in range(3):
        cuda.item()
    payload = probe.snapshot(1.0)
    assert payload[SyncKeys.TOTAL] == 28
    rows = payload[SyncKeys.TOP_LINES]
    assert rows[0][SyncKeys.THREAD] == "drafter-0" and rows[0][SyncKeys.COUNT] == 25
    assert rows[0][SyncKeys.SITE].startswith("probes/test_syncs.py:")
    assert rows[1][SyncKeys.COUNT] == 3 and rows[1][SyncKeys.SITE] != rows[0][SyncKeys.SITE]
    assert shown == []  # the sync warning itself is never shown
    warnings.warn("a warning of the program's own", UserWarning, stacklevel=1)
    assert [str(w.message) for w in shown] == ["a warning of the program's own"]  # others go on as before
    probe.close()
    assert cuda.mode == 0 and not any(f[1] is not None and f[1].pattern.startswith("called a sync")
                                      for f in warnings.filters)


def test_close_takes_everything_back(cuda: FakeCuda) -> None:
    shown, filters = warnings.showwarning, list(warnings.filters)
    probe = SyncsProbe(Config(), cuda=cuda)
    probe.snapshot(0.0)
    assert warnings.showwarning is not shown and len(warnings.filters) == len(filters) + 1
    probe.close()
    assert warnings.showwarning is shown and warnings.filters == filters and cuda.mode == 0


@pytest.mark.parametrize(("case", "reason"), [
    ("not-initialised", "CUDA not initialised"),
    ("mode-set", "set torch.cuda's sync debug mode itself"),
    ("error-filter", "turns warnings into errors"),
])
def test_it_does_not_arm_where_it_would_change_the_program(cuda: FakeCuda, case: str, reason: str) -> None:
    if case == "not-initialised":
        cuda.initialized = False
    elif case == "mode-set":
        cuda.mode = 2
    else:
        warnings.simplefilter("error")
    probe = SyncsProbe(Config(), cuda=cuda)
    payload = probe.snapshot(0.0)
    assert payload["status"] == "na" and reason in payload["reason"]
    assert cuda.mode == (2 if case == "mode-set" else 0)
    probe.close()


def test_an_error_filter_added_later_disarms_at_the_next_check(cuda: FakeCuda) -> None:
    probe = SyncsProbe(Config(), cuda=cuda)
    assert probe.snapshot(0.0)["status"] == "ok"
    warnings.simplefilter("error")  # ahead of ours: a sync would raise in the program
    payload = probe.snapshot(1.0)
    assert payload["status"] == "na" and cuda.mode == 0
    cuda.item()  # no warning raised: the mode is off
    probe.close()


def test_a_process_without_cuda_is_never_armed() -> None:
    probe = SyncsProbe(Config())  # the real torch here: a CPU build
    payload = probe.snapshot(0.0)
    assert payload["status"] == "na" and "CUDA" in payload["reason"]
    probe.close()


def test_lines_beyond_the_bound_count_together(cuda: FakeCuda) -> None:
    probe = SyncsProbe(Config(max_lines=2), cuda=cuda)
    probe.snapshot(0.0)
    for filename in ("a.py", "b.py", "c.py", "d.py"):
        probe._count(filename, 3)
    payload = probe.snapshot(1.0)
    assert payload[SyncKeys.TOTAL] == 4 and sum(r[SyncKeys.COUNT] for r in payload[SyncKeys.TOP_LINES]) == 4
    assert any(r[SyncKeys.SITE] == "<other lines>" and r[SyncKeys.COUNT] == 2 for r in payload[SyncKeys.TOP_LINES])
    probe.close()
