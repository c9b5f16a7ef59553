"""analysis/flightrec.py on Flight Recorder dumps recorded from real two-node gloo jobs (tests/fixtures/flightrec/,
re-recorded by its record.py: each rank's answer as its mailbox probe wrote it to the job's store): the rank that
never entered a collective is named with the collective and how long the others have waited in it; a rank that
broadcast where the others all-reduced is a type mismatch at that sequence number; a healthy and a merely slow job
have no mismatch and nobody waiting for long. torch's own analyzer, given the same dumps, agrees."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from dflash_diag.analysis.flightrec import completed, match_flight_recorder
from dflash_diag.model.flightrec import MISMATCH_DTYPE, MISMATCH_SIZE, MISMATCH_TYPE, FlightRecorderAnalysis
from dflash_diag.model.mailbox import FrDump
from dflash_diag.sources.mailbox import parse_flight_recorder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flightrec"


def _dumps(scenario: str) -> list[FrDump]:
    return [parse_flight_recorder(path.read_bytes(), rank=int(path.stem[4:]))
            for path in sorted((FIXTURES / scenario).glob("rank*.json"))]


def _analysis(scenario: str) -> FlightRecorderAnalysis:
    return match_flight_recorder(_dumps(scenario), world_size=4)


def test_the_fixtures_are_real_dumps_of_every_rank() -> None:
    for scenario in ("healthy", "missing_rank", "slow_rank", "mismatch_op"):
        meta = json.loads((FIXTURES / scenario / "meta.json").read_text())
        dumps = _dumps(scenario)
        assert [d.rank for d in dumps] == [0, 1, 2, 3] and meta["silent_ranks"] == [], scenario
        assert all(d.version and d.entries and d.dump_wall_ns for d in dumps), scenario


def test_the_rank_that_never_entered_the_collective_is_named() -> None:
    result = _analysis("missing_rank")
    (group,) = result.groups
    assert group.pg_desc == "default_pg" and group.ranks == (0, 1, 2, 3) and group.members_known
    pending = group.pending
    assert pending is not None
    assert pending.missing_ranks == (3,) and pending.waiting_ranks == (0, 1, 2) and not pending.all_entered
    assert pending.ref.op == "all_reduce" and pending.ref.seq == group.last_completed_by_all.seq + 1  # type: ignore[union-attr]
    # recorded 8 s after rank 3 stopped: the others have waited that long, each by its own clock
    assert pending.waiting_since_s is not None and pending.waiting_since_s > 5.0
    assert pending.waiting_since_s > 3 * (group.dump_spread_s or 0.0)
    assert group.mismatches == () and result.undumped_ranks == ()


def test_a_broadcast_against_all_reduces_is_a_type_mismatch_where_every_rank_waits() -> None:
    (group,) = _analysis("mismatch_op").groups
    first = group.mismatches[0]
    assert first.kind == MISMATCH_TYPE and first.values == (("all_reduce", (0, 1, 2)), ("broadcast", (3,)))
    assert group.pending is not None and group.pending.ref.seq == first.seq
    assert group.pending.waiting_ranks == (0, 1, 2, 3) and group.pending.missing_ranks == ()


@pytest.mark.parametrize("scenario", ["healthy", "slow_rank"])
def test_a_training_job_has_no_mismatch_and_no_long_wait(scenario: str) -> None:
    """Dumps of a job that trains are taken up to a second apart (each rank answers at its next poll): a rank's
    dump can predate a collective its peers are in. That is not a hang: the wait is shorter than the spread."""
    (group,) = _analysis(scenario).groups
    assert group.mismatches == ()
    assert group.last_completed_by_all is not None and group.last_completed_by_all.seq > 20
    pending = group.pending
    assert pending is None or (pending.waiting_since_s or 0.0) < max(1.0, group.dump_spread_s or 0.0)


def test_a_rank_without_a_dump_is_not_called_missing() -> None:
    dumps = [d for d in _dumps("missing_rank") if d.rank != 1]
    (group,) = match_flight_recorder(dumps, world_size=4).groups
    assert group.pending is not None and group.pending.undumped_ranks == (1,)
    assert group.pending.missing_ranks == (3,) and group.pending.waiting_ranks == (0, 2)
    assert match_flight_recorder(dumps, world_size=4).undumped_ranks == (1,)


def _changed(dumps: list[FrDump], rank: int, seq: int, **fields: object) -> list[FrDump]:
    out = []
    for dump in dumps:
        if dump.rank == rank:
            entries = tuple(dataclasses.replace(e, **fields) if e.collective_seq_id == seq else e for e in dump.entries)
            dump = dataclasses.replace(dump, entries=entries)
        out.append(dump)
    return out


def test_size_and_dtype_differences_are_told_apart() -> None:
    """gloo aborts a job whose ranks all-reduce different sizes or dtypes (the recorder's mismatch_size and
    mismatch_dtype runs ended before anything could be asked), so these start from a real dump and change one
    rank's entry, as a stale config on NCCL (which does not check) would."""
    dumps = _dumps("healthy")
    seq = 10
    sized = match_flight_recorder(_changed(dumps, 2, seq, input_sizes=((99,),), output_sizes=((99,),)), 4)
    assert [(m.seq, m.kind) for m in sized.groups[0].mismatches] == [(seq, MISMATCH_SIZE)]
    assert sized.groups[0].mismatches[0].values[1][1] == (2,)
    typed = match_flight_recorder(_changed(dumps, 1, seq, input_dtypes=("Double",), output_dtypes=("Double",)), 4)
    assert [(m.seq, m.kind) for m in typed.groups[0].mismatches] == [(seq, MISMATCH_DTYPE)]


