"""Probe readings in the program's own wandb run: offline runs, read back from the run's .wandb file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from wandb_records import find_run_file, read_run

import probes
from dflash_contract.readings import CATALOGUE, critical_alerts, readings, wandb_metrics
from probes.wandb_log import WandbLogger

ROOT = Path(__file__).resolve().parents[1].parent

BOARD_PROBES: dict[str, Any] = {
    "queues": {"status": "ok", "q_hs": {"depth": 3, "maxsize": 8, "put_blocked_share": 0.0, "get_blocked_share": 0.4,
                                        "puts_per_s": 2.0, "gets_per_s": 2.5, "depth_history": [1, 3]}},
    "gil": {"status": "ok", "wait_mean_ms": 1.5, "wait_p99_ms": 9.0, "contention_share": 0.2},
    "compile": {"status": "ok", "compiles": 4, "recompiles": 2, "graph_breaks": 1, "recompile_limit_hits": 0,
                "compile_time_s": 3.5, "compiling_now": False},
    "cudagraphs": {"status": "ok", "captures": 2, "skips": 1, "rerecords": 0, "replays": None},
    "allocator": {"status": "ok", "devices": {"0": {"device_alloc_per_s": 3.0, "alloc_retries": 1, "ooms": 0,
                                                    "reserved_bytes": 2 ** 30, "fragmentation_share": 0.1}},
                  "empty_cache_calls": 0},
    "checkpoint": {"status": "ok", "calls": {"reentrant": 0, "non_reentrant": 96}, "grad_none_count": 0,
                   "grad_none_params": [], "trainable_params": 58, "mixed_modes": False},
    "fastpath": {"status": "ok", "fallback": True},
    "codedrift": {"status": "ok", "stale_count": 1, "stale": [{"module": "m"}]},
    "probe_that_failed": {"status": "error", "reason": "boom", "errors": 5},
}


def test_readings_flatten_every_probe_with_labels() -> None:
    got = {(r.name, r.labels): r.value for r in readings(BOARD_PROBES, {"steps": 7, "step": 6})}
    assert got[("queue_depth", (("queue", "q_hs"),))] == 3.0
    assert got[("queue_get_blocked_share", (("queue", "q_hs"),))] == 0.4
    assert got[("allocator_alloc_retries", (("device", "cuda:0"),))] == 1.0
    assert got[("compile_recompiles", ())] == 2.0 and got[("cudagraph_skips", ())] == 1.0
    assert got[("fastpath_fallback", ())] == 1.0 and got[("checkpoint_mixed_modes", ())] == 0.0
    assert got[("codedrift_stale_modules", ())] == 1.0 and got[("probes_step", ())] == 6.0
    assert ("cudagraph_replays", ()) not in got  # null: absent, never a made-up zero
    assert all(name in CATALOGUE for name, _ in got)
    # every label a reading carries is the one the catalogue declares
    assert all(tuple(k for k, _ in labels) == CATALOGUE[name][1] for name, labels in got)
    keys = wandb_metrics(BOARD_PROBES)
    assert keys["dflash/queue/q_hs/depth"] == 3.0 and keys["dflash/allocator/cuda_0/alloc_retries"] == 1.0
    assert keys["dflash/gil/wait_p99_ms"] == 9.0 and keys["dflash/checkpoint/grad_none_params"] == 0.0


def test_critical_alert_only_for_params_without_grad() -> None:
    assert critical_alerts(BOARD_PROBES) == []
    bad = {**BOARD_PROBES, "checkpoint": {**BOARD_PROBES["checkpoint"], "calls": {"reentrant": 10, "non_reentrant": 0},
                                          "grad_none_count": 2, "grad_none_params": ["drafter.w", "drafter.b"]}}
    [alert] = critical_alerts(bad)
    assert alert.rule_id == "checkpoint-grad-none" and "2 of 58" in alert.text and "use_reentrant=True" in alert.text
    assert "drafter.w" in alert.text


class _FailingRun:
    """A run whose every call fails, as a broken wandb service would."""

    id = "broken"
    step = 0  # wandb's open row: the test moves it as the program's own logging would

    def log(self, *args: object, **kwargs: object) -> None:
        raise ConnectionResetError("wandb service gone")

    def alert(self, *args: object, **kwargs: object) -> None:
        raise ConnectionResetError("wandb service gone")


def test_wandb_errors_are_swallowed_counted_and_published(session_factory, board_dir: Path, monkeypatch) -> None:
    import types

    fake_wandb = types.SimpleNamespace(run=_FailingRun())
    monkeypatch.setitem(sys.modules, "wandb", fake_wandb)
    s = session_factory("queues", wandb=True, wandb_interval_s=0.01)
    s.watch_queue("q_hs", __import__("queue").Queue())
    for step in range(3):
        s.step(step)
        fake_wandb.run.step = step + 1
        time.sleep(0.02)
        assert s.publish()  # the board is still written
    board = json.loads((board_dir / f"{os.getpid()}.json").read_text())
    status = board["session"]["wandb"]
    assert status["errors"] >= 2 and "wandb service gone" in status["last_error"] and status["logs"] == 0


def test_no_run_no_log_and_wandb_never_imported(session_factory, monkeypatch) -> None:
    monkeypatch.delitem(sys.modules, "wandb", raising=False)
    s = session_factory("queues", wandb=True, wandb_interval_s=0.01)
    assert s.publish()
    assert "wandb" not in sys.modules  # the probes never import wandb themselves
    logger = WandbLogger(0.01)
    assert logger.maybe_log({"probes": BOARD_PROBES}) is False and logger.errors == 0


def test_start_wandb_flag_enables_logging_on_the_running_session(monkeypatch) -> None:
    from probes.session import ProbeSession

    monkeypatch.setattr(probes, "_session", None)
    session = probes.start(probes.ProbesConfig(enabled=frozenset(), keep_board=False))
    try:
        assert session._wandb is None
        assert probes.start(wandb=True) is session and session._wandb is not None
        probes.start(wandb=False)
        assert session._wandb is None
    finally:
        session.close()
        monkeypatch.setattr(probes, "_session", None)
    assert isinstance(session, ProbeSession)
    assert probes.config_from_env({"DFLASH_DIAG_PROBES_TO_WANDB": "1"}).wandb is True
    assert probes.config_from_env({}).wandb is False


PROGRAM = textwrap.dedent('''
    import functools, os, queue, time
    import torch, wandb
    from torch import nn
    from torch.utils.checkpoint import checkpoint
    import probes

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = nn.Linear(8, 8)
            self.head = nn.Linear(8, 1)
        def forward(self, x):
            # reentrant + keyword call, input without grad: the block gets no gradient (the incident)
            return self.head(functools.partial(checkpoint, use_reentrant=True)(self.block, x)).sum()

    run = wandb.init(project="probe-test", mode="offline", dir=os.environ["WANDB_DIR"],
                     settings=wandb.Settings(console="off"))
    session = probes.current()
    q = session.watch_queue("q_hs", queue.Queue(maxsize=4))
    model = Model()
    session.watch_model("drafter", model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    deadline = time.monotonic() + float(os.environ["RUN_SECONDS"])
    step = 0
    while time.monotonic() < deadline:
        q.put(step); q.get()
        opt.zero_grad(set_to_none=True)
        model(torch.randn(4, 8)).backward()
        opt.step()
        session.step(step)
        run.log({"loss": 1.0 / (step + 1)}, step=step * 10)  # explicit, sparse steps: must stay untouched
        step += 1
        time.sleep(0.05)
    run.finish()
    print("steps", step)
''')


Done = tuple[Path, subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[Done]]]:
    """The module's three programs run to their end, started together at the first test that reads one (they share
    nothing; each test reads its own directory and result): each is mostly waiting (imports, wandb's service, its
    own sleeps), and three wait at once."""
    with ThreadPoolExecutor(max_workers=3) as pool:
        yield {name: pool.submit(start, _private(tmp_path_factory, name))
               for name, start in (("any_program", _any_program), ("reference_trainer", _reference_trainer),
                                   ("secret_queues", _secret_queues))}


def _private(factory: pytest.TempPathFactory, name: str) -> Path:
    """A directory of the test's own, with a private (0700) board directory in it."""
    where = factory.mktemp(name)
    (where / "boards").mkdir(mode=0o700)
    os.chmod(where / "boards", 0o700)
    return where


