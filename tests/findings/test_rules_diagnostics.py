"""Diagnostics on the training thread's time (``findings.diagnostics``) and anomaly detection read off the stacks
from outside (``findings.settings``): built observations with the frames py-spy reports for each."""

from __future__ import annotations

from dataclasses import replace

from findings_builders import NOW_S, observation, stack, thread_sample
from sched_builders import settings_board

from dflash_contract.board import SettingsKeys
from dflash_diag.analysis import analyse
from dflash_diag.model import Frame, Severity

LOGGING = "/usr/lib/python3.11/logging/__init__.py"
TRACEBACK = "/usr/lib/python3.11/traceback.py"
LINEAR = "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py"
TRAIN = "/app/train.py"
STEP = Frame("train_step", TRAIN, 30)
OP = Frame("forward", LINEAR, 125)


def _trainer(inside: int, machinery: tuple[Frame, ...], *, total: int = 20, lines: dict[str, str] | None = None,  # type: ignore[no-untyped-def]
             settings: dict[str, object] | None = None):
    """One training thread: ``inside`` of ``total`` samples in ``machinery`` (innermost first, then the step),
    the rest in a torch op."""
    stacks = []
    for i in range(total):
        frames = (*machinery, STEP) if i < inside else (OP, STEP)
        stacks.append(stack([thread_sample("trainer", frames, tid=11)], t=i * 0.2))
    obs = observation([settings_board(settings)] if settings is not None else (), stacks=stacks)
    source = {f"{TRAIN}:30": "        log.debug('step %d', step)", **(lines or {})}
    return analyse(replace(obs, source_lines=source, now_wall_s=NOW_S))


def _rule(analysis, rule_id):  # type: ignore[no-untyped-def]
    return [f for f in analysis.findings if f.rule_id == rule_id]


def test_records_made_and_written_on_the_training_thread_are_a_cost() -> None:
    emitting = (Frame("emit", LOGGING, 1100), Frame("handle", LOGGING, 978), Frame("_log", LOGGING, 1600),
                Frame("debug", LOGGING, 1480))
    analysis = _trainer(6, emitting)
    (finding,) = _rule(analysis, "diagnostics-overhead")
    assert finding.claim == ("trainer spends 30% of its samples in Python's logging: records are made, formatted and "
                             "written on it, called from train_step (train.py:30) `log.debug('step %d', step)`")
    assert finding.severity == Severity.WARNING and abs(finding.impact - 0.3) < 1e-9
    assert analysis.headline is not None and analysis.headline.text.startswith("trainer spends 30% of its samples")


def test_level_checks_are_said_as_such_and_a_few_records_are_not_a_cost() -> None:
    checking = (Frame("isEnabledFor", LOGGING, 1730), Frame("debug", LOGGING, 1480))
    (finding,) = _rule(_trainer(2, checking), "diagnostics-overhead")  # 10%: information
    assert "mostly checking and filtering, few records written" in finding.claim
    assert finding.severity == Severity.INFO and finding.impact == 0.0
    assert _rule(_trainer(0, checking), "diagnostics-overhead") == []
    assert _rule(_trainer(1, checking, total=30), "diagnostics-overhead") == []  # 3%


def test_stacks_captured_from_inside_ops_read_as_anomaly_detection_from_outside() -> None:
    capture = (Frame("extract_stack", TRACEBACK, 200), Frame("format_stack", TRACEBACK, 213), OP)
    analysis = _trainer(8, capture)
    (finding,) = _rule(analysis, "torch-debug-mode")
    assert finding.claim.startswith("anomaly detection looks on (40% of the samples of trainer are in "
                                    "traceback.format_stack called from inside ops, not from a Python line")
    assert finding.severity == Severity.WARNING
    assert _rule(analysis, "diagnostics-overhead") == []  # the same samples are not said twice
    assert analysis.headline is not None and analysis.headline.rule_id == "torch-debug-mode"


def test_a_stack_the_program_captures_itself_is_its_own_diagnostics_not_anomaly_detection() -> None:
    capture = (Frame("extract_stack", TRACEBACK, 200), Frame("format_stack", TRACEBACK, 213), STEP)
    analysis = _trainer(8, capture, lines={f"{TRAIN}:30": "        trace = traceback.format_stack()"})
    assert _rule(analysis, "torch-debug-mode") == []
    (finding,) = _rule(analysis, "diagnostics-overhead")
    assert finding.claim.startswith("trainer spends 40% of its samples in stack capture (traceback, inspect)")


