"""The causal model: causes linked to the symptoms they explain, what the window cannot judge held back, one
headline, the rest ranked; and the one entry point (``analyse``) on recorded stacks."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "findings"))

from findings_builders import NOW_S, observation

from dflash_diag.analysis import analyse
from dflash_diag.analysis.causal import link
from dflash_diag.model import NA, Finding, Observation, Severity
from dflash_diag.model.findings import CAUSE, NOTE, STATE, SYMPTOM
from dflash_diag.sources.pyspy_json import load_recorded_dumps

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def f(rule: str, sev: Severity = Severity.WARNING, kind: str = CAUSE, stages: tuple[str, ...] = (),
      impact: float = 0.3, claim: str = "", evidence: tuple[tuple[str, str], ...] = (("x", "1"),)) -> Finding:
    return Finding(rule_id=rule, severity=sev, claim=claim or f"{rule} claim", evidence=evidence,
                   remedy=f"fix {rule}", impact=impact, kind=kind, stages=stages)


BOTTLENECK = f("pipeline-bottleneck-drafter", Severity.INFO, SYMPTOM, ("drafter",), 0.8,
               "the drafter stage limits throughput: target threads are blocked in put 84% of the time",
               (("drafter spends its time in", "loss (loss.py:12) 60%"),))


def test_a_symptom_carries_the_cause_of_its_stage_in_the_headline() -> None:
    storm = f("compile-recompile-storm", stages=("drafter",), claim="the drafter stage's compiled step keeps "
              "recompiling (31 recompiles; 38% of drafter-0 samples in dynamo/inductor)")
    elsewhere = f("host-sync-storm", stages=("target",), impact=0.9)
    ranked, headline, phase = link([elsewhere, BOTTLENECK, storm])
    assert phase == "steady" and headline is not None
    assert headline.text == (f"{BOTTLENECK.claim}, because the drafter stage's compiled step keeps recompiling "
                             "(31 recompiles; 38% of drafter-0 samples in dynamo/inductor)")
    assert headline.remedy == "fix compile-recompile-storm" and headline.severity == Severity.WARNING
    assert headline.because == ("compile-recompile-storm",)  # the target's syncs do not explain the drafter
    assert [x.rule_id for x in ranked] == ["pipeline-bottleneck-drafter", "compile-recompile-storm",
                                           "host-sync-storm"]
    assert ranked[1].explains == ("pipeline-bottleneck-drafter",) and ranked[2].explains == ()


def test_a_process_wide_cause_explains_every_stage_but_a_stage_cause_comes_first() -> None:
    gil = f("gil-contention", impact=0.9)  # no stage: a GIL hog outside the pipeline
    ckpt = f("checkpoint-recompute-heavy", stages=("drafter",), impact=0.4)
    _, headline, _ = link([BOTTLENECK, gil, ckpt])
    assert headline is not None and headline.because == ("checkpoint-recompute-heavy", "gil-contention")


def test_a_root_cause_comes_before_the_cause_it_produces() -> None:
    """empty_cache() after every step makes the allocator churn: the root leads, also over a bigger impact."""
    churn = f("alloc-churn", impact=0.15, claim="the caching allocator goes to the driver 40 times a second")
    empty = f("alloc-empty-cache", impact=0.1, claim="torch.cuda.empty_cache() runs 9 times a second")
    ranked, headline, _ = link([churn, empty])
    assert headline is not None and headline.rule_id == "alloc-empty-cache"
    assert [x.rule_id for x in ranked][:2] == ["alloc-empty-cache", "alloc-churn"]
    assert ranked[0].explains == ("alloc-churn",)
    _, headline, _ = link([BOTTLENECK, churn, empty])
    assert headline is not None and headline.because == ("alloc-empty-cache", "alloc-churn")
    _, headline, _ = link([churn])  # churn alone stays the lead
    assert headline is not None and headline.rule_id == "alloc-churn"


def test_an_information_cause_with_a_share_still_explains_its_stage() -> None:
    """Host syncs on a GPU that reads 99% busy claim no cost (info), yet they are where the drafter's time goes."""
    syncs = f("host-sync-storm", Severity.INFO, stages=("drafter",), impact=0.39,
              claim="drafter threads wait on the GPU 39% of the time in host syncs at spec_train.py:30")
    _, headline, _ = link([BOTTLENECK, syncs])
    assert headline is not None and headline.because == ("host-sync-storm",)
    assert headline.severity == Severity.INFO and "because drafter threads wait on the GPU 39%" in headline.text


