"""The torch.compile family (analysis/findings/compile.py): recompile storms, the recompile limit, graph breaks,
warm-up, compiles from several threads."""

from __future__ import annotations

from findings_builders import (
    HEALTHY_APP,
    HEALTHY_PROBES,
    NOW_S,
    _one,
    _run,
    board,
    healthy_board,
    thread_stats,
)

from dflash_diag.model import Severity, ThreadState


def test_recompile_storm_lists_reasons() -> None:
    b = healthy_board(compile={"recompiles": 12, "recent_recompiles": [
        {"function": "flex_attention", "thread": "drafter-0", "reason": "0/3: tensor 'q' size mismatch at index 2"}] * 4})
    f = _one(_run(boards=(b,)), "compile-recompile-storm")
    assert "size mismatch" in dict(f.evidence)["reason (x4)"]


def test_recompile_limit_fallback_to_eager() -> None:
    b = healthy_board(compile={"recompile_limit_hits": 1, "limit_hits": [
        {"function": "flex_attention", "reason": "requires_grad mismatch", "thread": "drafter-1"}],
        "recompile_limit": {"MainThread": 64, "drafter-1": 8}})
    f = _one(_run(boards=(b,)), "compile-recompile-limit")
    assert "flex_attention" in f.claim and "drafter-1=8" in dict(f.evidence)["recompile_limit by thread"]


def test_graph_breaks_growing_in_window_is_a_warning() -> None:
    first = board({**HEALTHY_PROBES, "compile": {**HEALTHY_PROBES["compile"], "graph_breaks": 2}}, HEALTHY_APP)
    last = board({**HEALTHY_PROBES, "compile": {**HEALTHY_PROBES["compile"], "graph_breaks": 6,
                                                 "graph_break_reasons": {"Unsupported Tensor.item() call": 6}}},
                 HEALTHY_APP, wall_time_s=NOW_S + 2)
    f = _one(_run(boards=(first, last), now=NOW_S + 2), "compile-graph-breaks")
    assert f.severity == Severity.WARNING and dict(f.evidence)["new in this window"] == "4"


def test_compile_in_progress_is_warm_up() -> None:
    b = healthy_board(compile={"compiling_now": True, "compile_time_s": 31.0})
    f = _one(_run(boards=(b,)), "warming-up")
    assert f.severity == Severity.INFO and f.kind == "state"
    assert "31 s of finished compiles (probe)" in f.claim


def test_compile_from_several_threads_on_unsafe_torch() -> None:
    b = healthy_board(compile={"by_thread": {"drafter-0": {"compiles": 2}, "drafter-1": {"compiles": 2}}})
    f = _one(_run(boards=(b,)), "compile-multi-thread")
    assert "drafter-0, drafter-1" in dict(f.evidence)["compiling threads"]


def test_compiles_of_an_unknown_thread_are_not_a_second_thread() -> None:
    """Attached after the warm-up, the probe finds compiles whose thread it cannot tell ("?"): one named thread and
    "?" is one thread as far as anyone knows (a false warning on a healthy program, the H200 casebook)."""
    b = healthy_board(compile={"by_thread": {"?": {"compiles": 2}, "trainer": {"compiles": 1}}})
    assert [f for f in _run(boards=(b,)) if f.rule_id == "compile-multi-thread"] == []
    both = healthy_board(compile={"by_thread": {"?": {"compiles": 2}, "drafter-0": {"compiles": 1},
                                                "drafter-1": {"compiles": 1}}})
    assert dict(_one(_run(boards=(both,)), "compile-multi-thread").evidence)["compiling threads"] == "drafter-0, drafter-1"


def test_concurrent_compiles_seen_in_stacks() -> None:
    threads = (thread_stats("drafter-0", "drafter", {ThreadState.COMPILE: 1.0}, tid=12),
               thread_stats("drafter-1", "drafter", {ThreadState.COMPILE: 0.8, ThreadState.NATIVE: 0.2}, tid=13))
    findings = _run(threads=threads)
    f = _one(findings, "compile-multi-thread")
    assert dict(f.evidence)["seen compiling concurrently"] == "drafter-0, drafter-1"
    assert _one(findings, "warming-up").severity == Severity.INFO


