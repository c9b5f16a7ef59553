"""The scheduler's rules on constructed windows: the issue's example (four pool threads, 36 OpenMP workers on 2 CPUs)
named with its measured cost, its healthy twin silent, other processes' load taken off the cost, children doing the
work, CPUs pinned too narrow, a cgroup quota, pressure, children started over and over."""

from __future__ import annotations

from dataclasses import replace

from findings_builders import NOW_S
from sched_builders import PID, TORCH_OP, Thread, ensemble, pools, scenario, settings_board

from dflash_diag.analysis import analyse
from dflash_diag.analysis.sched import summarise
from dflash_diag.model import Frame, NativeProfile, Observation, Severity
from dflash_diag.model.sched import (
    CgroupCpu,
    Connecting,
    EnvSetting,
    OutsideWait,
    PeerProcess,
    Pressure,
    ProcessIo,
)

POOL_WAIT = Frame("wait", "/usr/lib/python3.11/threading.py", 320)
IMAP_NEXT = Frame("IMapIterator.next", "/usr/lib/python3.11/multiprocessing/pool.py", 856)


def _find(obs, rule):  # type: ignore[no-untyped-def]
    analysis = analyse(replace(obs, now_wall_s=NOW_S))
    return analysis, [f for f in analysis.findings if f.rule_id == rule]


def test_the_example_is_oversubscribed_with_its_cost_and_leads() -> None:
    obs = scenario(ensemble() + pools(36, run=0.04, wait=0.3))
    summary = summarise(obs)
    assert not isinstance(summary, type(None)) and summary.os_threads == 41  # type: ignore[union-attr]
    analysis, (finding,) = _find(obs, "cpu-oversubscribed")
    assert finding.severity == Severity.WARNING
    assert "14.8 threads runnable on 2 CPUs" in finding.claim and "36 busy native pool threads" in finding.claim
    assert "member_0, member_1, member_2, member_3" in finding.claim and "waited for a CPU 60%" in finding.claim
    assert abs(finding.impact - 0.6) < 0.01  # the run delay, all the process's own (no other load measured)
    evidence = dict(finding.evidence)
    assert "voluntary" in evidence["context switches"] and "libgomp" in evidence["pool libraries mapped"]
    assert analysis.headline is not None and analysis.headline.rule_id == "cpu-oversubscribed"


def test_with_the_probe_the_claim_names_the_calls_and_who_made_them() -> None:
    calls = [{"call_name": "torch.set_num_threads", "arg": "8", "site": "train_ensemble.py:42 (fit_member)", "count": 4,
              "callers": ["member_0", "member_1", "member_2", "member_3"], "last_wall_s": NOW_S}]
    board = settings_board({"setting_calls": calls, "cpu_cores": 2, "torch_flags": {"num_threads": 8}})
    _, (finding,) = _find(scenario(ensemble() + pools(36, run=0.04, wait=0.3), boards=(board,)),
                          "cpu-oversubscribed")
    assert "torch.set_num_threads(8) called by member_0, member_1, member_2, member_3 at train_ensemble.py:42" \
           in finding.claim
    assert "torch.get_num_threads() = 8" not in finding.claim  # the call explains the reading: said once


def test_the_twin_with_one_thread_per_member_is_not_oversubscribed() -> None:
    # Four members with set_num_threads(1): they take turns on two CPUs, no pool beside them.
    _, found = _find(scenario(ensemble(run=0.45, wait=0.5) + pools(1, run=0.0, wait=0.0)), "cpu-oversubscribed")
    assert found == []


def test_other_processes_load_is_taken_off_the_cost() -> None:
    threads = ensemble() + pools(36, run=0.04, wait=0.3)
    _, (loaded,) = _find(scenario(threads, procs_running=60), "cpu-oversubscribed")
    _, (swamped,) = _find(scenario(threads, procs_running=500), "cpu-oversubscribed")
    assert 0.05 < loaded.impact < 0.6 and loaded.severity == Severity.WARNING
    assert swamped.impact < 0.05 and swamped.severity == Severity.INFO  # nearly all of the wait is others' doing


def test_children_that_do_the_work_and_the_variable_only_they_have() -> None:
    main = Thread("MainThread", PID, 0.001, 0.0, stack_frames=(POOL_WAIT, IMAP_NEXT, Frame("main", "/app/probe.py", 30)))
    obs = scenario([main], children=[(501, 5, 0.1, 0.5), (502, 5, 0.1, 0.5), (503, 5, 0.1, 0.5)],
                   env=[("OMP_NUM_THREADS", "4", "children (3)")])
    _, (finding,) = _find(obs, "cpu-oversubscribed")
    assert "15 in 3 child processes" in finding.claim and "its 3 child processes" in finding.claim
    assert "OMP_NUM_THREADS=4 (environment of its children (3))" in finding.claim
    assert finding.severity == Severity.WARNING


def test_threads_pinned_to_one_cpu_of_two() -> None:
    pinned = [Thread("MainThread", PID, 0.3, 0.5, cpus="0"), Thread("prefetch", 101, 0.3, 0.5, cpus="0",
                                                                     frame=Frame("decode", "/app/bench.py", 20))]
    omp = [Thread("omp-0", 1000, 0.2, 0.5, python=False, cpus="0")]
    _, (finding,) = _find(scenario(pinned + omp, process_cpus="0"), "cpu-affinity-narrow")
    assert finding.claim.startswith("the process may run only on CPU 0 of the machine's 2, where 2.3 threads want 1")
    assert finding.severity == Severity.WARNING
    unpinned = [Thread(t.name, t.tid, t.run, t.wait, frame=t.frame) for t in pinned]
    assert _find(scenario(unpinned), "cpu-affinity-narrow")[1] == []


def test_a_cgroup_quota_that_throttles() -> None:
    start = CgroupCpu(version=2, quota_cores=1.0, periods=100, throttled_periods=10, throttled_us=0)
    end = CgroupCpu(version=2, quota_cores=1.0, periods=140, throttled_periods=40, throttled_us=3_000_000)
    threads = [Thread("MainThread", PID, 0.5, 0.3), Thread("loader", 101, 0.5, 0.3)]
    _, (finding,) = _find(scenario(threads, cgroup=start, cgroup_end=end), "cpu-throttled")
    assert "in 75% of the enforcement periods" in finding.claim and "3.0 s of CPU" in finding.claim
    assert finding.severity == Severity.WARNING
    calm = CgroupCpu(version=2, quota_cores=1.0, periods=140, throttled_periods=10, throttled_us=0)
    assert _find(scenario(threads, cgroup=start, cgroup_end=calm), "cpu-throttled")[1] == []


def test_pressure_of_the_group_is_a_cause_the_machines_alone_is_not() -> None:
    threads = [Thread("MainThread", PID, 0.5, 0.1)]
    group = scenario(threads, pressure=[Pressure("memory", "cgroup", 0, None)],
                     pressure_end=[Pressure("memory", "cgroup", 1_200_000, None)])
    (finding,) = _find(group, "memory-pressure")[1]
    assert finding.severity == Severity.WARNING and "30%" in finding.claim
    machine = scenario(threads, pressure=[Pressure("io", "system", 0, 0)],
                       pressure_end=[Pressure("io", "system", 2_000_000, 0)])
    assert _find(machine, "io-pressure")[1] == []  # other processes' stalls
    mine = scenario(threads, pressure=[Pressure("io", "system", 0, 0)],
                    pressure_end=[Pressure("io", "system", 2_000_000, 0)], d_state=("MainThread",))
    (own,) = _find(mine, "io-pressure")[1]
    assert "state D" in own.claim and own.severity == Severity.WARNING


def test_children_started_over_and_over_while_training_waits_on_them() -> None:
    run = Frame("run", "/usr/lib/python3.11/subprocess.py", 550)
    main = Thread("MainThread", PID, 0.001, 0.0, stack_frames=(run, Frame("metrics", "/app/train.py", 80)))
    started = [(600 + i, 1, 0.2, 0.0) for i in range(6)]
    (finding,) = _find(scenario([main], children_started=started), "process-churn")[1]
    assert finding.claim.startswith("the process starts 1.5 child processes a second (6 in 4 s")
    assert finding.severity == Severity.WARNING and "MainThread waits on children 100%" in finding.claim
    busy = Thread("MainThread", PID, 0.9, 0.0)
    (quiet,) = _find(scenario([busy], children_started=started), "process-churn")[1]
    assert quiet.severity == Severity.INFO  # started, but nothing waits on them: no measured cost


