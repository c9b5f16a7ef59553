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
