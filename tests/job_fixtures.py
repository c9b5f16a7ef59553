"""The job fixtures (tests/fixtures/jobs, recorded by its record.py) as the job collector would return them: one
Observation per rank, with the probes' readings and a launcher's report laid over them where a test asks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dflash_diag.model import NA, Board, Observation, ProcessFacts, WriterIdentity
from dflash_diag.model.job import ASKED_LAUNCHER, JobObservation, JobTopology, RankIdentity
from dflash_diag.sources.pyspy_json import stack_sample_from_json

JOBS = Path(__file__).resolve().parent / "fixtures" / "jobs"
SPACING_S = 0.3  # between two rounds of dumps, as recorded (one round dumps every rank in turn)
NOW = 1_800_000_000.0


def fixture_doc(name: str) -> dict[str, Any]:
    return json.loads((JOBS / f"{name}.json").read_text())


def load_job(name: str, *, drop_rank: int | None = None, boards: dict[int, list[dict[str, Any]]] | None = None,
             launcher_stderr: str | None = None, restart_count: int | None = None) -> JobObservation:
    """A recorded job as the collector would return it: one Observation per rank, its stacks in time order."""
    doc = fixture_doc(name)
    lines = {key: text for key, text in doc["lines"].items()}
    stderr = doc["stderr_tail"]
    ranks, observations = [], []
    for row in doc["ranks"]:
        if row["rank"] == drop_rank:
            continue
        pid = row["pid"]
        identity = RankIdentity(pid=pid, start_ticks=1, rank=row["rank"], local_rank=row["local_rank"],
                                world_size=row["world_size"], local_world_size=row["local_world_size"],
                                restart_count=restart_count, max_restarts=3 if restart_count is not None else None)
        dumps = doc["dumps"][str(pid)]
        stacks = tuple(stack_sample_from_json(e["dump"], pid=pid, monotonic_s=i * SPACING_S,
                                              wall_s=NOW - 10 + i * SPACING_S, duration_s=e["seconds"], native=False)
                       for i, e in enumerate(dumps))
        rank_boards: Any = NA("no probe board")
        if boards is not None and row["rank"] in boards:
            rank_boards = tuple(_board(pid, payload, NOW - 5 + i) for i, payload in enumerate(boards[row["rank"]]))
        observations.append(Observation(
            pid=pid, cmdline=("python3", "-u", "train.py"), started_wall_s=NOW - 10, window_s=len(dumps) * SPACING_S,
            stacks=stacks, proc=(), gpus=NA("no NVML"), boards=rank_boards, process_alive=True, warnings=(),
            source_lines=lines,
            process=ProcessFacts(state="S", start_wall_s=NOW - 60, stderr_target="/tmp/job/out.log",
                                 stderr_tail=stderr, stderr_mtime_wall_s=NOW - 2)))
        ranks.append(identity)
    topology = JobTopology(asked_pid=doc["launcher_pid"], asked=ASKED_LAUNCHER, launcher_pid=doc["launcher_pid"],
                           launcher_cmdline=("python3", "-m", "torch.distributed.run"), ranks=tuple(ranks))
    launcher = None
    if launcher_stderr is not None:
        launcher = ProcessFacts(state="S", start_wall_s=NOW - 120, stderr_target="/tmp/job/out.log",
                                stderr_tail=launcher_stderr)
    return JobObservation(topology=topology, ranks=tuple(observations), started_wall_s=NOW - 10,
                          window_s=max(o.window_s for o in observations), launcher_alive=True, launcher=launcher,
                          now_wall_s=NOW)


def _board(pid: int, payload: dict[str, Any], wall: float) -> Board:
    writer = WriterIdentity(pid=pid, start_time_ticks=1, argv=("python3",), python="3.11", torch="2.13",
                            hostname="h")
    return Board(schema="dflash-diag.board/1", writer=writer, seq=int(wall), wall_time_s=wall, interval_s=1.0,
                 threads={}, probes={"collectives": payload}, app={}, path=f"/b/{pid}.json")


