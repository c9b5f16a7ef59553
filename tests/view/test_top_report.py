"""Batch-mode rendering of a frame: stable JSON keys, NA as null + reason, and the text sections."""

from __future__ import annotations

import json
import math

from top_fakes import GPUS, make_frame

from dflash_diag.model import NA
from dflash_diag.view.report import JSON_SCHEMA, frame_to_json, frame_to_text

TOP_KEYS = {
    "schema", "pid", "cmdline", "wall_time_s", "window_s", "rate_hz", "rate_requested_hz", "rate_reason", "native", "samples", "process_alive",
    "states", "threads", "stages", "pipeline", "gpus", "probes", "headline", "findings", "waits", "warnings",
}  # fmt: skip


def test_json_keys_are_stable_and_strict_json() -> None:
    doc = frame_to_json(make_frame(gpus=GPUS))
    assert set(doc) == TOP_KEYS and doc["schema"] == JSON_SCHEMA
    text = json.dumps(doc, allow_nan=False)  # raises on NaN/inf: the output must be strict JSON
    assert json.loads(text) == doc
    thread = doc["threads"][1]
    assert thread["name"] == "target-0" and thread["tid"] == 1001 and thread["stage"] == "target"
    assert set(thread["shares"]) == set(doc["states"]) and math.isclose(sum(thread["shares"].values()), 1.0)
    assert doc["gpus"]["status"] == "ok" and doc["gpus"]["devices"][0]["util_pct"] == 97.0
    assert doc["pipeline"]["bottleneck"] == "drafter" and doc["stages"]["target"]["tokens_per_s"] == 21_500.0
    assert doc["probes"]["board_age_s"] == 42.0
    assert doc["findings"]["items"][0]["rule_id"] == "stale-code"
    assert doc["waits"]["schema"] == "dflash-diag.waits/1" and doc["waits"]["status"] in ("ok", "na")


def test_na_sections_say_why() -> None:
    frame = make_frame(pipeline=NA("no threads"), board=NA("no probe board"), findings=NA("no pipeline"))
    doc = frame_to_json(frame)
    assert doc["gpus"] == {"status": "na", "reason": "no NVML: libnvidia-ml.so.1 not found"}
    assert doc["pipeline"] == {"status": "na", "reason": "no threads"}
    assert doc["stages"]["status"] == "na" and doc["probes"]["reason"] == "no probe board"
    text = frame_to_text(frame)
    assert "N/A: no NVML" in text and "N/A: no threads" in text and "N/A: no probe board" in text


def test_non_finite_numbers_become_null() -> None:
    frame = make_frame()
    bad = frame.threads[0].__class__(
        **{**{f: getattr(frame.threads[0], f) for f in frame.threads[0].__slots__}, "cpu_pct": float("nan")}
    )
    doc = frame_to_json(make_frame(threads=(bad,)))
    assert doc["threads"][0]["cpu_pct"] is None


def test_text_report_sections() -> None:
    text = frame_to_text(make_frame(process_alive=False))
    assert text.startswith("dflash-diag top - PID 4242 (EXITED)")
    for section in ("PIPELINE", "THREADS", "GPUS", "PROBES", "FINDINGS"):
        assert f"\n{section}\n" in text
    assert (
        "no update for 42 s" in text and "[CRITICAL] stale-code: " in text and "verdict (last 10 s): drafter-bound: q_hs 12/16 rising" in text
    )


def test_a_program_that_does_not_call_its_threads_target_and_drafter_reads_in_roles() -> None:
    """`top --batch` of a producer and worker-N threads: the stage rows, the thread rows and stage_names say
    producer/consumer; the wire values (stage, bottleneck, the stages' keys) are unchanged for scripts."""
    from dataclasses import replace

    from top_fakes import PIPELINE, THREADS

    from dflash_diag.model.stats import stage_names

    renamed = {"target-0": "producer", "target-1": "producer-b", "drafter-0": "worker-0", "drafter-1": "worker-1"}
    threads = tuple(replace(t, name=renamed.get(t.name, t.name)) for t in THREADS)
    frame = make_frame(threads=threads, pipeline=replace(PIPELINE, names=stage_names(threads, queue="q")))
    doc = frame_to_json(frame)
    assert doc["pipeline"]["stage_names"] == {"target": "producer", "drafter": "consumer"}
    assert doc["stages"]["drafter"]["name"] == "consumer" and doc["pipeline"]["bottleneck"] == "drafter"
    assert next(t for t in doc["threads"] if t["name"] == "worker-0")["stage"] == "drafter"
    text = frame_to_text(frame)
    assert "  consumer " in text and "(bottleneck: consumer)" in text
    assert "worker-0" in text and " drafter " not in text.split("THREADS")[1].split("GPUS")[0]
