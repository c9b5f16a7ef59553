"""`record --kernels`' one trace: torch.profiler's events (the handmade trace of tests/kernel_traces.py, in torch's own
export format) merged with the recorded tiny-trainer stacks: valid Trace Event Format, every thread's ops on its own
track under our names, the sampled states beside them, CUDA streams as tracks with launch arrows, torch's clock placed
on ours through the clock marks, and the events bound. And a real H200 recording, when one was kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kernel_traces import T0_US, TorchTrace
from test_trace import recorded_observation
from trace_format import strict_json, validate_trace

from dflash_diag.analysis.findings import evaluate
from dflash_diag.analysis.kernels import summarise
from dflash_diag.analysis.pipeline import pipeline_view
from dflash_diag.analysis.threads import aggregate_threads
from dflash_diag.export.kernels import GPU_TID_BASE, SAMPLED_TID_BASE, _ordered, kernels_trace
from dflash_diag.sources.kernel_trace import parse_trace, read_trace_file, recorded_trace

H200 = Path(__file__).resolve().parents[1] / "fixtures" / "h200" / "kernels-qwen3.5-4b.json"
PID, TARGET, DRAFTER = 23071, 23180, 23181  # the recorded tiny trainer's process and threads
MONO0_NS = 100_000_000_000  # its first stack sample: 100.0 s on the monotonic clock


def _recording(extra_ops: int = 0) -> tuple[TorchTrace, dict[str, Any]]:
    t = TorchTrace(pid=PID).thread(TARGET, "target-0").thread(DRAFTER, "drafter-0")
    t.op(PID, "dflash-diag clock start 0", 0, 1, cat="user_annotation")
    t.op(DRAFTER, "aten::linear", 0, 400).launch(DRAFTER, 10, 1).gpu("sgemm", 30, 1030, 1)
    t.op(DRAFTER, "aten::relu", 1100, 1200).launch(DRAFTER, 1110, 2).gpu("relu_kernel", 1130, 1230, 2)
    t.op(TARGET, "aten::mm", 1150, 1300).launch(TARGET, 1160, 3).gpu("sgemm_b", 1230, 2230, 3, stream=13)
    for i in range(extra_ops):
        t.op(TARGET, "aten::add", 2300 + 2 * i, 2301 + 2 * i)
    t.op(PID, "dflash-diag clock end 0", 3000, 3001, cat="user_annotation")
    outcome = {
        "clock_marks": [  # each bracketed by 2 us of the monotonic clock: +-1 us
            {"name": "dflash-diag clock start 0", "mono_ns_before": MONO0_NS - 1000, "mono_ns_after": MONO0_NS + 1000},
            {"name": "dflash-diag clock end 0", "mono_ns_before": MONO0_NS + 3_000_000 - 1000,
             "mono_ns_after": MONO0_NS + 3_000_000 + 1000}],
        "threads": {str(TARGET): "target-0", str(DRAFTER): "drafter-0", str(PID): "MainThread"},
        "step_marks": [[MONO0_NS + 1_250_000, DRAFTER, 0], [MONO0_NS + 2_500_000, DRAFTER, 0]],
    }
    return t, outcome


def _merge(extra_ops: int = 0, max_events: int = 1_000_000):  # type: ignore[no-untyped-def]
    trace_data, outcome = _recording(extra_ops)
    obs = recorded_observation()
    threads = aggregate_threads(obs)
    findings = evaluate(obs, threads, pipeline_view(obs, threads, now_wall_s=obs.started_wall_s + 4),
                        now_wall_s=obs.started_wall_s + 4)
    trace, clock = recorded_trace(trace_data.data(), outcome, PID)
    merged = kernels_trace(obs, threads, findings, trace, clock, tool_version="t", recording={"reason": "steps"},
                           max_events=max_events)
    return merged, strict_json(json.dumps(merged.doc)), clock


def test_one_timeline_for_kernels_ops_and_sampled_states() -> None:
    merged, doc, clock = _merge()
    assert validate_trace(doc) == []
    events = doc["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names[DRAFTER] == "drafter-0 [drafter]" and names[TARGET] == "target-0 [target]"
    assert names[SAMPLED_TID_BASE + DRAFTER] == "drafter-0 [drafter] · sampled"
    streams = {tid: name for tid, name in names.items() if tid >= GPU_TID_BASE and tid < SAMPLED_TID_BASE}
    assert sorted(streams.values()) == ["cuda:0 stream 13", "cuda:0 stream 7"]

    def on(tid: int, cat: str) -> list[dict[str, Any]]:
        return [e for e in events if e.get("tid") == tid and e.get("cat") == cat and e["ph"] == "X"]

    assert [e["name"] for e in on(DRAFTER, "cpu_op")] == ["aten::linear", "aten::relu"]  # the thread's own track
    assert [e["name"] for e in on(DRAFTER, "cuda_runtime")] == ["cudaLaunchKernel", "cudaLaunchKernel"]
    assert on(SAMPLED_TID_BASE + DRAFTER, "state") and not on(DRAFTER, "state")  # states beside it, not on it
    stream7 = next(tid for tid, name in streams.items() if name.endswith("stream 7"))
    kernels = on(stream7, "kernel")
    assert [k["name"] for k in kernels] == ["sgemm", "relu_kernel"]
    # torch's clock placed on ours: trace time 30 us is 100.000030 s, the first sample's time is the origin (0)
    assert kernels[0]["ts"] == pytest.approx(30.0, abs=0.01) and kernels[0]["dur"] == pytest.approx(1000.0)
    assert clock.method == "marks" and clock.uncertainty_us == pytest.approx(1.0) and abs(clock.drift) < 1e-9
    flows = [e for e in events if e["ph"] in ("s", "f")]
    assert len(flows) == 6 and {e["id"] for e in flows} == {1, 2, 3}  # each kernel tied to its launch
    start = next(e for e in flows if e["ph"] == "s" and e["id"] == 1)
    assert start["tid"] == DRAFTER and start["ts"] == pytest.approx(10.0, abs=0.01)
    steps = [e for e in events if e.get("cat") == "step"]
    assert [(e["tid"], round(e["ts"])) for e in steps] == [(DRAFTER, 1250), (DRAFTER, 2500)]
    assert not [e for e in events if str(e.get("name", "")).startswith("dflash-diag clock")]  # our marks are ours
    other = doc["otherData"]["kernels"]
    assert other["left_out"] == 0 and other["clock"]["uncertainty_us"] == 1.0 and other["reason"] == "steps"
    assert merged.left_out == 0 and merged.cut_at_s is None


def test_doctor_reads_back_what_record_wrote_to_the_same_summary() -> None:
    merged, doc, _ = _merge()
    trace_data, outcome = _recording()
    raw, _ = recorded_trace(trace_data.data(), outcome, PID)
    again = parse_trace(json.dumps(doc).encode(), source="kernels.json")
    assert again.pid == PID and again.thread_names[DRAFTER] == "drafter-0 [drafter]"
    a, b = summarise(raw), summarise(again)
    assert b.gpu_spans == a.gpu_spans == 3 and [d.device for d in b.devices] == [0]
    assert b.devices[0].busy_us == pytest.approx(a.devices[0].busy_us, abs=0.01)
    assert b.devices[0].idle_us == pytest.approx(a.devices[0].idle_us, abs=0.01)
    assert b.gpu_time_by_thread == a.gpu_time_by_thread and b.gpu_time_by_phase == a.gpu_time_by_phase
    assert b.steps == 2  # the step marks, read back from the instants


def test_the_events_are_bounded_and_the_cut_is_said() -> None:
    merged, doc, _ = _merge(extra_ops=2_000, max_events=1_000)
    assert validate_trace(doc) == []
    assert len(doc["traceEvents"]) <= 1_000 + 60  # the cap, plus the tracks' names
    assert merged.left_out > 0 and merged.cut_at_s is not None
    assert doc["otherData"]["kernels"]["left_out"] == merged.left_out
    [note] = [e for e in doc["traceEvents"] if e["name"] == "trace cut here (--max-events)"]
    assert note["args"]["left_out"] == merged.left_out
    kept = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    assert kept and max(e["ts"] for e in kept) <= note["ts"]  # the earliest events are kept, the latest left out


def test_a_child_that_rounding_pushed_past_its_parent_ends_with_it() -> None:
    t = TorchTrace(pid=PID).thread(DRAFTER, "drafter-0")
    t.op(DRAFTER, "aten::linear", 0, 100.0004).op(DRAFTER, "aten::addmm", 50, 100.0009)
    obs = recorded_observation()
    threads = aggregate_threads(obs)
    trace, clock = recorded_trace(t.data(), {"clock_marks": []}, PID, wall_minus_mono_s=0.0)
    assert clock.method == "wall clock"
    doc = strict_json(json.dumps(kernels_trace(obs, threads, (), trace, clock, tool_version="t", recording={}).doc))
    assert validate_trace(doc) == []


def test_ends_equal_in_decimal_but_not_in_binary_still_nest() -> None:
    # A real recording's pair: 356065.573 + 85588.149 is 441653.72199999995, 356073.281 + 85580.441 is 441653.722.
    parent = {"ph": "X", "pid": 1, "tid": 1, "ts": 356065.573, "dur": 85588.149, "name": "a"}
    child = {"ph": "X", "pid": 1, "tid": 1, "ts": 356073.281, "dur": 85580.441, "name": "b"}
    meta = {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "t"}}
    assert validate_trace({"traceEvents": [meta, dict(parent), dict(child)]}) != []  # as torch's numbers come
    assert validate_trace({"traceEvents": _ordered([meta, parent, child])}) == []


def test_the_trace_without_marks_uses_the_wall_clock() -> None:
    t = TorchTrace(pid=PID).thread(DRAFTER, "drafter-0").op(DRAFTER, "aten::mm", 0, 10)
    # torch's time is Unix time: base + µs. A machine whose wall clock is monotonic + W places it at base + t - W.
    trace, clock = recorded_trace(t.data(), {}, PID, wall_minus_mono_s=1_790_000_000.0)
    base_us = 1_790_000_000_000_000_000 / 1e3
    assert clock.mono_us(T0_US) == pytest.approx(base_us + T0_US - 1_790_000_000.0 * 1e6)


@pytest.mark.skipif(not H200.exists(), reason="no real H200 kernel trace kept yet (tests/fixtures/kernels/README.md)")
def test_the_real_h200_recording_is_valid_and_its_kernels_are_tied_to_launches() -> None:
    assert validate_trace(strict_json(H200.read_bytes())) == []
    s = summarise(read_trace_file(H200))
    assert s.gpu_spans > 100 and s.devices and s.devices[0].busy_us > 0
    gpu_us = sum(us for _, us in s.gpu_time_by_phase)
    assert s.unattributed_gpu_us < 0.2 * gpu_us  # most kernels tied to the call that launched them
    # The H200's torch 2.11 has no profile_all_threads: the recording ran on its own thread, so the trace holds every
    # thread's kernels and CUDA calls but not the training threads' CPU ops, which tell the phases. All its GPU time
    # is then "outside ops"; the phases are the synthetic trace's test (test_kernel_summary.py).
    assert {p for p, _ in s.gpu_time_by_phase} == {"outside ops"}
