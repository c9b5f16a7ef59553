"""`doctor BUNDLE...`: one job's per-node observations (each node's `snapshot --node`) judged as one job. The job
fixtures are real recorded jobs (tests/fixtures/jobs/), split by rank into the nodes that would have held them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from job_fixtures import load_job

from dflash_diag.analysis import analyse
from dflash_diag.model.job import JobObservation
from dflash_diag.observe.codec import encode_observation
from dflash_diag.observe.merge import MergeError, merge_node_observations

CLI = [sys.executable, "-m", "dflash_diag"]


def _node(job: JobObservation, ranks: set[int], started_shift_s: float = 0.0) -> JobObservation:
    keep = [i for i, r in enumerate(job.topology.ranks) if r.rank in ranks]
    topology = replace(job.topology, ranks=tuple(job.topology.ranks[i] for i in keep))
    return replace(job, topology=topology, ranks=tuple(job.ranks[i] for i in keep),
                   started_wall_s=job.started_wall_s + started_shift_s)


def _split(name: str) -> tuple[JobObservation, JobObservation, JobObservation]:
    job = load_job(name)
    ranks = sorted(r.rank for r in job.topology.ranks if r.rank is not None)
    half = len(ranks) // 2
    return job, _node(job, set(ranks[:half])), _node(job, set(ranks[half:]), 1.5)


@pytest.mark.parametrize("name", ["ddp_straggler", "ddp_rank0_barrier", "ddp_healthy"])
def test_two_nodes_judged_together_are_the_whole_job(name: str) -> None:
    whole, node0, node1 = _split(name)
    merged = merge_node_observations([("node0.tar.gz", node0), ("node1.tar.gz", node1)])
    assert [r.rank for r in merged.topology.ranks] == [r.rank for r in whole.topology.ranks]
    assert "2 node bundles judged together" in merged.topology.notes[0]
    together, alone = analyse(merged), analyse(whole)
    assert together.headline is not None and alone.headline is not None
    assert together.headline.rule_id == alone.headline.rule_id
    assert {f.rule_id for f in together.findings if f.severity.label != "info"} == \
        {f.rule_id for f in alone.findings if f.severity.label != "info"}


def test_the_straggler_on_the_other_node_is_named_only_when_both_are_read() -> None:
    whole, node0, node1 = _split("ddp_straggler")
    slow = next(f for f in analyse(whole).findings if f.rule_id == "rank-straggler")
    holder = node0 if any(s in slow.claim for s in (f"rank {r.rank} " for r in node0.topology.ranks)) else node1
    other = node1 if holder is node0 else node0
    assert "rank-straggler" not in {f.rule_id for f in analyse(other).findings}  # one node alone cannot see it
    merged = merge_node_observations([("a", node0), ("b", node1)])
    assert "rank-straggler" in {f.rule_id for f in analyse(merged).findings}


def test_bundles_of_one_process_of_two_jobs_or_one_rank_twice_are_refused() -> None:
    whole, node0, node1 = _split("ddp_straggler")
    with pytest.raises(MergeError, match="holds one process"):
        merge_node_observations([("a", node0), ("p", whole.ranks[0])])
    with pytest.raises(MergeError, match="is in a and in b"):
        merge_node_observations([("a", node0), ("b", node0)])
    other = replace(node1, topology=replace(node1.topology, ranks=tuple(
        replace(r, world_size=(r.world_size or 0) + 4) for r in node1.topology.ranks)))
    with pytest.raises(MergeError, match="different jobs"):
        merge_node_observations([("a", node0), ("b", other)])


@pytest.mark.slow
def test_doctor_reads_several_node_files_as_one_job(tmp_path: Path) -> None:
    whole, node0, node1 = _split("ddp_straggler")
    paths = []
    for i, node in enumerate((node0, node1)):
        path = tmp_path / f"node{i}.json"
        path.write_bytes(encode_observation(node, tool_version="test"))
        os.chmod(path, 0o600)
        paths.append(str(path))
    out = subprocess.run([*CLI, "doctor", *paths, "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["headline"]["rule_id"] == analyse(whole).headline.rule_id  # type: ignore[union-attr]
    twice = subprocess.run([*CLI, "doctor", paths[0], paths[0]], capture_output=True, text=True, timeout=120)
    assert twice.returncode == 6 and "give each node's bundle once" in twice.stderr
    assert "Traceback" not in twice.stderr and len(twice.stderr.strip().splitlines()) == 1
    pid = subprocess.run([*CLI, "doctor", paths[0], "123"], capture_output=True, text=True, timeout=120)
    assert pid.returncode == 2 and "is a PID" in pid.stderr
