"""Every command that takes a PID, on one real torchrun job (2 ranks, gloo, a DataLoader worker each) started under
`dflash-diag run`: doctor from `run`'s own PID, top --batch, snapshot, record and export --job see the whole job,
and the probes reached every rank but not the launcher (docs/jobs.md); the job's observation, saved by doctor or
carried by its bundle, is judged again offline with the same report (docs/observations.md)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from dflash_diag.sources.procfs import all_children

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "tests" / "casebook" / "programs" / "ddp_healthy"
CLI = [sys.executable, "-m", "dflash_diag"]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def _tree(pid: int) -> list[int]:
    out, level = [], [pid]
    while level:
        level = [c for p in level for c in all_children(p)]
        out += level
    return out


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int, dict[str, str], Path]]:
    """(run's PID, the launcher's PID, the environment, a directory to write in)."""
    work = tmp_path_factory.mktemp("job")
    boards = work / "boards"
    boards.mkdir(mode=0o700)
    env = {**os.environ, "DFLASH_DIAG_BOARD_DIR": str(boards), "PYTHONUNBUFFERED": "1"}
    log = work / "out.log"
    with log.open("wb") as out:
        run = subprocess.Popen([*CLI, "run", "--", sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
                                "2", "fit.py"], cwd=PROGRAM, env=env, stdout=out, stderr=out, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while "step 50 " not in log.read_text(errors="replace"):
            assert run.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")[-2000:]
            time.sleep(0.5)
        text = log.read_text(errors="replace")
        launcher = int(re.search(r"dflash-diag run: PID (\d+) under probes \(all\): a launcher of ranks", text)[1])
        yield run.pid, launcher, env, work
    finally:
        for pid in [run.pid, *_tree(run.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        run.wait(timeout=30)


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=120)


def test_doctor_from_runs_own_pid_sees_both_ranks_under_probes(job: tuple[int, int, dict[str, str], Path]) -> None:
    run_pid, launcher, env, work = job
    saved = work / "job-observation.json"
    out = _cli(env, "doctor", str(run_pid), "--json", "--duration", "3", "--save-observation", str(saved))
    assert out.returncode == 0, out.stderr
    # The job's observation (every rank's window), judged again offline: the same report, byte for byte.
    replayed = _cli(env, "doctor", "--replay", str(saved), "--json")
    assert replayed.returncode == 0 and replayed.stdout == out.stdout, replayed.stderr
    report = json.loads(out.stdout)
    ranks = report["job"]["ranks"]
    assert report["job"]["launcher_pid"] == launcher and [r["rank"] for r in ranks] == [0, 1]
    assert all(r["probe"] is not None and r["probe"]["backend"] == "gloo" for r in ranks)
    assert all(r["workers"] >= 1 for r in ranks)  # each rank's DataLoader worker was sampled beside it
    assert not [f for f in report["findings"] if f["severity"] in ("warning", "critical")], report["headline"]
    boards = {p.name for p in Path(env["DFLASH_DIAG_BOARD_DIR"]).iterdir()}
    assert f"{launcher}.json" not in boards and {f"{r['pid']}.json" for r in ranks} <= boards


def test_top_batch_snapshot_record_and_export_take_the_job(job: tuple[int, int, dict[str, str], Path]) -> None:
    run_pid, launcher, env, work = job
    top = _cli(env, "top", "--pid", str(launcher), "--batch", "--json", "--duration", "2")
    assert top.returncode == 0, top.stderr
    doc = json.loads(top.stdout)
    assert doc["kind"] == "job" and len(doc["ranks"]) == 2 and all(r["frame"]["threads"] for r in doc["ranks"])

    rank1 = doc["job"]["ranks"][1]["pid"]
    snap = _cli(env, "snapshot", str(rank1), "-o", str(work / "job.tar.gz"), "--json")
    assert snap.returncode == 0, snap.stderr
    with tarfile.open(work / "job.tar.gz") as tar:
        names = {Path(m.name).name for m in tar.getmembers()}
        top_doc = json.loads(tar.extractfile(next(m for m in tar.getmembers()
                                                  if m.name.endswith("/snapshot.json"))).read())
    assert {"snapshot.json", "report.md", "rank1-report.md", "rank1-snapshot.json", "rank1-stacks.txt",
            "observation.json"} <= names
    assert [r["rank"] for r in top_doc["job"]["ranks"]] == [0, 1] and top_doc["job"]["launcher_pid"] == launcher
    # The bundle carries the job's observation: doctor on it gives the job's report, as the bundle's analysis did.
    offline = _cli(env, "doctor", str(work / "job.tar.gz"), "--json")
    assert offline.returncode == 0, offline.stderr
    offline_doc = json.loads(offline.stdout)
    assert [(f["rule_id"], f["claim"]) for f in offline_doc["findings"]] == \
        [(f["rule_id"], f["claim"]) for f in top_doc["job"]["findings"]]
    assert [r["pid"] for r in offline_doc["job"]["ranks"]] == [r["pid"] for r in top_doc["job"]["ranks"]]

    rec = _cli(env, "record", str(launcher), "--duration", "2", "-o", str(work / "trace.json"), "--json")
    assert rec.returncode == 0, rec.stderr
    trace = json.loads((work / "trace.json").read_text())
    names = [e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"]
    assert [n.split(" (")[0] for n in names] == ["rank 0", "rank 1"]

    export = subprocess.Popen([*CLI, "export", "--port", "0", "--job", str(run_pid)], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = export.stdout.readline() if export.stdout is not None else ""
        url = re.search(r"(http://\S+/metrics)", line)[1]
        body = ""
        for _ in range(20):  # a board a rank has not published yet reads as not up: give it a publish or two
            body = urllib.request.urlopen(url, timeout=10).read().decode()
            if body.count("dflash_collectives_entered_total{") == 2:
                break
            time.sleep(0.5)
        assert re.search(r'dflash_collectives_entered_total\{[^}]*rank="1"[^}]*\} \d', body), body[-2000:]
    finally:
        export.send_signal(signal.SIGINT)
        export.wait(timeout=30)
