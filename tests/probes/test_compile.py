"""compile: recompiles (with reasons and threads), graph breaks, a recompile-limit hit; quiet when healthy.

backend="eager" and dynamic=False keep every compile fast on CPU.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pytest
import torch
import torch._dynamo

from probes.compile import CompileProbe, Config


def _reset() -> None:
    import torch._dynamo.utils as du

    torch._dynamo.reset()
    du.clear_compilation_metrics()
    du.counters.clear()


@pytest.fixture
def probe():
    _reset()
    p = CompileProbe(Config())
    yield p
    p.close()
    _reset()


def _branchy(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    if y.sum() > 0:  # data-dependent branch: a graph break counted under counters["unimplemented"]
        y = y * 2
    return y.relu()


def _smooth(x: torch.Tensor) -> torch.Tensor:
    return (x.sin() * 2).relu()


def test_recompiles_graph_breaks_and_limit_hit(probe: CompileProbe, capfd) -> None:
    compiled = torch.compile(_branchy, backend="eager", dynamic=False)
    with torch._dynamo.config.patch(recompile_limit=3):
        probe.snapshot(0.0)  # arms the compile-start callback now that dynamo is imported
        for n in (2, 3, 4, 5, 6):
            compiled(torch.randn(n))
    reading = probe.snapshot(0.0)
    assert reading["status"] == "ok"
    assert reading["recompiles"] >= 2
    assert reading["compiles"] >= 3
    assert reading["graph_breaks"] >= 1
    assert "Data-dependent branching" in reading["graph_break_reasons"]
    assert reading["recompile_limit_hits"] >= 1
    hit = reading["limit_hits"][0]
    assert hit["function"] == "_branchy" and hit["thread"] == "MainThread" and hit["limit"] == 3
    assert hit["fallback"].startswith("eager")
    recompile = reading["recent_recompiles"][0]
    assert recompile["function"] == "_branchy" and "size mismatch" in recompile["reason"]
    assert recompile["thread"] == "MainThread"
    assert reading["by_function"]["_branchy"]["recompiles"] >= 2
    assert reading["recompile_limit"]["MainThread"] == 3
    assert reading["compile_time_s"] > 0
    assert reading["hook_errors"] == 0
    # The user's logging is undisturbed: no recompile/graph-break chatter on stderr (only torch's own
    # recompile-limit warning, which it prints without the probe too).
    err = capfd.readouterr().err
    assert "Recompiling function" not in err and "Graph break in user code" not in err


def test_recompiles_attributed_to_the_compiling_thread_and_its_limit(probe: CompileProbe) -> None:
    compiled = torch.compile(_smooth, backend="eager", dynamic=False)
    compiled(torch.randn(2))
    probe.snapshot(0.0)

    def worker() -> None:
        for n in (3, 4):
            compiled(torch.randn(n))

    t = threading.Thread(target=worker, name="drafter-0")
    t.start()
    t.join(60)
    reading = probe.snapshot(0.0)
    assert reading["by_thread"]["drafter-0"]["recompiles"] >= 1
    assert any(r["thread"] == "drafter-0" for r in reading["recent_recompiles"])
    # dynamo's config is per thread from torch 2.12: the limit is reported as each thread sees it
    assert "drafter-0" in reading["recompile_limit"]


def test_healthy_compile_is_quiet(probe: CompileProbe) -> None:
    compiled = torch.compile(_smooth, backend="eager", dynamic=False)
    for _ in range(3):
        compiled(torch.randn(4))
    reading = probe.snapshot(0.0)
    assert reading["compiles"] == 1
    assert reading["recompiles"] == 0 and reading["graph_breaks"] == 0 and reading["recompile_limit_hits"] == 0
    assert reading["recent_recompiles"] == [] and reading["limit_hits"] == []


def test_user_enabled_recompile_logs_still_reach_the_user(probe: CompileProbe) -> None:
    torch._logging.set_logs(recompiles=True)  # the user's own choice (clears torch's log state)
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Keep()
    logging.getLogger("torch._dynamo.guards.__recompiles").addHandler(handler)
    try:
        compiled = torch.compile(_smooth, backend="eager", dynamic=False)
        compiled(torch.randn(2))
        compiled(torch.randn(3))
    finally:
        logging.getLogger("torch._dynamo.guards.__recompiles").removeHandler(handler)
        torch._logging.set_logs()
    assert any("Recompiling function" in m for m in seen)
    assert probe.snapshot(0.0)["recompiles"] >= 1


def test_dynamo_half_imported_is_retried_not_given_up(monkeypatch: pytest.MonkeyPatch,
                                                     half_imported: Callable[[str], None]) -> None:
    """torch._dynamo.callback seen while its import is still running (no callback_handler yet): the
    compile-start callback is registered at a later publish instead of failing once and never again."""
    import sys

    from probes._common import HookGuard
    from probes._torchlog import register_compile_start, unregister_compile_start

    real = sys.modules["torch._dynamo.callback"]
    half_imported("torch._dynamo.callback")
    guard = HookGuard()
    starts: list[object] = []
    assert register_compile_start(starts.append, guard) is False and guard.errors == 0
    monkeypatch.setitem(sys.modules, "torch._dynamo.callback", real)
    try:
        assert register_compile_start(starts.append, guard) is True and guard.errors == 0
        torch.compile(lambda x: x * 3, backend="eager")(torch.ones(2))
        assert starts
    finally:
        unregister_compile_start(starts.append)