def test_the_level_the_probe_read_is_said_with_the_logging_it_lets_through() -> None:
    emitting = (Frame("emit", LOGGING, 1100), Frame("_log", LOGGING, 1600), Frame("debug", LOGGING, 1480))
    settings = {"interpreter": {"logging_root_level": 10, "loggers_at_debug": [], "warnings_actions": ["always (Warning)"]}}
    (finding,) = _rule(_trainer(6, emitting, settings=settings), "diagnostics-overhead")
    assert finding.claim.endswith("; logging.getLogger().level = DEBUG (default WARNING)")
    assert "warnings" not in finding.claim  # the warnings filter does not let logging records through


def test_a_repeating_timers_handler_on_the_training_thread_is_weighed_by_its_samples() -> None:
    handler = (Frame("_sample", "/app/profiler.py", 12),)
    timers = {"interpreter": {"interval_timers": [["ITIMER_PROF", 0.0005, "__main__._sample"]]}}
    (finding,) = _rule(_trainer(5, handler, settings=timers), "diagnostics-overhead")
    assert finding.claim == ("trainer spends 25% of its samples in __main__._sample, the handler of a repeating timer "
                             "(signal.setitimer(ITIMER_PROF) = every 0.5 ms, handler __main__._sample): it runs at "
                             "every tick, between two of the thread's bytecodes")
    assert finding.severity == Severity.WARNING
    # A C handler, or a handler the samples never catch, is only listed among the settings.
    native = {"interpreter": {"interval_timers": [["ITIMER_REAL", 1.0, "native"]]}}
    assert _rule(_trainer(5, handler, settings=native), "diagnostics-overhead") == []
    assert _rule(_trainer(0, handler, settings=timers), "diagnostics-overhead") == []


def test_warnings_shown_through_logging_are_the_warnings() -> None:
    warnings_py = "/usr/lib/python3.11/warnings.py"
    through_logging = (Frame("emit", LOGGING, 1100), Frame("_showwarning", LOGGING, 2250),
                       Frame("_showwarnmsg", warnings_py, 96), Frame("warn_explicit", warnings_py, 460))
    (finding,) = _rule(_trainer(6, through_logging), "diagnostics-overhead")
    assert finding.claim.startswith("trainer spends 30% of its samples in Python's warnings: records are made, "
                                    "formatted and written on it (shown through logging: logging.captureWarnings)")


# --- a hook that runs at lines that do not call it (a trace or profile function left on) ---------------------------

TRACER = Frame("_tracer", "/app/covhelp.py", 5)
HOOK_LINES = {f"{TRAIN}:{n}": text for n, text in ((31, "        x, y = q.get()"), (32, "        out = model(x)"),
                                                    (33, "        loss = crit(out, y)"), (34, "        loss.backward()"))}


def _traced(callers: list[Frame], *, total: int = 20, extra: dict[str, str] | None = None,  # type: ignore[no-untyped-def]
            settings: dict[str, object] | None = None):
    """The training thread with ``_tracer`` innermost under each of ``callers`` (one sample each), the rest in an op."""
    stacks = [stack([thread_sample("trainer", (TRACER, c, STEP) if i < len(callers) else (OP, STEP), tid=11)],
                    t=i * 0.2) for i, c in enumerate(callers + [STEP] * (total - len(callers)))]
    source = {f"{TRAIN}:30": "        step(x)", **HOOK_LINES, **(extra or {})}
    boards = [settings_board(settings)] if settings is not None else ()
    return analyse(replace(observation(boards, stacks=stacks), source_lines=source, now_wall_s=NOW_S))


def _frames(*lines: int) -> list[Frame]:
    return [Frame(f"fn{n}", TRAIN, n) for n in lines]


