"""`changed-value-at-hot-call` on real recordings (tests/casebook/observations): batch 25's held-out programs, whose
profiles change one value from the code's declared default, and their twins, which keep it.

- turnstone's negative miner spends most of its time in `np.argsort(..., kind=kind)`, the argument traced to
  `tie_break`, which its profile sets to 'stable' (the code's default 'any');
- linnet's song augmenter spends most of its time in `continue_songs(model, gen, ...)`, whose model and generation
  config were built with `use_cache` from the profile (False; the code's default True): the reader joins that
  call to what its objects were built from (``SourceFile.carries``; recorded again after the join was written).
"""
from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

from dflash_diag.analysis import analyse
from dflash_diag.model import Observation, Severity
from dflash_diag.model.evidence import ENV_LIBRARY, KnobUse, SourceFile
from dflash_diag.observe.codec import read_observation

RECORDED = Path(__file__).resolve().parents[1] / "casebook" / "observations"
RULE = "changed-value-at-hot-call"


def _obs(name: str) -> Observation:
    obs = read_observation(gzip.open(RECORDED / f"{name}.json.gz").read())
    assert isinstance(obs, Observation)
    return obs


def _with_file(obs: Observation, name: str, **changes: object) -> Observation:
    return replace(obs, files=tuple(replace(f, **changes) if f.path.endswith("/" + name) else f  # type: ignore[arg-type]
                                    for f in obs.files))


def test_the_call_holding_a_stages_time_with_a_value_the_profile_changed_is_its_because() -> None:
    report = analyse(_obs("settings25_turnstone__outside"))
    assert report.headline is not None and report.headline.because == (RULE,)
    assert report.headline.text.startswith("the producer stage of `out` limits throughput")
    assert ", because negative-miner spends 86% of its working time in the call np.argsort(kind=kind) at " \
           "mining.py:40, which runs with a value this run's configuration changes from the code's default: " \
           "`tie_break` = 'stable' in audit_replay.toml (the code's default 'any' at runcfg.py:25" in report.headline.text
    assert report.headline.text.endswith("what the change costs is not measured")
    found = next(f for f in report.findings if f.rule_id == RULE)
    assert found.severity is Severity.INFO and found.remedy.startswith("Run the same profile with `tie_break` at the code's")


def test_an_object_built_from_the_changed_value_carries_it_to_the_call_on_the_stack() -> None:
    obs = _obs("settings25_linnet__outside")
    augment = next(f for f in obs.files if f.path.endswith("/augment.py"))
    assert ("use_cache", 32) in augment.carries  # `full = continue_songs(model, gen, ...)`, model, gen built with it
    report = analyse(obs)
    assert report.headline is not None and report.headline.because == (RULE,)
    assert "because song-augmenter spends 98% of its working time in `full = continue_songs(model, gen, " \
           "torch.from_numpy(seq))` at augment.py:32, which runs with a value this run's configuration changes from " \
           "the code's default: `use_cache` = False in chorus_distill.toml (the code's default True at " \
           "songcfg.py:23)" in report.headline.text
    # Without the join the same recording names no cause: the value is said only among the arguments passed.
    plain = analyse(_with_file(obs, "augment.py", carries=()))
    assert plain.headline is not None and "no cause found" in plain.headline.text
    assert RULE not in {f.rule_id for f in plain.findings}


def test_a_twin_that_keeps_the_codes_default_draws_nothing() -> None:
    # The twins' profiles keep `tie_break` and `use_cache` at the code's defaults: nothing departs, nothing is said.
    for name in ("settings25_turnstone_fixed__outside", "settings25_turnstone_fixed__attach",
                 "settings25_linnet_fixed__outside"):
        assert RULE not in {f.rule_id for f in analyse(_obs(name)).findings}, name


def test_a_size_a_label_or_a_line_the_time_is_not_on_draws_nothing() -> None:
    obs = _obs("settings25_turnstone__outside")
    runcfg = next(f for f in obs.files if f.path.endswith("/runcfg.py"))
    tie = next(d for d in runcfg.overridden if d.name == "tie_break")
    # A number other than zero scales the work (a batch, a width); a profile's name labels the run.
    for configured, name in (("512", "tie_break"), ("'stable'", "name")):
        changed = _with_file(obs, "runcfg.py", overridden=(replace(tie, configured=configured, name=name),))
        assert RULE not in {f.rule_id for f in analyse(changed).findings}, (configured, name)
    # Zero is an option turned off, not a size: it stays a choice.
    off = _with_file(obs, "runcfg.py", overridden=(replace(tie, configured="0"),))
    assert RULE in {f.rule_id for f in analyse(off).findings}
    # The value read on a line where the thread's time is not: nothing.
    mining: SourceFile = next(f for f in obs.files if f.path.endswith("/mining.py"))
    moved = _with_file(obs, "mining.py", passed=tuple(replace(u, line=u.line + 200) for u in mining.passed),
                       reads_departures=(), carries=())
    assert RULE not in {f.rule_id for f in analyse(moved).findings}


