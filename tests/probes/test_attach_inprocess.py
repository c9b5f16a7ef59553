"""probes.attach and the fixed bootstrap, run in a real process without a debugger.

The debugger's only job is to make the target run the fixed program; here the program runs in this test
process (probes.attach.run) or in a child Python (the whole bootstrap, from the fixed program on), so every
step after the injection is tested for real: the session it starts or joins, discovery, detach, the hook
inventory, and the bootstrap's refusals.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import pytest

import dflash_diag
import probes
from probes import attach as attach_mod
from probes import codedrift

ROOT = Path(__file__).resolve().parents[2]


def test_probes_version_is_the_distribution_version() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert probes.__version__ == dflash_diag.__version__ == declared


@pytest.fixture
def no_session():
    assert probes.current() is None
    yield
    probes.stop()


def _holder_thread(stop: threading.Event) -> threading.Thread:
    """A thread whose frame holds a queue in a local and a trainable model as an attribute of a local."""
    import torch

    class Box:
        def __init__(self) -> None:
            self.drafter = torch.nn.Linear(4, 4)
            frozen = torch.nn.Linear(4, 4)
            frozen.requires_grad_(False)
            self.target = frozen

    def run() -> None:
        q_work = queue.Queue(maxsize=3)
        box = Box()
        while not stop.is_set():
            q_work.put(1)
            q_work.get()
            time.sleep(0.01)
        del box

    t = threading.Thread(target=run, name="holder", daemon=True)
    t.start()
    return t


def test_attach_starts_a_session_finds_the_objects_and_detach_leaves_no_hook(no_session, tmp_path: Path) -> None:
    import torch  # noqa: F401 - discovery looks for torch.nn.Module

    board_dir = tmp_path / "b"
    stop = threading.Event()
    holder = _holder_thread(stop)
    time.sleep(0.2)
    hook_before = codedrift.import_hook_installed()
    try:
        out = attach_mod.run("attach", names=probes.ALL_PROBES, board_dir=str(board_dir), attacher={"method": "test"})
        assert out["ok"], out
        assert out["session"] == "new" and out["added"] == sorted(probes.ALL_PROBES)
        assert out["discovered"]["queues"] == ["q_work"]
        assert out["discovered"]["models"] == ["drafter"]  # the frozen one has nothing to check
        session = probes.current()
        assert session is not None and session.board_path == str(board_dir / f"{os.getpid()}.json")
        board = json.loads((board_dir / f"{os.getpid()}.json").read_text())
        assert set(board["probes"]) == probes.ALL_PROBES
        assert board["session"]["attached"]["method"] == "test"
        again = attach_mod.run("attach", names=probes.ALL_PROBES, board_dir=str(board_dir))
        assert again["ok"] and again["already"]
        out = attach_mod.run("detach")
        assert out["ok"], out
        assert out["hooks_left"] == [] and out["threads_left"] == []
        assert probes.current() is None
        assert not (board_dir / f"{os.getpid()}.json").exists()
        assert codedrift.import_hook_installed() == hook_before
    finally:
        stop.set()
        holder.join(timeout=5)


def test_attach_joins_the_programs_own_session_and_detach_gives_it_back(no_session, tmp_path: Path) -> None:
    board_dir = tmp_path / "b"
    own = probes.start(probes.ProbesConfig(enabled=frozenset({"queues"}), board_dir=str(board_dir)))
    q = own.watch_queue("mine", queue.Queue())
    out = attach_mod.run("attach", names=frozenset({"queues", "gil", "compile"}), board_dir="/elsewhere")
    assert out["ok"] and out["session"] == "existing"
    assert out["added"] == ["compile", "gil"]  # queues ran already: not ours to add or remove
    assert probes.current() is own and own.enabled == {"queues", "gil", "compile"}
    out = attach_mod.run("detach")
    assert out["ok"] and out["removed"] == ["compile", "gil"] and out["hooks_left"] == []
    assert probes.current() is own and own.enabled == {"queues"}
    assert type(q).__name__ == "WatchedQueue"  # the program's own registration stays
    board = json.loads((board_dir / f"{os.getpid()}.json").read_text())
    assert sorted(board["probes"]) == ["queues"] and board["session"]["attached"] is None


# --- the lease: probes held for a command outside (doctor --attach) leave when it is gone ------------------


@pytest.fixture
def owner():
    """A process to hold the probes for (what doctor --attach is), and its lease."""
    from dflash_contract import proc

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    lease = {"pid": child.pid, "start_ticks": proc.start_time_ticks(child.pid)}
    yield child, lease
    child.kill()
    child.wait()


def _gone(child: subprocess.Popen) -> None:
    child.kill()
    child.wait()


def _wait(predicate, timeout_s: float) -> float:
    t0 = time.monotonic()
    while not predicate():
        assert time.monotonic() - t0 < timeout_s, f"not in {timeout_s} s"
        time.sleep(0.02)
    return time.monotonic() - t0


@pytest.mark.slow
def test_a_leased_attach_detaches_itself_once_its_owner_is_gone(no_session, owner, tmp_path: Path, capfd) -> None:
    child, lease = owner
    board = tmp_path / "b" / f"{os.getpid()}.json"
    before = attach_mod.inventory()
    out = attach_mod.run("attach", names=probes.ALL_PROBES, board_dir=str(tmp_path / "b"), lease=lease)
    assert out["ok"] and out["lease"] == lease, out
    assert json.loads(board.read_text())["session"]["attached"]["lease"] == lease
    time.sleep(1.5)  # ticks of the board thread while the owner runs: nothing happens
    assert probes.current() is not None and probes.current().lease_checks >= 1
    _gone(child)
    took_s = _wait(lambda: probes.current() is None and not board.exists(), 10.0)
    assert took_s < 3.0  # one board-thread tick (timer_interval_s = 1 s), plus the detach
    _wait(lambda: not [t for t in threading.enumerate() if t.name.startswith("dflash-diag")], 5.0)
    assert attach_mod.hooks_left(before, attach_mod.inventory()) == []
    assert attach_mod.run("detach")["not_attached"]  # nothing is left to detach
    assert f"PID {child.pid}, the dflash-diag command that attached them, is gone: probes detached" in capfd.readouterr().err


@pytest.mark.slow
def test_a_leased_attach_gives_the_programs_own_session_back(no_session, owner, tmp_path: Path) -> None:
    child, lease = owner
    own = probes.start(probes.ProbesConfig(enabled=frozenset({"queues"}), board_dir=str(tmp_path / "b")))
    out = attach_mod.run("attach", names=frozenset({"queues", "gil"}), lease=lease)
    assert out["ok"] and out["session"] == "existing" and out["added"] == ["gil"]
    _gone(child)
    board_path = tmp_path / "b" / f"{os.getpid()}.json"

    def given_back() -> bool:
        board = json.loads(board_path.read_text())
        return sorted(board["probes"]) == ["queues"] and board["session"]["attached"] is None

    _wait(given_back, 10.0)
    assert own.enabled == {"queues"} and own.attached is None
    assert probes.current() is own and own._thread.is_alive()  # the program's own session and board go on


def test_a_lease_whose_owner_is_already_gone_attaches_nothing(no_session, owner, tmp_path: Path) -> None:
    child, lease = owner
    _gone(child)
    out = attach_mod.run("attach", names=probes.ALL_PROBES, board_dir=str(tmp_path / "b"), lease=lease)
    assert not out["ok"] and "is gone: nothing attached" in out["error"]
    assert probes.current() is None


@pytest.mark.slow
def test_an_attach_without_lease_makes_leased_probes_lasting(no_session, owner, tmp_path: Path) -> None:
    child, lease = owner
    assert attach_mod.run("attach", names=frozenset({"gil"}), board_dir=str(tmp_path / "b"), lease=lease)["ok"]
    again = attach_mod.run("attach", names=frozenset({"gil"}))  # `dflash-diag attach`, deliberately
    assert again["already"] and again["lease_dropped"] and again["lease"] is None
    refused = attach_mod.run("detach", lease=lease)  # the leaseholder's detach: no longer its probes
    assert not refused["ok"] and refused["not_owner"] and probes.current() is not None
    _gone(child)
    time.sleep(2.5)  # two board-thread ticks: the lease is gone, nothing detaches
    assert probes.current() is not None and probes.current().enabled == {"gil"}
    assert attach_mod.run("detach")["ok"]  # a plain detach still takes them out


@pytest.mark.slow
def test_health_attached_mid_run_names_a_stale_copy_and_detach_takes_its_hooks_out(no_session,
                                                                                     tmp_path: Path) -> None:
    """The health probe started by the attach bootstrap in a process already training (a model re-created after
    its optimizer was built): it arms at once, finds the model in the frames, judges, and leaves no hook."""
    import torch

    from dflash_contract.health import judge

    stop = threading.Event()
    steps = [0]

    def train() -> None:
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
        opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
        net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))  # re-created
        while not stop.is_set():
            opt.zero_grad()
            net(torch.randn(16, 8)).pow(2).mean().backward()
            opt.step()
            steps[0] += 1
            time.sleep(0.005)

    trainer = threading.Thread(target=train, name="fit", daemon=True)
    trainer.start()
    _wait(lambda: steps[0] >= 5, 60.0)  # the first step imports torch's lazy parts (seconds on a busy box)
    before = attach_mod.inventory()
    try:
        out = attach_mod.run("attach", names=frozenset({"health"}), board_dir=str(tmp_path / "b"))
        assert out["ok"] and out["added"] == ["health"], out
        assert out["discovered"]["models"] == ["net"], out["discovered"]
        board = tmp_path / "b" / f"{os.getpid()}.json"
        verdicts: list = []
        deadline = time.monotonic() + 20
        while not verdicts and time.monotonic() < deadline:
            time.sleep(0.5)
            payload = json.loads(board.read_text())["probes"]["health"]
            verdicts = [v for v in judge(payload, time.time()) if v.rule_id == "training-no-update"]
        assert verdicts and "they get no gradient" in verdicts[0].claim, payload
        assert attach_mod.run("detach")["ok"]
        assert attach_mod.hooks_left(before, attach_mod.inventory()) == []
    finally:
        stop.set()
        trainer.join(timeout=5)


def test_detach_without_attach_says_so(no_session, tmp_path: Path) -> None:
    out = attach_mod.run("detach")
    assert not out["ok"] and out["not_attached"] and "no probes run" in out["error"]
    probes.start(probes.ProbesConfig(enabled=frozenset(), board_dir=str(tmp_path / "b")))
    out = attach_mod.run("detach")
    assert not out["ok"] and "started by the program itself" in out["error"]


def test_hooks_left_names_what_differs() -> None:
    import logging

    before = attach_mod.inventory()
    handler = logging.NullHandler()
    logging.getLogger("transformers").addHandler(handler)
    old = threading.excepthook
    threading.excepthook = lambda args: None
    try:
        left = attach_mod.hooks_left(before, attach_mod.inventory())
    finally:
        threading.excepthook = old
        logging.getLogger("transformers").removeHandler(handler)
    assert any(item.startswith("loggers.transformers") for item in left)
    assert any(item.startswith("threading.excepthook") for item in left)
    assert attach_mod.hooks_left(before, attach_mod.inventory()) == []


def test_unknown_action_or_probe_is_an_error_not_an_exception() -> None:
    assert attach_mod.run("format-disk")["ok"] is False
    assert "unknown probes" in attach_mod.run("attach", names=frozenset({"nope"}))["error"]


# --- the bootstrap, from the fixed program on, in a child Python ---------------------------------------

CHILD = r"""
import os, sys, threading, time
ready, go = sys.argv[1], sys.argv[2]
sys.path[:0] = sys.argv[3:]        # a program's own import path (e.g. a package named like ours)
open(ready, "w").write(str(os.getpid()))
while not os.path.exists(go):
    time.sleep(0.01)