def test_a_file_lock_another_process_holds_is_the_end_of_the_path() -> None:
    flock = Frame("log_step", "/app/train_loop.py", 33)
    main = Thread("MainThread", PID, 0.05, 0.0, stack_frames=(flock,))  # steps now and then: it moves
    # The holder's CPU use differs at every reading (the first has none): one wait all the same, told by the newest.
    cpu = [None, 80.0, 91.0, 85.0, 70.0, 99.0, 88.0, 93.0, 96.0]
    waits = [OutsideWait(tid=PID, kind="file-lock", target="/runs/registry.lock", syscall="flock/fcntl",
                         peers=(PeerProcess(pid=777, comm="python", cmdline="python syncer.py /runs", state="R",
                                            cpu_pct=c, top_frame="pack (syncer.py:20)", relation="child"),),
                         monotonic_s=0.5 * i) for i, c in enumerate(cpu)]
    analysis, (chain,) = _find(scenario([main], outside_waits=waits), "wait-chain")
    assert "waits on a file lock on `/runs/registry.lock` held by process 777 (its child) `python syncer.py " \
           "/runs`: running, 96% CPU, in pack (syncer.py:20)" in chain.claim
    assert chain.severity == Severity.WARNING and "100%" in chain.claim  # every sample: one edge
    assert analysis.headline is not None and "registry.lock" in analysis.headline.text


def test_two_stack_samples_are_enough_when_proc_shows_who_works() -> None:
    """py-spy starved of CPU on the oversubscribed box it looks at takes one dump in seconds: the threads that do
    the work are then those /proc saw runnable half of the window or more."""
    obs = scenario(ensemble(run=0.05, wait=0.6) + pools(36, run=0.04, wait=0.3), samples=2)
    analysis, (finding,) = _find(obs, "cpu-oversubscribed")
    assert "member_0, member_1, member_2, member_3" in finding.claim and "MainThread" not in finding.claim
    assert finding.severity == Severity.WARNING


def test_the_cause_replaces_the_note_that_the_threads_wait_for_a_cpu() -> None:
    """Threads that compute and wait for a core: the process's own pools say why (the cause); the note that only
    says they wait (other processes' doing) is not repeated beside it, and stands alone where no cause holds."""
    caused = analyse(replace(scenario(ensemble() + pools(36, run=0.04, wait=0.3)), now_wall_s=NOW_S))
    ids = [f.rule_id for f in caused.findings]
    assert "cpu-oversubscribed" in ids and "cpu-contended" not in ids
    assert caused.pipeline.cpu_note  # the pane still says the CPUs are crowded  # type: ignore[union-attr]
    crowded_by_others = analyse(replace(scenario(ensemble(run=0.3, wait=0.6) + pools(1, run=0.0, wait=0.0)), now_wall_s=NOW_S))
    ids = [f.rule_id for f in crowded_by_others.findings]
    assert "cpu-contended" in ids and "cpu-oversubscribed" not in ids


def test_the_note_says_who_else_had_the_cpus_the_threads_waited_for() -> None:
    obs = scenario(ensemble(run=0.3, wait=0.6) + pools(1, run=0.0, wait=0.0), procs_running=7,
                   children=[(701, 1, 0.6, 0.2), (702, 1, 0.02, 0.0)])
    # At the default priority: a busy child in a session of its own takes its share, and no cause says so.
    obs = replace(obs, sched=tuple(replace(s, children=tuple(replace(c, nice=0, autogroup=f"autogroup-{c.pid}")
                                                             for c in s.children)) for s in obs.sched),
                  os_facts=replace(obs.os_facts, autogroup_enabled=True, autogroup="autogroup-40"))  # type: ignore[arg-type]
    (note,) = [f for f in analyse(replace(obs, now_wall_s=NOW_S)).findings if f.rule_id == "cpu-contended"]
    rows = dict(note.evidence)
    assert rows["child 701 (`python`)"] == ("on a CPU 0.60 CPUs on average, wanted 0.80; nice 0; a session of its "
                                           "own (autogroup-701: weighed like the process's whole session)")
    assert "child 702 (`python`)" not in rows  # too little CPU to have taken any
    assert "other tasks runnable on the machine" in rows


DECODE = Frame("_decode_loop", "/app/ingest.py", 88)


def test_a_niced_thread_that_waits_for_a_cpu_is_named_with_its_priority() -> None:
    decoder = Thread("decode", 101, 0.3, 0.5, frame=DECODE, nice=19)
    trainer = Thread("MainThread", PID, 0.8, 0.3)
    analysis, (finding,) = _find(scenario([trainer, decoder]), "thread-deprioritized")
    assert finding.claim.startswith("decode runs at nice 19 (the default is nice 0, SCHED_OTHER)")
    assert "waited for one 50% of the window, 62% of the time it wanted one" in finding.claim
    assert "(the process's default-priority threads: 27%)" in finding.claim
    # Listed among the settings too, as information.
    (changed,) = [f for f in analysis.findings if f.rule_id == "settings-changed"]
    assert "priority of decode (thread 101) = nice 19" in changed.claim


def test_sched_idle_is_named_and_the_priority_text_says_the_policy() -> None:
    decoder = Thread("decode", 101, 0.2, 0.6, frame=DECODE, policy=5)
    _, (finding,) = _find(scenario([Thread("MainThread", PID, 0.8, 0.2), decoder]), "thread-deprioritized")
    assert finding.claim.startswith("decode runs at SCHED_IDLE")


def test_a_niced_thread_that_rarely_wants_a_cpu_or_waits_no_longer_than_the_rest_is_not_named() -> None:
    heartbeat = Thread("heartbeat", 102, 0.01, 0.01, nice=10, computing=False)
    _, found = _find(scenario([Thread("MainThread", PID, 0.8, 0.3), heartbeat]), "thread-deprioritized")
    assert found == []
    # On a machine so loaded that every thread waits most of the time, the niced one waits no longer than the rest.
    busy_box = [Thread("MainThread", PID, 0.2, 0.7), Thread("decode", 101, 0.25, 0.6, frame=DECODE, nice=5)]
    assert _find(scenario(busy_box), "thread-deprioritized")[1] == []


def test_a_niced_thread_outside_the_limiting_stage_is_information_only() -> None:
    # Nothing trains and no stage limits throughput: the lowered priority is shown, with no cost claimed.
    side = Thread("compress", 103, 0.3, 0.5, frame=Frame("compress", "/app/ckpt.py", 12), nice=19)
    _, (finding,) = _find(scenario([Thread("MainThread", PID, 0.8, 0.3), side]), "thread-deprioritized")
    assert finding.severity == Severity.INFO and finding.impact == 0.0


def _decoders_beside_spinning_pools(env: list[tuple[str, str, str]]) -> object:
    """Two decoder threads that want both CPUs, a trainer mostly asleep, one OpenMP worker of the process and an idle
    evaluator child whose worker never sleeps: demand 4.2 on 2 CPUs, under cpu-oversubscribed's 5."""
    threads = [Thread("MainThread", PID, 0.001, 0.0, computing=False),
               Thread("shard-decoder-0", 101, 0.15, 0.8), Thread("shard-decoder-1", 102, 0.15, 0.8),
               Thread("trainer", 103, 0.05, 0.2, computing=False)] + pools(1, run=0.2, wait=0.8)
    return scenario(threads, children=[(601, 1, 0.2, 0.8)], env=env)


def test_openmp_told_to_spin_holds_the_cpus_the_decoders_wait_for() -> None:
    obs = _decoders_beside_spinning_pools([("OMP_WAIT_POLICY", "ACTIVE", "children (1)")])
    _, over = _find(obs, "cpu-oversubscribed")
    analysis, (finding,) = _find(obs, "cpu-pool-spin")
    assert over == []  # not a count of threads: a few pools that never sleep
    assert finding.claim.startswith("OpenMP's idle threads spin instead of sleeping (OMP_WAIT_POLICY=ACTIVE "
                                    "(environment of its children (1)))")
    assert "wanted 2.0 of its 2 CPUs" in finding.claim and "shard-decoder-0, shard-decoder-1" in finding.claim
    assert finding.severity == Severity.WARNING and finding.impact > 0.05
    assert analysis.headline is not None and "OMP_WAIT_POLICY=ACTIVE" in analysis.headline.text


