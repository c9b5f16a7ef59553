"""`dflash-diag diff` on crafted bundles: every field diff reads with the wrong type, documents that are cheap
in bytes but dear to decode (millions of empty objects, millions of keys), deep nesting, huge strings and
numbers: one line, exit 6, in bounded time and memory; never a traceback."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dflash_diag.cli import main
from dflash_diag.errors import ExitCode
from dflash_diag.snapshot.shape import MAX_SECTION_ENTRIES, MAX_STRING_CHARS

SCHEMA = "dflash-diag.snapshot/1"
ROOT = Path(__file__).resolve().parents[2]


def _doc(**parts: Any) -> dict[str, Any]:
    return {"schema": SCHEMA, "pid": 1, **parts}


# Each: a field diff reads, planted with a type dflash-diag never writes there.
TYPE_CONFUSED: dict[str, dict[str, Any]] = {
    "threads a number": {"threads": 1.5},
    "process a string": {"process": "x"},
    "findings a number": {"findings": 3},
    "a finding a number": {"findings": [1]},
    "a thread name a list": {"threads": [{"name": ["x"], "stage": "target"}]},
    "argv a string": {"process": {"argv": "python train.py"}},
    "config a list": {"config": [1, 2]},
    "versions a list": {"versions": ["torch"]},
    "a version an object": {"versions": {"torch": {"v": 2}}},
    "env_knobs a string": {"env_knobs": "OMP_NUM_THREADS=1"},
    "rates a list": {"rates": []},
    "a rate a string": {"rates": {"tokens_per_s": "fast"}},
    "state_shares a list": {"rates": {"state_shares": []}},
    "a share a string": {"rates": {"state_shares": {"drafter": {"checkpoint": "35%"}}}},
    "code a string": {"code": "x"},
    "code files a list": {"code": {"files": ["a.py"]}},
    "changed_after_start a number": {"code": {"changed_after_start": 5}},
    "stale_modules an object": {"code": {"stale_modules": {"m": 1}}},
    "a stale module a number": {"code": {"stale_modules": [1]}},
    "board a number": {"board": 1},
    "board probes a list": {"board": {"probes": []}},
    "fastpath a string": {"board": {"probes": {"fastpath": "on"}}},
    "checkpoint calls strings": {"board": {"probes": {"checkpoint": {"calls": {"reentrant": "many"}}}}},
    "pid a string": {"pid": "x"},
    "created_utc an object": {"created_utc": {"t": 1}},
}


@pytest.mark.parametrize("case", sorted(TYPE_CONFUSED))
@pytest.mark.parametrize("as_json", [False, True])
def test_type_confused_field_is_refused_in_one_line(case: str, as_json: bool, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(_doc(config={"lr": 1e-4})))
    bad.write_text(json.dumps(_doc(**TYPE_CONFUSED[case])))
    for pair in ([good, bad], [bad, good]):
        code = main(["diff", *map(str, pair), *(["--json"] if as_json else [])])
        captured = capsys.readouterr()
        assert code == ExitCode.BAD_INPUT, captured
        assert captured.err.count("\n") == 1 and str(bad) in captured.err and "expected" in captured.err
        assert "Traceback" not in captured.err and not captured.out
        field = next(iter(TYPE_CONFUSED[case]))
        assert field in captured.err  # names the field


def test_every_field_diff_reads_of_the_right_type_is_accepted(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The schema is not stricter than what dflash-diag writes: a document with every field diffs cleanly."""
    full = _doc(created_utc="2025-01-01T00:00:00Z", process={"argv": ["python", "train.py"]},
                config={"model": {"layers": 4, "dims": [1, 2]}, "use_reentrant": True, "name": None},
                versions={"torch": "2.13.0"}, env_knobs={"OMP_NUM_THREADS": "4"},
                findings=[{"rule_id": "gil-pressure", "severity": "warning"}],
                threads=[{"name": "target-0", "stage": "target"}],
                rates={"tokens_per_s": 10.0, "step": 4, "state_shares": {"drafter": {"checkpoint": 0.3}}},
                code={"files": {"a.py": "ab" * 32}, "changed_after_start": ["a.py"],
                      "stale_modules": [{"module": "a"}]},
                board={"probes": {"fastpath": {"gdn_fast_path": True, "gdn_kernels": {"chunk": "fla"}},
                                  "checkpoint": {"calls": {"reentrant": 3}}, "gil": {"free_threaded": False}}},
                stacks_native={"anything": ["the view drops it"]})
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(full))
    b.write_text(json.dumps({**full, "config": {**full["config"], "use_reentrant": False},
                             "rates": {"tokens_per_s": 5.0}}))
    assert main(["diff", str(a), str(b), "--json"]) == ExitCode.OK
    out = json.loads(capsys.readouterr().out)
    assert out["changes"][0]["key"] == "use_reentrant"
    assert out["a"]["argv"] == ["python", "train.py"]


