"""The rules on real py-spy recordings (tests/fixtures: H200 torch 2.11 and this CPU box), through the real
parser, classifier and aggregates: what a user would see from `doctor` on those processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dflash_diag.analysis.findings import evaluate
from dflash_diag.analysis.pipeline import pipeline_view
from dflash_diag.analysis.threads import aggregate_threads
from dflash_diag.model import NA, Finding, Observation, Severity
from dflash_diag.sources.lines import LineCache
from dflash_diag.sources.pyspy_json import stack_sample_from_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# The H200 recording did not keep its script: the two line texts its README documents.
H200_LINES = {"/tmp/child.py:7": "torch.cuda.synchronize()", "/tmp/child.py:21": "time.sleep(0.5)"}


def _findings(path: Path, lines: dict[str, str] | None = None) -> tuple[Finding, ...]:
    recording = json.loads(path.read_text())
    stacks = []
    cache = LineCache()
    source_lines = dict(lines or {})
    for i, entry in enumerate(e for e in recording if not e.get("native")):
        dump = entry["dump"]
        sample = stack_sample_from_json(dump, pid=dump[0]["pid"], monotonic_s=i * 0.2, wall_s=1000.0 + i * 0.2,
                                        duration_s=entry["seconds"], native=False)
        stacks.append(sample)
        if lines is None:  # CPU recordings name files of this checkout: read their lines like the collector does
            for thread in sample.threads:
                for frame in thread.frames[:3]:
                    text = cache(frame.filename, frame.line)
                    if text is not None:
                        source_lines[f"{frame.filename}:{frame.line}"] = text
    obs = Observation(pid=stacks[0].pid, cmdline=("python",), started_wall_s=1000.0, window_s=len(stacks) * 0.2,
                      stacks=tuple(stacks), proc=(), gpus=NA("recorded"), boards=NA("no board"), process_alive=True,
                      warnings=(), source_lines=source_lines)
    threads = aggregate_threads(obs)
    now = 1000.0 + len(stacks) * 0.2
    return evaluate(obs, threads, pipeline_view(obs, threads, now_wall_s=now), now_wall_s=now)


def _serious(findings: tuple[Finding, ...]) -> dict[str, Finding]:
    return {f.rule_id: f for f in findings if f.severity >= Severity.WARNING}


def test_h200_synchronize_in_the_target_is_a_host_sync_storm() -> None:
    serious = _serious(_findings(FIXTURES / "h200" / "pyspy_dump_json_nonblocking.json", H200_LINES))
    assert "`torch.cuda.synchronize()`" in serious["host-sync-storm"].claim
    # The recording has no board or NVML reading: which GPU idles is unknown, so the verdict is information.
    assert "pipeline-bottleneck-target" in {f.rule_id for f in _findings(
        FIXTURES / "h200" / "pyspy_dump_json_nonblocking.json", H200_LINES)}


@pytest.mark.parametrize(
    ("recording", "expected", "verdict"),
    [
        # The drafter waits on the GIL 73% of its samples: the wait chain follows it to the hog (a warning).
        ("pyspy_drafter_bound.json", {"gil-contention", "wait-chain"}, "pipeline-bottleneck-drafter"),
        ("pyspy_target_bound.json", set(), "pipeline-bottleneck-target"),
        ("pyspy_ckpt_compile.json", {"gil-contention"}, "pipeline-bottleneck-target"),
    ],
)
def test_cpu_recordings(recording: str, expected: set[str], verdict: str) -> None:
    """CPU pipelines: the limiting stage is named (information: no GPU idles), the GIL hog is a warning."""
    findings = _findings(FIXTURES / "cpu" / recording)
    assert set(_serious(findings)) == expected
    assert verdict in {f.rule_id for f in findings}
    if recording == "pyspy_drafter_bound.json":
        assert _serious(findings)["gil-contention"].claim.startswith("GIL contention: gil-hog (not a pipeline stage) "
                                                                     "holds the GIL")
    if recording == "pyspy_ckpt_compile.json":
        assert "warming-up" in {f.rule_id for f in findings}


def test_h200_memory_stats_through_the_allocator_probe_is_churn() -> None:
    """Real memory_stats() before/after 50 varied allocations with empty_cache() every 5th (H200), read through
    the real allocator probe (1 s apart), judged by the allocator rules."""
    from findings_builders import HEALTHY_APP, HEALTHY_PROBES, board, observation, pipeline

    from probes.allocator import AllocatorProbe, Config

    recorded = json.loads((FIXTURES / "h200" / "memory_stats.json").read_text())
    readings = iter([recorded["before"], recorded["after_churn_with_empty_cache"]])
    times = iter([0.0, 1.0])
    probe = AllocatorProbe(Config(), stats_fn=lambda dev: next(readings), devices=[0], clock=lambda: next(times))
    probe.snapshot(0.0)
    payload = probe.snapshot(1.0)
    probes = {**HEALTHY_PROBES, "allocator": {k: v for k, v in payload.items() if k != "status"}}
    obs = observation((board(probes, HEALTHY_APP),))
    findings = evaluate(obs, (), pipeline(), now_wall_s=1000.0)
    churn = _serious(findings)["alloc-churn"]
    mallocs = recorded["after_churn_with_empty_cache"]["num_device_alloc"] - recorded["before"]["num_device_alloc"]
    assert "cuda:0" in churn.claim and dict(churn.evidence)["cudaMalloc rate"] == f"{mallocs:.1f}/s"


def test_h200_cudagraph_partitions_are_reported() -> None:
    """torch 2.11 on the H200 partitions (does not skip) a graph with a CPU input: recorded logger messages."""
    from findings_builders import healthy_board, observation, pipeline

    recorded = json.loads((FIXTURES / "h200" / "cudagraph_partition_cpu_input.json").read_text())
    messages = [m["msg"] for m in recorded["cudagraphs_logger_messages"]]
    b = healthy_board(cudagraphs={"torch": recorded["torch"], "partitions": 2, "partition_messages": messages})
    findings = evaluate(observation((b,)), (), pipeline(), now_wall_s=1000.0)
    finding = {f.rule_id: f for f in findings}["cudagraph-skipped"]
    assert finding.severity == Severity.INFO  # part of the graph runs uncaptured: slower, by an unmeasured amount
    assert "1 partition(s) run uncaptured" in finding.claim
    assert dict(finding.evidence)["inductor"].startswith("Created 2 graph partitions")