def test_a_harmless_wait_policy_or_quiet_pools_are_not_a_spin() -> None:
    for env in ([("OMP_WAIT_POLICY", "PASSIVE", "process"), ("KMP_BLOCKTIME", "200", "process")],
                [("GOMP_SPINCOUNT", "1000", "process")], []):
        _, found = _find(_decoders_beside_spinning_pools(env), "cpu-pool-spin")
        assert found == [], env
    quiet = scenario([Thread("shard-decoder-0", 101, 0.5, 0.4), Thread("shard-decoder-1", 102, 0.5, 0.4)]
                     + pools(1, run=0.05, wait=0.05), env=[("OMP_WAIT_POLICY", "ACTIVE", "process")])
    _, found = _find(quiet, "cpu-pool-spin")
    assert found == []  # the setting is there, the pools burn next to nothing: listed, not a cause
    _, (endless,) = _find(_decoders_beside_spinning_pools([("GOMP_SPINCOUNT", "INFINITE", "process")]),
                          "cpu-pool-spin")
    assert "GOMP_SPINCOUNT=INFINITE" in endless.claim
    # libgomp's suffixes: 10M spins is far above the 300,000 default; 200k is below it.
    _, (long_spin,) = _find(_decoders_beside_spinning_pools([("GOMP_SPINCOUNT", "10M", "process")]), "cpu-pool-spin")
    assert "GOMP_SPINCOUNT=10M" in long_spin.claim
    _, found = _find(_decoders_beside_spinning_pools([("GOMP_SPINCOUNT", "200k", "process")]), "cpu-pool-spin")
    assert found == []


def _trainer_beside_a_busy_child(child_env: list[tuple[str, str, str]]) -> object:
    """A trainer and its loader that want both CPUs, and a long-running child (an asyncio fetcher) that burns 0.9 of
    them; the trainer process itself exports PYTHONASYNCIODEBUG=1 in both versions."""
    threads = [Thread("trainer", 101, 0.45, 0.45), Thread("python", 102, 0.45, 0.45, python=False)]
    return scenario(threads, children=[(701, 1, 0.9, 0.1)], env=[("PYTHONASYNCIODEBUG", "1", "program")],
                    children_env=child_env)


def test_a_child_running_python_in_a_debug_mode_takes_the_cpus_the_trainer_waits_for() -> None:
    analysis, (finding,) = _find(_trainer_beside_a_busy_child([("PYTHONASYNCIODEBUG", "1", "child 701")]),
                                 "child-debug-mode")
    assert finding.claim.startswith("its child process 701 (`python`) runs Python in a debug mode, "
                                    "PYTHONASYNCIODEBUG=1 (asyncio's debug mode")
    assert "wanted 1.0 of the 2 CPUs while trainer, which do the work, waited for a CPU 45% of the window" in \
        finding.claim
    assert finding.severity == Severity.WARNING and finding.impact >= 0.05
    assert analysis.headline is not None and "PYTHONASYNCIODEBUG" in analysis.headline.text
    # The twin: the parent keeps the variable, the child that burns the CPU was started without it; and a harmless
    # value of another variable.
    for env in ([], [("PYTHONMALLOC", "malloc", "child 701")]):
        _, found = _find(_trainer_beside_a_busy_child(env), "child-debug-mode")
        assert found == [], env


def test_a_debug_child_that_burns_no_cpu_or_a_trainer_that_gets_its_cpu_is_not_a_cause() -> None:
    idle_child = scenario([Thread("trainer", 101, 0.45, 0.45), Thread("python", 102, 0.45, 0.45, python=False)],
                          children=[(701, 1, 0.05, 0.0)], children_env=[("PYTHONDEVMODE", "1", "child 701")])
    assert _find(idle_child, "child-debug-mode")[1] == []
    roomy = scenario([Thread("trainer", 101, 0.5, 0.02)], children=[(701, 1, 0.9, 0.0)],
                     children_env=[("PYTHONMALLOC", "debug", "child 701")], machine=4, process_cpus="0-3")
    assert _find(roomy, "child-debug-mode")[1] == []


def _trainer_beside_a_niced_child(*, child_group: str, enabled: bool | None = True, nice: int = 10,
                                  child_run: float = 0.75, trainer_wait: float = 0.5,
                                  own_group: str = "autogroup-40") -> Observation:
    """A trainer whose main thread wants a CPU all window and waits half of it, beside a busy evaluator child at
    ``nice`` in autogroup ``child_group`` (the trainer's: autogroup-40)."""
    obs = scenario([Thread("MainThread", 101, 1.0 - trainer_wait, trainer_wait)],
                   children=[(701, 1, child_run, 1.0 - child_run), (702, 1, 0.2, 0.1)])
    sched = tuple(replace(s, children=tuple(
        replace(c, nice=nice if c.pid == 701 else 0, policy=0, session=c.pid if c.pid == 701 else 40,
                autogroup=child_group if c.pid == 701 else own_group) for c in s.children)) for s in obs.sched)
    assert obs.os_facts is not None
    return replace(obs, sched=sched, os_facts=replace(obs.os_facts, autogroup_enabled=enabled, session=40,
                                                      autogroup=own_group))


def test_a_niced_child_in_a_session_of_its_own_takes_the_cpus_the_trainer_waits_for() -> None:
    analysis, (finding,) = _find(_trainer_beside_a_niced_child(child_group="autogroup-41"), "child-priority-lost")
    assert finding.claim.startswith("its child process 701 (`python`) runs at nice 10, to run behind the process's "
                                    "threads, yet it got a CPU 75% of the time it wanted one (0.75 CPUs on average) "
                                    "while MainThread, which does the work, got one 50% of the time and waited for one "
                                    "50% of the window: the child leads a session of its own (session 701, not the "
                                    "process's 40")
    assert "autogroup scheduling on, the kernel weighs" in finding.claim
    ids = {f.rule_id for f in analysis.findings}
    assert "cpu-contended" not in ids  # the cause says why the threads wait: the note would repeat it
    # A child in a session another process started: it does not lead it.
    obs = _trainer_beside_a_niced_child(child_group="autogroup-41")
    joined = replace(obs, sched=tuple(replace(s, children=tuple(replace(c, session=55) if c.pid == 701 else c
                                                                for c in s.children)) for s in obs.sched))
    (finding,) = _find(joined, "child-priority-lost")[1]
    assert "the child runs in another session (session 55, not the process's 40" in finding.claim
    assert finding.severity == Severity.WARNING and finding.impact >= 0.05
    assert ("kernel.sched_autogroup_enabled", "1: each session is a scheduling group of its own") in finding.evidence
    assert analysis.headline is not None and "session of its own" in analysis.headline.text
    # A process in the kernel's default group (its session never called setsid, as on a CI runner) is weighed the
    # same way against a child that leads a session of its own.
    on_default = _trainer_beside_a_niced_child(child_group="autogroup-41", own_group="autogroup-0")
    (finding,) = _find(on_default, "child-priority-lost")[1]
    assert ("the process", "autogroup-0 (the kernel's default group), session 40") in finding.evidence


def test_a_niced_child_the_scheduler_holds_back_or_one_in_the_same_group_is_not_a_cause() -> None:
    # The twin: the same niced child in the trainer's session (its nice weighs against the trainer's threads).
    assert _find(_trainer_beside_a_niced_child(child_group="autogroup-40"), "child-priority-lost")[1] == []
    # Autogroup scheduling off (or not read): sessions are not groups.
    for enabled in (False, None):
        obs = _trainer_beside_a_niced_child(child_group="autogroup-41", enabled=enabled)
        assert _find(obs, "child-priority-lost")[1] == [], enabled
    # A child at the default priority asked for nothing the scheduler ignores.
    assert _find(_trainer_beside_a_niced_child(child_group="autogroup-41", nice=0), "child-priority-lost")[1] == []
    # The child got a CPU for a smaller part of its wanting than the trainer: its nice was weighed.
    held_back = _trainer_beside_a_niced_child(child_group="autogroup-41", child_run=0.3, trainer_wait=0.25)
    assert _find(held_back, "child-priority-lost")[1] == []
    # The trainer gets its CPU: nothing to take.
    roomy = _trainer_beside_a_niced_child(child_group="autogroup-41", trainer_wait=0.05)
    assert _find(roomy, "child-priority-lost")[1] == []


