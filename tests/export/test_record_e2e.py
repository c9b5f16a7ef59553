"""`dflash-diag record` on the real tiny trainer: a valid Perfetto/Chrome trace and speedscope profile, written
by the snapshot's file-output rules."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
from trace_format import strict_json, validate_speedscope, validate_trace

from dflash_diag.cli import main
from dflash_diag.errors import ExitCode

pytestmark = pytest.mark.slow


def _record(trainer, out: Path, *extra: str) -> int:
    return main(["record", str(trainer.pid), "--duration", "2.5", "-o", str(out), "--board-dir", str(trainer.board_dir),
                 "--json", *extra])


def test_trace_of_the_tiny_trainer_opens_in_perfetto(trainer, tmp_path: Path, capsys) -> None:
    out = tmp_path / "trace.json"
    assert _record(trainer, out) == ExitCode.OK
    summary = json.loads(capsys.readouterr().out)
    assert summary["path"] == str(out) and summary["stack_samples"] > 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    doc = strict_json(out.read_bytes())
    assert validate_trace(doc) == []
    events = doc["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "target-0 [target]" in threads.values() and "drafter-0 [drafter]" in threads.values()
    for name in ("target-0 [target]", "drafter-0 [drafter]"):
        tid = next(t for t, n in threads.items() if n == name)
        assert any(e["ph"] == "X" and e["tid"] == tid and e["cat"] == "state" for e in events)
        assert any(e["ph"] == "X" and e["tid"] == tid and e["cat"] == "frame" for e in events)
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert {"q_hs depth", "tok/s"} <= counters
    assert doc["otherData"]["pid"] == trainer.pid and doc["otherData"]["generator"] == "dflash-diag"
    assert not list(tmp_path.glob(".dflash-diag-tmp-*"))  # nothing left behind


def test_speedscope_of_the_tiny_trainer_matches_the_schema(trainer, tmp_path: Path, capsys) -> None:
    out = tmp_path / "stacks.speedscope.json"
    assert _record(trainer, out, "--format", "speedscope") == ExitCode.OK
    doc = strict_json(out.read_bytes())
    assert validate_speedscope(doc) == []
    assert any(p["name"].startswith("drafter-0") for p in doc["profiles"])


def test_output_rules_hold_before_any_sampling(trainer, tmp_path: Path, capsys) -> None:
    foreign = tmp_path / "notes.json"
    foreign.write_text('{"traceEvents": [], "mine": true}')
    t0 = time.monotonic()
    assert _record(trainer, foreign) == ExitCode.EXISTS
    assert _record(trainer, foreign, "--force") == ExitCode.UNSAFE_OUTPUT  # not written by dflash-diag
    assert foreign.read_text() == '{"traceEvents": [], "mine": true}'
    link = tmp_path / "link.json"
    link.symlink_to(foreign)
    assert _record(trainer, link, "--force") == ExitCode.UNSAFE_OUTPUT
    assert _record(trainer, tmp_path / "missing-dir" / "t.json") == ExitCode.CANNOT_WRITE
    assert _record(trainer, Path(os.getcwd())) == ExitCode.UNSAFE_OUTPUT
    assert time.monotonic() - t0 < 2.5 * 3  # refused up front, not after sampling each time
    err = capsys.readouterr().err
    assert "pass --force" in err and "not a trace dflash-diag wrote" in err and "Traceback" not in err
    assert all(line.startswith("dflash-diag record: error: ") for line in err.strip().splitlines())


def test_force_replaces_our_own_trace(trainer, tmp_path: Path, capsys) -> None:
    out = tmp_path / "trace.json"
    assert _record(trainer, out) == ExitCode.OK
    first = out.read_bytes()
    assert _record(trainer, out, "--force") == ExitCode.OK
    assert out.read_bytes() != first and validate_trace(strict_json(out.read_bytes())) == []


def test_kernels_of_the_tiny_trainer_share_one_timeline_with_its_states(trainer, tmp_path: Path, capsys) -> None:
    """`record --kernels`: torch.profiler started inside the running trainer (ptrace injector) for 2 optimizer steps;
    its CPU ops on the training threads' own tracks, our sampled states beside them, the probes' counters."""
    from dflash_diag.inject.method import ptrace_helper, ptrace_unsupported

    if ptrace_helper() is None:
        pytest.skip(ptrace_unsupported())
    out = tmp_path / "kernels.json"
    assert main(["record", "--kernels", str(trainer.pid), "--steps", "2", "--method", "ptrace", "-o", str(out),
                 "--board-dir", str(trainer.board_dir), "--json"]) == ExitCode.OK
    summary = json.loads(capsys.readouterr().out)
    assert summary["reason"] == "steps" and summary["steps"] >= 2 and summary["host_spans"] > 1000
    assert summary["clock"]["method"] == "marks" and summary["clock"]["uncertainty_us"] < 1000
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    doc = strict_json(out.read_bytes())
    assert validate_trace(doc) == []
    events = doc["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    for thread in ("target-0 [target]", "drafter-0 [drafter]"):
        tid = next(t for t, n in names.items() if n == thread)
        assert any(e.get("cat") == "cpu_op" and e["tid"] == tid for e in events)  # torch's ops of that thread
        sampled = next(t for t, n in names.items() if n == f"{thread} · sampled")
        assert any(e.get("cat") == "state" and e["tid"] == sampled for e in events)  # our states beside them
    drafter = next(t for t, n in names.items() if n == "drafter-0 [drafter]")
    assert any(e.get("cat") == "step" and e["tid"] == drafter for e in events)  # its optimizer steps
    assert {"q_hs depth", "tok/s"} <= {e["name"] for e in events if e["ph"] == "C"}  # the probes' counters
    assert doc["otherData"]["kernels"]["reason"] == "steps" and doc["otherData"]["kernels"]["left_out"] == 0
    assert not [p for p in trainer.board_dir.iterdir() if ".trace.json" in p.name or ".kernels" in p.name]
