"""`dflash-diag attach` on the tiny reference trainer started without probes (``--probes none``), through the
ptrace injector (`--method auto`: no debugger).

One trainer for the module (the `reentrant` scenario: the drafter's layers silently get no gradient, a
failure only the probes see). Attached, the board carries every section and names the grad-None
parameters; `doctor` names the cause; training goes on (steps rise, loss falls); detach leaves no hook;
attach/detach cycles lose no step. bench/attach_cycles.py runs the 20-cycle version.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from attach_helpers import cli, env_for, wait_for

from dflash_diag.inject.orchestrate import inject
from dflash_diag.sources.board import read_board
from probes import ALL_PROBES

pytestmark = pytest.mark.slow

ALL = set(ALL_PROBES)  # every probe the package has


class Trainer:
    def __init__(self, proc: subprocess.Popen[bytes], metrics: Path, board_dir: Path) -> None:
        self.proc, self.pid, self.metrics, self.board_dir = proc, proc.pid, metrics, board_dir

    def rows(self) -> list[dict]:
        try:
            text = self.metrics.read_text()
        except OSError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.endswith("}")]

    def step(self) -> int:
        rows = self.rows()
        return rows[-1]["step"] if rows else 0

    def advances(self, steps: int = 5, timeout_s: float = 60.0) -> None:
        start = self.step()
        wait_for(lambda: self.step() >= start + steps, timeout_s, f"{steps} more training steps")
        assert self.proc.poll() is None


@pytest.fixture(scope="module")
def trainer(ptrace_ok: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trainer]:
    work = tmp_path_factory.mktemp("trainer")
    board_dir = work / "boards"
    board_dir.mkdir(mode=0o700)
    metrics = work / "metrics.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "reference_trainer", "--preset", "tiny", "--wandb", "off", "--probes", "none",
         "--scenario", "reentrant", "--max-seconds", "240", "--metrics-jsonl", str(metrics),
         "--checkpoint-dir", str(work / "ckpt"), "--log-interval", "10"],
        cwd=work, env=env_for(board_dir), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t = Trainer(proc, metrics, board_dir)
    try:
        wait_for(lambda: t.step() >= 3 or proc.poll() is not None, 120, "the trainer's first steps")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        yield t
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def inventory_before(trainer: Trainer) -> dict:
    out = inject(trainer.pid, "inventory", board_dir=trainer.board_dir, timeout_s=60)
    assert out.result["ok"], out.result
    return out.result["inventory"]


def _grad_none_board(trainer: Trainer):
    board = read_board(trainer.pid, trainer.board_dir)
    checkpoint = board.probe("checkpoint")
    named = checkpoint and any(n.startswith("model.layers.") for n in checkpoint["grad_none_params"])
    return board if named and board.probe("queues") else None  # named once the found model is registered


def test_attach_gives_the_board_every_section_and_training_goes_on(trainer: Trainer, inventory_before: dict) -> None:
    before = read_board(trainer.pid, trainer.board_dir)
    assert before.probes == {} and before.session["enabled"] == []  # the program's own, empty session
    env = env_for(trainer.board_dir)
    res = cli("attach", str(trainer.pid), "--json", env=env)
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)["result"]
    assert result["session"] == "existing" and set(result["added"]) == ALL
    assert result["discovered"]["queues"] == ["q_hs"] and result["discovered"]["models"] == ["model"]
    board = wait_for(lambda: _grad_none_board(trainer), 60, "the grad-None check after an optimizer step")
    assert set(board.probes) == ALL
    assert board.app["name"] == "reference_trainer"  # the program's own set_app() keeps feeding the board
    ckpt = board.probe("checkpoint")
    assert ckpt["calls"]["reentrant"] > 0 and ckpt["calls"]["non_reentrant"] == 0
    assert board.probe("queues")["q_hs"]["maxsize"] == 4
    trainer.advances()
    rows = trainer.rows()
    first = sum(r["loss"] for r in rows[:5]) / 5
    last = sum(r["loss"] for r in rows[-5:]) / 5
    assert last < first  # still learning (the part of the model that gets gradients)


def test_doctor_names_the_probe_only_cause(trainer: Trainer) -> None:
    res = cli("doctor", str(trainer.pid), "--duration", "3", "--json", env=env_for(trainer.board_dir))
    assert res.returncode == 0, res.stderr
    rules = {f["rule_id"]: f["severity"] for f in json.loads(res.stdout)["findings"]}
    assert rules.get("checkpoint-grad-none") == "critical"


def test_detach_leaves_no_hook(trainer: Trainer, inventory_before: dict) -> None:
    res = cli("detach", str(trainer.pid), "--json", env=env_for(trainer.board_dir))
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)["result"]
    assert result["hooks_left"] == [] and set(result["removed"]) == ALL
    board = read_board(trainer.pid, trainer.board_dir)
    assert board.session["enabled"] == [] and board.session["attached"] is None
    trainer.advances()


def test_attach_detach_cycles_lose_no_step_and_leave_no_hook(trainer: Trainer, inventory_before: dict) -> None:
    start = trainer.step()
    for _ in range(3):
        up = inject(trainer.pid, "attach", names=sorted(ALL), board_dir=trainer.board_dir, timeout_s=60)
        assert up.result["ok"], up.result
        down = inject(trainer.pid, "detach", board_dir=trainer.board_dir, timeout_s=60)
        assert down.result["ok"] and down.result["hooks_left"] == [], down.result
    trainer.advances()
    steps = [r["step"] for r in trainer.rows()]
    assert steps == list(range(1, len(steps) + 1)) and steps[-1] > start
    after = inject(trainer.pid, "inventory", board_dir=trainer.board_dir, timeout_s=60).result["inventory"]
    assert after == inventory_before


def test_doctor_attach_does_it_in_one_go(trainer: Trainer) -> None:
    res = cli("doctor", str(trainer.pid), "--attach", "--duration", "4", "--json", env=env_for(trainer.board_dir))
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert {f["rule_id"] for f in report["findings"]} >= {"checkpoint-grad-none"}
    assert set(report["attached"]["result"]["added"]) == ALL
    assert "probes detached" in res.stderr
    assert read_board(trainer.pid, trainer.board_dir).session["enabled"] == []


def test_a_killed_doctor_attach_gives_the_trainers_session_back_by_itself(trainer: Trainer,
                                                                          inventory_before: dict) -> None:
    doctor = subprocess.Popen([sys.executable, "-m", "dflash_diag", "doctor", str(trainer.pid), "--attach",
                               "--duration", "120", "--json"], env=env_for(trainer.board_dir),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: set(read_board(trainer.pid, trainer.board_dir).session["enabled"]) == ALL, 60,
                 "the probes doctor --attach added to the trainer's own session")
    finally:
        doctor.kill()  # SIGKILL: nothing in doctor runs; the lease on the trainer's board thread does the detach
        doctor.wait()
    t0 = time.monotonic()

    def given_back() -> bool:
        session = read_board(trainer.pid, trainer.board_dir).session
        return session["enabled"] == [] and session["attached"] is None

    wait_for(given_back, 30, "the lease to take the probes out of the trainer's session")
    assert time.monotonic() - t0 < 5.0
    trainer.advances()  # its own session (and board) go on, and so does training
    after = inject(trainer.pid, "inventory", board_dir=trainer.board_dir, timeout_s=60).result["inventory"]
    assert after == inventory_before


def test_doctor_without_a_board_says_attach_would_add_the_evidence(tmp_path: Path) -> None:
    script = tmp_path / "spin.py"
    script.write_text("import threading, time\n"
                      "def spin():\n    while True: sum(range(1000))\n"
                      "threading.Thread(target=spin, daemon=True).start()\nprint('ready', flush=True)\ntime.sleep(60)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
        board_dir = tmp_path / "boards"
        board_dir.mkdir(mode=0o700)
        res = cli("doctor", str(proc.pid), "--duration", "1", "--json", "--board-dir", str(board_dir),
                  env=env_for(board_dir))
        assert res.returncode == 0, res.stderr
        no_probes = [f for f in json.loads(res.stdout)["findings"] if f["rule_id"] == "no-probes"]
        assert no_probes and f"dflash-diag attach {proc.pid}" in no_probes[0]["remedy"]
    finally:
        proc.kill()
        proc.wait()
