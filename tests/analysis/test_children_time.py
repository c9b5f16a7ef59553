"""Where a child process the program waits on spends its time, from real recordings (tests/casebook/observations):
`settings12_hvac`, whose feed child encodes JSON with an indent (Python 3.11's pure-Python encoder), and
`settings12_tracks`, whose trainer blocks on a full multiprocessing queue to an exporter child that gzips at level 9.
One /proc reading of a child shows a moment; the child's stack samples show the window."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from dflash_diag.analysis import analyse
from dflash_diag.analysis.classify import explain
from dflash_diag.analysis.hotspots import library_call, library_file, library_place
from dflash_diag.model import Frame, Observation, ThreadSample, ThreadState
from dflash_diag.snapshot.bundle import load_observation

RECORDED = Path(__file__).resolve().parents[1] / "casebook" / "observations"


def _obs(name: str) -> Observation:
    obs = load_observation(str(RECORDED / f"{name}.json.gz"))
    assert isinstance(obs, Observation)
    return obs


def test_a_pipe_from_a_sampled_child_says_the_library_file_the_child_spends_its_time_in() -> None:
    report = analyse(_obs("settings12_hvac__outside"))
    (wait,) = [f for f in report.findings if f.rule_id == "process-wait"]
    assert "on a pipe from process " in wait.claim and "(its child)" in wait.claim
    assert "most of its time inside json/encoder.py (80% of its samples)" in wait.claim
    assert report.headline is not None and "inside json/encoder.py" in report.headline.text


def test_a_multiprocessing_queue_put_waits_on_the_child_not_the_gil() -> None:
    obs = _obs("settings12_tracks__attach")
    states = Counter(explain(t).state for s in obs.stacks for t in s.threads
                     if t.name == "MainThread" and not t.active and t.frames
                     and next(f for f in t.frames if not f.native).filename.endswith("multiprocessing/queues.py"))
    assert states and set(states) == {ThreadState.IDLE}, states


def test_the_path_carries_the_wait_on_a_child_with_where_the_child_spends_its_time() -> None:
    for mode in ("outside", "probes", "attach"):
        report = analyse(_obs(f"settings12_tracks__{mode}"))
        (where,) = [f for f in report.findings if f.rule_id == "where-time-goes"]
        assert "MainThread waits on a child process (`inbox.put(msg, timeout=1.0)`) " in where.claim, mode
        assert "<- child process " in where.claim and "spends ShardWriter.write (exporter.py:41)" in where.claim, mode
        assert "most of it inside GzipFile.write (gzip.py, " in where.claim, mode
    twin = analyse(_obs("settings12_tracks_fixed__outside"))
    assert not [f for f in twin.findings if "waits on a child process" in f.claim]


def _row(*frames: tuple[str, str]) -> tuple[ThreadSample, ThreadState]:
    thread = ThreadSample(thread_id=1, os_thread_id=1, name="feed", active=True, owns_gil=True,
                          frames=tuple(Frame(name=n, filename=f, line=1) for n, f in frames))
    return thread, ThreadState.PYTHON


def test_a_library_file_is_named_where_its_time_splits_over_its_functions_and_no_caller_shows() -> None:
    encoder = "/usr/lib/python3.11/json/encoder.py"
    rows = [_row(("_iterencode_list", encoder)), _row(("_iterencode_dict", encoder)),
            _row(("floatstr", encoder), ("_iterencode_list", encoder)),
            _row(("frame", "/srv/feed/wire.py"), ("main", "/srv/feed/feed.py"))]
    assert library_call(rows) is None  # no single function holds 40%, and no program frame above most of them
    assert library_file(rows) == ("json/encoder.py", 0.75)
    assert library_place(rows) == "inside json/encoder.py (75% of its samples)"
    assert library_file(rows[:1] + rows[3:] * 3) is None  # a quarter of the samples is not where the time goes


def test_a_pool_worker_holding_the_gil_is_named_at_its_job_with_the_library_of_its_work() -> None:
    """A Jinja2 note pool (two ThreadPoolExecutor workers) holds the GIL a third of the window: it was named at the
    pool's own loop, `_worker (thread.py:81)`, where its idle samples sat between jobs (read as native or GIL
    waits), and the library its jobs run in was diluted by them below the share that says it."""
    for mode in ("outside", "probes", "attach"):
        report = analyse(_obs(f"settings12_vetnotes__{mode}"))
        (gil,) = [f for f in report.findings if f.rule_id == "gil-contention"]
        assert "in make_job.<locals>.job (train.py:61), most of it inside jinja2 (" in gil.claim, (mode, gil.claim)
        assert "% of its working samples), entered through Environment.get_template (" in gil.claim, (mode, gil.claim)
        assert "thread.py:81" not in gil.claim, (mode, gil.claim)