def _sampler_beside_trainer(minflt_per_s: float, kernel: float, thp: str = "madvise") -> object:
    """An augmentation thread and the trainer, both wanting a CPU on a crowded 2-CPU box (they wait ~70% of the
    window): the sampler's CPU goes to the kernel as it faults fresh buffers in."""
    threads = [Thread("patch-sampler", 101, 0.26, 0.7, kernel=kernel, minflt_per_s=minflt_per_s),
               Thread("trainer", 102, 0.26, 0.7), Thread("omp-0", 1000, 0.26, 0.7, python=False)]
    return scenario(threads, thp_mode=thp, procs_running=4)


def test_a_thread_that_faults_its_memory_in_is_named_with_the_machines_huge_page_mode() -> None:
    _, (finding,) = _find(_sampler_beside_trainer(minflt_per_s=60_000, kernel=0.19), "page-faults")
    assert finding.claim.startswith("patch-sampler spends its CPU faulting memory in: 0.19 of its 0.26 CPUs in the "
                                    "kernel, 60.0k page faults a second, mostly minor")
    assert "transparent huge pages are `madvise` on this machine" in finding.claim
    # Nothing trains and no stage limits: every thread's speed is the program's, its kernel time the cost. No
    # setting read makes the faults (the machine's default huge-page mode, no allocator setting): the program's own
    # pattern, as a healthy program's fresh buffers make it, is said as information with its cost.
    assert finding.severity == Severity.INFO and abs(finding.impact - 0.19) < 0.01
    assert "none of the allocator or huge-page settings read here" in finding.claim
    assert ("transparent huge pages", "madvise") in finding.evidence
    # Huge pages off on the machine: every 4 KiB page is a fault, a setting to change: a warning.
    _, (never,) = _find(_sampler_beside_trainer(minflt_per_s=60_000, kernel=0.19, thp="never"), "page-faults")
    assert never.severity == Severity.WARNING and "transparent huge pages are off" in never.claim
    assert "none of the allocator" not in never.claim
    _, (always,) = _find(_sampler_beside_trainer(minflt_per_s=60_000, kernel=0.19, thp="always"), "page-faults")
    assert "huge pages" not in always.claim  # the machine backs large buffers already: not said


def test_a_few_faults_or_little_kernel_time_is_not_a_cause() -> None:
    for faults, kernel in ((2_000, 0.19), (60_000, 0.05)):
        _, found = _find(_sampler_beside_trainer(minflt_per_s=faults, kernel=kernel), "page-faults")
        assert found == [], (faults, kernel)
    # The twin's numbers in the recorded programs: the same kernel time share, a twentieth of the faults.
    _, found = _find(_sampler_beside_trainer(minflt_per_s=3_000, kernel=0.10), "page-faults")
    assert found == []


def _faulting_trainer(minflt_per_s: float, kernel: float) -> object:
    """A trainer on 0.8 of a CPU whose kernel part is under 40% of it: its compute hides a large kernel time."""
    return scenario([Thread("trainer", 102, 0.8, 0.2, kernel=kernel, minflt_per_s=minflt_per_s)], thp_mode="madvise")


def test_a_busy_thread_faulting_fast_with_a_large_kernel_time_is_named_though_its_own_code_runs_more() -> None:
    # 0.30 of 0.80 CPUs in the kernel (38%), 130k faults a second: what the mmap-threshold program's trainer showed.
    _, (finding,) = _find(_faulting_trainer(minflt_per_s=130_000, kernel=0.30), "page-faults")
    assert finding.claim.startswith("trainer spends its CPU faulting memory in: 0.30 of its 0.80 CPUs in the kernel, "
                                    "130.0k page faults a second")
    assert finding.severity == Severity.INFO  # no setting read makes it (the program set its threshold with mallopt)
    # With the allocator's threshold in its environment, the setting that makes the faults is read: a warning.
    obs = _faulting_trainer(minflt_per_s=130_000, kernel=0.30)
    assert obs.os_facts is not None  # type: ignore[attr-defined]
    set_env = replace(obs, os_facts=replace(obs.os_facts, env=(  # type: ignore[type-var, attr-defined]
        EnvSetting("MALLOC_MMAP_THRESHOLD_", "0", "process"),)))
    (warned,) = _find(set_env, "page-faults")[1]
    assert warned.severity == Severity.WARNING and "MALLOC_MMAP_THRESHOLD_=0" in warned.claim
    # The healthy twins' numbers in the recorded programs: up to 0.16 CPUs in the kernel at 20-70k faults a second.
    for faults, kernel in ((60_000, 0.16), (30_000, 0.30)):
        assert _find(_faulting_trainer(minflt_per_s=faults, kernel=kernel), "page-faults")[1] == [], (faults, kernel)


def _writer_beside_trainer(kernel: float, faults_per_s: float = 400.0, clocksource: str = "tsc") -> object:
    """A metrics thread whose CPU goes to the kernel in system calls (few page faults), beside the trainer, both
    wanting a CPU on a crowded 2-CPU box."""
    threads = [Thread("metrics-writer", 101, 0.3, 0.7, kernel=kernel, minflt_per_s=faults_per_s, syscall="write",
                      frame=Frame("emit", "/app/metrics.py", 31)),
               Thread("trainer", 102, 0.26, 0.7), Thread("omp-0", 1000, 0.26, 0.7, python=False)]
    return scenario(threads, procs_running=4, clocksource=clocksource)


def test_a_thread_whose_cpu_goes_to_system_calls_is_named_with_its_line() -> None:
    analysis, (finding,) = _find(_writer_beside_trainer(kernel=0.21), "kernel-time")
    assert finding.claim.startswith("metrics-writer spends its CPU in the kernel, not in its own code: 0.21 of its "
                                    "0.30 CPUs in system calls (400 page faults a second: not faulting memory in)")
    assert "its most frequent line: emit (metrics.py:31)" in finding.claim
    assert "/proc saw it blocked in write (3 of 3 readings)" in finding.claim
    assert "clock source" not in finding.claim  # the TSC is read in user space: not said
    assert finding.severity == Severity.WARNING and abs(finding.impact - 0.21) < 0.01
    assert _find(_writer_beside_trainer(kernel=0.21), "page-faults")[1] == []
    # Clock reads that are system calls on this machine: said, as what the kernel time may be.
    _, (slow,) = _find(_writer_beside_trainer(kernel=0.21, clocksource="hpet"), "kernel-time")
    assert "the machine's clock source is `hpet`: every clock read" in slow.claim
    assert ("clock source", "hpet") in slow.evidence


def test_kernel_time_that_is_small_or_a_small_part_of_the_threads_cpu_is_not_named() -> None:
    for kernel in (0.05, 0.1):  # 0.05 CPUs; a third of its CPU (under 40%)
        _, found = _find(_writer_beside_trainer(kernel=kernel), "kernel-time")
        assert found == [], kernel
    # Faulting memory in is the page-faults rule's, not this one's: one finding per thread.
    _, found = _find(_writer_beside_trainer(kernel=0.21, faults_per_s=60_000), "kernel-time")
    assert found == []


def test_the_allocator_settings_are_said_with_the_kernel_time_they_can_make() -> None:
    obs = replace(_writer_beside_trainer(kernel=0.21), os_facts=replace(
        _writer_beside_trainer(kernel=0.21).os_facts,  # type: ignore[attr-defined]
        env=(EnvSetting("MALLOC_TRIM_THRESHOLD_", "0", "process"), EnvSetting("OMP_NUM_THREADS", "1", "process"))))
    _, (finding,) = _find(obs, "kernel-time")
    assert "the process's allocator settings: MALLOC_TRIM_THRESHOLD_=0 (when glibc returns memory to the OS" in \
        finding.claim
    assert "OMP_NUM_THREADS" not in finding.claim
    _, (faults,) = _find(replace(_sampler_beside_trainer(minflt_per_s=60_000, kernel=0.19), os_facts=replace(
        _sampler_beside_trainer(minflt_per_s=60_000, kernel=0.19).os_facts,  # type: ignore[attr-defined]
        env=(EnvSetting("MALLOC_MMAP_THRESHOLD_", "0", "process"),))), "page-faults")
    assert "MALLOC_MMAP_THRESHOLD_=0 (allocations glibc serves with mmap" in faults.claim


