"""No output of any command holds a planted secret; the look-alikes are still there.

One real process, started with `dflash-diag run --probes-to-wandb`, carries every secret form of the table: in
its environment, its argv and the app config it publishes on its board, in the names it chooses (threads, the
functions they run, the directories of its code files, the queues its probes watch), in the exceptions of threads
that died (their tracebacks in its stderr file) and so in the metric keys its probes log to its (offline) wandb
run. Then every command looks at it, as text and as JSON: `board` (one and the list), `doctor`, `top --batch`,
`snapshot` (file and directory form, every file of the bundle), `diff`, `record` (its trace and speedscope files),
and `run`'s own printed lines; beside them, what the probes wrote: the wandb run's metric keys and alerts, the
board file's argv and app sections (what docs/security.md promises of it). Nothing any of them prints or writes
may contain a needle; and each kind of plant is checked to have reached the outputs (redacted), so the test
cannot pass by planting nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
from pathlib import Path
from typing import Any

import pytest
from secret_table import (
    LOOKALIKE_ARGV,
    LOOKALIKE_CONFIG,
    LOOKALIKE_FILE,
    LOOKALIKE_FUNCTION,
    LOOKALIKE_QUEUES,
    LOOKALIKE_THREAD,
    SECRETS,
    all_argv,
    all_config,
    all_env,
    all_plants,
)

from dflash_diag.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "probes"))
from wandb_records import find_run_file, read_run  # the .wandb reader of the wandb tests

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = ROOT / "tests" / "fixtures" / "cpu" / "pipeline_child.py"  # the one threaded test workload
READY_TIMEOUT_S = 90.0


def _needles() -> list[tuple[str, str]]:
    """(secret id, text) for every needle, raw and as JSON would escape it."""
    out = []
    for s in SECRETS:
        out.append((s.id, s.needle))
        escaped = json.dumps(s.needle)[1:-1]
        if escaped != s.needle:
            out.append((s.id + " (JSON-escaped)", escaped))
    return out


def _leaks(where: str, text: str) -> list[str]:
    return [f"{sid} in {where}" for sid, needle in _needles() if needle in text]


@pytest.fixture
def secret_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    board_dir = tmp_path / "boards"
    board_dir.mkdir(mode=0o700)
    monkeypatch.setenv("DFLASH_DIAG_BOARD_DIR", str(board_dir))
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(all_config()))
    plant_path = tmp_path / "plant.json"
    plant_path.write_text(json.dumps(all_plants(tmp_path / "code")))
    (tmp_path / "wandb").mkdir()
    env = {**os.environ, **all_env(), "DFLASH_DIAG_BOARD_DIR": str(board_dir), "PYTHONPATH": str(ROOT),
           "WANDB_SILENT": "true", "DFLASH_DIAG_WANDB_INTERVAL_S": "0.2"}
    run = subprocess.Popen([sys.executable, "-m", "dflash_diag", "run", "--probes", "queues,gil", "--probes-to-wandb",
                            "--", sys.executable, str(WORKLOAD), "--light", "--probes", "--config-json", str(config_path),
                            "--plant-json", str(plant_path), "--stderr-file", str(tmp_path / "train.log"),
                            "--wandb-dir", str(tmp_path / "wandb"), *all_argv()],
                           env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready = threading.Event()
    lines: list[str] = []

    def read_stdout() -> None:
        assert run.stdout is not None
        for line in run.stdout:
            lines.append(line)
            if line.strip() == "READY":
                ready.set()

    reader = threading.Thread(target=read_stdout, daemon=True)
    reader.start()
    try:
        if not ready.wait(READY_TIMEOUT_S):
            raise AssertionError(f"the workload did not start: {run.poll()} {lines}")
        assert run.stderr is not None
        announced = run.stderr.readline()  # "dflash-diag run: PID N under probes ...": the program's PID
        pid = int(announced.split("PID ", 1)[1].split()[0])
        yield pid, run, tmp_path, announced
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGTERM)
            try:
                run.wait(timeout=30)
            except subprocess.TimeoutExpired:
                run.kill()
                run.wait()


@pytest.mark.slow
def test_no_secret_reaches_any_output(secret_process, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    pid, run, tmp_path, announced = secret_process
    outputs: dict[str, str] = {}

    def command(name: str, *argv: str, expect: int = 0) -> str:
        code = main(list(argv))
        captured = capsys.readouterr()
        outputs[name] = captured.out + captured.err
        assert code == expect, f"{name}: exit {code}: {captured.err[-2000:]}"
        return captured.out

    board = json.loads(command("board --json", "board", str(pid), "--json"))
    command("board (text)", "board", str(pid))
    listed = json.loads(command("board list --json", "board", "--json"))
    command("board list (text)", "board")
    report = json.loads(command("doctor --json", "doctor", str(pid), "--duration", "0.5", "--json"))
    command("doctor (text)", "doctor", str(pid), "--duration", "0.5")
    command("top --batch --json", "top", "--pid", str(pid), "--batch", "--duration", "0.5", "--json")
    command("top --batch (text)", "top", "--pid", str(pid), "--batch", "--duration", "0.5")
    a, d = tmp_path / "a.tar.gz", tmp_path / "d"
    command("snapshot", "snapshot", str(pid), "-o", str(a), "--duration", "0.5")
    command("snapshot --dir --json", "snapshot", str(pid), "--dir", "-o", str(d), "--duration", "0.5", "--json")
    command("diff (text)", "diff", str(a), str(d), "--all")
    command("diff --json", "diff", str(a), str(d), "--json")
    trace, profile = tmp_path / "t.json", tmp_path / "p.speedscope.json"
    command("record", "record", str(pid), "-o", str(trace), "--duration", "0.5", "--json")
    command("record speedscope", "record", str(pid), "-o", str(profile), "--duration", "0.5", "--format", "speedscope")
    outputs["record trace file"] = trace.read_text()
    outputs["record speedscope file"] = profile.read_text()

    with tarfile.open(a) as tar:
        for member in tar.getmembers():
            fh = tar.extractfile(member)
            assert fh is not None
            outputs[f"bundle {member.name}"] = fh.read().decode("utf-8", "replace")
    for path in sorted(d.iterdir()):
        outputs[f"bundle dir {path.name}"] = path.read_text(errors="replace")
    board_file = json.loads(Path(board["reader"]["path"]).read_text())  # what the probes wrote, before any reader
    outputs["board file: writer.argv and app"] = json.dumps([board_file["writer"]["argv"], board_file["app"]])

    run.send_signal(signal.SIGTERM)  # the program finishes its wandb run, then exits
    _, run_err = run.communicate(timeout=60)
    outputs["run (stderr)"] = announced + run_err  # its first line was read by the fixture
    assert announced.startswith("dflash-diag run: PID") and "under probes" in announced
    records = read_run(find_run_file(tmp_path / "wandb"))
    metric_keys = sorted({key for row in records.history for key in row})
    outputs["wandb metric keys"] = "\n".join(metric_keys)
    outputs["wandb alerts"] = json.dumps(records.alerts)

    leaks = [leak for where, text in outputs.items() for leak in _leaks(where, text)]
    assert leaks == [], "\n".join(leaks[:40])
    assert any(b["writer"]["pid"] == pid for b in listed)
    _check_the_plants_arrived(outputs, board, report, tmp_path, metric_keys)


def _check_the_plants_arrived(outputs: dict[str, str], board: dict[str, Any], report: dict[str, Any], tmp_path: Path,
                              metric_keys: list[str]) -> None:
    """Every kind of plant reached the outputs, redacted, beside its look-alikes: the leak check was not vacuous."""
    # The look-alikes survive where a maintainer needs them: the board, the bundle, the process argv.
    assert "config" in board["app"], board["app"]
    assert all(board["app"]["config"][k] == v for k, v in LOOKALIKE_CONFIG.items()), board["app"]
    d = tmp_path / "d"
    doc = json.loads((d / "snapshot.json").read_text())
    argv = doc["process"]["argv"]
    assert all(arg in argv for arg in LOOKALIKE_ARGV), argv
    assert all(kept in argv for s in SECRETS for kept in s.keep), argv
    assert doc["config"]["mask_token_id"] == 151669 and doc["config"]["tokenizer"] == "Qwen/Qwen3-8B"
    assert doc["env"]["CUDA_VISIBLE_DEVICES"] == "0" and doc["env"]["DB_PASS"] == "<redacted>"
    assert doc["env"]["HF_ENDPOINT"] == "https://<redacted>@hub.internal"
    # Names: every planted thread is a track of the trace, the secret ones redacted, the look-alike as it is.
    trace = json.loads(outputs["record trace file"])["traceEvents"]
    tracks = {e["args"]["name"] for e in trace if e["name"] == "thread_name"}
    planted_threads = [s for s in SECRETS if s.thread and not s.exception]
    assert sum("<redacted>" in t for t in tracks) >= len(planted_threads) and LOOKALIKE_THREAD in tracks, tracks
    counters = {e["name"] for e in trace if e["ph"] == "C"}
    assert all(f"{q} depth" in counters for q in LOOKALIKE_QUEUES) and sum("<redacted>" in c for c in counters) >= 4
    stacks = outputs["bundle dir stacks.txt"]
    assert f"{LOOKALIKE_FUNCTION} (" in stacks and f"/lib/{LOOKALIKE_FILE}:" in stacks, stacks[-3000:]
    assert stacks.count("/<redacted>/worker.py") >= sum(1 for s in SECRETS if s.directory), stacks[-3000:]
    # The threads that died are a finding whose text was redacted, not dropped.
    [died] = [f for f in report["findings"] if f["rule_id"] == "thread-died"]
    assert "https://<redacted>@api.internal/v1" in died["claim"] or any(
        "https://<redacted>@api.internal/v1" in e["value"] for e in died["evidence"]), died
    assert "thread-died" in outputs["doctor (text)"] and "thread-died" in outputs["top --batch (text)"]
    # The probes logged every queue to wandb, the secret names redacted.
    assert all(f"dflash/queue/{q}/depth" in metric_keys for q in LOOKALIKE_QUEUES), metric_keys
    assert sum("_redacted_" in k and k.endswith("/depth") for k in metric_keys) >= 3, metric_keys
