"""`dflash-diag diff`: the ranked changes between two bundles, and refusal of bad, foreign or unsafe input."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from conftest_snapshot import Spawn

from dflash_diag.cli import main
from dflash_diag.errors import ExitCode
from dflash_diag.observe import Target, Window
from dflash_diag.snapshot import take_snapshot
from dflash_diag.snapshot.compare import compare


@pytest.mark.slow
def test_flag_flip_is_the_first_change(spawn: Spawn, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fast = spawn("--probes", "--reentrant", "true")
    a = take_snapshot(Target(fast.pid), output=tmp_path / "a.tar.gz", window=Window(0.5)).path
    slow = spawn("--probes", "--reentrant", "false")
    b = take_snapshot(Target(slow.pid), output=tmp_path / "b.tar.gz", window=Window(0.5)).path
    assert main(["diff", str(a), str(b), "--json"]) == ExitCode.OK
    out = json.loads(capsys.readouterr().out)
    assert out["schema"] == "dflash-diag.diff/1"
    first = out["changes"][0]
    assert (first["kind"], first["key"], first["a"], first["b"]) == ("config", "use_reentrant", "True", "False")
    # Same script, same environment: no code or version change is invented.
    assert not [c for c in out["changes"] if c["kind"] in ("code", "version")]
    assert main(["diff", str(a), str(b)]) == ExitCode.OK
    assert "use_reentrant" in capsys.readouterr().out


def _doc(**parts: Any) -> dict[str, Any]:
    return {"schema": "dflash-diag.snapshot/1", "pid": 1, **parts}


def test_ranking_prefers_known_causes_and_lists_rates_apart() -> None:
    a = _doc(config={"use_reentrant": True, "log_interval": 10, "checkpoint_dir": "/runs/a"},
             versions={"torch": "2.11.0", "numpy": "2.0"},
             env_knobs={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "TERM_X": "1"},
             rates={"tokens_per_s": 21500.0, "drafter_batches_per_s": 0.53,
                    "state_shares": {"drafter": {"checkpoint": 0.05}}},
             code={"files": {"loss.py": "aa", "util.py": "cc"}})
    b = _doc(config={"use_reentrant": False, "log_interval": 20, "checkpoint_dir": "/runs/b"},
             versions={"torch": "2.11.0", "numpy": "2.1"},
             env_knobs={"TERM_X": "2"},
             rates={"tokens_per_s": 12400.0, "drafter_batches_per_s": 0.31,
                    "state_shares": {"drafter": {"checkpoint": 0.35}}},
             code={"files": {"loss.py": "bb", "util.py": "cc"}})
    rates, changes = compare(a, b)
    keys = [c.key for c in changes]
    assert keys[0] == "use_reentrant"
    assert keys.index("PYTORCH_CUDA_ALLOC_CONF") < keys.index("loss.py") < keys.index("log_interval")
    assert keys.index("numpy") < keys.index("log_interval")  # bookkeeping keys rank last
    assert keys.index("numpy") < keys.index("checkpoint_dir")
    assert "util.py" not in keys
    tok = next(r for r in rates if r.name == "tok/s")
    assert tok.ratio == pytest.approx(12400 / 21500)
    assert any(r.name == "drafter checkpoint share" and r.b == "35%" for r in rates)


def test_identical_snapshots_have_no_changes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(_doc(config={"x": 1})))
    assert main(["diff", str(path), str(path)]) == ExitCode.OK
    assert "no differences" in capsys.readouterr().out


def test_a_schema_1_bundle_diffs_against_a_schema_2_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Schema 2 changed a finding's evidence from [name, value] lists to {name, value} objects (docs/findings.md):
    diff still reads the bundles written before, and compares their findings with the new ones."""
    from dflash_diag.model import Finding, Severity
    from dflash_diag.snapshot.build import SCHEMA
    from dflash_diag.view.findings import finding_json

    old_finding = {"rule_id": "stale-code", "severity": "critical", "claim": "x changed", "remedy": "restart",
                   "evidence": [["stale module", "a.loss"], ["stale module", "a.model"]], "impact": 0.3,
                   "kind": "cause", "stages": [], "because": [], "explains": []}  # as schema 1 wrote it
    new_finding = finding_json(Finding("gil-contention", Severity.WARNING, "GIL contention 40%",
                                       (("contention", "40%"),), "fewer Python threads"))
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(_doc(findings=[old_finding])))
    new.write_text(json.dumps({**_doc(findings=[new_finding]), "schema": SCHEMA}))
    assert SCHEMA == "dflash-diag.snapshot/2"
    assert main(["diff", str(old), str(new), "--json"]) == ExitCode.OK
    changes = {(c["kind"], c["key"]): (c["a"], c["b"]) for c in json.loads(capsys.readouterr().out)["changes"]}
    assert changes[("finding", "stale-code")] == ("critical", "(none)")
    assert changes[("finding", "gil-contention")] == ("(none)", "warning")


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return path


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _bad_inputs(tmp_path: Path) -> dict[str, Path]:
    good = json.dumps(_doc()).encode()
    link = tarfile.TarInfo("top/snapshot.json")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    garbage = tmp_path / "garbage.tar.gz"
    garbage.write_bytes(b"\x1f\x8b" + b"not really gzip" * 10)
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"schema": "something-else/1"}))
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"schema": "dflash-diag.snapshot/9"}))
    not_json = tmp_path / "notjson.json"
    not_json.write_text("{nope")
    return {
        "missing": tmp_path / "does-not-exist.tar.gz",
        "traversal": _tar(tmp_path / "trav.tar.gz", [_file("../snapshot.json", good)]),
        "absolute": _tar(tmp_path / "abs.tar.gz", [_file("/tmp/snapshot.json", good)]),
        "symlink": _tar(tmp_path / "link.tar.gz", [(link, b"")]),
        "no snapshot.json": _tar(tmp_path / "empty.tar.gz", [_file("top/report.md", b"# hi")]),
        "garbage": garbage,
        "foreign": foreign,
        "newer": newer,
        "not json": not_json,
    }


@pytest.mark.parametrize("case", ["missing", "traversal", "absolute", "symlink", "no snapshot.json", "garbage",
                                  "foreign", "newer", "not json"])
def test_bad_bundles_are_refused_in_one_line(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _bad_inputs(tmp_path)[case]
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_doc()))
    assert main(["diff", str(good), str(bad)]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and "Traceback" not in err