def test_seccomp_filters_are_listed_and_said_with_the_kernel_time_they_add_to() -> None:
    base = _writer_beside_trainer(kernel=0.21)
    obs = replace(base, os_facts=replace(base.os_facts, controls=(("seccomp filters", "6"),)))  # type: ignore[attr-defined]
    _, (finding,) = _find(obs, "kernel-time")
    assert "on this process's system calls the kernel also runs: seccomp filters: 6 (every system call of every " \
        "thread runs the filters first" in finding.claim
    assert ("seccomp filters: 6", dict(finding.evidence)["seccomp filters: 6"]) in finding.evidence
    _, (note,) = _find(obs, "settings-changed")
    assert "seccomp filters: 6" in note.claim
    # Little kernel time: the filters are only listed.
    quiet = _writer_beside_trainer(kernel=0.05)
    quiet = replace(quiet, os_facts=replace(quiet.os_facts, controls=(("seccomp filters", "6"),)))  # type: ignore[attr-defined]
    assert _find(quiet, "kernel-time")[1] == [] and len(_find(quiet, "settings-changed")[1]) == 1


def _writer_making_calls(calls_per_s: float, read_call_us: float | None = 0.7) -> object:
    """The metrics writer (0.21 CPUs in the kernel) with the process's write calls over the 4 s window, and this
    machine's small cached read as the tool measured it."""
    base = _writer_beside_trainer(kernel=0.21)
    io = (ProcessIo(rchar=0, read_bytes=0, syscr=0, wchar=0, syscw=0),
          ProcessIo(rchar=0, read_bytes=0, syscr=0, wchar=0, syscw=int(calls_per_s * 4)))
    sched = tuple(replace(sample, io=io[i]) for i, sample in enumerate(base.sched))  # type: ignore[attr-defined]
    return replace(base, sched=sched, os_facts=replace(base.os_facts, read_call_us=read_call_us))  # type: ignore[attr-defined]


def test_kernel_time_per_call_is_read_against_this_machines_own_small_read() -> None:
    # 40k calls a second for 0.21 CPUs: about 5.2 µs each, 7.5x the 0.7 µs read measured here: the kernel does more.
    _, (costly,) = _find(_writer_making_calls(40_000), "kernel-time")
    assert "; the process made 40.0k read and write calls a second, about 5.2 µs of kernel time each, 7.5x what a " \
        "small cached read costs here (0.70 µs, measured): the kernel does more on each call" in costly.claim
    assert costly.severity == Severity.WARNING
    # 200k calls a second for the same kernel time: about 1.0 µs each, as cheap as the yardstick: many calls, said as
    # information (the program's own pattern, not something taxing each call).
    _, (cheap,) = _find(_writer_making_calls(200_000), "kernel-time")
    assert "about 1.0 µs of kernel time each, as cheap as a small cached read here (0.70 µs, measured): many calls, " \
        "not costly ones" in cheap.claim
    assert cheap.severity == Severity.INFO
    # No yardstick (an older recording), or few calls: no per-call statement, the warning as before.
    for obs in (_writer_making_calls(200_000, read_call_us=None), _writer_making_calls(2_000)):
        _, (plain,) = _find(obs, "kernel-time")
        assert "µs of kernel time each" not in plain.claim and plain.severity == Severity.WARNING


def test_a_file_watch_that_fires_per_read_is_said_with_the_kernel_time_of_the_reader() -> None:
    base = _writer_beside_trainer(kernel=0.21)
    watch = "inotify on the directory of gauges.bin: IN_ACCESS|IN_OPEN"
    obs = replace(base, os_facts=replace(base.os_facts, watches=(watch,)))  # type: ignore[attr-defined]
    _, (finding,) = _find(obs, "kernel-time")
    assert f"on this process's system calls the kernel also runs: file-system watch: {watch} (the kernel queues an " \
        "event for every matching read" in finding.claim
    _, (note,) = _find(obs, "settings-changed")
    assert f"file-system watch: {watch}" in note.claim


def _poller(slack_ns: int, switches_per_s: float) -> object:
    """A thread that polls with short sleeps (its stacks at `time.sleep`), the process at a given timer slack."""
    return scenario([Thread("poller", 101, 0.05, 0.0, computing=False, vol_per_s=switches_per_s)],
                    timerslack_ns=slack_ns)


def test_a_long_timer_slack_that_makes_up_a_pollers_sleeps_is_the_cause() -> None:
    analysis, (finding,) = _find(_poller(10_000_000, 70.0), "timer-slack")
    assert finding.claim.startswith("the process's timer slack is 10 ms (the kernel's default 50 µs): every sleep and "
                                    "timed wait of its threads may end that late; poller sleeps 100% of its samples")
    assert "about 70 times a second, 14.3 ms a sleep on average: the slack, not the time asked for" in finding.claim
    assert finding.severity == Severity.WARNING and abs(finding.impact - 0.7) < 0.01  # 70 slacks of 10 ms a second
    assert ("timer slack (/proc/PID/timerslack_ns)", "10000000 ns") in finding.evidence
    assert analysis.headline is not None and analysis.headline.text.startswith("the process's timer slack is 10 ms")


def test_the_default_slack_or_long_sleeps_are_not_a_cause() -> None:
    assert _find(_poller(50_000, 70.0), "timer-slack")[1] == []  # the twin: the default slack
    assert _find(_poller(500_000, 70.0), "timer-slack")[1] == []  # under a millisecond: not looked at
    # A thread that sleeps a second at a time: the slack is a hundredth of each sleep, said but not a cost.
    _, (finding,) = _find(_poller(10_000_000, 1.0), "timer-slack")
    assert finding.severity == Severity.INFO and finding.impact == 0.0
    assert "makes up its sleeps" not in finding.claim


def _reader(storage_mib_s: float, read_mib_s: float, at_read: int) -> object:
    """A loader that limits nothing else (it is the only thread): ``at_read`` of its 12 samples at a pread line, the
    rest in a torch op; the process's reads over a 4 s window, from storage and in all."""
    read_line = Frame("TileShard.read", "/app/tiles.py", 72)
    frames = [(read_line,)] * at_read + [(TORCH_OP, Frame("loader", "/app/train.py", 40))] * (12 - at_read)
    mib = 1 << 20
    io = (ProcessIo(rchar=0, read_bytes=0, syscr=0),
          ProcessIo(rchar=int(read_mib_s * 4 * mib), read_bytes=int(storage_mib_s * 4 * mib), syscr=10_000))
    obs = scenario([Thread("tile-loader", 101, 0.5, 0.0)], io=io,
                   lines={"/app/tiles.py:72": "        rec = os.pread(fd, RECORD, off)"})
    stacks = tuple(replace(st, threads=(replace(st.threads[0], frames=frames[i]),))
                   for i, st in enumerate(obs.stacks))  # type: ignore[attr-defined]
    return replace(obs, stacks=stacks)  # type: ignore[type-var]


def test_reads_that_go_to_the_disk_at_a_line_the_loader_spends_its_time_on() -> None:
    analysis, (finding,) = _find(_reader(24.0, 24.0, at_read=8), "storage-reads")
    assert finding.claim.startswith("the process's reads go to the disk, not the page cache: 24.0 MiB/s fetched from "
                                    "storage, 100% of what it reads; tile-loader spends 67% of its samples reading "
                                    "at TileShard.read (tiles.py:72) `rec = os.pread(fd, RECORD, off)`")
    assert finding.severity == Severity.WARNING and abs(finding.impact - 8 / 12) < 1e-6


def _with_memory_limit(obs: object, failcnt_end: int, usage_bytes: int) -> object:
    """``obs`` with its cgroup (v1) at a 64 MiB limit in each sweep, its failcnt from 0 to ``failcnt_end``."""
    from dflash_diag.model.sched import CgroupMemory

    sweeps = obs.sched  # type: ignore[attr-defined]
    last = len(sweeps) - 1
    return replace(obs, sched=tuple(replace(s, cgroup_memory=CgroupMemory(  # type: ignore[type-var]
        version=1, group="job-17", limit_bytes=64 << 20, usage_bytes=usage_bytes, limit_hits=failcnt_end * i // last,
        pages_in=2_000 * i, pages_in_are_refaults=False)) for i, s in enumerate(sweeps)))


