"""The stale-code family (analysis/findings/stale.py): a module edited on disk after the process imported it."""

from __future__ import annotations

from findings_builders import (
    _one,
    _run,
    healthy_board,
)


def test_stale_code_names_the_module_to_restart_for() -> None:
    b = healthy_board(codedrift={"stale": [{"module": "reference_trainer.loss", "file": "/app/loss.py",
                                            "import_wall_s": 100.0, "mtime_wall_s": 700.0, "how": "mtime>import"}]})
    f = _one(_run(boards=(b,)), "stale-code")
    assert "restart to pick up reference_trainer.loss" in f.claim
    assert dict(f.evidence)["/app/loss.py"] == "changed 600 s after import"
