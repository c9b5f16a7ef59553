"""``doctor --save-observation`` / ``doctor --replay`` / ``doctor BUNDLE``: what was sampled, judged again offline,
gives the same report (``--json`` byte for byte), deterministically, for a process and a job; a saved observation is
private and never written over a file the tool did not write; a replay refuses the flags of a live window and a
file that is not an observation, in one line."""

from __future__ import annotations

import json
import os
import stat
import sys
import tarfile
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "observe"))

from job_fixtures import load_job  # noqa: E402
from test_codec import _recorded  # noqa: E402
from workload import pipeline_child  # noqa: E402

from dflash_diag.analysis import analyse  # noqa: E402
from dflash_diag.cli import main  # noqa: E402
from dflash_diag.errors import ExitCode  # noqa: E402
from dflash_diag.model import Observation  # noqa: E402
from dflash_diag.model.job import JobObservation  # noqa: E402
from dflash_diag.observe.codec import encode_observation  # noqa: E402
from dflash_diag.view.doctor import doctor_doc  # noqa: E402


def _save(path: Path, obs: Observation | JobObservation) -> Path:
    path.write_bytes(encode_observation(obs, tool_version="test"))
    return path


def _doctor(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["doctor", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("kind", ["process", "job"])
def test_a_replay_is_the_report_of_the_observation_every_time(kind: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    obs = _recorded("pyspy_drafter_bound.json", kernels=None) if kind == "process" else load_job("ddp_straggler")
    saved = _save(tmp_path / "obs.json", obs)
    code, first, _ = _doctor(capsys, "--replay", str(saved), "--json")
    again, second, _ = _doctor(capsys, "--replay", str(saved), "--json")
    assert code == again == ExitCode.OK and first == second  # deterministic, byte for byte
    report = json.loads(first)
    assert report["findings"] == json.loads(json.dumps(doctor_doc(analyse(obs))["findings"]))
    assert (report["job"] is not None) == (kind == "job") and report["headline"] is not None
    if kind == "process":  # what a live run reports beside its findings is carried too
        assert report["kernel_window"]["stop_ms"] == 412.5 and report["kernel_window"]["method"] == "gdb"
        assert report["pipeline"]["stage_names"] == {"target": "target", "drafter": "drafter"}
    text_code, text, _ = _doctor(capsys, "--replay", str(saved))
    assert text_code == ExitCode.OK and "dflash-diag doctor" in text and report["headline"]["rule_id"] in text
    # A gzip'd observation (the casebook's fixtures) is the same replay.
    import gzip

    zipped = tmp_path / "obs.json.gz"
    zipped.write_bytes(gzip.compress(saved.read_bytes()))
    assert _doctor(capsys, "--replay", str(zipped), "--json")[1] == first
    # A bundle directory carrying the observation is replayed the same way (`doctor BUNDLE`).
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    _save(bundle / "observation.json", obs)
    assert _doctor(capsys, str(bundle), "--json")[1] == first


def test_new_stage_patterns_judge_a_replay_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = _save(tmp_path / "obs.json", _recorded("pyspy_drafter_bound.json", kernels=None))
    base = json.loads(_doctor(capsys, "--replay", str(saved), "--json")[1])
    swapped = json.loads(_doctor(capsys, "--replay", str(saved), "--json", "--target-pattern", "drafter-*",
                                 "--drafter-pattern", "target-*")[1])
    assert base["pipeline"]["bottleneck"] != swapped["pipeline"]["bottleneck"] or base["findings"] != swapped["findings"]


@pytest.mark.parametrize(("argv", "code", "needle"), [
    (["--replay", "{obs}", "--duration", "3"], ExitCode.USAGE, "--duration: a replay judges the window it was given"),
    (["--replay", "{obs}", "--attach", "--rate", "5"], ExitCode.USAGE, "--rate, --attach: a replay judges"),
    (["--replay", "{obs}", "--save-observation", "{tmp}/x.json"], ExitCode.USAGE, "--save-observation"),
    (["--replay", "{obs}", "--kernel-window"], ExitCode.USAGE, "--kernel-window: a replay judges"),
    (["--replay", "{obs}", "--no-job"], ExitCode.USAGE, "--no-job: a replay judges"),
    (["12345", "--replay", "{obs}"], ExitCode.USAGE, "not both"),
    ([], ExitCode.USAGE, "nothing to examine"),
    (["--replay", "{tmp}/missing.json"], ExitCode.BAD_INPUT, "no such file"),
    (["--replay", "{garbage}"], ExitCode.BAD_INPUT, "not valid JSON"),
    (["--replay", "{truncated}"], ExitCode.BAD_INPUT, "a gzip file that cannot be read"),
    (["--replay", "{foreign}"], ExitCode.BAD_INPUT, "not a dflash-diag observation"),
    (["--replay", "{crafted}"], ExitCode.BAD_INPUT, "observation.stacks[0].threads is a string, expected a list"),
    (["{empty_bundle}"], ExitCode.BAD_INPUT, "the bundle has no observation.json"),
])
def test_a_replay_refuses_in_one_line(argv: list[str], code: int, needle: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    obs = _save(tmp_path / "obs.json", _recorded("pyspy_target_bound.json", kernels=None))
    doc = json.loads(obs.read_bytes())
    doc["observation"]["stacks"][0]["threads"] = "x"
    (tmp_path / "crafted.json").write_text(json.dumps(doc))
    (tmp_path / "garbage.json").write_bytes(b"{nope")
    import gzip

    (tmp_path / "truncated.json.gz").write_bytes(gzip.compress(obs.read_bytes())[:200])
    (tmp_path / "foreign.json").write_text(json.dumps({"schema": "dflash-diag.snapshot/2"}))
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "snapshot.json").write_text("{}")
    paths = {"obs": obs, "tmp": tmp_path, "garbage": tmp_path / "garbage.json", "crafted": tmp_path / "crafted.json",
             "truncated": tmp_path / "truncated.json.gz",
             "foreign": tmp_path / "foreign.json", "empty_bundle": tmp_path / "bundle"}
    got, out, err = _doctor(capsys, *(a.format(**paths) for a in argv))
    assert got == code and needle in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert out == ""


def test_a_saved_observation_goes_only_where_the_tool_may_write(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Checked before any sampling: an existing file of the user's is never replaced; one the tool wrote only with
    --force."""
    mine = tmp_path / "notes.json"
    mine.write_text('{"my": "notes"}')
    ours = _save(tmp_path / "obs.json", _recorded("pyspy_target_bound.json", kernels=None))
    pid = str(os.getpid())
    assert _doctor(capsys, pid, "--save-observation", str(mine))[0] == ExitCode.EXISTS
    code, _, err = _doctor(capsys, pid, "--save-observation", str(mine), "--force")
    assert code == ExitCode.UNSAFE_OUTPUT and "not" in err and mine.read_text() == '{"my": "notes"}'
    assert _doctor(capsys, pid, "--save-observation", str(ours))[0] == ExitCode.EXISTS
    assert _doctor(capsys, pid, "--force")[0] == ExitCode.USAGE


@pytest.mark.slow
def test_doctor_saves_what_it_sampled_and_the_replay_is_its_report(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    boards = tmp_path / "boards"
    boards.mkdir(mode=0o700)
    saved = tmp_path / "obs.json"
    with pipeline_child("--mode", "drafter-bound", "--hog", "--probes", env={"DFLASH_DIAG_BOARD_DIR": str(boards)}) as child:
        code, live, _ = _doctor(capsys, str(child.pid), "--duration", "2", "--json", "--board-dir", str(boards),
                                "--save-observation", str(saved))
        assert code == ExitCode.OK
        bundle = tmp_path / "bug.tar.gz"
        assert main(["snapshot", str(child.pid), "--duration", "2", "-o", str(bundle), "--board-dir",
                     str(boards)]) == ExitCode.OK
        capsys.readouterr()
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    replayed = _doctor(capsys, "--replay", str(saved), "--json")[1]
    assert replayed == live  # the same report, byte for byte, offline
    assert json.loads(live)["headline"] is not None and json.loads(live)["stack_samples"] >= 3
    # A bundle carries its observation: doctor on it says what the bundle's own analysis said.
    printed = _doctor(capsys, str(bundle), "--json")[1]
    from_bundle = json.loads(printed)
    with tarfile.open(bundle) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/snapshot.json"))
        handle = tar.extractfile(member)
        assert handle is not None
        snapshot = json.load(handle)
    assert from_bundle["findings"] == snapshot["findings"] and from_bundle["headline"] == snapshot["headline"]
    assert _doctor(capsys, str(bundle), "--json")[1] == printed  # deterministic
