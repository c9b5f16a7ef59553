"""A training thread blocked part of the time on a lock another process holds, from real recordings
(tests/casebook/observations: `settings2_metrics`, whose trainer flocks a metrics file its shipper child keeps locked
across an upload, and its twin, whose shipper holds the same lock only to copy the file). The /proc sweeps see the
wait twice a second; the stacks 20 times: the samples between two sweeps at the line that made the call are the same
wait."""

from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

from dflash_diag.analysis import analyse
from dflash_diag.analysis.peers import outside_wait, wait_sites
from dflash_diag.model import Observation
from dflash_diag.observe.codec import read_observation

RECORDED = Path(__file__).resolve().parents[1] / "casebook" / "observations"


def _obs(name: str) -> Observation:
    obs = read_observation(gzip.open(RECORDED / f"{name}.json.gz").read())
    assert isinstance(obs, Observation)
    return obs


def _trainer_off_cpu(obs: Observation) -> list[tuple[float, object]]:
    return [(s.monotonic_s, t) for s in obs.stacks for t in s.threads
            if t.name == "trainer" and not t.active and not t.owns_gil]


def test_samples_between_two_sweeps_at_the_line_where_the_wait_was_seen_are_that_wait() -> None:
    obs = _obs("settings2_metrics__attach")
    off = _trainer_off_cpu(obs)
    near = [t_s for t_s, t in off if outside_wait(obs, t, t_s) is not None]  # type: ignore[arg-type]
    sites = wait_sites(obs)
    at_site = [t_s for t_s, t in off if outside_wait(obs, t, t_s, sites) is not None]  # type: ignore[arg-type]
    assert 0 < len(near) < len(at_site) <= len(off)
    assert all(line == 88 and path.endswith("train.py") for _, path, line in sites)  # MetricsWriter.write's flock


def test_a_sample_at_another_line_is_not_taken_for_the_wait() -> None:
    obs = _obs("settings2_metrics__attach")
    sites = wait_sites(obs)
    t_s, thread = next((t_s, t) for t_s, t in _trainer_off_cpu(obs)
                       if outside_wait(obs, t, t_s) is None)  # type: ignore[arg-type]
    moved = replace(thread, frames=tuple(replace(f, line=f.line + 1000) for f in thread.frames))  # type: ignore[arg-type]
    assert outside_wait(obs, moved, t_s, sites) is None


def test_the_trainer_blocked_on_its_childs_file_lock_is_the_cause_in_the_headline() -> None:
    report = analyse(_obs("settings2_metrics__attach"))
    found = next(f for f in report.findings if f.rule_id == "process-wait")
    assert found.severity.name == "WARNING" and found.impact >= 0.25
    assert found.claim.startswith("trainer spends ") and "blocked at MetricsWriter.write (train.py:88)" in found.claim
    assert "a file lock on `" in found.claim and "(its child)" in found.claim and "shipper.py" in found.claim
    assert report.headline is not None and "file lock" in report.headline.text


def test_a_twin_that_holds_the_lock_only_to_copy_is_not_warned() -> None:
    for mode in ("outside", "probes", "attach"):
        report = analyse(_obs(f"settings2_metrics_fixed__{mode}"))
        assert not [f for f in report.findings if f.rule_id == "process-wait" and f.severity.name != "INFO"], mode


def test_a_wait_is_placed_at_the_line_most_of_its_readings_land_on_when_the_stacks_clock_lags() -> None:
    """settings11_seismic under `run`: the trainer reads a one-page pipe from its decoder child. The window read the
    wait three times, and the stacks' clock ran about 0.1 s behind the sweeps': no reading has an off-CPU sample at
    its line within 0.1 s, two have one within 0.35 s. The line is found, and the path says the wait with the
    pipe's capacity."""
    obs = _obs("settings11_seismic__probes")
    sites = wait_sites(obs)
    assert [(path.rsplit("/", 1)[-1], line) for _, path, line in sites] == [("train.py", 55)]  # read_batch's readinto
    report = analyse(obs)
    where = next(f for f in report.findings if f.rule_id == "where-time-goes")
    assert "MainThread blocked " in where.claim and "at read_batch (train.py:55) on a pipe from process" in where.claim
    assert "the pipe's capacity is 4 KiB" in where.claim
    assert report.headline is not None and "the pipe's capacity is 4 KiB" in report.headline.text


def test_a_line_one_reading_alone_lands_on_is_not_the_wait_where_most_land_elsewhere() -> None:
    """Moving the one off-CPU sample nearest to one reading to another line leaves the wait at the line the others
    land on: a single reading does not place the wait (the run from outside read it four times)."""
    obs = _obs("settings11_seismic__outside")
    tid = obs.outside_waits[0].tid
    first = obs.outside_waits[0].monotonic_s
    off = [(i, s) for i, s in enumerate(obs.stacks) for t in s.threads
           if t.os_thread_id == tid and not t.active and not t.owns_gil]
    i, nearest = min(off, key=lambda p: abs(p[1].monotonic_s - first))
    moved = replace(nearest, threads=tuple(
        replace(t, frames=tuple(replace(f, line=f.line + 1000) for f in t.frames)) if t.os_thread_id == tid else t
        for t in nearest.threads))
    stacks = obs.stacks[:i] + (moved,) + obs.stacks[i + 1:]
    sites = wait_sites(replace(obs, stacks=stacks))
    assert {line for _, _, line in sites} == {55}


