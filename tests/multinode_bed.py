"""A real two-node job on one machine: two torchrun launchers (``--nnodes 2``, c10d rendezvous on 127.0.0.1), two
gloo ranks each, every launcher's command wrapped in ``dflash-diag run`` so each rank gets the probes (the mailbox
among them). The test bed of the mailbox (tests/cli/test_doctor_twonode.py) and of the Flight Recorder fixtures
(tests/fixtures/flightrec/record.py).

c10d rendezvous ignores ``--node-rank``: which launcher becomes node 0 (GROUP_RANK 0, ranks 0-1) is decided at
rendezvous, so :class:`TwoNodeJob` finds it afterwards from its ranks' environments. Light on purpose: the machine
has two cores shared with others (4 ranks, a short sleep per step).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "tests" / "casebook" / "programs"
_RUN_PID = re.compile(r"dflash-diag run: PID (\d+) under probes")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.decode(errors="replace").partition("=")[::2] for item in raw.split(b"\0") if b"=" in item)


def children(pid: int) -> list[int]:
    """The PIDs of ``pid``'s children (torchrun's ranks: each in a session of its own, so a kill of the launcher's
    process group leaves them running)."""
    return _children(pid)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
    except OSError:
        pass
    return out


@dataclass
class Node:
    """One launcher: ``run_pid`` (dflash-diag run), ``launcher_pid`` (torchrun), its ranks once started."""

    index: int  # the order it was started in (not its GROUP_RANK)
    proc: subprocess.Popen[bytes]
    log: Path
    launcher_pid: int | None = None
    group_rank: int | None = None
    ranks: dict[int, int] = field(default_factory=dict)  # global rank -> PID

    def text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""


@dataclass
class TwoNodeJob:
    work: Path
    nodes: list[Node]

    def node(self, group_rank: int) -> Node:
        return next(n for n in self.nodes if n.group_rank == group_rank)

    def find_ranks(self, timeout_s: float = 240.0) -> None:
        """Wait until every launcher started its two ranks; note each launcher's GROUP_RANK and rank PIDs."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for n in self.nodes:
                if n.launcher_pid is None:
                    m = _RUN_PID.search(n.text())
                    n.launcher_pid = int(m.group(1)) if m else None
                if n.launcher_pid is not None:
                    for child in _children(n.launcher_pid):
                        env = _environ(child)
                        if env.get("RANK", "").isdigit():
                            n.ranks[int(env["RANK"])] = child
                            n.group_rank = int(env["GROUP_RANK"]) if env.get("GROUP_RANK", "").isdigit() else None
            if all(len(n.ranks) == 2 and n.group_rank is not None for n in self.nodes):
                return
            if any(n.proc.poll() is not None for n in self.nodes):
                raise RuntimeError("a launcher exited before its ranks started:\n" + self.logs())
            time.sleep(0.3)
        raise RuntimeError(f"the ranks did not start within {timeout_s:.0f} s:\n" + self.logs())

    def wait_for(self, pattern: str, count: int = 1, timeout_s: float = 240.0) -> None:
        """Until ``pattern`` appeared ``count`` times in the launchers' logs together."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if sum(len(rx.findall(n.text())) for n in self.nodes) >= count:
                return
            if all(n.proc.poll() is not None for n in self.nodes):
                break
            time.sleep(0.3)
        raise RuntimeError(f"no {count} x /{pattern}/ within {timeout_s:.0f} s:\n" + self.logs())

    def logs(self, tail_chars: int = 3000) -> str:
        return "\n".join(f"--- launcher {n.index} (GROUP_RANK {n.group_rank}):\n{n.text()[-tail_chars:]}"
                         for n in self.nodes)


def _launcher_argv(program: Path, script: str, node_rank: int, port: int, run_id: str, probes: bool) -> list[str]:
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node_rank),
                "--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
                "--rdzv-id", run_id, "--max-restarts", "0", "--monitor-interval", "0.5", str(program / script)]
    return [sys.executable, "-m", "dflash_diag", "run", "--", *torchrun] if probes else torchrun


@contextmanager
def two_node_job(program: str, *, script: str = "train.py", env: dict[str, str] | None = None,
                 probes: bool = True, keep: bool = False) -> Iterator[TwoNodeJob]:
    """Start ``tests/casebook/programs/<program>/<script>`` as a 2 x 2 gloo job; stop both launchers at the end."""
    work = Path(tempfile.mkdtemp(prefix=f"twonode-{program}-"))
    os.chmod(work, 0o700)
    (work / "boards").mkdir(mode=0o700)
    shutil.copytree(PROGRAMS / program, work / "program")
    full_env = {**os.environ, "DFLASH_DIAG_BOARD_DIR": str(work / "boards"), "PYTHONUNBUFFERED": "1",
                "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    full_env.pop("DFLASH_DIAG_RUN_TOKEN", None)
    port, run_id = free_port(), f"twonode-{os.getpid()}-{int(time.time())}"
    nodes: list[Node] = []
    try:
        for index in range(2):
            log = work / f"launcher{index}.log"
            with open(log, "wb") as out:
                proc = subprocess.Popen(_launcher_argv(work / "program", script, index, port, run_id, probes),
                                        cwd=work / "program", env=full_env, stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
            nodes.append(Node(index=index, proc=proc, log=log, launcher_pid=None if probes else proc.pid))
        job = TwoNodeJob(work=work, nodes=nodes)
        yield job
    finally:
        # torchrun starts each rank in a session of its own: stopping a launcher's session does not reach them when
        # the launcher itself has to be killed. Every rank found (or below a launcher now) is killed after it.
        ranks = {pid for n in nodes for pid in n.ranks.values()}
        ranks |= {c for n in nodes if n.launcher_pid is not None for c in _children(n.launcher_pid)}
        for n in nodes:
            _stop(n.proc)
        for pid in ranks:
            try:
                if str(work) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):  # not a reused PID
                    os.kill(pid, signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the launcher's session (torchrun passes it to its ranks), SIGKILL what is left after 10 s."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        pass