def test_without_a_cause_the_headline_says_where_the_time_goes() -> None:
    _, headline, _ = link([BOTTLENECK, f("no-probes", Severity.INFO, NOTE)])
    assert headline is not None and headline.text.endswith("; no cause found, its time goes to: loss (loss.py:12) 60%")


def test_a_standalone_warning_beats_a_causeless_information_symptom() -> None:
    stale = f("stale-code", impact=0.2, claim="the process runs old code: restart")
    ranked, headline, _ = link([BOTTLENECK, stale])
    assert headline is not None and headline.rule_id == "stale-code"
    assert ranked[0].rule_id == "stale-code" and ranked[1].because == ()  # stale code never explains slowness


def test_a_stopped_process_is_the_headline_and_sampled_findings_go() -> None:
    stopped = f("process-stopped", Severity.CRITICAL, STATE, impact=1.0)
    grad = f("checkpoint-grad-none", Severity.CRITICAL, impact=1.0)
    ranked, headline, phase = link([BOTTLENECK, f("gil-contention"), stopped, grad])
    assert phase == "stopped" and headline is not None and headline.rule_id == "process-stopped"
    assert {x.rule_id for x in ranked} == {"process-stopped", "checkpoint-grad-none"}  # probe-measured stays


def test_warm_up_holds_back_stage_verdicts_and_sampled_causes() -> None:
    warm = f("warming-up", Severity.INFO, STATE, claim="warming up: torch.compile is compiling in w")
    gpu = f("gpu-underused", Severity.WARNING, SYMPTOM, ("drafter",))
    ranked, headline, phase = link([BOTTLENECK, gpu, f("gil-contention"), warm])
    assert phase == "warming-up" and headline is not None and headline.rule_id == "warming-up"
    by_id = {x.rule_id: x for x in ranked}
    assert "pipeline-bottleneck-drafter" not in by_id and "gpu-underused" not in by_id
    assert by_id["gil-contention"].severity == Severity.INFO and "seen while warming up" in by_id["gil-contention"].claim


def test_a_hang_is_explained_by_the_threads_that_died() -> None:
    hang = f("pipeline-hang", Severity.CRITICAL, SYMPTOM, ("drafter",), 1.0, "the pipeline is hung, not slow: x")
    died = f("thread-died", claim="2 thread(s) died of an uncaught exception: a, b (KeyError: 'k')")
    ranked, headline, phase = link([BOTTLENECK, died, hang])
    assert phase == "hung" and headline is not None
    assert headline.text == "the pipeline is hung, not slow: x, because 2 thread(s) died of an uncaught exception: " \
                            "a, b (KeyError: 'k')"
    assert [x.rule_id for x in ranked] == ["pipeline-hang", "thread-died"]  # no "drafter-bound" next to a hang


def test_wrong_results_lead_over_slowness() -> None:
    grad = f("checkpoint-grad-none", Severity.CRITICAL, impact=1.0)
    _, headline, _ = link([BOTTLENECK, f("compile-recompile-storm", stages=("drafter",)), grad])
    assert headline is not None and headline.rule_id == "checkpoint-grad-none"


def test_nothing_found_has_no_headline() -> None:
    ranked, headline, phase = link([f("no-probes", Severity.INFO, NOTE)])
    assert headline is None and phase == "steady" and len(ranked) == 1


def _recorded(name: str) -> Observation:
    stacks = load_recorded_dumps(FIXTURES / "cpu" / name)
    return Observation(pid=stacks[0].pid, cmdline=("python",), started_wall_s=1000.0, window_s=len(stacks) * 0.2,
                       stacks=tuple(stacks), proc=(), gpus=NA("recorded"), boards=NA("no board"), process_alive=True,
                       warnings=())


def test_analyse_on_recorded_stacks_names_the_gil_hog_in_the_headline() -> None:
    a = analyse(replace(_recorded("pyspy_drafter_bound.json"), now_wall_s=1010.0))
    assert a.headline is not None and a.errors == ()
    # The wait-for graph follows the drafter's GIL wait to the hog: the path supersedes the stage verdict.
    assert a.headline.rule_id == "wait-chain" and a.headline.because[0] == "gil-contention"
    assert "gil-hog" in a.headline.text and "pipeline-bottleneck-drafter" not in {f.rule_id for f in a.findings}
    assert "gil-hog (not a pipeline stage) holds the GIL" in a.headline.text
    assert a.findings[0].rule_id == "wait-chain" and not a.healthy


def test_analyse_never_raises_on_an_empty_window() -> None:
    a = analyse(replace(observation(NA("no board")), now_wall_s=NOW_S))
    assert a.threads == () and a.errors == ()
    assert {x.rule_id for x in a.findings} == {"no-probes"} and a.headline is None