exec(open(go).read())             # the fixed program, exactly as the pending call runs it
time.sleep(0.5)
print("THREADS", sorted(t.name for t in threading.enumerate()), "SESSION", "probes" in sys.modules)
"""


def _run_bootstrap(tmp_path: Path, make_control, extra_path: tuple[str, ...] = ()) -> tuple[dict | None, str]:
    from dflash_diag.inject.orchestrate import package_paths
    from dflash_diag.inject.program import fixed_program
    from dflash_diag.inject.request import Request, control_document, write_private

    board_dir = tmp_path / "board"
    board_dir.mkdir(mode=0o700, exist_ok=True)
    script, ready, go = tmp_path / "child.py", tmp_path / "ready", tmp_path / "go"
    script.write_text(CHILD)
    child_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the bootstrap finds probes by path
    child = subprocess.Popen([sys.executable, "-I", str(script), str(ready), str(go), *extra_path], cwd=tmp_path,
                             env=child_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not ready.exists() or not ready.read_text():
        assert child.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    pid = int(ready.read_text())
    root, boot = package_paths()
    req = Request(board_dir, pid)
    doc = control_document(req, "attach", ["gil", "queues"], str(board_dir), time.time() + 30, "test", root)
    doc = make_control(doc)
    if doc is not None:
        write_private(req.control, json.dumps(doc).encode())
    # whole or not at all: the child execs the file as soon as it exists (a loaded box once let it read it empty)
    staged = tmp_path / "go.tmp"
    staged.write_text(fixed_program(boot, str(req.control)))
    staged.rename(go)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    result = json.loads(req.result.read_text()) if req.result.exists() else None
    assert not req.control.exists() and not Path(str(req.control) + ".claimed").exists()
    return result, out


def test_bootstrap_loads_the_installed_probes_and_starts_them(tmp_path: Path) -> None:
    result, out = _run_bootstrap(tmp_path, lambda doc: doc)
    assert result is not None and result["ok"], result
    assert result["loaded"].startswith("loaded from") and result["added"] == ["gil", "queues"]
    assert "dflash-diag-board" in out and "dflash-diag-gil-knocker" in out


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: {**d, "pid": 1}, "control file is for PID 1"),
        (lambda d: {**d, "deadline_wall_s": time.time() - 1}, "expired"),
        (lambda d: {**d, "probes": ["gil; import os"]}, "probe names"),
        (lambda d: {**d, "action": "rm"}, "unknown action"),
        (lambda d: {**d, "version": "9.9.9"}, "is not version 9.9.9"),
        (lambda d: {**d, "lease": {"pid": "1", "start_ticks": 5}}, "lease must be"),
        (lambda d: {**d, "lease": {"pid": 1}}, "lease must be"),
    ],
)
def test_bootstrap_refuses_a_bad_control_file_and_starts_nothing(tmp_path: Path, change, message: str) -> None:
    result, out = _run_bootstrap(tmp_path, change)
    assert result is not None and not result["ok"] and message in result["error"], result
    assert "dflash-diag-board" not in out and "SESSION" in out


def test_bootstrap_with_a_cancelled_request_does_nothing(tmp_path: Path) -> None:
    result, out = _run_bootstrap(tmp_path, lambda doc: None)  # no control file: the command cancelled it
    assert result is None
    assert "dflash-diag-board" not in out


def test_bootstrap_refuses_a_foreign_probes_package(tmp_path: Path) -> None:
    foreign = tmp_path / "site" / "probes"
    foreign.mkdir(parents=True)
    (foreign / "__init__.py").write_text('__version__ = "0.0.1"\n')
    result, out = _run_bootstrap(tmp_path, lambda doc: doc, extra_path=(str(foreign.parent),))
    assert result is not None and not result["ok"]
    assert "different 'probes' package" in result["error"] and "0.0.1" in result["error"]
    assert "dflash-diag-board" not in out


def test_bootstrap_uses_the_programs_own_copy_of_the_same_version(tmp_path: Path) -> None:
    import shutil

    site = tmp_path / "site"
    shutil.copytree(ROOT / "probes", site / "probes", ignore=shutil.ignore_patterns("__pycache__"))
    result, out = _run_bootstrap(tmp_path, lambda doc: doc, extra_path=(str(site),))
    assert result is not None and result["ok"], result
    assert result["loaded"] == f"the process's own copy ({site / 'probes' / '__init__.py'})"
    assert "dflash-diag-board" in out


def test_current_frames_never_runs_the_collector_while_it_builds_its_result() -> None:
    """python/cpython#106883: a collection started inside sys._current_frames() runs finalizers while CPython holds
    its thread-list lock, and a finalizer's lock held by a thread that waits for that lock deadlocks the program."""
    import gc
    import sys
    from threading import get_ident as threading_ident

    from probes._common import current_frames

    phases: list[str] = []

    def seen(phase: str, info: dict) -> None:
        phases.append(phase)

    threshold = gc.get_threshold()
    gc.callbacks.append(seen)
    try:
        gc.set_threshold(1, 1, 1)  # any tracked allocation starts a collection
        before = len(phases)  # len() allocates nothing the collector tracks: only the call in between can
        sys._current_frames()
        unguarded = len(phases) - before
        before = len(phases)
        frames = current_frames()
        guarded = len(phases) - before
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(seen)
    assert unguarded, "the allocation inside sys._current_frames() should start a collection at threshold 1"
    assert guarded == 0 and gc.isenabled()
    assert threading_ident() in frames  # this thread's frame is in it