def test_an_earlier_group_of_the_same_name_is_left_out() -> None:
    """A process that destroyed its default group and made a new one keeps the old one's entries under the same
    name "0" and an older uid: matched with the live group's, rank 0 would look ahead of everyone."""
    dumps = []
    for dump in _dumps("missing_rank"):
        entries = tuple(dataclasses.replace(e, pg_id=5) for e in dump.entries)
        if dump.rank == 0:
            old = tuple(dataclasses.replace(e, pg_id=1, collective_seq_id=(e.collective_seq_id or 0) + 100)
                        for e in dump.entries if completed(e))
            entries = old + entries
        dumps.append(dataclasses.replace(dump, entries=entries))
    pending = match_flight_recorder(dumps, world_size=4).groups[0].pending
    assert pending is not None and pending.missing_ranks == (3,) and pending.waiting_ranks == (0, 1, 2)


def test_completion_follows_the_backend() -> None:
    entry = _dumps("missing_rank")[0].entries[-1]
    assert not completed(entry) and completed(dataclasses.replace(entry, retired=True))  # gloo: retired is done
    nccl = dataclasses.replace(entry, profiling_name="nccl:all_reduce", retired=True, state="scheduled")
    assert not completed(nccl)  # NCCL retires a timed-out entry too: only "completed" is done
    assert completed(dataclasses.replace(nccl, state="completed"))


def _torch_dump(dump: FrDump) -> dict[str, object]:
    """A dump in torch's own format, its group config keyed by the name the entries carry (gloo's own dumps key
    it by an empty name, which torch 2.13's analyzer cannot join: KeyError)."""
    config = {}
    for e in dump.entries:
        ranks = next(g.ranks for g in dump.groups if g.pg_id == str(e.pg_id))
        config[e.pg_name] = {"name": e.pg_name, "desc": e.pg_desc, "ranks": str(list(ranks or ()))}
    entries = [{"record_id": e.record_id, "pg_id": e.pg_id, "process_group": (e.pg_name, e.pg_desc),
                "collective_seq_id": e.collective_seq_id, "p2p_seq_id": e.p2p_seq_id, "op_id": e.op_id,
                "profiling_name": e.profiling_name, "time_created_ns": e.time_created_ns,
                "input_sizes": [list(s) for s in e.input_sizes], "input_dtypes": list(e.input_dtypes),
                "output_sizes": [list(s) for s in e.output_sizes], "output_dtypes": list(e.output_dtypes),
                "state": e.state, "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
                "retired": e.retired, "timeout_ms": e.timeout_ms, "is_p2p": e.is_p2p, "frames": []}
               for e in dump.entries]
    return {"version": dump.version, "pg_config": config, "pg_status": {}, "entries": entries, "rank": dump.rank}


def test_torchs_own_analyzer_agrees_on_the_same_dumps() -> None:
    builder = pytest.importorskip("torch.distributed.flight_recorder.components.builder")
    config = pytest.importorskip("torch.distributed.flight_recorder.components.config_manager")
    args = config.JobConfig().parse_args(["unused"])
    missing = builder.build_db({f"r{d.rank}": _torch_dump(d) for d in _dumps("missing_rank")}, args, "2.10")
    ours = _analysis("missing_rank").groups[0].pending
    flagged = [c for c in missing.collectives if c.missing_ranks]
    assert [(c.collective_seq_id, set(c.missing_ranks)) for c in flagged] == [(ours.ref.seq, set(ours.missing_ranks))]  # type: ignore[union-attr]
    healthy = builder.build_db({f"r{d.rank}": _torch_dump(d) for d in _dumps("healthy")}, args, "2.10")
    assert all(c.pass_check for c in healthy.collectives[:100])
    mismatch = builder.build_db({f"r{d.rank}": _torch_dump(d) for d in _dumps("mismatch_op")}, args, "2.10")
    first = _analysis("mismatch_op").groups[0].mismatches[0]
    assert [c.collective_seq_id for c in mismatch.collectives if not c.pass_check] == [first.seq]
