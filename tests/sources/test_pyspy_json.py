"""py-spy's ``dump --json`` output, parsed strictly: the H200 and CPU recordings, malformed and foreign input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dflash_diag.sources.pyspy_json import PySpyOutputError, load_recorded_dumps, parse_dump

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H200 = FIXTURES / "h200" / "pyspy_dump_json_nonblocking.json"


def good_thread(**over: Any) -> dict[str, Any]:
    thread: dict[str, Any] = {
        "pid": 7, "thread_id": 140000, "thread_name": "target-0", "os_thread_id": 8, "active": True,
        "owns_gil": False, "process_info": None,
        "frames": [{"name": "f", "filename": "/a.py", "module": None, "short_filename": "a.py", "line": 3,
                    "locals": None, "is_entry": True, "is_shim_entry": False}],
    }
    thread.update(over)
    return thread


def parse(doc: Any, pid: int = 7) -> Any:
    text = doc if isinstance(doc, str) else json.dumps(doc)
    return parse_dump(text, pid=pid, monotonic_s=1.0, wall_s=2.0, duration_s=0.01, native=False)


def test_parses_real_recordings() -> None:
    samples = load_recorded_dumps(H200)
    assert len(samples) == 10
    first = samples[0]
    assert first.pid == 766 and not first.native
    names = {t.name for t in first.threads}
    assert names == {"drafter-1", "metrics-hog", "drafter-0", "target-0", "MainThread"}
    target = next(t for t in first.threads if t.name == "target-0")
    assert target.os_thread_id == 782 and not target.active and not target.owns_gil
    assert target.top is not None and (target.top.name, target.top.line) == ("target", 7)
    assert not any(f.native for t in first.threads for f in t.frames)


def test_native_frames_are_marked_by_module() -> None:
    native = [s for s in load_recorded_dumps(FIXTURES / "cpu" / "pyspy_target_bound.json") if s.native]
    assert native
    frames = [f for s in native for t in s.threads for f in t.frames]
    assert any(f.native and f.module and f.module.endswith(".so") for f in frames)
    assert any(not f.native and f.filename.endswith("threading.py") for f in frames)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("not json", "not JSON"),
        ('[{"a": NaN}]', "not JSON"),
        ({"threads": []}, "expected a list"),
        (["x"], "not an object"),
        ([good_thread(thread_id="1")], "thread_id is str"),
        ([good_thread(active=1)], "active is int"),
        ([good_thread(owns_gil=None)], "owns_gil is NoneType"),
        ([good_thread(thread_id=True)], "is a bool"),
        ([good_thread(thread_id=-1)], "out of range"),
        ([good_thread(os_thread_id="8")], "os_thread_id"),
        ([good_thread(thread_name=5)], "thread_name"),
        ([good_thread(frames="f")], "frames is str"),
        ([good_thread(frames=[{"name": "f", "filename": "/a.py"}])], "lacks 'line'"),
        ([good_thread(frames=[{"name": "f", "filename": "/a.py", "line": 1.5}])], "line is float"),
        ([good_thread(frames=[{"name": "f", "filename": "/a.py", "line": 1, "module": 3}])], "module"),
        ([good_thread(frames=[{"name": "x" * 10_000, "filename": "/a.py", "line": 1}])], "longer than"),
        ([good_thread(pid=8)], "belongs to PID 8"),
        ([{k: v for k, v in good_thread().items() if k != "owns_gil"}], "lacks 'owns_gil'"),
    ],
)
def test_rejects_malformed_output(doc: Any, message: str) -> None:
    with pytest.raises(PySpyOutputError, match=message):
        parse(doc)


def test_torn_line_number_is_unknown_not_fatal() -> None:
    """Seen in a nonblocking dump of the tiny trainer: line -60417. The frame stays, its line becomes 0."""
    frames = [{"name": "f", "filename": "/a.py", "line": -60417}, {"name": "g", "filename": "/b.py", "line": 7}]
    sample = parse([good_thread(frames=frames)])
    assert [(f.name, f.line) for f in sample.threads[0].frames] == [("f", 0), ("g", 7)]


def test_accepts_minimal_and_null_optionals() -> None:
    sample = parse([good_thread(thread_name=None, os_thread_id=None)])
    assert sample.threads[0].name is None and sample.threads[0].os_thread_id is None
    assert sample.threads[0].frames[0].line == 3


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=25,
)


@settings(max_examples=60, deadline=None)
@given(json_values)
def test_any_json_parses_or_fails_cleanly(doc: Any) -> None:
    """Untrusted input: anything is either a valid sample or a PySpyOutputError, never another exception."""
    try:
        parse(doc)
    except PySpyOutputError:
        pass


# --- finding the binary ------------------------------------------------------------------------------------
