"""Chrome/Perfetto traces and speedscope profiles: the builders on recorded stacks, and the validators themselves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from trace_format import strict_json, validate_speedscope, validate_trace

from dflash_diag.analysis.findings import evaluate
from dflash_diag.analysis.pipeline import pipeline_view
from dflash_diag.analysis.threads import aggregate_threads
from dflash_diag.export.speedscope import speedscope
from dflash_diag.export.trace import chrome_trace
from dflash_diag.model import NA, Board, GpuSample, Observation, WriterIdentity
from dflash_diag.sources.pyspy_json import load_recorded_dumps

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
WALL0 = 1_764_412_345.0


def _board(seq: int, wall_s: float, *, depth: int, steps: int, captures: int, recompiles: list[dict[str, Any]],
            tids: dict[int, str]) -> Board:
    return Board(
        schema="dflash-diag.board/1",
        writer=WriterIdentity(pid=23071, start_time_ticks=7, argv=("python", "-m", "reference_trainer"), python="3.11.7",
                           torch="2.13.0", hostname="box"),
        seq=seq, wall_time_s=wall_s, interval_s=1.0, threads=tids,
        probes={"queues": {"status": "ok", "q_hs": {"depth": depth, "maxsize": 4}},
                "compile": {"status": "ok", "recompiles": len(recompiles), "recent_recompiles": recompiles},
                "cudagraphs": {"status": "ok", "captures": captures, "skips": 0}},
        app={"name": "reference_trainer", "tokens_per_s": 2400.0 + seq},
        path="/tmp/b/23071.json",
        session={"steps": steps},
    )


def _gpu(index: int, t: float, util: float) -> GpuSample:
    na = NA("not read")
    return GpuSample(index=index, name="H200", uuid=f"GPU-{index}", util_pct=util, mem_util_pct=na,
                     memory_used_bytes=3 * 2**30, memory_total_bytes=na, power_w=na, power_limit_w=na,
                     sm_clock_mhz=na, max_sm_clock_mhz=na, temperature_c=na, throttle_reasons=(), processes=na,
                     monotonic_s=t)


def recorded_observation() -> Observation:
    """The recorded tiny-trainer dumps (0.2 s apart) with boards and GPU readings over the same 3.6 s."""
    stacks = load_recorded_dumps(FIXTURES / "cpu" / "pyspy_tiny_trainer.json", start_monotonic_s=100.0,
                                 start_wall_s=WALL0)
    tids = {t.os_thread_id: t.name for t in stacks[0].threads if t.os_thread_id and t.name}
    recompile = {"function": "forward", "file": "drafter.py", "thread": "drafter-0", "reason": "size mismatch",
                 "wall_time_s": WALL0 + 1.5}
    boards = (
        _board(1, WALL0 + 0.4, depth=2, steps=10, captures=0, recompiles=[], tids=tids),
        _board(2, WALL0 + 1.4, depth=4, steps=20, captures=0, recompiles=[], tids=tids),
        _board(3, WALL0 + 2.4, depth=1, steps=32, captures=1, recompiles=[recompile], tids=tids),
        _board(4, WALL0 + 3.4, depth=1, steps=44, captures=1, recompiles=[recompile], tids=tids),
    )
    gpus = tuple((_gpu(0, 100.0 + t, 90.0 - 10 * t), _gpu(1, 100.0 + t, 40.0)) for t in (0.0, 1.0, 2.0, 3.0))
    return Observation(pid=23071, cmdline=("python", "-m", "reference_trainer"), started_wall_s=WALL0,
                       window_s=3.6, stacks=stacks, proc=(), gpus=gpus, boards=boards, process_alive=True,
                       warnings=())


@pytest.fixture(scope="module")
def analysed() -> tuple[Observation, Any, Any]:
    obs = recorded_observation()
    threads = aggregate_threads(obs)
    findings = evaluate(obs, threads, pipeline_view(obs, threads, now_wall_s=WALL0 + 4), now_wall_s=WALL0 + 4)
    return obs, threads, findings


def test_trace_of_recorded_stacks_is_valid_and_complete(analysed) -> None:
    obs, threads, findings = analysed
    doc = strict_json(json.dumps(chrome_trace(obs, threads, findings, tool_version="t")))
    assert validate_trace(doc) == []
    events = doc["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names[23180] == "target-0 [target]" and names[23181] == "drafter-0 [drafter]"
    # every sampled thread has state slices covering its samples, with frame slices nested inside
    for tid in (23180, 23181, 23071):
        states = [e for e in events if e["ph"] == "X" and e["tid"] == tid and e["cat"] == "state"]
        frames = [e for e in events if e["ph"] == "X" and e["tid"] == tid and e["cat"] == "frame"]
        assert sum(e["args"]["samples"] for e in states) == 18
        assert sum(e["dur"] for e in states) == sum(e["dur"] for e in frames)  # frames tile their state
        assert all(any(s["ts"] <= f["ts"] and f["ts"] + f["dur"] <= s["ts"] + s["dur"] for s in states) for f in frames)
    state_names = {e["name"] for e in events if e.get("cat") == "state"}
    assert {"queue put", "native", "idle"} <= state_names
    assert any("(" in e["name"] and ".py:" in e["name"] for e in events if e.get("cat") == "frame")
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert {"q_hs depth", "tok/s", "steps/s", "GPU 0 utilisation", "GPU 1 utilisation"} <= counters
    depth = [e["args"]["items"] for e in events if e["name"] == "q_hs depth"]
    assert depth == [2, 4, 1, 1]
    gpu0 = [e for e in events if e["name"] == "GPU 0 utilisation"]
    assert [e["args"]["util %"] for e in gpu0] == [90.0, 80.0, 70.0, 60.0]
    assert [e["ts"] for e in gpu0] == [0, 1_000_000, 2_000_000, 3_000_000]  # on the stacks' clock
    instants = [e for e in events if e["ph"] == "i"]
    [recompile] = [e for e in instants if e["name"] == "recompile: forward"]
    assert recompile["tid"] == 23181 and recompile["s"] == "t" and recompile["ts"] == 1_500_000  # once, on its thread
    [capture] = [e for e in instants if e["name"] == "CUDA graph capture"]
    assert capture["ts"] == 2_400_000 and capture["args"]["new"] == 1
    finding_events = [e for e in instants if e["cat"] == "finding"]
    assert len(finding_events) == len(findings) and all(e["s"] == "g" for e in finding_events)
    assert doc["otherData"]["generator"] == "dflash-diag" and doc["otherData"]["stack_samples"] == 18


def test_speedscope_of_recorded_stacks_matches_the_schema(analysed) -> None:
    obs, threads, _ = analysed
    doc = strict_json(json.dumps(speedscope(obs, threads, tool_version="t")))
    assert validate_speedscope(doc) == []
    profiles = {p["name"].split(" (")[0]: p for p in doc["profiles"]}
    assert {"target-0 [target]", "drafter-0 [drafter]", "MainThread"} <= set(profiles)
    target = profiles["target-0 [target]"]
    assert len(target["samples"]) == 18 and abs(sum(target["weights"]) - 18 * 0.2) < 1e-6
    frames = doc["shared"]["frames"]
    outermost = {frames[s[0]]["name"] for s in target["samples"]}
    innermost = {frames[s[-1]]["name"] for s in target["samples"]}
    assert "Thread._bootstrap" in outermost and "Thread._bootstrap" not in innermost  # outermost first, as speedscope wants


BAD_TRACES = {
    "array form": [],
    "unknown phase": {"traceEvents": [{"name": "a", "ph": "Q", "pid": 1, "tid": 1, "ts": 0}]},
    "negative duration": {"traceEvents": [{"name": "t", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "t"}},
                                          {"name": "a", "ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": -1}]},
    "overlap": {"traceEvents": [{"name": "t", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "t"}},
                                {"name": "a", "ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
                                {"name": "b", "ph": "X", "pid": 1, "tid": 1, "ts": 5, "dur": 10}]},
    "unbalanced": {"traceEvents": [{"name": "t", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "t"}},
                                   {"name": "a", "ph": "B", "pid": 1, "tid": 1, "ts": 0}]},
    "string counter": {"traceEvents": [{"name": "c", "ph": "C", "pid": 1, "tid": 0, "ts": 0, "args": {"v": "1"}}]},
    "unnamed thread": {"traceEvents": [{"name": "a", "ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]},
    "time going back": {"traceEvents": [{"name": "t", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "t"}},
                                        {"name": "a", "ph": "X", "pid": 1, "tid": 1, "ts": 10, "dur": 1},
                                        {"name": "b", "ph": "X", "pid": 1, "tid": 1, "ts": 5, "dur": 1}]},
    "bad metadata": {"traceEvents": [{"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {}}]},
    "no ts": {"traceEvents": [{"name": "a", "ph": "i", "pid": 1, "tid": 1, "s": "g"}]},
}


@pytest.mark.parametrize("case", sorted(BAD_TRACES))
def test_the_trace_validator_catches(case: str) -> None:
    assert validate_trace(BAD_TRACES[case]) != []


def test_the_speedscope_validator_catches_a_bad_profile() -> None:
    good = {"$schema": "https://www.speedscope.app/file-format-schema.json", "shared": {"frames": [{"name": "f"}]},
            "profiles": [{"type": "sampled", "name": "t", "unit": "seconds", "startValue": 0, "endValue": 1,
                          "samples": [[0]], "weights": [1]}]}
    assert validate_speedscope(good) == []
    assert validate_speedscope({**good, "$schema": "x"}) != []
    bad = json.loads(json.dumps(good))
    bad["profiles"][0]["samples"] = [[3]]
    assert validate_speedscope(bad) != []
    bad["profiles"][0]["samples"] = [[0], [0]]
    assert validate_speedscope(bad) != []


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*/trace*.json")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_kept_traces_are_valid(path: Path) -> None:
    """Traces recorded on real runs (the H200 preset, the CPU tiny trainer) stay loadable."""
    doc = strict_json(path.read_bytes())
    assert validate_trace(doc) == []
    assert any(e.get("cat") == "state" for e in doc["traceEvents"])
    assert any(e["ph"] == "C" and e["name"].endswith("depth") for e in doc["traceEvents"])


def test_trace_findings_carry_their_causal_links(analysed) -> None:
    """record goes through the one analysis (linked findings): a symptom's causes show in its instant's args."""
    from dataclasses import replace

    obs, threads, findings = analysed
    linked = tuple(replace(f, because=("gil-contention",), explains=()) if i == 0 else f
                   for i, f in enumerate(findings))
    doc = chrome_trace(obs, threads, linked, tool_version="t")
    instants = [e for e in doc["traceEvents"] if e.get("cat") == "finding"]
    assert instants[0]["args"]["because"] == ["gil-contention"]
    assert all(e["args"]["because"] == [] for e in instants[1:] if not any(f.because for f in findings))