def test_the_event_loop_thread_behind_a_queue_no_thread_is_seen_filling_is_weighed() -> None:
    # gannet's hub thread runs an asyncio loop built on `SELECTORS[cfg.hub.selector]()` ('poll'; the code's default
    # 'epoll') and fills the trainer's queue through asyncio.to_thread: the pool's worker never blocks in put, so
    # no thread is seen filling it. The process's other threads are weighed then, and the loop's line carries the
    # selector through the table's key.
    obs = _obs("settings25_gannet__outside")
    hub = next(f for f in obs.files if f.path.endswith("/hub.py"))
    assert ("selector", 31) in hub.carries  # loop.run_until_complete(...), loop built from SELECTORS[...]()
    report = analyse(obs)
    assert report.headline is not None and report.headline.because == (RULE,)
    assert "because station-hub spends 90% of its working time in `loop.run_until_complete(self.main())` at " \
           "hub.py:31, which runs with a value this run's configuration changes from the code's default: `selector` " \
           "= 'poll' in colony_portable.toml (the code's default 'epoll' at hubcfg.py:20" in report.headline.text
    assert "MainThread waits on `out` 26% of its samples, and no thread is seen filling it" in report.headline.text
    for twin in ("settings25_gannet_fixed__outside", "settings25_gannet_fixed__attach"):
        assert RULE not in {f.rule_id for f in analyse(_obs(twin)).findings}, twin


def test_a_changed_value_exported_into_the_environment_is_said_where_the_library_named_by_it_holds_the_time() -> None:
    # The argsort program's recording, its profile's changed value exported instead of passed to the call: the
    # negative miner's time is in numpy, which a NUMPY_ variable is named after; a variable named after a library
    # the thread does not run in says nothing.
    obs = _obs("settings25_turnstone__outside")
    runcfg = next(f for f in obs.files if f.path.endswith("/runcfg.py"))
    export = KnobUse(line=44, call="os.environ", name="NUMPY_MADVISE_HUGEPAGE", value="'stable'", key="tie_break",
                     configured_in="audit_replay.toml", library=ENV_LIBRARY)
    no_call = _with_file(obs, "mining.py", passed=(), knobs=(), reads_departures=(), carries=())
    exported = _with_file(no_call, "runcfg.py", passed=(*runcfg.passed, export))
    found = next(f for f in analyse(exported).findings if f.rule_id == RULE)
    assert found.claim.startswith("negative-miner spends ")
    assert "of its working time in numpy, and the program exports NUMPY_MADVISE_HUGEPAGE into its own environment " \
           "at runcfg.py:44 from a value this run's configuration changes from the code's default: `tie_break` = " \
           "'stable' in audit_replay.toml (the code's default 'any' at runcfg.py:25" in found.claim
    other = _with_file(no_call, "runcfg.py", passed=(*runcfg.passed, replace(export, name="POLARS_MAX_THREADS")))
    assert RULE not in {f.rule_id for f in analyse(other).findings}


def test_a_value_added_to_a_compiled_patterns_flags_under_a_condition_reaches_the_match_call() -> None:
    # Batch 26's regex program: compile_tokenizer adds regex.POSIX to its flags under `if t.match_semantics ==
    # "longest"` and returns the compiled pattern; the tagger's time is in `pattern.findall(...)`.
    obs = _obs("settings26_skua__outside")
    tagger = next(f for f in obs.files if f.path.endswith("/tagger.py"))
    assert ("match_semantics", 46) in tagger.carries
    report = analyse(obs)
    assert report.headline is not None and report.headline.because == (RULE,)
    assert "`toks = pattern.findall(notes[i], concurrent=t.concurrent)[:t.max_tokens]` at tagger.py:46, which runs " \
           "with a value this run's configuration changes from the code's default: `match_semantics` = 'longest'" \
           in report.headline.text
    for twin in ("settings26_skua_fixed__outside", "settings26_skua_fixed__probes", "settings26_skua_fixed__attach"):
        assert RULE not in {f.rule_id for f in analyse(_obs(twin)).findings}, twin



def test_a_changed_value_on_the_gil_holders_hot_line_is_the_root_of_the_contention_named_first() -> None:
    # Batch 24's pydantic program, recorded again: sheet-ingest holds the GIL the trainer waits for, its time in
    # `records = adapter.validate_json(raw)` (ingest.py:59), the adapter built without the profile's discriminator.
    obs = _obs("settings24_dunlin__outside")
    report = analyse(obs)
    assert report.headline is not None and report.headline.because[:2] == (RULE, "gil-contention")
    assert "because sheet-ingest spends " in report.headline.text
    assert "`records = adapter.validate_json(raw)` at ingest.py:59, which runs with a value this run's configuration " \
           "changes from the code's default: `discriminator` = ''" in report.headline.text
    contention = next(f for f in report.findings if f.rule_id == "gil-contention")
    assert report.headline.severity == max(contention.severity, Severity.INFO)  # as serious as what it explains
    # Without the join, the contention leads as before.
    plain = analyse(_with_file(obs, "ingest.py", carries=(), reads_departures=(), passed=(), knobs=()))
    assert plain.headline is not None and plain.headline.because[0] == "gil-contention"


