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


def test_a_child_that_only_computes_is_a_stage_elsewhere_said_as_information_with_its_cost() -> None:
    # settings batch 17's store-bypass twin: the reader waits on the parse child, which runs flat out in its own
    # Python (93-97% CPU, little of it in the kernel, no call or setting remarkable): the pipeline's producer stage
    # lives in that process. Said, with the stage verdict naming it, and what it costs, but not a warning.
    for mode in ("outside", "probes", "attach"):
        (finding,) = _process_wait(f"settings17_cobalt_fixed__{mode}")
        assert "on a pipe from process" in finding.claim and "logworker.py" in finding.claim, finding.claim
        assert finding.severity == Severity.INFO and finding.impact > 0.5, (mode, finding.severity)
    # The same reader, where the child spends a third of its CPU in the kernel (the TZ program, outside): something
    # about the child is the matter, and the wait that starves the trainer stays a warning.
    (finding,) = _process_wait("settings17_juniper__outside")
    assert "of it in the kernel" in finding.claim and finding.severity == Severity.WARNING


def test_a_computing_child_the_kernel_runs_differently_is_not_only_a_stage() -> None:
    """The same twin's child with a speculation mitigation on (its /proc status): something about it is the matter."""
    from dataclasses import replace

    from dflash_diag.analysis.peers import only_computes

    obs = load_observation(str(RECORDINGS / "settings17_cobalt_fixed__outside.json.gz"))
    tid = next(w.tid for w in obs.outside_waits if w.kind == "pipe")
    assert only_computes(obs, tid)
    controls = (("speculative store bypass", "thread mitigated"),)
    mitigated = replace(obs, outside_waits=tuple(
        replace(w, peers=tuple(replace(p, controls=controls) for p in w.peers)) for w in obs.outside_waits))
    assert not only_computes(mitigated, tid)
    (finding,) = [f for f in analyse(mitigated).findings if f.rule_id == "process-wait"]
    assert finding.severity == Severity.WARNING and "speculative store bypass thread mitigated" in finding.claim


def test_a_computing_child_on_a_crowded_machine_still_only_computes() -> None:
    """The twin's child, had it got 60% of a core and waited for one 30% of the time (a box shared with other
    work): it still wants a whole core for its own code, a stage elsewhere; at 60% with no wait it is not."""
    from dataclasses import replace

    from dflash_diag.analysis.peers import only_computes

    obs = load_observation(str(RECORDINGS / "settings17_cobalt_fixed__outside.json.gz"))
    tid = next(w.tid for w in obs.outside_waits if w.kind == "pipe")

    def peers_at(cpu_pct: float, wait_pct: float | None):  # type: ignore[no-untyped-def]
        return replace(obs, outside_waits=tuple(
            replace(w, peers=tuple(replace(p, cpu_pct=cpu_pct, cpu_wait_pct=wait_pct) for p in w.peers))
            for w in obs.outside_waits))

    assert only_computes(peers_at(60.0, 30.0), tid)
    assert not only_computes(peers_at(60.0, 5.0), tid) and not only_computes(peers_at(60.0, None), tid)