# --- a storm in its first seconds is not warm-up: the compile probe's real readings (tests/fixtures/cpu) ------------

def _recorded(name: str) -> dict:
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "fixtures" / "cpu" / f"compile_probe_{name}.json"
    return json.loads(path.read_text())["payload"]


def _mid_compile(payload: dict, recompiles: int) -> dict:
    """The payload as a doctor window sees it while the next compile runs: ``recompiles`` so far, none finishing in
    the window (two board versions with the same counts: no rate), a compile in progress."""
    return {**{k: v for k, v in payload.items() if k != "status"}, "recompiles": recompiles, "compiling_now": True,
            "recent_recompiles": payload["recent_recompiles"][:recompiles]}


def _storm_or_warm_up(payload: dict) -> set[str]:
    compiling = (thread_stats("trainer", "other", {ThreadState.COMPILE: 0.9, ThreadState.PYTHON: 0.1}, tid=12),)
    first = board({**HEALTHY_PROBES, "compile": payload}, HEALTHY_APP)
    last = board({**HEALTHY_PROBES, "compile": payload}, HEALTHY_APP, wall_time_s=NOW_S + 5)
    return {f.rule_id for f in _run(boards=(first, last), threads=compiling, now=NOW_S + 5)}


def test_two_recompiles_on_the_same_guard_are_a_storm_not_warm_up() -> None:
    """dynamic=False and a new length each step (the probe's real rows, torch 2.13 on CPU): by the second recompile
    the same guard (`tensor 'x' size mismatch at index 1`) has failed twice, which automatic dynamic shapes never
    let happen in a warm-up; 2 recompiles and no rate in the window used to read as warm-up (seen on the H200)."""
    storm = _recorded("storm")
    assert storm["recompiles"] == 5  # the recording: one compile, then one per new length
    found = _storm_or_warm_up(_mid_compile(storm, 2))
    assert "compile-recompile-storm" in found and "warming-up" not in found
    b = board({**HEALTHY_PROBES, "compile": _mid_compile(storm, 2)}, HEALTHY_APP)
    f = _one(_run(boards=(b,)), "compile-recompile-storm")
    assert "token_loss recompiled 2 times on the same guard: tensor 'x' size mismatch at index 1. expected #" in f.claim


def test_a_warm_up_recompile_that_makes_a_dimension_dynamic_is_warm_up() -> None:
    """The same loss with the defaults: the first new length recompiles once (the dimension turns dynamic), then
    never again: warm-up, not a storm."""
    warm = _recorded("warmup")
    assert warm["recompiles"] == 1
    found = _storm_or_warm_up(_mid_compile(warm, 1))
    assert "warming-up" in found and "compile-recompile-storm" not in found


def test_guards_are_told_apart_by_what_failed_not_by_the_values() -> None:
    from dflash_diag.analysis.findings.compile import repeated_guards

    rows = [{"function": "f", "reason": "0/0: tensor 'x' size mismatch at index 1. expected 10, actual 11"},
            {"function": "f", "reason": "0/1: tensor 'x' size mismatch at index 0. expected 32, actual 17; 0/0: ..."},
            {"function": "f", "reason": "0/2: tensor 'x' dtype mismatch. expected Float, actual Half"}]
    assert repeated_guards(rows) == []  # three different guards, once each: dimensions turning dynamic, a dtype
    rows.append({"function": "f", "reason": "0/3: tensor 'x' size mismatch at index 1. expected 11, actual 12"})
    assert repeated_guards(rows) == [("f", "tensor 'x' size mismatch at index 1. expected #, actual #", 2)]
    assert repeated_guards([{**r, "function": "g"} if i else r for i, r in enumerate(rows)]) == []
