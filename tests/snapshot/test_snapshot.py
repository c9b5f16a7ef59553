"""`dflash-diag snapshot` on real processes: bundle contents, redaction, --force, permissions, hung and dying."""

from __future__ import annotations

import json
import os
import signal
import stat
import tarfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from conftest_snapshot import API_KEY, SECRETS, TOKEN, Spawn

from dflash_diag.cli import main
from dflash_diag.errors import ExitCode
from dflash_diag.observe import Target, Window
from dflash_diag.snapshot import take_snapshot
from tests.export.trace_format import strict_json, validate_trace


def _extract(bundle: Path, into: Path) -> Path:
    with tarfile.open(bundle) as tar:
        tar.extractall(into, filter="data")
    (top,) = list(into.iterdir())
    return top


def _doc(top: Path) -> dict[str, Any]:
    return json.loads((top / "snapshot.json").read_text())


@pytest.mark.slow
def test_bundle_has_every_part_and_no_secret(spawn: Spawn, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    child = spawn("--probes", "--threads", "3", f"--api-key={API_KEY}", "--token", TOKEN, env=SECRETS)
    out = tmp_path / "report.tar.gz"
    assert main(["snapshot", str(child.pid), "-o", str(out), "--duration", "1"]) == ExitCode.OK
    assert f"wrote {out}" in capsys.readouterr().out
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    top = _extract(out, tmp_path / "x")
    names = {p.name for p in top.iterdir()}
    assert names == {"report.md", "snapshot.json", "stacks.txt", "board.json", "nvml.json", "timeline.svg", "trace.json",
                     "observation.json", "MANIFEST.json"}

    # Redaction: no planted value anywhere in the extracted bundle, in any file.
    planted = [*SECRETS.values(), API_KEY, TOKEN]
    for path in top.iterdir():
        text = path.read_text(errors="replace")
        for secret in planted:
            assert secret not in text, f"{secret!r} leaked into {path.name}"
    doc = _doc(top)
    assert doc["schema"] == "dflash-diag.snapshot/2", doc["missing"]
    assert doc["board"] is not None, doc["missing"]
    assert doc["env"]["WANDB_API_KEY"] == "<redacted>" and doc["env"]["HF_TOKEN"] == "<redacted>"
    assert "--api-key=<redacted>" in doc["process"]["argv"]
    assert doc["config"]["use_reentrant"] is False and doc["config"]["api_key"] == "<redacted>"

    # Stacks of all threads with native frames, thread states, the board, versions, code hashes.
    stacks = (top / "stacks.txt").read_text()
    assert "with native frames" in stacks and "(native)" in stacks
    for name in ("target-0", "target-2", "drafter-2", "MainThread"):
        assert f'"{name}"' in stacks
    assert {t["name"] for t in doc["threads"]} >= {"target-0", "drafter-0"}
    assert json.loads((top / "board.json").read_text())["probes"]["queues"]["status"] == "ok"
    assert doc["versions"]["python"].startswith("3.")
    assert "pipeline_child.py" in doc["code"]["files"]
    ET.fromstring((top / "timeline.svg").read_text())  # well-formed SVG
    trace = strict_json((top / "trace.json").read_bytes())  # the same timeline `dflash-diag record` writes
    assert validate_trace(trace) == [] and trace["otherData"]["pid"] == child.pid
    assert any(e["ph"] == "X" and e["cat"] == "state" for e in trace["traceEvents"])
    report = (top / "report.md").read_text()
    assert report.index("## Findings") < report.index("## Versions") < report.index("## Threads and their states")


@pytest.mark.slow
def test_refuses_to_overwrite_without_force(spawn: Spawn, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    child = spawn()
    out = tmp_path / "exists.tar.gz"
    out.write_text("keep me")
    assert main(["snapshot", str(child.pid), "-o", str(out)]) == ExitCode.EXISTS
    assert "--force" in capsys.readouterr().err
    assert out.read_text() == "keep me"
    assert main(["snapshot", str(child.pid), "-o", str(out), "--force", "--duration", "0.5"]) == ExitCode.UNSAFE_OUTPUT
    assert out.read_text() == "keep me"  # --force replaces only a bundle dflash-diag wrote (test_output_safety.py)
    out.unlink()
    for _ in range(2):  # written, then replaced by --force
        assert main(["snapshot", str(child.pid), "-o", str(out), "--force", "--duration", "0.5"]) == ExitCode.OK
    assert tarfile.is_tarfile(out) and stat.S_IMODE(out.stat().st_mode) == 0o600


@pytest.mark.slow
def test_directory_form_is_private(spawn: Spawn, tmp_path: Path) -> None:
    child = spawn()
    out = tmp_path / "bundle"
    assert main(["snapshot", str(child.pid), "--dir", "-o", str(out), "--duration", "0.5"]) == ExitCode.OK
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in out.iterdir())
    assert _doc(out)["pid"] == child.pid


@pytest.mark.slow
def test_hung_process_still_gives_a_report(spawn: Spawn, tmp_path: Path) -> None:
    child = spawn()
    os.kill(child.pid, signal.SIGSTOP)  # hung: py-spy cannot suspend it for native frames, /proc still reads
    t0 = time.monotonic()
    result = take_snapshot(Target(child.pid), output=tmp_path / "hung.tar.gz", window=Window(0.5))
    assert time.monotonic() - t0 < 20.0
    top = _extract(result.path, tmp_path / "x")
    stacks = (top / "stacks.txt").read_text()
    doc = _doc(top)
    assert '"target-0"' in stacks and '"drafter-0"' in stacks, doc["missing"]
    assert any(m["what"] == "native frames" for m in doc["missing"])
    assert "## Missing from this report" in (top / "report.md").read_text()


@pytest.mark.slow
def test_process_dying_mid_snapshot_writes_what_it_got(spawn: Spawn, tmp_path: Path) -> None:
    child = spawn()
    killer = threading.Timer(0.4, lambda: os.kill(child.pid, signal.SIGKILL))
    killer.start()
    try:
        result = take_snapshot(Target(child.pid), output=tmp_path / "dying.tar.gz", window=Window(3.0), deadline_s=5.0)
    finally:
        killer.cancel()
    child.wait(timeout=30)
    assert not result.alive_at_end
    doc = _doc(_extract(result.path, tmp_path / "x"))
    assert doc["process"]["alive_at_end"] is False
    rule_ids = {f["rule_id"] for f in doc["findings"]}
    # Either the window saw the exit, or a source failed because of it: both are said, neither is silent.
    assert "process-exited" in rule_ids or doc["missing"]
    assert "alive at the end of the snapshot: False" in (result.path.parent / "x").joinpath(
        result.path.name[: -len(".tar.gz")], "report.md").read_text()


def test_no_such_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot", "4194301", "-o", str(tmp_path / "x.tar.gz")]) == ExitCode.NO_PROCESS
    assert not (tmp_path / "x.tar.gz").exists()
    assert capsys.readouterr().err.count("\n") == 1


def test_bad_output_name_is_a_usage_error(tmp_path: Path) -> None:
    assert main(["snapshot", str(os.getpid()), "-o", str(tmp_path / "x.zip")]) == ExitCode.USAGE


def test_not_a_python_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import subprocess

    proc = subprocess.Popen(["sleep", "30"])
    try:
        code = main(["snapshot", str(proc.pid), "-o", str(tmp_path / "x.tar.gz")])
    finally:
        proc.kill()
        proc.wait()
    assert code == ExitCode.NOT_PYTHON
    assert not (tmp_path / "x.tar.gz").exists()
