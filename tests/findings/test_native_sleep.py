"""`native-sleep`: a thread whose stacks read as native work at one line while /proc catches it asleep in a sleep call
there: the C code that line calls waits by sleeping. Checked on recorded programs (tests/casebook/observations)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dflash_diag.analysis import analyse
from dflash_diag.model import Severity
from dflash_diag.snapshot.bundle import load_observation

RECORDINGS = Path(__file__).resolve().parents[1] / "casebook" / "observations"


def _analysis(name: str):  # type: ignore[no-untyped-def]
    return analyse(load_observation(str(RECORDINGS / f"{name}.json.gz")))


@pytest.mark.parametrize("mode", ["outside", "probes", "attach"])
def test_a_reader_sleeping_in_sqlites_busy_handler_is_named_with_its_line(mode: str) -> None:
    # Settings batch 17's archive: the loader's `con.execute` reads as native work in the stacks while /proc catches
    # it in clock_nanosleep in most readings (SQLite's busy handler, the ingest child holding the journal's lock).
    analysis = _analysis(f"settings17_bramble__{mode}")
    (finding,) = [f for f in analysis.findings if f.rule_id == "native-sleep"]
    assert finding.claim.startswith("archive-loader sleeps inside SQLite where its stacks read as work: /proc caught "
                                    "it in `clock_nanosleep` in ")
    assert "con.execute(" in finding.claim and "busy handler" in finding.claim  # a query line of sample_batch
    assert finding.severity == Severity.WARNING and finding.impact >= 0.5
    assert analysis.headline is not None and "sleeps inside SQLite" in analysis.headline.text


@pytest.mark.parametrize("name", ["settings17_bramble_fixed__outside", "settings17_bramble_fixed__attach",
                                  "all_masked_loss__attach"])
def test_no_sleep_or_sleeps_scattered_over_lines_are_not_named(name: str) -> None:
    # The WAL twin never sleeps there; the masked-loss trainer's three sleep readings fall at three different places
    # of its training loop (a back-off here and there inside torch, no one call that sleeps).
    assert not [f for f in _analysis(name).findings if f.rule_id == "native-sleep"]