def _headline(name: str) -> str:
    report = analyse(_obs(name))
    assert report.headline is not None
    return report.headline.text


def test_a_pipe_writers_tiny_writes_and_a_sockets_request_reply_peer_are_said() -> None:
    """Real recordings (settings batch 14, recorded again with the peers' /proc/PID/io): the export reader waits on
    a logger child whose unbuffered stdout makes a write(2) of ~3 bytes per field; the collator waits on a unix
    socket to a multiprocessing manager's server, found through sock_diag, which answers one small message per
    call. Their twins (a buffered logger, a pipe queue) say neither."""
    logger = _headline("settings14_apiary__outside")
    assert "on a pipe from process" in logger and "(its child)" in logger
    assert "write calls a second of 3 bytes each on average: a system call per few bytes (its output is not " \
           "buffered" in logger
    manager = _headline("settings14_parcels__attach")
    assert "on a unix socket connection from process" in manager and "serve_client (managers.py" in manager
    assert "request and reply messages, a round trip per call" in manager
    for twin in ("settings14_apiary_fixed__outside", "settings14_parcels_fixed__outside"):
        text = _headline(twin)
        assert "a system call per few bytes" not in text and "round trip" not in text and "unix socket" not in text


def test_the_settings_a_peer_or_the_children_were_started_with_are_said() -> None:
    """Batch 15, recorded again with the peers' and children's environments: the `sort` child the crawl thread
    waits on runs under LC_ALL=C.UTF-8 (a launcher's setting, the locale's collation where bytes would do), and the
    decoder children spend their samples importing modules, started with an empty PYTHONPYCACHEPREFIX. Their twins
    say neither; the logger child, a Python process, is said with the interpreter's setting it was started with."""
    sort_wait = _headline("settings15_headlines__outside")
    assert "`sort -f -u" in sort_wait and "started with LC_ALL=C.UTF-8 (the C library's locale" in sort_wait
    assert "PYTHONUNBUFFERED" not in sort_wait  # inherited, and sort is no Python
    decoders = _headline("settings15_orchard__probes")
    assert "import modules" in decoders and "started with PYTHONPYCACHEPREFIX=<set> (the .pyc cache" in decoders
    assert "started with PYTHONUNBUFFERED=1" in _headline("settings14_apiary__attach")
    for twin in ("settings15_headlines_fixed__outside", "settings15_orchard_fixed__probes"):
        assert "started with" not in _headline(twin)


def test_a_new_connection_per_request_is_said_with_the_stage_that_waits_on_it() -> None:
    """Batch 15's fetcher, recorded again: with keep-alive off, hundreds of connections to its feature service
    closed in the last minute (TIME_WAIT) are said beside where its stage waits; the keep-alive twin says none."""
    import re
    text = _headline("settings15_ferry__attach")
    assert re.search(r"its own threads are not computing: .*; [\d,]+ TCP connections to 127\.0\.0\.1:\d+, which the "
                     r"process uses, were closed in the last minute \(TIME_WAIT", text)
    assert "a new connection per request (no keep-alive" in text
    assert "TIME_WAIT" not in _headline("settings15_ferry_fixed__attach")


def test_a_value_the_configuration_changed_that_the_waited_on_processs_script_reads_is_said_with_it() -> None:
    # The pacing program's tile server child: its script (read from its command line) reads the profile's
    # max_pacing_mbit, which the profile sets away from the code's declared default.
    from dflash_diag.analysis.peers import child_places
    from dflash_diag.model.evidence import DeclaredDefault, SourceFile

    obs = _obs("settings24_mesa__outside")
    server = next(p.pid for w in obs.outside_waits for p in w.peers)
    profile = SourceFile(path="/app/runprofile.py", exists=True, mtime_wall_s=1.0, imported_by="train.py",
                         overridden=(DeclaredDefault(name="max_pacing_mbit", default="0", line=21, note="0: no cap",
                                                     configured="300", configured_in="mesa_uplink.toml"),))
    script = SourceFile(path="/app/tileserver.py", exists=True, mtime_wall_s=1.0, imported_by=f"process {server}",
                        reads_departures=(("max_pacing_mbit", 40),), run_by=server)
    obs = replace(obs, files=(*obs.files, profile, script))
    assert child_places(obs)[server].endswith(
        "its script reads a value the run's configuration sets away from the code's default: `max_pacing_mbit` = 300 "
        "in mesa_uplink.toml (the code's default 0 at runprofile.py:21), read at tileserver.py:40")
    found = next(f for f in analyse(obs).findings if f.rule_id == "process-wait")
    assert "`max_pacing_mbit` = 300 in mesa_uplink.toml" in found.claim, found.claim