def test_overflowing_rate_ratio_is_no_number_not_a_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_doc(rates={"tokens_per_s": 1e-300, "state_shares": {"x": {"python": 1e-300}}})))
    b.write_text(json.dumps(_doc(rates={"tokens_per_s": 1e300, "state_shares": {"x": {"python": 1e300}}})))
    assert main(["diff", str(a), str(b), "--json"]) == ExitCode.OK
    rates = json.loads(capsys.readouterr().out)["rates"]
    assert rates and all(r["ratio"] is None for r in rates)


def _raw(fields: str) -> str:
    """A snapshot.json text with ``fields`` (JSON text, written out as json.dumps never would) after the schema."""
    return '{"schema": "' + SCHEMA + '", ' + fields + "}"


def _many(template: str) -> str:
    return ",".join(template.format(i) for i in range(MAX_SECTION_ENTRIES + 1))


@pytest.mark.parametrize("text", [
    _raw('"rates": {"tokens_per_s": NaN}'),
    _raw('"rates": {"tokens_per_s": 1e999}'),
    _raw('"config": ' + '{"a":' * 60 + "1" + "}" * 60),
    _raw('"config": {"a": ' + "[" * 100_000 + "}"),
    _raw('"config": {"a": "' + "x" * (MAX_STRING_CHARS + 1) + '"}'),
    _raw('"config": {' + _many('"k{}": 0') + "}"),
    _raw('"code": {"files": {' + _many('"f{}": "h"') + "}}"),
], ids=["nan", "inf", "nested 60", "nested 100000", "long string", "config over the cap", "files over the cap"])
def test_unbounded_values_are_refused(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(_doc()))
    bad.write_text(text)
    assert main(["diff", str(good), str(bad)]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and "Traceback" not in err


MEMORY_LIMIT_BYTES = 1 << 30


def _diff_in_a_box(a: Path, b: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """`dflash-diag diff` in a child limited to 1 GiB of address space (the old decoder took 3 GB)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))

    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "dflash_diag", "diff", str(a), str(b), *extra], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, preexec_fn=limit)
    return proc, time.monotonic() - started


@pytest.mark.slow  # a memory-limited subprocess on tens of MiB
def test_sixty_mib_of_empty_objects_is_refused_cheaply(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(_doc()))
    with open(bad, "wb") as fh:  # 60 MiB, under the 64 MiB member limit: 20 million objects
        fh.write(b'{"schema": "%s", "stacks_native": [' % SCHEMA.encode())
        fh.write(b"{}," * (20 * 1024 * 1024))
        fh.write(b"{}]}")
    proc, elapsed_s = _diff_in_a_box(good, bad)
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert elapsed_s < 20


@pytest.mark.slow  # a memory-limited subprocess on tens of MiB
def test_three_million_config_keys_are_refused_cheaply(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(_doc()))
    with open(bad, "wb") as fh:
        fh.write(b'{"schema": "%s", "config": {' % SCHEMA.encode())
        fh.write(b",".join(b'"k%d":%d' % (i, i) for i in range(3_000_000)))
        fh.write(b"}}")
    proc, elapsed_s = _diff_in_a_box(good, bad)
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert elapsed_s < 20


@pytest.mark.slow  # a memory-limited subprocess on tens of MiB
def test_the_largest_accepted_config_diffs_in_bounded_time(tmp_path: Path) -> None:
    """At the cap, every key changed on both sides: the whole ranked table, in seconds, not minutes."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_doc(config={f"key_{i}": i for i in range(MAX_SECTION_ENTRIES)})))
    b.write_text(json.dumps(_doc(config={f"key_{i}": -i for i in range(MAX_SECTION_ENTRIES)})))
    for extra in ((), ("--json",), ("--all",)):
        proc, elapsed_s = _diff_in_a_box(a, b, *extra)
        assert proc.returncode == ExitCode.OK, proc.stderr[-2000:]
        assert elapsed_s < 45, (extra, elapsed_s)
