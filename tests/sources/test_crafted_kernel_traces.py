"""Crafted kernel traces (`doctor --kernels-trace FILE`: traces come from other people): huge integers, wrong types,
1e308 timestamps, bounds, FIFOs and files far larger than what is kept. Every one is either read (what is valid of
it) or refused in one line with exit 6; the summary and the findings built on what was read never raise and hold
finite numbers only; memory is what is kept, not the size of the file. A fuzz test throws arbitrary JSON values at
every field torch writes."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dflash_diag.analysis.kernels import summarise, summary_json
from dflash_diag.errors import ExitCode
from dflash_diag.sources import kernel_trace
from dflash_diag.sources.kernel_trace import KernelTraceError, parse_trace, read_trace_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernel_traces import launch_loop  # torch's own export format, built event by event

ROOT = Path(__file__).resolve().parents[2]
BIG = 10**400  # a 401-digit integer
GOOD_KERNEL = {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1000.0, "dur": 5.0,
               "args": {"device": 0, "stream": 7, "correlation": 1}}
GOOD_LAUNCH = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 11, "ts": 990.0,
               "dur": 3.0, "args": {"correlation": 1}}


def _doc(*events: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"traceEvents": [GOOD_KERNEL, GOOD_LAUNCH, *events], **top}


def _crafted(field: str, value: Any, base: dict[str, Any] = GOOD_KERNEL) -> dict[str, Any]:
    return {**base, field: value}


CRAFTED: dict[str, dict[str, Any]] = {
    "ts a 401-digit integer": _doc(_crafted("ts", BIG)),
    "ts -401 digits": _doc(_crafted("ts", -BIG)),
    "ts 1e308": _doc(_crafted("ts", 1e308)),
    "dur 1e308": _doc(_crafted("dur", 1e308)),
    "dur a 401-digit integer": _doc(_crafted("dur", BIG)),
    "dur negative": _doc(_crafted("dur", -5)),
    "cat a list": _doc(_crafted("cat", ["kernel"])),
    "cat an object": _doc(_crafted("cat", {"kernel": 1})),
    "cat a number": _doc(_crafted("cat", 3)),
    "name a list": _doc(_crafted("name", ["gemm"])),
    "name a number": _doc(_crafted("name", BIG)),
    "tid a 401-digit integer": _doc(_crafted("tid", BIG)),
    "tid a float": _doc(_crafted("tid", 7.5)),
    "pid a 401-digit integer": _doc(_crafted("pid", BIG, GOOD_LAUNCH)),
    "args a list": _doc(_crafted("args", [1, 2])),
    "args correlation huge": _doc(_crafted("args", {"correlation": BIG, "device": BIG, "stream": BIG})),
    "args grid huge": _doc(_crafted("args", {"device": 0, "stream": 7, "grid": [BIG, 1, 1], "bytes": 1e308})),
    "args grid strings": _doc(_crafted("args", {"device": 0, "stream": 7, "grid": ["a"], "shared memory": "x"})),
    "an event a string": _doc("not an event"),  # type: ignore[arg-type]
    "an event a list": _doc([1, 2]),  # type: ignore[arg-type]
    "thread_name tid huge": _doc({"ph": "M", "name": "thread_name", "pid": 1, "tid": BIG, "args": {"name": "t"}}),
    "thread_name name an object": _doc({"ph": "M", "name": "thread_name", "pid": 1, "tid": 11,
                                        "args": {"name": {"x": 1}}}),
    "step instant ts huge": _doc({"ph": "i", "cat": "step", "ts": BIG, "tid": 11}),
    "step instant ts 1e308": _doc({"ph": "i", "cat": "step", "ts": 1e308, "tid": BIG}),
    "otherData pid huge": _doc(otherData={"pid": BIG, "started_wall_s": 1e308}),
    "otherData a list": _doc(otherData=[1]),
    "baseTimeNanoseconds huge": _doc(baseTimeNanoseconds=BIG),
    "baseTimeNanoseconds 1e308": _doc(baseTimeNanoseconds=1e308),
    "baseTimeNanoseconds a string": _doc(baseTimeNanoseconds="1"),
    "traceEvents an object": {"traceEvents": {"a": GOOD_KERNEL}},
    "traceEvents a number": {"traceEvents": 5},
    "every event crafted": {"traceEvents": [_crafted("ts", BIG), _crafted("cat", ["kernel"]), _crafted("ts", 1e308)]},
}


def _check_read(trace: Any) -> None:
    """What was read can be summarised, and the summary is finite JSON."""
    summary = summary_json(summarise(trace))
    json.dumps(summary, allow_nan=False)
    for span in trace.spans:
        assert math.isfinite(span.start_us) and math.isfinite(span.dur_us) and span.dur_us >= 0


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_trace_is_read_or_refused_in_one_line(case: str, tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(CRAFTED[case]))
    try:
        trace = read_trace_file(path)
    except KernelTraceError as exc:
        assert exc.exit_code == ExitCode.BAD_INPUT and "\n" not in str(exc)
        return
    _check_read(trace)
    assert all(abs(s.start_us) <= kernel_trace.MAX_ABS_US for s in trace.spans)
    assert trace.pid is None or abs(trace.pid) < 2**63


def test_a_fifo_is_refused_at_once_never_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo, 0o600)
    result: dict[str, Any] = {}

    def read() -> None:
        try:
            read_trace_file(fifo)
        except KernelTraceError as exc:
            result["error"] = str(exc)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "read_trace_file blocked on a FIFO with no writer"
    assert "not a regular file" in result["error"]


@pytest.mark.parametrize(("text", "says"), [
    ('{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": ' + "9" * 5000 + "}]}", "is not JSON"),  # past int()'s digits
    ('{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}", "is not JSON"),  # nesting
    ('{"traceEvents": [{"ph": "X", "name": "' + "n" * (2 << 20) + '"}]}', "more than"),  # one event of 2 MB
    ('{"traceEvents": [], "x": 1} trailing', "is not JSON"),
    ('\xff\xfe{"traceEvents": []}', "is not JSON"),
], ids=["an integer of 5000 digits", "nested 100,000 deep", "one event of 2 MB", "text after the document",
        "not UTF-8"])
def test_documents_dear_to_decode_are_refused_in_one_line(text: str, says: str, tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_bytes(text.encode("latin-1") if text.startswith("\xff") else text.encode())
    t0 = time.monotonic()
    with pytest.raises(KernelTraceError) as err:
        read_trace_file(path)
    assert says in str(err.value) and "\n" not in str(err.value) and time.monotonic() - t0 < 30


def test_past_the_bound_the_earliest_spans_are_kept_and_the_rest_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_trace, "MAX_SPANS", 50)
    events = [{**GOOD_KERNEL, "ts": 10_000.0 - i, "args": {"device": 0, "stream": 7, "correlation": i}}
              for i in range(500)]
    trace = parse_trace(json.dumps({"traceEvents": events}).encode(), source="t")
    assert len(trace.spans) == 50 and trace.spans_left_out == 450
    assert [s.start_us for s in trace.spans] == sorted(10_000.0 - i for i in range(450, 500))  # the earliest 50


def test_a_name_is_redacted_before_it_is_cut() -> None:
    """A password just past the cut kept its first part when the name was cut first (the URL's ``@`` was gone)."""
    pad = "x" * (kernel_trace.MAX_NAME_CHARS - 30)
    name = f"{pad} postgres://u:straddlePassw0rdXYZ0123456789@db/x"
    trace = parse_trace(json.dumps(_doc({**GOOD_LAUNCH, "cat": "user_annotation", "name": name})).encode(),
                        source="t")
    (shown,) = [s.name for s in trace.spans if s.name.startswith("xxx")]
    assert "straddle" not in shown and len(shown) <= kernel_trace.MAX_NAME_CHARS and "<redacted>" in shown


# --- fuzz ---------------------------------------------------------------------------------------------------------

_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30), st.sampled_from([BIG, -BIG, 2**63, -(2**63) - 1]),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([1e308, -1e308, 5e-324]),
    st.text(max_size=20), st.sampled_from(["kernel", "cpu_op", "cuda_runtime", "X", "M", "i", "step", "thread_name"]),
)
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                          st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                       max_leaves=12)
_FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id")
_EVENTS = st.one_of(
    st.fixed_dictionaries({}, optional={k: _VALUES for k in _FIELDS}),
    st.builds(lambda base, field, value: {**base, field: value},
              st.sampled_from([GOOD_KERNEL, GOOD_LAUNCH]), st.sampled_from(_FIELDS), _VALUES),
    _VALUES,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(_EVENTS, max_size=12), other=_VALUES, base=_VALUES)