def test_a_function_run_at_many_lines_that_do_not_call_it_is_a_trace_hook_on_the_training_thread() -> None:
    (finding,) = _rule(_traced(_frames(31, 32, 33, 34)), "diagnostics-overhead")
    assert finding.severity is Severity.WARNING and abs(finding.impact - 0.20) < 1e-9
    assert "_tracer (covhelp.py:5), a function none of its callers' lines calls: it runs at 4 different lines" \
        in finding.claim and "sys.settrace" in finding.claim
    # With the settings probe, what it read of the trace functions is said with it.
    read = {SettingsKeys.INTERPRETER: {SettingsKeys.TRACER: "covhelp._tracer"}}
    (probed,) = _rule(_traced(_frames(31, 32, 33, 34), settings=read), "diagnostics-overhead")
    assert probed.claim.endswith("; a trace function for new threads: covhelp._tracer")


def test_a_function_its_lines_call_or_few_lines_run_is_not_a_hook() -> None:
    # Under one line only (a generator resumed by a loop, a callback): not a hook.
    assert _rule(_traced(_frames(31, 31, 31, 31)), "diagnostics-overhead") == []
    # Under lines of too few functions.
    same = [Frame("step", TRAIN, n) for n in (31, 32, 33, 34)]
    assert _rule(_traced(same), "diagnostics-overhead") == []
    # Mostly under a line that calls it (stacks read while the thread moved pair it with other lines now and then).
    calls = {f"{TRAIN}:35": "        _tracer(frame)"}
    torn = _frames(31, 32, 33, 34) + [Frame("fn35", TRAIN, 35)] * 6
    assert _rule(_traced(torn, extra=calls), "diagnostics-overhead") == []


def test_the_recorded_hooked_loop_names_its_trace_function_in_the_headline() -> None:
    """A real run (tests/fixtures/cpu/hooked_loop): sys.settrace by a coverage-like helper, half the loop's speed."""
    from pathlib import Path

    from dflash_diag.snapshot.bundle import load_observation

    obs = load_observation(str(Path(__file__).resolve().parents[1] / "fixtures" / "cpu" / "hooked_loop.json"))
    analysis = analyse(obs)
    (finding,) = _rule(analysis, "diagnostics-overhead")
    assert finding.severity is Severity.WARNING and "_tracer (covhelp.py:5)" in finding.claim
    assert analysis.headline is not None and "diagnostics-overhead" in analysis.headline.because


def _traced_by_probe(python: int, *, total: int = 20, slowdown: float | None = 6.0, thread: str = "trainer"):  # type: ignore[no-untyped-def]
    """The training thread running Python in ``python`` of ``total`` samples (the rest in a torch op), with the
    settings probe's reading of a trace function on ``thread``'s frames and the slowdown it measured."""
    stacks = [stack([thread_sample("trainer", (STEP,) if i < python else (OP, STEP), tid=11, gil=i < python)],
                    t=i * 0.2) for i in range(total)]
    interp = {SettingsKeys.THREAD_TRACERS: [[thread, "watchdog.StallWatchdog._trace"]],
              SettingsKeys.TRACE_LINE_SLOWDOWN: slowdown}
    obs = observation([settings_board({SettingsKeys.INTERPRETER: interp})], stacks=stacks)
    return analyse(replace(obs, source_lines={f"{TRAIN}:30": "        step(x)"}, now_wall_s=NOW_S))


def test_a_thread_the_probe_read_a_trace_function_on_is_weighed_by_its_python_share_and_the_measured_slowdown() -> None:
    (finding,) = _rule(_traced_by_probe(4), "diagnostics-overhead")
    # 4 of 20 samples run Python; a line under an empty trace function runs 6x slower: about 20% x 5/6.
    assert finding.severity is Severity.WARNING and abs(finding.impact - 0.2 * 5 / 6) < 1e-9
    assert finding.claim.startswith("trainer runs under a trace function (watchdog.StallWatchdog._trace, on its "
                                    "frames: read by the settings probe)")
    assert "6.0x slower under even an empty trace function" in finding.claim and "about 17% of its time" in finding.claim


def test_a_traced_thread_that_runs_little_python_or_is_not_the_one_that_matters_is_not_weighed_so() -> None:
    assert _rule(_traced_by_probe(1), "diagnostics-overhead") == []  # 5% x 5/6: under the information floor
    assert _rule(_traced_by_probe(4, thread="metrics"), "diagnostics-overhead") == []
    assert _rule(_traced_by_probe(4, slowdown=None), "diagnostics-overhead") == []