def _any_program(tmp_path: Path) -> Done:
    board_dir = tmp_path / "boards"
    script = tmp_path / "train.py"
    script.write_text(PROGRAM)
    wandb_dir = tmp_path / "wandb"
    wandb_dir.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), WANDB_MODE="offline", WANDB_DIR=str(wandb_dir), WANDB_SILENT="true",
               RUN_SECONDS="7")
    env.pop("WANDB_API_KEY", None)
    return tmp_path, subprocess.run(
        [sys.executable, "-m", "dflash_diag", "run", "--probes", "queues,checkpoint", "--probes-to-wandb",
         "--keep-board", "--board-dir", str(board_dir), "--", sys.executable, str(script)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240,
    )


@pytest.mark.slow
def test_any_program_under_run_logs_readings_beside_its_own_metrics(programs: dict[str, Future[Done]]) -> None:
    tmp_path, proc = programs["any_program"].result()
    board_dir, wandb_dir = tmp_path / "boards", tmp_path / "wandb"
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = int(proc.stdout.split("steps")[-1])
    records = read_run(find_run_file(wandb_dir))
    rows = records.history
    # The program's steps are exactly its own: the probes never added or shifted a row.
    assert [row["_step"] for row in rows] == [10 * s for s in range(steps)]
    probed = [row for row in rows if "dflash/queue/q_hs/depth" in row]
    assert len(probed) >= 2, (rows[-3:], proc.stderr[-1000:])
    for row in probed:
        assert "loss" in row  # beside the program's own metric, in the same row
        # step-aligned: the readings in row 10*S were taken while the program was at step S (or had just
        # reported S+1 and not yet logged it); on a loaded machine the board thread may take its readings a
        # step or two before it gets to log them
        assert row["_step"] // 10 - 2 <= row["dflash/probes/step"] <= row["_step"] // 10 + 1, (row, proc.stderr[-1000:])
        assert row["dflash/queue/q_hs/maxsize"] == 4
        assert row["dflash/checkpoint/grad_none_params"] in (0, 2)
    assert any(row["dflash/checkpoint/grad_none_params"] == 2 for row in probed)
    assert any(row["dflash/checkpoint/reentrant_calls"] > 0 for row in probed)
    # the critical finding raised exactly one alert
    assert len(records.alerts) == 1
    assert "no gradient" in records.alerts[0]["title"] and "checkpoint-grad-none" in records.alerts[0]["text"]
    assert records.alerts[0]["level"] == "ERROR"
    # throttled: at most one log per 2 s interval (+ the first and the final one), and no wandb error
    board = json.loads(next(board_dir.glob("*.json")).read_text())
    status = board["session"]["wandb"]
    assert status["errors"] == 0 and status["alerts"] == 1
    assert 2 <= status["logs"] <= 7 / status["interval_s"] + 3, status


def _reference_trainer(tmp_path: Path) -> Done:
    ckpt = tmp_path / "ckpt"
    env = dict(os.environ, PYTHONPATH=str(ROOT), WANDB_SILENT="true", DFLASH_DIAG_WANDB_INTERVAL_S="0.3",
               DFLASH_DIAG_BOARD_DIR=str(tmp_path / "boards"))
    env.pop("WANDB_API_KEY", None)
    env.pop("WANDB_MODE", None)
    return tmp_path, subprocess.run(
        [sys.executable, "-m", "reference_trainer", "--preset", "tiny", "--max-steps", "30", "--log-interval", "2",
         "--wandb", "offline", "--checkpoint-dir", str(ckpt)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240,
    )


@pytest.mark.slow
def test_reference_trainer_logs_readings_by_default_when_its_wandb_is_on(programs: dict[str, Future[Done]]) -> None:
    tmp_path, proc = programs["reference_trainer"].result()
    ckpt = tmp_path / "ckpt"
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = read_run(find_run_file(ckpt)).history
    assert [row["_step"] for row in rows] == [1, *range(2, 31, 2)]  # the trainer's own log steps, nothing added
    probed = [row for row in rows if "dflash/queue/q_hs/depth" in row]
    assert len(probed) >= 2
    for row in probed:
        assert "tokens_per_s" in row and "q_hs_depth" in row  # beside the trainer's own metrics
        assert row["dflash/checkpoint/grad_none_params"] == 0 and row["dflash/queue/q_hs/maxsize"] > 0
    # The board's step, where it has one (a board published before the trainer's first step has none: a loaded box's
    # first row once), is the row's, within the publish interval.
    stepped = [row for row in probed if "dflash/probes/step" in row]
    assert len(stepped) >= len(probed) - 1 and len(stepped) >= 2
    assert all(row["_step"] - 2 <= row["dflash/probes/step"] <= row["_step"] + 2 for row in stepped)


SECRET_QUEUES_PROGRAM = textwrap.dedent('''
    import os, queue, time
    import wandb
    import probes

    run = wandb.init(project="probe-test", mode="offline", dir=os.environ["WANDB_DIR"],
                     settings=wandb.Settings(console="off"))
    session = probes.start(probes.ProbesConfig(enabled=frozenset({"queues"}), board_dir=os.environ["BOARD_DIR"],
                                               publish_interval_s=0.1), wandb=True)
    queues = [session.watch_queue(name, queue.Queue(maxsize=4)) for name in os.environ["QUEUE_NAMES"].split(",")]
    for step in range(30):
        for q in queues:
            q.put(step); q.get()
        session.step(step)
        run.log({"loss": 1.0 / (step + 1)})
        time.sleep(0.05)
    session.close()
    run.finish()
''')


SECRET_TOKEN, SECRET_ENV_PASSWORD = "hf_QueueTokenAbcdefghijklmnopqrstuv4", "queueEnvPassw0rd99"


def _secret_queues(tmp_path: Path) -> Done:
    board_dir = tmp_path / "boards"
    token, env_password = SECRET_TOKEN, SECRET_ENV_PASSWORD
    script = tmp_path / "train.py"
    script.write_text(SECRET_QUEUES_PROGRAM)
    wandb_dir = tmp_path / "wandb"
    wandb_dir.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), WANDB_MODE="offline", WANDB_DIR=str(wandb_dir), WANDB_SILENT="true",
               BOARD_DIR=str(board_dir), DFLASH_DIAG_WANDB_INTERVAL_S="0.1", QUEUE_DB_PASSWORD=env_password,
               QUEUE_NAMES=f"q_{token},{env_password},pad_token_q")
    env.pop("WANDB_API_KEY", None)
    return tmp_path, subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True,
                                    text=True, timeout=120)


@pytest.mark.slow
def test_queue_names_with_secrets_never_become_wandb_metric_keys(programs: dict[str, Future[Done]]) -> None:
    """wandb syncs the run to the cloud: a queue named with a token, or with the value of a secret variable of the
    program's environment, reaches its metric keys redacted; other names stay readable."""
    tmp_path, proc = programs["secret_queues"].result()
    token, env_password = SECRET_TOKEN, SECRET_ENV_PASSWORD
    wandb_dir = tmp_path / "wandb"
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = read_run(find_run_file(wandb_dir))
    keys = {key for row in records.history for key in row}
    assert not [k for k in keys if token in k or env_password in k], sorted(keys)
    assert "dflash/queue/pad_token_q/depth" in keys and "dflash/queue/q__redacted_/depth" in keys, sorted(keys)
    assert "dflash/queue/_redacted_/depth" in keys, sorted(keys)
