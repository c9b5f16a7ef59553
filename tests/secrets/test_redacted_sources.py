"""What the inspected program names itself is redacted before any output is made of it (docs/security.md).

One real workload per test, naming a thread, a function, a file and a queue with secrets (and a thread that dies
of an exception whose message holds a credentialed URL and an API key, its traceback in a stderr file): `record`'s
trace and profile, and `doctor` and `top --batch` as text, must hold none of them, while the names that only look
secret stay. The whole table of forms against every output is test_no_secret_in_any_output.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from workload import start, stop

from dflash_diag.cli import main

KNOWN_PW = "threadKnownPw0123"  # the value of a secret-named variable, reused as a name
NEEDLES = {
    "thread hf_": "hf_ThreadTokenAbcdefghijklmnopqrstu1",
    "thread xoxp-": "xoxp-2222222222-threadSlackUserToken",
    "thread reusing an env password": KNOWN_PW,
    "function hf_": "hf_FuncTokenAbcdefghijklmnopqrstu2",
    "file hf_": "hf_FileTokenAbcdefghijklmnopqrst3",
    "queue hf_": "hf_QueueTokenAbcdefghijklmnopqrstuv4",
    "queue reusing an env password": KNOWN_PW + "Q",
    "dead thread hf_": "hf_DeadThreadTokenAbcdefghijklmno5",
    "URL password in an exception": "stderrUrlPassw0rd",
    "sk- key in an exception": "sk-stderrKeyAbcdefghijklmnop0123456789",
}
LOOKALIKES = ("tokenizer-0", "sort_key_fn", "hf_transfer_utils.py", "pad_token_q")


def _plants(root: Path) -> dict[str, object]:
    return {
        "workers": [
            {"thread": f"loader-{NEEDLES['thread hf_']}", "function": f"fetch_{NEEDLES['function hf_']}",
             "file": str(root / NEEDLES["file hf_"] / "worker.py")},
            {"thread": NEEDLES["thread xoxp-"], "function": "step", "file": str(root / "plain" / "a.py")},
            {"thread": f"etl-{KNOWN_PW}", "function": "step", "file": str(root / "plain" / "b.py")},
            {"thread": "tokenizer-0", "function": "sort_key_fn", "file": str(root / "lib" / "hf_transfer_utils.py")},
        ],
        "queues": [f"q_{NEEDLES['queue hf_']}", NEEDLES["queue reusing an env password"], "pad_token_q"],
        "deaths": [{"thread": f"uploader-{NEEDLES['dead thread hf_']}",
                    "message": f"GET https://svc:{NEEDLES['URL password in an exception']}@api.internal/v1 failed "
                               f"(key {NEEDLES['sk- key in an exception']})"}],
    }


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[int, Path]]:
    board_dir = tmp_path / "boards"
    board_dir.mkdir(mode=0o700)
    monkeypatch.setenv("DFLASH_DIAG_BOARD_DIR", str(board_dir))
    plant = tmp_path / "plant.json"
    plant.write_text(json.dumps(_plants(tmp_path / "code")))
    env = {"DFLASH_DIAG_BOARD_DIR": str(board_dir), "ETL_DB_PASSWORD": KNOWN_PW, "QUEUE_SECRET": KNOWN_PW + "Q"}
    proc = start("--light", "--probes", "--plant-json", str(plant), "--stderr-file", str(tmp_path / "stderr.log"),
                 env=env)
    try:
        yield proc.pid, tmp_path
    finally:
        stop(proc)


def _leaks(text: str) -> list[str]:
    return [what for what, needle in NEEDLES.items() if needle in text]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out = capsys.readouterr()
    assert code == 0, out.err[-2000:]
    return out.out + out.err


@pytest.mark.slow
def test_record_trace_and_profile_hold_no_secret_names(planted: tuple[int, Path], capsys: pytest.CaptureFixture[str]) -> None:
    pid, tmp = planted
    trace, profile = tmp / "t.json", tmp / "p.speedscope.json"
    printed = _run(capsys, "record", str(pid), "-o", str(trace), "--duration", "1")
    printed += _run(capsys, "record", str(pid), "-o", str(profile), "--duration", "0.5", "--format", "speedscope")
    text = trace.read_text()
    assert _leaks(text) == [] and _leaks(profile.read_text()) == [] and _leaks(printed) == []
    events = json.loads(text)["traceEvents"]
    tracks = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    counters = {e["name"] for e in events if e["ph"] == "C"}
    frames = {e["name"] for e in events if e.get("cat") == "frame"}
    # the secret names are there, redacted; the look-alikes as they are
    assert "loader-<redacted>" in tracks and "etl-<redacted>" in tracks and "tokenizer-0" in tracks, tracks
    assert "q_<redacted> depth" in counters and "pad_token_q depth" in counters, counters
    assert any(f.startswith("fetch_<redacted> (worker.py") for f in frames), frames
    assert any(f.startswith("sort_key_fn (hf_transfer_utils.py") for f in frames), frames


@pytest.mark.slow
def test_a_dead_threads_exception_text_is_redacted_in_text_outputs(planted: tuple[int, Path],
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    pid, _ = planted
    doctor = _run(capsys, "doctor", str(pid), "--duration", "1")
    report = json.loads(_run(capsys, "doctor", str(pid), "--duration", "1", "--json"))
    top = _run(capsys, "top", "--pid", str(pid), "--batch", "--duration", "1")
    assert _leaks(doctor) == [] and _leaks(top) == [], (doctor, top)
    [died] = [f for f in report["findings"] if f["rule_id"] == "thread-died"]
    assert "https://<redacted>@api.internal/v1" in died["claim"] and "uploader-<redacted>" in died["claim"], died
    assert "https://<redacted>@api.internal/v1" in doctor  # the finding is printed, redacted