def test_reads_that_go_to_the_disk_because_the_processs_memory_cgroup_is_at_its_limit() -> None:
    """The process's own memory cgroup, at its limit and meeting it all the window, keeps the page cache from holding
    what the loader reads again: said as why, with the counters; a limit it keeps under is not said."""
    obs = _reader(24.0, 24.0, at_read=8)
    span_s = obs.sched[-1].monotonic_s - obs.sched[0].monotonic_s  # type: ignore[attr-defined]
    _, (finding,) = _find(_with_memory_limit(obs, 40_000, 67_000_000), "storage-reads")
    assert (f"tile-loader spends 67% of its samples reading at TileShard.read (tiles.py:72) `rec = os.pread(fd, "
            f"RECORD, off)`: its cgroup keeps the page cache from holding it: a memory limit of 64 MiB (cgroup "
            f"`job-17`): its usage at the limit, which its charges met {40_000 / span_s:,.0f} times a second between "
            f"reads (memory.failcnt)") in finding.claim
    assert finding.remedy.startswith("Raise the group's memory limit")
    from dflash_diag.analysis.settings import non_default
    (limit,) = [r for r in non_default(_with_memory_limit(obs, 40_000, 67_000_000)) if r.name == "a memory limit"]
    assert limit.text().startswith("a memory limit: 64 MiB (cgroup `job-17`): its usage at the limit")
    _, (under,) = _find(_with_memory_limit(obs, 0, 20_000_000), "storage-reads")  # a limit never met
    assert "memory limit" not in under.claim and "not in memory (a first read" in under.claim


def test_reads_served_by_the_page_cache_or_few_bytes_or_little_time_reading_are_not_named() -> None:
    assert _find(_reader(0.1, 24.0, at_read=8), "storage-reads")[1] == []  # the twin: cached reads
    assert _find(_reader(0.5, 0.5, at_read=8), "storage-reads")[1] == []  # under a MiB a second
    assert _find(_reader(24.0, 24.0, at_read=0), "storage-reads")[1] == []  # nobody waits at a read
    _, (info,) = _find(_reader(24.0, 24.0, at_read=2), "storage-reads")  # 17%: said, not a warning
    assert info.severity == Severity.INFO and info.impact == 0.0



def _syncing_trainer(syscall: str) -> object:
    """A training thread whose stacks sit at its log line while /proc's sweeps catch it asleep in ``syscall``."""
    line = Frame("log_step", "/app/train.py", 70)
    threads = [Thread("trainer", 102, 0.2, 0.05, stack_frames=(line,), syscall=syscall)]
    return scenario(threads, lines={"/app/train.py:70": "        os.fsync(fh.fileno())"})


def test_a_thread_asleep_while_the_kernel_syncs_its_writes_is_named_with_the_call_and_its_line() -> None:
    _, (finding,) = _find(_syncing_trainer("fsync"), "kernel-wait")
    assert finding.claim.startswith("trainer is asleep in the kernel waiting for the storage to confirm writes")
    assert "blocked in `fsync` in 3 of its 3 readings (100%)" in finding.claim
    assert "log_step (train.py:70) `os.fsync(fh.fileno())`" in finding.claim
    assert finding.severity == Severity.WARNING and finding.impact == 1.0


def test_an_open_that_waits_says_the_permission_watch_a_child_holds() -> None:
    """Batch 19's loader blocked in openat while its scanner child held FAN_OPEN_PERM on the spool: the claim says
    the watch and who must answer; a fsync's wait is not the watch's; without the watch, nothing of it is said."""
    watch = "fanotify on inode 2293810, held by its child 11 (`python`): FAN_OPEN_PERM"
    obs = _syncing_trainer("openat")
    held = replace(obs, os_facts=replace(obs.os_facts, watches=(watch,)))  # type: ignore[attr-defined]
    _, (finding,) = _find(held, "kernel-wait")
    assert finding.claim.startswith("trainer is asleep in the kernel waiting for file-system metadata")
    assert (f"; {watch}: every matching open or read of a watched file, by any process, waits in the kernel until "
            "that child has read the event and answered (a fanotify permission event)") in finding.claim
    assert "held by its child" not in _find(obs, "kernel-wait")[1][0].claim
    syncing = _syncing_trainer("fsync")
    synced = replace(syncing, os_facts=replace(syncing.os_facts, watches=(watch,)))  # type: ignore[attr-defined]
    assert "held by its child" not in _find(synced, "kernel-wait")[1][0].claim


def test_a_thread_asleep_on_a_peer_a_lock_or_a_timer_is_not_the_kernels_work() -> None:
    for call in ("futex", "read", "epoll_wait", "clock_nanosleep"):
        assert _find(_syncing_trainer(call), "kernel-wait")[1] == [], call


def test_kernel_time_at_a_line_that_writes_says_the_files_open_for_synchronous_writes() -> None:
    obs = _writer_beside_trainer(kernel=0.21)
    writes = {"/app/metrics.py:31": "        os.write(self.fd, line)"}
    facts = replace(obs.os_facts, sync_files=("ledger.jsonl (O_DSYNC)",))  # type: ignore[attr-defined]
    obs = replace(obs, os_facts=facts, source_lines={**obs.source_lines, **writes})  # type: ignore[attr-defined]
    (finding,) = [f for f in analyse(obs).findings if f.rule_id == "kernel-time"]
    assert finding.claim.endswith("; the process holds ledger.jsonl (O_DSYNC) open for synchronous writes: each write "
                                  "there returns only once the storage has it")
    # A line that does not write: the files are not said.
    quiet = replace(obs, source_lines={**obs.source_lines, "/app/metrics.py:31": "        x = y + 1"})
    (other,) = [f for f in analyse(quiet).findings if f.rule_id == "kernel-time"]
    assert "synchronous" not in other.claim


def _forking_loader(loader_kernel: float, rss_bytes: int = 800 << 20) -> object:
    """A loader that starts a gzip child per shard through subprocess (its stacks in _execute_child) beside a
    trainer faulting 40,000 pages a second in; the process holds ``rss_bytes``."""
    from dflash_diag.model import ProcessSample

    fork = (Frame("Popen._execute_child", "/usr/lib/python3.11/subprocess.py", 1885),
            Frame("read_extract", "/app/shards.py", 28))
    threads = [Thread("extract-loader", 101, loader_kernel, 0.05, stack_frames=fork, kernel=loader_kernel),
               Thread("trainer", 102, 0.4, 0.3, kernel=0.05, minflt_per_s=40_000)]
    obs = scenario(threads, children_started=[(900, 1, 0.05, 0.0), (901, 1, 0.05, 0.0)],
                   lines={"/app/shards.py:28": '    out = subprocess.run(["gzip", "-dc", path], capture_output=True)'})
    return replace(obs, resources=(ProcessSample(monotonic_s=0.0, rss_bytes=rss_bytes, threads=3, open_fds=12),))


def test_children_forked_from_a_large_process_are_named_with_the_forker_and_the_copy_on_write_faults() -> None:
    _, (finding,) = _find(_forking_loader(0.13), "fork-cost")
    assert finding.claim.startswith("the process forks while it holds 0.8 GiB: 2 children started in 4 s")
    assert "by extract-loader at read_extract (shards.py:28) `out = subprocess.run(" in finding.claim
    assert "(0.13 CPUs in the kernel)" in finding.claim and "trainer faults 40.0k pages a second in" in finding.claim
    # The trainer's kernel time (0.05 CPUs) and of the loader's 0.13 only the copies of 2 forks of 0.78 GiB in 4 s at
    # this box's measured 20 ms a GiB (0.008 CPUs): the rest of the loader's kernel time is its own work.
    assert finding.severity == Severity.WARNING and abs(finding.impact - 0.058) < 0.001
    assert dict(finding.evidence)["page tables copied, at this box's measured cost"].startswith("0.008 CPUs")


