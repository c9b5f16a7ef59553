"""The parts of `record --kernels` that need no process: the protocol's checks of the recording's parameters, the
control document, the files of a recording (their names, what is read back and what is refused), and the
command's usage errors (one line, exit 2, before anything touches a process). The real recordings:
tests/attach/test_record_kernels.py, tests/export/test_record_e2e.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dflash_contract import attach as protocol
from dflash_diag.cli import main
from dflash_diag.errors import AttachError, ExitCode
from dflash_diag.inject import kernels, request


@pytest.mark.parametrize(("params", "says"), [
    ({"duration_s": 2.0, "steps": None}, None),
    ({"duration_s": 30.0, "steps": 100_000}, None),
    ({"duration_s": 0.05, "steps": None}, "between 0.1 and 30"),
    ({"duration_s": 31, "steps": None}, "between 0.1 and 30"),
    ({"duration_s": True, "steps": None}, "between 0.1 and 30"),
    ({"duration_s": 2.0, "steps": 0}, "integer between 1"),
    ({"duration_s": 2.0, "steps": 2.5}, "integer between 1"),
    ({"duration_s": 2.0}, "must be {duration_s, steps}"),
    ({"duration_s": 2.0, "steps": None, "path": "/etc/passwd"}, "must be {duration_s, steps}"),
    ("2 seconds", "must be {duration_s, steps}"),
])
def test_the_protocol_bounds_what_a_recording_may_ask(params: object, says: str | None) -> None:
    if says is None:
        protocol.check_kernels(params)
        return
    with pytest.raises(ValueError, match=says.replace("{", r"\{").replace("}", r"\}")):
        protocol.check_kernels(params)


def test_a_kernels_request_carries_its_parameters_and_is_checked_on_both_sides(tmp_path: Path) -> None:
    req = request.Request(tmp_path, 4242)
    doc = request.control_document(req, "kernels", [], str(tmp_path), 2e9, "ptrace", "/x",
                                   kernels={"duration_s": 3.0, "steps": 5})
    assert doc["action"] == "kernels" and doc["kernels"] == {"duration_s": 3.0, "steps": 5}
    protocol.check_control(doc, 4242, now_wall_s=1e9)  # what the bootstrap checks again
    with pytest.raises(ValueError, match="kernels must be"):
        protocol.check_control({**doc, "kernels": None}, 4242, now_wall_s=1e9)
    with pytest.raises(AttachError) as err:
        request.control_document(req, "kernels", [], str(tmp_path), 2e9, "ptrace", "/x",
                                 kernels={"duration_s": 999.0, "steps": None})
    assert err.value.exit_code == ExitCode.USAGE
    assert "kernels" not in request.control_document(req, "attach", ["gil"], str(tmp_path), 2e9, "ptrace", "/x")


def test_a_recordings_files_are_the_requests_and_a_stale_cleanup_knows_them(tmp_path: Path) -> None:
    req = request.Request(tmp_path, 4242)
    files = kernels.KernelFiles(req.prefix)
    names = [p.name for p in files.paths()]
    assert names == [f".attach-4242.{req.nonce}.{s}" for s in ("trace.json", "stop", "kernels", "kernels.tmp")]
    assert all(protocol.OWN_FILE.fullmatch(n) for n in names)
    assert protocol.kernels_prefix(str(req.control)) == str(req.prefix)


def test_what_a_recording_left_is_read_only_when_private_and_its_own(tmp_path: Path) -> None:
    files = kernels.KernelFiles(request.Request(tmp_path, 4242).prefix)
    assert kernels.read_outcome(files) is None and not kernels.ended(files)
    request.write_private(files.outcome, json.dumps({"schema": protocol.KERNELS_OUTCOME_SCHEMA, "ok": True}).encode())
    assert kernels.ended(files) and kernels.read_outcome(files) == {"schema": protocol.KERNELS_OUTCOME_SCHEMA, "ok": True}
    os.chmod(files.outcome, 0o644)
    with pytest.raises(AttachError, match="not a private file of yours"):
        kernels.read_outcome(files)
    files.outcome.unlink()
    request.write_private(files.outcome, b'{"schema": "something else"}')
    with pytest.raises(AttachError, match="is not one"):
        kernels.read_outcome(files)
    with pytest.raises(AttachError, match="wrote no trace"):
        kernels.open_trace(files)
    files.trace.symlink_to(files.outcome)
    with pytest.raises(AttachError):  # never through a link
        kernels.open_trace(files)
    kernels.ask_stop(files, abort=True)
    kernels.ask_stop(files, abort=False)  # once is enough: the first word stands
    assert files.stop.read_bytes() == b"abort"
    files.remove()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("argv", "says"), [
    (["--steps", "3"], "--steps counts the steps of a --kernels recording: add --kernels"),
    (["--kernels", "--format", "speedscope"], "leave out --format speedscope"),
    (["--kernels", "--duration", "31"], "between 0.5 and 30 seconds"),
    (["--kernels", "--steps", "0"], "--steps must be between 1 and"),
    (["--kernels", "--max-events", "10"], "--max-events must be between"),
    (["--kernels", "--timeout", "0.1"], "--timeout must be between"),
])
def test_usage_errors_are_one_line_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        argv: list[str], says: str) -> None:
    code = main(["record", str(os.getpid()), "-o", str(tmp_path / "t.json"), *argv])
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE and says in err and err.count("\n") == 1
    assert not (tmp_path / "t.json").exists()


def test_doctor_refuses_a_trace_of_another_process_before_sampling(capsys: pytest.CaptureFixture[str]) -> None:
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "kernels" / "synthetic_torch_trace.json"
    code = main(["doctor", str(os.getpid()), "--kernels-trace", str(fixture)])
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT and f"is of PID 4242, not of PID {os.getpid()}" in err and err.count("\n") == 1


def test_the_window_ends_where_the_recordings_end_was_decided() -> None:
    from dflash_diag.cli._record_kernels import until_stop
    from dflash_diag.model import NA, Observation, StackSample

    stacks = tuple(StackSample(pid=1, monotonic_s=100.0 + 0.1 * i, wall_s=0.0, duration_s=0.01, native=False, threads=())
                   for i in range(30))
    obs = Observation(pid=1, cmdline=(), started_wall_s=0.0, window_s=3.0, stacks=stacks, proc=(), gpus=NA("x"),
                      boards=(), process_alive=True, warnings=())
    cut = until_stop(obs, int(101.95e9))  # the stop and the export (GIL held by our thread) are not the program's
    assert len(cut.stacks) == 20 and cut.window_s == pytest.approx(1.95)
    assert until_stop(obs, None) is obs and until_stop(obs, int(200e9)) is obs