def test_fuzzed_traces_never_raise_anything_but_a_one_line_refusal(events: list[Any], other: Any, base: Any) -> None:
    data = json.dumps({"traceEvents": [GOOD_KERNEL, *events], "otherData": other, "baseTimeNanoseconds": base},
                      allow_nan=False).encode()
    try:
        trace = parse_trace(data, source="fuzz")
    except KernelTraceError as exc:
        assert "\n" not in str(exc)
        return
    _check_read(trace)


# --- memory and the command ---------------------------------------------------------------------------------------

_PEAK = """
import resource, sys
from pathlib import Path
from dflash_diag.sources.kernel_trace import read_trace_file
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
trace = read_trace_file(Path(sys.argv[1]))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(len(trace.spans), (after - before) * 1024)
"""


@pytest.mark.slow
def test_memory_is_what_is_kept_not_the_size_of_the_file(tmp_path: Path) -> None:
    """json.loads of the whole cost ~11 bytes a byte of text (a 1 GiB trace: ~11 GB); streamed, the peak grows with
    the spans kept (a few hundred bytes each), here under one byte a byte of file."""
    path = tmp_path / "big.json"
    trace = launch_loop(steps=40, kernels_per_step=2500, kernel_us=10.0, host_gap_us=2.0, ahead=True)
    with path.open("w") as fh:  # ~60 MB: the spans again and again, each event padded like torch's with args
        doc = trace.doc()
        events = doc.pop("traceEvents")
        fh.write('{"traceEvents": [')
        for i, e in enumerate(events):
            fh.write(("," if i else "") + json.dumps({**e, "args": {**e.get("args", {}), "pad": "p" * 200}}))
        fh.write("], " + json.dumps(doc)[1:])
    size = path.stat().st_size
    assert size > 40e6
    res = subprocess.run([sys.executable, "-c", _PEAK, str(path)], capture_output=True, text=True, timeout=600,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr[-2000:]
    spans, grown_bytes = map(int, res.stdout.split())
    assert spans > 100_000
    assert grown_bytes < size, (grown_bytes, size)  # json.loads of it: ~11 times the size


@pytest.mark.slow
def test_doctor_on_crafted_traces_answers_or_refuses_in_one_line(tmp_path: Path) -> None:
    program = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"])
    try:
        for case in ("ts a 401-digit integer", "cat a list", "ts 1e308", "every event crafted", "traceEvents a number"):
            path = tmp_path / "trace.json"
            path.write_text(json.dumps(replace_pid(CRAFTED[case], program.pid)))
            res = subprocess.run([sys.executable, "-m", "dflash_diag", "doctor", str(program.pid), "--duration", "0.5",
                                  "--kernels-trace", str(path), "--json"], capture_output=True, text=True, timeout=120,
                                 cwd=ROOT)
            assert res.returncode in (0, ExitCode.BAD_INPUT), (case, res.stderr[-2000:])
            assert "Traceback" not in res.stderr, (case, res.stderr[-2000:])
            if res.returncode == ExitCode.BAD_INPUT:
                assert res.stderr.count("\n") == 1, (case, res.stderr)
            else:
                json.loads(res.stdout)
    finally:
        program.kill()
        program.wait()


def replace_pid(doc: dict[str, Any], pid: int) -> dict[str, Any]:
    """The crafted document as a trace of ``pid`` (doctor refuses a trace of another process)."""
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        return doc
    return {**doc, "traceEvents": [replace_event(e, pid) for e in events]}


def replace_event(e: Any, pid: int) -> Any:
    if isinstance(e, dict) and e.get("cat") != "kernel" and isinstance(e.get("pid"), int) and e["pid"] < 10**9:
        return {**e, "pid": pid}
    return e