def test_a_forker_faulting_in_its_own_work_beside_one_vfork_is_not_warned() -> None:
    """Batch 15's sort twin, attached (a false alarm when scored): one `sort` child in 5 s started through
    subprocess (vfork) from a 0.4 GiB process, its crawl thread faulting pages in and in the kernel reading the
    child's output. Its faults and kernel time are its own work: information, not a warning."""
    from dflash_diag.model import ProcessSample

    fork = (Frame("Popen._execute_child", "/usr/lib/python3.11/subprocess.py", 1885),
            Frame("ShardDeduper.unique_lines", "/app/dedup.py", 20))
    threads = [Thread("crawl", 101, 0.3, 0.05, stack_frames=fork, kernel=0.07, minflt_per_s=17_600),
               Thread("trainer", 102, 0.4, 0.3, kernel=0.01)]
    obs = scenario(threads, children_started=[(900, 1, 0.05, 0.0)],
                   lines={"/app/dedup.py:20": '        out = subprocess.run(["sort", "-f", "-u", path])'})
    obs = replace(obs, resources=(ProcessSample(monotonic_s=0.0, rss_bytes=420 << 20, threads=3, open_fds=12),))
    found = _find(obs, "fork-cost")[1]
    assert all(f.severity == Severity.INFO and f.impact == 0.0 for f in found)
    assert all("crawl faults" not in f.claim for f in found)


def test_a_cheap_fork_or_a_small_process_is_not_a_fork_cost() -> None:
    assert _find(_forking_loader(0.01), "fork-cost")[1] == []  # a pool started once an epoch
    assert _find(_forking_loader(0.13, rss_bytes=100 << 20), "fork-cost")[1] == []


def test_a_watch_is_said_only_where_its_events_match_what_the_hot_line_does() -> None:
    from dflash_diag.analysis.findings.scheduler import _watch_matches

    reads = "Archive.record (gauges.py:46) `return RECORD.unpack(os.pread(self.fd, RECORD.size, off))`"
    assert _watch_matches("inotify on the directory of gauges.bin: IN_ACCESS|IN_OPEN", reads)
    assert not _watch_matches("inotify on the directory of gauges.bin: IN_MODIFY|IN_CLOSE_WRITE", reads)
    assert _watch_matches("inotify on ledger.csv: IN_MODIFY", "Ledger.add (ledger.py:9) `self.fh.write(row)`")
    assert _watch_matches("fanotify on inode 12: FAN_OPEN_PERM", "load (data.py:3) `open(path).read()`")
    assert _watch_matches("inotify on inode 12: IN_MODIFY", "")  # the line unknown: said


def test_a_thread_driving_a_gpu_has_the_drivers_kernel_time_said_not_warned() -> None:
    """A CUDA trainer with 0.23 of its 0.55 CPUs in the kernel (a healthy GPU twin on an H100's host): the driver's
    launches and the yields of its spinning syncs are kernel time; information, not a warning. The same thread in a
    process on no GPU is warned as before."""
    from findings_builders import gpu_sample

    backward = Frame("Tensor.backward", "/venv/lib/python3.11/site-packages/torch/_tensor.py", 626)
    cpu_only = scenario([Thread("trainer", 102, 0.55, 0.0, kernel=0.23, frame=backward, syscall="futex")])
    _, (plain,) = _find(cpu_only, "kernel-time")
    assert plain.severity == Severity.WARNING and "drives the GPU" not in plain.claim
    on_gpu = replace(cpu_only, gpus=tuple((gpu_sample(t=t, pid=PID),) for t in (0.0, 2.0, 4.0)))  # type: ignore[arg-type]
    _, (driver,) = _find(on_gpu, "kernel-time")
    assert driver.severity == Severity.INFO
    assert "it drives the GPU: the CUDA driver's launches and waits (ioctl, yields while it spins on a sync) are " \
        "kernel time too" in driver.claim


def test_kernel_time_at_a_socket_call_the_io_counters_do_not_count_is_information() -> None:
    """The casebook's socket-timeout twin, recorded from outside: its feed reader spends 0.36 of 0.88 CPUs in the
    kernel at a `recv_into` line, and the process's read and write counters saw no call (socket calls are not in
    them). How many calls and what each costs cannot be told: said, as information (it was a warning, a false alarm,
    when batch 9 was scored)."""
    import gzip
    from pathlib import Path

    from dflash_diag.analysis import analyse
    from dflash_diag.observe.codec import read_observation

    path = Path(__file__).resolve().parents[1] / "casebook" / "observations" / "settings9_telemetry_fixed__outside.json.gz"
    analysis = analyse(read_observation(gzip.decompress(path.read_bytes())))
    (finding,) = [f for f in analysis.findings if f.rule_id == "kernel-time"]
    assert "recv_into" in finding.claim and "socket calls are not in the process's read and write counts" in finding.claim
    assert finding.severity == Severity.INFO and analysis.healthy


def _telemetry_with_native(case: str, raw: str) -> Observation:
    """The casebook's socket-timeout program (or its twin), recorded from outside, with a native profile of the same
    program (py-spy --native --idle, 3 s at 20 Hz) recorded apart: its thread IDs mapped by thread name."""
    import gzip
    from pathlib import Path

    from dflash_diag.observe.codec import read_observation
    from dflash_diag.sources.native_profile import parse_raw

    tests = Path(__file__).resolve().parents[1]
    obs = read_observation(gzip.decompress((tests / "casebook" / "observations" / f"{case}__outside.json.gz").read_bytes()))
    tids = {t.name: t.os_thread_id for s in obs.stacks for t in s.threads}
    stacks = tuple(replace(s, os_thread_id=tids.get(s.thread_name) or s.os_thread_id) for s in parse_raw(
        gzip.decompress((tests / "fixtures" / "cpu" / raw).read_bytes()).decode()))
    return replace(obs, native=NativeProfile(rate_hz=20.0, duration_s=3.0, samples=sum(s.count for s in stacks),
                                             stacks=stacks))


def test_kernel_time_at_a_socket_says_when_each_call_polls_first_because_the_socket_has_a_timeout() -> None:
    """socket.setdefaulttimeout(30) before the feed socket was made: CPython polls it before every recv_into
    (internal_select under sock_call_ex, in 56% of the reader's native samples). Its twin's blocking socket calls
    recv directly: nothing said."""
    planted = analyse(_telemetry_with_native("settings9_telemetry", "pyspy_native_idle_telemetry.raw.gz"))
    (finding,) = [f for f in planted.findings if f.rule_id == "kernel-time"]
    assert "56% of its native samples poll the socket before the call (CPython's internal_select): the socket has " \
        "a timeout (socket.settimeout(), or socket.setdefaulttimeout() before it was created)" in finding.claim
    assert planted.headline is not None and "poll the socket before the call" in planted.headline.text
    twin = analyse(_telemetry_with_native("settings9_telemetry_fixed", "pyspy_native_idle_telemetry_fixed.raw.gz"))
    (quiet,) = [f for f in twin.findings if f.rule_id == "kernel-time"]
    assert "poll the socket" not in quiet.claim and quiet.severity == Severity.INFO and twin.healthy


def _trainer_beside_a_watching_child(*, child_run: float = 0.75, watching: tuple[str, ...] = ("clear_refs",),
                                     trainer_wait: float = 0.3) -> Observation:
    """A trainer whose main thread waits for a CPU ``trainer_wait`` of the window beside a child that holds the
    trainer's own /proc entries ``watching`` open in its last sweep, 95% of its CPU in the kernel."""
    obs = scenario([Thread("MainThread", 101, 1.0 - trainer_wait, trainer_wait, syscall="brk")],
                   children=[(701, 1, child_run, 1.0 - child_run)])
    ticks = {0.0: (0, 0), 4.0: (int(child_run * 4 * 5), int(child_run * 4 * 95))}  # user, kernel: 5% / 95%
    sched = tuple(replace(s, children=tuple(
        replace(c, user_ticks=ticks[s.monotonic_s][0], kernel_ticks=ticks[s.monotonic_s][1],
                watching=watching if s.monotonic_s > 0 else ()) for c in s.children)) for s in obs.sched)
    return replace(obs, sched=sched)


