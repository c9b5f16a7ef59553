"""The GIL family (analysis/findings/gil.py): contention, its holder and its waiters."""

from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

from findings_builders import (
    _one,
    _run,
    healthy_board,
    thread_stats,
)

from dflash_diag.analysis import analyse
from dflash_diag.analysis.native import gil_waits
from dflash_diag.model import NativeProfile, Observation, Severity, ThreadState
from dflash_diag.model.sched import EnvRead
from dflash_diag.snapshot.bundle import load_observation
from dflash_diag.sources.native_profile import parse_raw


def test_gil_contention_names_holder_and_waiters() -> None:
    threads = (
        thread_stats("logger", "other", {ThreadState.PYTHON: 0.9}, tid=13, gil_held_pct=90.0),
        thread_stats("drafter-0", "drafter", {ThreadState.GIL_WAIT: 0.5, ThreadState.NATIVE: 0.5}, tid=12),
    )
    b = healthy_board(gil={"contention_share": 0.7, "wait_mean_ms": 9.8, "wait_p99_ms": 43.0,
                           "threads": {"logger": {"cpu_share": 0.95}, "drafter-0": {"cpu_share": 0.3}}})
    f = _one(_run(boards=(b,), threads=threads), "gil-contention")
    assert f.claim.startswith("GIL contention: logger (not a pipeline stage) holds the GIL 90% of the time")
    assert f.claim.endswith("while drafter-0 waits for it (70%)") and f.stages == ("drafter",)
    assert "mean 9.8 ms" in dict(f.evidence)["wait per acquire"]
    assert dict(f.evidence)["CPU by thread (probe)"] == "logger 95%, drafter-0 30%"


def test_gil_contention_from_the_probe_alone() -> None:
    b = healthy_board(gil={"contention_share": 0.8, "wait_mean_ms": 31.0})
    f = _one(_run(boards=(b,), threads=()), "gil-contention")
    assert f.claim == "GIL contention: threads wait for the GIL 80% of the time"


_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cpu"
_RECORDED = Path(__file__).resolve().parents[1] / "casebook" / "observations"


def _with_native(observation: str, raw: str) -> Observation:
    """A recorded window of the casebook's SymPy program with a native profile (py-spy --native --idle) of the same
    program recorded apart: its thread IDs mapped to the window's by thread name."""
    obs = load_observation(str(_RECORDED / observation))
    tids = {t.name: t.os_thread_id for s in obs.stacks for t in s.threads}
    stacks = tuple(replace(s, os_thread_id=tids.get(s.thread_name) or s.os_thread_id)
                   for s in parse_raw(gzip.decompress((_FIXTURES / raw).read_bytes()).decode()))
    native = NativeProfile(rate_hz=20.0, duration_s=3.0, samples=sum(s.count for s in stacks), stacks=stacks)
    reads = (EnvRead("SYMPY_CACHE_SIZE", "16", "sympy/core/cache.py"),)
    return replace(obs, native=native, env_reads=reads)


def test_a_gil_wait_seen_only_in_the_native_stacks_explains_the_limiting_stage_as_information() -> None:
    """The trainer thread limits (the generator is blocked in put), and its Python stacks say it computes; its native
    stacks say it waits for the GIL in 69% of them, while the SymPy generator holds it: the verdict's cause, said as
    information, with where the holder runs and the setting that code reads from the environment."""
    analysis = analyse(_with_native("settings9_calculus__outside.json.gz", "pyspy_native_idle_calculus.raw.gz"))
    f = _one(analysis.findings, "gil-contention")
    assert f.severity is Severity.INFO and f.stages == () and round(f.impact, 2) == 0.69
    assert f.claim.startswith("GIL contention: MainThread waits for the GIL in 69% of its native stack samples")
    assert "while sympy-generator holds it" in f.claim
    assert "sympy/core/cache.py there reads SYMPY_CACHE_SIZE=16 from the environment" in f.claim
    assert analysis.headline is not None and analysis.headline.because == ("gil-contention",)
    assert analysis.headline.severity is Severity.INFO
    obs = _with_native("settings9_calculus__outside.json.gz", "pyspy_native_idle_calculus.raw.gz")
    without = analyse(replace(obs, native=None, env_reads=()))
    assert not [g for g in without.findings if g.rule_id == "gil-contention"]  # no native look: nothing said


def test_a_gil_wait_under_a_fifth_of_the_samples_is_not_said() -> None:
    obs = _with_native("settings9_calculus__outside.json.gz", "pyspy_native_idle_calculus.raw.gz")
    assert obs.native is not None
    # keep the trainer's working samples and a tenth of its GIL waits
    kept = []
    for s in obs.native.stacks:
        if s.thread_name == "MainThread" and gil_waits((s,)).waiting:
            if s.count < 4:
                continue
            s = replace(s, count=1)
        kept.append(s)
    thin = replace(obs, native=replace(obs.native, stacks=tuple(kept)))
    waits = gil_waits(s for s in kept if s.thread_name == "MainThread")
    assert waits.share < 0.2
    assert not [g for g in analyse(thin).findings if g.rule_id == "gil-contention"]


def _recorded(name: str) -> list:
    obs = load_observation(str(_RECORDED / name))
    return [f for f in analyse(replace(obs, now_wall_s=obs.now_wall_s)).findings if f.rule_id == "gil-contention"]


def test_a_thread_that_feeds_the_trainer_holding_the_gil_is_information() -> None:
    # A queue's producer (the casebook's ticket featurizer, pure Python, a healthy program): the trainer waits for the
    # GIL 39-51% of its samples while the producer holds it, the price of one interpreter for one pipeline.
    (f,) = _recorded("settings10_tickets_fixed__outside.json.gz")
    assert f.severity == Severity.INFO
    assert "featurizer makes what MainThread consumes: the threads of one pipeline share the interpreter" in f.claim
    # A thread pool's workers (the fraud program's featurizers, a healthy run): they run what the program submitted,
    # for whoever collects the futures, even where the trainer keeps ahead of them and never waits on one.
    assert all(f.severity < Severity.WARNING for f in _recorded("settings11_fraud_fixed__probes.json.gz"))


def test_a_side_thread_holding_the_gil_is_still_a_warning() -> None:
    # The casebook's telemetry thread recomputing percentiles: off the training path, its cost avoidable.
    (f,) = _recorded("gil_hog_side_thread__outside.json.gz")
    assert f.severity == Severity.WARNING and "telemetry" in f.claim


def _recorded_gil_claim(name: str) -> str:
    """The `gil-contention` claim doctor makes of a recorded casebook observation (py-spy, this CPU box)."""
    path = Path(__file__).resolve().parents[1] / "casebook" / "observations" / f"{name}.json.gz"
    report = analyse(load_observation(str(path)))
    return next(f.claim for f in report.findings if f.rule_id == "gil-contention")


def test_the_holders_c_code_is_said_where_its_python_names_nothing_below_its_line() -> None:
    """A reader thread that holds the GIL in ``self.unpickler.load()`` (a text-protocol pickle on a pipe): its
    Python frames end at that line, its native samples are the unpickler's; a holder whose native samples are
    torch's kernels (which release the GIL) gets no such note."""
    claim = _recorded_gil_claim("settings13_rainfall__outside")
    assert "wire-reader holds it" in claim and "(its native samples: load [_pickle.c] 100%" in claim, claim
    main_holds = _recorded_gil_claim("settings13_playlists__probes")
    assert "MainThread holds it" in main_holds and "its native samples" not in main_holds, main_holds
