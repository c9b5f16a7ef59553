"""SVG snapshots of ``top`` (pytest-textual-snapshot): deterministic frames, a fixed clock, two terminal sizes.

Regenerate after a deliberate UI change, looking at the report first:
``.venv/bin/pytest tests/tui/test_top_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import pytest
from textual.pilot import Pilot
from top_fakes import GPUS, FakeSource, make_frame

from dflash_diag.tui.app import TopApp

# The baselines were rendered with these versions; another Textual draws differently (memray's rule: pin, skip).
BASELINE_VERSIONS = {"textual": "8.2.8", "pytest-textual-snapshot": "1.1.0"}
_installed = {name: version(name) for name in BASELINE_VERSIONS}
pytestmark = pytest.mark.skipif(
    _installed != BASELINE_VERSIONS, reason=f"snapshots need {BASELINE_VERSIONS}, found {_installed}"
)


def _app(**changes: Any) -> TopApp:
    frame = make_frame(**changes)
    return TopApp(FakeSource([frame]), initial_frame=frame, start_sampler=False)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_top_main_view(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(_app(), terminal_size=size)


def test_top_stack_of_selected_thread_narrow(snap_compare: Any) -> None:
    async def select_drafter(pilot: Pilot[int]) -> None:
        await pilot.press("down", "down", "enter")
        await pilot.pause()

    assert snap_compare(_app(), terminal_size=(80, 24), run_before=select_drafter)


def test_top_probes_and_exited_banner_wide(snap_compare: Any) -> None:
    async def probes(pilot: Pilot[int]) -> None:
        await pilot.press("4")
        await pilot.pause()

    assert snap_compare(_app(process_alive=False, gpus=GPUS), terminal_size=(120, 40), run_before=probes)


def test_top_history_tab_with_a_drop(snap_compare: Any) -> None:
    from dataclasses import replace

    from test_top_history import _fold, _frame

    frames = [_frame(t, 9000.0 if t < 120 else 2500.0, 4 if t < 120 else 0, 97.0 if t < 120 else 10.0)
              for t in range(0, 240, 2)]
    frame = replace(frames[-1], history=_fold(frames))

    async def history(pilot: Pilot[int]) -> None:
        await pilot.press("6")
        await pilot.pause()

    app = TopApp(FakeSource([frame]), initial_frame=frame, start_sampler=False)
    assert snap_compare(app, terminal_size=(120, 40), run_before=history)