def test_a_child_at_work_on_the_processs_own_proc_entries_is_the_cause_with_the_cpus_it_takes() -> None:
    analysis, (finding,) = _find(_trainer_beside_a_watching_child(), "child-watches-process")
    assert finding.claim.startswith(f"its child process 701 (`python`) works on this process: it holds "
                                    f"/proc/{PID}/clear_refs open and takes 0.75 CPUs, 95% of it in the kernel "
                                    "(clear_refs: each write of 1 to 4 walks every page table of this process")
    assert "MainThread waited for a CPU 30% of the window" in finding.claim
    assert finding.severity == Severity.WARNING and finding.impact >= 0.05
    assert (f"/proc/{PID}/clear_refs", "open in 1 of 2 sweeps: each write of 1 to 4 walks every page table of this "
            "process under its memory-map lock, clears the pages' accessed or soft-dirty bits and flushes its "
            "TLB") in finding.evidence
    assert "cpu-contended" not in {f.rule_id for f in analysis.findings}  # the cause says why the threads wait


def test_a_watching_child_that_takes_little_cpu_or_none_of_the_trainers_is_not_a_cause() -> None:
    # The twin: the child reads status now and then (0.01 CPUs): not said.
    assert _find(_trainer_beside_a_watching_child(child_run=0.01, watching=("status",)), "child-watches-process")[1] == []
    # The same busy child holding none of the process's entries: not at work on it (other rules weigh its CPU).
    assert _find(_trainer_beside_a_watching_child(watching=()), "child-watches-process")[1] == []
    # The trainer gets its CPU: said, as information, without a cost.
    (finding,) = _find(_trainer_beside_a_watching_child(trainer_wait=0.02), "child-watches-process")[1]
    assert finding.severity == Severity.INFO and finding.impact == 0.0


def _fetchers_opening_connections(refused: int, connect_frames: bool) -> Observation:
    """A trainer fed by two fetch threads that open a connection per request to its child's service; ``refused``
    connections at a full accept queue in the window (ListenOverflows)."""
    connect = (Frame("create_connection", "/usr/lib/python3.11/socket.py", 836),
               Frame("fetch_window", "/app/train.py", 52))
    request = (Frame("read", "/usr/lib/python3.11/http/client.py", 460), Frame("fetch_window", "/app/train.py", 53))
    fetchers = [Thread(f"fetch_{i}", 110 + i, 0.05, 0.0, stack_frames=connect if connect_frames else request)
                for i in range(2)]
    obs = scenario([Thread("trainer", 101, 0.5, 0.0), *fetchers], children=[(701, 1, 0.1, 0.0)])
    opening = Connecting(remote="127.0.0.1:41313", sockets=3, retransmits=1, listener_pid=701, accept_queue=6,
                         backlog=5)
    n = len(obs.sched)
    sweeps = tuple(replace(s, listen_overflows=1000 + refused * i // max(1, n - 1),
                           connecting=(opening,) if i % 2 else ()) for i, s in enumerate(obs.sched))
    return replace(obs, sched=sweeps)


def test_connections_refused_at_a_full_listen_queue_name_the_listener_its_backlog_and_the_wait() -> None:
    from dflash_diag.analysis.findings import connect

    analysis, found = _find(_fetchers_opening_connections(20, connect_frames=True), "listen-queue-full")
    (finding,) = found
    assert finding.claim.startswith("connections refused at a full listen queue: its child process 701 (`python`) "
                                    "listens on 127.0.0.1:41313 with a backlog of 5 (its listen()), and the kernel "
                                    "refused 20 connections at a full accept queue in the window")
    assert "wait to connect in 100% of their samples" in finding.claim
    assert dict(finding.evidence)["listener on 127.0.0.1:41313"].endswith("backlog 5, accept queue up to 6 when read")
    assert connect.RULES[0].id == "listen-queue-full" and finding.severity == Severity.WARNING
    assert analysis.headline is not None and analysis.headline.text.startswith("connections refused at a full listen")
    # No connection refused in the window (a backlog that takes the bursts): nothing, whatever the stacks show.
    _, found = _find(_fetchers_opening_connections(0, connect_frames=True), "listen-queue-full")
    assert found == []
    # Refused, but the threads that matter never wait to connect: information, no cost claimed.
    _, (quiet,) = _find(_fetchers_opening_connections(20, connect_frames=False), "listen-queue-full")
    assert quiet.severity == Severity.INFO and quiet.impact == 0.0


def test_the_processs_own_io_uring_pollers_take_the_cpus_its_working_threads_wait_for() -> None:
    # Two io_uring SQPOLL threads spin beside the trainer and two readers on a 2-CPU box: they are named, with what
    # starts them, and their part of the working threads' wait is the cost. Unnamed native threads (an OpenMP pool
    # shares the process's name) are never weighed as pollers.
    readers = [Thread(f"window-reader-{i}", 110 + i, 0.26, 0.5) for i in range(2)]
    pollers = [Thread("iou-sqp-101", 201 + i, 0.45, 0.55, python=False, comm="iou-sqp-101") for i in range(2)]
    analysis, (finding,) = _find(scenario([Thread("trainer", 101, 0.4, 0.6), *readers, *pollers]),
                                 "own-threads-take-cpu")
    assert finding.severity == Severity.WARNING and finding.impact >= 0.05
    assert finding.claim.startswith("the process's own polling threads take the CPUs its working threads wait for: 2 "
                                    "`iou-sqp-N` threads (0.45 CPUs, 0.45 CPUs on a CPU): io_uring's submission-queue "
                                    "polling thread (a ring set up with IORING_SETUP_SQPOLL")
    pool = [Thread("python", 201 + i, 0.45, 0.55, python=False) for i in range(2)]
    _, found = _find(scenario([Thread("trainer", 101, 0.4, 0.6), *readers, *pool]), "own-threads-take-cpu")
    assert found == []
    # The same pollers on a box where nothing waits for a CPU: nothing said.
    idle = [Thread("iou-sqp-101", 201, 0.3, 0.0, python=False, comm="iou-sqp-101")]
    _, found = _find(scenario([Thread("trainer", 101, 0.5, 0.02), *idle]), "own-threads-take-cpu")
    assert found == []


def test_variables_the_program_set_outside_the_catalogue_are_listed_by_name() -> None:
    base = scenario([Thread("MainThread", PID, 0.8, 0.0)])
    obs = replace(base, os_facts=replace(base.os_facts, env_set_by_program=("ZQ_MODE", "ZQ_TABLE")))  # type: ignore[attr-defined]
    _, (note,) = _find(obs, "settings-changed")
    assert note.severity is Severity.INFO
    assert note.claim.endswith("the program set 2 variables the settings catalogue does not know in its own "
                               "environment at run time: ZQ_MODE, ZQ_TABLE"), note.claim
    assert dict(note.evidence)["set by the program at run time"].startswith("ZQ_MODE, ZQ_TABLE: names only")
    assert _find(base, "settings-changed")[1] == []  # nothing set, nothing listed


def test_the_configurations_departures_from_the_codes_defaults_are_listed_an_option_turned_off_first() -> None:
    from dflash_diag.model.evidence import DeclaredDefault, SourceFile

    pacing = DeclaredDefault(name="max_pacing_mbit", default="0", line=21, note="0: no cap",
                             configured="300", configured_in="run.toml")
    path = DeclaredDefault(name="contraction_path", default="'greedy'", line=28, configured="'none'",
                           configured_in="run.toml")
    files = (SourceFile(path="/app/profile.py", exists=True, mtime_wall_s=1.0, overridden=(pacing, path)),)
    obs = replace(scenario([Thread("MainThread", PID, 0.8, 0.0)]), files=files)
    _, (note,) = _find(obs, "settings-changed")
    assert note.severity is Severity.INFO
    assert note.claim == ("the run's configuration sets 2 values away from the code's declared defaults: "
                          "`contraction_path` = 'none' (default 'greedy'), `max_pacing_mbit` = 300 (default 0)"), note.claim
    assert dict(note.evidence)["max_pacing_mbit = 300"] == ("`max_pacing_mbit` = 300 in run.toml (the code's default "
                                                            "0 at profile.py:21: 0: no cap)")


def test_an_interpreter_option_is_listed_as_the_setting_it_equals_with_where_it_was_given() -> None:
    obs = scenario([Thread("MainThread", PID, 0.8, 0.0)], env=[("PYTHONDEVMODE", "1", "command line (-X dev)")])
    _, (note,) = _find(obs, "settings-changed")
    assert "PYTHONDEVMODE=1" in note.claim
    assert dict(note.evidence)["PYTHONDEVMODE=1"].startswith("the interpreter's command line (-X dev); default ")
