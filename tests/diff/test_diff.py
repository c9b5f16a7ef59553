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
    for doc in (a, b):  # the reference trainer's threads: its stages keep its words in the rows
        doc["threads"] = [{"name": "target-0", "stage": "target"}, {"name": "drafter-0", "stage": "drafter"}]
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


@pytest.mark.slow
def test_a_command_line_flag_is_the_change(spawn: Spawn, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two runs of one program, one flag apart (no probes: no config to show it): diff names the flag."""
    a = take_snapshot(Target(spawn("--maxsize", "4").pid), output=tmp_path / "a.tar.gz", window=Window(0.5)).path
    b = take_snapshot(Target(spawn("--maxsize", "8", "--waiters").pid), output=tmp_path / "b.tar.gz",
                      window=Window(0.5)).path
    assert main(["diff", str(a), str(b), "--json"]) == ExitCode.OK
    changes = json.loads(capsys.readouterr().out)["changes"]
    flags = {(c["key"], c["a"], c["b"]) for c in changes if c["kind"] == "flag"}
    assert flags == {("--maxsize", "4", "8"), ("--waiters", "(absent)", "(set)")}
    # Same program, same environment: no version, code or env change invented (a finding raised in one run only,
    # on a loaded box, may rank above: it is the tool's own claim about that run).
    assert not [c for c in changes if c["kind"] in ("code", "version", "env")]
    assert next(c for c in changes if c["kind"] != "finding")["kind"] == "flag"
    assert main(["diff", str(a), str(b)]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "--maxsize" in out and "no differences" not in out


def _flag_docs(extra_b: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    argv = ["/venv/bin/python", "prog.py", "--workers", "2"]
    a = _doc(process={"argv": argv}, env_knobs={"OMP_NUM_THREADS": "1"})
    b = _doc(process={"argv": [*argv, "--hard-mining"]},
             env_knobs={"OMP_NUM_THREADS": "1", "DFLASH_DIAG_PROBES": "default",
                        "PYTHONPATH": "/opt/dflash-diag/probes/_bootstrap"}, **(extra_b or {}))
    return a, b


def test_a_flag_given_in_one_run_only_is_ranked_and_the_tools_own_environment_is_not() -> None:
    """`dflash-diag run` sets DFLASH_DIAG_* and puts its bootstrap first on PYTHONPATH: how the run was watched,
    never a likely cause; the flag the user added is."""
    a, b = _flag_docs()
    _, changes = compare(a, b)
    assert (changes[0].kind, changes[0].key, changes[0].a, changes[0].b) == ("flag", "--hard-mining", "(absent)", "(set)")
    assert "PYTHONPATH" not in {c.key for c in changes}  # only the bootstrap's entry differed
    tool = next(c for c in changes if c.key == "DFLASH_DIAG_PROBES")
    assert tool.score < 0.3 and "dflash-diag's own" in tool.note  # listed with --all only
    # A PYTHONPATH the user changed besides the bootstrap is still a change.
    a["env_knobs"]["PYTHONPATH"] = "/src/a"
    b["env_knobs"]["PYTHONPATH"] = "/opt/dflash-diag/probes/_bootstrap:/src/b"
    path = next(c for c in compare(a, b)[1] if c.key == "PYTHONPATH")
    assert (path.a, path.b) == ("/src/a", "/src/b")


def test_piped_output_is_not_cut_at_80_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    long_value = "/data/shards/" + "x" * 90 + ".parquet"
    a, b = _flag_docs({"config": {"train_shards": long_value}})
    a["config"] = {"train_shards": "/data/shards/a.parquet"}
    paths = []
    for name, doc in (("a.json", a), ("b.json", b)):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(doc))
    assert main(["diff", str(paths[0]), str(paths[1])]) == ExitCode.OK
    out = capsys.readouterr().out
    assert long_value in out  # one piece, on one line: a file or `grep` gets the whole row
    assert any(len(line) > 80 for line in out.splitlines())
    assert "--hard-mining" in out and "(set)" in out


def test_rows_name_stages_in_the_programs_words() -> None:
    """A program whose threads are a producer and worker-N: its stages are the producer and consumer stages; the
    reference trainer's target-N/drafter-N threads keep their names."""
    def doc(names: tuple[str, str, str], share: float) -> dict[str, Any]:
        return _doc(threads=[{"name": names[0], "stage": "target"}, {"name": names[1], "stage": "drafter"},
                             {"name": names[2], "stage": "drafter"}],
                    rates={"state_shares": {"drafter": {"python": share}}})
    rates, changes = compare(doc(("producer", "worker-0", "worker-1"), 0.1),
                             doc(("producer", "worker-0", "worker-1"), 0.4))
    assert [r.name for r in rates] == ["consumer python share"]
    rates, _ = compare(doc(("target-0", "drafter-0", "drafter-1"), 0.1), doc(("target-0", "drafter-0", "drafter-1"), 0.4))
    assert [r.name for r in rates] == ["drafter python share"]
    _, changes = compare(doc(("producer", "worker-0", "worker-1"), 0.1), doc(("producer", "worker-0", "w"), 0.1))
    assert [c.key for c in changes if c.kind == "threads"] == ["consumer threads"]


def test_a_file_that_is_no_bundle_is_called_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = tmp_path / "prog.py"
    program.write_text("import queue\nq = queue.Queue()\n")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_doc()))
    assert main(["diff", str(good), str(program)]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert f"{program}: not a snapshot bundle" in err and err.count("\n") == 1
