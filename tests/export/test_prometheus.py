"""`dflash-diag export`: the real HTTP endpoint on localhost, scraped in both exposition formats, while
probed processes come and go; and the Grafana dashboard only charts metrics the exporter serves."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from dflash_contract.readings import CATALOGUE
from dflash_diag.export.prometheus import program_of, prometheus_name

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "docs" / "grafana-dashboard.json"
SIDE_PROGRAM = """
import probes, queue, sys, time
s = probes.start(probes.ProbesConfig(enabled=frozenset({"queues"}), publish_interval_s=0.2, timer_interval_s=0.2))
q = s.watch_queue("jobs", queue.Queue(maxsize=3))
q.put(1); q.put(2)
s.set_app(name="side-job", step=7)
print("ready", flush=True)
time.sleep(120)
"""


def _start_exporter(board_dir: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "dflash_diag", "export", "--port", "0", "--no-gpu",
                             "--board-dir", str(board_dir), *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    match = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", line)
    assert match, (line, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
    return proc, f"http://127.0.0.1:{match.group(1)}/metrics"


def _scrape(url: str, openmetrics: bool = False) -> tuple[str, str]:
    headers = {"Accept": "application/openmetrics-text; version=1.0.0"} if openmetrics else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
        return response.headers.get("Content-Type", ""), response.read().decode()


def _samples(text: str, openmetrics: bool = False) -> dict[str, list]:
    families = (parse_openmetrics if openmetrics else parse_text)(text)
    out: dict[str, list] = {}
    for family in families:
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


@pytest.fixture
def side_program(trainer) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "DFLASH_DIAG_BOARD_DIR": str(trainer.board_dir)}
    proc = subprocess.Popen([sys.executable, "-c", SIDE_PROGRAM], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


def _wait_for(predicate, timeout_s: float = 20.0):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.3)


@pytest.mark.slow
def test_all_follows_processes_as_they_come_and_go(trainer, side_program) -> None:
    exporter, url = _start_exporter(trainer.board_dir, "--all")
    try:
        content_type, text = _scrape(url)
        assert content_type.startswith("text/plain")
        samples = _samples(text)
        pids = {s.labels["pid"] for s in samples["dflash_up"] if s.value == 1}
        assert pids == {str(trainer.pid), str(side_program.pid)}
        depth = {s.labels["pid"]: s for s in samples["dflash_queue_depth"]}
        assert depth[str(trainer.pid)].labels["queue"] == "q_hs" and depth[str(trainer.pid)].labels["program"] == "reference_trainer"
        assert depth[str(side_program.pid)].labels["queue"] == "jobs" and depth[str(side_program.pid)].value == 2
        assert depth[str(side_program.pid)].labels["program"] == "side-job"
        assert any(s.labels["pid"] == str(trainer.pid) and s.value > 0 for s in samples["dflash_app_tokens_per_second"])
        assert any(s.labels["pid"] == str(trainer.pid) for s in samples["dflash_queue_put_blocked_ratio"])
        assert any(s.labels["pid"] == str(trainer.pid) for s in samples["dflash_checkpoint_non_reentrant_calls_total"])
        # the side program dies without cleaning up (SIGKILL): its left-over board is refused, its series go
        side_program.send_signal(signal.SIGKILL)
        side_program.wait(timeout=30)
        gone = _wait_for(lambda: str(side_program.pid) not in {s.labels["pid"] for s in _samples(_scrape(url)[1])["dflash_up"]})
        assert gone
        after = _samples(_scrape(url)[1])
        assert {s.labels["pid"] for s in after["dflash_queue_depth"]} == {str(trainer.pid)}
        refused = {s.labels["outcome"]: s.value for s in after["dflash_exporter_boards"]}
        # its left-over board is recognised as stale (dead PID) and cleaned up by the listing (docs/board.md)
        assert refused.get("read") == 1.0 and refused.get("refused", 0.0) == 0.0, refused
        assert not (trainer.board_dir / f"{side_program.pid}.json").exists()
        # OpenMetrics, when the scraper asks for it
        content_type, om_text = _scrape(url, openmetrics=True)
        assert content_type.startswith("application/openmetrics-text") and om_text.rstrip().endswith("# EOF")
        om = _samples(om_text, openmetrics=True)
        assert any(s.labels["pid"] == str(trainer.pid) for s in om["dflash_queue_depth"])
        assert "dflash_compile_recompiles_total" in om
    finally:
        exporter.send_signal(signal.SIGTERM)
        assert exporter.wait(timeout=30) == 0


@pytest.mark.slow
def test_named_pids_report_up_and_down(trainer, tmp_path: Path) -> None:
    exporter, url = _start_exporter(trainer.board_dir, str(trainer.pid), "999999")
    try:
        up = {s.labels["pid"]: (s.value, s.labels["reason"]) for s in _samples(_scrape(url)[1])["dflash_up"]}
        assert up == {str(trainer.pid): (1.0, ""), "999999": (0.0, "exited")}
    finally:
        exporter.send_signal(signal.SIGINT)
        assert exporter.wait(timeout=30) == 0


def test_bad_invocations_are_one_line_errors(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = lambda *a: subprocess.run([sys.executable, "-m", "dflash_diag", "export", *a], env=env,  # noqa: E731
                                    capture_output=True, text=True, timeout=60)
    both = run("--port", "0", "--all", "123")
    assert both.returncode == 2 and "give PIDs or --all" in both.stderr
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = run("--port", str(taken.getsockname()[1]), "--all", "--board-dir", str(tmp_path))
    assert busy.returncode == 2 and "is in use" in busy.stderr and "Traceback" not in busy.stderr


def test_names_follow_prometheus_conventions() -> None:
    assert prometheus_name("gil_wait_p99_ms") == ("dflash_gil_wait_p99_seconds", 1e-3)
    assert prometheus_name("queue_put_blocked_share") == ("dflash_queue_put_blocked_ratio", 1.0)
    assert prometheus_name("allocator_device_alloc_per_s") == ("dflash_allocator_device_alloc_per_second", 1.0)
    assert prometheus_name("compile_time_s") == ("dflash_compile_time_seconds", 1.0)
    assert program_of(("python", "-m", "reference_trainer", "--lr", "3")) == "reference_trainer"
    assert program_of(("/usr/bin/python3", "-u", "/home/me/train.py", "--token", "x")) == "train.py"


FULL_PROBES = {
    "queues": {"status": "ok", "q_hs": {"depth": 3, "maxsize": 8, "put_blocked_share": 0.0, "get_blocked_share": 0.4,
                                        "puts_per_s": 2.0, "gets_per_s": 2.5}},
    "gil": {"status": "ok", "wait_mean_ms": 1.5, "wait_p99_ms": 9.0, "contention_share": 0.2},
    "compile": {"status": "ok", "compiles": 4, "recompiles": 2, "graph_breaks": 1, "recompile_limit_hits": 0,
                "failed_compiles": 0, "compile_time_s": 3.5, "compiling_now": False},
    "cudagraphs": {"status": "ok", "captures": 2, "skips": 1, "rerecords": 0, "replays": 50},
    "allocator": {"status": "ok", "empty_cache_calls": 0, "devices": {"0": {
        "device_alloc_per_s": 3.0, "device_free_per_s": 2.0, "alloc_retries": 1, "ooms": 0, "allocated_bytes": 2**29,
        "reserved_bytes": 2**30, "reserved_swing_bytes": 2**20, "fragmentation_share": 0.1}}},
    "checkpoint": {"status": "ok", "calls": {"reentrant": 0, "non_reentrant": 96}, "grad_none_count": 0,
                   "trainable_params": 58, "mixed_modes": False},
    "fastpath": {"status": "ok", "fallback": False},
    "codedrift": {"status": "ok", "stale_count": 0},
    "health": {"status": "ok", "steps": 12, "loss": 2.5, "sample_ms_mean": 0.8, "amp_skipped": 0, "groups": [
        {"group": "AdamW#0/0", "lr": 3e-4, "grad_none": 0, "grad_nonfinite": 0, "update_ratio": 1e-3,
         "stuck_tensors": 0, "stuck_numel": 0, "watched_numel": 4096, "frozen": 2}]},
    "collectives": {"status": "ok", "armed": True, "rank": 1, "entered": 120, "completed": 119, "async_issued": 0,
                    "in_collectives_s": 4.5},
    "syncs": {"status": "ok", "total": 5210, "per_s": 412.5, "top_lines": []},
}


def _full_exporter_output(tmp_path: Path) -> str:
    """What the exporter serves for a board of this (live) process carrying every probe, and one GPU."""
    from prometheus_client import generate_latest

    from dflash_contract.board import BOARD_SCHEMA
    from dflash_diag.export.prometheus import BoardCollector, registry_for
    from dflash_diag.model import NA, GpuSample
    from probes.board_writer import BoardPublisher, writer_identity

    board_dir = tmp_path / "boards"
    board_dir.mkdir(mode=0o700)
    writer = BoardPublisher(board_dir)
    writer.write({"schema": BOARD_SCHEMA, "writer": writer_identity("2.13.0"), "seq": 0, "wall_time_s": time.time(),
                  "interval_s": 1.0, "threads": {}, "probes": FULL_PROBES,
                  "app": {"name": "trainer", "tokens_per_s": 9400.0, "step": 12},
                  "session": {"steps": 12, "step": 12, "publish_cost_ms_mean": 4.0, "publish_errors": 0}})
    na = NA("not read")
    gpu = GpuSample(index=0, name="NVIDIA H200", uuid="GPU-0", util_pct=97.0, mem_util_pct=na,
                    memory_used_bytes=80 * 2**30, memory_total_bytes=na, power_w=na, power_limit_w=na,
                    sm_clock_mhz=na, max_sm_clock_mhz=na, temperature_c=na, throttle_reasons=(), processes=na,
                    monotonic_s=0.0)
    collector = BoardCollector([os.getpid()], board_dir=str(board_dir), gpus=lambda: (gpu,))
    return generate_latest(registry_for(collector)).decode()


def test_every_catalogued_reading_is_served(tmp_path: Path) -> None:
    samples = _samples(_full_exporter_output(tmp_path))
    for name, (kind, labels, _) in CATALOGUE.items():
        series = prometheus_name(name)[0] + ("_total" if kind == "counter" else "")
        assert series in samples, series
        assert all(set(s.labels) == {"pid", "program", "hostname", *labels} for s in samples[series])
    assert samples["dflash_gil_wait_p99_seconds"][0].value == pytest.approx(0.009)
    assert samples["dflash_gpu_utilization_ratio"][0].value == pytest.approx(0.97)


def test_grafana_dashboard_charts_only_exported_metrics(tmp_path: Path) -> None:
    served = set(_samples(_full_exporter_output(tmp_path)))
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["panels"] and dashboard.get("title")
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 8
    used = {m for expr in exprs for m in re.findall(r"\b(dflash_[a-z0-9_]+)", expr)}
    assert used and used <= served, used - served
    # the headline readings are on it
    assert {"dflash_queue_depth", "dflash_app_tokens_per_second", "dflash_gpu_utilization_ratio",
            "dflash_checkpoint_grad_none_params", "dflash_compile_recompiles_total"} <= used
    variables = {v["name"] for v in dashboard.get("templating", {}).get("list", [])}
    assert {"datasource", "program", "pid"} <= variables