def test_a_cause_leading_alone_names_its_milder_root_after_it() -> None:
    # Batch 26's JSON program, attached: no stage verdict, the GIL contention (a warning) leads alone; the changed
    # value on the holder's hot line is its root, information only, said after it as its "because".
    report = analyse(_obs("settings26_machair__attach"))
    assert report.headline is not None and report.headline.rule_id == "gil-contention"
    assert report.headline.because == (RULE,) and report.headline.severity is Severity.WARNING
    head, _, root = report.headline.text.partition(", because ")
    assert head.startswith("GIL contention") and root.startswith("telemetry-reader spends 57% of its working time in")
    assert "`exact_decimals` = True" in root


def test_a_changed_value_on_the_thread_that_has_the_cpu_the_root_waits_for_is_where_its_time_goes_because() -> None:
    # Batch 25's argsort program under probes: no stage verdict; the wait-for graph's root is MainThread, runnable but
    # off a CPU 42% of the window (/proc), while negative-miner, on a CPU 70% of it, spends 87% of its working time in
    # np.argsort with the profile's `tie_break`.
    obs = _obs("settings25_turnstone__probes")
    report = analyse(obs)
    assert report.headline is not None and report.headline.rule_id == "where-time-goes"
    assert report.headline.because == (RULE,) and report.headline.severity is Severity.INFO
    where, _, because = report.headline.text.partition(", because ")
    assert where.startswith("where the time goes: MainThread spends main (train.py:46) 87%")
    assert because.startswith("negative-miner spends 87% of its working time in the call np.argsort(kind=kind)")
    assert "`tie_break` = 'stable'" in because
    assert because.endswith("; MainThread waits for a CPU 42% of the window while negative-miner is on one 70%; what "
                            "the change costs is not measured")
    # Without /proc's readings nothing says the miner has the root's CPU: where the time goes stands alone,
    # and the changed value is said beside it, aimed at the miner's own stage.
    plain = analyse(replace(obs, proc=()))
    assert plain.headline is not None and plain.headline.rule_id == "where-time-goes" and plain.headline.because == ()
    assert RULE in {f.rule_id for f in plain.findings}


def test_a_changed_value_exported_to_the_child_a_thread_waits_on_is_the_root_of_that_wait() -> None:
    # Batch 25's clip loader, recorded again: the profile's `shell_env` (the code's default '') is exported as
    # BASH_ENV, and the loader is blocked on its `bash` children most of the window: every one of them inherits it.
    obs = _obs("settings25_shrike__outside")
    report = analyse(obs)
    assert report.headline is not None and report.headline.because[:2] == ("changed-value-at-process-wait", "process-wait")
    root = report.headline.text.partition(", because ")[2]
    assert root.startswith("clip-loader is blocked on its child `bash` in ")
    assert "exports BASH_ENV into its own environment at sitecfg.py:75 from a value this run's configuration " \
           "changes from the code's default: `shell_env` = 'env/site_modules.sh' in lab_cluster.toml" in root
    found = next(f for f in report.findings if f.rule_id == "changed-value-at-process-wait")
    assert found.severity is Severity.INFO and "process-wait" in found.explains
    # Without /proc's view of what the loader is blocked on, nothing ties the variable to the wait.
    plain = analyse(replace(obs, outside_waits=()))
    assert "changed-value-at-process-wait" not in {f.rule_id for f in plain.findings}
    # The twin's profile keeps `shell_env` empty: nothing departs.
    for mode in ("outside", "probes", "attach"):
        twin = analyse(_obs(f"settings25_shrike_fixed__{mode}"))
        assert not {"changed-value-at-process-wait", RULE} & {f.rule_id for f in twin.findings}, mode


def test_a_changed_value_on_the_line_a_thread_is_blocked_at_on_another_process_is_the_root_of_that_wait() -> None:
    # The clip loader's recording with the value carried by the line it waits at instead (as where the child's
    # command line is built from the profile): loader.py:40 runs with `shell_env`, the export is left out.
    obs = _with_file(_with_file(_obs("settings25_shrike__outside"), "loader.py", carries=(("shell_env", 40),)),
                     "sitecfg.py", passed=())
    report = analyse(obs)
    found = next(f for f in report.findings if f.rule_id == "changed-value-at-process-wait")
    assert found.claim.startswith("clip-loader is blocked ")
    assert " of its samples on a pipe from process " in found.claim and " (its child) `bash` at `res = subprocess." in found.claim
    assert "at loader.py:40, which runs with a value " \
           "this run's configuration changes from the code's default: `shell_env` = 'env/site_modules.sh'" in found.claim
    assert report.headline is not None and report.headline.because[:2] == ("changed-value-at-process-wait",
                                                                            "process-wait")
    # A line the thread is not blocked at carries nothing to the wait.
    elsewhere = analyse(_with_file(_with_file(_obs("settings25_shrike__outside"), "loader.py",
                                              carries=(("shell_env", 70),)), "sitecfg.py", passed=()))
    assert "changed-value-at-process-wait" not in {f.rule_id for f in elsewhere.findings}
