"""The wait-for graph on real processes: a lock-order deadlock, a three-stage pipeline starved two queues up, a
lost wake-up and a buffer that keeps every batch, each diagnosed by `doctor` attached from outside (and the
deadlock also under `dflash-diag run`); plus the pieces the graph stands on (locks read off the code on disk,
the RSS slope, the registry that refuses an undeclared finding)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dflash_diag.analysis import analyse as analyse_window
from dflash_diag.analysis.waits import POOL_FUTURES
from dflash_diag.cli import main
from dflash_diag.snapshot.bundle import load_observation

REPO = Path(__file__).resolve().parents[2]
CHILD = REPO / "tests" / "fixtures" / "cpu" / "waits_child.py"
READY_TIMEOUT_S = 60.0


def _start(tmp_path: Path, mode: str, *, probes: bool = False) -> subprocess.Popen[str]:
    argv = [sys.executable, str(CHILD), mode]
    if probes:
        argv = [sys.executable, "-m", "dflash_diag", "run", "--", *argv]
    env = {"PYTHONPATH": str(REPO), "DFLASH_DIAG_BOARD_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.strip() == "READY":
            return proc
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"{mode}: not ready: {proc.stderr.read() if proc.stderr else ''}")


def _pid(proc: subprocess.Popen[str], probes: bool) -> int:
    if not probes:
        return proc.pid
    out = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


@pytest.fixture
def program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    started: list[subprocess.Popen[str]] = []
    monkeypatch.setenv("DFLASH_DIAG_BOARD_DIR", str(tmp_path))

    def start(mode: str, probes: bool = False) -> int:
        proc = _start(tmp_path, mode, probes=probes)
        started.append(proc)
        return _pid(proc, probes)

    yield start
    for proc in started:
        # The program and, under `dflash-diag run`, the run process that started it: one session, one group.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)


def _doctor(pid: int, capsys: pytest.CaptureFixture[str], duration_s: str = "2.5") -> dict[str, Any]:
    assert main(["doctor", str(pid), "--duration", duration_s, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _ids(report: dict[str, Any]) -> dict[str, str]:
    return {f["rule_id"]: f["severity"] for f in report["findings"]}


@pytest.mark.slow
@pytest.mark.parametrize("probes", [False, True], ids=["outside", "probes"])
def test_a_lock_order_deadlock_is_a_critical_headline_naming_both_threads_and_lines(
        program: Any, capsys: pytest.CaptureFixture[str], probes: bool) -> None:
    report = _doctor(program("deadlock", probes), capsys)
    headline = report["headline"]
    assert headline["rule_id"] == "deadlock" and headline["severity"] == "critical", headline
    assert "books-writer" in headline["text"] and "auditor" in headline["text"]
    acquire = 1 + CHILD.read_text().splitlines().index("            with other.lock:")
    assert "Ledger.lock" in headline["text"] and f"waits_child.py:{acquire}" in headline["text"]
    waits = report["waits"]
    assert waits["status"] == "ok" and waits["progress"] is False
    assert sorted(waits["cycle"]) == ["auditor", "books-writer"]
    # One report never contradicts itself: a deadlocked pipeline has no bottleneck stage.
    assert report["phase"] == "hung" and report["pipeline"]["bottleneck"] == "hung"
    assert not any(f["rule_id"].startswith("pipeline-bottleneck") for f in report["findings"])


@pytest.mark.slow
def test_starvation_two_queues_upstream_names_the_loader_not_the_stage_next_door(
        program: Any, capsys: pytest.CaptureFixture[str]) -> None:
    report = _doctor(program("upstream"), capsys)
    headline = report["headline"]
    assert headline["rule_id"] == "wait-chain", headline
    chain = report["waits"]["chain"]
    assert chain[0]["threads"] == ["MainThread"] and chain[0]["waits"]["target"] == "feats"
    assert chain[-1]["threads"] == ["loader"] and chain[-1]["waits"] is None
    assert "decode (waits_child.py:" in chain[-1]["hot"] and "decode (waits_child.py:" in headline["text"]
    assert not any(f["rule_id"].startswith("pipeline-bottleneck") for f in report["findings"])


@pytest.mark.slow
def test_a_lost_wakeup_is_a_stall_not_a_healthy_process(program: Any, capsys: pytest.CaptureFixture[str]) -> None:
    report = _doctor(program("condition"), capsys)
    assert report["headline"]["rule_id"] == "stalled" and report["headline"]["severity"] == "critical"
    assert "worker waits on a Condition" in report["headline"]["text"]


@pytest.mark.slow
def test_a_buffer_that_keeps_every_batch_is_growth_with_a_projection_said_as_warm_up_in_the_first_minute(
        program: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """A few seconds old, the program's steady growth is said with its rate and projection, as information: in the
    first minute a leak and a cache filling up look alike (tests/casebook's leaks are diagnosed past it)."""
    report = _doctor(program("growth"), capsys, duration_s="3")
    finding = next(f for f in report["findings"] if f["rule_id"] == "host-memory-growth")
    assert "RSS +" in finding["claim"] and "is gone in" in finding["claim"]
    assert finding["severity"] == "info" and "first" in finding["claim"] and "without bound" not in finding["claim"]
    slope = next(e["value"] for e in finding["evidence"] if e["name"] == "RSS slope")
    assert 8.0 <= float(slope.split()[0]) <= 40.0  # the program keeps 2 MiB every 0.1 s: ~21 MB/s
    # Where the time goes is said too, as information.
    where = next(f for f in report["findings"] if f["rule_id"] == "where-time-goes")
    assert where["severity"] == "info" and "MainThread" in where["claim"] and where["because"] == []
    assert not any(f["severity"] in ("warning", "critical") for f in report["findings"])


@pytest.mark.slow
def test_a_wait_on_a_worker_process_follows_into_it_and_names_its_hot_function(
        program: Any, capsys: pytest.CaptureFixture[str]) -> None:
    report = _doctor(program("pool"), capsys, duration_s="3")
    chain = report["waits"]["chain"]
    assert chain[0]["threads"] == ["MainThread"] and chain[0]["waits"]["kind"] == "child"
    assert "workers.apply(warp_rows" in chain[0]["waits"]["target"]
    assert chain[-1]["threads"][0].startswith("child process ") and "warp_rows (waits_child.py:" in chain[-1]["hot"]
    assert report["headline"]["rule_id"] == "wait-chain" and "warp_rows (waits_child.py:" in report["headline"]["text"]


# --- the pieces -------------------------------------------------------------------------------------------


def test_locks_held_and_wanted_are_read_off_the_code_on_disk(tmp_path: Path) -> None:
    from dflash_diag.model import Frame, StackSample, ThreadSample
    from dflash_diag.sources.outside import OutsideReader

    source = tmp_path / "bank.py"
    source.write_text(
        "import threading\n"
        "GLOBAL = threading.Lock()\n"
        "class Bank:\n"
        "    def move(self, other):\n"
        "        with self.lock:\n"
        "            with other.lock:\n"
        "                pass\n"
        "    def audit(self):\n"
        "        GLOBAL.acquire()\n"
        "        with open('x') as fh:\n"
        "            fh.read()\n")
    frames = tuple(Frame(name="Bank.move", filename=str(source), line=n) for n in (5, 6, 7))
    frames += (Frame(name="Bank.audit", filename=str(source), line=9), Frame(name="Bank.audit", filename=str(source),
                                                                            line=11))
    sample = StackSample(pid=1, monotonic_s=0.0, wall_s=0.0, duration_s=0.0, native=False, threads=(
        ThreadSample(thread_id=1, os_thread_id=1, name="t", active=False, owns_gil=False, frames=frames),))
    code, _ = OutsideReader(1).code_facts([sample])
    at = {c.line: c for c in code}
    assert at[5].acquires == "Bank.lock" and at[5].holds == ()
    assert at[6].acquires == "other.lock" and at[6].holds == ("Bank.lock",)
    assert set(at[7].holds) == {"Bank.lock", "other.lock"} and at[7].acquires is None
    assert at[9].acquires == "GLOBAL"
    assert at[11].holds == () and at[11].acquires is None  # `with open(...)` builds an object nobody else holds


def test_queue_calls_of_a_function_leave_out_the_threads_it_defines(tmp_path: Path) -> None:
    """A thread target defined inside main() is not something main calls: main is not a producer of its queue."""
    from dflash_diag.model import Frame, StackSample, ThreadSample
    from dflash_diag.sources.outside import OutsideReader

    source = tmp_path / "pipe.py"
    source.write_text("def main(q, out):\n    def feeder():\n        q.put(1)\n    return out.get()\n")
    frame = Frame(name="main", filename=str(source), line=4)
    sample = StackSample(pid=1, monotonic_s=0.0, wall_s=0.0, duration_s=0.0, native=False, threads=(
        ThreadSample(thread_id=1, os_thread_id=1, name="t", active=False, owns_gil=False, frames=(frame,)),))
    code, _ = OutsideReader(1).code_facts([sample])
    assert code[0].queue_calls == ("out.get",)


def test_rss_slope_and_the_growth_rule_on_readings() -> None:
    from dflash_diag.analysis.findings import resources
    from dflash_diag.model import ProcessSample

    mib = 1024 * 1024
    growing = [ProcessSample(monotonic_s=t * 0.5, rss_bytes=int((500 + 14 * t) * mib), threads=4, open_fds=9,
                             host_available_bytes=8 * 1024 * mib) for t in range(10)]
    assert resources.rss_slope_bytes_per_s(growing) == pytest.approx(28 * mib)
    flat = [ProcessSample(monotonic_s=t * 0.5, rss_bytes=(500 + (t % 2)) * mib, threads=4, open_fds=9)
            for t in range(10)]

    (finding,) = _growth(growing)
    assert finding.severity.label == "warning" and "gone in 5 min" in finding.claim
    assert _growth(flat) == []


def _growth(readings: list[Any], age_s: float | None = None) -> list[Any]:
    from dflash_diag.analysis.findings import resources

    ctx = SimpleNamespace(obs=SimpleNamespace(resources=tuple(readings)), threads=(), process_age_s=lambda: age_s)
    return list(resources.check(ctx))  # type: ignore[arg-type]


def _rss_series(rss_mib: Any, *, every_s: float = 0.25, n: int = 21) -> list[Any]:
    from dflash_diag.model import ProcessSample

    return [ProcessSample(monotonic_s=i * every_s, rss_bytes=int(rss_mib(i * every_s) * 1024 * 1024), threads=6,
                          open_fds=9, host_available_bytes=8 * 2**30) for i in range(n)]


def test_growth_that_levels_off_is_a_cache_filling_up_not_a_leak() -> None:
    """A cache filling at 40 MB/s that slows to a crawl within the window (warm-up's shape): no finding at any
    age; the same start kept up (a leak) is one."""
    import math

    levelling = _rss_series(lambda t: 400 + 120 * (1 - math.exp(-t / 1.2)))
    steady = _rss_series(lambda t: 400 + 40 * t)
    assert _growth(levelling, age_s=600.0) == [] and _growth(levelling) == []
    (leak,) = _growth(steady, age_s=600.0)
    assert leak.severity.label == "warning" and "grows without bound" in leak.claim
    assert any(name == "slope, earlier -> later half" for name, _ in leak.evidence)


def test_memory_freed_then_taken_again_is_not_steady_growth() -> None:
    """A step's peak freed early in the window and taken again: most readings rise and the window's slope is up,
    but its earlier half falls. Not a leak; the same rise without the fall is one."""
    dip = _rss_series(lambda t: 640 - 100 * t if t < 1.0 else 500 + 40 * t)  # 16 of 20 changes rising
    assert _growth(dip, age_s=600.0) == []
    assert len(_growth(_rss_series(lambda t: 500 + 40 * t), age_s=600.0)) == 1


def test_steady_growth_in_the_first_minute_is_information_until_warm_up_ends() -> None:
    """The healthy control's false warning: its first minute filled caches at a steady pace. In the first minute the
    growth is said (information, with when to look again); past it, the same pace is the warning."""
    steady = _rss_series(lambda t: 400 + 40 * t)
    (young,) = _growth(steady, age_s=20.0)
    assert young.severity.label == "info" and "first 20 s" in young.claim and "without bound" not in young.claim
    (old,) = _growth(steady, age_s=95.0)
    assert old.severity.label == "warning" and "without bound" in old.claim


def test_read_process_reads_this_process() -> None:
    import os

    from dflash_diag.sources.procfs import read_process

    sample = read_process(os.getpid())
    assert sample.rss_bytes is not None and sample.rss_bytes > 10 * 1024 * 1024
    assert sample.threads is not None and sample.threads >= 1 and sample.open_fds is not None
    gone = read_process(2**22 + 7)  # above pid_max: no such process
    assert gone.rss_bytes is None and gone.threads is None and gone.open_fds is None


def test_a_finding_its_family_did_not_declare_is_a_rule_error_not_a_finding() -> None:
    from dflash_diag.analysis.findings import RuleSpec, run_families
    from dflash_diag.model import Finding, Severity
    from dflash_diag.model.findings import SYMPTOM

    def check(ctx: Any) -> Iterator[Finding]:
        yield Finding(rule_id="declared", severity=Severity.WARNING, claim="x", evidence=(), remedy="y")
        yield Finding(rule_id="not-declared", severity=Severity.WARNING, claim="x", evidence=(), remedy="y")
        yield Finding(rule_id="wrong-kind", severity=Severity.WARNING, claim="x", evidence=(), remedy="y")

    family = SimpleNamespace(check=check, RULES=(RuleSpec("declared"), RuleSpec("wrong-kind", kind=SYMPTOM)))
    out = run_families(None, (("planted", family),))  # type: ignore[arg-type]
    assert sorted(f.rule_id for f in out) == ["declared", "rule-error", "rule-error"]
    assert any("not-declared" in f.evidence[0][1] for f in out if f.rule_id == "rule-error")


def test_the_causal_sets_come_from_the_declarations() -> None:
    from dflash_diag.analysis import causal
    from dflash_diag.analysis.findings import REGISTRY

    assert "wait-chain" in causal.SUPERSEDES and "pipeline-bottleneck-target" in causal.SUPERSEDES["wait-chain"]
    assert {"pipeline-hang", "stalled", "deadlock"} <= causal.HALTS
    assert causal.ROOT_CAUSES == {"alloc-churn": frozenset({"alloc-empty-cache"}),
                                  "gil-contention": frozenset({"gil-switch-interval", "cpu-oversubscribed",
                                                               "cpu-pool-spin", "setting-slows-code",
                                                               "compile-disabled", "changed-value-at-hot-call"}),
                                  "process-wait": frozenset({"malloc-debug", "changed-value-at-process-wait"})}
    assert causal.NOT_SLOWDOWNS == {s.id for s in REGISTRY.values() if not s.slows}
    assert "thread-died" in causal.EXPLAINS_HANG and "stalled" in causal.EXPLAINS_HANG["thread-died"]
    # The plain statement of where time goes takes only the cause that declares it.
    assert "where-time-goes" in causal.UNLINKED
    assert {c for c, s in causal.EXPLAINS_HANG.items() if "where-time-goes" in s} == {"changed-value-at-hot-call",
                                                                                  "library-argument-at-hot-code"}


def test_a_wait_on_a_thread_pools_futures_is_followed_to_its_workers() -> None:
    # The casebook's fraud program: the trainer collects its featurizers' futures (Future.result parks in threading's
    # Condition.wait); the path goes on to the pool's worker threads, and the root says where their time goes.
    recorded = Path(__file__).resolve().parents[1] / "casebook" / "observations"
    obs = load_observation(str(recorded / "settings11_fraud__probes.json.gz"))
    chain = analyse_window(obs).waits.chain
    assert chain[0].threads == ("MainThread",) and chain[0].edge is not None
    assert chain[0].edge.target == POOL_FUTURES and chain[0].edge.share >= 0.5
    assert set(chain[1].threads) == {"featurizer-0_0", "featurizer-1_0"} and chain[1].edge is None
    assert "JsonLinesExporter.export (telemetry.py:34)" in chain[1].hot
