"""The casebook: small threaded training programs written as different third parties would write them, each
with one planted cause (or none), and what ``doctor`` must say about each, attached from outside and under
``dflash-diag run``.

A program lives in ``programs/<name>/`` with its own layout, names and style; none imports the reference
trainer or this package. ``ready`` is a regex on the program's own output (stdout + stderr) that says it
reached the state to diagnose; ``settle_s`` more seconds let it get there fully.

``modes``: the modes a case runs in (``outside``, ``probes`` and ``attach``: started plain, then
``dflash-diag attach PID --probes <attach_probes>``, then ``doctor``; see harness.py).

Expectations per mode: ``rules`` must all be named (any severity); ``headline`` is the set of rule ids the
headline may lead with or give as its first cause; ``headline_text`` names the mechanism (the root's thread,
function or lock-acquire line); ``forbid`` lists rule ids that must not be named; a healthy case must get no
warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Expect:
    rules: frozenset[str] = frozenset()
    headline: frozenset[str] = frozenset()
    headline_text: str = ""  # a regex the headline's text must match (e.g. the hot function's name)
    forbid: frozenset[str] = frozenset()  # rule ids that must not be named at all (a hang is never a bottleneck)


def _both(rules: set[str], headline: set[str] | None = None, text: str = "") -> dict[str, Expect]:
    e = Expect(frozenset(rules), frozenset(headline if headline is not None else rules), text)
    return {"outside": e, "probes": e}


HEALTHY = {"outside": Expect(), "probes": Expect(), "attach": Expect()}
IN_PROCESS = ("probes", "attach")  # the health cases: under `dflash-diag run`, and attached once running


def _with_attach(expect: dict[str, Expect]) -> dict[str, Expect]:
    """A GPU case of the first batches, also attached once running: the same expectation as under `run`."""
    return {**expect, "attach": expect["probes"]}


def _in_process(rules: set[str], headline: set[str] | None = None, text: str = "") -> dict[str, Expect]:
    e = Expect(frozenset(rules), frozenset(headline if headline is not None else rules), text)
    return {"probes": e, "attach": e}


GPU_MODES = ("outside", "attach")  # batch D: diagnosed from outside, then attached to (one start: harness.py)


def _gpu(rules: set[str], headline: set[str] | None = None, text: str = "") -> dict[str, Expect]:
    e = Expect(frozenset(rules), frozenset(headline if headline is not None else rules), text)
    return {"outside": e, "attach": e}


def _no_rule_yet(rule: str) -> dict[str, str]:
    """A GPU kind no rule of doctor's names yet: the case records what it should say, CI reports the miss."""
    return {m: f"no rule yet: {rule}" for m in GPU_MODES}


def _h200_missed(what: str) -> dict[str, str]:
    """A GPU case the H200 recording (tuning run, 2026-12-05) missed in both modes: what it said instead."""
    return {m: f"H200 2026-12-05, tuning run: {what}" for m in GPU_MODES}


# Held-out (case, mode) runs missed when scored once and named by a rule written after that scoring: the score stays
# as it was in docs/benchmarks.md; these runs are tuning runs from then on (the next held-out figure needs new ones).
FIXED_AFTER_SCORING = frozenset({("settings_default_dtype_f64", "probes"), ("settings_default_dtype_f64", "attach"),
                                 *((c, m) for c in ("settings20_moraine", "settings20_bracken", "settings20_plover",
                                                    "settings21_drumlin", "settings21_tarn", "settings21_curlew",
                                                    "settings21_yarrow", "settings22_alder", "settings22_puffin",
                                                    "settings22_lagoon", "settings22_scree", "settings23_caldera",
                                                    "settings23_wren", "settings23_avocet", "settings23_ibis",
                                                    "settings24_mesa", "settings24_petrel",
                                                    "settings24_godwit", "settings25_linnet")
                                   for m in ("outside", "probes", "attach")),
                                 # under probes (2026-12-07, stop 57): the changed value on the thread that has the
                                 # CPU the root waits for is where-time-goes's because; the clip loader's BASH_ENV,
                                 # exported from the profile, is the root of its wait on its bash children (recorded
                                 # again)
                                 *((c, m) for c in ("settings25_turnstone", "settings25_gannet", "settings25_shrike")
                                   for m in ("outside", "probes", "attach")),
                                 *((c, m) for c in ("settings26_skua", "settings26_bittern")
                                   for m in ("outside", "probes", "attach")),
                                 # the reader child's memory cgroup limit, met 75,000+ times a second, is a control
                                 # of that child in the wait's text (2026-12-07, stop 58; recorded again)
                                 *(("settings27_samphire", m) for m in ("outside", "probes", "attach")),
                                 # the trainer's time in DDP's buffer sync, the code its `forward_sync_buffers=True`
                                 # argument from the profile names (library-argument-at-hot-code, stop 58)
                                 *(("settings27_whimbrel", m) for m in ("outside", "probes", "attach")),
                                 # the scan reader child's blkio read limit, run at 98-101% of it, is a control of
                                 # that child in the wait's text (stop 58; recorded again)
                                 *(("settings28_kame", m) for m in ("outside", "probes", "attach")),
                                 ("settings24_dunlin", "outside"), ("settings24_dunlin", "attach"),
                                 *(("settings26_machair", m) for m in ("outside", "probes", "attach")),
                                 *(("settings_nice_ingest", m) for m in ("outside", "probes", "attach")),
                                 ("settings2_metrics", "attach"), ("settings2_vision", "probes"),
                                 ("settings2_vision", "attach"), ("settings2_textcls", "outside"),
                                 ("settings2_textcls", "attach"), ("settings2_reco", "probes"),
                                 ("settings2_reco", "attach"), ("settings2_reco", "outside"),
                                 *((c, m) for c in ("settings3_speech", "settings3_news")
                                   for m in ("outside", "probes", "attach")),
                                 ("settings3_landcover", "probes"), ("settings3_landcover", "attach"),
                                 ("settings4_genomics", "probes"), ("settings4_genomics", "attach"),
                                 ("settings4_fraud", "probes"), ("settings5_seismic", "outside"),
                                 ("settings5_seismic", "probes"), ("settings5_ocr", "outside"),
                                 ("settings5_ocr", "probes"),
                                 *(("settings5_molprop", m) for m in ("outside", "probes", "attach")),
                                 ("settings5_energy_fixed", "probes"), ("settings5_energy_fixed", "attach"),
                                 *(("settings6_retail", m) for m in ("outside", "probes", "attach")),
                                 *(("settings6_chem", m) for m in ("outside", "probes", "attach")),
                                 ("settings8_lidar", "attach"),
                                 ("settings8_tides", "outside"), ("settings8_tides", "attach"),
                                 ("settings8_tides", "probes"),
                                 *(("settings7_traffic", m) for m in ("outside", "probes", "attach")),
                                 ("settings8_poetry", "probes"), ("settings8_poetry", "attach"),
                                 *((c, m) for c in ("settings4_robotics", "settings4_pathology")
                                   for m in ("outside", "probes", "attach")),
                                 ("settings9_telemetry_fixed", "outside"), ("settings9_telemetry_fixed", "probes"),
                                 ("settings8_poetry", "outside"),
                                 *(("settings9_calculus", m) for m in ("outside", "probes", "attach")),
                                 ("settings9_clicks", "outside"), ("settings9_clicks", "probes"),
                                 *(("settings9_telemetry", m) for m in ("outside", "probes", "attach")),
                                 *(("settings10_tickets", m) for m in ("outside", "probes", "attach")),
                                 ("settings10_retrieval", "probes"),
                                 *(("settings10_tickets_fixed", m) for m in ("outside", "probes", "attach")),
                                 ("settings11_fraud", "probes"), ("settings11_fraud", "attach"),
                                 *(("settings11_fraud_fixed", m) for m in ("outside", "probes", "attach")),
                                 *(("settings11_seismic", m) for m in ("outside", "probes", "attach")),
                                 ("settings11_ranking", "outside"), ("settings11_ranking", "probes"),
                                 *(("settings12_tracks", m) for m in ("outside", "probes", "attach")),
                                 ("settings12_hvac", "outside"),
                                 # gpu-underused is information on its own since 2026-12-06 (the healthy twins ran
                                 # 15-42% busy): the H200's held-out twins it warned are quiet, and the EMA loop
                                 # leads outside through the stage verdict the warning outranked.
                                 *(("gpu_ema_param_loop_fixed", m) for m in ("outside", "attach")),
                                 *(("gpu_feature_cache_views_fixed", m) for m in ("outside", "attach")),
                                 ("gpu_asr_inline_features_fixed", "outside"), ("gpu_ema_param_loop", "outside"),
                                 *(("settings12_vetnotes", m) for m in ("outside", "probes", "attach")),
                                 ("settings13_playlists", "outside"), ("settings13_playlists", "attach"),
                                 # the GIL holder's native samples (2026-12-06): importlib's path search
                                 *(("settings10_catalog", m) for m in ("outside", "probes", "attach")),
                                 # the GIL holder's work library (2026-12-06, stop 44): tqdm, entered through __iter__
                                 ("settings12_vessels", "probes"),
                                 # a relay stage under another queue name (2026-12-06, stop 46): the collator's chain
                                 # through the Manager proxy's _callmethod is said
                                 ("settings14_parcels", "outside"), ("settings14_parcels", "attach"),
                                 # the peer's system calls (/proc/PID/io) and a unix socket's other end (sock_diag),
                                 # 2026-12-06, stop 46: the unbuffered logger child's 3-byte writes, the Manager
                                 # server's request and reply messages (both recorded again)
                                 *(("settings14_apiary", m) for m in ("outside", "probes", "attach")),
                                 ("settings14_parcels", "probes"),
                                 # a GIL holder at a line's C call gets the native look (2026-12-06, stop 46): NumPy's
                                 # choice, mostly in shuffle, in every mode (outside: the scoring's own rerun named it)
                                 *(("settings14_recipes", m) for m in ("outside", "probes", "attach")),
                                 # the settings a peer or the children were started with (2026-12-06, stop 46): the
                                 # sort child's LC_ALL=C.UTF-8, the decoder children's PYTHONPYCACHEPREFIX
                                 *(("settings15_headlines", m) for m in ("outside", "probes", "attach")),
                                 ("settings15_orchard", "probes"), ("settings15_orchard", "attach"),
                                 # fork-cost counts a forker's kernel time only up to its forks' page-table copies
                                 # (2026-12-06, stop 46): the sort twin's false alarm, attached, is information
                                 ("settings15_headlines_fixed", "attach"),
                                 # connections closed in the last minute to an endpoint the process uses (TIME_WAIT,
                                 # 2026-12-06, stop 46): a new connection per lookup, in every mode
                                 *(("settings15_ferry", m) for m in ("outside", "probes", "attach"))})


def _held_out_missed(what: str, modes: tuple[str, ...] = GPU_MODES) -> dict[str, str]:
    """A held-out GPU case as the H200 scored it once (2026-12-05, untuned): what it said instead."""
    return {m: f"held out, missed when scored once on the H200 (2026-12-05): {what}" for m in modes}


def _grad_none_too(rule: str) -> dict[str, Expect]:
    """Under `dflash-diag run` the checkpoint probe (on by default) sees the same tensors without a gradient, and
    its critical finding may lead; attached with --probes health, the health probe alone names it."""
    both = frozenset({rule, "checkpoint-grad-none"})
    return {"probes": Expect(both, both), "attach": Expect(frozenset({rule}), frozenset({rule}))}


@dataclass(frozen=True)
class Case:
    name: str
    program: str  # directory under programs/
    argv: tuple[str, ...]  # after the interpreter, run in the program's directory
    cause: str  # what is planted, in one line
    expect: dict[str, Expect]
    ready: str  # a regex on the program's output ...
    ready_count: int = 1  # ... seen this many times
    settle_s: float = 2.0
    ready_timeout_s: float = 120.0
    action: str = ""  # "sigstop" | "edit:<path in the program dir>"
    gpu: bool = False  # needs CUDA (skipped on CPU)
    gpu_alone: bool = False  # reads device-wide NVML utilisation: bench/casebook.py --gpu runs it with nothing else
    both: bool = False  # also run with the GPU cases (healthy programs that take --device)
    exits: bool = False
    healthy: bool = False
    family: str = ""  # the rule family it covers (docs/benchmarks.md table)
    miss: str = ""  # which of issue 9's five misses it reproduces, if any
    tags: tuple[str, ...] = field(default_factory=tuple)
    held_out: bool = False  # written last, scored once without tuning: docs/benchmarks.md reports it apart
    # mode -> why doctor misses it today (docs/benchmarks.md): CI still runs it, as an expected failure that may pass.
    known_miss: dict[str, str] = field(default_factory=dict)
    # A job (torchrun): mode -> the PID CI gives doctor ("launcher" or "rank:N"); bench/jobs.py runs every target.
    targets: dict[str, str] = field(default_factory=dict)
    modes: tuple[str, ...] = ("outside", "probes")
    attach_probes: str = "health"  # attach mode: `dflash-diag attach PID --probes ...`
    doctor_s: float | None = None  # doctor's window for this case (None: the run's); the health verdicts come
    # from the board, which a short window reads as well as a long one


def _gpu_pair(name: str, argv: tuple[str, ...], fixed_argv: tuple[str, ...], kind: str, cause: str, fixed_cause: str,
              expect: dict[str, Expect], ready: str, fixed_ready: str = "", known_miss: dict[str, str] | None = None,
              gpu_alone: bool = False, ready_timeout_s: float = 120.0, held_out: bool = False,
              twin_missed: dict[str, str] | None = None) -> tuple[Case, Case]:
    """A GPU program of batch D and its healthy twin: the same program A/B'd the way its author would (a flag, or
    the copy beside it), diagnosed from outside and then attached to. ``held_out``: written last, scored once
    without tuning (docs/benchmarks.md reports it apart). ``twin_missed``: mode -> the warning its healthy twin got
    on the GPU (a false alarm on record, replayed as an expected failure until the rule no longer raises it)."""
    extra = ("held-out",) if held_out else ()
    planted = Case(name=name, program=name, argv=argv, cause=cause, expect=expect, ready=ready, gpu=True,
                   gpu_alone=gpu_alone, family=f"gpu-{kind}", tags=("gpu-batch-D", *extra),
                   known_miss=known_miss or {}, modes=GPU_MODES, attach_probes="all", ready_timeout_s=ready_timeout_s,
                   held_out=held_out)
    twin = replace(planted, name=f"{name}_fixed", argv=fixed_argv, cause=fixed_cause, expect=HEALTHY,
                   ready=fixed_ready or ready, healthy=True, family=f"healthy (gpu-{kind})",
                   tags=("gpu-batch-D", "twin", *extra), known_miss=twin_missed or {})
    return planted, twin


def _settings_pair(name: str, program: str, argv: tuple[str, ...], fixed_argv: tuple[str, ...], kind: str,
                   cause: str, fixed_cause: str, headline_text: str, ready: str,
                   missed: dict[str, str] | None = None, batch: str = "settings batch",
                   twin_missed: dict[str, str] | None = None) -> tuple[Case, Case]:
    """A held-out program of the settings batch and its healthy twin (the author's A/B flag). No rule id is fixed
    for these kinds yet: the headline must name the mechanism (``headline_text``); the lead also reads it.
    ``missed``: mode -> what the headline said when the pair was scored once (docs/benchmarks.md, ``batch``);
    ``twin_missed``: mode -> the warning the healthy twin got then (a false alarm on record)."""
    modes = ("outside", "probes", "attach")
    planted = Case(name=name, program=program, argv=argv, cause=cause,
                   expect={m: Expect(frozenset(), frozenset(), headline_text) for m in modes}, ready=ready,
                   family=f"settings-{kind}", tags=(batch.replace(" ", "-"), "held-out"), held_out=True,
                   modes=modes, attach_probes="all", known_miss=_scored_once_miss(missed or {}, batch))
    twin = replace(planted, name=f"{name}_fixed", argv=fixed_argv, cause=fixed_cause, expect=HEALTHY,
                   healthy=True, family=f"healthy (settings-{kind})",
                   known_miss=_scored_once_miss(twin_missed or {}, batch))
    return planted, twin


# What settings batch 2's consumer-bound misses said when scored once (docs/benchmarks.md).
_B2_CONSUMER = ("`pipeline-bottleneck-drafter` (info), the consumer stage of the queue limits throughput, no cause "
                "found, its time in")


# What settings batch 4's stage verdicts said when scored once (docs/benchmarks.md).
_B4_CONSUMER = ("`pipeline-bottleneck-drafter` (info), the consumer stage of the queue limits throughput, no cause "
                "found, its time in")
_B4_PRODUCER = ("`pipeline-bottleneck-target` (info), the producer stage of the queue limits throughput, no cause "
                "found, its time in")


# What settings batch 8's producer-stage verdicts said when scored once (docs/benchmarks.md); batch 9's too.
_B8_PRODUCER = ("`pipeline-bottleneck-target` (info), the producer stage of the queue limits throughput, no cause "
                "found, its time in")
_B8_CONSUMER = ("`pipeline-bottleneck-drafter` (info), the consumer stage of the queue limits throughput, no cause "
                "found, its time in")


def _scored_once_miss(headlines: dict[str, str], batch: str) -> dict[str, str]:
    """A settings batch's held-out misses, in the words batch C's use: CI runs each as a non-strict expected
    failure, so the miss stays visible (an XPASS says a later change fixed it) and the lane stays green."""
    return {m: f"held out, missed when scored once (docs/benchmarks.md, {batch}): {h}" for m, h in headlines.items()}


CASES: tuple[Case, ...] = (
    Case(
        name="hang_dead_consumers",
        program="hang_dead_consumers",
        argv=("run_pipeline.py",),
        cause="both student (consumer) threads die of a shape error; teachers block in Queue.put forever",
        expect=_both({"pipeline-hang", "thread-died"}, {"pipeline-hang"}, r"student-0"),
        # Both tracebacks complete (their headers can be split by each other's output: count the last lines).
        ready=r"RuntimeError: mat1 and mat2", ready_count=2,
        family="hang", miss="1: hung pipeline read as slow",
    ),
    Case(
        name="gil_hog_side_thread",
        program="gil_hog_side_thread",
        argv=("distill.py",),
        cause="a telemetry thread recomputes percentiles in pure Python all the time, holding the GIL",
        expect=_both({"gil-contention"}, {"gil-contention"}, r"telemetry"),
        ready=r"\[fit\] 20 steps",
        family="gil", miss="2: symptom as the headline (GIL hog)",
    ),
    Case(
        name="recompile_storm",
        program="recompile_storm",
        argv=("train_lm.py",),
        cause="a compiled loss with dynamic=False sees a new sequence length every step (recompile limit raised)",
        expect=_both({"compile-recompile-storm"}, {"compile-recompile-storm"}),
        ready=r"step 4 ",
        settle_s=1.0,
        ready_timeout_s=180.0,
        family="compile", miss="2: symptom as the headline (recompile storm)",
    ),
    Case(
        name="python_recurrence_target",
        program="python_recurrence_target",
        argv=("main.py",),
        cause="the producer runs a per-token Python recurrence (scan_tokens): the consumer starves",
        expect=_both({"pipeline-bottleneck-target"}, {"pipeline-bottleneck-target"}, r"scan_tokens \(scan\.py:\d+\)"),
        ready=r"batches=20 ",
        family="pipeline", miss="3: hot code not named",
    ),
    Case(
        name="slow_feature_store",
        program="slow_feature_store",
        argv=("train_stream.py",),
        cause="the reader thread waits on a throttled feature-store socket: the trainer starves, nothing computes slowly",
        expect=_both({"pipeline-bottleneck-target"}, {"pipeline-bottleneck-target"},
                     r"not computing.*read_record \(train_stream\.py:\d+\)"),
        ready=r"trained 20 batches",
        family="pipeline", miss="3: hot code not named (the stage waits: where)",
    ),
    Case(
        name="stale_code",
        program="stale_code",
        argv=("launch.py",),
        cause="the loss module is edited on disk while the run goes on: the process runs the old code",
        expect=_both({"stale-code"}, {"stale-code"}),
        ready=r"step +25 ",
        action="edit:dtrain/losses.py",
        family="stale", miss="4: outside evidence (stale code)",
    ),
    Case(
        name="reentrant_checkpoint",
        program="reentrant_checkpoint",
        argv=("run.py",),
        cause="use_reentrant=True with keyword-only layer inputs: the decoder layers never get a gradient",
        expect={"outside": Expect(frozenset({"checkpoint-reentrant"}), frozenset({"checkpoint-reentrant"})),
                "probes": Expect(frozenset({"checkpoint-grad-none"}), frozenset({"checkpoint-grad-none"}))},
        ready=r"it 20 ",
        family="checkpoint", miss="4: outside evidence (reentrant checkpointing)",
    ),
    Case(
        name="warmup_compile",
        program="warmup_compile",
        argv=("app.py",),
        cause="attached while the first step is still compiling (torch.compile of the whole train step)",
        expect=_both({"warming-up"}, {"warming-up"}, r"warming up"),
        ready=r"compiling the train step",
        settle_s=3.0,
        family="compile (warm-up)", miss="5: warm-up read as steady state",
    ),
    Case(
        name="process_stopped",
        program="healthy_pipeline",
        argv=("main.py",),
        cause="a healthy pipeline stopped with SIGSTOP (Ctrl-Z, a job scheduler's suspend)",
        expect=_both({"process-stopped"}, {"process-stopped"}),
        ready=r"consumed 50 ",
        action="sigstop",
        family="process state", miss="issue 14: a stopped process read as drafter-bound",
    ),
    Case(
        name="healthy_pipeline",
        program="healthy_pipeline",
        argv=("main.py",),
        cause="none: a producer/consumer pipeline doing its work",
        expect=HEALTHY, ready=r"consumed 100 ", healthy=True, both=True, family="healthy",
    ),
    Case(
        name="healthy_side_waiters",
        program="healthy_side_waiters",
        argv=("train_with_tracking.py",),
        cause="none: a training loop with tracker threads blocked in C-level waits (SimpleQueue, socket, select)",
        expect=HEALTHY, ready=r"step 50\b", healthy=True, both=True, family="healthy",
        miss="issue 14: C-level waits at 0% CPU read as GIL contention",
    ),
    Case(
        name="healthy_loader",
        program="healthy_loader",
        argv=("trainer.py",),
        cause="none: a prefetch thread faster than the model, by design",
        expect=HEALTHY, ready=r"iter 100 ", healthy=True, both=True, family="healthy",
    ),
    Case(
        name="recompile_limit",
        program="recompile_limit",
        argv=("finetune.py",),
        cause="a compiled forward sees a new length every step and hits the recompile limit: it now runs eagerly",
        expect=_both({"compile-recompile-limit"}, {"compile-recompile-limit"}),
        ready=r"torch._dynamo hit config.recompile_limit",
        settle_s=3.0,
        family="compile", miss="4: outside evidence (the limit printed to stderr)",
    ),
    Case(
        name="checkpoint_overhead",
        program="checkpoint_overhead",
        argv=("ckpt_train.py",),
        cause="non-reentrant checkpointing of 384 tiny blocks per batch: the checkpoint machinery's Python dominates",
        expect=_both({"checkpoint-recompute-heavy"}, {"checkpoint-recompute-heavy"}),
        ready=r"batch 10\b",
        family="checkpoint",
    ),
    # --- Batch A (tuning set): the kinds the diagnosis got wrong on programs it had never seen --------------
    Case(
        name="deadlock_two_locks",
        program="deadlock_two_locks",
        argv=("train_job.py",),
        cause="lock-order inversion: the checkpoint writer holds its state lock and wants the metrics registry's, "
              "the training loop holds the registry's (a listener runs under it) and wants the state lock",
        # The headline names both threads and where each one waits to acquire (metrics.py / checkpoint.py).
        expect=_both({"deadlock"}, {"deadlock"},
                     r"(?s)(?=.*ckpt-writer)(?=.*train-loop)(?=.*metrics\.py:\d+)(?=.*checkpoint\.py:\d+)"),
        ready=r"writing checkpoint \(best loss",
        family="deadlock", tags=("locks", "lock-order"),
    ),
    Case(
        name="deadlock_condition",
        program="deadlock_condition",
        argv=("ema_eval.py",),
        cause="the training loop waits on a Condition for an EMA snapshot while holding the params lock that the "
              "evaluator thread needs before it can publish (and notify)",
        # Not queue-based: one thread in Condition.wait, the other in a Lock acquire, nothing progressing:
        # a deadlock, not a pipeline hang. The headline names the evaluator and both wait sites.
        expect=_both({"deadlock"}, {"deadlock"},
                     r"(?s)(?=.*ema-evaluator)(?=.*refresh_ema)(?=.*wait_for_snapshot)"),
        ready=r"waiting for EMA snapshot",
        family="deadlock", tags=("locks", "condition"),
    ),
    Case(
        name="replay_buffer_growth",
        program="replay_buffer_growth",
        argv=("dqn_offpolicy.py",),
        cause="the episode memory compares its episode count with a capacity in steps: it never evicts "
              "(+~25 MB/s of numpy frames; the program stops appending at 2.5 GB)",
        # Outside, RSS growth and its projection are the finding; under probes the growth site (the collector
        # thread's rollout/push, numpy allocations that tracemalloc sees) should be named too.
        expect={"outside": Expect(frozenset({"host-memory-growth"}), frozenset({"host-memory-growth"})),
                "probes": Expect(frozenset({"host-memory-growth"}), frozenset({"host-memory-growth"}),
                                 r"collector|collect \(|EpisodeMemory\.push|rollout \((agent/)?env\.py:\d+\)")},
        # Past the first minute (doctor reads growth in it as a possible warm-up): ~64 s of frames at 25 MB/s, still
        # growing (it stops appending at 2.5 GB).
        ready=r"held (1[6-9]\d\d|2[0-2]\d\d) MB", ready_timeout_s=240.0,
        family="memory", tags=("host-memory", "replay-buffer"),
        known_miss={"probes": "the growth is named with its projection, but no probe sees which line allocates "
                              "(tracemalloc would cost the trainer too much to leave on)"},
    ),
    Case(
        name="upstream_starvation",
        program="upstream_starvation",
        argv=("fit_probe_head.py",),
        cause="three stages: the ingest thread decodes ASCII pixmaps char by char in Python (decode_pixmap); the "
              "featurizers wait on it and the fit thread waits on them",
        expect=_both({"wait-chain"}, {"wait-chain"}, r"decode_pixmap \((imgpipe/)?codec\.py:\d+\)"),
        ready=r"batches 10 ",
        family="wait-chain", tags=("pipeline", "three-stage", "python-decode"),
    ),
    Case(
        name="slow_worker_thread",
        program="slow_worker_thread",
        argv=("prog.py",),
        cause="a producer and two workers fed by `q`; worker-1 also mines hard examples row by row in Python "
              "(hard_examples_python, ~40% of its time), worker-0 does not: the consumer stage is slow because of "
              "one of its threads",
        expect={mode: Expect(frozenset({"pipeline-bottleneck-drafter", "stage-slow-thread"}),
                             frozenset({"stage-slow-thread"}),
                             r"worker-1 is the slow thread of the consumer stage of `q`: \d+% of its time in "
                             r"hard_examples_python \(prog\.py:\d+\)")
                for mode in ("outside", "probes", "attach")},
        ready=r"worker-1 steps=100 ", settle_s=2.0,
        family="pipeline", tags=("pipeline", "worker-pool", "one-slow-thread", "roles"),
        modes=("outside", "probes", "attach"), attach_probes="queues",
    ),
    Case(
        name="param_monitor_cpu",
        program="param_monitor_cpu",
        argv=("train_mlp.py",),
        cause="a side thread copies every weight to a list and bins it in Python every 100 ms (weight_histogram): "
              "the single training loop loses ~40% of its speed to it",
        # Not a pipeline stage: whichever rule leads, the headline must name the monitor.
        expect={m: Expect(frozenset(), frozenset({"gil-contention", "wait-chain"}),
                          r"weight-watch|weight_histogram|watch_weights") for m in ("outside", "probes")},
        ready=r"it 200 ",
        family="gil", tags=("side-thread", "monitoring"),
        known_miss={m: "the monitor holds the GIL ~50% and the training thread shows ~0% GIL wait in its samples: "
                       "no measured cost to name it by (docs/benchmarks.md)" for m in ("outside", "probes")},
    ),
    Case(
        name="hang_report_consistency",
        program="hang_report_consistency",
        argv=("elastic_train.py",),
        cause="the only consumer (learner) blocks forever reading a reply from a wedged lease service "
              "(a child on a pipe); the sampler threads block in Queue.put",
        # A hang, in the headline and in every finding: never a bottleneck.
        expect={m: Expect(frozenset(), frozenset({"pipeline-hang", "wait-chain"}),
                          r"(?s)^(?!.*bottleneck).*(_await_release|LeaseClient)",
                          forbid=frozenset({"pipeline-bottleneck-target", "pipeline-bottleneck-drafter"}))
                for m in ("outside", "probes")},
        ready=r"lease 30 granted",
        family="hang", tags=("pipe", "consumer-blocked", "consistency"),
    ),
    Case(
        name="lock_convoy",
        program="lock_convoy",
        argv=("pretrain.py",),
        cause="six loader threads serialise on one tokenizer-cache lock held across the Python BPE merge: the "
              "trainer starves while five loaders wait on the lock",
        # Measured (tuning runs, 2-core box): the loaders wait for the GIL 40-50% of their samples and for the lock
        # under 15%: the lock is held across pure Python, so the GIL serialises them first. The headline must name
        # the code under the lock; a stage verdict because of GIL contention there is the right reading.
        expect=_both(set(), {"wait-chain", "gil-contention", "pipeline-bottleneck-target"},
                     r"(encode_cached|_bpe_merge) \(tokcache\.py:\d+\)"),
        ready=r"batch 5:",
        family="wait-chain", tags=("locks", "convoy"),
    ),
    Case(
        name="subprocess_worker_wait",
        program="subprocess_worker_wait",
        argv=("train_digits.py",),
        cause="the training loop waits on Pool.apply each step; the worker process spends its time in a "
              "pure-Python elastic_warp",
        # Best: the child's hot function; at the least, that the loop waits on a child process.
        expect=_both({"wait-chain"}, {"wait-chain"}, r"elastic_warp|make_augmented_batch|(child|worker) process"),
        ready=r"step=10 ",
        family="wait-chain", tags=("multiprocessing", "child-process"),
    ),
    Case(
        name="healthy_busy_monitor",
        program="healthy_busy_monitor",
        argv=("main.py",),
        cause="none: a training loop, a stats logger that wakes every 2 s, a status port blocked in accept()",
        expect=HEALTHY, ready=r"step 50 ", healthy=True, both=True, family="healthy",
        tags=("side-thread", "socket-accept"),
    ),
    # --- Batch B (held out): written last from real bug reports, scored once without tuning -------------------
    Case(
        name="gc_every_step",
        program="gc_every_step",
        argv=("sft_trainer.py",),
        cause="a callback runs a full gc.collect() after every step over a large heap of tokenized examples "
              "(google/tunix#2086)",
        expect={m: Expect(frozenset(), frozenset(), r"release_host_memory|gc\.collect|garbage collect")
                for m in ("outside", "probes")},
        ready=r"'step': 10,",
        family="slowdown", tags=("gc", "single-loop"), held_out=True,
    ),
    Case(
        name="epoch_worker_respawn",
        program="epoch_worker_respawn",
        argv=("train_kws.py",),
        cause="short epochs with non-persistent DataLoader workers: every epoch forks new workers that rebuild "
              "their index in worker_init_fn (open-mmlab/mmpretrain#196, pytorch/pytorch#15849)",
        expect={m: Expect(frozenset(), frozenset(), r"open_shard_index|worker_init|persistent_workers")
                for m in ("outside", "probes")},
        ready=r"epoch +2 done",
        family="slowdown", tags=("dataloader", "child-process", "process-churn"), held_out=True,
    ),
    Case(
        name="fork_held_lock",
        program="fork_held_lock",
        argv=("tagger.py",),
        cause="DataLoader workers forked while a background thread holds the label-map lock: each child inherits "
              "it held and blocks forever; the main loop waits on them (pytorch/pytorch#24927)",
        expect={m: Expect(frozenset(), frozenset({"deadlock", "pipeline-hang", "wait-chain"}),
                          r"lookup \((\w+/)?labelmap\.py:\d+\)|labelmap\.lookup",
                          forbid=frozenset({"pipeline-bottleneck-target", "pipeline-bottleneck-drafter"}))
                for m in ("outside", "probes")},
        ready=r"label map refreshed",
        family="hang", tags=("fork", "locks", "dataloader", "child-process"), held_out=True,
    ),
    Case(
        name="prefetch_join_hang",
        program="prefetch_join_hang",
        argv=("train_seg.py",),
        cause="at the end of an epoch the loop joins its prefetch thread, which is blocked in Queue.put on a full "
              "queue nobody drains any more (pytorch/pytorch#21554)",
        expect={m: Expect(frozenset(), frozenset({"deadlock", "pipeline-hang", "wait-chain"}),
                          r"(?s)(?=.*__exit__)(?=.*(bg-generator|_produce))",
                          forbid=frozenset({"pipeline-bottleneck-target", "pipeline-bottleneck-drafter"}))
                for m in ("outside", "probes")},
        ready=r"max steps reached",
        family="hang", tags=("join", "queue"), held_out=True,
    ),
    Case(
        name="async_ckpt_writer",
        program="async_ckpt_writer",
        argv=("run.py",),
        cause="none: a checkpoint writer thread busy compressing and writing (GIL released) beside a training "
              "loop that keeps its pace (huggingface/transformers#23419)",
        expect=HEALTHY, ready=r"checkpoint step 50 written", healthy=True, both=True, family="healthy",
        tags=("side-thread", "checkpoint"), held_out=True,
    ),
    # --- Settings and the scheduler (issue 28): causes no stack shows, in process-wide settings and in how the OS runs
    # the threads; each with a healthy twin that has look-alikes (a harmless value, a one-off at start-up, a brief lock).
    Case(
        name="ensemble_num_threads",
        program="ensemble_num_threads",
        argv=("train_ensemble.py",),
        cause="four ensemble members train on pool threads, each calling torch.set_num_threads(8) on a 2-core box: "
              "~40 OS threads want 2 CPUs (pytorch/pytorch#3146, #13757)",
        expect={m: Expect(frozenset({"cpu-oversubscribed"}), frozenset({"cpu-oversubscribed"}),
                          r"oversubscribed.*member") for m in ("outside", "probes", "attach")},
        ready=r"\[ensemble\] report 3 ", family="settings", tags=("threads", "set_num_threads", "os"),
        modes=("outside", "probes", "attach"), attach_probes="settings",
    ),
    Case(
        name="healthy_ensemble_threads",
        program="healthy_ensemble_threads",
        argv=("snapshot_ensemble.py",),
        cause="none: four distillation students on threads, each torch.set_num_threads(1) (a harmless value), "
              "set_num_interop_threads(1) once at start-up",
        expect=HEALTHY, ready=r"epoch 3 distilled", healthy=True, family="healthy (settings)",
        tags=("threads", "set_num_threads"), modes=("outside", "probes", "attach"), attach_probes="settings",
    ),
    Case(
        name="spawn_featurizers_omp",
        program="spawn_featurizers_omp",
        argv=("linear_probe.py",),
        cause="the parent sets OMP_NUM_THREADS=4 before it spawns 3 embedding workers: 12 OpenMP threads in the "
              "children want 2 CPUs while the main process waits for their batches (facebookresearch/"
              "PyTorch-BigGraph#6, pytorch/pytorch#64864)",
        expect=_both({"cpu-oversubscribed"}, {"cpu-oversubscribed"}, r"oversubscribed.*child"),
        ready=r"probe batches=40 ", ready_timeout_s=180.0, family="settings",
        tags=("threads", "env", "child-process", "os"),
    ),
    Case(
        name="healthy_spawn_featurizers",
        program="healthy_spawn_featurizers",
        argv=("embed_then_probe.py",),
        cause="none: two single-threaded embedding workers (OMP_NUM_THREADS=1, set_num_threads(1) in each)",
        expect=HEALTHY, ready=r"\[probe\] step 40 ", ready_timeout_s=180.0, healthy=True,
        family="healthy (settings)", tags=("threads", "env", "child-process"), modes=("outside", "probes"),
    ),
    Case(
        name="threads_capped_regressor",
        program="threads_capped_regressor",
        argv=("fit.py",),
        cause="a launcher profile writes OMP_NUM_THREADS=1 and MKL_NUM_THREADS=1 into the environment before torch "
              "loads: the one thread that fits the model runs every matmul on one thread while the second CPU idles "
              "(the advice in pytorch/pytorch#18183, kept where one process computes: tsinghua-fib-lab/DRL-urban-planning#20)",
        # information, never a warning (a program kept to one thread on purpose looks the same): the headline's
        # stage verdict says it beside the time, and `cpu-threads-capped` says it whole
        expect={m: Expect(frozenset({"cpu-threads-capped"}), frozenset(),
                          r"(OMP|MKL)_NUM_THREADS=1 \(environment, set by the program\) holds torch's ops to 1 thread")
                for m in ("outside", "probes", "attach")},
        ready=r"\[fit\] step 20 ", family="settings", tags=("threads", "env", "os"),
        modes=("outside", "probes", "attach"), attach_probes="settings",
    ),
    Case(
        name="threads_capped_regressor_fixed",
        program="threads_capped_regressor",
        argv=("fit.py", "--pool-threads", "0"),
        cause="none: the pools at torch's default; the profile's harmless line (MKL_DYNAMIC=TRUE) and the report "
              "child's own OMP_NUM_THREADS=1 remain",
        expect=HEALTHY, ready=r"\[fit\] step 20 ", healthy=True, family="healthy (settings)",
        tags=("threads", "env"), modes=("outside", "probes", "attach"), attach_probes="settings",
    ),
    Case(
        name="gc_callback_watchdog",
        program="gc_callback_watchdog",
        argv=("sft.py",),
        cause="a heap watchdog in gc.callbacks tallies every long-lived object by type after each collection: each "
              "pause of the collector walks the whole heap (imbue's 70B post, allenai/OLMo#509, AnswerDotAI/ModernBERT#71)",
        expect={m: Expect(frozenset({"gc-pauses"}), frozenset({"gc-pauses"}), r"garbage collector stops every thread")
                for m in ("outside", "probes", "attach")},
        ready=r"step 150 it/s", family="settings", tags=("gc", "interpreter"),
        modes=("outside", "probes", "attach"), attach_probes="settings",
        known_miss={"outside": "the collector's pauses are invisible from outside: py-spy shows the callback's frames "
                               "as ordinary Python (where-time-goes names _on_collection), not that the collector "
                               "runs them; the settings probe times each pause"},
    ),
    Case(
        name="healthy_gc_frozen",
        program="healthy_gc_frozen",
        argv=("finetune.py",),
        cause="none: the same kind of heap, gc.collect() once and gc.freeze() after loading, and a gc callback that "
              "only counts collections (collector settings changed, harmlessly)",
        expect=HEALTHY, ready=r"\[ft\] it=150 ", healthy=True, family="healthy (settings)", tags=("gc",),
        modes=("outside", "probes", "attach"), attach_probes="settings",
    ),
    Case(
        name="switch_interval_progress",
        program="switch_interval_progress",
        argv=("train_regressor.py",),
        cause="a vendored dashboard calls sys.setswitchinterval(0.25) at import: its 30 ms redraws keep the GIL "
              "while the training loop waits for it (tqdm/tqdm#376)",
        expect={"outside": Expect(frozenset({"gil-contention"}), frozenset({"gil-contention"}), r"dashboard"),
                **{m: Expect(frozenset({"gil-switch-interval"}), frozenset({"gil-switch-interval"}),
                             r"setswitchinterval\(0\.25\)") for m in ("probes", "attach")}},
        ready=r"step +300 ", family="settings", tags=("gil", "interpreter"),
        modes=("outside", "probes", "attach"), attach_probes="settings,gil",
    ),
    Case(
        name="healthy_switch_interval",
        program="healthy_switch_interval",
        argv=("fit_with_monitor.py",),
        cause="none: sys.setswitchinterval(0.005) (the default, set explicitly) and a light monitor thread",
        expect=HEALTHY, ready=r"fit n=300 ", healthy=True, family="healthy (settings)", tags=("gil",),
        modes=("outside", "probes", "attach"), attach_probes="settings,gil",
    ),
    Case(
        name="anomaly_left_on",
        program="anomaly_left_on",
        argv=("train_vae.py",),
        cause="torch.autograd.set_detect_anomaly(True) left at the top of the training script (Lightning-AI/"
              "pytorch-lightning#12344, yenchenlin/nerf-pytorch#42)",
        # From outside the flag is inferred from the stacks: a Python stack captured from inside every op (torch
        # calls traceback.format_stack from C++); the probes read the flag itself.
        expect={m: Expect(frozenset({"torch-debug-mode"}), frozenset({"torch-debug-mode"}),
                          r"anomaly detection (is|looks) on") for m in ("outside", "probes", "attach")},
        ready=r"iter 300 ", family="settings", tags=("torch-flags", "autograd"),
        modes=("outside", "probes", "attach"), attach_probes="settings",
    ),
    Case(
        name="healthy_anomaly_first_step",
        program="healthy_anomaly_first_step",
        argv=("ae_train.py",),
        cause="none: detect_anomaly() around the first step only (a one-off at start-up; torch's warning is in "
              "stderr)",
        expect=HEALTHY, ready=r"ae: 300 steps", healthy=True, family="healthy (settings)",
        tags=("torch-flags", "one-off"), modes=("outside", "probes", "attach"), attach_probes="settings",
    ),
    Case(
        name="registry_lock_syncer",
        program="registry_lock_syncer",
        argv=("train_loop.py",),
        cause="the trainer logs every step under the run registry's flock, which a checkpoint-mirror process holds "
              "while it compresses and checksums (huggingface/datasets#1672, huggingface/transformers#8234)",
        expect=_both({"wait-chain"}, {"wait-chain"}, r"file lock on `[^`]*registry\.lock` held by process \d+.*syncer\.py"),
        ready=r"step 200 ", family="os", tags=("file-lock", "other-process"),
    ),
    Case(
        name="healthy_registry_lock",
        program="healthy_registry_lock",
        argv=("trainer.py",),
        cause="none: the same shared registry lock, held by the packer only while it copies the file (a brief lock)",
        expect=HEALTHY, ready=r"trainer: 400 steps", healthy=True, family="healthy (os)",
        tags=("file-lock", "other-process"),
    ),
    Case(
        name="pipe_tokenizer_child",
        program="pipe_tokenizer_child",
        argv=("train_from_stream.py",),
        cause="the trainer reads records from a tokenizer process's stdout pipe; the pure-Python BPE there is slower "
              "than training",
        expect=_both({"wait-chain"}, {"wait-chain"}, r"pipe from process \d+.*tokenize_stream\.py"),
        ready=r"step=40 ", family="os", tags=("pipe", "other-process"),
    ),
    Case(
        name="healthy_pipe_reader",
        program="healthy_pipe_reader",
        argv=("stream_fit.py",),
        cause="none: a replaying feeder keeps the pipe full; the trainer's reads are brief",
        expect=HEALTHY, ready=r"batches 60 ", healthy=True, family="healthy (os)", tags=("pipe", "other-process"),
    ),
    Case(
        name="pinned_first_core",
        program="pinned_first_core",
        argv=("bench_train.py",),
        cause="a benchmark helper pins the process to its first CPU (threads inherit it) while the loop, its OpenMP "
              "pool sized by os.cpu_count() and a decode thread want more (pytorch/pytorch#99625, #8126)",
        expect=_both({"cpu-affinity-narrow"}, {"cpu-affinity-narrow"}, r"may run only on CPU"),
        ready=r"bench it=10 ", ready_timeout_s=180.0, family="os", tags=("affinity", "threads"),
    ),
    Case(
        name="healthy_affinity_all",
        program="healthy_affinity_all",
        argv=("seg_fit.py",),
        cause="none: sched_setaffinity to every CPU at start-up (a harmless value), one intra-op thread",
        expect=HEALTHY, ready=r"seg n=200 ", healthy=True, family="healthy (os)", tags=("affinity",),
    ),
    # --- Training health (issue 18): silent no-training, named under `dflash-diag run` and attached once running ---
    Case(
        name="resume_rebuilt_model",
        program="resume_rebuilt_model",
        argv=("finetune_sentiment.py",),
        cause="the optimizer is built, then the model is re-created from a warm-start checkpoint: the optimizer "
              "steps over the first model's tensors, the forward uses the new ones",
        expect=_in_process({"training-no-update"}),
        ready=r"\[finetune\] step 50 ",
        family="health", tags=("stale-copy",), modes=IN_PROCESS, doctor_s=3.0, settle_s=1.0,
    ),
    Case(
        name="weight_norm_late",
        program="weight_norm_late",
        argv=("train_regressor.py",),
        cause="weight_norm is applied after the optimizer was built: it replaces each weight by new g/v parameters "
              "the optimizer does not hold; the old weights get no gradient, only the biases train",
        expect=_grad_none_too("training-no-update"),
        ready=r"iter=80 ",
        family="health", tags=("stale-copy", "partial-group"), modes=IN_PROCESS, doctor_s=3.0, settle_s=1.0,
    ),
    Case(
        name="nograd_encoder_helper",
        program="nograd_encoder_helper",
        argv=("contrastive.py",),
        cause="training reuses an eval helper decorated @torch.no_grad() for the encoder: its weights (96% of the "
              "model, one optimizer group with the projector) never get a gradient",
        expect=_grad_none_too("training-no-update"),
        ready=r"pretrain step 60 ",
        family="health", tags=("detached-graph", "partial-group"), modes=IN_PROCESS, doctor_s=3.0, settle_s=1.0,
    ),
    Case(
        name="lora_after_optimizer",
        program="lora_after_optimizer",
        argv=("tune.py",),
        cause="LoRA adapters are injected (base frozen) after the optimizer was built: the optimizer holds only "
              "frozen tensors, the adapters that get gradients are in no optimizer",
        expect=_in_process({"training-no-update"}),
        ready=r"step +60 ",
        family="health", tags=("requires-grad-lost", "frozen-optimizer"), modes=IN_PROCESS, doctor_s=3.0, settle_s=1.0,
    ),
    Case(
        name="rezero_buffer_gate",
        program="rezero_buffer_gate",
        argv=("lm.py",),
        cause="the ReZero gate is a zero buffer, not a parameter: every residual block's gradient is exactly zero "
              "(AdamW's weight decay still shrinks them); only the embedding and the unembedding train",
        expect=_in_process({"training-no-update"}),
        ready=r"it 50: ",
        family="health", tags=("zero-grad", "weight-decay", "partial-group"), modes=IN_PROCESS, doctor_s=3.0, settle_s=1.0,
    ),
    Case(
        name="all_masked_loss",
        program="all_masked_loss",
        argv=("sft_answers.py",),
        cause="the loss mask selects a segment id the data never has: the loss is 0 and every gradient is zero",
        expect=_in_process({"training-no-update"}),
        ready=r"update 60 \|",
        family="health", tags=("zero-grad", "mask"), modes=IN_PROCESS, doctor_s=3.0, settle_s=1.0,
    ),
    Case(
        name="nan_loss_full_speed",
        program="nan_loss_full_speed",
        argv=("forecast.py",),
        cause="a second data shard has zero sales; log(0) makes the loss and every gradient NaN and SGD keeps "
              "stepping at full speed",
        # Outside, without probes: doctor says training health was not checked, and how to check it.
        expect={**_in_process({"training-nonfinite"}),
                "outside": Expect(frozenset({"training-health-unchecked"}))},
        ready=r"step=80 ",
        family="health", tags=("nan",), modes=("outside", *IN_PROCESS), settle_s=1.0,
    ),
    Case(
        name="fp16_scaler_nan",
        program="fp16_scaler_nan",
        argv=("regress_fp16.py",),
        cause="a constant sensor column is standardised by its zero std: the loss is NaN from the first step, the "
              "GradScaler skips every step (no optimizer step ever runs) and its scale collapses to 0",
        expect=_in_process({"training-no-update"}),
        ready=r"it=50 ",
        family="health", tags=("nan", "amp", "no-step"), modes=IN_PROCESS, doctor_s=3.0, settle_s=1.0,
    ),
    Case(
        name="lr_floor_scheduler",
        program="lr_floor_scheduler",
        argv=("pretrain_mlm.py",),
        cause="the decay schedule is given the number of epochs as its total steps and stepped per batch: the "
              "learning rate is 0 from the third step on",
        expect=_in_process({"training-lr-zero"}),
        ready=r"step 100 loss",
        family="health", tags=("lr-zero", "scheduler"), modes=IN_PROCESS, doctor_s=3.0, settle_s=1.0,
    ),
    Case(
        name="reentrant_segments",
        program="reentrant_segments",
        argv=("vision_train.py",),
        cause="checkpoint_sequential(use_reentrant=True) over the conv stages with images that do not require "
              "grad: every checkpointed stage gets no gradient; only the last stage and the classifier train",
        expect=_grad_none_too("training-no-update"),
        ready=r"Train batch 40\b",
        family="health", tags=("reentrant", "checkpoint", "partial-group"), modes=IN_PROCESS, doctor_s=3.0, settle_s=1.0,
    ),
    Case(
        name="healthy_frozen_teacher",
        program="healthy_frozen_teacher",
        argv=("distill_student.py",),
        cause="none: a frozen teacher in a thread beside the student; the student's frozen word vectors are in "
              "its optimizer (requires_grad=False)",
        expect=HEALTHY, ready=r"distill step 80 ", healthy=True, family="healthy (health)",
        tags=("frozen",), modes=IN_PROCESS, doctor_s=3.0, settle_s=1.0,
    ),
    Case(
        name="healthy_grad_accum",
        program="healthy_grad_accum",
        argv=("accum_train.py",),
        cause="none: gradients accumulated over 8 micro-batches, zero_grad(set_to_none=True) after each step",
        expect=HEALTHY, ready=r"optimizer step 20 ", healthy=True, family="healthy (health)",
        tags=("accumulation", "set-to-none"), modes=IN_PROCESS, doctor_s=3.0, settle_s=1.0,
    ),
    Case(
        name="healthy_clip_warmup",
        program="healthy_clip_warmup",
        argv=("train_ranker.py",),
        cause="none: a warm-up from lr 0, cosine decay, gradients clipped (to 0.05) at every step",
        expect=HEALTHY, ready=r"step +100 loss", healthy=True, family="healthy (health)",
        tags=("warm-up", "clipping"), modes=IN_PROCESS, doctor_s=3.0, settle_s=1.0,
    ),
    Case(
        name="healthy_amp_overflow",
        program="healthy_amp_overflow",
        argv=("amp_fit.py",),
        cause="none: fp16 autocast with a GradScaler and the fused AdamW: about one step in six overflows and is "
              "skipped (inside the optimizer's step), the scale halves",
        expect=HEALTHY, ready=r"it 80 ", healthy=True, family="healthy (health)",
        tags=("amp", "grad-scaler", "fused"), modes=IN_PROCESS, doctor_s=3.0, settle_s=1.0,
    ),
    Case(
        name="healthy_alternating_heads",
        program="healthy_alternating_heads",
        argv=("multitask.py",),
        cause="none: two task heads on one trunk, batches alternate between tasks: each head's .grad is None every "
              "other step (set_to_none=True)",
        expect=HEALTHY, ready=r"step 120 ", healthy=True, family="healthy (health)",
        tags=("set-to-none", "multi-task"), modes=IN_PROCESS, doctor_s=3.0, settle_s=1.0,
    ),
    Case(
        name="twin_towers_ckpt",
        program="twin_towers_ckpt",
        argv=("twin_ctr.py",),
        cause="none: two threads, each an AdamW over its own model (one under non-reentrant activation "
              "checkpointing), all training; hashed features never use bucket 0 (padding), so that input column of "
              "the first weight (a quarter of the model) never moves: once read as a weight that does not train "
              "(a false training-no-update)",
        expect=HEALTHY, ready=r"baseline: step \d+ .*recompute: step \d+", ready_count=2, healthy=True,
        family="healthy (health)", tags=("threads", "optimizer-per-thread", "checkpoint"), modes=IN_PROCESS,
        doctor_s=3.0, settle_s=1.0,
    ),
    Case(
        name="cached_first_epoch",
        program="cached_first_epoch",
        argv=("train_kws.py",),
        cause="none: the first epoch fills a feature cache (16000 clips, ~0.5 GB at the loader's pace) in the first "
              "minute, then it stops growing (steady growth in warm-up once read as a leak: a false "
              "host-memory-growth warning)",
        expect=HEALTHY, ready=r"step 50 loss", healthy=True, family="healthy",
        tags=("host-memory", "cache", "warm-up"),
    ),
    # --- Batch C (held out): training health, written from real bug reports and scored once without tuning ----
    Case(
        name="warmstart_assign",
        program="warmstart_assign",
        argv=("finetune.py",),
        cause="the Trainer builds AdamW, then the warm start loads the checkpoint with load_state_dict(assign=True): "
              "every Parameter is replaced, AdamW steps the old ones (pytorch/pytorch#102212, "
              "pytorch/tutorials#2522)",
        expect=_in_process({"training-no-update"}),
        ready=r"'step': 300,",
        family="health", tags=("stale-copy",), held_out=True, modes=IN_PROCESS,
    ),
    Case(
        name="freeze_embedder_shared",
        program="freeze_embedder_shared",
        argv=("train_pos.py",),
        cause="'freeze the pretrained vectors' freezes the whole embedder module, with it the new projection every "
              "token goes through: it never changes while the conv layers train (facebookresearch/fairseq#4702, "
              "CarperAI/trlx#543)",
        expect=_in_process({"training-no-update"}),
        ready=r"step 200 loss",
        family="health", tags=("frozen-submodule", "partial-group"), held_out=True, modes=IN_PROCESS,
        known_miss={'probes': 'held out, missed when scored once (docs/benchmarks.md, batch C): a new module frozen with requires_grad_(False) reads as frozen on purpose', 'attach': 'held out, missed when scored once (docs/benchmarks.md, batch C): a new module frozen with requires_grad_(False) reads as frozen on purpose'},
    ),
    Case(
        name="simsiam_stopgrad",
        program="simsiam_stopgrad",
        argv=("pretrain.py",),
        cause="SimSiam's stop-gradient applied to the projector output instead of the target: the backbone+projector "
              "param group never gets a gradient, only the predictor group trains "
              "(Cadene/murel.bootstrap.pytorch#7, PatrickHua/SimSiam#22)",
        expect=_in_process({"training-no-update"}),
        ready=r"\[ssl\] step +200 ",
        family="health", tags=("detached-graph", "partial-group", "side-thread"), held_out=True, modes=IN_PROCESS,
        known_miss={'probes': 'held out, missed when scored once (docs/benchmarks.md, batch C): checkpoint-grad-none leads training-no-update in a program without checkpointing'},
    ),
    Case(
        name="sharpened_softmax_nan",
        program="sharpened_softmax_nan",
        argv=("run.py",),
        cause="log(softmax(logits / T)) with T annealed to 0.02: a mislabelled sample's probability underflows to 0, "
              "the loss and then every weight become NaN and the loop keeps stepping "
              "(summerlvsong/Aggregation-Cross-Entropy#2, dmlc/gluon-cv#942)",
        expect=_in_process({"training-nonfinite"}),
        ready=r"it=400 .*loss=nan",
        family="health", tags=("nan", "side-thread"), held_out=True, modes=IN_PROCESS,
    ),
    Case(
        name="mean_teacher_ema",
        program="mean_teacher_ema",
        argv=("semi_sup.py",),
        cause="none: a mean-teacher EMA copy (requires_grad off, updated by hand) beside the student; lr warm-up "
              "from exactly 0; gradient accumulation over 4 micro-batches (SWivid/F5-TTS#631, willisma/SiT#6)",
        expect=HEALTHY, ready=r"step +125 lr", healthy=True, family="healthy",
        tags=("ema", "warmup", "grad-accumulation"), held_out=True, modes=IN_PROCESS,
    ),
    Case(
        name="staged_unfreeze",
        program="staged_unfreeze",
        argv=("main.py",),
        cause="none: the backbone is frozen (BatchNorm in eval) for 100 steps, then unfrozen and added to the "
              "optimizer as a new param group (Lightning's BackboneFinetuning; pytorch/pytorch#2374)",
        expect=HEALTHY, ready=r"\[fit\] step=250 ", healthy=True, family="healthy",
        tags=("frozen-submodule", "add-param-group"), held_out=True, modes=IN_PROCESS,
    ),
    # --- Batch C (held out): stalls and slowdowns in threaded trainers --------------------------------------------
    Case(
        name="cursor_lock_queue",
        program="cursor_lock_queue",
        argv=("train_lm.py",),
        cause="the shard reader holds cursor_lock while it put()s into its full queue; at the first checkpoint the "
              "training loop takes cursor_lock (reader.state_dict) before its next get(): nothing moves again "
              "(wso2/carbon-analytics-common#511, vespa-engine/vespa#7346)",
        expect={m: Expect(frozenset({"deadlock"}), frozenset({"deadlock"}),
                          r"state_dict|cursor_lock|shard-reader|reader\.py:\d+")
                for m in ("outside", "probes")},
        ready=r"\[watchdog\] no progress",
        family="deadlock", tags=("locks", "queue", "checkpoint"), held_out=True,
        known_miss={'outside': "held out, missed when scored once (docs/benchmarks.md, batch C): the deadlock is named, the queue's hang leads it", 'probes': "held out, missed when scored once (docs/benchmarks.md, batch C): the deadlock is named, the queue's hang leads it"},
    ),
    Case(
        name="val_loss_graph_leak",
        program="val_loss_graph_leak",
        argv=("worker.py",),
        cause="a validator thread forgets no_grad and the metric tracker keeps the loss tensors, each with its graph "
              "and saved activations: ~10 MB/s (boschresearch/Continuous-Recurrent-Units#4, TRI-ML/packnet-sfm#51; "
              "the program aborts itself at 3 GB)",
        expect=_both({"host-memory-growth"}),
        # Past the first minute (doctor reads growth in it as a possible warm-up): t=60 s of the program's clock.
        ready=r"t= *([6-9]\d|\d{3,})\.\ds .*rss=\d+MB", ready_timeout_s=180.0,
        family="memory", tags=("autograd-graph", "side-thread"), held_out=True,
    ),
    Case(
        name="dashboard_json_dump",
        program="dashboard_json_dump",
        argv=("fit.py",),
        cause="a live-dashboard thread json.dumps ~50k Python floats every 50 ms (C encoder, GIL held for the whole "
              "encode) beside a training loop of small torch ops (pytorch/pytorch#101962)",
        expect=_both({"gil-contention"}, {"gil-contention"}, r"dashboard-export|dumps|LiveDashboard"),
        ready=r"\[ctr\] step 200 ",
        family="gil", tags=("side-thread", "json", "c-extension"), held_out=True,
        # under probes missed when scored once (docs/benchmarks.md, batch C: no rule fired); its recording named since
        # (`gil-contention`: dashboard-export holds the GIL, most of it inside JSONEncoder.iterencode), a tuning run
    ),
    Case(
        name="prefetch_heartbeat",
        program="prefetch_heartbeat",
        argv=("speech_train.py",),
        cause="none: a feature prefetcher far faster than the model keeps its bounded queue full (waits in put) and "
              "a heartbeat thread sleeps between liveness writes",
        expect=HEALTHY, ready=r"it +40 ", healthy=True, family="healthy",
        tags=("queue", "side-thread"), held_out=True,
    ),
    # --- GPU only (CUDA): run by `bench/casebook.py --gpu` on the GPU machine ---------------------------------
    Case(
        name="gpu_host_sync",
        program="gpu_host_sync",
        argv=("spec_train.py",),
        cause="per-chunk loss.item() and a torch.cuda.synchronize() per step: the drafter waits on the GPU",
        expect=_with_attach(_both({"host-sync-storm"}, {"host-sync-storm"})),
        ready=r"step 40 ", gpu=True, family="hostsync", miss="4: outside evidence (host-sync storm)",
        modes=("outside", "probes", "attach"), attach_probes="all",
    ),
    Case(
        name="gpu_wasted_logits",
        program="gpu_wasted_logits",
        argv=("pipeline.py",),
        cause="the target projects every position onto a 152k vocabulary and never reads the logits",
        expect=_with_attach(_both({"wasted-full-vocab-logits"}, set())),
        ready=r"drafter batches 20 ", gpu=True, family="wasted", miss="4: outside evidence (full-vocab logits)",
        modes=("outside", "probes", "attach"), attach_probes="all",
    ),
    Case(
        name="gpu_empty_cache",
        program="gpu_empty_cache",
        argv=("train.py",),
        cause="torch.cuda.empty_cache() after every step",
        expect=_with_attach({"outside": Expect(), "probes": Expect(frozenset({"alloc-empty-cache"}),
                                                                   frozenset({"alloc-empty-cache"}))}),
        ready=r"step=20\b", gpu=True, family="allocator", modes=("outside", "probes", "attach"), attach_probes="all",
    ),
    Case(
        name="gpu_launch_bound",
        program="gpu_launch_bound",
        argv=("recur.py",),
        cause="a per-token Python recurrence of tiny kernels: the GPU idles while Python launches",
        expect=_with_attach(_both({"gpu-underused"}, {"gpu-underused", "pipeline-bottleneck-drafter"})),
        ready=r"learner iteration 10\b", gpu=True, gpu_alone=True, family="gpu",
        modes=("outside", "probes", "attach"), attach_probes="all",
    ),
    Case(
        name="gpu_cudagraph_mutation",
        program="gpu_cudagraph_mutation",
        argv=("graphs.py",),
        cause="mode='reduce-overhead' on a step that mutates an input: CUDA graphs are skipped",
        expect=_with_attach(_both({"cudagraph-skipped"}, set())),
        ready=r"inference step 100\b", gpu=True, family="cudagraphs",
        modes=("outside", "probes", "attach"), attach_probes="all",
    ),
    # --- GPU batch D (tuning): the GPU's own pathologies, each with its healthy twin --------------------------------
    # Written as different third parties would, from public reports (each program's docstring names them); run by
    # `bench/casebook.py --gpu` on the H200, whose recorded observations CI replays. A rule id no rule of doctor's
    # has yet is written as expected and marked known_miss "no rule yet".
    *_gpu_pair(
        "gpu_nan_guard", ("pretrain_guarded.py",), ("pretrain_guarded.py", "--guard", "deferred"), "host-sync",
        "each of 8 micro-batches per step reads int(mask.sum()) and bool(torch.isfinite(loss)) before backward: 16 "
        "host syncs a step (pytorch/torchtitan#3873, huggingface/transformers#33693)",
        "none: finiteness flags and token counts stay on the device, read once per log line (every 10 steps)",
        _gpu({"host-sync-storm"}), r"step 20 "),
    *_gpu_pair(
        "gpu_chunk_metrics", ("tagger_train.py",), ("tagger_train.py", "--metrics", "on-device"), "host-sync",
        "a chunked tagging loss (32 chunks a batch) copies each chunk's confusion counts with .cpu() and its lengths "
        "with .tolist() (Lightning-AI/torchmetrics#2638, pytorch/ignite#240)",
        "none: the confusion counts accumulate on the GPU, copied once per report (every 10 batches)",
        _gpu({"host-sync-storm"}), r"fit batch 30 ",
        known_miss={"outside": "H200 2026-12-05, second recording: host-sync-storm not named outside (the first "
                               "recording named it); gpu-underused led"}),
    *_gpu_pair(
        "gpu_moe_mask_routing", ("run_moe.py",), ("run_moe.py", "--dispatch", "static"), "host-sync",
        "top-1 MoE dispatch by torch.nonzero per expert, boolean-mask indexing and `if (load > capacity).any():`: "
        "~18 implicit syncs a forward (facebookresearch/fairchem#2195, deepmodeling/deepmd-kit#3361)",
        "none: capacity-padded dispatch with fixed shapes (one-hot cumsum slots, batched expert matmuls); the "
        "dropped-token count is read once per log line",
        _gpu({"host-sync-storm"}), r"\[learner\] it 40 "),
    *_gpu_pair(
        "gpu_per_sample_triplet", ("metric_learning.py",), ("metric_learning.py", "--batched-mining"), "launch-bound",
        "batch-hard triplet mining in a Python loop over 512 anchors: thousands of tiny kernels per step, the GPU "
        "idles between launches (engichang1467/Open-Rig3R#33, turboderp/exllama#234)",
        "none: one distance matrix for the batch (cdist, masked max/min); a GPU-bound MLP head, its fp32 matmuls "
        "in TF32 (recorded without it, the twin's head ran on the FP32 pipes, 41% busy: a finding of its own)",
        _gpu({"gpu-underused"}, {"gpu-underused", "gpu-launch-bound", "pipeline-bottleneck-drafter"}), r"step 40 ",
        gpu_alone=True),
    *_gpu_pair(
        "gpu_inline_tokenize", ("train_lm.py",), ("train_lm.py", "--pretokenize"), "input-pipeline",
        "the training thread WordPiece-encodes each batch of raw lines in pure Python between steps: the GPU waits "
        "(AnswerDotAI/ModernBERT#236, OpenNMT/OpenNMT-tf#799)",
        "none: the shard is tokenized once at start-up (a few seconds of Python before the first step); the reader "
        "thread serves token ids",
        _gpu({"gpu-underused"}, {"gpu-underused", "pipeline-bottleneck-drafter"}, r"encode|WordPiece|tokeni[sz]"),
        r"train step 30 ", gpu_alone=True),
    *_gpu_pair(
        "gpu_pageable_copy", ("tabular_regression.py",), ("tabular_regression.py", "--pinned"), "h2d-copy",
        "64 MiB batches sliced from a pageable host shard and copied with .to(device, non_blocking=True): each copy "
        "waits for the queued step, then stages through a driver buffer (hao-ai-lab/FastVideo#1217, "
        "pytorch/pytorch#42539)",
        "none: the shard is pinned once at start-up and a side-stream prefetcher copies the next batch during the "
        "step (the same non_blocking=True line)",
        _gpu({"pageable-h2d-copy"}), r"step +50 "),
    *_gpu_pair(
        "gpu_zero_weight_head", ("speech_ctc.py",), ("speech_ctc.py", "--skip-disabled-heads"), "wasted-compute",
        "a reconstruction decoder (about a third of the step's FLOPs) runs on every frame though its loss weight is "
        "0.0 and its output is never read (open-mmlab/mmaction2#682, jasonkyuyim/multiflow#3); attached, the health "
        "probe sees its weights (44%) get no gradient (training-no-update, CPU dry run)",
        "none: the disabled head is frozen and skipped; it runs once every 200 steps for a logged preview",
        _gpu({"wasted-unused-output"}), r"\| step 40 \|",
        known_miss={m: "wasted-unused-output is information on a GPU (the samples measure launches, not the decoder's "
                       "kernels) and the health probe names no tensor of an unprepared program: needs GPU time by "
                       "launching line" for m in GPU_MODES}),
    *_gpu_pair(
        "gpu_embed_full_logits", ("train_retriever.py",), ("train_retriever.py", "--hidden-only"), "wasted-compute",
        "a retriever embeds with the causal-LM wrapper's hidden states: every position of queries and passages is "
        "projected onto a 128k vocabulary and dropped (NVIDIA/Isaac-GR00T#734, unslothai/unsloth#8576)",
        "none: embeddings from the body; the LM head runs once per report on the last position (logits_to_keep=1)",
        _gpu({"wasted-full-vocab-logits"}), r"\[retriever\] step 40 ",
        known_miss=_h200_missed("wasted-full-vocab-logits not named (the logits come from a wrapper's forward, not "
                                "a head the rule recognises); headline pipeline-bottleneck-drafter")),
    *_gpu_pair(
        "gpu_fp32_highest", ("train.py",), ("train_fast.py",), "precision",
        "the config asks for TF32, then a reproducibility helper sets allow_tf32=False and matmul precision "
        "'highest': every fp32 matmul runs on the FP32 pipes (huggingface/transformers#16588, Nerogar/OneTrainer#1246)",
        "none: the copy without the determinism block (TF32 as configured; seeds still set)",
        _gpu({"fp32-matmul-no-tensor-cores"}), r"it +10 ",
        known_miss=_h200_missed("fp32-matmul-no-tensor-cores not named: the pair shared the GPU with three other "
                                "programs (phase 1), and NVML GPM's pipe readings are device-wide")),
    *_gpu_pair(
        "gpu_autocast_bf16_off", ("vit_finetune.py",), ("vit_finetune.py", "--amp", "force"), "precision",
        "--precision bf16, but the autocast helper's enabled test only knows fp16: autocast(enabled=False), every "
        "matmul in fp32 (intel/auto-round#2393, Nerogar/OneTrainer#1481)",
        "none: autocast on in bf16; the loss deliberately in an fp32 region (autocast(enabled=False))",
        _gpu({"fp32-matmul-no-tensor-cores"}), r"train: step 20 ",
        known_miss=_h200_missed("fp32-matmul-no-tensor-cores not named: the pair shared the GPU with three other "
                                "programs (phase 1), and NVML GPM's pipe readings are device-wide")),
    *_gpu_pair(
        "gpu_recompile_seqlen_int", ("fit.py",), ("fit.py", "--bucket", "512"), "recompile",
        "torch.compile(dynamic=False) of a step that slices by the batch's max_len, a Python int that changes every "
        "batch; the recompile limit raised to 1024: a new graph nearly every step (Dao-AILab/quack#150, "
        "allenai/open-instruct#1445)",
        "none: max_len rounded up to 512-token buckets, both buckets compiled at start-up (a compile warm-up)",
        _gpu({"compile-recompile-storm"}), r"step 2 max_len", fixed_ready=r"step 100 max_len", ready_timeout_s=180.0,
        known_miss={"attach": "H100 host 2026-12-05 17:14 (the program survived the attach): the headline is "
                              "warming-up, `compile-multi-thread` warns; compile-recompile-storm not named attached"}),
    *_gpu_pair(
        "gpu_cudagraph_queue_mutation", ("moco_pretrain.py",), ("moco_pretrain.py", "--enqueue-eager"), "cudagraphs",
        "mode='reduce-overhead' on a MoCo step that enqueues the keys into the negatives queue in place: 'mutated "
        "inputs', CUDA graphs skipped for the whole step (pytorch/pytorch#117281, #121861)",
        "none: the compiled step is pure and replays as a CUDA graph; the queue is updated eagerly after it",
        _gpu({"cudagraph-skipped"}), r"moco step 200 ", ready_timeout_s=180.0,
        known_miss=_h200_missed("cudagraph-skipped named, but the headline is warming-up (the skipped step keeps "
                                "compiling) and alloc-empty-cache warns beside it"),),
    *_gpu_pair(
        "gpu_alloc_retries_cap", ("train_varlen.py",), ("train_varlen.py", "--pad-to-max"), "allocator",
        "capped at 6 GiB with set_per_process_memory_fraction, batches of a new length every step and a prefetch "
        "thread's batches in between: near the cap the allocator frees its cache and retries (pytorch/pytorch#35901, "
        "FalkonML/falkon#22)",
        "none: the same 6 GiB cap, every batch padded to the longest length: one set of sizes, no retry after "
        "warm-up",
        _gpu({"alloc-retries"}), r"\| step 40 \|",
        known_miss={"outside": "no outside evidence of allocator retries yet: only the allocator probe counts them",
                    "attach": "H200 2026-12-05: the program made 1 retry in the window (it did not reach the cap's "
                              "retry loop there); the prefetch thread's per-batch torch.tensor(lengths) sync led"}),
    *_gpu_pair(
        "gpu_cached_predictions_growth", ("rank_train.py",), ("rank_train_streaming.py",), "memory-growth",
        "every step's scores and clicks are appended, on the GPU, to lists read only at the end of a 200,000-step "
        "epoch: +0.6 MB a step until a 16 GiB cap (pytorch/pytorch#1840, jokester-zzz/SSA-SC#2)",
        "none: the copy with a streaming AUC (fixed-size histograms on the GPU) and a bounded ring of the last 8 "
        "batches",
        _gpu({"gpu-memory-growth"}), r"step 300 "),
    *_gpu_pair(
        "gpu_augment_sync_default_stream", ("vision_pipeline.py",), ("vision_pipeline.py", "--side-stream"),
        "stream-serialised",
        "a GPU-augmentation thread and the trainer share the default stream, and the augmenter calls "
        "torch.cuda.synchronize() before each hand-off: it waits for the trainer's queued step, the two threads take "
        "turns (sonos/tract#2443, pytorch/pytorch#25540)",
        "none: augmentation on its own stream, the hand-off by a CUDA event; one synchronize at start-up",
        _gpu({"host-sync-storm"}), r"train step 40 ",
        known_miss={"outside": "H200 2026-12-05, tuning run: host-sync-storm named, but the headline is "
                               "pipeline-bottleneck-target because pageable-h2d-copy"}),
    *_gpu_pair(
        "gpu_gloo_microstep_allreduce", ("dp_train.py",), ("dp_train.py", "--reduce-at-boundary"), "collectives",
        "a one-process gloo group on a worker thread all-reduces each of 29 gradient tensors after every one of 8 "
        "micro-batches: each call copies CUDA->host->CUDA and waits (karpathy/nanochat#33, pytorch/pytorch#170239)",
        "none: one bucketed all_reduce per optimizer step (gloo, the same group)",
        _gpu({"collective-per-microstep"}, {"collective-per-microstep", "host-sync-storm"}), r"rank 0 step 10 "),
    # --- GPU batch D, held-out third: written last by other hands, scored once without tuning -----------------------
    # Other domains and other concrete forms of the same GPU kinds; each program's docstring names its reports.
    *_gpu_pair(
        "gpu_layer_timer_sync", ("train_ddpm.py",), ("train_ddpm.py", "--clock", "events"), "host-sync",
        "a per-layer timing helper's forward pre/post hooks call torch.cuda.synchronize() around every leaf module "
        "of a diffusion UNet: ~190 host waits a forward, the GPU drains its queue before each layer "
        "(HuguesTHOMAS/KPConv-PyTorch#22, Tramac/torchscope#2, pytorch/pytorch#18012)",
        "none: the same hooks record CUDA events; one event wait per report (every 50 steps)",
        _gpu({"host-sync-storm"}, text=r"(?i)synchroni[sz]e|layer_timer\.py|_sync\b"), r"\[ddpm\] step 100 ",
        held_out=True),
    *_gpu_pair(
        "gpu_ema_param_loop", ("train_vit.py",), ("train_vit.py", "--ema", "foreach"), "launch-bound",
        "an EMA of a 24-block ViT updated after every step in a Python loop over ~300 state_dict entries, out of "
        "place (4 tiny kernels and a temporary each): the GPU idles while Python launches them "
        "(huggingface/pytorch-image-models#1553, ecmwf/WeatherGenerator#2551, pytorch/pytorch#71683)",
        "none: the same EMA every step as one torch._foreach_lerp_ over the float tensors",
        _gpu({"gpu-underused"}, {"gpu-underused", "gpu-launch-bound", "pipeline-bottleneck-drafter"},
             r"(?i)\bema\b|ModelEma|ema\.py"),
        r"epoch 0 step 100 ", gpu_alone=True, held_out=True),
    *_gpu_pair(
        "gpu_asr_inline_features", ("train_asr.py",), ("train_asr.py", "--num-workers", "12"), "input-pipeline",
        "DataLoader(num_workers=0) left from debugging: decoding, speed perturbation, STFT, log-mel and SpecAugment "
        "of 32 utterances run in the training loop between steps; the GPU waits for every batch "
        "(Lightning-AI/pytorch-lightning#782, pytorch/pytorch#21630)",
        "none: the same Dataset and DataLoader with 12 persistent worker processes and pinned batches",
        _gpu({"gpu-underused"}, {"gpu-underused", "pipeline-bottleneck-drafter"},
             r"(?i)__getitem__|features\.py|stft|num_workers|DataLoader|data ?load"),
        r"train step 20 ", gpu_alone=True, held_out=True),
    *_gpu_pair(
        "gpu_getitem_to_device", ("train_forecaster.py",), ("train_forecaster.py", "--place", "batch"), "h2d-copy",
        "Dataset.__getitem__ moves each sample to the GPU: 2 x 512 blocking pageable copies of a few KB per batch, "
        "issued by the prefetch thread on the default stream behind the queued step "
        "(PaccMann/paccmann_datasets#105, open-spaced-repetition/fsrs-optimizer#197)",
        "none: samples stay on the host, the DataLoader pins each batch, one non_blocking copy per tensor per batch",
        {m: Expect(frozenset(), frozenset({"host-sync-storm", "pageable-h2d-copy"}),
                   r"(?i)__getitem__|windows\.py|per-sample|\.to\(self\.device\)") for m in GPU_MODES},
        r"step +100 \|", held_out=True),
    *_gpu_pair(
        "gpu_mha_need_weights", ("sft.py",), ("sft.py", "--fast-attention"), "wasted-compute",
        "nn.MultiheadAttention called with its default need_weights=True in every layer of an LM fine-tune (seq "
        "2048): the unfused path materialises, keeps for backward and head-averages attention matrices that the "
        "caller drops (pytorch/pytorch#100347, lyuwenyu/RT-DETR#678)",
        "none: need_weights=False, is_causal=True (fused SDPA); the weights of layer 0 are computed once every 200 "
        "steps for a logged attention map",
        {m: Expect(frozenset(), frozenset(), r"(?i)need_weights|attention weights|MultiheadAttention|"
                   r"multi_head_attention|unfused|scaled_dot_product") for m in GPU_MODES},
        r"\[sft\] step 20 ", held_out=True,
        known_miss=_held_out_missed("no rule weighs need_weights=True; headline pipeline-bottleneck-drafter")),
    *_gpu_pair(
        "gpu_gnn_deterministic", ("train_gcn.py",), ("train_gcn.py", "--nondeterministic"), "deterministic",
        "a repo-wide seed_everything() turns on torch.use_deterministic_algorithms(True): every layer's index_add_ "
        "over 4M edges and each gather's backward take the sort-based deterministic path instead of atomics "
        "(pyg-team/pytorch_geometric#3175, pytorch/pytorch#50469, #23151, facebookresearch/fairchem#438)",
        "none: the same seeds, cudnn.deterministic=True and CUBLAS_WORKSPACE_CONFIG; use_deterministic_algorithms "
        "left off",
        {m: Expect(frozenset(), frozenset(), r"(?i)determinis") for m in GPU_MODES},
        r"epoch +60 ", held_out=True,
        known_miss=_held_out_missed("use_deterministic_algorithms(True) not named (read by the settings probe "
                                    "attached, weighed by no rule); headline pipeline-bottleneck-drafter")),
    *_gpu_pair(
        "gpu_rl_counter_recompile", ("ppo_learner.py",), ("ppo_learner.py", "--step-buffer"), "recompile",
        "a torch.compile'd actor-critic reads self.anneal_step, a Python int attribute the learner sets before each "
        "update: the guard on it fails and forward+backward are compiled again every update (recompile_limit raised "
        "to 4096) (pytorch/pytorch#115711, #128319)",
        "none: anneal_step is a registered buffer updated in place; two graphs (update and bootstrap batch sizes) "
        "compiled at start-up",
        _gpu({"compile-recompile-storm"}, text=r"(?i)anneal_step|int(eger)? attribute"),
        r"update 2 loss", fixed_ready=r"update 20 loss", ready_timeout_s=180.0, held_out=True,
        known_miss=_held_out_missed("compile-recompile-storm named and the headline's cause, but its text names "
                                    "neither anneal_step nor the int attribute its guard checks")),
    *_gpu_pair(
        "gpu_feature_cache_views", ("pretrain_simclr.py",), ("pretrain_simclr.py", "--cache", "tensor"),
        "memory-growth",
        "a kNN-monitor cache keeps out[j, 1024:] per dataset index, a view that keeps the step's whole (256, 1152) "
        "output alive: GPU memory grows ~1 MB a step through the first epoch of 1.28M images (20 GiB cap) "
        "(pytorch/pytorch#50432, konstmish/prodigy#22)",
        "none: a preallocated (1.28M, 128) table written with index_copy_ (a 655 MB allocation at start-up)",
        _gpu({"gpu-memory-growth"}), r"step 100 loss", held_out=True,
        known_miss=_held_out_missed("gpu-memory-growth not named (~1 MB a step over a 5 s window); headline "
                                    "gpu-underused outside, pipeline-bottleneck-target attached")),
    # --- Settings batch, held-out third: slowdowns that live in process-wide settings or in how the OS runs the
    # threads, written last from public reports and scored once without tuning. CPU programs, each a loader or
    # producer thread and a training thread; each docstring names its reports and the measured step rates.
    *_settings_pair(
        "settings_nice_ingest", "settings_nice_ingest", ("train_ctr.py",), ("train_ctr.py", "--ingest-nice", "0"),
        "nice",
        "a record-reader library renices its decode thread to 19 (os.setpriority on the thread's TID) so it never "
        "competes with its host; the trainer's intra-op threads keep the cores busy, the decoder only runs while "
        "the trainer waits for it and every batch is late (zilliztech/knowhere#121, awslabs/metrique#94)",
        "none: the decode thread at nice 0; the library's heartbeat thread (a file write every 5 s) still at nice 10",
        # Missed in every mode when scored once; named since (`thread-deprioritized`, from each thread's stat), so
        # it is a tuning case now (FIXED_AFTER_SCORING).
        r"(?i)\bnice\b|niceness|priority", r"\[ctr\] step 20 "),
    *_settings_pair(
        "settings_tracemalloc_leakhunt", "settings_tracemalloc_leakhunt", ("train_reader.py",),
        ("train_reader.py", "--memwatch", "startup"), "tracemalloc",
        "a leak hunt left tracemalloc on (25-frame tracebacks) from the first step on: every Python allocation of the "
        "reader thread's JSON parsing and tokenising, and of the trainer, records a traceback; the reader falls "
        "behind (python/cpython#150494, flyingcircusio/batou#497)",
        "none: tracemalloc traces the start-up (vocabulary build) only, prints its top sites and is stopped",
        r"(?i)tracemalloc|allocation trac", r"step 20 loss",
        missed={**{m: "`pipeline-bottleneck-drafter` (info), the consumer stage of the queue limits throughput, no "
                      "cause found, its time in train and SpanScorer.forward; tracemalloc not named"
                   for m in ("outside", "probes")},
                "attach": "no report: `dflash-diag attach` failed (exit 14, the probes' bootstrap gave no answer in "
                          "40 s) on the process that traces every allocation"}),
    *_settings_pair(
        "settings_default_dtype_f64", "settings_default_dtype_f64", ("forecast_load.py",),
        ("forecast_load.py", "--restore-dtype"), "default-dtype",
        "importing an uncertainty library calls torch.set_default_dtype(torch.float64): the sampler thread's windows "
        "and every parameter of the forecaster are double precision, each matmul about twice as slow "
        "(cics-nd/gptorch#22, rballester/tntorch#4, gensyn-ai/rl-swarm#188)",
        "none: the default set back to float32 right after the import; the library still fits its GP once in "
        "float64, explicitly",
        r"(?i)default.?dtype|float64|double", r"step 30 mse",
        # Scored once: missed in all three modes (docs/benchmarks.md). default-dtype-float64 was written after that
        # scoring, so the probes' and attach's recordings now pass as tuning cases (FIXED_AFTER_SCORING); outside
        # the dtype is not visible.
        missed={"outside": "`pipeline-bottleneck-drafter` (info), the consumer stage of the queue limits throughput, "
                           "no cause found, its time in train and Forecaster.forward; the float64 default dtype not "
                           "named (not visible from outside)"}),
    *_settings_pair(
        "settings_profiler_left_on", "settings_profiler_left_on", ("train_ranker.py",),
        ("train_ranker.py", "--profile", "steps:5"), "profiler",
        "a callback starts torch.profiler (record_shapes, profile_memory, with_stack) at train start and stops it at "
        "the end of epoch 0, which never comes on a session stream: every operator of the training thread is "
        "recorded for the whole run (facebookresearch/dlrm#197, pytorch/pytorch#49900)",
        "none: the same profiler on a schedule: 5 active steps at start-up, its table printed, then idle",
        r"(?i)profiler", r"it 50 loss",
        missed={"outside": "`pipeline-bottleneck-drafter` (info), the consumer stage of the queue limits throughput, "
                           "no cause found, its time in fit and Scorer.forward; the profiler not named (under probes "
                           "and attached, `torch-debug-mode` names it as the cause)"}),
    # --- Settings batch 2, held out: four more programs of process-wide settings and OS kinds, written by a helper from
    # public reports without seeing the tool (the kinds chosen by the helper), scored once untuned (docs/benchmarks.md).
    *_settings_pair(
        "settings2_vision", "settings2_vision", ("train.py",), ("train.py", "--parity-check-only"), "mkldnn flag",
        "torch.backends.mkldnn.enabled=False set globally as a numerics workaround, so every Conv2d fwd/bwd falls "
        "back from oneDNN to slow_conv2d (im2col+gemm) (pytorch/pytorch#25186, #35937, #32826) (measured by its "
        "author: 3.573 against the twin's 9.161 steps/s, medians of 3 runs each)",
        "none: oneDNN is disabled only inside the start-up parity check (torch.backends.mkldnn.flags(enabled=False) "
        "context), training runs with it enabled",
        r"(?i)mkldnn|onednn|dnnl|slow_conv2d|thnn_conv|im2col", r"step \d+ loss", batch="settings batch 2",
        # Under the probes and attached, `cpu-kernels-slowed` (written after the score) weighs the flag by the
        # convolutions' time (FIXED_AFTER_SCORING); from outside the flag is not visible (the native stacks show
        # slow_conv2d, said as information: torch takes that path itself for small inputs).
        missed={"outside": f"{_B2_CONSUMER} train_loop; the flag is not visible from outside"}),
    *_settings_pair(
        "settings2_reco", "settings2_reco", ("train.py",), ("train.py", "--cnr-auto"), "MKL CBWR",
        "MKL_CBWR=COMPATIBLE set in os.environ before importing torch pins MKL sgemm to its generic SSE2-class code "
        "path, ~2.5x slower matmuls in the MLP tower (uoguelph-mlrg/Theano-MPI#12, pytorch/helion#3598, "
        "mathnet/mathnet-numerics#1070) (measured by its author: 3.885 against the twin's 9.692 steps/s, medians of "
        "3 runs each)",
        "none: the same MKL_CBWR variable is set, but to AUTO, which keeps the CPU-specific kernels",
        r"(?i)MKL_CBWR|CBWR|conditional numerical reproducib|\bCNR\b", r"step \d+ loss", batch="settings batch 2",
        # The probes read MKL_CBWR from os.environ since (recorded again, 2026-12-05): `cpu-kernels-slowed` weighs
        # it; from outside, a variable set before importing torch is read from the process's memory since
        # (sources/live_environ.py; the outside run recorded again): FIXED_AFTER_SCORING in every mode.
    ),
    *_settings_pair(
        "settings2_textcls", "settings2_textcls", ("train.py",), ("train.py", "--omp-passive"), "OpenMP spin",
        "OMP_WAIT_POLICY=ACTIVE (set before importing torch, inherited by the evaluator child) makes libgomp workers "
        "busy-spin between parallel regions - the trainer's worker while it waits for batches and the idle "
        "evaluator process's worker forever - stealing the 2 cores from the shard-decoder threads "
        "(pytorch/pytorch#80777, JustVugg/colibri#341/#349) (measured by its author: 7.984 against the twin's 14.325 "
        "steps/s, medians of 3 runs each)",
        "none: OMP_WAIT_POLICY is still set (PASSIVE) together with KMP_BLOCKTIME, and the evaluator process still "
        "runs; workers sleep when idle",
        r"(?i)OMP_WAIT_POLICY|wait[_ ]?policy|GOMP_SPINCOUNT|(openmp|omp|gomp|libgomp).{0,60}(spin|busy)|"
        r"(spin|busy).{0,60}(openmp|omp|gomp|libgomp)", r"step \d+ loss", batch="settings batch 2",
        # Under `run`, cpu-oversubscribed named the spinning workers with OMP_WAIT_POLICY=ACTIVE: the one hit. The
        # outside miss is named by `cpu-pool-spin` since, and the attach recording (its second try, kept when a
        # miss is recorded) by cpu-oversubscribed: both FIXED_AFTER_SCORING.
    ),
    *_settings_pair(
        "settings2_metrics", "settings2_metrics", ("train.py",), ("train.py", "--snapshot-then-ship"), "file lock",
        "the trainer's per-step metrics append takes an fcntl.flock on metrics.jsonl that the shipper.py child "
        "process holds across a ~100 ms upload round-trip every ~0.1 s, so the training thread waits in flock() for "
        "another process (ceph/ceph-qa-suite#1020, marin-community/marin#7843) (measured by its author: 45.918 "
        "against the twin's 87.502 steps/s, medians of 3 runs each)",
        "none: the trainer still flocks metrics.jsonl every step and the shipper still takes the same lock, but only "
        "to copy+truncate; it uploads after releasing it",
        r"(?i)flock|file.?lock|lockf|fcntl|lock.{0,60}(shipper|child|other process|another process)",
        r"step \d+ loss", batch="settings batch 2",
        # Attached, the recording shows the trainer blocked on the lock 45% of its samples: `process-wait`, written
        # after the score, names it (FIXED_AFTER_SCORING); the outside and probes recordings show 5-6% only.
        missed={m: f"{_B2_CONSUMER} train_loop and ResMLP.forward; the trainer seen in flock on the shipper child's "
                   "lock, not followed" for m in ("outside", "probes")}),
    # --- Settings batch 3, held out: four more programs of process-wide settings and OS kinds, written by a helper from
    # public reports without seeing the tool (kinds chosen by the helper; those of batches 1-2 and the rest of the
    # casebook excluded), scored once untuned (docs/benchmarks.md).
    *_settings_pair(
        "settings3_tabular", "settings3_tabular", ("train.py",), ("train.py", "--kernel-isa", "avx2"),
        "ATen ISA",
        "ATEN_CPU_CAPABILITY=default set before importing torch (for bit-identical scorecards on the oldest nodes) makes "
        "ATen dispatch the scalar DEFAULT builds of its vectorised CPU kernels (GELU, softmax, LayerNorm, AdamW's "
        "element-wise updates, reductions) instead of AVX2 (pytorch/pytorch#155552, #59186, #80252) (measured by its "
        "author: 9.95 against the twin's 16.87 steps/s, medians of 3 runs each)",
        "none: the same variable is still pinned before torch is imported, but to avx2, the level this machine "
        "selects anyway",
        r"(?i)ATEN_CPU_CAPABILITY|cpu[ _-]?capabilit|kernel[ _-]?isa|\bISA\b|(avx2?|simd|vectori[sz]ation|vectori[sz]ed "
        r"kernels?)\W+(\w+\W+){0,4}(disabled|off|not used|bypassed|restricted|capped|pinned)|(scalar|non-?vectori[sz]ed|"
        r"unvectori[sz]ed|baseline|generic|fallback)\W+(\w+\W+){0,2}(aten\W+)?(cpu\W+)?kernels?",
        r"step \d+ loss", batch="settings batch 3"),
    *_settings_pair(
        "settings3_speech", "settings3_speech", ("train.py",), ("train.py", "--primitive-cache", "64"),
        "oneDNN primitive cache",
        "a runtime helper exports ONEDNN_PRIMITIVE_CACHE_CAPACITY=0 and LRU_CACHE_CAPACITY=1 before torch starts (a "
        "memory-growth workaround for variable-length conv inputs), so every Conv1d forward, backward-data and "
        "backward-weights call re-creates its oneDNN primitive (implementation selection and JIT code generation) "
        "every step (pytorch/pytorch#98688, #27971, #32037) (measured by its author: 78.1 against the twin's 138.8 "
        "steps/s, medians of 3 runs each)",
        "none: the primitive cache is still capped by the same variable (64 entries, enough for the few bucketed "
        "shapes) and LRU_CACHE_CAPACITY=1 is still exported",
        r"(?i)ONEDNN_PRIMITIVE_CACHE_CAPACITY|LRU_CACHE_CAPACITY|primitive[ _-]?cache|(onednn|mkl-?dnn|dnnl|ideep)\W+"
        r"(\w+\W+){0,5}(cache|re-?creat\w*|recompil\w*|re-?jit\w*|jit)|(kernel|conv\w*)\W+(\w+\W+){0,3}(cache\w* "
        r"(disabled|off|thrash\w*)|re-?creat\w*|recompil\w*|re-?jit\w*)",
        # Missed in every mode when scored once (ONEDNN_PRIMITIVE_CACHE_CAPACITY was not in the catalogue); named
        # since by `cpu-kernels-slowed`, weighed by the convolutions' time, recorded again (FIXED_AFTER_SCORING).
        r"step \d+ loss", batch="settings batch 3"),
    *_settings_pair(
        "settings3_landcover", "settings3_landcover", ("train.py",), ("train.py", "--hugepage-guard", "startup"),
        "numpy huge pages",
        "the sampler thread turns numpy's huge-page hint off process-wide (np.core.multiarray._set_madvise_hugepage("
        "False), as NUMPY_MADVISE_HUGEPAGE=0 does): with transparent huge pages in madvise mode every fresh ~40 MB "
        "augmentation buffer is faulted in 4 KiB pages (~56k minor faults a batch instead of ~2k), and the numpy "
        "producer starves the trainer (numpy/numpy#11957, #15769, #31590) (measured by its author: 4.35 against the "
        "twin's 7.59 steps/s, medians of 3 runs each)",
        "none: the same call is made, but only while the long-lived mosaics are built at start-up; the huge-page "
        "hint is restored before the per-batch loop",
        r"(?i)huge ?pages?|madvise|\bTHP\b|_set_madvise_hugepage|configure_numpy_memory|hugepage[ _-]?guard",
        r"step \d+ loss", batch="settings batch 3",
        # Missed in every mode when scored once (nothing read page faults); `page-faults` names the sampler's
        # faulting since, recorded again: under probes and attached it is the because of the consumer stage the
        # sampler's kernel time slows (FIXED_AFTER_SCORING); from outside no stage verdict was reached and the
        # info cause does not lead "where the time goes".
        missed={"outside": "`where-time-goes` (info), no stage verdict, the trainer's time in trainer and "
                           "PatchNet.forward; the sampler thread's page faults not read"}),
    *_settings_pair(
        "settings3_news", "settings3_news", ("train.py",), ("train.py", "--fetcher-debug", "scan-only"),
        "asyncio debug",
        "the trainer exports PYTHONASYNCIODEBUG=1 and its long-running asyncio shard-fetcher child inherits it: the "
        "fetcher's event loop runs in debug mode (a creation traceback for every handle and Task, coroutine-origin "
        "tracking, per-callback timing), ~2.5-3x slower, and the trainer starves on its queue while its own "
        "settings look clean (python/cpython#76151, #76228, #4478) (measured by its author: 64.7 against the twin's "
        "122.7 steps/s, medians of 3 runs each)",
        "none: PYTHONASYNCIODEBUG=1 is still set in the trainer and a one-off manifest-scan worker still runs in "
        "asyncio debug mode; only the long-running fetcher starts without it",
        r"(?i)PYTHONASYNCIODEBUG|asyncio\W+(\w+\W+){0,3}debug|debug\W+(\w+\W+){0,2}(asyncio|event[ _-]?loop)|"
        r"event[ _-]?loop\W+(\w+\W+){0,2}debug|fetcher[ _-]?debug|coroutine[ _-]?origin[ _-]?tracking",
        # Missed in every mode when scored once (nothing read a child's environment); named since by
        # `child-debug-mode` (the child that wants the CPUs the trainer waits for runs asyncio's debug mode),
        # recorded again (FIXED_AFTER_SCORING).
        r"step \d+ loss", batch="settings batch 3"),
    # --- Settings batch 4, held out: four more programs of process-wide settings and OS kinds, written by a helper from
    # public reports without seeing the tool (kinds chosen by the helper; those of batches 1-3 and the rest of the
    # casebook excluded), to be scored once untuned.
    *_settings_pair(
        "settings4_genomics", "settings4_genomics", ("train.py",), ("train.py", "--numerics", "check"),
        "SDPA flash off",
        "a numerics profile (numerics.py, run at start-up) calls torch.backends.cuda.enable_flash_sdp(False) for the "
        "whole process to match golden math-attention gradients; the CPU dispatcher of scaled_dot_product_attention "
        "honours the same global flag, so every attention forward/backward of the DNA transformer (512 "
        "tokens, 4 heads) runs the unfused math path that materialises the T x T scores instead of the CPU flash "
        "kernel (pytorch/pytorch#105131, #133671) (measured by its author: 4.95 against the twin's 9.82 steps/s, "
        "medians of 3 runs each)",
        "none: the profile still disables the memory-efficient SDPA backend (unused on CPU) and runs a one-off "
        "math-vs-fused parity probe under sdpa_kernel(SDPBackend.MATH) at start-up; training keeps flash enabled",
        r"(?i)flash[ _-]?(sdp|sdpa|attention|attn)|enable_flash_sdp|(sdpa|scaled[ _-]dot[ _-]product|attention)\W+"
        r"(\w+\W+){0,6}(math|unfused|reference)\b|\b(math|unfused)\W+(\w+\W+){0,3}(sdpa|sdp|attention|backend|kernel|"
        r"path)|numerics[ _-]?profile",
        r"step \d+ loss", batch="settings batch 4",
        # Missed in every mode when scored once (the SDPA backend flags were not read); the probes read them since
        # and `cpu-kernels-slowed` weighs the flash flag by the time in attention, recorded again under `run` and
        # attached (FIXED_AFTER_SCORING); from outside the flag is not visible.
        missed={"outside": f"{_B4_CONSUMER} trainer and Block.forward; the SDPA backend flags not read"}),
    *_settings_pair(
        "settings4_fraud", "settings4_fraud", ("train.py",), ("train.py", "--tcp-nodelay", "1"),
        "Nagle delayed ACK",
        "the feature-store client's config sets TCP_NODELAY=0 on its loopback connection to the store child process, "
        "and lookup() writes the 8-byte header and the id payload in two sends: Nagle holds the payload until the "
        "header is ACKed and the server delays that ACK (~40 ms on Linux), so each of the enricher's two lookups a "
        "batch waits ~44 ms with both processes idle (python/cpython#108736, python/asyncio#311, "
        "dpkp/kafka-python#783, steffengy/tiberius#46) (measured by its author: 10.88 against the twin's 20.38 "
        "steps/s, medians of 3 runs each)",
        "none: the client still calls setsockopt(TCP_NODELAY) on the same connection, but with 1; the same two-send "
        "protocol then takes ~0.1 ms a lookup",
        r"(?i)nagle|TCP_NODELAY|no[ _-]?delay|delayed[ _-]?acks?|quick[ _-]?ack|tcp\W+(\w+\W+){0,5}(40 ?ms|delay\w*|"
        r"coalesc\w*|ack\w*)",
        r"step \d+ loss", batch="settings batch 4",
        # Missed in every mode when scored once (a socket's other end was not followed); `process-wait` follows a
        # TCP connection to a local process since, and says when both ends wait on it. Recorded again: named under
        # `run`; from outside and attached (that start shared the 2 CPUs with its twin) the trainer was the limit,
        # the enricher's waits cost it nothing that window, and nothing was said (FIXED_AFTER_SCORING: probes).
        missed={m: f"{_B4_PRODUCER} _recv_exact (featurestore.py:30); the socket's wait on its idle peer not "
                   "followed" for m in ("outside", "attach")}),
    *_settings_pair(
        "settings4_robotics", "settings4_robotics", ("train.py",), ("train.py", "--host-profile", "default"),
        "timer slack",
        "a host-profile helper run at start-up sets prctl(PR_SET_TIMERSLACK) to 10 ms (an 'eco' profile, like "
        "systemd's TimerSlackNSec=), inherited by the learner thread and the forked simulator: the shared-memory "
        "bridge's 0.5 ms polling sleeps each last ~10 ms, and the lockstep DAgger loop (publish weights, wait for "
        "the rollout, train) waits out the slack on both sides every iteration (linux-on-mac/mbpfan#122, "
        "openjdk/jdk#13889, softmata/horus#136) (measured by its author: 41.4 against the twin's 67.1 steps/s, "
        "medians of 3 runs each)",
        "none: the same prctl(PR_SET_TIMERSLACK) call is made at start-up, with the kernel's default 50 us",
        r"(?i)timer[ _-]?slack|timerslack|PR_SET_TIMERSLACK|TimerSlackNSec|(sleep|wake-?up|timer|timeout)s?\W+"
        r"(\w+\W+){0,5}(overshoot\w*|oversleep\w*|coalesc\w*)|oversleep\w*|host[ _-]?profile\W+(\w+\W+){0,3}eco",
        r"step \d+ loss", batch="settings batch 4",
        # Missed in every mode when scored once (nothing read the timer slack); `timer-slack` names it since, from
        # /proc/PID/timerslack_ns and how long the learner's sleeps last, recorded again (FIXED_AFTER_SCORING).
        ),
    *_settings_pair(
        "settings4_pathology", "settings4_pathology", ("train.py",), ("train.py", "--access", "cached"),
        "page-cache eviction",
        "the tile-shard reader's default 'stream' access policy calls posix_fadvise(POSIX_FADV_DONTNEED) on every "
        "4 KiB record right after reading it (and on the start-up checksum pass), the way backup tools avoid "
        "polluting the page cache: the 64 MB of shards never stay cached, every random tile pread goes to the block "
        "device (~80 us instead of ~3 us) and the loader thread falls behind the trainer (borgbackup/borg#158, "
        "jborg/attic#252, restic/restic#4465) (measured by its author: 31.1 against the twin's 58.1 steps/s, medians "
        "of 3 runs each)",
        "none: the 'cached' policy makes the same posix_fadvise calls at open (POSIX_FADV_RANDOM, and "
        "POSIX_FADV_DONTNEED over the whole shard), but none after each read; the checksum pass then leaves the "
        "shards in the page cache",
        r"(?i)fadvise|FADV_DONTNEED|DONTNEED|page[ _-]?cache|(cache|pages?)\W+(\w+\W+){0,4}(evict\w*|drop\w*|"
        r"releas\w*|invalidat\w*|flush\w*)|(evict\w*|drop\w*|releas\w*|invalidat\w*)\W+(\w+\W+){0,4}(page[ _-]?)?"
        r"cache|cold[ _-](reads?|cache|pages?)|access[ _-]?policy",
        r"step \d+ loss", batch="settings batch 4",
        # Missed in every mode when scored once (nothing read the process's I/O counters); `storage-reads` names
        # the reads that go to the disk since, recorded again (FIXED_AFTER_SCORING).
        ),
    # --- Settings batch 5, held out: four more programs of process-wide settings and OS kinds, written by a helper from
    # public reports without seeing the tool (kinds chosen by the helper; those of batches 1-4 and the rest of the
    # casebook excluded), to be scored once untuned.
    *_settings_pair(
        "settings5_energy", "settings5_energy", ("train.py",), ("train.py", "--recv-buffer", "4194304"),
        "TCP receive buffer",
        "the meter feed's client settings (meterfeed.GATEWAY_SOCKET) set SO_RCVBUF to 4096 bytes on the loader's "
        "loopback TCP connection to the gateway child process, to bound per-connection kernel memory: the tiny "
        "receive window makes each 400 KB block trickle in a few KB per round trip (~10 ms instead of <1 ms), so the "
        "feed-loader thread falls behind the trainer, which waits on its queue (questdb/questdb#28, "
        "netty/netty#4724, zeromq/libzmq#2338) (measured by its author: 107.2 against the twin's 182.7 steps/s, medians of 3 runs each)",
        "none: the client still calls setsockopt(SO_RCVBUF) on the same connection, with 4 MiB (capped by the "
        "kernel's rmem_max); the same request/response feed then keeps ahead of the trainer",
        r"(?i)SO_RCVBUF|rcvbuf|recv[ _-]?buf\w*|receive[ _-]?(buffer|window)|socket[ _-]?buffer|tcp\W+(\w+\W+){0,5}"
        r"(window|buffer)\w*|(small|tiny)\W+(\w+\W+){0,3}(window|buffer)|recv[ _-]?buffer",
        r"step \d+ loss", batch="settings batch 5",
        missed={"outside": "`where-time-goes` (info), MainThread in main and Forecaster.forward; the socket's "
                           "receive buffer not read",
                "probes": f"{_B4_PRODUCER.replace('no cause found, its time in', 'because')} `kernel-time`: the "
                          "feed-loader's system calls; the socket's receive buffer not read",
                "attach": f"{_B4_PRODUCER.replace('no cause found, its time in', 'because')} `process-wait`: the "
                          "feed-loader blocked on its TCP connection to the gateway child; the buffer not read"},
        # The twin's false alarm (process-wait on the loader's TCP wait) is gone since the mend after the score
        # (FIXED_AFTER_SCORING).
        ),
    *_settings_pair(
        "settings5_ocr", "settings5_ocr", ("train.py",), ("train.py", "--start-method", "fork"),
        "spawn start method",
        "a portability helper (runtime.configure_processes, run at start-up) sets the interpreter-wide "
        "multiprocessing start method to 'spawn'; the feeder thread rebuilds its 2-process render pool every epoch "
        "(~96 steps), and each spawned worker starts a fresh interpreter that re-imports the main module and with it "
        "torch (~1-2 s of CPU on the 2 cores it shares with the trainer) before rendering anything, so the trainer "
        "drains its queue and waits at every epoch boundary (pytorch/pytorch#103117, #12831, #51011) (measured by "
        "its author: 22.5 against the twin's 40.5 steps/s, medians of 3 runs each)",
        "none: the same set_start_method call at start-up, with 'fork': the pool is still rebuilt every epoch, but "
        "its workers start in milliseconds",
        r"(?i)\bspawn\w*|start[ _-]?method|set_start_method|re-?import\w*|(worker|pool|child)[ _-]?(process(es)?\W+)?"
        r"(\w+\W+){0,4}(start-?up|boot\w*|re-?creat\w*|re-?buil\w*|respawn\w*|interpreter)|import\w*\W+(\w+\W+){0,3}"
        r"torch\W+(\w+\W+){0,4}(worker|child|process)",
        r"step \d+ loss", batch="settings batch 5",
        # Since (the next stop, before batch 6): the wait-for graph says the children spend their time starting up
        # under the 'spawn' start method; outside and under `run` replay as hits (FIXED_AFTER_SCORING). The attached
        # recording's main thread computed more than it waited, and the path stopped there: still a miss.
        missed={"attach": "`wait-chain` (warning): MainThread waits on the queue <- render-feeder waits on the pool's "
                          "child processes; what the children spend their start in (spawn, re-importing torch) not "
                          "named"}),
    *_settings_pair(
        "settings5_seismic", "settings5_seismic", ("train.py",), ("train.py", "--warnings", "default"),
        "warnings filter always",
        "the run-logging setup (logsetup.setup_run_logging, at start-up) calls warnings.simplefilter('always') with "
        "logging.captureWarnings(True): the numpy RuntimeWarnings (divide by zero in log10, invalid value in subtract "
        "and divide) that the per-channel features raise on every dead or gapped channel (8 a trace, 768 a "
        "batch) are no longer deduplicated but each formatted, routed through logging and written to the run log, "
        "so the trace-reader thread falls behind the trainer (neo4j/neo4j-python-driver#931, "
        "MDAnalysis/membrane-curvature#95) (measured by its author: 12.1 against the twin's 18.3 steps/s, medians of 3 runs each)",
        "none: the same simplefilter call and captureWarnings(True) at start-up, with the 'default' action: each "
        "warning location is logged once and later occurrences are dropped by the registry",
        r"(?i)warnings?[ _-]?(filter\w*|module|registry|storm|flood|spam)|simplefilter|filterwarnings|captureWarnings|"
        r"RuntimeWarning|divide by zero|invalid value|warnings\.warn|warn\w*\W+(\w+\W+){0,4}(always|dedup\w*|"
        r"captured|every time)|(always|captured|repeated|every)\W+(\w+\W+){0,3}warnings\b",
        r"step \d+ loss", batch="settings batch 5",
        # Attached, `diagnostics-overhead` named "Python's warnings" (a hit); from outside and under `run` the same
        # samples read as "Python's logging" (captureWarnings routes each warning through logging). Since, a sample
        # in both is the warnings' (shown through logging): the recordings replay as hits (FIXED_AFTER_SCORING).
        ),
    *_settings_pair(
        "settings5_molprop", "settings5_molprop", ("train.py",), ("train.py", "--device-scope", "build"),
        "default device mode",
        "a device-placement helper (devices.place, at start-up) calls torch.set_default_device('cpu') for the "
        "training thread, which pushes a TorchFunctionMode that intercepts every torch call and tensor method, not "
        "only factories: the small message-passing network (8 molecules, 32 wide, 6 layers), its gradient clipping, "
        "Adam and the weight EMA make hundreds of tiny calls a step and each pays the Python mode dispatch "
        "(pytorch/pytorch#92701, pymc-devs/pytensor#820) (measured by its author: 117.3 against the twin's 212.3 steps/s, medians of 3 "
        "runs each)",
        "none: the same helper enters torch.device('cpu') as a context manager only while the model and optimiser "
        "are built; the loop runs without the mode",
        r"(?i)set_default_device|default[ _-]?device|torch[ _-]?function[ _-]?mode|__torch_function__|torch "
        r"function|DeviceContext|utils[/.]_device|device[ _-]?(context|mode)|(mode|override)\W+(\w+\W+){0,4}"
        r"(dispatch|intercept\w*)",
        r"step \d+ loss", batch="settings batch 5",
        # Since (the next stop, before batch 6): `op-interposition` names the DeviceContext mode from the stacks in
        # every mode (FIXED_AFTER_SCORING); the twin's recordings stay quiet.
        ),
    # --- Settings batch 6, held out: four more programs of process-wide settings and OS kinds, written by a helper from
    # public reports without seeing the tool (kinds chosen by the helper; those of batches 1-5 and the rest of the
    # casebook excluded), scored once untuned (docs/benchmarks.md): 3/12 causes in the headline, no twin warned.
    *_settings_pair(
        "settings6_weather", "settings6_weather", ("train.py",), ("train.py", "--watchdog", "sample"),
        "trace function",
        "a stall watchdog (watchdog.StallWatchdog.arm, at start-up, mode 'trace') installs a Python trace function "
        "with threading.settrace and sys.settrace, so the interpreter calls it on every line, call and return of the "
        "training thread and the station-reader thread (and every thread started later): the reader's per-hour "
        "feature rows and the trainer's module calls pay a Python call per line executed, and both stages slow "
        "down (python/cpython#107674, nedbat/coveragepy#1665, gak/pycallgraph#41) (measured by its author: "
        "34.8 against the twin's 55.7 steps/s, medians of 3 runs each)",
        "none: the watchdog in 'sample' mode reads sys._current_frames() once a second from its own thread; the "
        "start-up phase (archive and model build) still runs under the same sys.settrace trace function, removed "
        "with sys.settrace(None) before the threads start",
        r"(?i)settrace|set_?trace|trace[ _-]?(function|func|hook|callback)s?|tracing\W+(\w+\W+){0,4}(function|hook|"
        r"every|each|line|call)|line[ _-]?(tracing|events?)|\btracer\b|(every|each|per)\W+(\w+\W+){0,2}line\W+"
        r"(\w+\W+){0,3}(trac\w*|callback|hook)|watchdog\W+(\w+\W+){0,5}trac\w*",
        r"step \d+ loss", batch="settings batch 6",
        missed={"outside": "`where-time-goes` (info), MainThread in main and TempNet.forward; the trace function not "
                           "named (2 of the trainer's 63 samples in it: the interpreter's calls into it are charged to "
                           "the lines it traces)",
                "probes": "`pipeline-bottleneck-drafter` (info), because `gc-pauses` (4%); the trace function not "
                          "named",
                "attach": f"{_B4_CONSUMER} main and TempNet.forward; the trace function not named"}),
    *_settings_pair(
        "settings6_retail", "settings6_retail", ("train.py",), ("train.py", "--child-spawn", "vfork"),
        "subprocess fork instead of vfork",
        "a platform helper (platform_compat.apply, at start-up) sets subprocess._USE_VFORK = False for the whole "
        "interpreter, so every subprocess.run forks the full parent instead of vfork: the extract-loader thread "
        "runs `gzip -dc` once per 96-row shard, and each fork copies the page tables of the ~0.5 GB in-memory "
        "product catalogue and the torch heap (~30 ms of kernel time) and leaves the parent's pages copy-on-write, "
        "so the trainer's next writes fault; the loader falls behind and the trainer waits on its queue "
        "(python/cpython#80004, python/cpython#11671, dlang/phobos#9139) (measured by its author: 27.6 against "
        "the twin's 48.9 steps/s, medians of 3 runs each)",
        "none: the same assignment subprocess._USE_VFORK, with True; the loader still runs gzip in a child process "
        "for every shard, but vfork does not copy the parent's address space",
        r"(?i)v?fork\w*|_USE_VFORK|page[ _-]?tables?|copy[ _-]?on[ _-]?write|\bCOW\b|process[ _-]?creation|"
        r"(address[ _-]?space|memory|RSS|heap)\W+(\w+\W+){0,5}(cop\w+|duplicat\w+|clon\w+)|"
        r"(spawn\w*|start\w*|creat\w*)\W+(\w+\W+){0,3}(child|process|subprocess)\w*\W+(\w+\W+){0,5}(large|big|"
        r"memory|address[ _-]?space|page)",
        r"step \d+ loss", batch="settings batch 6",
        # Since (after the score): `fork-cost` names the loader's forks of the 0.8 GiB process and the trainer's
        # copy-on-write faults; the outside and `run` recordings replay as hits, the attached one was recorded again
        # (its first read the cost under the warning floor) and names it (FIXED_AFTER_SCORING).
        ),
    *_settings_pair(
        "settings6_audio", "settings6_audio", ("train.py",), ("train.py", "--health-checks", "first"),
        "global module hooks",
        "a numerical health-check helper (health.HealthChecks, policy 'always') registers process-wide module hooks "
        "with torch.nn.modules.module.register_module_forward_hook and register_module_full_backward_hook: every "
        "module call of the residual CNN (~70 modules) runs a Python hook with an isfinite().all() check, and the "
        "global full backward hook wraps every module's inputs and outputs in BackwardHookFunction nodes whose "
        "gradients are checked again on the way back, so each training step pays hundreds of extra Python calls "
        "and small ops (pytorch/pytorch#50431, pytorch/pytorch#38972, pytorch/pytorch#54405) (measured by its "
        "author: 10.0 against the twin's 21.5 steps/s, medians of 3 runs each)",
        "none: the same two global hooks are registered at start-up but removed (handle.remove()) after the first "
        "step, a one-off sanity pass",
        r"(?i)register_module_\w*hook|global\W+(\w+\W+){0,3}(module\W+)?hooks?|module[ _-]?hooks?|(forward|"
        r"backward)[ _-]?hooks?|BackwardHook\w*|_global_\w*hooks|hooks?\W+(\w+\W+){0,4}(every|each|all)\W+"
        r"(\w+\W+){0,2}modules?|isfinite|non-?finite[ _-]?checks?|health[ _-]?checks?",
        r"step \d+ loss", batch="settings batch 6"),
        # A hit in all three modes through the stage verdict's hottest line (`_finite (health.py:19)`, its
        # `torch.isfinite(t).all()`): where the time goes, not that global module hooks put it there.
    *_settings_pair(
        "settings6_chem", "settings6_chem", ("train.py",), ("train.py", "--ledger-sync", "none"),
        "O_DSYNC writes",
        "the audit ledger (ledger.Ledger, sync 'dsync' by default) opens its append-only file with O_DSYNC, so each "
        "os.write of a one-line record returns only once the data is on the disk: the sampler thread writes one "
        "record per compound served (48 a batch) and waits on the device for each (~0.2-0.3 ms), so it falls "
        "behind the trainer, which waits on its queue (linux-msm/rmtfs#15, PX4/PX4-Autopilot#4004, "
        "category-labs/monad#1837) (measured by its author: 99.9 against the twin's 227.1 steps/s, medians of 3 "
        "runs each)",
        "none: the same os.open of the ledger without O_DSYNC (page cache only); the ledger is fsync'ed once at "
        "every checkpoint (500 steps), a brief touch of the same durability mechanism",
        r"(?i)O_D?SYNC|\bD?SYNC\b|f(data)?sync|synchronous\W+(\w+\W+){0,2}(writes?|I/?O|disk)|sync\w*\W+(\w+\W+)"
        r"{0,3}(writes?|disk|storage|device)|writes?\W+(\w+\W+){0,5}(wait\w*|block\w*)\W+(\w+\W+){0,4}(disk|"
        r"storage|device|flush\w*)|write[ _-]?through|durab\w+|(flush\w*|commit\w*)\W+(\w+\W+){0,3}(disk|storage|"
        r"device)",
        r"step \d+ loss", batch="settings batch 6",
        # Since (after the score): the system call tables name `write`, and the facts read the ledger open with
        # O_DSYNC, said by kernel-time at the sampler's os.write; recorded again in all three modes and named
        # (FIXED_AFTER_SCORING).
        ),
    # --- Settings batch 7, held out: four more programs of process-wide settings and OS kinds, written by a helper from
    # public reports without seeing the tool (kinds chosen by the helper; those of batches 1-6 and the rest of the
    # casebook excluded).
    *_settings_pair(
        "settings7_traffic", "settings7_traffic", ("train.py",), ("train.py", "--seccomp", "basic"),
        "stacked seccomp-bpf filters",
        "a hardening helper (sandbox.confine, called at start-up for each of six components, level 'audit') stacks six "
        "seccomp-bpf filters on the process with prctl(PR_SET_SECCOMP); each is ~2,400 instructions generated with "
        "argument-level rules that load the syscall's arguments before its number, so the kernel cannot cache an "
        "allow verdict per syscall and runs every filter on every system call of every thread: the loop-reader "
        "thread does one os.pread per 5-minute slot (13 per sample, 64 samples a batch) and each now costs several "
        "microseconds of filter evaluation, so it falls behind and the trainer waits on its queue "
        "(seccomp/libseccomp#116, flatpak/flatpak#4187, firecracker-microvm/firecracker#1022) (measured by its "
        "author: 140.0 against the twin's 220.6 steps/s, medians of 3 runs each)",
        "none: the same six sandbox.confine calls stack six seccomp filters, with level 'basic' (a short deny-list "
        "on the syscall number only, which the kernel caches as allowed for every other syscall)",
        r"(?i)seccomp|\bBPF\b|syscall[ _-]?filter\w*|filter\w*\W+(\w+\W+){0,4}(system[ _-]?calls?|syscalls?)|"
        r"PR_SET_SECCOMP|NO_NEW_PRIVS|sandbox\w*|confine\w*|(system[ _-]?calls?|syscalls?)\W+(\w+\W+){0,4}"
        r"(filter\w*|overhead|slow\w*|expensive|cost\w*)",
        r"step \d+ loss", batch="settings batch 7"),  # every mode missed when scored, named since
    *_settings_pair(
        "settings7_credit", "settings7_credit", ("train.py",), ("train.py", "--log-detail", "summary"),
        "torch print options profile full",
        "the run-wide settings module (settings.apply, log_detail 'full') calls torch.set_printoptions(profile='full'), "
        "which turns off the elision of large tensors for the whole process: the run journal logs the first eight "
        "applicant rows (8 x 240 values) every 2nd step, and the tensor __str__ now formats all 1,920 numbers in "
        "Python (torch._tensor_str, ~20 ms each) on the training thread instead of a summarised 'x, x, ..., x' "
        "row (pytorch/pytorch#6863, pytorch/pytorch#9185, nod-ai/amd-shark-ai#384) (measured by its author: 87.1 "
        "against the twin's 152.6 steps/s, medians of 3 runs each)",
        "none: the same torch.set_printoptions call with profile='default' (threshold 1000), so the journal's "
        "tensors print summarised; the journal line is still formatted every 2nd step",
        r"(?i)set_printoptions|print[ _-]?options|profile\W+(\w+\W+){0,2}full|threshold|_tensor_str|"
        r"(tensor|tensors)\W+(\w+\W+){0,4}(format\w*|print\w*|repr|str\w*|render\w*)|(format\w*|print\w*|render\w*|"
        r"repr|stringif\w*)\W+(\w+\W+){0,4}(tensors?|full|whole|every\W+element)|summari[sz]\w*|elision|elided",
        r"step \d+ loss", batch="settings batch 7",
        missed={m: f"{_B4_CONSUMER} run and Scorer.forward; the print options not read" for m in
                ("outside", "probes", "attach")}),
    *_settings_pair(
        "settings7_sonar", "settings7_sonar", ("train.py",), ("train.py", "--native-trace", "quiet"),
        "MKL_VERBOSE call tracing",
        "the native runtime helper (runtime.prepare, before torch is imported, native_trace 'trace') sets "
        "MKL_VERBOSE=1, so Intel MKL times and prints a line for every BLAS call; the helper routes the C-level "
        "stdout through a pipe into a Python logging thread: the deep narrow MLP makes ~50 small SGEMM calls a step, "
        "each now timed and formatted by MKL, and the pump thread turns ~10k lines a second into log records, "
        "holding the GIL the training thread needs (uxlfoundation/oneDNN#389, intel/pti-gpu#55, "
        "libxsmm/libxsmm#78) (measured by its author: 114.7 against the twin's 297.3 steps/s, medians of 3 runs each)",
        "none: the same environment variable set by the same helper, MKL_VERBOSE=0; the stdout pipe and its "
        "logging pump thread are still there, idle",
        r"(?i)MKL_VERBOSE|\bMKL\b\W+(\w+\W+){0,3}(verbose|trac\w+|log\w*)|verbose\W+(\w+\W+){0,4}(MKL|BLAS|GEMM|"
        r"native|librar\w+|mode|output|trac\w+|logging)|(BLAS|GEMM|native)\W+(\w+\W+){0,3}(trac\w+|verbose|"
        r"logg\w+)|native\W+(\w+\W+){0,2}(stdout|output|log)|native-log|_pump",
        r"step \d+ loss", batch="settings batch 7",
        missed={m: f"{_B4_CONSUMER} main; MKL_VERBOSE and the log pump not named" for m in
                ("outside", "probes", "attach")}),
    *_settings_pair(
        "settings7_genome", "settings7_genome", ("train.py",), ("train.py", "--guard", "network"),
        "PEP 578 audit hook",
        "a data-governance helper (guard.install, policy 'paths', at start-up) registers a process-wide audit hook "
        "with sys.addaudithook: the interpreter calls it for every audit event of every thread, and on each 'open' "
        "event it resolves the path with os.path.realpath (an lstat per path component) and matches it against "
        "deny patterns with fnmatch; the loader thread opens one .seq file per read (48 a batch), so each open "
        "pays the hook's Python work and system calls and the loader falls behind the trainer, which waits on its "
        "queue (python/cpython#18360, python/cpython#12613, pschanely/CrossHair#77) (measured by its author: 218.7 "
        "against the twin's 305.9 steps/s, medians of 3 runs each)",
        "none: the same sys.addaudithook registration at start-up with policy 'network': the hook still runs for "
        "every event but returns at once except for socket.connect",
        r"(?i)audit[ _-]?hooks?|addaudithook|sys\.audit|PEP\W?578|audit\w*\W+(\w+\W+){0,4}(events?|hooks?|open)|"
        r"governance|guard\W+(\w+\W+){0,3}(hook|open|path)|_hook\b|realpath|(hook|callback)\W+(\w+\W+){0,4}"
        r"(every|each)\W+(\w+\W+){0,2}(open|file|event)",
        r"step \d+ loss", batch="settings batch 7",
        missed={"outside": f"{_B4_CONSUMER} main and Net.forward; the audit hook not named",
                "probes": "`board-stale` (warning): 'no board update for 10 s: the training loop looks hung', the "
                          "hook refused the probes' board writes; the audit hook not named",
                "attach": "no report: `dflash-diag attach` timed out (exit 14) saying the main thread ran no Python "
                          "code; the hook refused the bootstrap's file opens"}),
    # --- Settings batch 8, held out: four more programs of process-wide settings and OS kinds, written by a helper from
    # public reports without seeing the tool (kinds chosen by the helper; those of batches 1-7 and the rest of the
    # casebook excluded).
    *_settings_pair(
        "settings8_lidar", "settings8_lidar", ("train.py",), ("train.py", "--memory-profile", "steady"),
        "glibc malloc mmap threshold",
        "the allocator helper (memory.apply, profile 'lean', at start-up) calls glibc's mallopt to pin "
        "M_MMAP_THRESHOLD at 128 KiB and M_TRIM_THRESHOLD at 256 KiB, which also turns off glibc's dynamic mmap "
        "threshold: every buffer above 128 KiB (the PointNet's per-point activations and gradients, several MB each, "
        "and the loader's point-cloud arrays) is a fresh anonymous mmap that is munmap'ed on free, so every step "
        "faults its memory in again and the kernel zeroes each page (~43k minor faults a step against ~7k) instead of "
        "reusing heap memory (pingcap/tiflash#1400, sonos/tract#2783, pop-os/cosmic-bg#73) (measured by its author: "
        "7.7 against the twin's 15.8 steps/s, medians of 3 runs each)",
        "none: the same two mallopt calls at start-up with profile 'steady' (M_MMAP_THRESHOLD 32 MiB, glibc's "
        "ceiling, and M_TRIM_THRESHOLD 64 MiB), so the large buffers are recycled inside the heap",
        r"(?i)mallopt|M_MMAP_THRESHOLD|M_TRIM_THRESHOLD|MALLOC_(MMAP|TRIM)_THRESHOLD_?|mmap[ _-]?threshold|"
        r"trim[ _-]?threshold|glibc\W+(\w+\W+){0,4}(malloc|allocat\w+|heap|thresholds?|arenas?)|page[ _-]?faults?|"
        r"minor[ _-]?faults?|(mmap\w*|munmap\w*)\W+(\w+\W+){0,6}(alloc\w*|tensors?|buffers?|free\w*|every|each|"
        r"steps?)|(alloc\w*|buffers?|tensors?)\W+(\w+\W+){0,4}(mmap\w*|munmap\w*)|memory[ _-]?profile|zero(ed|ing)\W+"
        r"(\w+\W+){0,2}pages",
        r"step \d+ loss", batch="settings batch 8"),  # attach: missed when scored, named since (FIXED_AFTER_SCORING)
    *_settings_pair(
        "settings8_invoice", "settings8_invoice", ("train.py",), ("train.py", "--money-profile", "standard"),
        "decimal context precision",
        "the money helper (money.configure, profile 'audit', at start-up) sets decimal.DefaultContext.prec to 120 "
        "digits (and the main thread's context), and every thread's decimal context is copied from DefaultContext, "
        "the featurizer's included: each invoice line's FX division, pro-rata shipping split, tax ratio and square "
        "root now produce 120-digit coefficients in libmpdec instead of 28, and every later multiply and add works "
        "on them, so the featurizer thread (64 invoices of 4-24 lines a batch, all in Decimal, holding the GIL) "
        "falls behind and the trainer waits on its queue (vyperlang/vyper#5108, AdamWhiteHat/BigDecimal#54, "
        "shopspring/decimal#206) (measured by its author: 38.5 against the twin's 68.2 steps/s, medians of 3 runs "
        "each)",
        "none: the same money.configure call sets decimal.DefaultContext with profile 'standard' (prec 28, "
        "Python's default); the featurizer does the same Decimal arithmetic",
        r"(?i)decimal|DefaultContext|getcontext|setcontext|libmpdec|mpdec|\bprec\b|(high|context|extra|120)\W+"
        r"(\w+\W+){0,2}precision|precision\W+(\w+\W+){0,3}(120|contexts?|digits)|\d+[ _-]?digits?\W+(\w+\W+){0,4}"
        r"(arithmetic|division|contexts?|coefficients?)|money[ _-]?profile|arbitrary[ _-]?precision",
        r"step \d+ loss", batch="settings batch 8",
        missed={"outside": f"{_B8_PRODUCER} features (invoices.py:43), the Decimal line its hottest; the decimal "
                           "context not read",
                "probes": f"{_B4_CONSUMER} main and LateNet.forward (the queue backing up); the decimal context not "
                          "read",
                "attach": f"{_B8_PRODUCER} features (invoices.py:43); the decimal context not read"}),
    *_settings_pair(
        "settings8_tides", "settings8_tides", ("train.py",), ("train.py", "--lineage", "writes"),
        "inotify access events",
        "the data-lineage helper (lineage.Tracker, level 'reads', at start-up) puts an inotify watch with "
        "IN_OPEN|IN_ACCESS|IN_CLOSE_NOWRITE on the archive's directory, so the kernel queues an IN_ACCESS event for "
        "every read of gauges.bin: the reader thread does one os.pread per 15-minute record (120 a sample, 32 "
        "samples a batch, ~3,800 a batch), each pread now also pays fsnotify's event queueing, and the lineage "
        "thread wakes for every burst and decodes each event in Python, holding the GIL the reader needs, so the "
        "reader falls behind and the trainer waits on its queue (mozilla-services/socorro#6375, "
        "osquery/osquery#1600, emcrisostomo/fswatch#352) (measured by its author: 50.5 against the twin's 91.8 "
        "steps/s, medians of 3 runs each)",
        "none: the same inotify watch on the same directory with level 'writes' (IN_CREATE|IN_MOVED_TO|IN_MODIFY|"
        "IN_CLOSE_WRITE), which reads never trigger; the lineage thread stays blocked in os.read",
        r"(?i)inotify|IN_ACCESS|fsnotify|fanotify|lineage|(file|fs)[ _-]?(system[ _-])?(watch\w*|notif\w*|events?)|"
        r"watch\w*\W+(\w+\W+){0,5}(access|reads?|events?|director\w*)|(access|read)[ _-]?events?|events?\W+"
        r"(\w+\W+){0,4}(every|each|per)\W+(\w+\W+){0,2}(reads?|preads?|access\w*)",
        r"step \d+ loss", batch="settings batch 8"),  # every mode missed when scored, named since
    *_settings_pair(
        "settings8_poetry", "settings8_poetry", ("train.py",), ("train.py", "--device-profile", "server"),
        "quantized engine QNNPACK",
        "the device-profile helper (device_profile.apply, profile 'mobile', at start-up) sets "
        "torch.backends.quantized.engine = 'qnnpack' to match the phones, so the distillation teacher, the "
        "keyboard's dynamically quantized int8 model (three Linear layers up to 1024x2048), is packed for and run "
        "by QNNPACK's mobile kernels, several times slower on x86 than the x86/FBGEMM engine: the labeller thread's "
        "teacher forward (512 positions a batch) falls behind and the student trainer waits on its queue "
        "(pytorch/pytorch#46749, pytorch/pytorch#83888, pytorch/pytorch#56028) (measured by its author: 13.2 "
        "against the twin's 31.1 steps/s, medians of 3 runs each)",
        "none: the same device_profile.apply call sets torch.backends.quantized.engine, to 'x86' (profile "
        "'server'); the same int8 teacher runs in the same labeller thread",
        r"(?i)qnnpack|fbgemm|quantized[ _-]?engine|backends\.quantized|qengine|(int8|quantiz\w+|qlinear\w*|"
        r"linear_dynamic)\W+(\w+\W+){0,5}(kernels?|engine|backend|mobile|arm)|(engine|backend)\W+(\w+\W+){0,3}"
        r"(quantiz\w+|int8)|device[ _-]?profile",
        r"step \d+ loss", batch="settings batch 8",
        # outside: missed when scored (the engine is not readable from outside); `native-slow-path` names QNNPACK's
        # SSE2 kernels in the native stacks since (recorded again, FIXED_AFTER_SCORING).
        ),
    # --- Settings batch 9, held out: four more programs of process-wide settings and OS kinds, written by a helper from
    # public reports without seeing the tool (kinds chosen by the helper; those of batches 1-8 and the rest of the
    # casebook excluded).
    *_settings_pair(
        "settings9_calculus", "settings9_calculus", ("train.py",), ("train.py", "--worker-profile", "standard"),
        "SymPy cache size",
        "the worker-profile helper (cas_profile.apply, profile 'lean', at start-up, before SymPy is imported) sets "
        "SYMPY_CACHE_SIZE=16, and SymPy sizes its process-wide LRU cache (the cacheit memoization of Add, Mul, Pow "
        "and function construction, expand and related helpers) from it when it is imported: with 16 "
        "entries nearly every lookup misses and is evicted at once, so the generator thread rebuilds the same "
        "subexpressions, canonical forms and assumption queries for every random integrand it differentiates and "
        "expands (16 pairs a batch, all pure Python under the GIL); it falls behind and the trainer waits on its "
        "queue (sympy/sympy#8198, sympy/sympy_benchmarks#34, underworldcode/underworld3-archive#114) (measured by "
        "its author: 8.14 against the twin's 12.33 steps/s, medians of 3 runs each)",
        "none: the same cas_profile.apply call before SymPy's import sets SYMPY_CACHE_SIZE=4096 (profile "
        "'standard'), room for the generator's working set; the same generator does the same SymPy work",
        r"(?i)sympy\W+(\w+\W+){0,5}(cach\w*|memoi[sz]\w*)|(cach\w*|memoi[sz]\w*)\W+(\w+\W+){0,5}sympy|"
        r"SYMPY_CACHE_SIZE|SYMPY_USE_CACHE|cacheit|(lru|memo\w*|expression|symbolic)[ _-]?cache|cache[ _-]?size\W+"
        r"(\w+\W+){0,3}(16|small|tiny|capped|limit\w*)|(tiny|small|capped|16[ _-]entr\w*)\W+(\w+\W+){0,2}(lru[ _-]?)?"
        r"cache|memoi[sz]ation\W+(\w+\W+){0,4}(off|disabled|small|capped)|worker[ _-]?profile|cas[ _-]?profile",
        r"step \d+ loss", batch="settings batch 9"),
        # every mode missed when scored (a consumer verdict with no cause); named since, recorded again
        # (FIXED_AFTER_SCORING): the trainer thread's GIL waits seen in its native stacks (py-spy --idle), the SymPy
        # generator holding it, and the SYMPY_CACHE_SIZE that sympy/core/cache.py reads from the environment.
    *_settings_pair(
        "settings9_telemetry", "settings9_telemetry", ("train.py",), ("train.py", "--net-profile", "blocking"),
        "socket default timeout",
        "the network-defaults helper (netdefaults.apply, profile 'guarded', at start-up) calls "
        "socket.setdefaulttimeout(30.0), so every socket the process creates afterwards, the feed reader's Unix "
        "stream socket and the collector's included, is put in non-blocking mode with a timeout: CPython then "
        "polls the descriptor before each recv_into and send (a poll system call, then the call itself, each "
        "releasing and re-taking the GIL) and computes a deadline for each; the feed reader does four recv_into "
        "calls per 72-byte frame (length, header, payload, CRC; 2,048 frames a batch), so its system calls and GIL "
        "hand-offs roughly double, it falls behind and the trainer waits on its queue (kpdyer/fteproxy#116, "
        "faucetsdn/poseidon#1141, Broadcom/rally-rest-toolkit-python#187) (measured by its author: 32.44 against "
        "the twin's 45.45 steps/s, medians of 3 runs each)",
        "none: the same netdefaults.apply call at start-up calls socket.setdefaulttimeout(None) (profile "
        "'blocking'), Python's default: the sockets stay blocking and each recv_into is one system call",
        r"(?i)setdefaulttimeout|settimeout|default[ _-]?(socket[ _-])?timeout|socket[ _-]?timeouts?|timeouts?\W+"
        r"(\w+\W+){0,5}(sockets?|recv\w*|non-?blocking)|non-?blocking\W+(\w+\W+){0,4}(sockets?|mode|recv\w*|"
        r"reads?)|(poll|select)\W+(\w+\W+){0,4}(before|per|each|every)\W+(\w+\W+){0,3}(recv\w*|reads?|system "
        r"calls?|syscalls?|calls?)|O_NONBLOCK|net[ _-]?profile|netdefaults",
        r"step \d+ loss", batch="settings batch 9",
        # every mode missed when scored (kernel time at the recv_into line, as the twin's); named since, recorded
        # again (FIXED_AFTER_SCORING): with only information linked, doctor takes its native look, and the reader's
        # stacks poll the socket before each call (CPython's internal_select: the socket has a timeout).
        # twin: `kernel-time` warned from outside and under run when scored (the twin's blocking socket reads, which
        # the I/O counters do not count); information since (FIXED_AFTER_SCORING).
        ),
    *_settings_pair(
        "settings9_clicks", "settings9_clicks", ("train.py",), ("train.py", "--proto-runtime", "native"),
        "protobuf pure-Python runtime",
        "the protobuf-runtime helper (proto_runtime.apply, profile 'portable', at start-up, before google.protobuf "
        "is imported) sets PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python, so protobuf loads its pure-Python "
        "runtime instead of the upb C extension: every Impression.FromString in the log-reader thread decodes its "
        "record field by field in Python (varints, the nested Context and repeated Feature messages, packed "
        "floats and ids), tens of times slower than upb, so the reader (256 records a batch, under the GIL) falls "
        "behind and the trainer waits on its queue (protocolbuffers/protobuf#4489, protocolbuffers/protobuf#9839, "
        "lalinsky/python-phoenixdb#4) (measured by its author: 11.38 against the twin's 19.48 steps/s, medians of "
        "3 runs each)",
        "none: the same proto_runtime.apply call sets PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=upb (profile "
        "'native'), the C runtime; the reader parses the same records and hashes the same features",
        r"(?i)PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION|api_implementation|protobuf\W+(\w+\W+){0,5}(pure[ _-]?python|"
        r"python\W+(implementation|runtime|backend)|runtime|implementation|backend|\bupb\b|c(\+\+)?[ _-]?"
        r"(extension|accelerat\w*))|pure[ _-]?python\W+(\w+\W+){0,4}(protobuf|proto|pb2?|decod\w*|pars\w*)|"
        r"python_message|\bupb\b|proto[ _-]?runtime",
        r"step \d+ loss", batch="settings batch 9",
        # outside and probes missed when scored (the trainer read as limiting, no cause); named since, recorded again
        # (FIXED_AFTER_SCORING): the trainer's GIL waits in its native stacks, the reader holding the GIL, and the
        # PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION that protobuf's api_implementation.py reads. Attach still misses (its
        # recording: `page-faults` from the probes' start-up leads, so no native look).
        missed={"attach": "`where-time-goes`: MainThread spends main and CTRModel.forward, off a CPU 60% of the "
                          "window; the protobuf runtime variable not read"}),
    *_settings_pair(
        "settings9_legal", "settings9_legal", ("train.py",), ("train.py", "--regex-version", "v0"),
        "regex VERSION1 full case folding",
        "the regex-dialect helper (regex_policy.configure, version 'v1', at start-up) sets regex.DEFAULT_VERSION = "
        "regex.VERSION1, so the featurizer's patterns, compiled afterwards, run in the regex module's version-1 "
        "mode, where case-insensitive matching implies FULLCASE (full Unicode case folding): the tokenizer, money "
        "and party-name patterns (case-insensitive character classes over Latin-1 and Latin Extended ranges, "
        "currency signs) can no longer match through simple case tables and try multi-character folds (ß/ss, "
        "ligatures) at every position, several times slower; the featurizer thread (32 clauses a batch, all regex "
        "work holding the GIL) falls behind and the trainer waits on its queue (mrabarnett/mrab-regex#229, "
        "mrabarnett/mrab-regex#175, mrabarnett/mrab-regex#260) (measured by its author: 9.40 against the twin's "
        "17.69 steps/s, medians of 3 runs each)",
        "none: the same regex_policy.configure call sets regex.DEFAULT_VERSION = regex.VERSION0 (version 'v0'), "
        "the module's re-compatible default with simple case folding; the same patterns run on the same clauses",
        r"(?i)DEFAULT_VERSION|VERSION1|FULLCASE|full[ _-]?(unicode[ _-])?case[ _-]?(fold\w*|match\w*|insensitiv\w*)|"
        r"case[ _-]?folding|unicode\W+(\w+\W+){0,2}case[ _-]?(fold\w*|insensitiv\w*)|regex\W+(\w+\W+){0,4}"
        r"(versions?|dialect|v1|version[ _-]?1)|(version[ _-]?1|v1|dialect)\W+(\w+\W+){0,3}(regex|patterns?)|"
        r"regex[ _-]?policy|regex[ _-]?version",
        r"step \d+ loss", batch="settings batch 9",
        missed={m: f"{_B8_PRODUCER} ClauseFeaturizer.__call__ (clauses.py:94), in native code pattern_findall "
                   "[_regex.c] 69-96%; regex's DEFAULT_VERSION not read" for m in ("outside", "probes", "attach")}),
    # --- Settings batch 10, held out: four more programs of process-wide settings and OS kinds, written by a helper
    # from public reports without seeing the tool (kinds chosen by the helper; those of batches 1-9 and the rest of
    # the casebook excluded).
    *_settings_pair(
        "settings10_tickets", "settings10_tickets", ("train.py",), ("train.py", "--rng-policy", "seeded"),
        "random module rebound to SystemRandom",
        "the randomness-policy helper (rng_policy.apply, policy 'os-entropy', at start-up) rebinds the module-level "
        "functions of `random` (random, randrange, choice, shuffle, ...) to a random.SystemRandom instance, so every "
        "draw in the process reads the kernel's CSPRNG through os.urandom (a getrandom system call and a bytes object "
        "per draw, ~10x the cost of the Mersenne Twister): the featurizer thread's augmentation (word dropout, "
        "adjacent swaps, n-gram dropout, record choice: ~200 draws a ticket, 256 tickets a batch, under the GIL) "
        "falls behind and the trainer waits on its queue (mabel-dev/opteryx#579, Roguelazer/onepasswordpy#9, "
        "pyca/cryptography#2410) (measured by its author: 9.15 against the twin's 17.41 steps/s, medians "
        "of 3 runs each)",
        "none: the same rng_policy.apply call rebinds the same functions to a seeded random.Random (policy 'seeded', "
        "the Mersenne Twister); the featurizer makes the same draws on the same tickets",
        r"(?i)SystemRandom|urandom|getrandom|CSPRNG|(random|rng)\W+(\w+\W+){0,5}(kernel|system call|syscall|"
        r"entropy|cryptograph\w*|secure)|(kernel|system[ _-]?call|syscall|entropy)\W+(\w+\W+){0,4}(random\w*|rng|"
        r"draws?)|rng[ _-]?policy|os[ _-]?entropy",
        r"step \d+ loss", batch="settings batch 10",
        # every mode missed when scored (the producer's time in featurize's list comprehension, tickets.py:78, its
        # hottest line a random.random() call); named since (FIXED_AFTER_SCORING): the library function a hot line
        # spends in is said (`SystemRandom.random` in random.py, 52-55% of the featurizer's samples).
        # twin: `gil-contention` warned in every mode when scored (the featurizer holds the GIL 85-89% of the time while
        # MainThread waits for it 39-51%); information since (FIXED_AFTER_SCORING): a thread that makes what the
        # waiting threads consume shares the interpreter with them by design.
        ),
    *_settings_pair(
        "settings10_bidding", "settings10_bidding", ("train.py",), ("train.py", "--metrics", "inprocess"),
        "prometheus_client multiprocess mode",
        "the metrics helper (observability.setup, mode 'multiproc', at start-up, before prometheus_client is "
        "imported) sets PROMETHEUS_MULTIPROC_DIR, and prometheus_client picks its value class from it on import: "
        "every Counter.inc, Histogram.observe and Gauge.set then takes the value's lock, checks the pid and writes "
        "the new value into a memory-mapped .db file (struct packing into the mmap) instead of adding to an "
        "in-memory float, about twice the cost per call; the auction-replay thread makes four to eight metric "
        "updates for each of 512 auctions a batch (under the GIL), falls behind and the trainer waits on its queue "
        "(prometheus/client_python#169, prometheus/client_python#367, trallnag/prometheus-fastapi-instrumentator#282) "
        "(measured by its author: 69.06 against the twin's 104.71 steps/s, medians of 3 runs each)",
        "none: the same observability.setup call removes PROMETHEUS_MULTIPROC_DIR (mode 'inprocess'), values kept "
        "in memory; the replay updates the same metrics for the same auctions",
        r"(?i)PROMETHEUS_MULTIPROC_DIR|prometheus_multiproc|multi[ _-]?process\W+(\w+\W+){0,4}(mode|metrics?|"
        r"values?)|MultiProcessValue|mmap_?dict|(prometheus|metrics?)\W+(\w+\W+){0,6}(mmap\w*|memory[ _-]?mapped|"
        r"\.db files?)|(mmap\w*|memory[ _-]?mapped)\W+(\w+\W+){0,4}(metrics?|values?|prometheus)|observability",
        r"step \d+ loss", batch="settings batch 10"),
    *_settings_pair(
        "settings10_retrieval", "settings10_retrieval", ("train.py",), ("train.py", "--pool-profile", "batch"),
        "sortedcontainers load factor",
        "the pool-tuning helper (pool_profile.apply, profile 'interactive', at start-up) sets "
        "sortedcontainers.SortedList.DEFAULT_LOAD_FACTOR = 16 (library default 1000), so the miner's 40,000-item "
        "SortedKeyList of hard-negative candidates is kept in about 2,000 sublists of 16-32 items: inserts split a "
        "sublist every few calls and clear the positional index, and every pop(i) and pool[i] then rebuilds that "
        "index over all sublists; the miner thread (12 inserts, 12 positional evictions and ranked draws per "
        "query, 128 queries a batch, under the GIL) falls behind and the trainer waits on its queue "
        "(grantjenks/python-sortedcontainers#4, grantjenks/python-sortedcontainers#213) (measured by its author: "
        "42.79 against the twin's 62.52 steps/s, medians of 3 runs each)",
        "none: the same pool_profile.apply call sets DEFAULT_LOAD_FACTOR = 1000 (profile 'batch', the library's "
        "default); the miner does the same inserts, evictions and draws",
        r"(?i)DEFAULT_LOAD_FACTOR|load[ _-]?factor|sortedcontainers|Sorted(Key)?List\W+(\w+\W+){0,5}(sublists?|"
        r"load|index|tuning)|sublists?|_?(positional|pos)[ _-]?index\W+(\w+\W+){0,3}(rebuil\w*|reset|clear\w*)|"
        r"pool[ _-]?profile",
        r"step \d+ loss", batch="settings batch 10",
        # under the probes missed when scored (`gil-contention`: negative-miner holds the GIL most in
        # HardNegativeMiner.sample, miner.py:56, sortedcontainers not said); named since, recorded again
        # (FIXED_AFTER_SCORING): the settings probe reads the library constants the program changed, and the
        # verdict says "there SortedList.DEFAULT_LOAD_FACTOR is 16 at run time (1000 in sortedcontainers/sortedlist.py)"
        ),
    *_settings_pair(
        "settings10_catalog", "settings10_catalog", ("train.py",), ("train.py", "--layout", "merged"),
        "long sys.path, failing lazy imports",
        "the runfiles launcher (runfiles.setup, layout 'per-target', at start-up) puts each of 161 staged library "
        "targets on sys.path, one entry per target as the build tool's default layout does; the decoder's block "
        "reader tries `import orjson` and `import ujson` (not installed) on every call before falling back to json, "
        "and a failed import is not cached: each one asks every sys.path entry's FileFinder, which stats its "
        "directory, ~320 stat calls and the import lock per block (2 blocks a batch) and the decoder thread falls "
        "behind and the trainer waits on its queue (python/mypy#18038, bazelbuild/bazel#10977, "
        "python/cpython#91519) (measured by its author: 86.77 against the twin's 133.24 steps/s, medians of 3 runs "
        "each)",
        "none: the same runfiles.setup call links the same targets into one site directory (layout 'merged'), a "
        "single sys.path entry; the reader makes the same failing imports",
        r"(?i)sys\.path|PYTHONPATH|import\w*\W+(\w+\W+){0,6}(path|stat\w*|fail\w*|miss\w*|not cached|lookups?|"
        r"finders?)|(failed|failing|missing|negative|repeated)\W+(\w+\W+){0,2}imports?|FileFinder|path[ _-]?finder|"
        r"importlib|(orjson|ujson)|runfiles|(per[ _-]?target|layout)\W+(\w+\W+){0,3}(path|entries|sys)",
        # Since 2026-12-06 the GIL holder's native samples are said where its Python frames name nothing below its
        # line: catalog-decoder's are in importlib's _find_and_load, mostly in fstatat64 (FIXED_AFTER_SCORING).
        r"step \d+ loss", batch="settings batch 10"),
    # --- Settings batch 11, held out: four more programs of process-wide settings, library configuration and OS
    # kinds, written by a helper from public reports without seeing the tool (kinds chosen by the helper; those of
    # batches 1-10 and the rest of the casebook excluded), scored once after the layers of 2026-12-06 were committed.
    *_settings_pair(
        "settings11_reverb", "settings11_reverb", ("train.py",), ("train.py", "--fp-mode", "ftz"),
        "subnormal floats computed without flush-to-zero (torch.set_flush_denormal(False))",
        "numerics.configure('ieee') calls torch.set_flush_denormal(False) at start-up, so the CPU's flush-to-zero and "
        "denormals-are-zero modes (MXCSR FTZ/DAZ) stay off for the training thread; the tails of the synthetic "
        "octave-band energy envelopes (linear power, exp(-13.8 t / RT60)) fall into the float32 subnormal range "
        "(below 1.2e-38), and every op that reads or produces a subnormal (the simulator's exp, the first Linear's "
        "forward and weight-gradient GEMMs over the 768 envelope inputs, the elementwise ops) takes a floating-point "
        "microcode assist, tens to hundreds of times the cost of a normal operation; the single training thread, which "
        "synthesises its own batch every step, falls behind, with nothing else to wait on (pytorch/pytorch#19651, "
        "pytorch/pytorch#23862, chainer/chainer#2554) "
        "(measured by its author: 59.20 against the twin's 108.22 steps/s, medians of 3 runs each)",
        "none: the same helper call sets torch.set_flush_denormal(True) (FTZ+DAZ on); the program does the same work",
        r"(?i)denormal|subnormal|flush[-_ ]?(to[-_ ]?)?zero|\bFTZ\b|\bDAZ\b|set_flush_denormal|MXCSR|"
        r"gradual underflow|underflow(s|ing)? (to|into|in)|(floating[- ]point|microcode) assists?|"
        r"numerics\.configure|fp[-_]mode",
        r"step \d+ loss", batch="settings batch 11",
        missed={m: "`where-time-goes` (info): MainThread in main and RT60Net.forward, in native code MKL's sgemm "
                   "kernels (39-60%), on a CPU 98-100% of the window; flush-to-zero off not read (no probe reads the "
                   "call, nothing outside sees the floating-point assists)" for m in ("outside", "probes", "attach")}),
    *_settings_pair(
        "settings11_fraud", "settings11_fraud", ("train.py",), ("train.py", "--trace-sample", "0.001"),
        "OpenTelemetry tracing sampled at 100% with a synchronous span exporter",
        "telemetry.setup(1.0, ...) installs an OpenTelemetry TracerProvider at start-up with sampler "
        "ParentBased(TraceIdRatioBased(1.0)) and a SimpleSpanProcessor, so every per-transaction span "
        "('features.txn', one per scored card transaction, plus one per chunk) is recorded, and when it ends it is "
        "serialised to JSON (ReadableSpan.to_json) and written to the span file by the featurizer thread that ended it; "
        "recording and exporting the spans is pure-Python work under the GIL that costs about as much as the feature "
        "engineering itself, so the two featurizer threads (single-thread executors, one per card shard) fall behind "
        "and the training loop waits on their futures (open-telemetry/opentelemetry-python#3452, "
        "GoogleCloudPlatform/opentelemetry-operations-python#75, ITISFoundation/osparc-simcore#6823) "
        "(measured by its author: 8.02 against the twin's 15.73 steps/s, medians of 3 runs each)",
        "none: the same helper call sets the sampler ratio to 0.001 (TraceIdRatioBased(0.001)); the program does the "
        "same work and opens the same spans, of which one trace in a thousand is recorded",
        r"(?i)opentelemetry|open[- ]telemetry|\botel\b|OTEL_|\btracer(provider)?\b|distributed tracing|"
        r"tracing (sdk|spans?|provider|instrumentation|overhead|exporter)|trace (sampl|export)|"
        r"(trace|tracing|span|otel|ratio|parent)\w*[- ]sampler|sampler (ratio|rate|=|set|at|of)|"
        r"sampl(ing|e) (rate|ratio|fraction)|sample[_ ]ratio|TraceIdRatio|ALWAYS_ON|span ?processor|"
        r"span ?export|JsonLinesExporter|to_json|spans? (are |is |being )?(recorded|exported|seriali[sz]ed|sampled)|"
        r"(recording|exporting|serializing|serialising) (every |each |all )?(the )?spans?|\btelemetry\b|trace[-_]sample",
        r"step \d+ loss", batch="settings batch 11",
        # under the probes and attached missed when scored (`wait-chain`: MainThread waits on a Condition 56-64% at
        # collect, no cause linked); named since (FIXED_AFTER_SCORING): the wait on a thread pool's futures is followed
        # to the pool's workers, whose time goes to JsonLinesExporter.export (telemetry.py). twin: `gil-contention`
        # warned in every mode (a pool worker, read as a side thread, holding the GIL 38-45% while MainThread waits
        # 27-36%); information since (FIXED_AFTER_SCORING): a pool's workers run what the program submitted.
        ),
    *_settings_pair(
        "settings11_ranking", "settings11_ranking", ("train.py",), ("train.py", "--ledger-commit", "deferred"),
        "SQLite connection in autocommit mode (isolation_level=None): one transaction per inserted row",
        "ledger.open_ledger(path, 'autocommit') opens the per-example loss ledger at start-up with "
        "sqlite3.connect(..., isolation_level=None), so the writer's executemany of 512 rows per step runs as 512 "
        "separate implicit transactions, each one taking the database locks, creating, writing and deleting the "
        "rollback journal (ledger.sqlite-journal) and rewriting the touched table and index pages (synchronous=OFF, so "
        "no fsync is involved), while the writer's conn.commit() after each step is a no-op; the ledger-writer thread "
        "falls behind (mostly inside sqlite3_step and the kernel's file operations, with the GIL released) and the "
        "training loop blocks on the bounded queue's put (rogerbinns/apsw#195, apache/arrow-adbc#466, "
        "tekartik/sqflite#1189) "
        "(measured by its author: 47.29 against the twin's 110.42 steps/s, medians of 3 runs each)",
        "none: the same helper call sets isolation_level=\"DEFERRED\", so each step's rows go into one transaction "
        "that the writer's conn.commit() ends; the program does the same work",
        r"(?i)auto-?commit|isolation[_ ]level|implicit transactions?|"
        r"(transaction|commit)s? (per|for each|for every) (row|insert|statement|record)|"
        r"per-(row|insert|statement|record) (transaction|commit)|"
        r"(each|every) (row|insert|statement|record)\W+(\w+\W+){0,4}(its own|a separate|an implicit|one) "
        r"(transaction|commit)|(commits?|committing) (each|every) (row|insert|statement|record)|"
        r"rollback journal|-journal\b|journal file|sqlite3?\.connect|open_ledger|ledger[-_]commit|"
        r"(batch|group|wrap)\w* (the )?(inserts|rows|writes|statements) (in|into) (a|one|an explicit) transaction",
        r"step \d+ loss", batch="settings batch 11",
        # Named since from outside and under `run` (FIXED_AFTER_SCORING, recorded again 2026-12-06 05:04): each /proc
        # reading lists the files the process holds open, and `kernel-time` says "the process opens and closes
        # ledger.sqlite-journal over and over". Attached, that window's readings caught the journal in two readings in
        # a row only (one comeback, not said): still the miss on record.
        missed={m: "`pipeline-bottleneck-drafter` because `kernel-time`: ledger-writer spends 0.65-0.73 of its CPUs "
                   "in system calls at executemany (ledger.py:35), 200-260k read and write calls a second; the "
                   "transaction per row (autocommit) not said" for m in ("attach",)}),
    *_settings_pair(
        "settings11_seismic", "settings11_seismic", ("train.py",), ("train.py", "--pipe-kib", "1024"),
        "one-page pipe buffer (F_SETPIPE_SZ 4 KiB) between the decoder process and the trainer",
        "launcher.spawn_decoder(4, ...) starts the waveform decoder child at start-up with subprocess.Popen(..., "
        "pipesize=4096), i.e. fcntl F_SETPIPE_SZ shrinks its stdout pipe to one page; the decoder can then get at most "
        "4 KiB ahead of the trainer, so instead of decoding the next batch while the trainer computes it blocks in "
        "write() and decoding is serialised with training, and each 768 KiB batch crosses the pipe in ~190 one-page "
        "write/read round trips, each waking the other process; the trainer (main thread) waits in readinto on the "
        "pipe, the decoder process in write (python/cpython#85752, pycompression/xopen#36, minrk/wurlitzer#51) "
        "(measured by its author: 35.14 against the twin's 66.85 steps/s, medians of 3 runs each)",
        "none: the same helper call sets pipesize to 1 MiB (1048576 bytes), so the decoder runs a batch ahead; the "
        "program does the same work",
        r"(?i)pipe ?(buffer|capacity|size)|pipe's (buffer|capacity|size)|capacity of the pipe|size of the pipe|"
        r"pipesize|F_SETPIPE_SZ|F_GETPIPE_SZ|pipe-max-size|"
        r"(small|tiny|one[- ]page|single[- ]page|4 ?KiB|4 ?KB|4096[- ]byte)\W+(\w+\W+){0,2}(pipe|kernel buffer)|"
        r"pipe (is |was )?(too )?(small|shallow)|spawn_decoder|pipe[-_]kib",
        r"step \d+ loss", batch="settings batch 11",
        # from outside missed when scored (`process-wait`: MainThread blocked on a pipe from its child decoder.py,
        # the pipe's capacity not read); named since, recorded again (FIXED_AFTER_SCORING): the pipe's capacity is
        # read (F_GETPIPE_SZ) and said when set away from Linux's 64 KiB. Under probes and attached, named since too
        # (FIXED_AFTER_SCORING): a wait's line is the one most /proc readings of it land on (the stacks' clock ran
        # a tenth of a second behind the sweeps'), and `where-time-goes` carries its root's wait on another process.
        # Scored: under probes `process-wait` (warning), MainThread blocked 29-33% at read_batch (train.py:55) on a
        # pipe from its child decoder.py, the capacity not read; attached `where-time-goes` (info), MainThread in
        # read_batch 36% and main, off a CPU 35% (blocked in read), the capacity not read
    ),
    # --- Settings batch 12, held out: four more programs of process-wide settings and library configuration kinds,
    # written by a helper from public reports without seeing the tool (kinds chosen by the helper; those of batches
    # 1-11 and the rest of the casebook excluded).
    *_settings_pair(
        "settings12_vetnotes", "settings12_vetnotes", ("train.py",), ("train.py", "--template-profile", "frozen"),
        "Jinja2 template cache disabled (Environment(cache_size=0))",
        "the template helper (triage.templating.build_environment, profile 'authoring', at start-up) builds the "
        "Jinja2 Environment with cache_size=0, which makes jinja2.environment.create_cache return None: the "
        "environment keeps no compiled templates, so every env.get_template() goes to the FileSystemLoader again, "
        "re-reads the .j2 file and recompiles it (lex, parse, generate Python source, compile() and exec it into a new "
        "Template), instead of returning the cached Template after an mtime check; each batch job of the note pool "
        "(two ThreadPoolExecutor threads, one job per batch of 128 visits, under the GIL) takes the template of each "
        "of the five visit kinds, so five template compilations a batch on top of the rendering and hashing; the pool "
        "falls behind and the training loop waits on its futures (CTFd/CTFd#1308, CTFd/CTFd#662, pallets/jinja#744, "
        "bottlepy/bottle#405) (measured by its author: 8.52 against the twin's 14.31 steps/s, medians of 3 runs each)",
        "none: the same build_environment call passes cache_size=400 (profile 'frozen', Jinja's default; "
        "auto_reload on in both), so each kind's template is compiled once and then served from the cache; the "
        "start-up lint loads every template in both; the pool renders and hashes the same notes",
        r"(?i)cache[_ ]size|template[ _-]?cach\w*|(jinja\w*|templates?)\W+(\w+\W+){0,6}(cache\w*|uncached|recompil\w*|"
        r"re-?compil\w*|compil\w*|re-?pars\w*|re-?load\w*)|(recompil\w*|re-?compil\w*|compil\w*|re-?pars\w*)\W+"
        r"(\w+\W+){0,4}(templates?|jinja\w*|\.j2)|get_template|_load_template|create_cache|Environment\.compile|"
        r"template[ _-]?profile|authoring",
        # Missed in every mode when scored (the holder named at the pool's `_worker (thread.py:81)`, where its idle
        # samples sat); since, a pool worker between jobs is idle and the holder's library is said out of its working
        # samples with the call that enters it: "... in make_job.<locals>.job (train.py:61), most of it inside jinja2
        # (65% of its working samples), entered through Environment.get_template (77% of them)" (FIXED_AFTER_SCORING:
        # the API whose cost names the cache, not the cache_size setting itself).
        r"step \d+ loss", batch="settings batch 12"),
    *_settings_pair(
        "settings12_tracks", "settings12_tracks", ("train.py",),
        ("train.py", "--export-config", "configs/export_scratch.toml"),
        "gzip compression level 9 in the export process",
        "the export config (configs/export_archive.toml, read at start-up) sets [export.gzip] compresslevel = 9, "
        "the setting Python's gzip module also defaults to, and the exporter child process (multiprocessing.Process) "
        "opens every neighbour-list shard with gzip.GzipFile(..., compresslevel=9): zlib's level 9 runs deflate "
        "with lazy matching and hash chains searched up to 4096 deep (level 1: deflate_fast, chains of 4), and the "
        "shard text (one JSON line per track with 128 neighbour ids 'TRK000.....' and 4-decimal scores, 64 tracks "
        "a step) is so repetitive that the chains are long: about ten times the compression time for ~3% smaller "
        "shards; the exporter falls behind and the trainer (main thread) blocks in the bounded "
        "multiprocessing.Queue's put (dask/fastparquet#344, ostreedev/ostree#671, dpkp/kafka-python#454, "
        "bazelbuild/rules_pkg#720) (measured by its author: 16.16 against the twin's 24.60 steps/s, medians of 3 "
        "runs each)",
        "none: configs/export_scratch.toml sets compresslevel = 1 (the same GzipFile call, the fastest deflate "
        "level); the exporter writes the same shards, ~30% larger",
        r"(?i)compress(ion)?[ _-]?level|compresslevel|gzip\w*\W+(\w+\W+){0,6}(levels?|-9|9|slow\w*|deflate|"
        r"compress\w*)|\blevel\W{0,3}9\b|deflat\w*|zlib\W+(\w+\W+){0,4}(levels?|compress\w*|deflate)|"
        r"(best|max\w*|highest)[ _-](gzip )?compression|GzipFile|export_archive|export[ _-]config",
        r"step \d+ loss", batch="settings batch 12",
        # Missed in every mode when scored (from outside and under `run` `where-time-goes`, MainThread in main and
        # Block.forward / Bank.neighbours, 23-24% of its native samples in _multiprocessing_SemLock_acquire; attached
        # `wait-chain`, MainThread waits on a child process 50% <- child process spends ShardWriter.write
        # (exporter.py:41) 100%; gzip level 9 not named). Named since (FIXED_AFTER_SCORING): a multiprocessing
        # queue's put is a wait on the child, not the GIL, `where-time-goes` carries the root's waits on a child with
        # where the children spend their time, and that says the library function below their hot line ("inside
        # GzipFile.write (gzip.py, 40-60% of its samples)"); the level itself is not read
    ),
    *_settings_pair(
        "settings12_hvac", "settings12_hvac", ("train.py",), ("train.py", "--wire", "compact"),
        "json indent set: the pure-Python JSON encoder in the feed process",
        "train.py starts the telemetry feed child (subprocess.Popen of feed.py) with BMS_WIRE_LAYOUT=pretty in its "
        "environment, and the wire module builds the feed's json.JSONEncoder from it with indent=2 (sort_keys): in "
        "CPython 3.11 the encoder uses the C accelerator (c_make_encoder) only when indent is None, so with an indent "
        "every snapshot (512 zones, ~17,000 values) is encoded by the pure-Python _make_iterencode generators, about "
        "three times the C encoder's time, and the payload doubles with whitespace; the feed process falls behind, "
        "the reader thread waits in readinto on the stdout pipe and the training loop waits on the reader's queue "
        "(simplejson/simplejson#72, python/cpython#95382, Bitcoin-ABC/ElectrumABC#63) (measured by its author: 28.79 "
        "against the twin's 55.71 steps/s, medians of 3 runs each)",
        "none: the same launcher sets BMS_WIRE_LAYOUT=compact, and the same JSONEncoder is built with indent=None "
        "and (',', ':') separators (keys still sorted), so the C encoder runs; the feed sends the same snapshots",
        r"(?i)indent\w*|pretty[ -]?print\w*|pretty\W+(\w+\W+){0,3}(json|layout|wire|format)|pure[ -]python\W+"
        r"(\w+\W+){0,4}(json|encod\w*)|json\W+(\w+\W+){0,6}(encod\w*|dumps|serial\w*|speedups?|accelerat\w*)|"
        r"(encod\w*|serial\w*)\W+(\w+\W+){0,4}json|c_make_encoder|_make_iterencode|iterencode|JSONEncoder|"
        r"c (encoder|speedups?|accelerator)|BMS_WIRE_LAYOUT|wire[ _-]?layout",
        r"step \d+ loss", batch="settings batch 12",
        # From outside missed when scored (`process-wait`: feed-reader blocked 46% on a pipe from the feed child,
        # running in frame (wire.py:28); the JSON indent not named). Named since (FIXED_AFTER_SCORING): a peer that
        # is a sampled child says the library file its samples spend most in ("most of its time inside
        # json/encoder.py (80% of its samples)": the pure-Python encoder's generators)
    ),
    *_settings_pair(
        "settings12_vessels", "settings12_vessels", ("train.py",), ("train.py", "--run-profile", "batch"),
        "TQDM_MININTERVAL=0: progress bars repainted on every iteration",
        "the run-profile helper (runtime_profile.apply('console'), at start-up, before tqdm is imported) sets "
        "TQDM_MININTERVAL=0 in os.environ; tqdm reads its TQDM_* variables when it is imported and makes them the "
        "defaults of tqdm.__init__ (envwrap), so every bar the program opens without an explicit mininterval has "
        "mininterval 0, its dynamic miniters collapses to 1, and every iteration repaints the bar: format_meter "
        "(string formatting of the rate, ETA and bar), tqdm's write lock, and several write/flush calls into the "
        "status-board sink, each an os.pwrite; the two AIS decoder threads wrap their per-vessel loops in such bars "
        "(~60 vessels a batch, all under the GIL), so a repaint per vessel costs more than cutting the vessel's "
        "segments; the decoders fall behind and the trainer (main thread) waits on their queue "
        "(bayesflow-org/bayesflow#108, ourownstory/neural_prophet#1054, tqdm/tqdm#13) (measured by its author: 55.83 "
        "against the twin's 93.49 steps/s, medians of 3 runs each)",
        "none: the same runtime_profile.apply call sets TQDM_MININTERVAL=2 (profile 'batch'), so the decoders' bars "
        "repaint at most every 2 s; the trainer's own bar passes mininterval=1.0 in both; the same segments are cut "
        "from the same shards",
        r"(?i)tqdm|mininterval|min[ _-]?interval|miniters|progress[ -]?bars?\W+(\w+\W+){0,6}(refresh\w*|repaint\w*|"
        r"redraw\w*|render\w*|every|each|updat\w*|overhead)|(refresh\w*|repaint\w*|redraw\w*)\W+(\w+\W+){0,4}"
        r"(progress|bars?)|format_meter|status[ _-]?board|run[ _-]?profile",
        # the GIL holder's library has been said out of its working samples since stop 44: tqdm, entered through
        # tqdm.__iter__ (FIXED_AFTER_SCORING)
        r"step \d+ loss", batch="settings batch 12"),
    # --- Settings batch 13, held out: four more programs of process-wide settings and library configuration kinds,
    # written by a helper from public reports without seeing the tool (kinds chosen by the helper; those of batches
    # 1-12 and the rest of the casebook excluded).
    *_settings_pair(
        "settings13_rainfall", "settings13_rainfall", ("train.py",),
        ("train.py", "--wire-config", "configs/wire_binary.toml"),
        "pickle protocol 0 on the decoder -> trainer frame wire",
        "the wire config (configs/wire_archive.toml, read at start-up by wire.load_config in the trainer and in the "
        "decoder) sets [wire] pickle_protocol = 0, the 'ASCII-safe' layout an archive tap was written for, and the "
        "radar decoder child process (subprocess.Popen of decoder.py) pickle.dump()s every batch (32 x 5 x 64 x 64 "
        "float32 frames, 2.6 MB, and a small list of dicts) to its stdout pipe with it: below protocol 3 the "
        "pickler has no opcode for a bytes payload, so each array's data goes out as codecs.encode(<the bytes "
        "decoded as a latin-1 str>, 'latin1'), and protocol 0 writes that str as a raw-unicode-escape text line "
        "(every 0x00 byte escaped to six characters, 6.3 MB a batch), a per-character conversion; on the other end "
        "the trainer's wire-reader thread (pickle.Unpickler.load on the pipe) reads the line, undoes the escapes and "
        "re-encodes the str to bytes while holding the GIL: some 12-15 ms per batch on each side against well under "
        "1 ms with protocol 5; the decoder and the reader compete with the training step for the 2 CPUs and the "
        "GIL, the decoder falls behind and the main thread waits on the reader's queue "
        "(strictdoc-project/strictdoc#3106, mila-iqia/blocks#443, ioam/lancet#14, peter-wangxu/persist-queue#47, "
        "dabeaz/curio#130) (measured by its author: 20.90 against the twin's 33.70 steps/s, medians of 3 runs each)",
        "none: configs/wire_binary.toml sets pickle_protocol = 'highest' (protocol 5), so the same wire.Writer and "
        "pickle.Unpickler pass each array's data as raw bytes over the same pipe; the station catalogue is still "
        "pickled once at start-up with the configured protocol, and the decoder cuts the same windows",
        r"(?i)pickl\w*\W+(\w+\W+){0,6}(protocol|ascii|text|escap\w*|latin\w*|per[- ]char\w*)|protocol\W{0,3}(0|zero)\b|"
        r"(protocol|pickle_protocol)\W+(\w+\W+){0,3}(0|zero|ascii|text|old\w*|legacy)\b|pickle_protocol|"
        r"raw[-_ ]unicode[-_ ]escape|codecs\W+encode|latin-?1|highest_protocol|wire[ _-]archive|ascii[- ]safe|"
        r"(unpickl\w*|pickl\w*)\W+(\w+\W+){0,8}(slow\w*|expensive|cost\w*|dominat\w*|bottleneck|cpu[- ]bound)|"
        r"(slow\w*|expensive|costly)\W+(\w+\W+){0,4}(unpickl\w*|pickl\w*)",
        r"step \d+ loss", batch="settings batch 13",
        missed={"outside": "`where-time-goes` (info): MainThread in main and Nowcaster.forward, waiting for the GIL "
                           "in 43% of its native samples while wire-reader holds it 41% in Reader.recv (wire.py:38); "
                           "the pickle protocol not named",
                "probes": "`where-time-goes` (info): MainThread in main and Nowcaster.forward, on a CPU 50% of the "
                          "window; the wire reader and the pickle protocol not named",
                "attach": "`pipeline-bottleneck-drafter` because `gil-contention`: wire-reader holds the GIL 39% in "
                          "Reader.recv (wire.py:38); the pickle protocol not named"}),
    *_settings_pair(
        "settings13_plankton", "settings13_plankton", ("train.py",),
        ("train.py", "--profile", "configs/imager_field.toml"),
        "SHA3-512 ROI fingerprints in the de-duplication thread (a cryptographic digest where xxHash would do)",
        "the imager profile (configs/imager_lims.toml, read at start-up) sets [fingerprint] algorithm = 'sha3_512' "
        "(the LIMS's chain-of-custody digest), and fingerprint.make_hasher turns it into "
        "hashlib.new('sha3_512', roi).digest(); the dedup thread keys every 224 x 224 uint8 ROI (50 KB) by that "
        "digest before it drops the repeats, bins the new ones 4x4 and batches them, about 140 ROIs per batch of 96 "
        "kept (the imager's trigger repeats ~31% of them): SHA3-512 runs at ~180 MB/s on this CPU (xxh3_64 at "
        "tens of GB/s, sha256 at ~1.2 GB/s), ~40 ms of hashing per batch (hashlib releases the GIL, so the hashing "
        "takes a core of its own); the dedup thread falls behind, the flowcell thread blocks in Queue.put on its "
        "full queue and the trainer (main thread) waits in Queue.get on the batch queue (elastic/beats#15080, "
        "rstudio/shiny#2160, apache/hamilton#1630, ethereum/execution-specs#2404, wabbajack-tools/wabbajack#130, "
        "computational-cell-analytics/micro-sam#284) (measured by its author: 11.23 against the twin's 22.39 "
        "steps/s, medians of 3 runs each)",
        "none: configs/imager_field.toml sets algorithm = 'xxh3_64' (the same make_hasher, the same 512-ROI "
        "window under the same brief lock, which the trainer also takes for its log line); hashlib is still used "
        "once at start-up (a sha256 of the first ROIs names the run) and the window drops the same ~31% repeats",
        r"(?i)sha-?3|sha3_512|keccak|(cryptographic|crypto|secure)\W+(\w+\W+){0,4}(hash\w*|digest\w*|fingerprint\w*)|"
        r"(hash\w*|digest\w*|fingerprint\w*)\W+(\w+\W+){0,6}(algorithm|slow\w*|expensive|cryptographic|sha\w*|"
        r"xxh\w*)|(slow\w*|expensive|costly)\W+(\w+\W+){0,4}(hash\w*|digest\w*|fingerprint\w*)|hashlib|__hash_new|"
        r"make_hasher|xxh(ash|3)\w*|imager[ _-]lims|fingerprint[ _-]algorithm",
        r"step \d+ loss", batch="settings batch 13"),
    *_settings_pair(
        "settings13_playlists", "settings13_playlists", ("train.py",), ("train.py", "--ipc-profile", "named"),
        "torch.multiprocessing file_descriptor sharing strategy with 89 tensors per batch",
        "the IPC policy helper (ipc_policy.apply('descriptors'), at start-up, before the model is built) calls "
        "torch.multiprocessing.set_sharing_strategy('file_descriptor') (and raises RLIMIT_NOFILE to its hard "
        "limit, the usual companion recipe); the session worker child process (torch.multiprocessing.Process) puts "
        "each batch, a dict of 89 small tensors (ids, offsets and weights per sparse feature, one column per dense "
        "feature, the labels), on a torch.multiprocessing Queue: under this strategy every tensor's storage is "
        "moved into a shared-memory segment of its own and pickled as a multiprocessing DupFd of the segment's "
        "descriptor, so for each tensor the consumer (the trainer's fetch thread, unpickling in Queue.get -> "
        "rebuild_storage_fd) opens a new connection to the worker's resource_sharer listener, runs the HMAC "
        "challenge handshake (deliver_challenge/answer_challenge), receives the fd over SCM_RIGHTS and mmaps it, "
        "while the worker's resource-sharer thread serves it: ~0.4 ms per tensor (~0.15 ms with named segments), "
        "tens of ms per batch across the two processes; the fetch thread falls behind, competes with the step for "
        "the GIL and the 2 CPUs, and the training loop (main thread) waits on the local queue "
        "(pytorch/pytorch#39443, pytorch/pytorch#973, pytorch/pytorch#11201, pytorch/pytorch#65198, "
        "datamol-io/graphium#282) (measured by its author: 31.05 against the twin's 50.82 steps/s, medians of 3 "
        "runs each)",
        "none: the same ipc_policy.apply call with profile 'named' sets the file_system strategy (segments named in "
        "/dev/shm, attached by name, cleaned up by torch_shm_manager) and raises RLIMIT_NOFILE the same way; the "
        "worker sends the same 89-tensor batches through the same torch.multiprocessing Queue and fetch thread",
        r"(?i)file[ _-]?descriptors?\b|sharing[ _-]?strateg\w*|set_sharing_strategy|resource[ _-]?sharer|DupFd|"
        r"rebuild_storage_fd|deliver_challenge|answer_challenge|SCM_RIGHTS|(fd|descriptor)s?\W+(\w+\W+){0,5}"
        r"(pass\w*|send\w*|sent|transfer\w*|shar\w*|per tensor|each tensor|every tensor)|(per|each|every)[ -]tensor\W+"
        r"(\w+\W+){0,5}(shared[ -]memory|shm|segment\w*|fd|descriptor\w*|connection\w*|handshake\w*|ipc)|"
        r"shared[ -]memory\W+(\w+\W+){0,6}(per|each|every)\W+(\w+\W+){0,2}tensor\w*|ipc[ _-]?(profile|policy)|"
        r"descriptors[ _-]profile|tensor\w*\W+(\w+\W+){0,8}(shared[ -]memory|shm|ipc)\W+(\w+\W+){0,4}"
        r"(slow\w*|cost\w*|overhead|expensive)",
        r"step \d+ loss", batch="settings batch 13",
        # Outside and attached, the producer stage's time has been said through the chain of library calls under
        # the fetch line (rebuild_storage_fd ...) since 2026-12-06 (FIXED_AFTER_SCORING); with the probes the GIL
        # wait of the fetch thread leads.
        missed={"probes": "`pipeline-bottleneck-target` (info): the producer stage limits throughput, its time in "
                          "Fetcher.run at `self.inbox.get(timeout=0.5)`; the file_descriptor sharing strategy not "
                          "named"}),
    *_settings_pair(
        "settings13_reviews", "settings13_reviews", ("train.py",),
        ("train.py", "--tokenizer-settings", "configs/tokenizer_training.json"),
        "fixed-length padding to 128 tokens from the tokenizer settings instead of per-batch padding",
        "the tokenizer settings file (configs/tokenizer_serving.json, shared with the ONNX exporter, read at "
        "start-up) sets padding strategy 'fixed' with length 128 (the serving graph's static input shape), so "
        "textpipe.build_tokenizer calls the HF tokenizers Tokenizer.enable_padding(length=128): every batch of 16 "
        "reviews the tokenizer thread encodes (encode_batch) comes out as [16, 128] ids and masks, though the median "
        "review is ~27 tokens and a batch's longest ~80; the Transformer encoder (2 layers, d=64) in the main "
        "thread computes embeddings, attention (quadratic in the padded length) and the feed-forward layers over "
        "every pad position (masked out of attention and pooling, so the loss is unchanged), ~1.7x the work per "
        "step; the trainer is compute-bound on padding while the tokenizer and reader threads sit blocked in "
        "Queue.put on full queues (huggingface/transformers#4842, QData/TextAttack#737, "
        "deepspeedai/DeepSpeedExamples#849, yoyolicoris/music-spectrogram-diffusion-pytorch#35) (measured by its "
        "author: 10.25 against the twin's 17.13 steps/s, medians of 3 runs each)",
        "none: configs/tokenizer_training.json sets padding strategy 'batch_longest' with pad_to_multiple_of 8 "
        "(the same enable_padding call with length=None) and the same truncation at 128, so each batch is padded "
        "to its own longest review (~80 tokens); the same reader and tokenizer threads, model and attention masks",
        r"(?i)padd\w*|\bpad(s|ded)?\b|max[_ -]?length|fixed[ -]?(length|shape|size)|static[ -]?(shape|length|input)|"
        r"enable_padding|pad_to_multiple_of|batch_longest|tokenizer[ _-]serving|(sequence|input|token)s?[ _-]?"
        r"lengths?\W+(\w+\W+){0,4}(128|fixed|constant|static)|\b128\W+tokens",
        r"step \d+ loss", batch="settings batch 13",
        missed={m: "`pipeline-bottleneck-drafter` (info): the consumer stage limits throughput, its time in "
                   "ReviewEncoder.forward, scaled_dot_product_attention; the harness's text matched `padding_mask` in "
                   "the quoted source line (`src_key_padding_mask=~mask`), the fixed padding to 128 not named: a miss "
                   "by reading" for m in ("outside", "probes", "attach")}),
    # --- Settings batch 14, held out: four more programs of process-wide settings and library configuration kinds,
    # written by a helper from public reports without seeing the tool (kinds chosen by the helper; those of batches
    # 1-13 and the rest of the casebook excluded).
    *_settings_pair(
        "settings14_apiary", "settings14_apiary", ("train.py",),
        ("train.py", "--config", "configs/station_batch.toml"),
        "PYTHONUNBUFFERED=1 in the hive logger child's environment: a write(2) per printed field on the export pipe",
        "the station config (configs/station_gateway.toml, read at start-up) sets [logger] live_output = true, and "
        "launcher.start_logger starts the hive logger child process (subprocess.Popen of hivelog.py, stdout on a "
        "pipe to the trainer) with PYTHONUNBUFFERED=1 in its environment (so that the gateways' log collector sees "
        "each reading as it is printed): the child's sys.stdout is then a write-through TextIOWrapper over a raw, "
        "unbuffered FileIO, and its print(hive, tick, *fields, label, sep=',') for every hive and reading makes one "
        "write(2) per argument, per separator and for the newline, 34 system calls of 1-8 bytes per CSV line (1,280 "
        "lines a batch: ~43,500 writes) where a block-buffered stdout writes 8 KiB at a time; the logger spends its "
        "CPU in the write system call path (pipe_write, waking the reader), and the trainer's export-reader thread, "
        "blocked in readline on the pipe, gets ~16 bytes per read(2) (5-6 reads a line, where one 8 KiB read serves "
        "~50 lines when buffered) and wakes again and again, taking the GIL each time; the logger cannot keep up, "
        "the reader waits on the pipe and the training loop (main thread) waits in Queue.get on the batch queue "
        "while the 2 CPUs go to the logger's system calls and the reader's wake-ups "
        "(aws/amazon-sagemaker-examples#319, amoffat/sh#116, python/cpython#74589) (measured by its author: 14.24 "
        "against the twin's 23.19 steps/s, medians of 3 runs each)",
        "none: configs/station_batch.toml sets live_output = false, so launcher.logger_env drops PYTHONUNBUFFERED "
        "from the child's environment (whatever the parent's is) and the same print calls fill the block buffer of "
        "the pipe (8 KiB writes); the same logger, export reader and windows, the header line still flushed "
        "explicitly and the logger's status lines on stderr still printed with flush=True",
        r"(?i)pythonunbuffered|unbuffer\w*|live[_ ]output|write[_ -]?through|station[_ ]gateway|\bpython3?\s+-u\b|"
        r"(\s|^)-u\W+(\w+\W+){0,2}(flag|option|mode|switch)|(not|without|no)\s+(block[- ])?buffer(ed|ing)\b|"
        r"buffer(ed|ing)\W+(\w+\W+){0,3}(disabled|turned off|switched off|bypass\w*)|(small|tiny|short|many|"
        r"frequent|byte[- ]sized|one[- ]field|\d+[- ]byte|per[- ](field|value|column|separator|argument|arg)|(each|"
        r"every) (field|value|column|separator|argument))\W+(\w+\W+){0,3}(writes?\b|write\(2\)|write ?syscalls?|"
        r"reads?\b|read\(2\)|syscalls?|system calls?|fragments?)|(write|"
        r"read)s?\W{0,3}(\(2\)\W+)?(sys(tem)?[ _-]?calls?)\W+(\w+\W+){0,4}(per|each|every|"
        r"for every)\W+(\w+\W+){0,2}(field|value|column|separator|argument|print|row|line|reading)|"
        r"(sys(tem)?[ _-]?calls?|syscalls?)\W+(\w+\W+){0,3}(per|each|every)\W+(\w+\W+){0,2}(field|value|column|"
        r"separator|argument|print|line|row|reading)|pipe_write|(ksys|sys|__x64_sys)_write",
        r"step \d+ loss", batch="settings batch 14"),
    *_settings_pair(
        "settings14_wildfire", "settings14_wildfire", ("train.py",),
        ("train.py", "--config", "configs/ingest_libyaml.toml"),
        "PyYAML's pure-Python SafeLoader for every station report (yaml loader = 'safe') where CSafeLoader would do",
        "the ingest config (configs/ingest.toml, read at start-up) sets [yaml] loader = 'safe', and "
        "yamlio.loader_for turns it into yaml.SafeLoader: the spool-reader thread loads every station-day report (a "
        "~3.5 KB YAML document: the station's metadata and 24 hourly observations of 8 keys, ~410 scalars counting "
        "the keys) with yaml.load(text, Loader=yaml.SafeLoader), PyYAML's reference loader written in Python (a "
        "per-character reader and scanner, then parser, composer and constructor, yaml/reader.py, scanner.py, "
        "parser.py, composer.py, constructor.py), ~21 ms a report on this CPU against ~3-4 ms with the "
        "libyaml-based CSafeLoader; with 3 fresh reports per batch the reader needs some 65 ms of GIL-holding "
        "Python per batch, more than a training step (~60 ms), so the training loop (main thread) waits in "
        "Queue.get for the reservoir's next batch and competes with the reader for the GIL while it runs "
        "(pre-commit/pre-commit-hooks#27, RedHatInsights/insights-core#2271, kxr/o-must-gather#33, papis/papis#348, "
        "OpenJobDescription/openjd-model-for-python#219, y-scope/clp#1402) (measured by its author: 8.49 against "
        "the twin's 17.07 steps/s, medians of 3 runs each)",
        "none: configs/ingest_libyaml.toml sets loader = 'csafe' (yaml.CSafeLoader: the same safe tags and "
        "constructor over libyaml's C parser), the same reports, reservoir and yaml.load call; the station "
        "catalogue (stations.yaml) is still read once at start-up with yaml.safe_load, the pure-Python loader, and "
        "the spool is written with libyaml's dumper in both",
        r"(?i)\byaml\b|pyyaml|safe_?loader|csafe\w*|safe_load|libyaml|\bcloader|(scanner|composer|constructor|"
        r"resolver)\.py|scan_(plain|to_next_token|block_scalar\w*|flow_scalar\w*)|fetch_more_tokens|check_token|"
        r"compose_node|construct_(mapping|object|yaml\w*|scalar|document)|(pure[- ]python|python[- ]level|"
        r"interpreted)\W+(\w+\W+){0,3}(parser|loader|scanner|tokeni[sz]er|deseriali[sz]\w*)|\bloader\W{1,4}(=|is|"
        r"set to)?\W{0,3}'?safe\b|ingest\.toml",
        r"step \d+ loss", batch="settings batch 14"),
    *_settings_pair(
        "settings14_recipes", "settings14_recipes", ("train.py",),
        ("train.py", "--config", "configs/sampler_generator.toml"),
        "NumPy's legacy global RandomState (numpy_api = 'global'): np.random.choice(n, k, replace=False) permutes "
        "the whole catalogue for every batch's negatives",
        "the sampler config (configs/sampler_paper.toml, read at start-up) sets [seed] numpy_api = 'global' (to "
        "reproduce the published runs' negative streams), so seeding.seed_everything seeds NumPy's legacy global "
        "RandomState and hands the sampler thread the np.random module itself; for every batch the sampler draws "
        "its 1,024 shared negatives with np.random.choice(800000, 1024, replace=False), and the legacy "
        "RandomState.choice samples without replacement as self.permutation(pop_size)[:size]: an arange of all "
        "800,000 recipe ids (6.4 MB) Fisher-Yates-shuffled in NumPy's compiled mtrand code (one legacy bounded draw "
        "per element, with the GIL held: the legacy shuffle does not release it) on every call, ~30 ms a batch "
        "against ~0.06 ms for Generator.choice (which draws the k ids directly); the sampler thread is bound on the "
        "shuffle, the training loop (main thread) waits in Queue.get for its next batch and, while it computes, "
        "waits for the GIL the shuffle holds (numpy/numpy#16268, numpy/numpy#2764, numpy/numpy#5158, "
        "world-federation-of-advertisers/cardinality_estimation_evaluation_framework#14) (measured by its author: "
        "18.72 against the twin's 38.88 steps/s, medians of 3 runs each)",
        "none: configs/sampler_generator.toml sets numpy_api = 'generator', so the sampler draws from a "
        "numpy.random.Generator (PCG64) seeded from the same seed and the same rng.choice(800000, 1024, "
        "replace=False) call draws the 1,024 ids directly (no permutation of the catalogue); seed_everything still "
        "seeds the legacy global RandomState, which permutes the 50,000 user ids once at start-up to pick the "
        "held-out users, and the same catalogue, features and towers",
        r"(?i)legacy\W+(\w+\W+){0,3}(random\w*|rng|numpy|np|api|choice|sampl\w*|streams?|generator)|randomstate|"
        r"mtrand|np\.random\.(choice|seed|permutation|shuffle)|numpy\.random\.(choice|seed|permutation|shuffle)|"
        r"numpy[_ ]api|(numpy|np)\W+(\w+\W+){0,2}(global|legacy)\W+(\w+\W+){0,2}(rng|random\w*|state|api|generator)|"
        r"global\W+(\w+\W+){0,2}(numpy|np)\W+(\w+\W+){0,2}(rng|random\w*|state|generator|api)|without replacement|"
        r"replace\s*=\s*false|permut\w*|shuffl\w*|fisher[- ]yates|seed_everything|sampler_paper|(whole|entire|full|"
        r"all)\W+(\w+\W+){0,3}(catalog\w*|population|recipes?|ids?)\W+(\w+\W+){0,5}(per|each|"
        r"every)\W+(\w+\W+){0,2}(call|batch|draw|step)|_shuffle_raw|random_interval|bounded_uint\w*|legacy_\w+",
        r"step \d+ loss", batch="settings batch 14"),
    *_settings_pair(
        "settings14_parcels", "settings14_parcels", ("train.py",),
        ("train.py", "--config", "configs/channels_pipe.toml"),
        "multiprocessing Manager().Queue() for the scan events (backend = 'managed'): a proxy round trip to the "
        "manager's server process for every put and get",
        "the channel config (configs/channels_managed.toml, read at start-up) sets [channels] backend = 'managed', "
        "so channels.make_queue returns manager.Queue(512): the scan queue lives in the multiprocessing manager's "
        "server process (a SyncManager the run starts anyway for its shared counters) and the two scanner processes "
        "(torch.multiprocessing.Process) and the trainer's collator thread hold proxies to it; every put of one "
        "scan event (a small dict with a 12-float array) and every get is a synchronous request/reply on the "
        "proxy's Unix socket: the method name and arguments pickled, a server thread (Server.serve_client) "
        "unpickles them and runs queue.Queue.put/get, the result pickled back: ~0.3-0.6 ms a put/get pair against "
        "~0.05 ms through a multiprocessing.Queue (a pipe and a feeder thread); with 96 events per batch the "
        "collator thread spends its time in BaseProxy._callmethod (send/recv on the socket), the manager's server "
        "process and the scanners take the CPUs, and the training loop (main thread) waits in Queue.get for the "
        "next batch (SFDO-Tooling/CumulusCI#3080, datarobot/batch-scoring#42) (measured by its author: 39.35 "
        "against the twin's 93.91 steps/s, medians of 3 runs each)",
        "none: configs/channels_pipe.toml sets backend = 'pipe' (multiprocessing.Queue(512): a pipe and a feeder "
        "thread per scanner); the manager is still started and each scanner still updates its managed dict of scan "
        "counters every 2,000 events (a proxy call now and then), with the same scanners, collator and model",
        r"(?i)manager\W{0,2}\.?\W{0,2}queue|managed\W+(\w+\W+){0,2}(queue|channel|backend)|"
        r"backend\W+(\w+\W+){0,2}managed|channels_managed|(sync|base)manager|multiprocessing\.managers|\bprox(y|"
        r"ies)|_callmethod|serve_client|handle_request|round[- ]?trips?|\brpc\b|request[/ -](reply|response)|"
        r"(manager|server)\W+(\w+\W+){0,3}(process|socket|connection)\W+(\w+\W+){0,8}(per|each|"
        r"every)\W+(\w+\W+){0,2}(put|get|event|item|call|scan)|manager\W+(\w+\W+){0,3}(server|"
        r"process)\W+(\w+\W+){0,6}(bottleneck|slow\w*|cpu|cost\w*|overhead|busy|limit\w*|saturat\w*)",
        r"step \d+ loss", batch="settings batch 14"),
    # --- Settings batch 15, held out: four more programs of process-wide settings, environment variables and
    # library configuration kinds, written by a helper from public reports without seeing the tool (kinds chosen
    # by the helper; those of batches 1-14 and the rest of the casebook excluded).
    *_settings_pair(
        "settings15_headlines", "settings15_headlines", ("train.py",),
        ("train.py", "--config", "configs/dedup_bytes.toml"),
        "LC_ALL=C.UTF-8 in the environment of the shard de-duplication child (sort -f -u, [dedup] collation): GNU "
        "sort's locale path for every comparison instead of bytes",
        "the dedup config (configs/dedup_platform.toml, read at start-up) sets [dedup] collation = 'C.UTF-8', and "
        "dedup.sort_env puts LC_ALL=C.UTF-8 into the environment of the system sort that "
        "dedup.ShardDeduper.unique_lines runs as a child process (subprocess.run of sort -f -u -S 32M "
        "--parallel=1) on every crawl shard (12,000 tab-separated lines of source, date, headline and lead "
        "sentence, ~2 MB, ~9,900 unique after case folding): under a UTF-8 LC_ALL GNU sort treats LC_COLLATE as a "
        "hard locale, and with -f (fold case) every comparison takes the locale path (sort.c's keycompare copies "
        "both keys through the fold table into buffers and compares the copies with xmemcoll0, i.e. strcoll) "
        "where under LC_ALL=C it compares the bytes in place through the table: ~6 times the CPU per shard (~95 "
        "against ~15 ms for such a shard on this box); the crawl thread waits in subprocess.run (reading the "
        "child's stdout pipe, then wait4) for every shard while the sort child takes a CPU, and the training loop "
        "(main thread) waits in Queue.get for the next shard's batches (ARTFL-Project/PhiloLogic4#480, "
        "ewwink/wikipedia-wordlists-extractor#2, jlevy/the-art-of-command-line#22) (measured by its author: 31.29 "
        "against the twin's 60.83 steps/s, medians of 3 runs each)",
        "none: configs/dedup_bytes.toml sets collation = 'C' (LC_ALL=C for the dedup sort: byte comparison); the "
        "same shards, the same sort -f -u child per shard, catalogue and model; the rest of the child's environment "
        "is still the trainer's (LANG=C.UTF-8 where the host sets it, overridden by LC_ALL), and a one-off sort of "
        "the eight topic names at start-up still runs under LC_ALL=C.UTF-8",
        r"(?i)\blc_(all|collate|ctype)\b|\blang\s*=|\blocale\w*|collat\w*|\bc\.utf-?8\b|utf-?8\W+(\w+\W+){0,3}"
        r"(locale|collation|sort\w*|comparison)|strcoll|xmemcoll\w*|keycompare|fold_toupper|sort_env|"
        r"dedup_platform|multi-?byte|\bsort\b\W+(\w+\W+){0,3}(child|subprocess|process|command|binary|utility)|"
        r"(child|subprocess|process|command|coreutils|gnu)\W+(\w+\W+){0,2}\bsort\b|\bsort\s+-f",
        r"step \d+ loss", batch="settings batch 15"),
    *_settings_pair(
        "settings15_ferry", "settings15_ferry", ("train.py",),
        ("train.py", "--config", "configs/store_pooled.toml"),
        "httpx connection pool without keep-alive (max_keepalive_connections=0, [featurestore] "
        "keepalive_connections = 0): a new loopback TCP connection, and a handler process forked by the feature "
        "service, for every lookup",
        "the client config (configs/store_rebalance.toml, read at start-up) sets [featurestore] "
        "keepalive_connections = 0 (so that requests spread over the service's replicas after a rollout), which "
        "storeclient.make_client passes on as httpx.Limits(max_keepalive_connections=0): httpcore's connection "
        "pool may keep no idle connection, so the connection is closed after every response and each route "
        "lookup of the fetcher thread (one per sailing, 32 per batch) opens a new TCP connection to the "
        "feature-service child (socket, connect(2), the service's accept, then a handler process forked per "
        "connection by its socketserver.ForkingMixIn HTTP server (fork, the handler, os._exit, the parent's "
        "waitpid in collect_children), the request, close, a TIME_WAIT socket) instead of reusing one persistent "
        "HTTP/1.1 connection whose handler process lives for the whole run: ~8 against ~3.5 ms per lookup in "
        "the running program on this box (the service's per-request work, ~1.5 ms of tide-window arithmetic, is "
        "the same in both); the "
        "fetcher thread spends its time in httpcore's connect path (socket.create_connection) and waiting for "
        "replies while the service spends its CPU forking, and the training loop (main thread) waits in "
        "Queue.get for the next batch (leo-aa88/ultra-minimal-fast-rest-api#25, pi-hole/FTL#2357, "
        "Portkey-AI/portkey-python-sdk#318) (measured by its author: 3.90 against the twin's 8.98 steps/s, "
        "medians of 3 runs each)",
        "none: configs/store_pooled.toml sets keepalive_connections = 8, so the fetcher's lookups reuse one "
        "persistent connection served by one forked handler process (the service speaks HTTP/1.1 with "
        "TCP_NODELAY in both); the same fetcher, service, route lookups, keepalive_expiry and max_connections; "
        "the 60 vessel lookups at the fetcher's start and the start-up readiness probe (storeclient.health, a "
        "short-lived client of its own with max_keepalive_connections=0) still open a connection each, once",
        r"(?i)keep[- ]?alive|max_keepalive\w*|keepalive_connections|persistent\W+(\w+\W+){0,2}connections?|"
        r"connections?\W+(\w+\W+){0,2}(pool\w*|reuse\w*|re-use\w*|churn|set-?up|establish\w*|open(ed|ing)?|"
        r"creat\w*|closed?)\W+(\w+\W+){0,3}(per|each|every|after)|(per|each|every)\W+(\w+\W+){0,2}(request|"
        r"lookup|call|get)\W+(\w+\W+){0,4}(new|fresh|separate|own)\W+(\w+\W+){0,2}(tcp\W+)?(connection|socket)|"
        r"(new|fresh)\W+(tcp\W+)?(connection|socket)s?\W+(\w+\W+){0,3}(per|each|every|for every)|reconnect\w*|"
        r"tcp\W+(\w+\W+){0,1}(handshake|connect\w*|set-?up)|connect\(2\)|create_connection|httpx\.limits|"
        r"store_rebalance|time[_ ]wait|forkingmixin|collect_children|fork\w*\W+(\w+\W+){0,3}(per|each|every|"
        r"for every)\W+(\w+\W+){0,1}(connection|request|lookup)|(new|fresh)\W+(handler\W+)?(process|thread)\w*\W+"
        r"(\w+\W+){0,2}(per|each|every|for every)|connection pool",
        r"step \d+ loss", batch="settings batch 15"),
    *_settings_pair(
        "settings15_subtitles", "settings15_subtitles", ("train.py",),
        ("train.py", "--config", "configs/archive_cp1251.toml"),
        "charset auto-detection of every subtitle file the reader opens ([archive] encoding = 'auto'): "
        "charset_normalizer.from_bytes(...).best() where the archive's code page is known",
        "the archive config (configs/archive_mixed.toml, read at start-up) sets [archive] encoding = 'auto' "
        "(releases from several studios), so textio.read_text decodes every SRT file through "
        "charset_normalizer.from_bytes(raw).best(): for the archive's Windows-1251 bytes, which most single-byte "
        "code pages decode without error, it decodes the payload with each candidate code page and scores the "
        "results (mess_ratio and coherence_ratio in its md/cd modules, mypyc-compiled, GIL held) before it "
        "returns one, ~2-5 ms per ~63 KB episode file on this box against ~0.2 ms to read it and "
        "raw.decode('cp1251'); the "
        "reader thread builds each batch of 256 cues from scenes of 8 episodes (8 files read and detected per "
        "batch, only one scene of each parsed), so it spends most of its time in detection while holding the "
        "GIL, and the training loop (main thread) waits in Queue.get for the next batch and for the GIL "
        "(psf/requests#2359, psf/requests#5523, jawah/charset_normalizer#428) (measured by its author: 21.47 "
        "against the twin's 36.01 steps/s, medians of 3 runs each)",
        "none: configs/archive_cp1251.toml sets encoding = 'cp1251' (raw.decode('cp1251')), the same files, "
        "scenes, parsing and model; the releases index is still read once at start-up with encoding 'auto' "
        "(one charset_normalizer detection per run)",
        r"(?i)charset[_ -]?normali[sz]er|charset\W+(\w+\W+){0,2}(detect\w*|guess\w*|sniff\w*)|"
        r"(encoding|codec|code ?page)\W+(\w+\W+){0,2}(detect\w*|auto[- ]?detect\w*|guess\w*|sniff\w*)|"
        r"(detect\w*|guess\w*|sniff\w*)\W+(\w+\W+){0,3}(encodings?|charsets?|code ?pages?|codecs?)|from_bytes|"
        r"mess_ratio|coherence_ratio|apparent_encoding|chardet|encoding\W{0,5}(=|is|set to)?\W{0,3}auto\b|"
        r"archive_mixed|decode_bytes|textio\.read_text|\bmd\.py\b|\bcd\.py\b",
        r"step \d+ loss", batch="settings batch 15"),
    *_settings_pair(
        "settings15_orchard", "settings15_orchard", ("train.py",),
        ("train.py", "--config", "configs/survey_alongside.toml"),
        "PYTHONPYCACHEPREFIX on an empty scratch directory (with PYTHONDONTWRITEBYTECODE=1) in the environment of "
        "the per-shard decoder children ([decoder] bytecode_cache = 'scratch'): every child compiles everything it "
        "imports from source",
        "the survey config (configs/survey_scratch.toml, read at start-up) sets [decoder] bytecode_cache = "
        "'scratch' (keep the shared read-only code mount free of __pycache__ directories), so "
        "launcher.decoder_env sets PYTHONPYCACHEPREFIX to an empty directory under the run's scratch directory, "
        "next to PYTHONDONTWRITEBYTECODE=1, in the environment of the decoder child (python decode_shard.py, "
        "started by launcher.ShardDecoder for every shard: a fresh process per shard so the decoder's memory goes "
        "back to the system): the import system then looks for .pyc files only under the prefix "
        "(importlib's cache_from_source), finds none and may not write any, so every child compiles every module "
        "it imports, the stdlib's site/encodings/json/zlib/base64 and all of numpy's, from source again "
        "(SourceFileLoader.get_code -> source_to_code, compile()): ~1.0 s of CPU per child against ~0.35 s with "
        "the precompiled caches beside the sources, for ~0.1 s of actual decoding; the loader thread waits on "
        "the child (Popen.wait, wait4) for every shard of 24 batches and the training loop (main thread) waits in "
        "Queue.get for the next shard's batches (python/cpython#107631, haikuports/haikuports#5347, "
        "advancedtelematic/meta-updater#461) (measured by its author: 23.98 against the twin's 55.54 steps/s, "
        "medians of 3 runs each)",
        "none: configs/survey_alongside.toml sets bytecode_cache = 'alongside': no PYTHONPYCACHEPREFIX (removed from "
        "the child's environment if the trainer has one), so the children load the precompiled .pyc files beside "
        "the sources; the same decoder child per shard, still started with PYTHONDONTWRITEBYTECODE=1 (which alone "
        "only keeps the decoder's own module, survey.py, from being cached), the same shards, loader and model",
        r"(?i)pycache|pythonpycacheprefix|pycache_prefix|byte-?code|\.pyc\b|\bpyc\b|dontwritebytecode|"
        r"re-?compil\w*|compil\w+\W+(\w+\W+){0,4}(from source|sources?|modules?|imports?|numpy|stdlib|"
        r"standard library|\.py)|source_to_code|cache_from_source|sourcefileloader|get_code|bytecode_cache|"
        r"survey_scratch|decoder_env",
        r"step \d+ loss", batch="settings batch 15",
        missed={"outside": "`pipeline-bottleneck-target` (info): the producer stage limits throughput, no cause found, "
                           "its time in ShardDecoder.decode at `rc = self.proc.wait()`; the empty bytecode cache not "
                           "named"}),
    # --- Settings batch 16, held out: four more programs of process-wide settings, environment variables,
    # library configuration and OS process/thread-scheduling kinds, written by a helper from public reports
    # without seeing the tool (kinds chosen by the helper; those of batches 1-15 and the rest of the casebook
    # excluded).
    *_settings_pair(
        "settings16_quarry", "settings16_quarry", ("train.py",),
        ("train.py", "--config", "configs/site_loopback.toml"),
        "the statsd agent addressed by host name (STATSD_HOST=localhost for the parse worker child, [telemetry] "
        "statsd_host): every QC datagram's socket.sendto resolves the name again through getaddrinfo and glibc's "
        "NSS files backend (/etc/hosts opened and read per packet)",
        "the rig-server profile (configs/site_agent.toml, read at start-up) sets [telemetry] statsd_host = "
        "'localhost', which train.start_parser exports as STATSD_HOST into the environment of the LAS parse "
        "worker child (python drilllog.py, drilllog.worker_main); its qc.StatsClient sends every quality-control "
        "metric as its own UDP datagram with self._sock.sendto(payload, (self.host, self.port)) on an "
        "unconnected socket, 16 per window (a spread and a range gauge per curve, a lithology and a well counter), "
        "4,096 per batch of 256 windows, and because the address is a name, not a literal, CPython's sendto "
        "resolves it again for every datagram (socketmodule's setipaddr -> getaddrinfo -> glibc NSS 'files': "
        "openat/fstat/read/lseek/close of /etc/hosts and three newfstatat per call, plus a refused connect to the "
        "nscd socket every ~100 lookups): ~10 against ~4 us per sendto on this box, ~30-40 against ~14-17 ms of "
        "worker CPU per batch, a third of it in the kernel, so the worker becomes the bottleneck; the trainer's "
        "batch-reader thread waits in readinto on the worker's stdout pipe and the training loop (main thread) "
        "waits in Queue.get for the next batch (etsy/logster#103, reddit/baseplate.py#2, "
        "Shopify/statsd-instrument#7) (measured by its author: 29.72 against the twin's 49.56 steps/s, medians of "
        "3 runs each)",
        "none: configs/site_loopback.toml sets statsd_host = '127.0.0.1', a numeric address that sendto converts "
        "without a lookup; the same worker, the same 4,096 datagrams per batch to the same port (no agent listens "
        "on this box in either run, the datagrams are dropped), the same model; the trainer's own heartbeat "
        "client still addresses heartbeat_host = 'localhost' in both (one datagram every 100 steps, resolved each "
        "time)",
        r"(?i)getaddrinfo|gethostbyname|setipaddr|name[- ]resolution|(host ?names?|names?|localhost)\W+(\w+\W+){0,4}"
        r"(resol\w*|look(ed)?[- ]?ups?)|resol\w*\W+(\w+\W+){0,4}(host ?names?|localhost|names?|address\w*)|\bdns\b|"
        r"\bnss\b|nsswitch|/etc/hosts|etc/hosts|statsd_host|(look[- ]?ups?|resolution)\W+(\w+\W+){0,3}(per|each|"
        r"every)\W+(\w+\W+){0,2}(datagram|packet|send|sendto|metric|gauge)|sendto\W+(\w+\W+){0,4}(host ?name|"
        r"localhost|resol\w*)",
        r"step \d+ loss", batch="settings batch 16",
        missed={m: "`pipeline-bottleneck-target` because `process-wait` (warning): batch-reader waits on a pipe from the "
                   "parse worker child, running in StatsClient._send with half its CPU in the kernel, said as 'a system "
                   "call per few bytes (its input is read unbuffered)'; the host-name lookup per datagram not named"
                for m in ("outside", "probes", "attach")}),
    *_settings_pair(
        "settings16_saffron", "settings16_saffron", ("train.py",),
        ("train.py", "--config", "configs/bench_batch.toml"),
        "the spectrometer driver child's stdout is a pseudo-terminal ([instrument] stdout = 'tty'): the scan "
        "stream goes through the tty layer (n_tty output processing with ONLCR, pty flip buffers pushed by a "
        "kworker) instead of a pipe",
        "the lab-bench config (configs/bench_console.toml, read at start-up) sets [instrument] stdout = 'tty', so "
        "instrument.Driver gives the driver child (python spectrometer.py) the slave side of a pty.openpty() pair "
        "as its stdout and the scan-reader thread reads the master side: every scan the driver writes with "
        "os.write (a 'SCAN seq label' header and 4 KB of float32 in base64.encodebytes' 76-character MIME lines, "
        "~5.5 KB and 73 line breaks per scan, ~1.4 MB and ~18,700 line breaks per batch of 256) goes through the "
        "tty layer: n_tty_write's output processing (OPOST/ONLCR: every newline ends a process_output_block run "
        "and is written as CR LF by do_output_char), pty_write into the master's flip buffer, flush_to_ldisc on "
        "kworker threads (events_unbound, ~0.4 CPU during the run) into the master's n_tty read buffer, and "
        "n_tty_read copying it out again; the reader's os.read(fd, 65536) calls return ~4.3 KB each from the pty "
        "against ~59 KB from a pipe and the stream tops out near 65 MB/s where the twin moves ~120 MB/s; the "
        "scan-reader thread spends ~70% of its time blocked in os.read (instrument.Driver.read) and the training "
        "loop (main thread) waits in Queue.get for the next batch (ansible/awx#417, pexpect/pexpect#438, "
        "amoffat/sh#235) (measured by its author: 46.20 against the twin's 84.40 steps/s, medians of 3 runs each)",
        "none: configs/bench_batch.toml sets stdout = 'pipe' (os.pipe): the same driver, scans, record format, "
        "one write per scan, reader and model; the driver's stderr (a status line every 65,536 scans) is still a "
        "pty in both configs, drained by the driver-console thread",
        r"(?i)\bptys?\b|pseudo[- ]?(terminal|tty)s?|\bttys?\b|terminal\W+(\w+\W+){0,3}(stdout|output|stream|"
        r"device|fd|layer)|(stdout|output|stream|fd)\W+(\w+\W+){0,4}terminal|n_tty\w*|line discipline|ldisc|"
        r"flush_to_ldisc|onlcr|opost|openpty|isatty|termios|/dev/pts|ptmx|pty_write|flip[- ]buffer",
        r"step \d+ loss", batch="settings batch 16",
        missed={m: "`pipeline-bottleneck-target` (info): the producer stage limits throughput, no cause found, its time "
                   "in scan_reader and Driver.read (binascii.a2b_base64 in native code); the pty as the driver's "
                   "stdout not named" for m in ("outside", "probes", "attach")}),
    *_settings_pair(
        "settings16_kestrel", "settings16_kestrel", ("train.py",),
        ("train.py", "--config", "configs/fetch_pinned.toml"),
        "requests left to find the feature store's credentials in $NETRC itself ([credentials] source = 'netrc': "
        "session.auth unset, trust_env): get_netrc_auth re-reads and re-parses the whole lab netrc with the "
        "pure-Python netrc module on every request of the fetcher thread",
        "the lab config (configs/fetch_lab.toml, read at start-up) sets [credentials] source = 'netrc', so "
        "credentials.configure_session leaves session.auth unset on the clip-fetcher thread's requests.Session "
        "(trust_env True, its default) and lets requests find the store's credentials in the lab netrc that "
        "credentials.write_site_netrc exported as $NETRC (261 machine entries, ~26 KB, the store's entry last); "
        "requests' Session.prepare_request then calls requests.utils.get_netrc_auth for every request, which "
        "parses the whole file with netrc.netrc (netrc._parse driving _netrclex.get_token and _read_char, one "
        "read(1) per character, pure Python) before authenticators('127.0.0.1') finds the entry: ~5-9 ms with the "
        "GIL held per request, two requests per batch (GET /clips and /labels from the featurestore.py child over "
        "one keep-alive connection), so the clip-fetcher thread holds the GIL ~60% of the run inside the netrc "
        "lexer, and the training loop (main thread), whose torch ops release and re-take the GIL at every op, "
        "waits for it between ops and, when the fetcher falls behind, in Queue.get (encode/httpx#384, "
        "python/cpython#139633, talkiq/gcloud-aio#919) (measured by its author: 24.16 against the twin's 49.47 "
        "steps/s, medians of 3 runs each)",
        "none: configs/fetch_pinned.toml sets source = 'session': the store's entry is read from the same $NETRC "
        "once at start-up (credentials.session_credentials) and pinned as session.auth, so prepare_request skips "
        "get_netrc_auth; NETRC is exported in both, and the start-up readiness probe (a module-level "
        "requests.get of /health, trust_env) still parses it once in both; the same service, batches, "
        "keep-alive connection and model",
        r"(?i)netrc|get_netrc_auth|trust_env|_netrclex|authenticators\b|credential\w*\W+(\w+\W+){0,5}(every|each|"
        r"per)\W+(\w+\W+){0,2}(request|call|get|fetch)|(every|each|per)\W+(\w+\W+){0,3}(request|call|get|fetch)\W+"
        r"(\w+\W+){0,6}(credential\w*|auth\w*)\W+(\w+\W+){0,3}(file|lookup|look-up|pars\w*|read\w*)|"
        r"prepare_request\W+(\w+\W+){0,4}(auth\w*|credential\w*)",
        r"step \d+ loss", batch="settings batch 16"),
    *_settings_pair(
        "settings16_tundra", "settings16_tundra", ("train.py",),
        ("train.py", "--config", "configs/station_local.toml"),
        "the niced (nice 10) continuous evaluator child started in a session of its own ([evaluator] detach = "
        "true: start_new_session=True, setsid): Linux autogroup scheduling gives its session an equal share with "
        "the trainer's whole session, its nice value only counts inside its own group",
        "the field-station config (configs/station_remote.toml, read at start-up) sets [evaluator] detach = true, "
        "so launcher.start_evaluator starts the continuous evaluator (python evaluator.py, which lowers its own "
        "priority with os.nice(10) and then loops forever scoring a 30-member ensemble of the latest weight "
        "snapshot with np.einsum/np.tanh in forward and np.sort in crps_ensemble) with subprocess.Popen(..., "
        "start_new_session=True), i.e. setsid; with autogroup scheduling on (kernel.sched_autogroup_enabled = 1) "
        "the new session gets its own autogroup, a CFS task group weighted like the trainer's whole session, and "
        "nice values only weigh tasks against others of the same group: the evaluator takes ~1.0 of the 2 CPUs "
        "(~0.6 in the twin, where it only gets what the trainer leaves), and the trainer's session - the main "
        "thread's torch step and the two sampler_worker.py children (boreholes.windows fancy indexing, "
        "np.argpartition, rng.normal) feeding the batch-reader threads - shares the other one: the main thread "
        "gets ~0.5 CPU (~0.7 in the twin), each sampler worker ~0.25 (~0.33), and the training loop waits in "
        "Queue.get for batches and, runnable, for a CPU in the kernel's run queue (FeralInteractive/gamemode#437, "
        "distcc/distcc#468, htop-dev/htop#720) (measured by its author: 32.86 against the twin's 57.93 steps/s, "
        "medians of 3 runs each)",
        "none: configs/station_local.toml sets detach = false: the evaluator stays in the trainer's session and "
        "autogroup with the same nice 10, the same evaluation loop, snapshots, sampler workers and model; the "
        "lease-keeper child is started with start_new_session=True in both (it sleeps between one-line writes "
        "once a second)",
        r"(?i)autogroup\w*|setsid|start_new_session|(new|own|separate|different|another)\W+(\w+\W+){0,1}(session|"
        r"process group|task group|scheduling group)s?\b|session\W+(\w+\W+){0,3}(leader|id|group|share|weight|"
        r"fair\w*)|task ?groups?|nice\w*\W+(\w+\W+){0,6}(ineffective|ignored|no effect|moot|useless|defeated|"
        r"bypass\w*|only (counts|applies|works) (with)?in)|detach(ed)?\W+(\w+\W+){0,3}evaluat\w*|evaluat\w*\W+"
        r"(\w+\W+){0,4}detach\w*|cfs\W+(\w+\W+){0,3}(group|share)",
        r"step \d+ loss", batch="settings batch 16",
        missed={m: "`pipeline-bottleneck-drafter` (info): the consumer stage limits throughput, no cause found, its "
                   "time in main at `loss.backward()` (sgemm in native code), as its twin's; the evaluator's own "
                   "session (autogroup) not named" for m in ("outside", "probes", "attach")}),
    # --- Settings batch 17, held out: four more programs of process-wide settings, environment variables,
    # library configuration and OS process/thread-scheduling kinds, written by a helper from public reports
    # without seeing the tool (kinds chosen by the helper; those of batches 1-16 and the rest of the casebook
    # excluded).
    *_settings_pair(
        "settings17_bramble", "settings17_bramble", ("train.py",),
        ("train.py", "--config", "configs/archive_local.toml"),
        "the live station archive is an SQLite database in rollback-journal mode ([store] journal_mode = 'delete') "
        "that an ingest child process commits to every few milliseconds: the trainer's loader thread keeps running "
        "into the writer's locks (SQLITE_BUSY) and sleeps in SQLite's busy handler, where WAL would let readers and "
        "the writer proceed side by side",
        "the station-archive profile (configs/archive_shared.toml, read at start-up) sets [store] journal_mode = "
        "'delete', which airstore.connect applies with PRAGMA journal_mode on every connection to archive.sqlite: the "
        "ingest worker child (python ingest.py) appends 64 station-days and prunes as many old ones in one "
        "transaction every ~1 ms (plus the commit), and in rollback-journal mode each commit takes the PENDING and "
        "then the EXCLUSIVE lock on the database file for its journal writes, fdatasync(2)s, page writes and journal "
        "unlink (and waits, itself sleeping in the busy handler, for the readers' SHARED locks to clear); the "
        "trainer's archive-loader thread runs 64 small SELECTs of 5 rows per batch (airstore.sample_batch, each its "
        "own read transaction) and every time one finds the file locked sqlite3_step gets SQLITE_BUSY and the "
        "connection's busy timeout (sqlite3.connect(timeout=10)) sleeps 1, 2, 5, 10 ... ms before it retries, and it "
        "re-reads the pages the writer changed, so the loader spends a large part of its time asleep in the busy "
        "handler (clock_nanosleep, ~1,000 sleeps in 4 s under strace) or re-reading pages (pread64) while the "
        "training loop (main thread) waits in Queue.get for the next batch; the slowdown grows with the disk's fsync "
        "latency and the box's load (neuml/txtai#488, rooch-network/rooch#2002, Alexli18/binex#57) (measured by its "
        "author: 54.77 against the twin's 98.42 steps/s, medians of 3 runs each)",
        "none: configs/archive_local.toml sets journal_mode = 'wal': the same ingest worker, commit size and rate, "
        "queries, batches and model, but readers use the write-ahead log's snapshot and never wait for the writer; "
        "the run ledger (ledger.sqlite, one row every 50 steps from the main thread) is opened with PRAGMA "
        "journal_mode = delete in both configs",
        r"(?i)journal[_ ]?mode|rollback[- ]?journal|\bwal\b|write[- ]ahead|database is locked|sqlite_busy|"
        r"busy[_ ]?(handler|timeout)|sqlite\w*\W+(\w+\W+){0,8}(lock\w*|busy|contention|journal\w*)|(lock\w*|busy|"
        r"contention|journal\w*)\W+(\w+\W+){0,8}sqlite|(archive|database|db)\W+(\w+\W+){0,3}lock(s|ed|ing)?\b|(reader|"
        r"loader)\w*\W+(\w+\W+){0,6}(writer|ingest\w*)\W+(\w+\W+){0,3}lock\w*",
        r"step \d+ loss", batch="settings batch 17",
        missed={m: "`pipeline-bottleneck-target` (info): the producer stage limits throughput, no cause found, its time "
                   "in sample_batch at `rows = con.execute(` (pysqlite_connection_execute, libsqlite3 in native code); "
                   "the rollback journal beside the committing ingest child not named" for m in ("outside", "probes", "attach")}),
    *_settings_pair(
        "settings17_juniper", "settings17_juniper", ("train.py",),
        ("train.py", "--config", "configs/feeds_pinned.toml"),
        "TZ unset in the meter decoder child's environment ([site] timezone = 'host'): every time.mktime call "
        "re-checks the zone through tzset, one newfstatat('/etc/localtime') system call each, three per decoded "
        "reading",
        "the utility-feed profile (configs/feeds_host.toml, read at start-up) sets [site] timezone = 'host', so "
        "train.decoder_env removes TZ from the environment the decoder worker child (python meterfeed.py) is started "
        "with; the decoder turns every half-hourly reading of the export (local civil time stamps) into epoch seconds "
        "with time.mktime in meters.parse_stamp (the reading and its local midnight) and meters.decode_window (the "
        "end of the interval, for DST-correct kW), three calls per reading, 56 readings per window and 128 windows "
        "per batch (~21,500 calls per batch); glibc's mktime calls tzset, and with TZ unset tzset_internal cannot "
        "tell that nothing changed and re-reads the default zone: a newfstatat of /etc/localtime (a symlink to "
        "/usr/share/zoneinfo/Etc/UTC) per call, ~1-3 us (a path walk through the symlink) against ~0.35 us for a "
        "whole mktime with TZ set, so the decoder child (the bottleneck) spends about 40% of its time on that system "
        "call; the trainer's batch-reader thread waits in readinto on the decoder's stdout pipe and the training loop "
        "(main thread) waits in Queue.get for the next batch (luanti-org/luanti#12079, NixOS/nixpkgs#23053, "
        "ZoneMinder/zoneminder#1643) (measured by its author: 20.48 against the twin's 34.41 steps/s, medians of 3 "
        "runs each)",
        "none: configs/feeds_pinned.toml sets timezone = ':/etc/localtime', exported as TZ to the decoder: the same "
        "zone, export, decoder code (three mktime calls per reading), batches and model, but tzset sees an unchanged "
        "TZ and returns without touching the file system; the trainer process itself has no TZ in either run and "
        "calls mktime at start-up (writing the export) and twice every 100 steps (site_day), a stat of /etc/localtime "
        "each",
        r"(?i)\btz\b|time ?zones?|tzset|tzfile|tz_?convert|/etc/localtime|etc/localtime|\blocaltime|mktime|zoneinfo|"
        r"(stat|newfstatat|fstatat)\w*\W+(\w+\W+){0,4}(zone|localtime)",
        r"step \d+ loss", batch="settings batch 17",
        missed={m: "`pipeline-bottleneck-target` because `process-wait` (warning): batch-reader waits on a pipe from "
                   "the meterfeed child, running ~100% CPU (30-33% of it in the kernel where read) in decode_window and "
                   "parse_stamp; TZ missing from its environment (mktime re-reading /etc/localtime) not named"
                for m in ("outside", "probes", "attach")},
        twin_missed={m: "`pipeline-bottleneck-target` because `process-wait` (warning): batch-reader waits on a pipe "
                        "from the meterfeed child running ~100% CPU in parse_stamp: the twin's producer child is its "
                        "bottleneck too, only faster" for m in ("outside", "probes", "attach")}),
    *_settings_pair(
        "settings17_cobalt", "settings17_cobalt", ("train.py",),
        ("train.py", "--config", "configs/uploads_internal.toml"),
        "the parser worker child runs with the speculative store bypass mitigation on (SSBD via "
        "prctl(PR_SET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS, PR_SPEC_DISABLE), [parser] hardening = 'strict'): the "
        "CPU no longer lets loads run ahead of earlier stores, and its pure-Python log scanner runs much slower",
        "the customer-upload profile (configs/uploads_customer.toml, read at start-up) sets [parser] hardening = "
        "'strict', so the parser worker child (python logworker.py parse) calls hardening.apply('strict') at "
        "start-up, which besides PR_SET_NO_NEW_PRIVS calls prctl(PR_SET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS, "
        "PR_SPEC_DISABLE): the kernel sets SSBD in the CPU's SPEC_CTRL MSR whenever that process runs "
        "(/proc/PID/status: 'Speculation_Store_Bypass: thread mitigated', the state a seccomp filter used to force by "
        "default), so no load may execute before the addresses of all older stores are known; the worker's "
        "per-character combined-log scanner (accesslog.split_fields) and token loops (SessionFeaturizer.session, "
        "tokens, bucket: reference counting, list and dict updates, store-then-load chains everywhere in the "
        "interpreter) take ~1.5-2x as long per session, and the worker is the bottleneck: the trainer's batch-reader "
        "thread waits in readinto on its stdout pipe and the training loop (main thread) waits in Queue.get for the "
        "next batch; nothing in the stacks differs from the twin, only the time they take (shadow/shadow#1489, "
        "moby/moby#42619, google/gvisor#10487) (measured by its author: 40.10 against the twin's 62.80 steps/s, "
        "medians of 3 runs each)",
        "none: configs/uploads_internal.toml sets hardening = 'standard' for the parser: PR_SET_NO_NEW_PRIVS only, "
        "the same worker, scanner, sessions, batches and model; the one-off validator child that checks the archive "
        "at start-up ([validator] hardening = 'strict', both configs) still runs with the speculative store bypass "
        "mitigation and exits before training starts",
        r"(?i)speculat\w*|store[- ]bypass|\bssbd?\b|spectre|spec_ctrl|pr_spec_\w+|prctl|(cpu|security|"
        r"side[- ]channel)\W+(\w+\W+){0,2}mitigation|mitigation\W+(\w+\W+){0,3}(cpu|ssb\w*|spectre|speculat\w*)|"
        r"hardening\W+(\w+\W+){0,3}(strict|profile)|strict\W+(\w+\W+){0,3}hardening",
        r"step \d+ loss", batch="settings batch 17",
        missed={m: "`pipeline-bottleneck-target` because `process-wait` (warning): batch-reader waits on a pipe from "
                   "the logworker parse child, running ~100% CPU in split_fields and tokens; the child's speculative "
                   "store bypass mitigation (its prctl, 'thread mitigated' in its status) not named" for m in ("outside", "probes", "attach")},
        twin_missed={m: "`pipeline-bottleneck-target` because `process-wait` (warning): batch-reader waits on a pipe "
                        "from the logworker parse child running ~95% CPU: the twin's producer child is its bottleneck "
                        "too, only faster" for m in ("outside", "probes", "attach")}),
    *_settings_pair(
        "settings17_marlin", "settings17_marlin", ("train.py",),
        ("train.py", "--config", "configs/production.toml"),
        "root logger at DEBUG ([logging] level = 'DEBUG') in a process whose fetcher thread makes an HTTP request per "
        "snippet: httpcore's trace logging turns on and emits ~10 DEBUG records per request, each built, formatted "
        "and written to the rotating run log while holding the GIL",
        "the commissioning profile (configs/commissioning.toml, read at start-up) sets [logging] level = 'DEBUG', "
        "which runlog.setup gives the root logger through logging.config.dictConfig (one RotatingFileHandler on "
        "run.log); httpcore's loggers (httpcore.http11, httpcore.connection) have no level of their own and inherit "
        "it, so httpcore._trace.Trace is enabled for every request the snippet-fetcher thread sends to the historian "
        "child (python historian.py) over its keep-alive httpx.Client, one GET per snippet, 32 per batch: "
        "send_request_headers, send_request_body, receive_response_headers, receive_response_body and "
        "response_closed, each .started and .complete, ~10 records and ~1.3 KB of log per request, each through "
        "Logger._log (findCaller, LogRecord), the handler lock, Formatter.format (asctime) and a write+flush to the "
        "file, plus the rotation checks: ~0.2 ms more Python per request with the GIL held, about half again the "
        "client's own cost; the fetcher is the bottleneck, the training loop (main thread) waits in Queue.get for the "
        "next batch and for the GIL between torch ops (encode/httpcore#648, apache/trafficserver#6150) (measured by "
        "its author: 30.44 against the twin's 46.18 steps/s, medians of 3 runs each)",
        "none: configs/production.toml sets level = 'INFO': httpcore's isEnabledFor(DEBUG) check is false and Trace "
        "does nothing; the same historian, client, requests, batches and model, the same rotating file handler; both "
        "configs set the project's gearbox.fetch logger to DEBUG (one record per batch from the fetcher) and httpx to "
        "WARNING (no per-request INFO line), and the trainer logs an INFO line every 50 steps",
        r"(?i)\bdebug\b|httpcore|_trace\b|log(ging)?\W+(\w+\W+){0,3}(level|verbos\w*)|verbose\W+(\w+\W+){0,2}log\w*|"
        r"log records?|trace (events|records|logging)|rotatingfilehandler|dictconfig|logging\W+(\w+\W+){0,5}(each|"
        r"every|per)\W+(\w+\W+){0,2}(request|get|call|snippet)|(request|get|snippet)\w*\W+(\w+\W+){0,4}logg\w*",
        r"step \d+ loss", batch="settings batch 17",
        missed={"outside": "`pipeline-bottleneck-target` because `diagnostics-overhead` (warning): snippet-fetcher spends "
                           "16% of its samples in Python's logging, called from client.get; the root logger's DEBUG "
                           "level (httpcore's trace records per request) not said",
                "probes": "`pipeline-bottleneck-target` (info): no cause found, its time in fetcher at client.get, "
                          "inside httpcore/_backends; logging not named (the harness's pattern takes `httpcore`)"}),
    *_settings_pair(
        "settings18_lichen", "settings18_lichen", ("train.py",),
        ("train.py", "--config", "configs/gateway_rack.toml"),
        "the edge-gateway profile (configs/gateway_edge.toml, read at start-up) sets [numerics] ufunc_buffer = 16, "
        "which numerics.apply passes to np.setbufsize(16) in the featurizer thread: every NumPy ufunc that has to "
        "cast (the int16 accelerometer counts to float32 in featurize) runs its buffered iterator in 16-element "
        "chunks instead of 8192, so the featurizer needs over twice as long per batch and the trainer waits for it",
        "train.main starts a featurizer thread (train.featurizer) that first calls numerics.apply(cfg['numerics']); "
        "that calls np.seterr(...) and np.setbufsize(profile['ufunc_buffer']), i.e. 16 elements with the planted "
        "configs/gateway_edge.toml. In NumPy 2.x the ufunc buffer size lives in the per-thread (contextvar) extobj, "
        "so the featurizer thread's own ufuncs use it. train.featurize reads (64, 3, 4096) int16 windows and "
        "computes its moments with mixed-dtype ufuncs: np.mean(raw, axis=2, dtype=float32), np.square(raw, "
        "dtype=float32), np.subtract(raw, dc, dtype=float32) and the first difference np.subtract(raw[..., 1:], "
        "raw[..., :-1], dtype=float32). A ufunc that needs a cast cannot run its inner loop on the operands "
        "directly: NumPy's buffered NpyIter copies/casts bufsize elements at a time into a scratch buffer and calls "
        "the inner loop per chunk, so with 16 elements each of these calls does ~49,000 chunk iterations (cast "
        "copy, inner-loop call, iterator bookkeeping) instead of ~100; they go from ~0.15-0.5 ms to ~0.5-1.4 ms each "
        "and featurize from ~6.5 ms to ~14 ms per 64-window batch (the FFT and the float32-only ufuncs are "
        "unaffected). The pipeline becomes featurizer-bound and the training loop waits in q.get. Nothing in a "
        "Python stack shows the buffer size: the featurizer is simply inside np.mean/np.square. NumPy's ufunc "
        "buffering cost is discussed in Quansight/pnumpy#8 (inner loops called many times with a small buffer; the "
        "8192 default is already considered too small) and numpy/numpy#26627 (setbufsize is scoped per context/"
        "errstate) (measured by its author: 57.0 against the twin's 101.45 steps/s, medians of 3 runs each)",
        "none: configs/gateway_rack.toml sets ufunc_buffer = 8192 (NumPy's default); numerics.apply still calls "
        "np.setbufsize and np.seterr in the featurizer thread and in the main thread at start-up, and the same "
        "casting ufuncs, envelope and FFT features run",
        r"(?i)setbufsize|getbufsize|ufunc_buffer|ufunc buffer|buffer ?size of (the )?(numpy |ufunc)|numpy buffer|"
        r"buffered (ufunc|iterat|cast|loop)|npyiter|numerics\.apply",
        r"step \d+ loss", batch="settings batch 18",
        twin_missed={m: "`pipeline-bottleneck-target` because `page-faults` (warning): featurizer-0 faults memory in, "
                        "~270k minor faults a second, 0.4 of its 0.9 CPUs in the kernel (THP in madvise mode): a measured "
                        "cost of the twin's own, but a healthy twin warned is a false alarm" for m in ("outside", "probes", "attach")}),
    *_settings_pair(
        "settings18_fjord", "settings18_fjord", ("train.py",),
        ("train.py", "--config", "configs/audit_onboarding.toml"),
        "the audit profile (configs/audit_full.toml, read at start-up) sets [audit] mode = 'continuous', so the "
        "syscall auditor child (python audit.py) stays attached with ptrace (PTRACE_SEIZE, then PTRACE_SYSCALL) to "
        "the AIS feed-adapter child (python parser.py) for the whole run: every system call of the adapter stops it "
        "twice until the Python auditor has waited for it, read its registers and resumed it, so the adapter that "
        "feeds the trainer runs at about half speed",
        "train.main starts the feed adapter (train.start_adapter: python parser.py, stdout on a pipe read by the "
        "batch-reader thread) and then the syscall auditor (train.start_auditor: python audit.py --pid <adapter> "
        "--mode <[audit] mode>). audit.main attaches with ptrace(PTRACE_SEIZE, PTRACE_O_TRACESYSGOOD), interrupts "
        "the adapter and loops: os.waitpid, PTRACE_GETREGS (orig_rax, tallied into a Counter written to "
        "audit.json), ptrace(PTRACE_SYSCALL). With mode = 'continuous' it never detaches (TracerPid of the adapter "
        "in /proc stays the auditor's pid). The adapter (parser.lines) follows the spool like tail -F: per 512-byte "
        "frame an os.stat rotation check, an lseek(SEEK_CUR) and an os.read, i.e. ~900 system calls per 64-segment "
        "batch plus the pipe writes; each one now causes a syscall-entry and a syscall-exit stop, two context "
        "switches to the tracer and three ptrace/wait calls made through ctypes by a Python loop, ~7-10 us per "
        "stop. The adapter (the pipeline's producer) goes from ~15 to ~30 ms per batch and the training loop waits "
        "in q.get; no Python stack of the trainer or the adapter shows the tracer. ptrace syscall-tracing overhead: "
        "vstinner/python-ptrace#39 (a Python ptrace tracer makes the traced program 30x slower), "
        "dettrace/dettrace#133 (ptrace overheads scale with the syscall rate), ranweiler/pete#105 (measured by its "
        "author: 33.4 against the twin's 60.65 steps/s, medians of 3 runs each)",
        "none: configs/audit_onboarding.toml sets mode = 'startup': the same auditor child attaches with ptrace at "
        "start-up, tallies the adapter's system calls for its first 2 s (imports, spool open), then PTRACE_DETACHes "
        "and stays alive idle; the adapter keeps its small reads and stat checks",
        r"(?i)ptrace|PTRACE_|syscall[- ]?(stop|trac|audit)|system[- ]call (trac|audit|stop)|tracerpid|"
        r"traced by|tracee|audit\.py|strace",
        r"step \d+ loss", batch="settings batch 18",
        missed={m: "`pipeline-bottleneck-target` because `process-wait` (warning): batch-reader waits on a pipe from the "
                   "parser child, said as 'traced' (its state) or running, 37-45% CPU with half of it in the kernel; "
                   "the auditor child ptrace-attached to it (its TracerPid) not named" for m in ("outside", "probes", "attach")}),
    *_settings_pair(
        "settings18_basalt", "settings18_basalt", ("train.py",),
        ("train.py", "--config", "configs/site_eager.toml"),
        "the site-image profile (configs/site_image.toml, read at start-up) sets [decoder] ld_binding = 'not', so "
        "launcher.loader_env starts the decoder worker child (python decoder.py) with LD_BIND_NOT=1: glibc's "
        "dynamic linker then never writes a resolved function address back into the GOT, so every call through a "
        "PLT stub in the child (libpython's calls into itself and into libc/libm, numpy's) goes through "
        "_dl_runtime_resolve and a full symbol lookup again, the decoder runs ~15-20x slower and the trainer waits "
        "for its batches",
        "train.main writes the synthetic core-scan archive, then launcher.start_decoder(..., "
        "cfg['decoder']['ld_binding']) starts python decoder.py with the environment from launcher.loader_env: for "
        "'now' it sets LD_BIND_NOW=1, for 'not' (the planted configs/site_image.toml) LD_BIND_NOT=1. ld.so reads "
        "the variable at exec: with LD_BIND_NOT the lazy-binding fixup (_dl_fixup) resolves the symbol but does not "
        "patch the GOT slot, so the next call through the same PLT entry traps into _dl_runtime_resolve again (save "
        "registers, hash lookups through the loaded objects' symbol tables, restore). This interpreter's "
        "libpython3.11.so is a shared library whose internal calls go through its PLT, so nearly every interpreter "
        "operation, every libc/libm call and numpy's calls pay a symbol lookup. decoder.py's per-spectrum loop "
        "(continuum_removed: np.argmax per hull segment, np.interp, division) goes from ~1.3 ms to ~23 ms per "
        "64-spectrum batch; the decoder (the only producer: its stdout pipe feeds the batch-reader thread and the "
        "queue) becomes the bottleneck and the training loop waits in q.get. A Python stack of the decoder just "
        "shows continuum_removed; only its environment (/proc/<pid>/environ) and a native profile (time in "
        "_dl_runtime_resolve/_dl_lookup_symbol_x) show the cause. LD_BIND_NOT is what PLT-hooking tracers set to "
        "see every library call (uftrace's --no-pltbind; namhyung/uftrace#136); the cost of a lazy-binding lookup "
        "on each call: managarm/mlibc#493, android/ndk#488 (measured by its author: 40.6 against the twin's 78.15 "
        "steps/s, medians of 3 runs each)",
        "none: configs/site_eager.toml sets ld_binding = 'now': the same launcher sets LD_BIND_NOW=1 for the same "
        "decoder child (all symbols are resolved once at start-up, a one-off of a few ms), and the decoder runs "
        "the same continuum removal",
        r"(?i)LD_BIND_NOT|bind[_ ]not|ld_binding|_dl_runtime_resolve|dl_fixup|_dl_lookup_symbol|"
        r"lazy (symbol )?binding|\bPLT\b|GOT (slot|entr)|symbol (re)?resolution|dynamic (linker|loader)|ld\.so|"
        r"loader_env",
        r"step \d+ loss", batch="settings batch 18",
        missed={m: "`pipeline-bottleneck-target` because `process-wait` (warning): batch-reader waits on a pipe from the "
                   "decoder child, running 90-100% CPU in continuum_removed, started with OMP/OPENBLAS_NUM_THREADS=1; "
                   "LD_BIND_NOT in its environment (the dynamic linker resolving symbols on every call) not named"
                for m in ("outside", "probes", "attach")}),
    *_settings_pair(
        "settings18_sorrel", "settings18_sorrel", ("train.py",),
        ("train.py", "--config", "configs/exchange_bulk.toml"),
        "the live-exchange profile (configs/exchange_live.toml, read at start-up) sets [exchange] pipe_buffer = 0, "
        "which train.start_decoder passes to subprocess.Popen as bufsize=0: the station-log decoder child's stdout "
        "pipe is then an unbuffered io.FileIO, and the record-reader thread's `for line in stream` (IOBase.readline "
        "without a buffer or peek) reads it one byte per read(2) system call, dropping and retaking the GIL for "
        "every byte, so the reader needs about three times as long per batch and the trainer waits for it",
        "train.main starts python stationlog.py with train.start_decoder(feed, cfg['exchange']), i.e. "
        "subprocess.Popen(..., stdout=PIPE, bufsize=exchange['pipe_buffer']). With bufsize=0 (the planted "
        "configs/exchange_live.toml) Popen wraps the pipe in a raw io.FileIO instead of an io.BufferedReader. "
        "train.record_reader iterates the stream line by line; a raw FileIO has no buffer and no peek, so "
        "IOBase.readline reads one byte at a time (read(1) -> one read(2) syscall, the GIL released and re-acquired "
        "around each). A batch is 128 CSV records of ~60 bytes, i.e. ~7,700 system calls per batch instead of one "
        "64 KiB read per ~1,000 records; the reader thread (the only producer of the training queue) goes from "
        "~1.5 ms to ~4.7 ms per batch while the main thread's step takes ~2.7 ms, so the training loop waits in "
        "q.get. A Python stack shows the reader in readline either way; only the syscall rate (read of 1 byte "
        "on the pipe fd) or the stream's type shows the cause. Unbuffered subprocess pipes read line by line: "
        "gitpython-developers/GitPython#389 (a 160 KB git output took 5.75 s instead of 0.23 s), "
        "pexpect/ptyprocess#3 (readline on a buffering=0 file does one read per byte), "
        "nodejs/node-v0.x-archive#3727 (measured by its author: 214.1 against the twin's 364.85 steps/s, medians of 3 "
        "runs each)",
        "none: configs/exchange_bulk.toml sets pipe_buffer = 65536: the same Popen bufsize argument, now a 64 KiB "
        "io.BufferedReader over the same pipe; the decoder still flushes after every station-hour block and the "
        "reader still iterates line by line",
        r"(?i)(?<!set)(?<!get)bufsize|pipe_buffer|unbuffered (pipe|read|stream|stdout|file)|buffering ?= ?0|"
        r"byte[- ]at[- ]a[- ]time|byte[- ]by[- ]byte|one byte (per|at)|per[- ]byte|read\(1\)|FileIO|"
        r"RawIOBase",
        r"step \d+ loss", batch="settings batch 18",
        missed={"outside": "`where-time-goes`: MainThread's time in main with MKL's sgemm, waiting for the GIL 27% while "
                           "record-reader holds it at `for line in stream:`; the unbuffered pipe (a read per byte) not "
                           "named",
                "probes": "`pipeline-bottleneck-target` (info): no cause found, its time in record_reader at `for line "
                          "in stream:`, 'in the C library: read 83%, ending in system calls'; the pipe's bufsize=0 (a "
                          "read per byte) not named",
                "attach": "`pipeline-bottleneck-target` (info): no cause found, its time in record_reader at `for line "
                          "in stream:`, 'in the C library: read 91%, ending in system calls'; the pipe's bufsize=0 (a "
                          "read per byte) not named"}),
    *_settings_pair(
        "settings19_esker", "settings19_esker", ("train.py",),
        ("train.py", "--config", "configs/corelab_prod.toml"),
        "the core-lab QA profile (configs/corelab_qa.toml, read at start-up) sets [worker] allocator = "
        "'malloc_debug', which launcher.worker_env exports as PYTHONMALLOC=malloc_debug into the environment of "
        "the XRF export parser worker (python xrfparse.py): that interpreter bypasses pymalloc and wraps every "
        "allocation in CPython's debug hooks (guard bytes, CLEANBYTE/DEADBYTE fills, checks on free), so the "
        "string-heavy CSV parsing in the worker runs ~1.6x slower and the trainer waits for its frames",
        "train.main starts the parser worker with launcher.start_parser(cfg['scanner'], cfg['worker']); "
        "launcher.worker_env copies the environment and sets PYTHONMALLOC from [worker] allocator ('malloc_debug' "
        "in the planted configs/corelab_qa.toml) and PYTHONFAULTHANDLER=1. CPython reads PYTHONMALLOC at "
        "interpreter start: 'malloc_debug' installs the C library's malloc as the raw, mem and object allocator "
        "(no pymalloc pools) with the debug hooks of PEP 445 on top: every PyObject_Malloc/PyMem_Malloc adds a "
        "header and trailer of FORBIDDENBYTE guards and the API id, fills the new block with CLEANBYTE (0xCD), "
        "checks that the GIL is held, and every free verifies the guards and overwrites the block with DEADBYTE "
        "(0xDD) before it goes back to glibc. xrfparse.parse_section turns each 2 mm scan row of the quoted CSV "
        "export into a dict keyed by the shuffled column header (dict(zip(columns, row.split(',')))), strips the "
        "quotes of 24 count fields (a new str each) and converts them in the canonical element order: ~100 small "
        "allocations and frees per row, 1,280 rows (32 sections) per frame. The worker (the only producer; its "
        "stdout pipe feeds the frame-reader thread and the queue) goes from ~5.5 ms to ~8.7 ms per frame and the "
        "training loop waits in q.get. A Python stack of the worker just shows parse_section (str.split, "
        "str.strip, float) in both configs; only its environment (/proc/<pid>/environ: PYTHONMALLOC=malloc_debug) "
        "or a native profile of the worker (_PyMem_DebugRawAlloc, _PyMem_DebugCheckAddress, memset, glibc "
        "malloc/free) show the cause. The debug allocator is what -X dev / PYTHONDEVMODE turns on, "
        "documented as runtime checks 'too expensive to be enabled by default': python/cpython#76224, "
        "python/cpython#4478 (whether child processes should inherit the variables), "
        "beeware/briefcase#955 (measured slowdown of a test suite under -X dev) "
        "(measured by its author: 114.93 against the twin's 180.4 steps/s, medians of 3 runs each)",
        "none: configs/corelab_prod.toml sets allocator = 'pymalloc': the same launcher.worker_env sets "
        "PYTHONMALLOC (to pymalloc, the default) and PYTHONFAULTHANDLER=1 in the parser worker's environment, and "
        "the worker parses the same quoted CSV export; it is the bottleneck there too, at full speed",
        r"(?i)PYTHONMALLOC|malloc_debug|debug (memory[- ])?allocator|allocator'?s? debug|debug hooks?|"
        r"PyMem_Debug|pymalloc|-X ?dev\b|PYTHONDEVMODE|development mode|\[worker\] allocator|worker_env|"
        r"CLEANBYTE|DEADBYTE|FORBIDDENBYTE",
        r"step \d+ loss", batch="settings batch 19",
        twin_missed={m: "`pipeline-bottleneck-target` because `process-wait` (warning): the frame reader waits on its "
                        "parser child, which computes flat out, and the headline says it was started with "
                        "PYTHONMALLOC=pymalloc, the default: a healthy twin warned is a false alarm" for m in ("outside", "probes", "attach")}),
    *_settings_pair(
        "settings19_talus", "settings19_talus", ("train.py",),
        ("train.py", "--config", "configs/dedicated_node.toml"),
        "the shared-node profile (configs/shared_node.toml, read at start-up) sets [limits] decoder_cpus = 0.3, "
        "and limits.confine moves the waveform decoder child (python decoder.py) into a cgroup of its own with a "
        "CFS bandwidth quota of 30 ms per 100 ms period (cpu.cfs_quota_us, cgroup v1; cpu.max on v2): the "
        "decoder needs ~0.45 CPU to keep up with the trainer, is throttled for the rest of every period, and the "
        "trainer waits for its frames",
        "train.main calls limits.sweep_stale(), starts python decoder.py (stdout on a pipe read by the "
        "frame-reader thread) and then limits.confine(decoder.pid, cfg['limits']): it creates "
        "/sys/fs/cgroup/cpu/rockfall-decoder-<trainer pid>, writes cpu.cfs_period_us = 100000 and "
        "cpu.cfs_quota_us = decoder_cpus * period (30000 with the planted configs/shared_node.toml; on a pure "
        "cgroup v2 host cpu.max = '30000 100000') and the decoder's pid into cgroup.procs. The decoder "
        "synthesises 3-component geophone windows and computes their features with numpy (Hann-windowed rfft, 32 "
        "log band energies, envelope kurtosis and peak ratio; 16 windows, ~3.7 ms of CPU per frame); unconfined "
        "it would run at ~45% of a CPU, with the trainer (main thread, a 3-layer 768-wide MLP) as the bottleneck. "
        "With 30 ms of CPU per 100 ms the kernel's CFS bandwidth control throttles the decoder's cgroup whenever "
        "its runtime is used up (cpu.stat: nr_throttled rises every period, throttled_time ~70 ms per 100 ms): "
        "it is runnable but not run, at most ~80 frames/s, and the training loop waits in q.get while a CPU "
        "idles. A Python stack of the decoder shows numpy FFT/feature code like the twin's; only "
        "/proc/<pid>/cgroup, the cgroup's cpu.cfs_quota_us/cpu.stat, or the decoder's CPU use pinned at 0.3 CPU "
        "with a near-idle box show the cause. CFS quota throttling slowing CPU work: kubernetes/kubernetes#67577, "
        "moby/moby#38839 (a TensorFlow CPU job 4x slower under --cpu-quota than with cpuset), "
        "NVIDIA/nvidia-docker#757 (measured by its author: 80.69 against the twin's 129.13 steps/s, medians of 3 "
        "runs each)",
        "none: configs/dedicated_node.toml sets decoder_cpus = 1.5: the same limits.confine puts the decoder into "
        "its own cgroup with a CFS quota (150 ms per 100 ms period), which its single thread never reaches "
        "(nr_throttled stays 0); the decoder runs at ~45% of a CPU and the trainer is the bottleneck",
        r"(?i)cgroup|cfs[_ ]?(bandwidth|quota|period)|cpu\.max|cpu quota|cpu[- ]limit|bandwidth (limit|quota|"
        r"control)|throttl|nr_throttled|decoder_cpus|limits\.confine|rockfall-decoder",
        r"step \d+ loss", batch="settings batch 19",
        missed={m: "`page-faults` (warning): MainThread faults memory in, ~180-260k minor faults a second; the "
                   "decoder child's cgroup CPU quota (cpu.max / cfs_quota_us) and its throttling not named" for m in ("outside", "probes", "attach")},
        twin_missed={m: "`pipeline-bottleneck-drafter` because `page-faults` (warning): MainThread faults memory in, "
                        "~220-350k minor faults a second: a measured cost of the twin's own, but a healthy twin "
                        "warned is a false alarm" for m in ("outside", "probes", "attach")}),
    *_settings_pair(
        "settings19_sedge", "settings19_sedge", ("train.py",),
        ("train.py", "--config", "configs/herbarium_audit.toml"),
        "the herbarium-network profile (configs/herbarium_enforce.toml, read at start-up) sets [scanner] mode = "
        "'enforce', so the on-access scanner child (python scanner.py) marks the specimen spool directory with "
        "fanotify permission events (FAN_OPEN_PERM): every open() of a specimen file by the loader thread blocks "
        "in the kernel until the scanner process has read the event, checked the file's header and written its "
        "FAN_ALLOW verdict, so the loader falls behind and the trainer waits for batches",
        "train.main writes 1,500 specimen thumbnails into a spool directory (spool.build), starts python "
        "scanner.py --spool DIR --mode <[scanner] mode> and waits for its 'ready'. scanner.main calls "
        "fanotify_init(FAN_CLASS_CONTENT) and fanotify_mark(FAN_MARK_ADD, mask | FAN_EVENT_ON_CHILD, spool) "
        "through ctypes, with mask FAN_OPEN_PERM for 'enforce' (the planted configs/herbarium_enforce.toml) and "
        "FAN_OPEN for 'audit'; then it loops: os.read of the event queue, for each event os.pread of the "
        "file's 16-byte header through the event fd, os.readlink of /proc/self/fd/N, os.fstat, a verdict "
        "(struct fanotify_response FAN_ALLOW) written back for permission events, close. The loader thread "
        "(train.loader) opens, reads and normalises 48 specimen files per batch (load_specimen: ~80 us each); "
        "with permission events each open parks the loader in fanotify_get_response (fsnotify_open_perm, "
        "during open) until the scanner process has been woken, run its Python and replied: ~75 us more per "
        "file and two context switches, ~3.7 ms more per batch. The loader (the pipeline's bottleneck) drops "
        "from ~225 to ~123 batches/s and the training loop waits in q.get; the scanner's own CPU is about the "
        "same in both configs. A Python stack of the loader shows it in load_specimen's open() like the twin's "
        "(the wait is in the kernel: wchan fanotify_get_response); only the scanner's fanotify fd "
        "(/proc/<pid>/fdinfo: fanotify mask with FAN_OPEN_PERM) or a kernel stack of the loader show the cause. "
        "On-access scanning with permission events: Cisco-Talos/clamav#1024 (clamonacc with OnAccessPrevention "
        "makes a busy system crawl), linux-application-whitelisting/fapolicyd#192 (non-blocking FAN_OPEN "
        "events 'can boost performance significantly' in permissive mode) (measured by its author: 123.41 "
        "against the twin's 224.12 steps/s, medians of 3 runs each)",
        "none: configs/herbarium_audit.toml sets mode = 'audit': the same scanner child marks the spool with "
        "fanotify, but for FAN_OPEN notifications: opens are not held, and the scanner still checks every "
        "opened file (header pread, readlink, fstat) after the fact at about the same CPU cost; the loader is the "
        "bottleneck at full speed",
        r"(?i)fanotify|FAN_OPEN_PERM|FAN_ALLOW|permission events?|on[- ]access (scan|check|prevent)|"
        r"fanotify_get_response|fsnotify|scanner'?s? (verdict|permission)|\[scanner\] mode|mode ?= ?'?enforce",
        r"step \d+ loss", batch="settings batch 19",
        missed={m: "`pipeline-bottleneck-target` because `kernel-wait` (warning): the loader asleep in the kernel in "
                   "openat ('a slow or network file system'); the scanner child's fanotify permission events not "
                   "named" for m in ("outside", "probes", "attach")}),
    *_settings_pair(
        "settings19_muskeg", "settings19_muskeg", ("train.py",),
        ("train.py", "--config", "configs/distill_local.toml"),
        "the distillation profile shared with the GPU export job (configs/distill_export.toml, read at start-up) "
        "sets [teacher] precision = 'fp16', which precision.apply turns into torch.set_autocast_dtype('cpu', "
        "torch.float16) and torch.set_autocast_enabled('cpu', True) in the labeller thread: every Linear of the "
        "frozen teacher runs as a float16 matmul on a CPU without fp16 matrix instructions (no AVX512-FP16/"
        "AMX-FP16), a path many times slower than fp32 or bf16, so the labeller falls behind and the student "
        "trainer waits for its batches",
        "train.main starts the teacher-labeller thread (train.labeller), which sets torch.set_num_threads(1) and "
        "calls precision.apply(cfg['teacher']): torch.set_autocast_dtype('cpu', DTYPES[precision]) and "
        "torch.set_autocast_enabled('cpu', precision != 'fp32'); CPU autocast state is per thread, so it holds "
        "for the labeller's teacher forward only (the main thread calls precision.apply with 'fp32', autocast "
        "off, in both configs). Per batch the labeller synthesises 512 eddy-covariance tower windows "
        "(tower_windows: numpy random walks, diurnal cycles, per-variable standardisation; 6 x 48 inputs) and "
        "runs the frozen 4-layer teacher (288-96-96-96-3, SiLU) under torch.no_grad. With fp16 autocast each "
        "nn.Linear casts its input and weight to float16 (no weight cache: the teacher's weights do not require "
        "grad) and runs at::addmm on Half tensors; on this AMD EPYC (avx512_bf16 but no avx512_fp16/amx_fp16) "
        "that is a slow converted/reference GEMM path (pytorch/pytorch#146508: fp16 matmul on x86 CPUs without "
        "AVX512-FP16 converts to fp32 and back, far slower than fp32), while bf16 autocast (the twin) runs "
        "oneDNN's AVX512-BF16 kernels. The labeller (the only producer) goes from ~3.2 ms to ~6.5 ms per batch "
        "and the training loop (main thread, the 96-wide student with AdamW) waits in q.get. A Python stack of "
        "the labeller shows the teacher's Linear forward in both configs; only the thread's autocast state "
        "(torch.is_autocast_enabled('cpu'), torch.get_autocast_dtype('cpu') in that thread) or a native "
        "profile (Half GEMM kernels, fp16<->fp32 conversions) show the cause. Also pytorch/pytorch#59177 "
        "(float16 matmul on CPU orders of magnitude slower than float32), pytorch/pytorch#118499 (autocast on "
        "CPU dramatically slow) (measured by its author: 154.9 against the twin's 310.13 steps/s, medians of "
        "3 runs each)",
        "none: configs/distill_local.toml sets [teacher] precision = 'bf16': the labeller thread still calls "
        "precision.apply and runs the teacher under CPU autocast (set_autocast_dtype/set_autocast_enabled, "
        "bfloat16, executed by oneDNN's AVX512-BF16 kernels on this CPU), and the main thread calls "
        "precision.apply('fp32') (autocast off) as in the planted config",
        r"(?i)fp16|float16|half[- ]precision|torch\.half|\bhalf\b|set_autocast_dtype|"
        r"autocast[^.]{0,60}(fp16|float16|half)|\[teacher\] precision|precision\.apply",
        r"step \d+ loss", batch="settings batch 19"),
    *_settings_pair(
        "settings20_heron", "settings20_heron", ("train.py",),
        ("train.py", "--config", "configs/capture_batch.toml"),
        "the real-time capture profile (configs/capture_rt.toml, read at start-up) sets [decoder] memlock = "
        "'all', so the session decoder child (python decoder.py) calls mlockall(MCL_CURRENT | MCL_FUTURE) at "
        "start-up: every later mapping is locked and populated when it is created, so each batch's ~35 MB "
        "zero-padded session buffer (a fresh mmap, only ~5% of it ever written) is faulted in and zeroed page by "
        "page; the decoder becomes the bottleneck and the trainer waits for its frames",
        "train.main starts python decoder.py --memlock <[decoder] memlock> (stdout on a pipe read by the "
        "frame-reader thread); decoder.main calls memlock.lock(mode), i.e. libc mlockall through ctypes with "
        "MCL_CURRENT | MCL_FUTURE for 'all' (the planted configs/capture_rt.toml; it succeeds as root, "
        "CAP_IPC_LOCK). decoder.session_batch pads 64 sessions of 40-280 events into np.zeros((64, 4224, 32), "
        "float32), 34.6 MB, above glibc's largest dynamic mmap threshold (32 MiB): calloc maps fresh anonymous "
        "memory every batch and unmaps it when the buffer is freed. Without MCL_FUTURE the kernel maps that "
        "memory lazily (numpy also madvises it MADV_HUGEPAGE, so the touched regions fault in as 2 MB pages); "
        "with MCL_FUTURE every new VMA is VM_LOCKED and mmap() populates all ~8,450 4-KiB pages at once (before "
        "numpy's madvise can apply), zeroing the whole buffer in 4 KiB faults, and munmap has to munlock them "
        "again: the decoder's per-batch time grows ~3-4x, mostly system time, and it becomes the bottleneck (the "
        "training loop waits in q.get, the frame-reader in readinto on the pipe). A Python stack of the decoder "
        "shows session_batch (np.zeros, the padding loop) and features in both configs; only the decoder's "
        "/proc/<pid>/status (VmLck as large as VmRSS and growing with each buffer), its system time and its "
        "minor-fault rate show the cause. MCL_FUTURE populating every later allocation at once: "
        "systemd/systemd#40319 (MCL_FUTURE imposes immediate population of malloc()-ed pages; MCL_ONFAULT added "
        "everywhere), rfjakob/earlyoom#112 (MCL_ONFAULT to stop prefaulting), ros2-realtime-demo/pendulum#90 "
        "(with MCL_FUTURE new mappings and thread stacks are faulted in immediately) "
        "(measured by its author: 46.16 against the twin's 77.54 steps/s, medians of 3 runs each)",
        "none: configs/capture_batch.toml sets memlock = 'current': the same memlock.lock calls "
        "mlockall(MCL_CURRENT) once at start-up (the pages the decoder has then are locked, VmLck is non-zero), "
        "later mappings are not locked or prefaulted; the decoder builds the same mostly-empty 35 MB padded "
        "buffers and the trainer (a 3-layer 800-wide MLP) is the bottleneck",
        r"(?i)mlockall|mlock|MCL_FUTURE|MCL_CURRENT|MCL_ONFAULT|memlock|VmLck|locked (memory|pages)|"
        r"memory[- ]lock|lock(s|ed|ing)? (all )?(of )?(its |the )?(memory|pages)|"
        r"(prefault|populat)\w* (every|all|each|the whole)",
        r"step \d+ loss", batch="settings batch 20"),
    *_settings_pair(
        "settings20_moraine", "settings20_moraine", ("train.py",),
        ("train.py", "--config", "configs/glacier_ops.toml"),
        "the notebook debug profile (configs/glacier_debug.toml, read at start-up) sets [runtime] torchscript = "
        "false, which runtime_flags.apply exports as PYTORCH_JIT=0 before torch is imported: torch.jit.script "
        "returns the plain Python function, so the filter thread's Kalman recurrence (kalman.kalman_track, 112 "
        "epochs of ~20 small tensor ops per batch) runs op by op in Python instead of in the TorchScript "
        "interpreter; the filter thread becomes the bottleneck and the trainer waits for batches",
        "train.main loads the config, calls runtime_flags.apply(cfg['runtime']) (PYTORCH_JIT = '0' with the "
        "planted configs/glacier_debug.toml), then imports torch and kalman. torch.jit reads PYTORCH_JIT once at "
        "import (torch.jit._state: _enabled); with it off, @torch.jit.script on kalman_track returns the function "
        "itself. The filter thread (kalman.StationSampler.batch) runs kalman_track over (32, 112, 16) GNSS "
        "displacement series: a constant-velocity Kalman filter whose per-epoch step is ~20 element-wise ops on "
        "(32, 16) tensors plus a cat; scripted, the 112-epoch loop runs in the TorchScript interpreter (no Python "
        "frame per op, the graph runs with the GIL released, ~3 ms a batch alongside the trainer); unscripted, "
        "every op goes through the Python interpreter, argument parsing and the dispatcher from Python, ~4.1 ms "
        "a batch nearly all of it holding the GIL, so it also serialises with the training loop's own Python "
        "(a 3-layer 256-wide MLP whose ~1.5 ms step is mostly Python and dispatcher overhead): ~5 ms a batch. "
        "The training loop (main thread) waits in q.get and for the GIL. A Python stack of the filter thread shows it inside "
        "kalman_track in both configs (in the twin the scripted call is one opaque frame, in the planted run the "
        "lines of the same loop); only the environment (/proc/<pid>/environ: PYTORCH_JIT=0), "
        "torch.jit._state._enabled or type(kalman.kalman_track) (function instead of ScriptFunction) show the "
        "cause. PYTORCH_JIT=0 as a debugging/profiling switch that runs scripted code as Python: "
        "pytorch/pytorch#10867 (the variable), pytorch/pytorch#24839 (set to debug, PYTORCH_JIT=0 kept while "
        "scripted modules are used), plasma-umass/scalene#892 (a profiler sets PYTORCH_JIT=0 for the whole "
        "process, trading the JIT's speed for visibility) "
        "(measured by its author: 197.75 against the twin's 330.86 steps/s, medians of 3 runs each)",
        "none: configs/glacier_ops.toml sets torchscript = true: the same runtime_flags.apply exports "
        "PYTORCH_JIT=1 (the default) before torch is imported, kalman_track is a ScriptFunction and the same "
        "recurrence runs in the TorchScript interpreter with the GIL released, side by side with the trainer",
        r"(?i)PYTORCH_JIT|TorchScript|torch\.jit|jit\.script|script(ing|ed)?[^.]{0,40}(disabled|off|no-?op)|"
        r"(JIT|scripting) (is |was )?(disabled|turned off|off)|ScriptFunction|\[runtime\] torchscript|"
        r"runtime_flags",
        r"step \d+ loss", batch="settings batch 20"),
    *_settings_pair(
        "settings20_bracken", "settings20_bracken", ("train.py",),
        ("train.py", "--config", "configs/workstation.toml"),
        "the hardened profile (configs/hardened.toml, read at start-up) sets [security] force_weights_only = "
        "true, which security.apply exports as TORCH_FORCE_WEIGHTS_ONLY_LOAD=1 before torch is imported: "
        "torch.load overrides the shard loader's weights_only=False and unpickles every shard with the "
        "pure-Python restricted unpickler (torch._weights_only_unpickler) instead of the C pickle module; the "
        "loader thread takes ~2.4x as long per shard, holding the GIL, and the trainer waits for batches",
        "train.main calls security.apply(cfg['security']) before importing torch, writes 16 shards of 512 "
        "tokenised abstracts (each record a dict: a tokens tensor, label, length and a source string) with "
        "torch.save into a temp directory (bracken-shards-<pid>, removed at exit, stale ones swept at start-up) "
        "and starts the loader thread, which torch.load's the shards in turn (shards.load_shard: "
        "torch.load(path, weights_only=False), our own trusted shards) and cuts each into 4 batches of 128. "
        "torch.serialization.load reads TORCH_FORCE_WEIGHTS_ONLY_LOAD on every call and, when it is truthy "
        "(the planted configs/hardened.toml), sets weights_only=True whatever the caller passed: _load then uses "
        "_weights_only_unpickler.Unpickler, whose load() is a Python loop over every pickle opcode (read, an "
        "if-chain dispatch, allowlist checks on each GLOBAL/REDUCE such as torch._utils._rebuild_tensor_v2, a "
        "persistent_load per storage) instead of _pickle's C loop: ~10 ms -> ~24 ms per 512-record shard in a "
        "micro-benchmark, all of it with the GIL held, which also delays the training loop between its ops. The "
        "loader (the only producer) falls behind and the training loop (main thread, EmbeddingBag + MLP) waits "
        "in q.get. A stack of the loader shows torch.load -> _load in both configs (in the planted run "
        "Unpickler.load frames of torch/_weights_only_unpickler.py, i.e. ordinary loading work); the cause, the "
        "variable in /proc/<pid>/environ overriding the call's weights_only=False, is not in any stack. "
        "TORCH_FORCE_WEIGHTS_ONLY_LOAD and the weights_only switch: sktime/pytorch-forecasting#1998 (torch.load's "
        "code that lets the variable override the argument), ARM-software/Tool-Solutions#303 (call sites pin "
        "weights_only=False after 2.6 made True the default); pure-Python unpickling cost: "
        "Desilo/liberate-fhe#17 "
        "(measured by its author: 68.21 against the twin's 110.03 steps/s, medians of 3 runs each)",
        "none: configs/workstation.toml sets force_weights_only = false: the same security.apply exports "
        "TORCH_FORCE_WEIGHTS_ONLY_LOAD=0, torch.load honours the loader's weights_only=False and unpickles the "
        "same shards with the C unpickler; the loader keeps ahead and the trainer is the bottleneck",
        r"(?i)weights_only|weights[- ]only|TORCH_FORCE_WEIGHTS_ONLY_LOAD|force_weights_only|"
        r"restricted unpickl|WeightsUnpickler|safe (un)?pickl|(pure[- ]Python|python[- ]level) unpickl",
        r"step \d+ loss", batch="settings batch 20"),
    *_settings_pair(
        "settings20_plover", "settings20_plover", ("train.py",),
        ("train.py", "--config", "configs/site_direct.toml"),
        "the field-station profile (configs/site_egress.toml, read at start-up) routes the run's HTTP through "
        "the station's egress agent: netenv.apply sets http_proxy/HTTP_PROXY to the agent (a forward-proxy "
        "child) and no_proxy to '', so loopback is not exempt and urllib sends every window GET of the fetcher "
        "thread to the window store (127.0.0.1) through the agent: two TCP connections and a Python relay per "
        "request; the fetcher becomes the bottleneck and the trainer waits for batches",
        "train.main starts python services.py store (the acoustic window store) and python services.py agent "
        "(the egress agent, a ThreadingHTTPServer forward proxy that audits and relays absolute-URI GETs with "
        "http.client), then netenv.apply(cfg['network'], agent_port) sets http_proxy = HTTP_PROXY = "
        "http://127.0.0.1:<agent> and no_proxy = NO_PROXY = [network] no_proxy, '' in the planted "
        "configs/site_egress.toml. The fetcher thread GETs 12 windows per batch with "
        "urllib.request.urlopen('http://127.0.0.1:<store>/window/<id>'); urlopen's default opener is built on "
        "first use with ProxyHandler(getproxies()), and proxy_bypass_environment finds no entry for 127.0.0.1 "
        "in the empty no_proxy, so each request goes to the agent as 'GET http://127.0.0.1:<store>/...': the "
        "agent parses it, opens its own connection to the store, reads the body and relays status, headers (plus "
        "Via) and body; every window costs a second connection set-up, a second HTTP parse/serve cycle in "
        "another Python process and the extra hop's wake-ups on a 2-CPU box. The fetcher (the only producer) "
        "falls behind and the training loop waits in q.get. A Python stack of the fetcher shows urlopen -> "
        "http.client (connect, getresponse, read) in both configs; only the environment (/proc/<pid>/environ: "
        "http_proxy set, no_proxy empty), the sockets (the fetcher connected to the agent's port, the agent to "
        "the store's) and the agent's CPU time show the cause. Proxy variables without a loopback no_proxy: "
        "clearlinux/swupd-client#642 (tests against local servers fail or slow down when http_proxy is set and "
        "no_proxy is not; localhost added), alpinelinux/alpine-conf#25 (the proxy is used even for localhost "
        "unless no_proxy=localhost), postmanlabs/postman-app-support#3942 (with HTTP_PROXY set, requests to "
        "localhost go through the proxy) "
        "(measured by its author: 71.05 against the twin's 123.61 steps/s, medians of 3 runs each)",
        "none: configs/site_direct.toml starts the same egress agent and sets the same http_proxy/HTTP_PROXY, "
        "with no_proxy = 'localhost,127.0.0.1': urllib bypasses the proxy for the store's loopback address, each "
        "window is one direct connection to the store and the agent idles; the pipeline runs at full speed",
        r"(?i)https?_proxy|no_proxy|\bproxy\b|proxied|proxies|egress agent|ProxyHandler|proxy_bypass|"
        r"netenv\.apply|\[network\] no_proxy",
        r"step \d+ loss", batch="settings batch 20"),
    *_settings_pair(
        "settings21_tarn", "settings21_tarn", ("train.py",),
        ("train.py", "--config", "configs/capacity_peak.toml"),
        "the capacity-planning profile (configs/capacity_ws.toml, read at start-up) sets [memwatch] metric = "
        "'working_set', so the memory telemetry child (python memwatch.py --pid <trainer>) estimates the "
        "trainer's working set the cAdvisor / wss way every 40 ms: it reads Referenced from "
        "/proc/<trainer>/smaps_rollup and then writes 1 to /proc/<trainer>/clear_refs. Each of the two walks "
        "every page table of the 1.4 GB trainer (the 2M x 128 catalogue tensor) under the trainer's mmap lock, "
        "~30 ms each, so the agent walks almost without pause (94% of a CPU), the trainer's brk and page "
        "faults queue behind the walks, and its accessed bits and TLB are reset at every sample",
        "train.main builds the Catalogue (2,000,000 x 128 float32, a 1 GB torch tensor on 4 KiB pages), starts "
        "python memwatch.py --pid <trainer> --metric <[memwatch] metric> --interval-ms 40, the basket-builder "
        "thread (index_select gathers of shopper histories and 48 sampled negatives from the catalogue, mean "
        "pooling) and trains the 1024-wide query tower with a sampled-softmax loss in the main thread (batch "
        "256; its per-step activations make glibc grow and trim the heap: ~40,000 minor faults and on the "
        "order of 100 brk calls a second). memwatch.sample with 'working_set' (the planted "
        "configs/capacity_ws.toml) "
        "reads /proc/<pid>/smaps_rollup, which walks the page tables of every mapping of the trainer, then "
        "writes '1' to /proc/<pid>/clear_refs, which walks them again, test-and-clears the accessed (young) "
        "bit of every present PTE and flushes the trainer's TLB; both walks hold the trainer's mmap_lock for "
        "read. On the 1.4 GB trainer each walk takes ~30 ms, longer than the 40 ms interval allows for two, "
        "so memwatch runs back to back (94% of a CPU; 0.8% in the twin), the trainer's brk calls wait "
        "for the write side of the lock and its page faults queue behind them (kernel stacks of its threads "
        "in __do_sys_brk and lock_mm_and_find_vma), it re-walks page tables and sets accessed bits again "
        "after every clear, and it gets 0.82 instead of 1.11 CPUs on the 2-CPU box; the training loop and "
        "the builder both slow down. A Python stack of the trainer shows the tower's forward/backward and "
        "index_select in both configs; memwatch's shows it reading a /proc file or writing clear_refs, which "
        "looks like cheap bookkeeping. Only memwatch's CPU time, the trainer's kernel stacks (waits on "
        "mmap_lock in brk and page faults) and the metric it samples show the cause. Working-set estimation "
        "through smaps and clear_refs disrupting the measured process: google/cadvisor#3679 (the default "
        "container_referenced_bytes collection, clear_refs based, raised an mmap-heavy service's P100 latency "
        "80x), google/cadvisor#3670 (/proc/<pid>/clear_refs very disruptive to a search service that mmaps "
        "a large file), google/cadvisor#2622 (referenced-bytes collection taking a whole CPU core and "
        "seconds per scan on large working sets) "
        "(measured by its author: 23.81 against the twin's 39.32 steps/s, medians of 3 runs each)",
        "none: configs/capacity_peak.toml sets metric = 'peak_rss': the same memwatch samples every 40 ms, "
        "but reads VmRSS and VmHWM from /proc/<trainer>/status (counters, no page-table walk) and writes 5 to "
        "clear_refs, which only resets the peak-RSS high-water mark; the agent idles and the trainer runs at "
        "full speed",
        r"(?i)clear_refs|smaps(_rollup)?|working[- ]set|referenced (bits?|bytes|pages|memory)|\bReferenced\b|"
        r"accessed bits?|young bits?|page[- ]tables? walk|walk\w* (the |its )?page[- ]tables?|mmap[_ ]?(lock|sem)|"
        r"\[memwatch\] metric",
        r"step \d+ loss", batch="settings batch 21"),
    *_settings_pair(
        "settings21_curlew", "settings21_curlew", ("train.py",),
        ("train.py", "--config", "configs/estuary_replay.toml"),
        "the live estuary profile (configs/estuary_live.toml, read at start-up) sets [store] statement_cache "
        "= 0, which featurestore.open_store passes to sqlite3.connect as cached_statements=0: the habitat "
        "feature store's connection keeps no prepared statements, so each of the ~4,160 point lookups the "
        "track-loader thread makes per batch compiles its SQL text again (sqlite3_prepare_v2: tokenizer, "
        "parser, query planner, VDBE code generation) and finalizes it afterwards; the loader takes ~2.1x as "
        "long per batch and the trainer waits for batches",
        "train.main starts the track-loader thread, which opens the store (featurestore.open_store: an "
        "in-memory SQLite snapshot with 160,000 survey cells, 600 tags and 2,980 tide slots, "
        "sqlite3.connect(':memory:', cached_statements=[store] statement_cache)) and per batch simulates 64 "
        "birds x 32 GPS fixes, calling featurestore.tag_features once per bird and cell_features and "
        "tide_features once per fix: con.execute(<constant SQL>, (key,)).fetchone(), 4,160 lookups. Python's "
        "sqlite3 module keeps an LRU cache of prepared statements keyed by the SQL text, cached_statements "
        "entries (128 by default): with 128 the three statements are compiled once and only reset and rebound "
        "per call; with 0 every execute runs sqlite3_prepare_v2 on the text again and finalizes the statement "
        "when the cursor is done. The loader's time per batch grows from ~13 ms to ~28 ms, almost all of it "
        "in the SQLite C library; the loader (the only producer) falls behind and the training loop (main "
        "thread, a 192-wide MLP on 2,048 joined fixes) waits in q.get. A Python stack of the loader shows "
        "featurestore.cell_features -> Connection.execute in both configs; the compile work sits under that "
        "one C call (sqlite3Prepare, sqlite3RunParser, the planner in a native profile), and only the "
        "connection's cached_statements setting, from the profile, says why every call prepares. "
        "cached_statements=0 set in production, and statement compilation cost without a cache: "
        "Chia-Network/chia-blockchain#19114 (sets cached_statements=0 as a workaround for stale results, "
        "python/cpython#118172), oxidecomputer/crucible#436 (sqlite3Prepare 60% of CPU time before statements "
        "were cached; caching at least doubled throughput), python/cpython#74457 (making the sqlite3 statement "
        "cache optional) "
        "(measured by its author: 29.89 against the twin's 54.16 steps/s, medians of 3 runs each)",
        "none: configs/estuary_replay.toml sets statement_cache = 128 (the sqlite3 default): the same loader's "
        "three lookup statements are prepared once and reused from the connection's statement cache; the "
        "loader keeps ahead and the trainer is the bottleneck",
        r"(?i)cached_statements|statement[_ ]cache|prepared[- ]statements?|sqlite3_prepare|sqlite3Prepare|"
        r"prepar\w* (again |anew )?(on |for )?(each|every) (call|lookup|query|execute|statement)|"
        r"re-?(prepar|pars|compil)\w* (the |its |each |every )?(sql|statement|quer)|"
        r"(sql|statement|query) (re)?compil|\[store\] statement_cache",
        r"step \d+ loss", batch="settings batch 21"),
    *_settings_pair(
        "settings21_yarrow", "settings21_yarrow", ("train.py",),
        ("train.py", "--config", "configs/range_lab.toml"),
        "the production range profile (configs/range_gateway.toml, read at start-up) sets [schema] "
        "regex_engine = 'python-re', which schema.upload_adapter puts into the pydantic config of the Reading "
        "schema: pydantic-core then checks the eight pattern-constrained string fields of every reading with "
        "Python's re module (a compiled re.Pattern called back from the Rust validator for each value) "
        "instead of its built-in Rust regex engine; validating each 8,192-reading upload in the ingest thread "
        "takes ~1.8x as long, holding the GIL, and the trainer waits for batches",
        "train.main starts the gateway child (python gateway.py, which replays the climate controllers' "
        "uploads: JSON arrays of 128 bays x 16 sensors x 4 slots = 8,192 readings, 1.6 MB, length-prefixed "
        "on its stdout) and the ingest thread: read_exact the upload, adapter.validate_json(payload) with "
        "adapter = TypeAdapter(list[Reading]) (Reading a TypedDict whose site, bay, controller, channel, "
        "sensor, ts, unit and firmware are str fields with Field(pattern=...), __pydantic_config__ = "
        "ConfigDict(regex_engine=[schema] regex_engine)), then numpy features per bay and queue.put. With "
        "'rust-regex' (pydantic's default) pydantic-core matches each pattern with the Rust regex crate "
        "inside the validator; with 'python-re' (the planted configs/range_gateway.toml) it compiles each "
        "pattern with re.compile and calls the pattern from Rust for every value, through the C-API, with a "
        "Python str, a match object and the backtracking sre matcher per field: 65,536 calls per upload. "
        "Validating one upload takes ~24 ms instead of ~14 ms (measured in isolation), all of it holding the "
        "GIL, so it also holds up the training loop's Python; the ingest thread (the only producer) falls "
        "behind and the training loop (main thread, a 256-wide MLP per bay) waits in q.get. A Python stack of "
        "the ingest thread shows the one native call TypeAdapter.validate_json in both configs (sre is C "
        "code, it adds no Python frame); only the schema's config (regex_engine) or a native profile (_sre "
        "matching under pydantic_core) shows the cause. Pydantic's regex engine switch: pydantic/pydantic#7058 "
        "(v2 validates patterns with Rust regex, look-around patterns need regex_engine='python-re'), "
        "pydantic/pydantic-core#983 (the regex_engine switch between the Rust crate and Python's re), "
        "pydantic/pydantic-core#3 (about 0.24 us per match with Python's re against 0.12 us with Rust regex), "
        "datamodel-code-generator/datamodel-code-generator#1945 (generated models switched to python-re as "
        "soon as one pattern uses look-around) "
        "(measured by its author: 33.25 against the twin's 53.70 steps/s, medians of 3 runs each)",
        "none: configs/range_lab.toml sets regex_engine = 'rust-regex' (pydantic's default): the same schema, "
        "patterns and uploads are validated with the Rust regex engine inside pydantic-core in about half the "
        "time; the ingest thread keeps the trainer fed",
        r"(?i)regex_engine|python-re|rust-regex|regex engine|(python'?s? )?\bre\b module|\bsre\b|_sre|"
        r"re\.(compile|match|search|Pattern)|pattern (constraints?|validation|matching).{0,60}(python|re\b)|"
        r"\[schema\] regex_engine",
        r"step \d+ loss", batch="settings batch 21"),
    *_settings_pair(
        "settings21_drumlin", "settings21_drumlin", ("train.py",),
        ("train.py", "--config", "configs/survey_archive.toml"),
        "the intake profile (configs/survey_intake.toml, read at start-up) sets [sandbox] cpu_seconds = 2, "
        "which sandbox.limits_for applies in the decoder child (a preexec_fn) as RLIMIT_CPU = (2, 3): the "
        "long-lived tile decoder (python decoder.py) is killed by SIGXCPU as soon as it has used two "
        "CPU-seconds in all, about every 2 s of wall time, and DecoderPool starts a new one, which spends "
        "~0.9 s (interpreter start, numpy import, the dequantisation tables) before its first frame; the "
        "decoder is the pipeline's bottleneck, so the trainer loses those seconds waiting for frames",
        "train.main creates DecoderPool (python decoder.py --patches 64 --side 32 --tile 256, preexec_fn = "
        "sandbox.limits_for([sandbox]): setrlimit RLIMIT_CPU (cpu_seconds, cpu_seconds + 1), RLIMIT_AS 4 GiB, "
        "RLIMIT_CORE 0) and the frame-reader thread, which spawns a decoder, reads its frames until EOF, "
        "waits for it and spawns the next. RLIMIT_CPU counts all the CPU time a process has used since it "
        "started: at the soft limit the kernel sends SIGXCPU (default action: terminate; RLIMIT_CORE 0 keeps "
        "it from dumping core), at the hard limit SIGKILL. The decoder is CPU-bound (~10 ms per 256 x 256 "
        "tile: dequantise, gradients, despiking medians of 64 patches) and is the bottleneck, so with 2 "
        "CPU-seconds each decoder lives ~2 s, ~0.9 s of which (interpreter and numpy import, build_tables "
        "for 12,288 blocks) produce nothing; measured alone: first frame after 0.9 s, 99 frames, exit by "
        "signal 24 after 1.98 s. The reader sees EOF, forks and execs a new decoder, the queue drains and "
        "the training loop (main thread, a small CNN) waits in q.get; the step lines pause ~1 s every ~2 s. "
        "A Python stack of the reader shows read_exact -> readinto on the pipe in both configs (and "
        "DecoderPool.spawn, which the twin calls once); the decoder's shows build_tables or decode. Only the "
        "decoder's /proc/<pid>/limits (Max cpu time 2 3 seconds), its exit status (killed by signal 24, "
        "SIGXCPU) and the churn of decoder pids show the cause. A per-job CPU limit applied to a long-lived "
        "worker: GrahamDumpleton/mod_wsgi#167 (the cpu-time-limit counts from when the process first "
        "started, so the process is eventually restarted), supabase/edge-runtime#216 (workers retired at the "
        "CPU-time soft limit and terminated at the hard limit), paritytech/polkadot-sdk#1685 (RLIMIT_CPU set "
        "in worker processes: reaching it kills the process with SIGXCPU) "
        "(measured by its author: 46.89 against the twin's 87.86 steps/s, medians of 3 runs each)",
        "none: configs/survey_archive.toml sets cpu_seconds = 86400: the same sandbox applies RLIMIT_CPU = "
        "(86400, 86401) and the same 4 GiB address-space cap; the limit is never reached, one decoder runs "
        "for the whole run and keeps the trainer fed",
        r"(?i)RLIMIT_CPU|SIGXCPU|signal 24|cpu[- _]?time limit|cpu_seconds|setrlimit|\brlimit|"
        r"limits_for|cpu[- ]?(time )?(budget|allowance|quota per process)|\[sandbox\] cpu_seconds|"
        r"(decoder|worker|child)\w* (is |gets |being )?(killed|restarted|respawned|recycled).{0,80}"
        r"(cpu[- ]?(time|seconds)|limit)",
        r"step \d+ loss", batch="settings batch 21"),
    *_settings_pair(
        "settings22_alder", "settings22_alder", ("train.py",),
        ("train.py", "--config", "configs/survey_bench.toml"),
        "the fleet profile (configs/survey_fleet.toml, read at start-up) sets [runtime] distributed_debug = "
        "'DETAIL', which runtime.export puts into the environment as TORCH_DISTRIBUTED_DEBUG=DETAIL before "
        "torch is imported (the rank-1 worker inherits it): init_process_group then wraps the gloo process "
        "group of both ranks in c10d's ProcessGroupWrapper, which runs a consistency check before every "
        "collective (the op's fingerprint: op type, sequence number, tensor shapes, dtypes and devices, "
        "serialized and all-gathered over a second, helper gloo group, then compared) and only then the "
        "all-reduce itself; the three all-reduces of every step each become two loopback round trips between "
        "the ranks, and the step takes ~10 ms longer",
        "train.py (rank 0) exports the profile's [runtime] table (runtime.export: TORCH_DISTRIBUTED_DEBUG, "
        "GLOO_SOCKET_IFNAME=lo), starts the rank-1 worker (the same script with --rank 1, stdout to "
        "/dev/null) and both join a gloo process group over tcp://127.0.0.1. On each rank a plot-loader thread "
        "builds batches of 96 synthetic LiDAR plots (plots.PlotSampler: height histogram, intensity "
        "percentiles, return ratios, gap profile) into a queue, and the training loop runs a 3 x 256 MLP "
        "species classifier, then gradsync.GradientAverager.sync (the gradients packed into two flat buckets "
        "of <= 512 KiB, dist.all_reduce on each, divided by the world size), opt.step and "
        "gradsync.reduce_metrics (one more all_reduce of loss, correct, count); rank 0 prints the step lines. "
        "With TORCH_DISTRIBUTED_DEBUG=DETAIL (the planted configs/survey_fleet.toml) "
        "distributed_c10d._new_process_group_helper wraps the gloo backend with _create_process_group_wrapper "
        "(a ProcessGroupWrapper with a helper gloo group of its own); every all_reduce first runs runCollectiveChecks: it serializes the "
        "collective's fingerprint into a tensor, all-gathers it across the ranks on the helper group, "
        "compares, and only then dispatches the real all-reduce, so each collective waits for an extra "
        "synchronizing round trip with the other rank (~3.5 ms per collective here, both ranks sharing the "
        "2 CPUs with their loaders). The step grows from ~17 to ~27 ms on both ranks. A Python stack of either "
        "rank shows GradientAverager.sync -> dist.all_reduce (or reduce_metrics) in both configs, one native "
        "call; the wrapper, the helper group's extra socket pair between the ranks and the fingerprint "
        "all-gathers are only visible in the environment of the two processes (TORCH_DISTRIBUTED_DEBUG in "
        "/proc/<pid>/environ), the process group's type, a native stack (ProcessGroupWrapper::"
        "runCollectiveChecks) or the doubled traffic between the ranks. The debug wrapper and its cost: "
        "pytorch/pytorch#58281 (DETAIL wraps every gloo/nccl process group in ProcessGroupWrapper, 'there is "
        "a performance implication here'), pytorch/pytorch#58224 (ProcessGroupWrapper: on each collective the "
        "op type and shapes are all-gathered over a helper process group and verified before dispatch), "
        "pytorch/pytorch#22071 (the fingerprint-allgather design, calls fully serialized, meant as a "
        "debugging tool only) "
        "(measured by its author: 36.68 against the twin's 59.22 steps/s, medians of 3 runs each)",
        "none: configs/survey_bench.toml sets distributed_debug = 'INFO': the same variable, exported the same "
        "way to both ranks, but at INFO the process groups are not wrapped (the debug level is only logged "
        "at start-up); the same two buckets and metrics all-reduce run directly on gloo",
        r"(?i)TORCH_DISTRIBUTED_DEBUG|distributed[_ ]debug|debug(ging)?[ _-]?(level|mode)\W{0,5}(=|is|of|set to|at)?"
        r"\W{0,3}DETAIL|DETAIL[ _-]?(debug|mode|level)|ProcessGroupWrapper|process[- ]group wrapper|"
        r"(collective|op) fingerprint|fingerprint\w* (all[- ]?gather|check)|runCollectiveChecks|"
        r"collective (consistency|desync|verification) (check|debug)\w*|\[runtime\] distributed_debug",
        r"step \d+ loss", batch="settings batch 22"),
    *_settings_pair(
        "settings22_lagoon", "settings22_lagoon", ("train.py",),
        ("train.py", "--config", "configs/lagoon_lab.toml"),
        "the buoy gateway profile (configs/buoy_gateway.toml, read at start-up) sets [featureserver] "
        "listen_backlog = 5, which the feature service child (python featureserver.py --backlog 5) uses as "
        "its HTTPServer's request_queue_size, i.e. listen(5): the window fetcher opens 12 connections at once "
        "for every round, the single-threaded server takes them one at a time, the kernel's accept queue "
        "holds only 6, and the SYNs of the others are dropped (accept-queue overflow); those clients "
        "retransmit their SYN after TCP's 1 s initial retransmission timeout, so every round of windows takes "
        "~1.04 s instead of ~0.03 s and the trainer waits for batches",
        "train.main starts the feature service (featureserver.py: the stdlib http.server.HTTPServer, one "
        "request per connection, requests served in turn by its one thread; each GET /window/<station>/<hour> "
        "builds a 6 x 16,384 float32 sensor window, 393 KB, in ~2-3 ms) and the window-fetcher thread: per "
        "round it picks 12 stations, fetches their windows in parallel with a 12-thread ThreadPoolExecutor "
        "(urllib.request.urlopen each, a new loopback TCP connection per request in both configs), cuts 16 "
        "batches of 128 examples (a 4-hour context of the six sensors -> the oxygen one hour later) and "
        "queues them; the main thread trains a 1-D CNN nowcaster. With backlog 5 (the planted "
        "configs/buoy_gateway.toml) the listening socket's accept queue holds 6 established connections; the "
        "12 connects of a round arrive within a millisecond while the server is still serving the first, so "
        "~5 SYNs are dropped (ListenOverflows / ListenDrops in /proc/net/netstat, Recv-Q at 6 for the "
        "listener in ss -lnt during a burst) and their connect() calls sleep until the SYN retransmission 1 s later; then "
        "all succeed. Almost every round stalls ~1 s (measured alone: 93% of rounds, median 1.04 s, against "
        "0.03 s with backlog 256), the fetcher delivers ~16 batches per second and the training loop waits in "
        "q.get. A Python stack of the fetch threads shows urlopen -> socket.create_connection -> "
        "sock.connect in both configs (the twin's connects are merely short); the server's shows "
        "serve_forever. Only the listen backlog (the server's socket, its accept queue counters) and the "
        "kernel's drop counters show why connects take a second. Listen backlogs too small for bursts of "
        "connections: mitmproxy/mitmproxy#3046 (removed a low listen backlog that dropped connections under "
        "ordinary load), nicotine-plus/nicotine-plus#1471 (listen backlog of 1: accept queue overflows and "
        "drops reported by monitoring), gwsystems/sledge-serverless-framework#395 (accept-queue overflow under "
        "bursts of short non-keep-alive connections; clients retry only after the ~1 s initial SYN RTO, a "
        "~1 s tail) "
        "(measured by its author: 15.97 against the twin's 26.57 steps/s, medians of 3 runs each)",
        "none: configs/lagoon_lab.toml sets listen_backlog = 256: the same single-threaded feature service, "
        "the same 12 parallel per-request connections per round; the accept queue takes the whole burst, no "
        "SYN is dropped, a round takes ~30 ms and the fetcher keeps ahead of the trainer",
        r"(?i)listen(ing)?[ _-]?backlog|backlog (of |= ?)?\d|request_queue_size|accept[ -]?(queue|backlog)|"
        r"\bbacklog\b.{0,40}(listen|accept|socket|server|SYN|connect)|listen\(\s*\d|SYN (drop|retrans|retr|"
        r"timeout)\w*|SYNs? (are |were |being |get |got )?(dropped|retransmitted)|ListenOverflows|ListenDrops|"
        r"listen (queue )?overflow|somaxconn|\[featureserver\] listen_backlog",
        # Scored once: `pipeline-bottleneck-target` (info) in every mode, the listen backlog not named; named since by
        # `listen-queue-full` (FIXED_AFTER_SCORING, recorded again).
        r"step \d+ loss", batch="settings batch 22"),
    *_settings_pair(
        "settings22_scree", "settings22_scree", ("train.py",),
        ("train.py", "--config", "configs/field_fast.toml"),
        "the field-campaign audit profile (configs/field_audit.toml, read at start-up) sets [replay] "
        "foreign_keys = 'ON', which replay.ReplayStore runs as PRAGMA foreign_keys = ON on the replay "
        "store's SQLite connection: steps.segment_id REFERENCES segments(id) has no index, so when the actor "
        "thread evicts the oldest episode, SQLite checks every deleted segment row for child steps with a "
        "full scan of the 180,000-row steps table (and the episode row with a scan of segments); an eviction "
        "takes ~36 ms instead of ~0.2 ms, once per new episode, and the actor falls behind the learner",
        "train.main opens the replay store (replay.ReplayStore: an in-memory SQLite database with episodes <- "
        "segments(episode_id REFERENCES episodes) <- steps(segment_id REFERENCES segments), obs and next_obs "
        "as float32 BLOBs, no index on either child key), seeds it with 1,500 archived episodes and starts the "
        "actor thread: per episode it drives the scree-slope simulator (rover.py) with the scripted "
        "controller plus epsilon noise (80-160 steps), add_episode inserts the episode, its 20-step segments "
        "and its steps, evict_oldest removes the oldest episode (DELETE FROM steps WHERE id BETWEEN first AND "
        "last, DELETE FROM segments WHERE episode_id = ?, DELETE FROM episodes WHERE id = ?), and 4 batches of "
        "256 transitions are sampled (SELECT ... WHERE id IN (...)) into the queue; the main thread trains a "
        "double-DQN Q-network. With foreign key enforcement ON (the planted configs/field_audit.toml) each "
        "deleted parent row needs a look-up of its child rows; with no index on steps.segment_id that is a "
        "full scan of steps per deleted segment (~6-8 per episode, ~5.5 ms each over 180,496 rows) plus a scan "
        "of the 9,730 segments for the episode row: evict_oldest takes 35.7 ms instead of 0.19 ms (measured "
        "alone). The actor (the only producer) now delivers ~70 batches per second instead of more than the "
        "learner's ~110, and the training loop waits in q.get. The scans run inside sqlite3_step with the GIL "
        "released, so the CPU time shows up under the actor thread's one native call. A Python stack of the "
        "actor shows ReplayStore.evict_oldest -> Connection.execute('DELETE FROM segments ...') in both "
        "configs; only the connection's foreign_keys pragma (from the profile), the schema's unindexed child "
        "keys (EXPLAIN QUERY PLAN of the delete: SCAN steps) or a native profile (sqlite3VdbeExec in the FK "
        "check loop) show why the delete is slow. Foreign key enforcement against unindexed child keys: "
        "ElementsProject/lightning#4325 (with PRAGMA foreign_keys=on, deleting one peer took 469 s without an "
        "index on the child key and 1.9 s with it), mozilla/application-services#6267 (an index on the child "
        "column only to speed up the FK check of deletes; benchmark times skyrocket without it), "
        "brave/brave-browser#7082 (unindexed foreign keys: SQLite scans the child table for every parent "
        "row deleted) "
        "(measured by its author: 71.46 against the twin's 110.75 steps/s, medians of 3 runs each)",
        "none: configs/field_fast.toml sets foreign_keys = 'OFF' (SQLite's default): the same schema, store, "
        "eviction order and deletes, but SQLite does not look for child rows of the deleted segments and "
        "episode; an eviction takes ~0.2 ms and the actor keeps ahead of the learner",
        r"(?i)foreign[_ ]keys?|PRAGMA foreign|\bFK\b|(unindexed|no index on|without an? index on|missing "
        r"index\w*).{0,60}(segment_id|child|steps|foreign)|child (key|table|rows?).{0,40}(scan|index)|"
        r"full (table )?scans?.{0,60}(steps|child|delet|evict)|(scan\w*|SCAN) (of )?(the )?steps|"
        r"\[replay\] foreign_keys",
        # Scored once: the actor limiting in libsqlite3's DELETE, the pragma not named; named since by the pragma
        # read from the SQL text and SQLite's row reads as its mechanism (FIXED_AFTER_SCORING, recorded again).
        r"step \d+ loss", batch="settings batch 22"),
    *_settings_pair(
        "settings22_puffin", "settings22_puffin", ("train.py",),
        ("train.py", "--config", "configs/colony_stream.toml"),
        "the colony profile shared with the annotation tool (configs/colony_annotate.toml, read at start-up) "
        "sets [schema] revalidate_instances = 'always', which schema.build puts into the pydantic ConfigDict "
        "of the Visit, Box, Weather and BurrowHistory models: every already validated Visit instance that the "
        "history builder thread puts into a BurrowHistory is validated again from its attributes (patterns, "
        "datetime, the 48 frame scores, every nested detector Box and the Weather) and copied into a new "
        "instance, 4,096 visits per batch, all in pydantic-core with the GIL held; building a batch's "
        "histories takes ~28 ms instead of ~0.3 ms and the builder falls behind the trainer",
        "train.main starts the camera replay (python cameras.py: burrow visits as JSON lines, 2,000 per "
        "second), the ingest thread (Visit.model_validate_json for each line, the last 16 visits of each of "
        "400 burrows kept in deques), the history-builder thread (per batch it draws 256 burrows, wraps each "
        "one's last 16 Visit instances in BurrowHistory(burrow=..., visits=[...]), computes the features from "
        "the history and queues the batch) and trains a GRU provisioning-rate model in the main thread. "
        "Pydantic's revalidate_instances controls what happens when a model instance is passed to a model "
        "field: with 'never' (its default, the twin) the instance is accepted as it is (an isinstance check, "
        "the same object); with 'always' (the planted configs/colony_annotate.toml) pydantic-core re-runs the "
        "whole validator on the instance's __dict__ (two regex-constrained strings, the datetime, 48 floats, "
        "2-7 nested Box models with bounds and a Literal, the nested Weather model) and builds a new "
        "instance. Building one batch's 256 histories takes 27.9 ms instead of 0.30 ms and the builder's "
        "batch 31 ms instead of 8 ms (measured alone), all holding the GIL, so the training loop's Python is "
        "held up as well and it waits for batches in q.get. A Python stack of the builder shows "
        "history_builder -> BurrowHistory.__init__ (one call into pydantic_core's validate_python) in both "
        "configs; only the models' configuration (model_config['revalidate_instances']), or noticing that "
        "h.visits[0] is no longer the Visit that was passed in, shows that every visit is validated again. "
        "Re-validating and copying model instances passed between models: PrefectHQ/prefect#12644 "
        "(copy_on_model_validation 'none' carried over to revalidate_instances so child models passed between "
        "models are not copied again), flexcompute/tidy3d#507 (pydantic copying models passed to other models "
        "during validation: a lot of overhead with many structures, turned off), pydantic/pydantic#4093 "
        "(copy_on_model_validation made selectable after the 1.9.1 deep copies) "
        "(measured by its author: 12.57 against the twin's 26.55 steps/s, medians of 3 runs each)",
        "none: configs/colony_stream.toml sets revalidate_instances = 'never' (pydantic's default): the same "
        "schema and the same BurrowHistory wrapping of every batch, but the Visit instances validated at "
        "ingest are put into the histories as they are; the builder keeps ahead of the trainer",
        r"(?i)revalidate_instances|re-?validat\w*|validat\w* (again|twice|anew|a second time)|"
        r"copy_on_model_validation|(instances?|visits?|models?) (are |is |being )?(re-?validated|validated "
        r"again|copied and validated)|\[schema\] revalidate",
        r"step \d+ loss", batch="settings batch 22",
        twin_missed={"probes": "a warning on its first run (the harness keeps no more of it than its headline's start, `the consumer stage of `out` limits throughput ... because`); the run recorded has none"}),
    *_settings_pair(
        "settings23_ibis", "settings23_ibis", ("train.py", "--config", "configs/field_station.toml"),
        ("train.py", "--config", "configs/lab_replay.toml"),
        "the field-station profile (configs/field_station.toml, read at start-up) sets [catalog.pragmas] "
        "automatic_index = \"OFF\", which catalog.ClipCatalog runs as PRAGMA automatic_index = OFF on the "
        "in-memory SQLite clip catalog: the per-batch site query joins clips to the annotation export "
        "(labels, no index on its (recorder, start_ms) join key), and without SQLite's automatic (transient) "
        "index the planner can only nest a full SCAN of labels inside the loop over the site's clips "
        "(260 x 4,160 row visits per batch, ~46 ms of CPU instead of ~2 ms), so the loader thread falls "
        "behind the trainer; SQLite builds exactly such an automatic index to avoid a naive nested-loop "
        "join (tursodatabase/turso#747), and when fewer automatic indexes get built complex joins run up to "
        "5000x longer (cap-js/cds-dbs#887)",
        "train.py starts the site loader thread (loader.SiteBatchLoader), which builds the survey catalog "
        "at start-up in an in-memory SQLite database (catalog.ClipCatalog: 4,160 clips of 16 sites with an "
        "index on clips(site), 4,160 annotation rows imported in shuffled order without an index, 120 "
        "recorders with a primary key), applies the profile's [catalog.pragmas] (cache_size, temp_store, "
        "automatic_index) and runs ANALYZE once; then per batch it picks a site, runs SITE_QUERY (clips of "
        "the site JOIN labels ON recorder AND start_ms JOIN recorders, confidence >= 0.2), gathers the "
        "clips' 96-d embeddings plus five side features and queues ~260 examples; the main thread trains a "
        "3 x 768 MLP species classifier (AdamW, ~22 ms a step). With automatic_index = OFF (the planted "
        "configs/field_station.toml) EXPLAIN QUERY PLAN reads SEARCH c USING INDEX clips_by_site, SEARCH r "
        "USING INDEX sqlite_autoindex_recorders_1, SCAN l: every one of the ~260 clip rows rescans all "
        "4,160 labels (~1.1 M row visits, ~46 ms of CPU per query against ~2.3 ms when SQLite builds its "
        "AUTOMATIC PARTIAL COVERING INDEX on labels(recorder, start_ms) for the statement), the loader "
        "delivers ~22 batches per second and the training loop waits in out.get(). A Python stack shows the "
        "loader in ClipCatalog.site_rows -> Cursor.execute / fetchall (sqlite3_step, GIL released) in "
        "both configs, with the same SQL text; the missing transient index is visible only in the "
        "connection's PRAGMA automatic_index, the query plan (EXPLAIN QUERY PLAN: SCAN l instead of "
        "AUTOMATIC ... INDEX) or the statement's full-scan step counters (SQLITE_STMTSTATUS_FULLSCAN_STEP "
        "against SQLITE_STMTSTATUS_AUTOINDEX). Automatic indexes and their absence: tursodatabase/turso#747 "
        "(SQLite uses an automatic ephemeral index to avoid a naive nested loop join when no usable index "
        "exists), cap-js/cds-dbs#887 (SQLite 3.47 building fewer automatic indexes made complex join queries "
        "take up to 5000x longer, fixed with explicit indexes), duplicati/duplicati#7141 (the automatic "
        "index on ... messages SQLite logs for joins on unindexed columns, which is why profiles switch the "
        "feature off) "
        "(measured by its author: 22.01 against the twin's 43.61 steps/s, medians of 3 runs each)",
        "none: configs/lab_replay.toml sets automatic_index = \"ON\" (SQLite's default): the same unindexed "
        "labels table and the same SQL, but the planner builds a transient covering index on "
        "labels(recorder, start_ms) for each execution (~2 ms) and the loader stays ahead of the trainer; "
        "its other pragmas (cache_size = -32768, temp_store = MEMORY), the one-off ingest and ANALYZE at "
        "start-up and the loader's brief count lock are the same in both configs and harmless",
        r"(?i)automatic[_ ]index|auto[- ]?index(es|ing)?\b|automatic (partial |covering |transient )*index|"
        r"(transient|ephemeral|temporary) (b-?tree )?index|nested[- ]loop (join|scan)|full (table )?"
        r"scan\w* (of|on|over) (the )?(labels|annotation)|SCAN l\b|(query )?plan\w*.{0,40}(SCAN|nested|"
        r"full[- ]scan)|FULLSCAN_STEP|\[catalog\.pragmas\] automatic_index",
        r"step \d+ loss", batch="settings batch 23"),
    *_settings_pair(
        "settings23_wren", "settings23_wren", ("train.py", "--config", "configs/edge_assay.toml"),
        ("train.py", "--config", "configs/bench_notes.toml"),
        "the edge-assay profile (configs/edge_assay.toml, read at start-up) sets [tokenizer] word_cache = 0, "
        "which subwords.build_tokenizer passes to the Hugging Face tokenizers BPE model as "
        "cache_capacity=0: the BPE word cache is off, so every pre-token of every record (long reagent "
        "names of 9-20 parts, most of them repeated from a long-tailed catalogue) is merged from its "
        "characters again in Rust instead of being looked up, and the feed thread's encode_batch takes "
        "about twice as long; the same missing cache cost ~50% more encoding time in "
        "huggingface/tokenizers#1550, and capacity 0 opting out of the word cache means every pre-token is "
        "merged from scratch (huggingface/tokenizers#2307)",
        "train.py loads the profile (options.load also exports TOKENIZERS_PARALLELISM=false from "
        "[tokenizer] parallelism), builds a synthetic catalogue of 8,000 reagent names (lexicon.Lexicon: "
        "9-20 chemical name parts joined, Zipf-distributed usage), trains a 4,000-token BPE vocabulary on "
        "5,000 lines once at start-up (subwords.train_vocabulary, ~0.4 s), then rebuilds the run tokenizer "
        "from that vocab and merges with models.BPE(..., cache_capacity=[tokenizer] word_cache), Whitespace "
        "pre-tokenizer, padding to a multiple of 8 and truncation at 256. The feed thread (feed.RecordFeed) "
        "samples 192 records of 24 reagent names, calls tokenizer.encode_batch, converts ids and attention "
        "masks to tensors and queues them with a yield class; the main thread trains an EmbeddingBag (mean "
        "and max) + 2 x 512 MLP yield classifier (~18 ms a step). With word_cache = 0 (the planted "
        "configs/edge_assay.toml) the BPE model keeps no word -> token-ids cache: each of the ~4,600 names "
        "per batch (mostly the same few hundred frequent ones) is split into characters and merged again "
        "through the merge-priority queue, ~28 ms of CPU per batch against ~14 ms with the cache, so the "
        "feed thread becomes the bottleneck and the training loop waits in out.get(). A Python stack shows "
        "the feed thread inside Tokenizer.encode_batch (native, GIL released) in both configs and the "
        "trainer in forward/backward or the queue; the cache size is not exposed by the Python BPE object "
        "and not serialized by tokenizer.to_str(), so only the configuration, a native stack "
        "(BPE::merge_word / word_to_tokens dominating instead of cache hits) or the feed's per-batch time "
        "shows it. Reports: huggingface/tokenizers#1550 (BPE with the word cache disabled, the dropout = "
        "0.0 path of #1541: ~50% more encoding time on a small benchmark), huggingface/tokenizers#2307 (a "
        "config setting capacity 0 opts out of the word cache; without it every pre-token is merged from "
        "scratch even when the same word appeared moments earlier, on text with any repetition most of the "
        "work) "
        "(measured by its author: 28.98 against the twin's 47.72 steps/s, medians of 3 runs each)",
        "none: configs/bench_notes.toml sets word_cache = 40000 (a non-default size that holds the whole "
        "catalogue): the same vocabulary, merges, padding and truncation, frequent names are merged once and "
        "then served from the cache, and the feed keeps ahead of the trainer; TOKENIZERS_PARALLELISM=false, "
        "pad_multiple = 8, the one-off BPE training at start-up and the feed's brief tally lock are the same "
        "in both configs and harmless",
        r"(?i)cache_capacity|word[_ ]cache|BPE (word |merge |token )?cache|(tokeni[sz]er|tokenizers|BPE)\W"
        r".{0,50}cache\w* (is )?(disabled|off|of 0|capacity|size|set to 0|=\s*0|0\b)|cache (disabled|off|"
        r"capacity\W{0,3}0).{0,50}(BPE|tokeni[sz]|merge)|(no|without( a)?) (BPE |word |merge )?cache.{0,40}"
        r"(BPE|tokeni[sz]|merge)|merg\w+ (every|each) (word|pre-?token|name)\w* (again|from scratch|anew)|"
        r"\[tokenizer\] word_cache",
        # Scored once: the feeder limiting in tokenizers' BPE merges, the cache not named; named since by the BPE
        # cache_capacity read from the code and its configuration, with the merges as its mechanism
        # (FIXED_AFTER_SCORING, recorded again).
        r"step \d+ loss", batch="settings batch 23"),
    *_settings_pair(
        "settings23_caldera", "settings23_caldera", ("train.py", "--config", "configs/summit_array.toml"),
        ("train.py", "--config", "configs/observatory_lab.toml"),
        "the summit-array profile (configs/summit_array.toml, read at start-up) sets [reader] "
        "sq_poll_idle_ms = 2000, which ringio.Ring turns into io_uring_setup(IORING_SETUP_SQPOLL, "
        "sq_thread_idle = 2000) for each of the two window readers' rings: each ring gets a kernel "
        "submission-queue polling thread (iou-sqp-<pid>, a thread of the trainer process) that busy-polls "
        "its queue for 2 s after every submission, and with a batch of reads every ~40 ms it never goes to "
        "sleep, so two spinning kernel threads take CPU from the readers and the trainer on the 2-core box; "
        "with sq_thread_idle = 2000 the SQ thread never sleeps and takes an entire CPU "
        "(axboe/liburing#846, #407)",
        "train.py stages a synthetic multi-station waveform archive once at start-up into an in-memory "
        "file (archive.WaveformArchive: memfd_create, 3,840 windows of 3 x 4,096 int16 samples, ~94 MB) and "
        "starts two window-reader threads (reader.start_readers); each owns an io_uring (ringio.Ring, "
        "io_uring_setup/io_uring_enter through ctypes) and per batch picks 64 random windows, submits 64 "
        "IORING_OP_READ positional reads of 24 KB into a numpy buffer, waits for the completions "
        "(io_uring_enter with GETEVENTS), conditions them in torch (gain, demean, taper, rfft band-pass and "
        "upper band, envelope and band ratio) and queues 9-channel tensors; the main thread trains a 1-D "
        "CNN event classifier (~23 ms a step). With sq_poll_idle_ms = 2000 (the planted "
        "configs/summit_array.toml) both rings are created with IORING_SETUP_SQPOLL and sq_thread_idle = "
        "2000 ms: the kernel starts one iou-sqp-<pid> thread per ring that executes the submissions and "
        "then keeps polling the empty queue until 2 s pass without work, which never happens; the two SQ "
        "threads each use ~45% of a CPU, the trainer and the readers get what is left, and the rate drops "
        "by nearly half. A Python stack shows the readers in Ring.read_many -> _enter (the io_uring_enter "
        "syscall) or in _condition, and the trainer in forward/backward or batches.get(), in both configs; "
        "the SQ threads are not Python threads: they appear only in /proc/<pid>/task (comm iou-sqp-<pid>, "
        "state R, high utime/stime), in the ring's /proc/<pid>/fdinfo (SqThread: <tid>, SqTotalTime far "
        "above SqWorkTime: 1.62 s of polling against 15 ms of work in one sample) and in per-thread CPU "
        "accounting. SQPOLL idle time and CPU: axboe/liburing#846 "
        "(sq_thread_idle = 2000: the SQ thread probably never sleeps and can take one entire CPU polling), "
        "axboe/liburing#407 (sq_thread_idle 2000 gives severe degradation even with no I/O going on; 10 ms "
        "makes it go away), axboe/liburing#997 (io_sq_thread taking all the CPU), chimera-nas/libevpl#166 "
        "(a ring per thread with SQPOLL and a 1 s spin-idle: iou-sqp threads at ~80% CPU each and 1.5-3x "
        "slower runs; SQPOLL made opt-in) "
        "(measured by its author: 23.02 against the twin's 42.99 steps/s, medians of 3 runs each)",
        "none: configs/observatory_lab.toml sets sq_poll_idle_ms = 0, so ringio.Ring creates the same two "
        "rings without IORING_SETUP_SQPOLL and submits each batch of reads with io_uring_enter(to_submit, "
        "GETEVENTS) from the reader thread itself: no kernel polling thread, the same reads and "
        "conditioning; ring_entries = 128, gain_table = \"field\", the one-off archive staging and the "
        "readers' brief stats lock are the same in both configs and harmless",
        r"(?i)SQ_?POLL|sq[_ ]poll|sq_thread_idle|iou-sqp|(submission|SQ)[- ](queue )?(poll\w*|thread)|"
        r"io_uring.{0,60}(poll\w*|kernel thread|spin\w*|busy)|(kernel|submission)[- ](side )?poll(ing|er)"
        r"( thread)?|(poll(ing|er)|kernel) thread.{0,60}(io_uring|ring|submission)|busy[- ]?(poll|spin)"
        r"\w*.{0,60}(io_uring|ring|kernel thread)|\[reader\] sq_poll_idle_ms",
        # Scored once: the trainer limiting, the threads waiting for a CPU; named since by `own-threads-take-cpu`
        # (FIXED_AFTER_SCORING).
        r"step \d+ loss", batch="settings batch 23"),
    *_settings_pair(
        "settings23_avocet", "settings23_avocet", ("train.py", "--config", "configs/tidal_uplink.toml"),
        ("train.py", "--config", "configs/estuary_replay.toml"),
        "the tidal-uplink profile (configs/tidal_uplink.toml, read at start-up) sets [diagnostics] "
        "coroutine_origin_depth = 64, which tuning.prepare_event_thread applies in the ingest thread (the "
        "thread that owns the asyncio loop) as sys.set_coroutine_origin_tracking_depth(64): from then on "
        "every coroutine object created in that thread records its origin, a walk up the creating frames "
        "that builds a (filename, line number, function) tuple for each of them (python/cpython#5250), and "
        "the ingest pipeline creates ~14,000 small coroutines per batch (seven awaits per decoded uplink "
        "record), so the loader's CPU per batch triples and the trainer waits; this is the per-thread "
        "interpreter setting alone, not asyncio debug mode (loop.get_debug() stays False)",
        "train.py pools 20,000 synthetic GPS-tag uplink records once at start-up (telemetry.build_pool: "
        "struct-packed fixes with a CRC32) and starts the telemetry-ingest thread (ingest.TelemetryIngest), "
        "which creates its own event loop, calls tuning.prepare_event_thread (coroutine origin depth, a "
        "warnings filter for never-awaited coroutines, a 2-thread default executor) and runs pump(): per "
        "batch asyncio.gather over 8 lanes, each building 16 windows of 16 fixes, where every fix is "
        "await fix() -> await next_record(), await decode() -> await unframe() -> await verify() (CRC), "
        "await motion(), await position(); 128 windows of 16 x 10 features go to the queue through "
        "asyncio.to_thread, and the main thread trains a 2 x 1,024 MLP behaviour classifier (~15 ms "
        "of compute a step). With coroutine_origin_depth = 64 (the planted configs/tidal_uplink.toml) each of the "
        "~14,300 coroutine creations per batch captures cr_origin: the interpreter walks up to 64 frames of "
        "the creating stack (here ~12-14: threading bootstrap, run_until_complete, run_forever, _run_once, "
        "Handle._run, lane_batch, window, fix, ...), computes each frame's line number and builds the tuple "
        "of (filename, lineno, name) tuples; measured alone, the ingest thread needs ~32 ms of CPU per "
        "batch against ~10 ms, it holds the GIL while doing so, and the training loop waits in out.get(). A "
        "Python stack shows the same asyncio frames (_run_once -> Lane.window -> fix -> decode ...) in both "
        "configs, because the origin capture runs inside the creation of the coroutine object, in C, "
        "attributed to the calling line; only sys.get_coroutine_origin_tracking_depth() in that thread, "
        "the cr_origin attribute of its live coroutines, or a native profile (_Py_MakeCoro / "
        "compute_cr_origin, PyFrame_GetLineNumber) shows it. The setting and its cost: python/cpython#5250 "
        "(bpo-32591, native coroutine origin tracking: on every coroutine creation with depth > 0 a list of "
        "(filename, lineno, funcname) tuples is built for up to depth frames), Tribler/tribler#6762 "
        "(origin tracking switched on to find where never-awaited coroutines were created), "
        "hikari-py/hikari#449 (a library provisionally setting the tracking depth; the setting is per "
        "thread), Kotlin/kotlinx.coroutines#3783 (capturing coroutine creation stack traces is the heaviest "
        "operation in the coroutine lifecycle, double-digit overhead in production) "
        "(measured by its author: 22.06 against the twin's 44.37 steps/s, medians of 3 runs each)",
        "none: configs/estuary_replay.toml sets coroutine_origin_depth = 0: the same call in the ingest "
        "thread, but with depth 0 coroutines record no origin and creating one costs ~0.1 us; the "
        "never_awaited = \"always\" warnings filter (no coroutine is ever left unawaited, so it never "
        "fires), the 2-thread handoff executor, the one-off record pool and the ingest's brief count lock "
        "are the same in both configs and harmless",
        r"(?i)coroutine[_ ]origin|set_coroutine_origin_tracking_depth|origin[_ ]tracking|cr_origin|"
        r"coroutine (creation|origin) (stack|traceback|trace|frame)s?|(record|captur|walk|build)\w* (the |"
        r"its )?(creation|origin|creating) (stack|frames?|traceback)|origin (depth|stack)|"
        r"\[diagnostics\] coroutine_origin_depth",
        r"step \d+ loss", batch="settings batch 23"),
    *_settings_pair(
        "settings24_godwit", "settings24_godwit", ("train.py", "--config", "configs/nocturnal_survey.toml"),
        ("train.py", "--config", "configs/coastal_replay.toml"),
        "the nocturnal-survey profile (configs/nocturnal_survey.toml, read at start-up) sets [features] "
        "contraction_path = \"none\", which featurize.Featurizer passes to every np.einsum call of the radar "
        "featurizer as optimize=False: NumPy then evaluates each contraction with its own nested "
        "sum-of-products loops (c_einsum) instead of planning it and handing the pairwise contraction to "
        "tensordot / BLAS GEMM, so the range-gate pooling of each batch's reflectivity volumes "
        "(bear,rg->beag, 24 x 4 x 240 x 128 gates into 24 height bins) takes ~30 ms instead of ~1.7 ms and the "
        "scan loader falls behind the trainer; einsum does not use BLAS when optimize is False "
        "(numpy/numpy#11686), and turning optimize on made tinygrad's CPU backward pass ~4x faster "
        "(tinygrad/tinygrad#1213)",
        "train.py reads the profile (settings.load also exports OPENBLAS_NUM_THREADS=1 and OMP_NUM_THREADS=1 "
        "from [runtime] before numpy and torch are imported) and starts the scan loader thread "
        "(loader.ScanLoader): at start-up it synthesises 64 weather-radar reflectivity volumes of nights of "
        "bird migration (radar.VolumeArchive: 4 elevations x 240 azimuths x 128 range gates, one "
        "migration-intensity class each) and the site's beam geometry once (featurize.BeamGeometry: gate -> "
        "height-bin kernel, azimuth -> sector weights, a QR-orthonormalised elevation -> beam-mode mixing); "
        "per batch it draws 24 volumes (gain jitter, azimuth roll, noise), computes four einsum contractions "
        "(height profiles bear,rg->beag; sector means beag,as->besg; beam modes besg,ek->bskg; texture "
        "beag,beah->begh), log-scales them into 12 sector rows per volume and queues 288 normalised rows; "
        "the main thread trains a 2 x 1,024 MLP migration-intensity classifier (AdamW, ~25 ms a step). With "
        "contraction_path = \"none\" (the planted configs/nocturnal_survey.toml) every call runs with "
        "optimize=False: the 5-index gate pooling is a direct nested loop in c_einsum (~30 ms against "
        "~1.7 ms through tensordot and sgemm with optimize=\"greedy\"), the sector pooling ~2.1 ms against "
        "~0.6 ms, so the loader needs ~40 ms a batch against the trainer's ~25 ms and the training loop "
        "waits in loader.out.get(). c_einsum releases the GIL, so this is not GIL contention: the loader "
        "thread is simply busy in NumPy's C loop. A Python stack shows the loader in Featurizer.__call__ -> "
        "numpy einsum (the same lines, the same subscripts) in both configs; in the healthy twin it passes "
        "through einsum_path / tensordot and a BLAS gemm, in the planted one it stays in c_einsum, and only "
        "the optimize argument (the profile's contraction_path) or a native profile (sum-of-products inner "
        "loops instead of sgemm kernels) shows why. Reports: numpy/numpy#11686 (einsum does not use BLAS "
        "when optimize==False; the same contraction runs much slower than with optimize=True), "
        "tinygrad/tinygrad#1213 (switching np.einsum to optimize=True: backward pass from 820 ms to 209 ms "
        "on CPU), wannier-berri/wannier-berri#28 (an einsum contraction that does not reach BLAS ~28x slower "
        "than the same work as matmul) "
        "(measured by its author: 25.12 against the twin's 38.32 steps/s, medians of 3 runs each)",
        "none: configs/coastal_replay.toml sets contraction_path = \"greedy\": the same four einsum calls with "
        "optimize=\"greedy\", so NumPy plans each contraction (einsum_path) and runs the pairwise ones "
        "through tensordot and BLAS sgemm (~2 ms of featurizing a batch) and the loader stays ahead of the "
        "trainer; blas_threads = 1 and torch_threads = 1 (OPENBLAS_NUM_THREADS / OMP_NUM_THREADS exported "
        "at start-up), dtype = \"float32\", the one-off archive synthesis and beam-geometry QR at start-up "
        "and the loader's brief stats lock are the same in both configs and harmless",
        r"(?i)einsum.{0,80}(optimi[sz]|contraction[ _-]?(path|order|plan)|\bpath\b|BLAS|GEMM|tensordot|"
        r"c_einsum|naive|nested[- ]loop|sum[- ]of[- ]products)|(optimi[sz]|contraction[ _-]?(path|order|plan)|"
        r"BLAS|GEMM|tensordot).{0,60}einsum|optimize\s*=\s*False|contraction_path|c_einsum|einsum_path|"
        r"\[features\] contraction_path",
        r"step \d+ loss", batch="settings batch 24"),
    *_settings_pair(
        "settings24_petrel", "settings24_petrel", ("train.py", "--config", "configs/colony_uplink.toml"),
        ("train.py", "--config", "configs/lab_bench.toml"),
        "the colony-uplink profile (configs/colony_uplink.toml, read at start-up) sets [tls] ca_file = "
        "\"certifi\", which fieldcfg.load exports as SSL_CERT_FILE=<certifi's cacert.pem> (the lab CA is "
        "found through SSL_CERT_DIR): the track fetcher's urllib.request.urlopen builds a new default "
        "SSLContext for every HTTPS request, and loading the default verify paths now makes OpenSSL 3.0 "
        "parse all 117 root certificates of that bundle each time (~14 ms a context instead of ~0.4 ms with "
        "the one-certificate lab bundle), two requests per batch, so the fetcher falls behind the trainer; "
        "set_default_verify_paths / load_verify_locations got ~5x slower with OpenSSL 3.0 "
        "(python/cpython#95031), and reloading root certificates per request is a known cost "
        "(psf/requests#6667, encode/httpx#838)",
        "train.py loads the profile (fieldcfg.load exports SSL_CERT_FILE from [tls] ca_file and "
        "SSL_CERT_DIR=certs/trust, the lab CA's hashed directory) and starts the colony tracking service as "
        "a child process (python colonyd.py: synthetic GPS-logger tracks of 8 colonies x 48 birds x 4,096 "
        "fixes with behaviour labels, built once at start-up, served over HTTPS on 127.0.0.1 by a "
        "ThreadingHTTPServer with an ECDSA certificate signed by the shipped lab CA, TLS >= 1.2), then the "
        "track fetcher thread (fetch.TrackFetcher): per batch two urllib.request.urlopen GETs (a 256-fix "
        "window of every bird of one colony, ~300 KB with labels, and the 3 x 32 x 32 sea-state grid around "
        "it), each on a new connection with urllib's default context, cut into 64-fix segments (relative "
        "position, speed, turning, dive depth, altitude, sea state) and queued as 192 segments; the main "
        "thread trains a 3-layer Conv1d behaviour classifier (~22 ms a step). With ca_file = \"certifi\" (the "
        "planted configs/colony_uplink.toml) every urlopen goes http.client.HTTPSConnection -> "
        "ssl._create_default_https_context -> create_default_context -> load_default_certs -> "
        "set_default_verify_paths, and OpenSSL reads and parses the whole certifi bundle (117 PEM "
        "certificates, 234 KB) into the new context's X509 store: ~14 ms per context against ~0.4 ms, a "
        "request ~17 ms against ~2 ms, the fetcher ~34 ms a batch against ~4.4 ms, and the training loop "
        "waits in fetcher.out.get(); the verification itself, the TLS handshake and the transfer cost the "
        "same in both configs. A Python stack shows the fetcher in get_array -> urlopen -> ... -> "
        "create_default_context / load_default_certs in both configs (the same calls, far hotter in the "
        "planted one); the bundle being parsed is visible only in the process environment (SSL_CERT_FILE), "
        "the profile, a native profile (PEM_X509_INFO_read_bio / X509_STORE_add_cert / d2i_X509 under "
        "SSL_CTX_set_default_verify_paths) or the per-context cost. Reports: python/cpython#95031 (OpenSSL "
        "3.0: SSLContext.set_default_verify_paths / load_verify_locations about 5x slower; a minimal CA "
        "bundle is much faster to parse), psf/requests#6667 (avoid reloading root certificates on every "
        "request: load_verify_locations is slow), encode/httpx#838 (CA certificates loaded for every "
        "connection dominate request time), urllib3/urllib3#3623 (high CPU in load_verify_locations from "
        "loading the same certificates again), sethmlarson/truststore#171 (~15 ms per "
        "create_default_context on Linux, mostly loading the certifi bundle) "
        "(measured by its author: 27.28 against the twin's 43.56 steps/s, medians of 3 runs each)",
        "none: configs/lab_bench.toml sets ca_file = \"certs/lab_ca.pem\": SSL_CERT_FILE points at the "
        "one-certificate lab CA, so the same new default context per urlopen loads one certificate "
        "(~0.4 ms) and the fetcher stays ahead of the trainer; SSL_CERT_DIR = certs/trust (the lab CA's "
        "hashed directory), minimum_version = \"TLSv1_2\", the per-request connection and TLS handshake, "
        "the one-off track synthesis in the service child at start-up and the fetcher's brief count lock "
        "are the same in both configs and harmless",
        r"(?i)SSL_CERT_FILE|CA[- ]?(cert(ificate)?s? )?bundle|trust[- ]?store|root cert(ificate)?s?|"
        r"\bca_?file\b|cacert\.pem|certifi|load_verify_locations|set_default_verify_paths|load_default_certs|"
        r"create_default_context|(SSL|TLS)[ _-]?context\w*.{0,60}(per|every|each|new|fresh|re-?creat|rebuil|"
        r"load|pars)|(load|pars|read)\w*.{0,40}(CA|root|trusted|verify) ?(cert|path|location)|"
        r"cert(ificate)?s? (are |is )?(re-?)?(load|pars)\w*|verify[_ ]paths?|\[tls\] ca_file",
        r"step \d+ loss", batch="settings batch 24"),
    *_settings_pair(
        "settings24_mesa", "settings24_mesa", ("train.py", "--config", "configs/mesa_uplink.toml"),
        ("train.py", "--config", "configs/archive_review.toml"),
        "the mesa-uplink profile (configs/mesa_uplink.toml, read at start-up) sets [uplink] max_pacing_mbit "
        "= 300, a cap meant for the field station's radio link, which the tile server child applies to "
        "every client connection as setsockopt(SO_MAX_PACING_RATE, 37.5 MB/s): the kernel's TCP pacing then "
        "spaces the loopback stream of patches to 300 Mbit/s (tcp_info pacing_rate 300000000bps/"
        "300000000bps), so each batch's ~885 KB of patches takes ~24 ms to arrive instead of well under a "
        "millisecond and the tile loader falls behind the trainer; a pacing rate set by a tool caps "
        "throughput far below what the path can carry (esnet/iperf#325, "
        "phoronix-test-suite/test-profiles#86)",
        "train.py reads the profile and starts the scene tile server as a child process (python "
        "tileserver.py with the [archive] and [uplink] values as arguments: 24 synthetic dryland scenes of "
        "6 bands x 256 x 256 with a land-cover map, built once at start-up, served on a 127.0.0.1 TCP port "
        "with a length-prefixed binary protocol; per accepted connection it sets TCP_NODELAY, SO_KEEPALIVE, "
        "SO_SNDBUF = 4 MiB and, when max_pacing_mbit > 0, SO_MAX_PACING_RATE), then the tile loader thread "
        "(tiles.TileLoader): over one persistent connection it requests 64 patches of 24 x 24 per batch, "
        "receives ~885 KB (float32 patches + centre classes), flips and cloud-masks them, adds five "
        "spectral indices (NDVI, SAVI, NDMI, NBR, BSI) and queues normalised 11-channel tensors; the main "
        "thread trains a 3-conv land-cover CNN (Adam, ~13-15 ms a step). With max_pacing_mbit = 300 (the "
        "planted configs/mesa_uplink.toml) the server's socket is paced by the kernel at 37.5 MB/s (setting "
        "SO_MAX_PACING_RATE turns on TCP's internal pacing even without an fq qdisc): each reply leaves in "
        "paced bursts, the server thread sits in sendall with the rest of the reply in the send queue "
        "(notsent bytes in ss -ti), the loader sits in recv_into for ~24 ms a batch, and the training loop "
        "waits in loader.out.get(); CPU use drops rather than rises. A Python stack shows the loader in "
        "TileLoader._recv_exact -> socket.recv_into and the server in serve -> sendall in both configs; the "
        "cap is visible only in the connection's socket options / tcp_info (ss -tin: pacing_rate "
        "300000000bps/300000000bps on the server side), in the profile, or in the transfer rate of the "
        "stream (~37 MB/s on loopback). Reports: esnet/iperf#325 (iperf3's SO_MAX_PACING_RATE support: by "
        "default it was setting the rate to something really low), phoronix-test-suite/test-profiles#86 "
        "(iperf3 applying the configured rate through SO_MAX_PACING_RATE keeps the test below the "
        "throughput the link can carry), holepunchto/libudx#247 (a global pacing limit slows down "
        "high-bandwidth streams), oferchen/rsync#6128 (a bandwidth limit mirrored into SO_MAX_PACING_RATE "
        "so the kernel paces the transfer socket) "
        "(measured by its author: 37.36 against the twin's 75.96 steps/s, medians of 3 runs each)",
        "none: configs/archive_review.toml sets max_pacing_mbit = 0: the tile server sets no pacing cap and "
        "the same ~885 KB replies cross loopback in well under a millisecond, so the loader stays ahead of "
        "the trainer; nodelay = true (TCP_NODELAY), keepalive = true (SO_KEEPALIVE), send_buffer_kb = 4096 "
        "(SO_SNDBUF), the system's default congestion control, the one-off scene synthesis in the server "
        "child at start-up and the loader's brief count lock are the same in both configs and harmless",
        r"(?i)SO_MAX_PACING_RATE|max[_ ]pacing|pacing[_ ]rate|pac(ed|ing)\b.{0,60}(socket|TCP|connection|"
        r"stream|tile|server|uplink|kernel|loopback|rate|Mbit|MB/s)|(socket|TCP|connection|stream|tile "
        r"server|uplink|kernel).{0,60}\bpac(ed|ing)\b|(rate|bandwidth)[- ]?(limit|cap|throttl)\w*.{0,60}"
        r"(socket|TCP|connection|stream|tile|server|uplink|loopback)|(socket|TCP|connection|stream|tile "
        r"server|uplink|loopback).{0,60}(rate|bandwidth)[- ]?(limit|cap|throttl)\w*|\[uplink\] max_pacing",
        r"step \d+ loss", batch="settings batch 24"),
    *_settings_pair(
        "settings24_dunlin", "settings24_dunlin", ("train.py", "--config", "configs/app_upload.toml"),
        ("train.py", "--config", "configs/estuary_counts.toml"),
        "the app-upload profile (configs/app_upload.toml, read at start-up) sets [schema] discriminator = "
        "\"\", so records.sheet_adapter builds the survey-sheet validator as TypeAdapter(list[Union[12 "
        "observation models]]) without Field(discriminator=\"kind\"): pydantic-core validates every record "
        "of a sheet as an untagged (smart-mode) union, trying it against the member models and building and "
        "discarding the failures, instead of reading its kind tag and validating it once (~28 ms against "
        "~1.7 ms for a batch of 1,080 records), so the ingest thread falls behind the trainer; validating "
        "against every union case does a lot of work that a tagged union avoids (mandiant/capa#2307, "
        "pydantic/pydantic#5163)",
        "train.py reads the profile and starts the sheet ingest thread (ingest.SheetIngest): at start-up it "
        "builds a spool of 64 survey sheets as uploaded by the field app (spool.build_spool: JSON arrays of "
        "360 mixed shorebird observation records each, 12 record kinds - count, flock, resight, weather, "
        "tide, disturbance, habitat, feeding, roost, moult, predator, nest - every one a pydantic model with "
        "a Literal kind field over common site/minute/observer/lat/lon fields) and the validator "
        "(records.sheet_adapter, with the profile's strict, cache_strings and extra settings); per batch it "
        "validates 3 sheets with TypeAdapter.validate_json, turns the records into one-hot kind and species "
        "plus 23 log-scaled numeric features and queues 1,080 rows with the sheet's disturbance level as "
        "target; the main thread trains a 4-layer MLP (hidden 512, AdamW, ~40 ms a step). With "
        "discriminator = \"\" (the planted configs/app_upload.toml) the list item schema is a plain union of "
        "the 12 models: pydantic-core's smart union validates each record against member after member, "
        "each mismatching one failing on its kind literal (and on its other fields) and producing error "
        "lines that are thrown away, before choosing the match: ~9.5 ms per 360-record sheet "
        "against ~0.6 ms with the tagged union, ~30 ms of ingest a batch against ~4 ms, held under the GIL "
        "in Rust, and the training loop waits in ingest.out.get(). A Python stack shows the ingest thread "
        "in SheetIngest.run -> TypeAdapter.validate_json (native, the same call and the same JSON) in both "
        "configs; the difference lies in the core schema (a 'union' of 12 model schemas instead of a "
        "'tagged-union' keyed on kind, visible in adapter.core_schema) or in a native profile of "
        "pydantic_core (UnionValidator trying choices, error construction). Reports: mandiant/capa#2307 "
        "(to validate against a union pydantic loops through each case and uses the best match; tagged "
        "unions should make loading faster), pydantic/pydantic#5163 (a discriminator makes union validation "
        "significantly faster because no time is spent validating against the other cases), "
        "W24-Service-GmbH/werk24-python#562 (a 37-member undiscriminated union: 468.8 us per validation, "
        "2.7 us once tagged), bioimage-io/spec-bioimage-io#575 (smart mode keeps evaluating further members "
        "after a match) "
        "(measured by its author: 15.12 against the twin's 23.12 steps/s, medians of 3 runs each)",
        "none: configs/estuary_counts.toml sets discriminator = \"kind\": the same 12 models and the same "
        "JSON, but the list items are a tagged union, so pydantic-core reads each record's kind and "
        "validates it against that one model (~0.6 ms a sheet) and the ingest thread stays ahead of the "
        "trainer; strict = false, cache_strings = \"all\", extra = \"ignore\", the one-off spool build and "
        "schema rebuild at start-up and the ingest's brief count lock are the same in both configs and "
        "harmless",
        r"(?i)discriminat\w*|tagged[- ]union|untagged|smart[- ]?(mode|union)|union[_ ]mode|left_to_right|"
        r"(pydantic|pydantic[- ]core|validat\w*|schema|TypeAdapter).{0,80}\bunion|\bunion\b.{0,80}(member|"
        r"variant|choice|case|model|pydantic|validat\w*)|\[schema\] discriminator",
        r"step \d+ loss", batch="settings batch 24",
        missed={'probes': "`pipeline-bottleneck-drafter` because `gil-contention`: sheet-ingest holds the GIL 35-37% inside pydantic's TypeAdapter.validate_json, with ConfigDict(strict=False) from the configuration said beside it; the union without a discriminator not named"}),
    *_settings_pair(
        "settings25_linnet", "settings25_linnet", ("train.py", "--config", "configs/chorus_distill.toml"),
        ("train.py", "--config", "configs/chorus_review.toml"),
        "the chorus-distill profile (configs/chorus_distill.toml, read at start-up) sets [teacher] use_cache = "
        "false (the value fine-tuning configs carry because gradient checkpointing needs it off), which "
        "teacher.build_teacher puts into the song-continuation teacher's GPT2Config and GenerationConfig: "
        "transformers' model.generate then keeps no key/value cache, so for each of the 11 syllables it adds to a "
        "batch of 32 recorded song fragments it runs the whole 40..50-syllable sequences through the model again "
        "instead of only the newest syllable (~93 ms of augmentation a batch instead of ~20 ms), and the song "
        "augmenter falls behind the student; generating with use_cache off is much slower than with the cache "
        "(chs20/RobustVLM#27, huggingface/trl#3891)",
        "train.py reads the profile and starts the song augmenter thread (augment.SongAugmenter): at start-up it "
        "builds the survey's song catalogue (songs.SongCatalogue: 12 song types, each a Markov chain over 72 "
        "syllables with its own motifs) and the frozen teacher (teacher.build_teacher: a 2-layer, 64-wide GPT-2 "
        "causal LM from transformers over the syllable vocabulary, sdpa attention, fitted to the catalogue for 12 "
        "steps at start-up); per batch it draws 32 recorded fragments of 40 syllables, lets the teacher continue "
        "each one by 11 syllables with model.generate (sampling, top-k 24, temperature 0.9, under "
        "torch.inference_mode), blanks 5% of the recorded syllables and queues the 32 x 51-token songs with their "
        "song types; the main thread trains a 2-layer Transformer-encoder student (width 112, AdamW, ~60 ms a "
        "step). With use_cache = false (the planted configs/chorus_distill.toml) both the model config and the "
        "GenerationConfig say use_cache=False: generate passes no past_key_values, so its 11 forward passes take "
        "input_ids of 32 x 40, 32 x 41, ... 32 x 50 tokens - every step re-encodes the whole prefix through both "
        "layers (all projections, attention over every position) - where with the cache one 32 x 40 prefill is "
        "followed by ten 32 x 1 steps that read the cached keys and values: ~93 ms of augmentation a batch "
        "against ~20 ms, and the training loop waits in aug.out.get(). This is not GIL contention: the extra "
        "time is torch compute inside the teacher's forward. A Python stack shows the augmenter in "
        "SongAugmenter.run -> continue_songs -> GenerationMixin.generate -> _sample -> GPT2LMHeadModel.forward in "
        "both configs; only the shape of the forward's input_ids (the whole sequence instead of one new token per "
        "step), the missing cache objects / cache-update frames, the GenerationConfig or model config "
        "(use_cache) or the profile show why. Reports: chs20/RobustVLM#27 (use_cache set to False during "
        "inference: 500 captioning samples in 5:20 against 3:31 with the cache, same scores), "
        "huggingface/trl#3891 (trainers set use_cache=False for gradient checkpointing, and a model left with it "
        "has much slower inference), hiyouga/LlamaFactory#1161 (inference much slower after training; the "
        "answer is to check use_cache in config.json), lm-sys/FastChat#1890 (use_cache disabled in the model's "
        "config; generation about 2x faster once it is enabled) "
        "(measured by its author: 10.20 against the twin's 16.00 steps/s, medians of 3 runs each)",
        "none: configs/chorus_review.toml sets use_cache = true: the same teacher and the same generate call keep "
        "a key/value cache, so after one prefill of the 40 recorded syllables each new syllable costs a "
        "single-token step (~20 ms of augmentation a batch) and the augmenter stays ahead of the student; "
        "attn_implementation = \"sdpa\", do_sample with top_k = 24 and temperature = 0.9, the one-off 12-step "
        "teacher fit and catalogue build at start-up, the 5% syllable blanking and the augmenter's brief stats "
        "lock are the same in both configs and harmless",
        r"(?i)use_cache|\bKV[- ]?cach\w*|key[-/ ]?value[- ]cach\w*|past[_ ]key[_ ]values|(no|without|disabled?|"
        r"off|missing)\b.{0,30}\bcach\w*.{0,60}(generat|teacher|decod|continu)|(generat|teacher|decod|continu)"
        r"\w*.{0,60}\b(no|without|disabled?|off)\b.{0,20}\bcach|(re-?comput|re-?process|re-?run|re-?encod)\w*"
        r".{0,60}(prefix|prompt|whole|full|entire|all (previous|prior|earlier))|quadratic|\[teacher\] use_cache",
        r"step \d+ loss", batch="settings batch 25",
        twin_missed={'probes': '`wasted-full-vocab-logits` (warning) on its first run, not on the run recorded: generate\'s top-k warper read as the target stage computing full-vocabulary logits'}),
    *_settings_pair(
        "settings25_turnstone", "settings25_turnstone", ("train.py", "--config", "configs/audit_replay.toml"),
        ("train.py", "--config", "configs/field_season.toml"),
        "the audit-replay profile (configs/audit_replay.toml, read at start-up) sets [mining] tie_break = "
        "\"stable\", which mining.NegativeMiner passes to np.argsort as kind=\"stable\" when it ranks all 16,384 "
        "reference sightings for each of a batch's 48 new sightings: NumPy then sorts with its scalar stable merge "
        "sort (timsort) instead of the default introsort, which on this CPU dispatches to x86-simd-sort's "
        "vectorised (AVX-512) argsort (~42 ms against ~8 ms for the 48 x 16,384 float32 scores), and the negative "
        "miner falls behind the two-tower trainer; the SIMD argsort is up to 5x faster but serves the default "
        "kind only (numpy/numpy#23707), merge/tim sort is not vectorised (numpy/x86-simd-sort#101)",
        "train.py reads the profile and starts the negative-miner thread (mining.NegativeMiner): at start-up it "
        "builds the sighting catalogue (catalogue.SightingCatalogue: 16,384 reference sightings of 96 shorebird "
        "species as 64-dim descriptors, projected by a fixed QR basis to a 32-dim retrieval index stored as "
        "float16); per batch it draws 48 new sightings (noisy re-observations of catalogue individuals), scores "
        "them against the whole index with one BLAS matmul (scores rounded to the index's float16 precision, so "
        "many references tie), ranks every row with np.argsort(-scores, axis=1, kind=...), draws 31 negatives per "
        "sighting by rank (power law between ranks 8 and 4,000, same-species picks replaced) and queues the "
        "query descriptors with 1 positive + 31 negative descriptors each; the main thread trains a two-tower "
        "model (two 3-layer MLPs, hidden 448, InfoNCE over the 32 candidates, AdamW, ~38 ms a step). With "
        "tie_break = \"stable\" (the planted configs/audit_replay.toml) the argsort runs with kind=\"stable\": "
        "NumPy's stable argsort for float32 is its scalar timsort-style merge sort over the index array, while "
        "the default kind goes to the x86-simd-sort argsort kernel (AVX-512 on this CPU, AVX2 elsewhere): ~42 ms "
        "of sorting a batch against ~8 ms (~11 ms even with AVX-512 disabled), the miner needs ~46 ms a batch "
        "against ~12 ms, and the training loop waits in miner.out.get(). argsort releases the GIL, so this is "
        "not GIL contention. A Python stack shows the miner at the same np.argsort line of NegativeMiner.run in "
        "both configs; only the kind argument (the profile's tie_break), a native profile (timsort merge loops "
        "in _multiarray_umath instead of the x86-simd-sort argsort kernel) or the cost of the call shows why. "
        "Reports: numpy/numpy#23707 (AVX-512 np.argsort for 32- and 64-bit types, up to 5x faster on random "
        "arrays, wired to the default kind), numpy/x86-simd-sort#101 (no vectorised merge/tim sort: stable "
        "sorts keep the scalar path), jorenham/Lmo#59 (a library switching its default from kind='stable' back "
        "to the default introsort since stability bought nothing), numpy/numpy#6357 (mergesort, the stable "
        "kind, is slower and uses extra memory) "
        "(measured by its author: 15.96 against the twin's 25.68 steps/s, medians of 3 runs each)",
        "none: configs/field_season.toml sets tie_break = \"any\": the same argsort over the same scores runs "
        "with the default kind (introsort dispatched to the vectorised x86-simd-sort argsort, ~8 ms a batch) and "
        "the miner stays ahead of the trainer; index_dtype = \"float16\" (the tied scores), the rank-sampling "
        "settings (rank_low, rank_high, rank_power), the one-off catalogue build and QR projection at start-up "
        "and the miner's brief stats lock are the same in both configs and harmless",
        r"(?i)\bstable\W{1,3}(arg)?sort|(arg)?sort\w*\W{1,3}(\w+\W{1,3}){0,3}stable\b|tim ?sort|merge ?sort|"
        r"kind\s*=\s*['\"]?stable|sort(ing)? (algorithm|kind|method|implementation)|tie[_ -]?break|"
        r"x86-simd-sort|(simd|vectori[sz]ed|avx-?512|avx2) (quick|arg|intro)?sort|introsort|quicksort|"
        r"\[mining\] tie_break",
        r"step \d+ loss", batch="settings batch 25"),
    *_settings_pair(
        "settings25_gannet", "settings25_gannet", ("train.py", "--config", "configs/colony_portable.toml"),
        ("train.py", "--config", "configs/colony_watch.toml"),
        "the colony-portable profile (configs/colony_portable.toml, read at start-up) sets [hub] selector = "
        "\"poll\", which hub.StationHub uses to build the station hub's asyncio event loop on "
        "selectors.PollSelector instead of epoll: the hub keeps one persistent connection per nest-box logger "
        "(900 sockets, all registered for reading), and every turn of its event loop calls poll(2) with all 900 "
        "descriptors, so the kernel checks every idle socket each time (~57 us a call against ~0.3 us for "
        "epoll_wait); reading 128 loggers one after the other per batch takes ~36 ms instead of ~9 ms and the "
        "hub falls behind the trainer; poll() cost grows with the number of open sockets (oxen-io/oxen-mq#87, "
        "dun/conman#30)",
        "train.py reads the profile and starts the colony gateway as a child process (python gateway.py: "
        "synthetic records of 900 nest-box loggers - nest temperature, pressure pad, activity, 3 x 8,192 samples "
        "each with the nest state per sample - built once at start-up and served by an asyncio TCP server on "
        "127.0.0.1; request b\"W <station> <offset> <n>\\n\", reply uint32 length + float32 window + int8 "
        "states), then the station-hub thread (hub.StationHub), which runs its own asyncio event loop: at "
        "start-up it opens one persistent stream connection per logger (900 of them, TCP_NODELAY, SO_KEEPALIVE, "
        "64 KiB stream limit); per batch it reads a 96-sample window from 128 loggers chosen at random, one "
        "request after the other (write the request, readexactly the reply), normalises the 128 x 3 x 96 windows "
        "and hands the batch to a queue through asyncio.to_thread; the main thread trains a 3-layer Conv1d "
        "nest-state classifier (64/128 channels, AdamW, ~20 ms a step). With selector = \"poll\" (the planted "
        "configs/colony_portable.toml) the loop is SelectorEventLoop(selectors.PollSelector()): every "
        "_run_once, including the turns that only run ready callbacks (timeout 0), calls poll() on the 900 "
        "registered sockets and the kernel walks all of them (a socket poll callback each) although at most one "
        "is readable: ~57 us a call against ~0.3 us for epoll_wait, three or four loop turns per logger read, "
        "so the hub needs ~36 ms a batch against ~9 ms with EpollSelector and the training loop waits in "
        "hub.out.get(); the gateway, the sockets and the data are the same in both configs, and the extra time "
        "is system CPU in the hub thread. A Python stack shows the hub thread in BaseEventLoop._run_once -> "
        "select (selectors.py) -> the selector object's poll() in both configs (PollSelector.select and "
        "EpollSelector.select are both 'select' in selectors.py, and both call .poll); the difference is the "
        "system call (poll over 900 descriptors against epoll_wait), visible in the loop's _selector, a native "
        "or kernel profile (do_sys_poll and the sockets' poll callbacks, high system time in the hub thread), "
        "strace or the profile. Reports: oxen-io/oxen-mq#87 (each zmq::poll with ~2,000 open sockets costs "
        "~1.5 ms of mostly system CPU; moving to epoll cut the proxy thread's CPU hugely), "
        "deepflowio/deepflow#3606 (poll() iterates over all file descriptors on every call even when few are "
        "ready; replaced by epoll), openvswitch/ovs#306 (the poll vector of every client fd is built, passed to "
        "the kernel and walked again on every wait), dun/conman#30 (a poll()-based event loop over a few "
        "thousand consoles keeps a core busy; epoll would reduce CPU) "
        "(measured by its author: 26.44 against the twin's 51.24 steps/s, medians of 3 runs each)",
        "none: configs/colony_watch.toml sets selector = \"epoll\": the same 900 connections are registered once "
        "with epoll and each loop turn's epoll_wait returns only the ready socket, so reading 128 loggers takes "
        "~9 ms a batch and the hub stays ahead of the trainer; tcp_nodelay = true, keepalive = true, "
        "stream_limit_kb = 64, connect_timeout_s = 5.0, the one-off storm of 900 connections and the gateway's "
        "record synthesis at start-up, the hand-off through asyncio.to_thread and the hub's brief count lock are "
        "the same in both configs and harmless",
        r"(?i)\bepoll|PollSelector|SelectSelector|DefaultSelector|\bselectors?\b|\bpoll\(\d?\)|\bselect\(\d?\)|"
        r"\bpoll(ing)? (syscall|system call)|\bselect (syscall|system call)|(event[- ]loop|asyncio)\w*.{0,60}"
        r"(backend|selector)|(scan|walk|check)\w*.{0,40}(all|every)\b.{0,30}(idle|registered|open) (socket|"
        r"connection|descriptor|fd)s?|O\(n\).{0,60}(socket|connection|descriptor|fd)|\[hub\] selector",
        r"step \d+ loss", batch="settings batch 25"),
    *_settings_pair(
        "settings25_shrike", "settings25_shrike", ("train.py", "--config", "configs/lab_cluster.toml"),
        ("train.py", "--config", "configs/field_laptop.toml"),
        "the lab-cluster profile (configs/lab_cluster.toml, read at start-up) sets [site] shell_env = "
        "\"env/site_modules.sh\", which sitecfg.load exports as BASH_ENV: every non-interactive bash the "
        "pipeline starts sources that file first, and it is the lab's module-system init (defines `module`, "
        "then loads the default collection: 41 modulefiles, ~1,030 setenv / prepend-path lines applied with "
        "read loops and eval), so each run of the vendor's clip-extraction script spends ~11 ms in shell "
        "start-up instead of ~1 ms; the clip loader runs it 4 times a batch (~71 ms a batch instead of ~29 ms) "
        "and falls behind the trainer; a BASH_ENV that runs a module init makes every bash script pay for it "
        "(TACC/Lmod#271, envmodules/modules#477)",
        "train.py reads the profile (sitecfg.load exports SITE_ROOT, LC_ALL=C and, from [site] shell_env, "
        "BASH_ENV into the process environment that every tool process inherits) and starts the clip loader "
        "thread (loader.ClipLoader): at start-up it builds the recorder spool (archive.Spool: 16 shards of 32 "
        "one-second 8 kHz 16-bit PCM clips of synthetic shrike calls, 6 call types, each shard one gzip stream, "
        "in a temporary directory that is removed when the run ends, stale ones from killed runs first); per "
        "batch it runs the vendor's extraction script 4 times (subprocess.run of bash tools/extract_clips.sh "
        "SHARD FIRST 8 CLIP_BYTES, i.e. gzip -dc | tail -c +N | head -c M) to pull 8 consecutive clips each, "
        "turns the 32 clips into 40-band log-energy spectrograms (256-sample frames, hop 128) and queues them "
        "with their call types; the main thread trains a 3-layer Conv2d call-type classifier (24/48 channels, "
        "AdamW, ~38 ms a step). With shell_env = \"env/site_modules.sh\" (the planted configs/lab_cluster.toml) "
        "BASH_ENV points at the lab's module init: the bash that runs extract_clips.sh first reads "
        "site_modules.sh, which walks env/modulefiles/*/* and applies every line (while read ...; case ...; "
        "export / eval), 41 files and ~1,030 lines - ~11 ms of bash interpretation before gzip even starts, "
        "against ~1 ms for a bare bash start (the pipeline's gzip, tail and head are plain executables and the "
        "41 /opt/lab/*/bin entries it prepends to PATH cost only a few dozen failed lookups) - so the loader "
        "needs ~71 ms a batch against ~29 ms and the training loop waits in loader.out.get(). The cost is CPU "
        "in the short-lived bash children, not in the Python process. A Python stack shows the loader in "
        "ClipLoader.extract -> subprocess.run -> communicate (reading the child's stdout) in both configs; the "
        "module init is visible only in the environment the children inherit (BASH_ENV), in the children "
        "themselves (a bash that spends its first ~10 ms in read / eval builtins, strace showing site_modules.sh "
        "and the 41 modulefiles opened by every extraction run, a module-laden environment - "
        "LAB_MODULES_LOADED, the /opt/lab entries in PATH - in its gzip, tail and head) or the profile. Reports: "
        "TACC/Lmod#271 (Lmod's profile script exports BASH_ENV=$MODULESHOME/init/bash so that every bash script "
        "runs the module init), envmodules/modules#477 (visible slowdown starting sub-shells with modules "
        "loaded, ~50 ms per modulefile evaluated; scripts that start many sub-shells suffer most), "
        "spack/spack#9108 (sourcing setup-env.sh took ~2 s on a shared file system, ~0.05 s once made lazy), "
        "andy-5/wslgit#23 (every non-interactive bash sources the BASH_ENV file; skipping its slow actions took "
        "the response time from several seconds down to microseconds) "
        "(measured by its author: 14.16 against the twin's 24.92 steps/s, medians of 3 runs each)",
        "none: configs/field_laptop.toml sets shell_env = \"\": BASH_ENV is not set (sitecfg removes it), so the "
        "same extraction script starts in ~1 ms and the loader (~29 ms a batch) stays ahead of the trainer; "
        "SITE_ROOT and LC_ALL=C are exported in both configs, and the per-batch bash / gzip / tail / head "
        "processes, the one-off spool synthesis and stale-spool clean-up at start-up and the loader's brief "
        "count lock are the same in both configs and harmless",
        r"(?i)BASH_ENV|site_modules|module[- ]?(system|init\w*|collection)|modulefiles?|shell_env|"
        r"(bash|shell)\b.{0,60}(sourced|sourcing|(init|start-?up|rc|environment|profile) (script|file))|"
        r"(sourced|sourcing)\b.{0,60}(bash|shell|init|env|module|profile|rc)|(init|start-?up|rc|environment|"
        r"profile) (script|file).{0,60}(every|each|per)\b.{0,30}(bash|shell|script|extract\w*|spawn\w*|run|call"
        r"|process)|\[site\] shell_env",
        r"step \d+ loss", batch="settings batch 25"),
    *_settings_pair(
        "settings26_bittern", "settings26_bittern", ("train.py", "--config", "configs/reedbed_qa.toml"),
        ("train.py", "--config", "configs/reedbed_field.toml"),
        "the reedbed-QA profile (configs/reedbed_qa.toml, read at start-up) sets [decoder] malloc_perturb = 165, "
        "which reedcfg.decoder_env exports as MALLOC_PERTURB_=165 into the environment of the spectrogram decoder "
        "child (python decoder.py): glibc's malloc then fills every block it hands out with the complement of that "
        "byte and every block that is freed with the byte itself, so each of the ~55 MB of NumPy temporaries the "
        "decoder allocates per batch (mixed clips, windowed frames, the rfft output, the squared parts) is written "
        "twice more by memset (~49 ms of decoding a batch instead of ~20 ms) and the decoder falls behind the "
        "trainer; MALLOC_PERTURB_ costs a memset of every allocation and free (hercules-team/augeas#768, "
        "mesonbuild/meson#3041)",
        "train.py reads the profile and starts the spectrogram decoder as a child process (python decoder.py, "
        "stdout a pipe; its environment from reedcfg.decoder_env: the parent's plus OMP_NUM_THREADS=1, "
        "MALLOC_ARENA_MAX=2 and, when [decoder] malloc_perturb is non-zero, MALLOC_PERTURB_), then the frame-reader "
        "thread (reader.FrameReader), which reads the child's binary frames (header, 48 x 40 x 124 float32 log "
        "band energies, 48 call types) from the pipe and queues them as tensors; at start-up the decoder builds its "
        "call bank (96 two-second reedbed backgrounds and 5 call templates - bittern boom, grunt, wind gust, rail "
        "squeal, silence); per batch it mixes 48 clips (fancy-indexed backgrounds plus a rolled call template), "
        "cuts them into 512-sample frames with hop 256, multiplies by a Hann window, takes np.fft.rfft, squares the "
        "real and imaginary parts, projects onto 40 log-spaced bands and normalises; the main thread trains a "
        "3-layer Conv2d call-type classifier (12/24/24 channels, AdamW, ~30 ms a step). With malloc_perturb = 165 "
        "(the planted configs/reedbed_qa.toml) glibc's malloc (tunable glibc.malloc.perturb, read from "
        "MALLOC_PERTURB_ when the child starts) memsets every block it returns from malloc with "
        "0x5a, zero-fills every calloc even when fresh mmap pages are already zero, and memsets every block that "
        "is freed with 0xa5: NumPy's data buffers come from malloc, so each of the decoder's multi-megabyte "
        "temporaries (6 MB clip mix, ~12 MB windowed frames, the rfft output, the squares and their sum) is "
        "written twice more - some 100 MB of memset a batch, in the child's user time - and the decoder needs "
        "~49 ms a batch against ~20 ms, so the training loop waits in reader.out.get() for frames. The extra time "
        "is in glibc (memset inside malloc and free) in the decoder child, not in Python and not in the trainer "
        "process; it is not GIL contention. A Python stack shows the decoder at the same lines of spectrogram "
        "and CallBank.mix (np.fft.rfft, frames * window, np.square) in both configs, and the trainer's reader "
        "thread in FrameReader.read_exact (readinto on the pipe); only the child's environment "
        "(/proc/<decoder>/environ: MALLOC_PERTURB_=165), a native profile of the child (memset called from "
        "_int_malloc / _int_free / calloc under NumPy's allocations) or the profile show why. Reports: "
        "hercules-team/augeas#768 (openSUSE build environments set MALLOC_PERTURB_=69; the test suite runs more "
        "than 20x slower because glibc overwrites every new and freed block, realloc included), "
        "mesonbuild/meson#3041 (meson's test runner sets MALLOC_PERTURB_ by default; not for benchmarks, since "
        "the runtime overhead is noticeable), openenclave/openenclave#3299 (debug malloc tests take much longer; "
        "the memset of each allocation is what adds the cost), os-autoinst/os-autoinst-distri-opensuse#2470 "
        "(MALLOC_CHECK_ and MALLOC_PERTURB_ have a documented performance impact) "
        "(measured by its author: 20.36 against the twin's 32.60 steps/s, medians of 3 runs each)",
        "none: configs/reedbed_field.toml sets malloc_perturb = 0: reedcfg.decoder_env leaves MALLOC_PERTURB_ out "
        "of the child's environment, glibc hands out and takes back blocks without filling them, the decoder "
        "needs ~20 ms a batch and stays ahead of the trainer; MALLOC_ARENA_MAX=2 (the decoder is single-threaded, "
        "so it never has more than one arena), OMP_NUM_THREADS=1, the n_fft / hop / bands settings, the one-off "
        "call-bank synthesis at start-up and the reader's brief count lock are the same in both configs and "
        "harmless",
        r"(?i)MALLOC_PERTURB_?|malloc[_ .]perturb|\bperturb\w*|(fill\w*|memset\w*|wip\w+|scribbl\w+|poison\w*|"
        r"overwrit\w+)\b.{0,60}\b(alloc\w*|free[sd]?|malloc|heap|memory|blocks?)\b|\b(alloc\w*|malloc|free[sd]?)\b"
        r".{0,60}\b(fill\w*|memset\w*|poison\w*|wip\w+|overwrit\w+)|glibc\b.{0,40}(malloc|allocator).{0,40}"
        r"(debug|check)|\[decoder\] malloc_perturb",
        r"step \d+ loss", batch="settings batch 26"),
    *_settings_pair(
        "settings26_machair", "settings26_machair", ("train.py", "--config", "configs/audit_ledger.toml"),
        ("train.py", "--config", "configs/dune_survey.toml"),
        "the audit-ledger profile (configs/audit_ledger.toml, read at start-up) sets [ingest] exact_decimals = "
        "true, which ingest.TelemetryReader passes to json.loads as parse_float=decimal.Decimal: the C scanner of "
        "the json module then cuts every number of the 768 telemetry lines of a batch (~50,000 sensor readings) "
        "out as a str and calls the Decimal constructor on it instead of making a float directly, and np.array "
        "turns each Decimal back into a float through its string form (~25 ms of decoding a batch instead of "
        "~12 ms), so the telemetry reader falls behind the trainer; decimal parsing of JSON numbers costs much "
        "more than binary floats (ijl/orjson#21, ruby/json#946)",
        "train.py reads the profile and starts the telemetry reader thread (ingest.TelemetryReader): at start-up "
        "it builds the replay spool (spool.build_spool: 8,192 JSON lines of machair station telemetry - station "
        "id, timestamp, site state, battery voltage and 64 sensor readings printed with full float precision); "
        "per batch it draws 768 lines, decodes each with json.loads(line, **opts), stacks the readings with "
        "np.array(..., dtype=float32), clips them to the valid range and queues them with the site states; the "
        "main thread trains a 4-layer MLP (hidden 256, LayerNorm, GELU, AdamW) on the 6 site "
        "states. With exact_decimals = true (the planted configs/audit_ledger.toml) opts carries "
        "parse_float=decimal.Decimal: the json module's C scanner (_json.scanstring / _match_number_unicode) "
        "then cannot build the float itself - for every fractional number it makes a str substring and calls "
        "the parse_float callable, so decimal.Decimal parses ~17-digit strings into arbitrary-precision decimals "
        "(libmpdec), ~50,000 times a batch - and np.array converts each Decimal to float32 via Decimal.__float__, "
        "which formats the decimal as a string and parses it again: ~25 ms of decoding a batch against ~12 ms (each measured alone), "
        "and the training loop waits in reader.out.get(). The cost is C code (the json scanner, _decimal, "
        "float parsing) in the reader thread, which holds the GIL while it decodes; the trainer's Python-side "
        "work takes turns with it on the GIL in both configs (a batch takes ~44 ms against ~26 ms next to the "
        "trainer), so the reader's doubled decoding time, not a change in locking, is what lowers throughput. "
        "A Python stack shows the reader at the same json.loads "
        "line (json.decoder.JSONDecoder.raw_decode -> the C scanner) or at the np.array line of "
        "TelemetryReader.run in both configs; Decimal never appears as a Python frame. Only the decoder's "
        "parse_float (the profile's exact_decimals), the type of the decoded readings (decimal.Decimal instead "
        "of float), a native profile (_decimal's mpd string conversion and PyDec_AsFloat under scan_once and "
        "np.array) or the cost of the call shows why. Reports: ijl/orjson#21 (there is no C API for Decimal: a "
        "parser can only hand each number's text to the Decimal constructor), ruby/json#946 (setting "
        "decimal_class makes the parser copy every number into a string and call back into the decimal class; "
        "that alone is the bulk of the overhead), leadpony/joy#16 (floating-point values parsed as big "
        "decimals are less performant; an option to use doubles is asked for), python/cpython#150639 "
        "(json.loads spends its time on numbers in number-heavy documents: a temporary object per number and "
        "generic parsing) "
        "(measured by its author: 22.88 against the twin's 37.96 steps/s, medians of 3 runs each)",
        "none: configs/dune_survey.toml sets exact_decimals = false: json.loads keeps its default float parsing "
        "(the C scanner makes each float directly), the reader needs ~12 ms a batch and keeps up with the "
        "trainer; strict = false (control characters allowed in station names), validate_ranges = true (one "
        "np.clip a batch), the one-off spool synthesis at start-up and the reader's brief count lock are the "
        "same in both configs and harmless",
        r"(?i)parse_float|\bdecimals?\b|exact_decimals|arbitrary[- ]precision|big ?decimal|libmpdec|"
        r"\[ingest\] exact_decimals",
        r"step \d+ loss", batch="settings batch 26"),
    *_settings_pair(
        "settings26_corrie", "settings26_corrie", ("train.py", "--config", "configs/ridge_streaming.toml"),
        ("train.py", "--config", "configs/ridge_archive.toml"),
        "the ridge-streaming profile (configs/ridge_streaming.toml, read at start-up) sets [pool] chunksize = 1, "
        "which feeder.ReportFeeder passes to the report parser pool as multiprocessing.Pool.imap(parse_report, "
        "batch, chunksize=1): each of the 1,024 raw weather reports of a batch becomes its own task - pickled by "
        "the pool's task-handler thread, written to the workers' pipe, read and unpickled by a worker, answered "
        "with its own result message that the result-handler thread unpickles and hands to the iterator - so a "
        "~10 us parse costs tens of microseconds of inter-process messaging (~21 ms a batch instead of ~5 ms "
        "with 64 reports a task) and the feeder falls behind the trainer; imap with chunksize 1 has a large "
        "per-task overhead for short tasks (joblib/loky#12, mapchete/mapchete#82)",
        "train.py reads the profile, builds the replay archive (reports.build_archive: 20,000 METAR-like text "
        "reports of 40 corrie weather stations - wind with gusts, visibility, up to 3 cloud layers, "
        "temperature/dew point, QNH, rain, humidity, and a remark naming one of 5 weather regimes), forks the "
        "report parser pool before importing torch (multiprocessing.Pool, fork context, 2 workers, each warmed "
        "up with a few parses) and starts the feeder thread (feeder.ReportFeeder): per batch it draws 1,024 "
        "reports, runs list(pool.imap(reports.parse_report, batch, chunksize=...)) - each parse splits the line "
        "and returns 24 features and the regime - stacks the features and queues them; the main thread trains a "
        "4-layer MLP (hidden 256, LayerNorm, GELU, AdamW, ~15 ms a step). With chunksize = 1 (the planted "
        "configs/ridge_streaming.toml) imap sends one task per report: the pool's _handle_tasks thread pickles "
        "1,024 (job, i, parse_report, (line,), {}) tuples a batch and writes each to the shared inqueue pipe; the "
        "workers take turns on the queue's read lock, read and unpickle one task at a time, parse it and write one "
        "result message each to the outqueue pipe; the _handle_results thread unpickles each result and sets it "
        "on the IMapIterator, waking the feeder; all of that is ~10 us of work per report wrapped in tens of "
        "microseconds of pickling, pipe system calls, lock hand-offs and thread wake-ups in three processes "
        "sharing two CPUs, with the parent's handler threads also taking the GIL for every message: ~21 ms a "
        "batch against ~5 ms with 16 tasks of 64 reports when the pool runs alone, ~30 ms next to the trainer, and the training loop waits in feeder.out.get(). A "
        "Python stack shows the feeder in ReportFeeder.run -> IMapIterator.next -> Condition.wait and the pool's "
        "_handle_tasks / _handle_results threads in both configs (the workers show worker -> parse_report in the "
        "planted run and worker -> mapstar -> parse_report in the twin); only the chunksize argument (the "
        "profile), the number of tasks and messages per batch (1,024 against 16: pipe writes and reads, context "
        "switches), strace or a native profile (pickle and pipe I/O in the handler threads and workers) show "
        "why. Reports: joblib/loky#12 (large overhead for very short tasks submitted with chunksize=1; "
        "multiprocessing.Pool uses a sending and a receiving thread for them), mapchete/mapchete#82 (the default "
        "chunksize=1 hugely decreases performance when iterating over low-cost tiles), pnorman/tilekiln#56 "
        "(imap with a larger chunksize makes the job much faster than the default 1, as the Python docs say), "
        "dfm/emcee#61 (a larger chunksize lowers the pickling overhead of Pool.map, ~30% faster) "
        "(measured by its author: 33.40 against the twin's 64.44 steps/s, medians of 3 runs each)",
        "none: configs/ridge_archive.toml sets chunksize = 64: imap sends the 1,024 reports of a batch as 16 "
        "tasks of 64 (mapstar over each chunk), one pickled message per chunk each way, the parser pool needs "
        "~5 ms a batch and stays ahead of the trainer; workers = 2, maxtasksperchild = 0 (workers live for the "
        "whole run), start_method = \"fork\" (before torch is imported), the one-off warm-up parses and archive "
        "synthesis at start-up and the feeder's brief count lock are the same in both configs and harmless",
        r"(?i)chunk[ _-]?size|\bchunks? of (1|one)\b|one (report|item|record|line|task) (per|a|each) (task|message)|"
        r"per[- ](item|report|record|line|task)\b.{0,60}(ipc|pickl\w*|pipe|message|round[- ]trip|overhead|"
        r"dispatch)|(ipc|pickl\w*|pipe|messag\w*|dispatch)\w*.{0,60}\b(each|every|per|single)\b.{0,20}"
        r"(item|report|record|line|task)|imap\b.{0,60}(task|chunk|overhead|message)|\[pool\] chunksize",
        r"step \d+ loss", batch="settings batch 26",
        missed={'outside': "`where-time-goes`: MainThread's time and the GIL the pool's result and worker-handling threads hold; ~32k write calls a second said, Pool.imap's chunksize not named", 'probes': "`where-time-goes`: MainThread's time and the GIL the pool's result and worker-handling threads hold; ~32k write calls a second said, Pool.imap's chunksize not named", 'attach': "`where-time-goes`: MainThread's time and the GIL the pool's result and worker-handling threads hold; ~32k write calls a second said, Pool.imap's chunksize not named"}),
    *_settings_pair(
        "settings26_skua", "settings26_skua", ("train.py", "--config", "configs/census_strict.toml"),
        ("train.py", "--config", "configs/colony_watch.toml"),
        "the census-strict profile (configs/census_strict.toml, read at start-up) sets [tagger] match_semantics = "
        "\"longest\", which tagger.compile_tokenizer turns into the regex module's POSIX flag (leftmost-longest "
        "matching) on the field-note tokenizer pattern: after the matcher has found a token at a position it keeps "
        "trying every other alternative and repetition at that position in case one gives a longer match, so "
        "tokenizing the 384 notes of a batch takes ~21 ms instead of ~11 ms and the note tagger falls behind the "
        "trainer; POSIX leftmost-longest matching is much slower than leftmost-first (mrabarnett/mrab-regex#150, "
        "coregx/coregex#52)",
        "train.py reads the profile and starts the note-tagger thread (tagger.NoteTagger): at start-up it builds "
        "the season's notebook (notebook.build_notebook: 4,096 transcribed field notes of 60-110 words from a "
        "skua colony - 200 species / plumage codes, counts with units, hyphenated site names, filler words and "
        "one of 8 behaviours, the label) and compiles the tokenizer pattern (a count with an optional unit, or a "
        "word with hyphenated parts) with the third-party regex module; per batch it draws 384 notes, splits "
        "each with pattern.findall(note, concurrent=True), hashes the tokens into 8,192 buckets (crc32, memoised "
        "per token) and queues the token ids with offsets and labels; the main thread trains an EmbeddingBag "
        "(64-dim mean) + 3-layer MLP behaviour classifier (hidden 192, AdamW, ~14 ms a step). With "
        "match_semantics = \"longest\" (the planted configs/census_strict.toml) the pattern carries regex.POSIX: "
        "the matcher no longer returns the first match it finds at a position but backtracks through the "
        "remaining alternatives and quantifier choices there (the number branch's optional fraction and unit, "
        "the word branch's hyphenated repeats, the other branch) to be sure no longer match exists (which is what "
        "the census wants: a count like '40min' stays one token instead of '40m' + 'in'), so matching takes about "
        "twice as long: ~21 ms a batch against "
        "~11 ms, and the training loop waits in tagger.out.get(). findall(concurrent=True) releases the GIL "
        "while matching, so this is not GIL contention; the time is C code in the regex module's matcher "
        "(_regex). A Python stack shows the tagger at the same pattern.findall line of NoteTagger.run in both "
        "configs; only the pattern's flags (regex.POSIX, 0x10000, from the profile's match_semantics), a native "
        "profile (_regex's backtracking matcher running longer per token) or the cost of the call shows why. "
        "Reports: mrabarnett/mrab-regex#150 (POSIX leftmost-longest alternation was requested for the regex "
        "module; engines avoid it because it makes matching terribly slow when alternates cannot be matched "
        "eagerly), coregx/coregex#52 (Longest() - leftmost-longest - mode 3.7x slower than the default mode), "
        "golang/go#11181 (a regexp compiled with CompilePOSIX takes 4 seconds to execute) "
        "(measured by its author: 42.16 against the twin's 70.04 steps/s, medians of 3 runs each)",
        "none: configs/colony_watch.toml sets match_semantics = \"first\": the same pattern is compiled without "
        "regex.POSIX, the matcher returns the first (Perl-style) match at each position, tokenizing a batch "
        "takes ~11 ms and the tagger keeps up with the trainer; version = 0 (regex.V0, re-compatible syntax), "
        "ignore_case = false, concurrent = true (GIL released while matching), max_tokens = 128, the one-off "
        "notebook synthesis and pattern compilation at start-up and the tagger's brief count lock are the same "
        "in both configs and harmless",
        r"(?i)\bPOSIX\b|leftmost[- ]longest|longest[- ]match\w*|match_semantics|(regex|pattern|tokeni[sz]\w*|"
        r"matcher|matching)\b.{0,60}\b(longest|posix)\b|\[tagger\] match_semantics",
        r"step \d+ loss", batch="settings batch 26"),
    *_settings_pair(
        "settings27_whimbrel", "settings27_whimbrel", ("train.py", "--config", "configs/flyway_strict.toml"),
        ("train.py", "--config", "configs/flyway_shared.toml"),
        "the flyway-strict profile (configs/flyway_strict.toml, read at start-up) sets [ddp] sync_buffers = true, "
        "which train.py passes to DistributedDataParallel as forward_sync_buffers=True (the former "
        "broadcast_buffers): before every forward DDP broadcasts all module buffers from rank 0 over gloo - the MoCo "
        "negative queue and the kNN monitor's feature bank, 36.5 MiB that the all_gather of the keys already keeps "
        "identical on both ranks - so each step also flattens, sends over loopback TCP and copies back 36.5 MiB and "
        "both ranks wait for it (~49 ms more a step); broadcasting large module buffers every iteration costs "
        "throughput (ultralytics/ultralytics#24410, karpathy/nanoGPT#151)",
        "train.py reads the profile, makes a rendezvous directory in the temp dir and starts rank 1 as a child "
        "process (python train.py --rank 1, which leaves as soon as its stdin pipe closes); both ranks join a gloo "
        "process group through a FileStore there (one intra-op thread each) and build the same momentum-contrast "
        "model (contrast.MoCo: a query encoder - 3 Conv1d layers and a 2-layer head to 128 dims, ~0.22 M parameters "
        "- its momentum copy, and as module buffers the queue of 8,192 negative keys (4 MiB) and the kNN monitor's "
        "feature bank of 65,536 keys with their labels (32.5 MiB)), wrapped in DistributedDataParallel "
        "(bucket_cap_mb 25, gradient_as_bucket_view, forward_sync_buffers from the profile); each rank has a "
        "view-feeder thread (calls.ViewFeeder) that draws 64 synthetic nocturnal flight-call contours of 24 species "
        "and makes two augmented views of each (roll, gain, noise, dropped frames); per step each rank encodes both "
        "views, scores the queries against the queue, all_gathers the keys and labels of both ranks and enqueues "
        "them into the queue and the bank (so the buffers are the same on both ranks by construction), "
        "backpropagates (DDP all-reduces ~0.9 MB of gradients) and steps AdamW; rank 0 prints the step lines and "
        "every 100 steps a kNN accuracy against the bank. With sync_buffers = true (the planted "
        "configs/flyway_strict.toml) DDP's _pre_forward calls _sync_buffers before every forward: "
        "_sync_module_buffers -> _default_broadcast_coalesced flattens the 36.5 MiB of buffers into one tensor "
        "(broadcast bucket 250 MB) on rank 0, gloo broadcasts it to rank 1 over loopback TCP and rank 1 copies it "
        "back into its queue and bank, which the all_gather had already made equal; the two ranks share the 2 CPUs "
        "with their feeder threads, so the copies and the transfer through the kernel cost ~49 ms a step (~93 ms a "
        "step against ~45 ms) and neither rank can start its forward before the broadcast is done. A Python stack "
        "shows both ranks in DistributedDataParallel.forward in both configs; in the planted config a share of the "
        "samples is in _pre_forward -> _sync_buffers -> _sync_module_buffers -> _default_broadcast_coalesced -> "
        "_distributed_broadcast_coalesced (a C++ call, the transfer itself in gloo's threads), frames that look like "
        "DDP's ordinary housekeeping; that they move 36.5 MiB a step, and that these buffers need no sync because "
        "the all_gather keeps them identical, shows only in the DDP object's forward_sync_buffers (the profile), the "
        "module's buffer sizes, the loopback traffic (~36.5 MiB a step, ~390 MiB/s), a native profile (memcpy and "
        "TCP send/recv under gloo) or the profile. Reports: ultralytics/ultralytics#24410 (DDP "
        "broadcast_buffers=True causes severe starvation on multi-GPU setups without NVLink; fixed by turning it "
        "off), karpathy/nanoGPT#151 (the causal mask registered as a buffer is broadcast by DDP at every step; "
        "excluding it gives up to 8% speed-up), ecmwf/anemoi-core#1278 (DDP broadcasts all registered buffers from "
        "rank 0 at the start of every iteration; the broadcast was 10% of the forward pass, so it was disabled), "
        "bl0/moco#15 (MoCo's queue is a buffer and the training script passes broadcast_buffers=False) (measured by "
        "its author: 10.70 against the twin's 22.42 steps/s, medians of 3 runs each)",
        "none: configs/flyway_shared.toml sets sync_buffers = false: DDP broadcasts the module's parameters and "
        "buffers once, when it is built (a one-off 36.5 MiB broadcast at start-up), and not before each forward; the "
        "queue and the bank stay identical on both ranks through the all_gather of the keys, and a step takes ~45 "
        "ms; the two-rank gloo process group (rank 1 a child process), bucket_cap_mb = 25, gradient_as_bucket_view = "
        "true, find_unused_parameters = false, the gradient all-reduce and the two all_gathers every step, the kNN "
        "monitor every 100 steps and the feeder's brief count lock are the same in both configs and harmless",
        r"(?i)forward_sync_buffers|broadcast_buffers|sync(s|ed|ing)?[_ ]buffers|(broadcast\w*|sync\w*)\W+(\w+\W+){0,6}"
        r"buffers?\b"
        r"|\bbuffers?\W+(\w+\W+){0,6}(broadcast\w*|sync\w*|re-?sen[dt]\w*)|_sync_(module_)?buffers|"
        r"broadcast_coalesced"
        r"|\[ddp\] sync_buffers",
        r"step \d+ loss", batch="settings batch 27"),
    *_settings_pair(
        "settings27_samphire", "settings27_samphire", ("train.py", "--config", "configs/marsh_batch.toml"),
        ("train.py", "--config", "configs/marsh_survey.toml"),
        "the marsh-batch profile (configs/marsh_batch.toml, read at start-up) sets [reader] memory_limit_mb = 64, "
        "which memcg.create writes as memory.limit_in_bytes of the memory cgroup the tile-reader child runs in: the "
        "page cache of the 469 MiB of tile shards it reads is charged to that cgroup, so the kernel keeps reclaiming "
        "it and nearly every pread of a 400 KB tile record goes to the block device (~42 ms of reading a batch "
        "instead of ~4 ms) and the reader falls behind the trainer; a memory limit below the working set makes the "
        "cache thrash and reads hit the disk (lxc/lxc#4122, kubernetes/kubernetes#43916)",
        "train.py reads the profile and builds the survey's tile shards in a temporary directory (tiles.build: 12 "
        "shards of 100 records, each an 8-byte header and a 640 x 640 8-bit aerial tile of one of 5 saltmarsh cover "
        "classes, 469 MiB in all; written, fsynced and dropped from the page cache with POSIX_FADV_DONTNEED so that "
        "the reader brings in what it reads; directories and cgroups left by killed runs are removed first), makes a "
        "memory cgroup for the reader (memcg.create: /sys/fs/cgroup/memory/samphire-reader-<pid> on cgroup v1, "
        "memory.max on v2; memory.limit_in_bytes from [reader] memory_limit_mb, memory.swappiness 0) and starts the "
        "tile-reader child (python reader.py, stdout a pipe; a preexec_fn writes its pid into the cgroup's "
        "cgroup.procs before it execs): the reader checks every shard once (a sequential crc32 pass in 1 MiB reads), "
        "opens them with POSIX_FADV_RANDOM and then per batch picks 64 random tiles, os.preads each whole "
        "409,608-byte record, cuts a random 64 x 64 crop and writes the crops to the pipe; the frame thread "
        "(train.FrameThread) reads the frames, flips, 2 x 2-pools and normalises them and queues 32 x 32 batches; "
        "the main thread trains a 3-layer Conv2d cover classifier (16/32/32 channels, BatchNorm, AdamW, ~26 ms a "
        "step). With memory_limit_mb = 64 (the planted configs/marsh_batch.toml) everything the reader reads is "
        "charged to its cgroup, whose limit is far below the 469 MiB of shards (the reader's own memory is ~10 MB): "
        "each read that would take it over the limit first makes the kernel reclaim the cgroup's own page cache "
        "(memory.usage_in_bytes pinned at 64 MB, memory.failcnt climbing), so the checksum pass leaves nothing "
        "cached and nearly every pread of a tile misses the cache and waits for the virtio disk - ~26 MB read from "
        "the device per batch, the reader's read_bytes growing by gigabytes against the shards' 469 MiB read once "
        "with the 1,024 MB limit, ~42 ms a batch against ~4 ms - and the training loop waits in frames.out.get(). "
        "The reader spends that time blocked in the kernel (page-cache misses, D state), not computing; it is not "
        "the GIL and not the trainer. A Python stack shows the reader in main at the same os.pread line in both "
        "configs and the trainer's frame thread in read_exact (readinto on the pipe); only the cgroup's limit "
        "(memory.limit_in_bytes of the reader's cgroup, its usage at the limit and its failcnt), the reader's I/O "
        "counters (/proc/<reader>/io read_bytes far above the data set), major faults and block-device reads, a "
        "kernel profile (memory-cgroup reclaim, shrink_folio_list) or the profile show why. Reports: lxc/lxc#4122 (a "
        "container at its memory limit gets high CPU and reads from disk at the maximum throughput for ever), "
        "lxc/lxc#3094 (I/O in a container slows down once its page cache is filled), kubernetes/kubernetes#43916 "
        "(the cgroup memory limit applies to the page cache: with a 12 GB limit the file cache never grows above 2 "
        "GB), jnwatson/py-lmdb#249 (reading more data than the page cache can keep makes reads slow; per-cgroup "
        "memory settings decide what stays cached) (measured by its author: 23.08 against the twin's 38.59 steps/s, "
        "medians of 3 runs each)",
        "none: configs/marsh_survey.toml sets memory_limit_mb = 1024: the reader still runs in a memory cgroup of "
        "its own (swappiness 0), but its limit is above the 469 MiB of shards, so the start-up checksum pass leaves "
        "them all in the page cache and each batch's 64 preads are memory copies (~4 ms a batch); the trainer sets "
        "the pace (~26 ms a step); the one-off shard synthesis with its fsync and POSIX_FADV_DONTNEED, the checksum "
        "pass, POSIX_FADV_RANDOM on the shards, the reader_mem figure in every 100th step line, the frame thread's "
        "NumPy work and OMP_NUM_THREADS=1 in the reader's environment are the same in both configs and harmless",
        r"(?i)memory\.(limit_in_bytes|max|high|usage\w*|failcnt)|memory[ -]?c?group|memcg|c?group\W+(\w+\W+){0,4}"
        r"memory"
        r"|memory[_ ]limit|limit\w*\W+(\w+\W+){0,4}(memory|page[ _-]?cache)|page[ _-]?cache\W+(\w+\W+){0,6}"
        r"(reclaim\w*|thrash\w*|evict\w*|limit\w*)"
        r"|reclaim\w*|\[reader\] memory_limit_mb",
        r"step \d+ loss", batch="settings batch 27"),
    *_settings_pair(
        "settings27_tombolo", "settings27_tombolo", ("train.py", "--config", "configs/kiosk_lowmem.toml"),
        ("train.py", "--config", "configs/spit_station.toml"),
        "the kiosk-lowmem profile (configs/kiosk_lowmem.toml, read at start-up) sets [spool] max_in_memory_kb = 4, "
        "which decode.ClipDecoder passes to tempfile.SpooledTemporaryFile as max_size=4096: every 16 KB clip that "
        "streams in from the archive rolls over to a real temporary file in the scratch directory (an O_TMPFILE "
        "inode on the ext4 disk) after its first chunk, and the rest of the spooling and the wave reader's seeks and "
        "reads become system calls on that file (~90-110 us a clip instead of ~20-40 us), so the two clip-fetch "
        "threads fall behind the trainer; a spool threshold below the payload size sends every item through a disk "
        "file (internetarchive/warcprox#75, eXist-db/exist#3940)",
        "train.py reads the profile and builds the station's clip archive in memory (archive.build: 4,000 "
        "half-second 16 kHz 16-bit mono WAV clips of ringed plover, oystercatcher, little tern, turnstone and "
        "surf-only background, 16,044 bytes each), which archive.ArchiveClient streams one 8 KB memoryview chunk at "
        "a time, as the archive service sends them; the batcher thread (decode.Batcher) draws 128 clips per batch "
        "and fetches them on a 2-thread pool (ThreadPoolExecutor 'clip-fetch', map with chunksize 8): "
        "decode.ClipDecoder.fetch writes the chunks into a tempfile.SpooledTemporaryFile (max_size from the profile; "
        "dir the run's scratch directory, removed when the run ends) because the wave module needs a seekable file, "
        "seeks back, and parses the clip with wave.open and readframes; the batcher then computes 31 frames x 40 log "
        "band energies per clip (rfft of 256-sample frames) and queues the batch; the main thread trains a 3-layer "
        "Conv1d call classifier (64 channels, BatchNorm, AdamW, ~22 ms a step). With max_in_memory_kb = 4 (the "
        "planted configs/kiosk_lowmem.toml) SpooledTemporaryFile._check finds the spool past 4,096 bytes after the "
        "first 8 KB chunk and calls rollover(): tempfile.TemporaryFile opens an unnamed file in the scratch "
        "directory (openat with O_TMPFILE, an inode allocated and journalled by ext4), the in-memory part is copied "
        "into it, and from then on the second chunk, the seek and every read the wave module makes (the RIFF and fmt "
        "chunks, then the data) are system calls on a disk file, and closing it frees the inode again: ~90-110 us of "
        "file-system work a clip against ~20-40 us of BytesIO copies, 128 times a batch, on two threads that also "
        "take turns on the GIL, so the batcher needs ~39 ms a batch and the training loop waits in "
        "batcher.out.get(). The extra time is system time in the clip-fetch threads (ext4 inode allocation and "
        "freeing, the journal), not Python computing more. A Python stack shows the clip-fetch threads in "
        "ClipDecoder.fetch at spool.write, wave.open and readframes in both configs (a SpooledTemporaryFile in "
        "both); in the planted config an occasional sample lands in SpooledTemporaryFile.rollover -> "
        "tempfile.TemporaryFile -> _io.open, otherwise the lines are the same; only the max_size the spools are made "
        "with (the profile), strace (an openat with O_TMPFILE and a run of writes, lseeks, reads and a close for "
        "every clip), file-system activity in the scratch directory or a kernel profile (ext4 inode allocation and "
        "eviction) show why. Reports: internetarchive/warcprox#75 (SpooledTemporaryFile max_size made configurable: "
        "a higher value means less /tmp disk I/O and higher overall performance), eXist-db/exist#3940 (a file-upload "
        "size threshold of 0 sent every uploaded item to disk; the default threshold cuts the I/O for many small "
        "files), pallets/werkzeug#1624 (SpooledTemporaryFile spooling of uploads to /tmp costs RAM and performance "
        "on small boards), jschneier/django-storages#921 (what a SpooledTemporaryFile max_size means for when it "
        "rolls over to disk was documented the wrong way round) (measured by its author: 25.58 against the twin's "
        "44.39 steps/s, medians of 3 runs each)",
        "none: configs/spit_station.toml sets max_in_memory_kb = 1024: each 16 KB clip stays in the spool's BytesIO, "
        "the wave reader seeks and reads in memory (~20-40 us a clip), the batcher keeps ahead and the trainer sets "
        "the pace (~22 ms a step); the same SpooledTemporaryFile in the same scratch directory (dir = \"scratch\"), "
        "chunk_kb = 8, the 2-thread clip-fetch pool with chunksize 8, the feature settings, the one-off archive "
        "synthesis at start-up and the batcher's brief count lock are the same in both configs and harmless",
        r"(?i)max_size|max_in_memory|roll(s|ed|ing)?[ -]?over|spool\w*\W+(\w+\W+){0,6}(spill\w*|disk|temp\w*[ -]?"
        r"files?|real files?)"
        r"|spill\w*\W+(\w+\W+){0,4}(disk|files?)|O_TMPFILE|(temp(orary)?|tmp)[ _-]?files?\W+(\w+\W+){0,6}(per|"
        r"each|every|a)\W+(\w+\W+){0,2}(clip|record|item|sample)"
        r"|\[spool\] max_in_memory_kb",
        r"step \d+ loss", batch="settings batch 27",
        missed={'outside': "`pipeline-bottleneck-target` because `kernel-time` on clip-fetch's `spool.write(chunk)` (the kernel's work per call 54-66x a cached read); SpooledTemporaryFile's max_size (from [spool] max_in_memory_kb) spilling every clip to a file not named", 'probes': "`kernel-time` on clip-fetch's `spool.write(chunk)` (the kernel's work per call 54-66x a cached read); SpooledTemporaryFile's max_size (from [spool] max_in_memory_kb) spilling every clip to a file not named", 'attach': "`pipeline-bottleneck-target` because `kernel-time` on clip-fetch's `spool.write(chunk)` (the kernel's work per call 54-66x a cached read); SpooledTemporaryFile's max_size (from [spool] max_in_memory_kb) spilling every clip to a file not named"}),
    *_settings_pair(
        "settings27_ptarmigan", "settings27_ptarmigan", ("train.py", "--config", "configs/fell_durable.toml"),
        ("train.py", "--config", "configs/fell_station.toml"),
        "the fell-durable profile (configs/fell_durable.toml, read at start-up) sets [spool] durable_dirs = true, "
        "which spool.Spool turns into the ext4 DIRSYNC attribute (FS_DIRSYNC_FL through FS_IOC_SETFLAGS, what chattr "
        "+D sets) on the record spool's tmp/ and new/ directories: every directory update there becomes synchronous "
        "- the create of each collar record under tmp/, its rename into new/ and its unlink after the loader has "
        "read it each wait for a journal commit (~100 us each, ~400 us a record instead of ~90 us) - and the capture "
        "and loader threads fall behind the trainer; synchronous metadata updates per small file cap the file rate "
        "(mem9-ai/drive9#959, marmos91/dittofs#1573)",
        "train.py reads the profile and makes a maildir-style record spool in a temporary directory (spool.Spool: "
        "tmp/ and new/, spools left by killed runs removed first, the spool directory fsynced once), setting inode "
        "flags on tmp/ and new/ with FS_IOC_SETFLAGS - noatime ([spool] dir_attributes) in both configs, and dirsync "
        "when [spool] durable_dirs is true; the capture thread (collars.Capture) makes uplink frames of 32 synthetic "
        "rock-ptarmigan collar records (a 12-byte header and 3 x 128 int16 accelerometer samples, 780 bytes, one of "
        "6 behaviours) and spools each as its own file - written under tmp/, renamed into new/ - and passes its path "
        "on an in-memory queue; the loader thread (collars.Loader) takes 96 paths per batch, reads each record and "
        "unlinks it, and queues the stacked bursts; a status thread rewrites status.json (a tmp file and os.replace "
        "in the spool directory) every 2 s; the main thread trains a 3-layer Conv1d behaviour classifier (64 "
        "channels, BatchNorm, AdamW). With durable_dirs = true (the planted configs/fell_durable.toml) the two "
        "directories carry FS_DIRSYNC_FL: ext4 then makes every create, rename and unlink in them synchronous "
        "(ext4_handle_sync), so the system call returns only after jbd2 has committed the transaction and the device "
        "has flushed - ~300 us to write and rename a record against ~60-80 us, ~90-120 us to read and unlink it "
        "against ~26 us - three journal commits for each of the 96 records of a batch; the capture and loader "
        "threads wait in those calls (the GIL released, the CPUs partly idle) and the training loop waits in "
        "loader.out.get() (~62 ms a step against ~41 ms). The record data is not synced (fsync_records = false in "
        "both configs); it is the directory updates. A Python stack shows the capture thread in Spool.put (open and "
        "write, os.rename) and the loader in Spool.take (read, os.unlink) at the same lines in both configs; only "
        "the directories' attributes (lsattr -d shows D on tmp/ and new/), the time those system calls take (strace "
        "-T: openat, rename and unlink ~100 us each), the journal's commit rate (/proc/fs/jbd2/<dev>/info, jbd2 "
        "thread activity) or a kernel profile (jbd2_log_wait_commit under the ext4 create, rename and unlink paths) "
        "show why. Reports: mem9-ai/drive9#959 (a writeback flush made seven synchronous fsyncs per small file, "
        "three of them of the directory, capping small-file creation at ~45 files/s), marmos91/dittofs#1573 (each "
        "file create and commit a separate synchronous metadata commit: small-file metadata throughput walled at "
        "~168 ops/s), ClickHouse/ClickHouse#111861 (an fsync of the parent directory per part rename, ~200-300 us a "
        "call), noobaa/noobaa-core#6858 (small-object writes limited to ~120 a second, the rename taking long on the "
        "POSIX file system) (measured by its author: 16.16 against the twin's 24.14 steps/s, medians of 3 runs each)",
        "none: configs/fell_station.toml sets durable_dirs = false: tmp/ and new/ get only the noatime flag, the "
        "records' creates, renames and unlinks are ordinary journalled metadata updates that return at once (~60-80 "
        "us to write and rename a record, ~26 us to read and unlink it) and the spool keeps up (~41 ms a step); the "
        "one-record-per-file spool with its tmp/ -> new/ renames, FS_IOC_SETFLAGS with noatime, the one-off fsync of "
        "the spool directory at start-up, fsync_records = false, the status thread's os.replace every 2 s, the "
        "in-memory path queue (backlog 2048) and the loader's brief count lock are the same in both configs and "
        "harmless",
        r"(?i)dirsync|DIRSYNC_FL|chattr\W+\+?D\b|synchronous\W+(\w+\W+){0,3}(director\w*|metadata)|director\w*\W+"
        r"(\w+\W+){0,4}synchronous\w*"
        r"|(journal|jbd2)\W+(\w+\W+){0,6}(commit\w*|flush\w*|wait\w*)|(creat\w*|renam\w*|unlink\w*)\W+"
        r"(\w+\W+){0,6}(synchronous\w*|journal\w*|commit\w*)"
        r"|durable_dirs|\[spool\] durable_dirs",
        r"step \d+ loss", batch="settings batch 27",
        twin_missed={'attach': "`kernel-time` (warning) on its first run, not on the run recorded: the capture thread's open and rename calls in the kernel, said as the consumer stage's cause"},
        missed={'outside': "`pipeline-bottleneck-target` because `kernel-time`: capture-9's CPU in open64 and rename system calls; the spool directories' DIRSYNC attribute (from [spool] durable_dirs) not named", 'probes': "`pipeline-bottleneck-target` because `kernel-time`: capture-9's CPU in open64 and rename system calls; the spool directories' DIRSYNC attribute (from [spool] durable_dirs) not named", 'attach': "`pipeline-bottleneck-target` because `kernel-time`: capture-9's CPU in open64 and rename system calls; the spool directories' DIRSYNC attribute (from [spool] durable_dirs) not named"}),
    *_settings_pair(
        "settings28_fulmar", "settings28_fulmar", ("train.py", "--config", "configs/colony_deep.toml"),
        ("train.py", "--config", "configs/colony_routine.toml"),
        "the colony-deep profile (configs/colony_deep.toml, read at start-up) sets [profiling] interval_ms = "
        "0.15, which stacksampler.WallSampler passes to signal.setitimer(signal.ITIMER_REAL, 0.00015, 0.00015): "
        "the kernel raises SIGALRM every 150 us of wall time and CPython runs the sampler's Python handler "
        "(sys._current_frames() and a traceback.extract_stack of every thread, counted as folded stacks) in the "
        "main thread, which is the training loop, at the next bytecode boundary after each alarm - ~1,800 samples "
        "a second at ~110 us each, on top of ~6,700 signal deliveries a second - so the trainer loses ~40% of its "
        "speed to sampling itself; a sampler whose interval is close to the cost of taking a sample stalls the "
        "program it profiles (tmm1/stackprof#123, vmprof/vmprof-python#163)",
        "train.py trains a behaviour classifier for fulmar foraging trips (DiveNet: a Conv1d stem, six dilated "
        "residual Conv1d blocks with GroupNorm and GELU, attention pooling and a 2-layer head, ~41 k parameters; "
        "AdamW, gradient clipping, label smoothing, one intra-op thread) on batches of 48 synthetic trips (6 "
        "channels - speed, heading sin/cos, TDR depth, wet/dry, a diel term - of 128 samples) that a producer "
        "thread (tracks.TrackFeeder) draws, normalises and puts on a bounded queue of 4; the main thread takes a "
        "batch, steps and prints a line per step. The profile's [profiling] table configures an in-process "
        "wall-clock stack sampler for the colony dashboard's flame graph (stacksampler.WallSampler): "
        "signal.setitimer(signal.ITIMER_REAL, interval, interval) and a SIGALRM handler (_on_alarm -> _sample) "
        "that takes sys._current_frames(), walks every Python thread's stack with traceback.extract_stack (limit "
        "64, source lines through linecache), joins it into a folded 'file:func:line;...' string, counts it in a "
        "Counter and every 15 s writes the top 500 stacks to the scratch directory. With interval_ms = 0.15 (the "
        "planted configs/colony_deep.toml) the timer fires every 150 us; CPython's C-level handler only sets a "
        "flag and the main thread - the training loop - runs the Python handler at its next bytecode boundary, "
        "i.e. after nearly every torch call of the forward, backward and optimizer step returns (alarms that "
        "arrive during one long C call coalesce into one sample): ~1,800 samples a second at ~110 us each, about "
        "a fifth of the main thread, and the ~6,700 alarms a second also interrupt the torch kernels and the "
        "threads' system calls (signal delivery, sigreturn, EINTR and retry), so a step takes ~70 ms against ~38 "
        "ms; in the twin the same sampler takes 4 samples a second. A Python stack of the main thread shows the "
        "training loop (DiveNet.forward, Tensor.backward, AdamW.step) in both configs and, in the planted one, a "
        "share of samples with _on_alarm -> _sample -> _folded -> traceback.extract_stack / StackSummary.extract "
        "/ linecache.getline on top of whichever training frame was interrupted - the frames of a profiler hook "
        "that the twin has as well; that they run ~1,800 times a second, and that the alarms themselves cost the "
        "trainer, shows only in the interval timer (getitimer(ITIMER_REAL), the profile's interval_ms), the "
        "SIGALRM rate (strace, /proc/<pid>/status and its context switches) or the sampler's own sample count. "
        "Reports: tmm1/stackprof#123 (a wall-clock sampler whose sample collection takes longer than its 50 us "
        "interval leaves the program hardly any time to run), vmprof/vmprof-python#163 (SIGALRM-driven real-time "
        "sampling reaches several kHz, where SIGPROF is capped by CONFIG_HZ), vmprof/vmprof-python#207 (the "
        "SIGALRM of ITIMER_REAL is delivered to the main thread and interrupts its time.sleep with EINTR), "
        "gperftools/gperftools#874 (a ridiculously high profiling frequency has no chance of working) (measured "
        "by its author: 14.59 against the twin's 26.20 steps/s, medians of 3 runs each)",
        "none: configs/colony_routine.toml sets interval_ms = 250.0: the same ITIMER_REAL/SIGALRM stack sampler "
        "takes 4 samples a second (well under 1% of the main thread); the 15 s flushes of the folded stacks, the "
        "SIGUSR1 handler that flushes them on demand, faulthandler.enable() with dump_traceback_later(1800 s, "
        "repeat=True) into the scratch directory (a watchdog thread that sleeps), gc.freeze() after start-up, "
        "sys.setswitchinterval(0.005) (the default, set explicitly), one intra-op thread and the producer thread "
        "with its bounded queue of 4 are the same in both configs and harmless",
        r"(?i)setitimer|ITIMER_REAL|SIGALRM|interval[ _-]?timer|interval_ms|WallSampler|_on_alarm|sampl(er|"
        r"ing)\W+(\w+\W+){0,8}(interval|rate|frequency|hz|khz|every)\b|(interval|rate|"
        r"frequency)\W+(\w+\W+){0,6}(sampl\w*|profil\w*)|(signal|alarm)[ _-]?handler\W+(\w+\W+){0,8}(sampl\w*|"
        r"stack\w*|profil\w*)",
        r"step \d+ loss", batch="settings batch 28",
        missed={'outside': "`pipeline-bottleneck-drafter` (info), no cause found: the trainer's time and traceback.extract_stack (14%) with the sampler's max_depth said; the 0.15 ms SIGALRM interval timer ([profiling] interval_ms) not named", 'attach': "`diagnostics-overhead`: MainThread's stack capture called from the sampler (16%); the 0.15 ms SIGALRM interval timer ([profiling] interval_ms) that runs it not named"}),
    *_settings_pair(
        "settings28_kame", "settings28_kame", ("train.py", "--config", "configs/coreshed_shared.toml"),
        ("train.py", "--config", "configs/coreshed_dedicated.toml"),
        "the coreshed-shared profile (configs/coreshed_shared.toml, read at start-up) sets [io] read_mbps = 24, "
        "which iolimits.ReaderGroup writes as blkio.throttle.read_bps_device (254:0 25165824) of the cgroup v1 "
        "blkio group that the scan reader child (python scanreader.py) is moved into: the kernel's block-I/O "
        "throttle holds the child's O_DIRECT reads of the scratch shard to 24 MiB/s, so each 2 MiB batch of core "
        "scans takes ~83 ms to read instead of ~2 ms and the trainer waits for batches; a per-device read_bps "
        "limit caps direct reads at that rate (baidu/galaxy#101, canonical/lxd#3515)",
        "train.py trains a lithofacies classifier for glacial sediment cores (FaciesNet: a strided Conv1d stem "
        "and three Conv1d/BatchNorm/ReLU blocks of width 32, mean and max pooling, a linear head, ~17 k "
        "parameters; SGD with Nesterov momentum, one intra-op thread) on multi-sensor core-logger scans. At "
        "start-up it writes a 64 MiB shard of 2,048 synthetic records (4 channels - gamma density, magnetic "
        "susceptibility, XRF Fe and Ca - of 4,096 int16 samples, 32 KiB each) to a scratch directory on the root "
        "disk (ext4 on /dev/vda, 254:0) and fsyncs it, creates a blkio cgroup of its own "
        "(/sys/fs/cgroup/blkio/kame-reader-<pid>) with the profile's [io] limits (read_bps_device and "
        "write_bps_device for the disk that holds the scratch directory) and starts the reader child (python "
        "scanreader.py), which it moves into that cgroup; the child reads the shard in 2 MiB batches of 64 "
        "records with os.preadv on an O_DIRECT descriptor, checksums each batch (zlib.crc32), writes it with a "
        "small header to its stdout pipe and leaves when its stdin closes; in the trainer a pipe-reader thread "
        "(PipeBatches) reads each frame, decimates the scans by 8, normalises them and puts them on a queue of 4, "
        "from which the main thread trains and prints a line per step. With read_mbps = 24 (the planted "
        "configs/coreshed_shared.toml) blk-throttle queues the child's bios so that its reads average 24 MiB/s: "
        "each 2 MiB preadv sleeps in the kernel (D state) for ~83 ms until the throttle releases it, the reader "
        "delivers 12 batches a second and the trainer, which needs ~34 ms a step, waits on its queue; in the twin "
        "the limit (4,000 MiB/s) is above what the device delivers (~1.3 GB/s) and a batch is read in ~2 ms. A "
        "Python stack shows the main thread in Queue.get, the pipe-reader thread in readinto on the pipe and the "
        "child in os.preadv in both configs (briefly in the twin): a reader waiting on its disk; that the disk is "
        "idle and the reads are held back by a cgroup bandwidth rule shows only in the child's cgroup "
        "(/proc/<child>/cgroup: blkio:/kame-reader-<pid>) and its blkio.throttle.read_bps_device, the child's "
        "steady read rate (/proc/<child>/io read_bytes, blkio.throttle.io_service_bytes: 24 MiB/s), its I/O wait "
        "while the device's queue is empty, or the profile. Reports: baidu/galaxy#101 (with 1 MB/s in "
        "blkio.throttle.read_bps_device a direct-I/O dd reads at ~0.7 MB/s, while buffered reads are not "
        "limited), canonical/lxd#3515 (a container's 1 MB/s disk limit becomes a blkio throttle rule and a 40 MB "
        "dd then takes 40 s), moby/moby#14466 (docker's --device-read-bps writes blkio.throttle.read_bps_device "
        "to cap a container's read rate from a device) (measured by its author: 12.00 against the twin's 29.69 "
        "steps/s, medians of 3 runs each)",
        "none: configs/coreshed_dedicated.toml sets read_mbps = 4000: the reader child still runs in a blkio "
        "cgroup of its own with a read_bps_device rule, but one above what the disk delivers (~1.3 GB/s), so a 2 "
        "MiB O_DIRECT batch is read in ~2 ms; the write_bps_device limit of 16 MiB/s (the reader never writes), "
        "the O_DIRECT reads that bypass the page cache, posix_fadvise(SEQUENTIAL), the one-off 64 MiB shard write "
        "and fsync at start-up, the crc32 of each batch, the pipe and the reader thread's queue of 4 are the same "
        "in both configs and harmless",
        r"(?i)blkio|blk[-_ ]?throttl\w*|read_bps|read_mbps|throttl\w*\W+(\w+\W+){0,6}(read\w*|i/?o|disk|block|"
        r"bandwidth)|(read\w*|i/?o|disk|block)\W+(\w+\W+){0,4}throttl\w*|cgroup\W+(\w+\W+){0,8}(i/?o|read\w*|disk|"
        r"block|bandwidth|bps)\b|(i/?o|disk|read)\W+(bandwidth\W+|rate\W+)?(limit|cap|quota)\w*|io\.max",
        r"step \d+ loss", batch="settings batch 28"),
    *_settings_pair(
        "settings28_sundew", "settings28_sundew", ("train.py", "--config", "configs/bog_fieldkit.toml"),
        ("train.py", "--config", "configs/bog_lab.toml"),
        "the bog-fieldkit profile (configs/bog_fieldkit.toml, read at start-up) sets [audit] max_bytes = 2048, "
        "which audit.build_logger passes to logging.handlers.RotatingFileHandler(maxBytes=2048, backupCount=160) "
        "of the per-parameter audit log: the handler rolls the file over every ~14 lines, and each doRollover "
        "closes it and renames the whole backup chain (audit.log.159 -> .160 down to audit.log -> .1: two "
        "os.path.exists, an os.remove and an os.rename per backup, ~3.5 ms), ~11 times for the 149 lines of each "
        "step, so the audit thread needs ~44 ms a step and the trainer blocks on its bounded queue; rotation that "
        "renames every kept file gets slow with many backups (gabime/spdlog#356, estk/log4rs#216)",
        "train.py fits a CO2-flux regression for sundew bog plots (FluxNet: a Linear stem, 36 residual blocks of "
        "LayerNorm and a 96 x 96 Linear with SiLU, a linear output - 148 parameter tensors, ~0.34 M parameters; "
        "Adam, one intra-op thread) on batches of 256 synthetic half-hourly plot records (16 chamber and "
        "microclimate features). The field kit's data policy asks for a per-parameter audit trail: after each "
        "step the main thread computes the gradient norm, weight norm and update norm of every parameter tensor "
        "(torch._foreach_norm) and submits them to the audit thread (audit.AuditTrail) through a bounded queue of "
        "4, so that no record is dropped; the audit thread writes a step line and one line per tensor (149 lines, "
        "~22 KB a step) through the 'sundew.audit' logger, whose only handler is a RotatingFileHandler on "
        "audit.log in the scratch directory (maxBytes from [audit] max_bytes, backupCount = 160), and checkpoints "
        "the model every 500 steps. With max_bytes = 2048 (the planted configs/bog_fieldkit.toml) shouldRollover "
        "is true every ~14 lines, and each doRollover closes the stream and renames the whole backup chain from "
        "audit.log.159 down to audit.log.1 (for each: os.path.exists of the source and of the destination, "
        "os.remove of the destination, os.rename) before it reopens audit.log - ~640 file-system calls on the "
        "ext4 scratch directory, ~3.5 ms - about 11 times a step; the audit thread needs ~44 ms a step, its queue "
        "fills and the main thread blocks in Queue.put (AuditTrail.submit), a step taking ~59 ms against ~24 ms "
        "in the twin, where the file rolls over every ~47 steps (1 MiB) and the audit thread needs ~3 ms a step. "
        "A Python stack shows the main thread in the training step or in Queue.put and the audit thread in "
        "Logger.info -> Handler.handle -> RotatingFileHandler.emit in both configs; in the planted one most of "
        "the audit thread's samples are in doRollover (os.rename, os.remove, genericpath.exists), which looks "
        "like ordinary log rotation; that it rotates ~11 times a step because of a 2 KiB size limit shows only in "
        "the handler's maxBytes (the profile), the rename rate (strace: thousands of renames a second) or the 160 "
        "backups of ~2 KiB in the log directory. Reports: gabime/spdlog#356 (a rotating sink renames every "
        "previous file at each rotation, and the rotation took too long for a time-sensitive application), "
        "estk/log4rs#216 (with 100 or more rolling files every roll renames all of them and affects the main "
        "process), twisted/axiom#78 (ordinal rotation cost grows linearly with the number of kept files), "
        "cjbhaines/Log4Net.Async#42 (rolling 100 backups costs about 3/4 of a second on the logging call) "
        "(measured by its author: 16.89 against the twin's 41.38 steps/s, medians of 3 runs each)",
        "none: configs/bog_lab.toml sets max_bytes = 1048576: the same RotatingFileHandler with backupCount = 160 "
        "rolls the audit log over every ~47 steps (one rename chain of a few ms every ~1.5 s); the per-parameter "
        "audit lines themselves (149 a step, formatted and written by the audit thread), the bounded queue of 4, "
        "the model lock and the torch.save checkpoint every 500 steps (a brief lock and a one-off write), "
        "logging.raiseExceptions = False and logging.logMultiprocessing = False are the same in both configs and "
        "harmless",
        r"(?i)RotatingFileHandler|doRollover|roll(ing|s|ed)?[ _-]?over|rotat\w*\W+(\w+\W+){0,6}(log|file|"
        r"backup)\w*|(log|audit)\w*\W+(\w+\W+){0,4}rotat\w*|max_?bytes|rename\w*\W+(\w+\W+){0,6}(backup|log)\w*|"
        r"backups?\W+(\w+\W+){0,4}renam\w*",
        r"step \d+ loss", batch="settings batch 28",
        missed={'outside': "`pipeline-bottleneck-drafter` because `diagnostics-overhead`, `kernel-time`: the audit thread's time in logging; the RotatingFileHandler's 2 KB max_bytes (from [audit] max_bytes) rolling over and renaming its 160 backups not named", 'probes': "`pipeline-bottleneck-drafter` because `diagnostics-overhead`, `kernel-time`: the audit thread's time in logging; the RotatingFileHandler's 2 KB max_bytes (from [audit] max_bytes) rolling over and renaming its 160 backups not named", 'attach': "`pipeline-bottleneck-drafter` because `diagnostics-overhead`, `kernel-time`: the audit thread's time in logging; the RotatingFileHandler's 2 KB max_bytes (from [audit] max_bytes) rolling over and renaming its 160 backups not named"}),
    *_settings_pair(
        "settings28_dotterel", "settings28_dotterel", ("train.py", "--config", "configs/upland_parity.toml"),
        ("train.py", "--config", "configs/upland_fast.toml"),
        "the upland-parity profile (configs/upland_parity.toml, read at start-up) sets [teacher] fastpath = "
        "false, which teacher.configure passes to torch.backends.mha.set_fastpath_enabled(False) for the whole "
        "process: the frozen bout teacher's nn.TransformerEncoder no longer turns each padded batch into a nested "
        "tensor and runs the fused torch._transformer_encoder_layer_fwd on the real syllables, but runs every "
        "layer through the regular MultiheadAttention and feed-forward path over all padded positions (~72% of "
        "them padding), so labelling a batch takes ~2.5x as long and the student waits for the labeller; the "
        "native fast path exists because the regular path is slow for inference (pytorch/pytorch#75809, "
        "pytorch/pytorch#112212)",
        "train.py distils a frozen bout encoder into a small student that classifies dotterel call types. A "
        "dispatcher thread (Dispatcher) draws batches of 16 synthetic song bouts (24 acoustic features per "
        "syllable; bout lengths long-tailed - lognormal, 6 to 256 syllables - padded to the longest bout of the "
        "batch, ~72% of the positions padding) and submits each to a labeller pool "
        "(concurrent.futures.ThreadPoolExecutor, one labeller thread on this 2-core box), keeping up to 4 futures "
        "in flight in order; the labeller runs the teacher (teacher.BoutTeacher: a Linear projection, an "
        "nn.TransformerEncoder of 3 layers - d_model 256, 4 heads, feed-forward 1024, batch_first, "
        "enable_nested_tensor=True - and masked mean pooling, ~2.4 M parameters; eval mode, frozen, under "
        "torch.no_grad) and returns its soft labels and pooled embedding; the main thread trains the student (a "
        "2-layer transformer of width 96 with the same padding mask, ~0.19 M parameters) on a distillation loss "
        "(KL to the soft labels, cross-entropy, MSE to the teacher's embedding) with AdamW and prints a line per "
        "step; one intra-op thread. With fastpath = false (the planted configs/upland_parity.toml) "
        "torch.backends.mha.get_fastpath_enabled() is False, so TransformerEncoder.forward neither turns the "
        "padded batch into a nested tensor (torch._nested_tensor_from_mask) nor calls the fused layer kernel "
        "(torch._transformer_encoder_layer_fwd); each layer runs TransformerEncoderLayer._sa_block -> "
        "MultiheadAttention.forward -> F.multi_head_attention_forward and _ff_block on the whole 16 x longest "
        "padded tensor, ~3.6 times the real syllables: labelling a batch takes ~120 ms against ~46 ms, and the "
        "student, which needs ~58 ms a step, waits on the labeller's futures; in the twin the teacher keeps up "
        "with the student. A Python stack shows the main thread in the student step or in Future.result and the "
        "labeller thread in BoutTeacher.forward -> TransformerEncoder.forward in both configs; in the planted one "
        "the labeller's frames continue into TransformerEncoderLayer._sa_block, MultiheadAttention.forward and "
        "F.multi_head_attention_forward, in the twin they end in the native torch._transformer_encoder_layer_fwd "
        "- two ordinary code paths of the same module; that the fast path is switched off for the whole process "
        "shows only in torch.backends.mha.get_fastpath_enabled(), the profile, or a native profile (dense "
        "addmm/bmm over the padded rows instead of nested-tensor kernels). Reports: pytorch/pytorch#75809 (a "
        "native fast path for TransformerEncoder inference, added because the regular multi-head attention and "
        "transformer implementations are slow), pytorch/pytorch#112212 (adds "
        "torch.backends.mha.set_fastpath_enabled, a global switch that turns the fast path off), "
        "CUNY-CL/yoyodyne#224 (the nested-tensor fast path is particularly helpful with padding), "
        "pytorch/pytorch#91305 (the fast path uses nested tensors to capitalise on ragged sequence lengths) "
        "(measured by its author: 9.74 against the twin's 17.30 steps/s, medians of 3 runs each)",
        "none: configs/upland_fast.toml sets fastpath = true (torch.backends.mha.set_fastpath_enabled(True), the "
        "default set explicitly): the teacher runs the nested-tensor fast path and labels a batch in ~46 ms, "
        "within the student's ~58 ms step; enable_nested_tensor = true, the one-off parity check at start-up that "
        "runs the teacher once through each path (toggling the global switch and restoring it), the warnings "
        "filters for the nested-tensor prototype warning, padding to the longest bout, the single labeller thread "
        "with 4 futures in flight, torch.no_grad teacher inference and one intra-op thread are the same in both "
        "configs and harmless",
        r"(?i)fast[ _-]?path|set_fastpath_enabled|get_fastpath_enabled|backends\.mha|BetterTransformer|"
        r"_transformer_encoder_layer_fwd|nested[ _-]?tensors?\W+(\w+\W+){0,6}(off|disabled?|not used|unused|"
        r"bypass\w*|skipp?\w*)|(padd\w*|pad)\W+(\w+\W+){0,8}(fast|nested)\w*|(regular|"
        r"slow)\W+(\w+\W+){0,3}(encoder|attention|transformer)\W+path",
        r"step \d+ loss", batch="settings batch 28",
        missed={'outside': "`pipeline-bottleneck-drafter` (info), no cause found: the student's encoder and scaled_dot_product_attention; the MHA fast path turned off (torch.backends.mha.set_fastpath_enabled(False), from [teacher] fastpath) not read or named", 'probes': "`pipeline-bottleneck-drafter` (info), no cause found: the student's encoder and scaled_dot_product_attention; the MHA fast path turned off (torch.backends.mha.set_fastpath_enabled(False), from [teacher] fastpath) not read or named", 'attach': "`pipeline-bottleneck-drafter` (info), no cause found: the student's encoder and scaled_dot_product_attention; the MHA fast path turned off (torch.backends.mha.set_fastpath_enabled(False), from [teacher] fastpath) not read or named"}),
)

# The project's own healthy reference trainer on the real preset (GPU): it must get no warning it does not
# deserve (issue 9: gdn-torch-fallback and cudagraph-multi-thread were false alarms there). Outside mode starts
# it with its probes off; run from the repository root.
REFERENCE_TRAINER = Case(
    name="reference_trainer_qwen3.5-4b",
    program="",
    argv=("-m", "reference_trainer", "--preset", "qwen3.5-4b", "--wandb", "off", "--max-seconds", "600"),
    cause="none: the reference DFlash trainer, real preset",
    expect=HEALTHY,
    ready=r"step +(1[0-9]|[2-9][0-9]|[0-9]{3,}) +\|",
    settle_s=5.0, ready_timeout_s=300.0, gpu=True, healthy=True, family="healthy",
    modes=("outside", "probes", "attach"), attach_probes="all",
)


# --- Jobs: torchrun programs, one process per rank (gloo on CPU), each rank with a DataLoader worker process -------
# (docs/jobs.md). Started as `python -m torch.distributed.run ...`; under `dflash-diag run` the probes reach every
# rank. doctor is given the launcher's PID or one rank's (``targets``): it must find the whole job from either.
def _torchrun(ranks: int, script: str) -> tuple[str, ...]:
    return ("-m", "torch.distributed.run", "--nproc-per-node", str(ranks), script)


JOB_CASES: tuple[Case, ...] = (
    Case(
        name="ddp_straggler",
        program="ddp_straggler",
        argv=_torchrun(4, "train.py"),
        cause="rank 0 also refreshes the dashboard's metrics in pure Python after every step: ranks 1-3 wait for it in "
              "all_reduce",
        expect=_both({"rank-straggler"}, {"rank-straggler"}, r"rank 0 is the straggler.*metrics\.py"),
        ready=r"step 40 ", settle_s=2.0, ready_timeout_s=240.0, family="job",
        targets={"outside": "rank:2", "probes": "launcher"},
    ),
    Case(
        name="ddp_uneven_shards",
        program="ddp_uneven_shards",
        argv=_torchrun(3, "train_seq.py"),
        cause="shards cut by document count: rank 1 holds the long documents and pads every batch to 384 tokens",
        expect=_both({"rank-straggler", "rank-uneven-input"}, {"rank-straggler"}, r"rank 1 is the straggler"),
        ready=r"step 20\b", settle_s=2.0, ready_timeout_s=240.0, family="job",
        targets={"outside": "launcher", "probes": "rank:2"},
    ),
    Case(
        name="ddp_rank0_barrier",
        program="ddp_rank0_barrier",
        argv=_torchrun(3, "pretrain.py"),
        cause="only rank 0 saves checkpoints, and the save helper calls dist.barrier(): ranks 1, 2 wait in the next "
              "all_reduce, rank 0 in a barrier nobody else enters",
        expect={m: Expect(frozenset({"collective-hang", "collective-mismatch"}), frozenset({"collective-hang"}),
                          r"rank 0 never entered it.*barrier at save \(ckpt\.py:\d+\)",
                          frozenset({"rank-straggler"})) for m in ("outside", "probes")},
        ready=r"saving step 30", settle_s=3.0, ready_timeout_s=240.0, family="job",
        targets={"outside": "launcher", "probes": "rank:1"},
    ),
    Case(
        name="ddp_thread_died",
        program="ddp_thread_died",
        argv=_torchrun(3, "worker_train.py"),
        cause="each rank trains on a thread; rank 2's dies of a shape error while its process lives on: ranks 0, 1 "
              "wait in all_reduce for it forever",
        expect={m: Expect(frozenset({"collective-hang", "thread-died"}), frozenset({"collective-hang"}),
                          r"rank 2 never entered it", frozenset({"rank-straggler"})) for m in ("outside", "probes")},
        ready=r"rank 2: trainer stopped", settle_s=2.0, ready_timeout_s=240.0, family="job",
        targets={"outside": "launcher", "probes": "rank:0"},
    ),
    Case(
        name="ddp_healthy",
        program="ddp_healthy",
        argv=_torchrun(4, "fit.py"),
        cause="none: four ranks with the same data and the same work",
        expect=HEALTHY, ready=r"step 50 ", settle_s=2.0, ready_timeout_s=240.0, healthy=True, family="job",
        targets={"outside": "rank:1", "probes": "launcher"},
    ),
    # Batch C (held out), scored once without tuning. The straggler's ranks read their shards in their main
    # process (no DataLoader worker); the healthy job's ranks each have one persistent DataLoader worker.
    Case(
        name="ddp_raw_shard_straggler",
        program="ddp_raw_shard_straggler",
        argv=_torchrun(3, "train.py"),
        cause="rank 2's shard exists only as raw text: it tokenizes and filters every batch in Python (~50 ms) while "
              "ranks 0, 1 wait for it in the all_reduce of their hand-written gradient averaging "
              "(NVIDIA/nccl#701, pytorch/pytorch#59433)",
        expect=_both({"rank-straggler"}, {"rank-straggler"}, r"rank\D{0,3}2\b"),
        ready=r"\[rank 0\] step 40 ", settle_s=2.0, ready_timeout_s=240.0, family="job",
        tags=("all-reduce", "tokenizer"), held_out=True,
        targets={"outside": "launcher", "probes": "rank:1"},
    ),
    Case(
        name="ddp_balanced_workers",
        program="ddp_balanced_workers",
        argv=_torchrun(2, "ddp_regress.py"),
        cause="none: DistributedDataParallel over 2 ranks, each fed by one persistent DataLoader worker, the same "
              "shard size and work per rank (pytorch/pytorch#64150)",
        expect=HEALTHY, ready=r"rank=0 .*step=200 ", settle_s=2.0, ready_timeout_s=240.0, healthy=True,
        family="job", tags=("ddp", "dataloader", "child-process"), held_out=True,
        targets={"outside": "rank:0", "probes": "launcher"},
    ),
)
