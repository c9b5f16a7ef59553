"""`process-wait` costs throughput only where the training threads wait for what the blocked thread feeds them:
checked on two recorded programs that each have a loader blocked on a TCP connection to a child process."""

from __future__ import annotations

import re
from pathlib import Path

from dflash_diag.analysis import analyse
from dflash_diag.model import Severity
from dflash_diag.snapshot.bundle import load_observation

RECORDINGS = Path(__file__).resolve().parents[1] / "casebook" / "observations"


def _process_wait(name: str):  # type: ignore[no-untyped-def]
    analysis = analyse(load_observation(str(RECORDINGS / f"{name}.json.gz")))
    return [f for f in analysis.findings if f.rule_id == "process-wait"]


def test_a_loader_that_waits_on_a_working_server_while_the_trainer_computes_is_information() -> None:
    # settings batch 5's energy twin, attached: its loader spends 84-85% of its samples on the connection to the gateway
    # child, which works (50% CPU), while the trainer computes ~94% of its samples: said, not a cost.
    (finding,) = _process_wait("settings5_energy_fixed__attach")
    share = re.match(r"feed-loader spends (\d+)% of its samples blocked at FeedClient\._recv_exact", finding.claim)
    assert share is not None and int(share.group(1)) >= 80, finding.claim
    assert finding.severity == Severity.INFO and finding.impact == 0.0


def test_a_loader_whose_waits_starve_the_trainer_is_a_cost() -> None:
    # settings batch 4's Nagle program under `run`: the trainer waits on its queue while the enricher waits on the
    # store child (both ends idle).
    (finding,) = _process_wait("settings4_fraud__probes")
    assert finding.severity == Severity.WARNING and finding.impact > 0.9
