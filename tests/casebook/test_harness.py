"""The casebook harness's own plumbing: one start serving `outside` then `attach`, the recording of doctor's answers
(and of the observations they were made from), and the GPU batch's phases (bench/casebook.py --gpu)."""

from __future__ import annotations

import importlib.util
import json
import stat
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import harness  # noqa: E402
from cases import CASES, FIXED_AFTER_SCORING, GPU_MODES, REFERENCE_TRAINER, Case  # noqa: E402
from ci_runs import CPU_CASES, gpu_jobs, gpu_skip_reason  # noqa: E402
from harness import Recording, run_case_modes, starts_for  # noqa: E402


def _bench() -> object:
    """bench/casebook.py as a module (tests/ is on sys.path, where `casebook` is this directory)."""
    spec = importlib.util.spec_from_file_location("bench_casebook", HERE.parents[1] / "bench" / "casebook.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _case(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


def test_one_plain_start_serves_outside_and_attach_and_probes_start_apart() -> None:
    first_gpu = _case("gpu_host_sync")  # lists outside, probes and attach
    assert starts_for(first_gpu, ("outside", "probes", "attach")) == [("outside", "attach"), ("probes",)]
    assert starts_for(first_gpu, ("attach", "outside")) == [("outside", "attach")]  # outside always first
    batch_d = _case("gpu_nan_guard")
    assert starts_for(batch_d, ("outside", "probes", "attach")) == [GPU_MODES]  # it does not list probes
    for wrong in (("outside", "probes"), ("attach", "outside"), ()):
        with pytest.raises(ValueError):
            run_case_modes(batch_d, wrong)


def test_every_batch_d_program_has_its_twin_and_names_its_report() -> None:
    batch_d = [c for c in CASES if "gpu-batch-D" in c.tags]
    planted = [c for c in batch_d if not c.healthy]
    twins = {c.name: c for c in batch_d if c.healthy}
    # 16 of the tuning set, 8 held out (written last, scored once)
    assert sum(1 for c in planted if not c.held_out) == 16 and sum(1 for c in planted if c.held_out) == 8
    assert len(twins) == len(planted)
    for case in planted:
        twin = twins[f"{case.name}_fixed"]
        assert twin.program == case.program and twin.argv != case.argv and twin.gpu_alone == case.gpu_alone
        assert case.gpu and case.modes == GPU_MODES and set(case.expect) >= set(GPU_MODES)
        assert case.family.startswith("gpu-") and twin.family == f"healthy ({case.family})"
        assert "#" in case.cause  # the public report it is modelled on
        for mode, why in case.known_miss.items():  # a miss is only ever excused for a reason on record
            assert mode in GPU_MODES and why
        text = "\n".join(p.read_text() for p in (HERE / "programs" / case.program).rglob("*.py"))
        assert "--device" in text and not any(word in text for word in ("q_hs", "drafter", "target_"))


def test_the_casebook_lane_lists_every_gpu_program_and_says_why_it_skips_one() -> None:
    """The held-out GPU pairs on a CPU lane: listed (each mode a test), never run live, skipped saying they were scored
    once on the H200 and that their recordings are replayed."""
    gpu = [c for c in CASES if c.gpu]
    assert {c.name for c, _ in gpu_jobs()} == {c.name for c in gpu} and not any(c.gpu for c in CPU_CASES)
    assert len({(c.name, m) for c, m in gpu_jobs()}) == sum(len(c.modes) for c in gpu)
    held_out = [c for c in gpu if c.held_out]
    assert len(held_out) == 16 and all("gpu-batch-D" in c.tags and "held-out" in c.tags for c in held_out)
    for case in held_out:
        why = gpu_skip_reason(case, cuda=False, run_env=None)
        assert why.startswith("needs CUDA") and "scored once on the H200" in why and "replayed" in why
        assert gpu_skip_reason(case, cuda=True, run_env=None)  # on the GPU machine only when asked
        assert gpu_skip_reason(case, cuda=True, run_env="1") == ""
    tuning = next(c for c in gpu if not c.held_out)
    assert "held out" not in gpu_skip_reason(tuning, cuda=False, run_env=None)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_a_cpu_run_of_the_casebook_lane_skips_the_held_out_gpu_pairs_saying_why() -> None:
    """What a CPU lane really prints: the held-out GPU program's tests skipped with their reason, none of them run."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the lane may run the GPU programs here")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                           str(HERE / "test_casebook.py"), "-k", "test_gpu_case and gpu_layer_timer_sync"],
                          capture_output=True, text=True, timeout=300, cwd=HERE.parents[1])
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "4 skipped" in done.stdout, done.stdout[-2000:]  # the planted program and its twin, outside and attach
    assert "needs CUDA: a GPU program (held out: scored once on the H200" in done.stdout, done.stdout[-2000:]
    assert " passed" not in done.stdout and " failed" not in done.stdout


# tag -> (the docs/benchmarks.md section that scored it once, the batch's words in its known misses, programs)
SETTINGS_BATCHES = {
    "settings-batch": ("## Settings/OS held-out batch, scored once", "settings batch", 8),
    "settings-batch-2": ("## Settings/OS held-out batch 2, scored once", "settings batch 2", 8),
    "settings-batch-3": ("## Settings/OS held-out batch 3, scored once", "settings batch 3", 8),
    "settings-batch-4": ("## Settings/OS held-out batch 4, scored once", "settings batch 4", 8),
    "settings-batch-5": ("## Settings/OS held-out batch 5, scored once", "settings batch 5", 8),
    "settings-batch-6": ("## Settings/OS held-out batch 6, scored once", "settings batch 6", 8),
    "settings-batch-7": ("## Settings/OS held-out batch 7, scored once", "settings batch 7", 8),
    "settings-batch-8": ("## Settings/OS held-out batch 8, scored once", "settings batch 8", 8),
    "settings-batch-9": ("## Settings/OS held-out batch 9, scored once", "settings batch 9", 8),
    "settings-batch-10": ("## Settings/OS held-out batch 10, scored once", "settings batch 10", 8),
    "settings-batch-11": ("## Settings/OS held-out batch 11, scored once", "settings batch 11", 8),
    "settings-batch-12": ("## Settings/OS held-out batch 12, scored once", "settings batch 12", 8),
    "settings-batch-13": ("## Settings/OS held-out batch 13, scored once", "settings batch 13", 8),
    "settings-batch-14": ("## Settings/OS held-out batch 14, scored once", "settings batch 14", 8),
    "settings-batch-15": ("## Settings/OS held-out batch 15, scored once", "settings batch 15", 8),
    "settings-batch-16": ("## Settings/OS held-out batch 16, scored once", "settings batch 16", 8),
    "settings-batch-17": ("## Settings/OS held-out batch 17, scored once", "settings batch 17", 8),
    "settings-batch-18": ("## Settings/OS held-out batch 18, scored once", "settings batch 18", 8),
    "settings-batch-19": ("## Settings/OS held-out batch 19, scored once", "settings batch 19", 8),
    "settings-batch-20": ("## Settings/OS held-out batch 20, scored once", "settings batch 20", 8),
    "settings-batch-21": ("## Settings/OS held-out batch 21, scored once", "settings batch 21", 8),
    "settings-batch-22": ("## Settings/OS held-out batch 22, scored once", "settings batch 22", 8),
    "settings-batch-23": ("## Settings/OS held-out batch 23, scored once", "settings batch 23", 8),
    "settings-batch-24": ("## Settings/OS held-out batch 24, scored once", "settings batch 24", 8),
    "settings-batch-25": ("## Settings/OS held-out batch 25, scored once", "settings batch 25", 8),
    "settings-batch-26": ("## Settings/OS held-out batch 26, scored once", "settings batch 26", 8),
    "settings-batch-27": ("## Settings/OS held-out batch 27, scored once", "settings batch 27", 8),
    "settings-batch-28": ("## Settings/OS held-out batch 28, scored once", "settings batch 28", 8),
}


@pytest.mark.parametrize("tag", sorted(SETTINGS_BATCHES))
def test_a_settings_batch_scored_once_keeps_each_miss_on_record(tag: str) -> None:
    """Each held-out miss of a settings batch is a known miss in the repo's words for a scored held-out miss, and
    docs/benchmarks.md's scored-once table says miss (or false alarm) for exactly those (case, mode) runs."""
    header, words, count = SETTINGS_BATCHES[tag]
    batch = [c for c in CASES if tag in c.tags]
    assert len(batch) == count and all(c.held_out and set(c.modes) == {"outside", "probes", "attach"} for c in batch)
    doc = (HERE.parents[1] / "docs" / "benchmarks.md").read_text()
    section = doc.split(header, 1)[1].split("\n## ", 1)[0]
    names = {c.name for c in batch}
    rows = {(cells[1], cells[2]): cells[5] for line in section.splitlines()
            if (cells := [x.strip() for x in line.split("|")]) and len(cells) == 7 and cells[1] in names}
    assert len(rows) == 3 * count
    for case in batch:
        for mode in case.modes:
            verdict = rows[(case.name, mode)]
            if (case.name, mode) in FIXED_AFTER_SCORING:  # the score as it was; named since (said in the docs)
                assert verdict.startswith(("miss", "false alarm")) and mode not in case.known_miss, (case.name, mode)
            elif mode in case.known_miss:
                prefix = f"held out, missed when scored once (docs/benchmarks.md, {words}): "
                kind = "false alarm" if case.healthy else "miss"
                assert case.known_miss[mode].startswith(prefix) and verdict.startswith(kind), (case.name, mode)
            else:
                assert verdict == "hit", (case.name, mode, verdict)


def test_the_gpu_batch_runs_alone_what_reads_gpu_utilisation_and_compiles_first() -> None:
    bench = _bench()
    cases = [c for c in CASES if c.gpu or c.both] + [REFERENCE_TRAINER]
    shared, alone = bench._phases(cases, GPU_MODES)  # type: ignore[attr-defined]
    names = [c.name for c, _ in shared]
    assert REFERENCE_TRAINER.name not in names + [c.name for c, _ in alone]  # its own phase
    assert {c.name for c, _ in alone} == {c.name for c in cases if c.gpu_alone} >= {
        "gpu_launch_bound", "gpu_per_sample_triplet", "gpu_per_sample_triplet_fixed"}
    slow = {c.name for c, _ in shared if c.ready_timeout_s > 120}
    assert slow and set(names[: len(slow)]) == slow  # torch.compile programs start first
    assert all(ms == ("outside", "attach") for c, ms in shared if c.gpu and "gpu-batch-D" in c.tags)


def _fake_doctor(tmp_path: Path, with_flag: bool) -> Path:
    """A stand-in for `python -m dflash_diag` that logs its argv, answers doctor with a minimal report, writes the
    observation where --save-observation says, and accepts attach: this checkout's doctor cannot save one yet."""
    script = tmp_path / "fake_dflash_diag.py"
    script.write_text(textwrap.dedent(f"""
        import json, sys
        argv = sys.argv[1:]
        with open({str(tmp_path / "calls.jsonl")!r}, "a") as f:
            f.write(json.dumps(argv) + "\\n")
        if argv[0] == "doctor" and "--help" in argv:
            print("usage: doctor PID" + (" [--save-observation FILE]" if {with_flag!r} else ""))
        elif argv[0] == "doctor":
            if "--save-observation" in argv:
                open(argv[argv.index("--save-observation") + 1], "w").write("{{}}")
            print(json.dumps({{"pid": int(argv[1]), "findings": [], "headline": None}}))
    """))
    return script


@pytest.mark.slow
def test_the_recording_passes_save_observation_per_case_and_mode(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    script = _fake_doctor(tmp_path, with_flag=True)
    monkeypatch.setattr(harness, "dflash_diag_argv", lambda: [sys.executable, str(script)])
    assert harness.doctor_can_save_observations()
    record = Recording(tmp_path / "rec")
    record.directory.mkdir(mode=0o700)
    case = replace(_case("healthy_loader"), modes=GPU_MODES)
    results = run_case_modes(case, GPU_MODES, duration_s=1.0, record=record)
    assert [r.mode for r in results] == list(GPU_MODES) and not any(r.error for r in results), results
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    doctor_calls = [c for c in calls if c[0] == "doctor" and "--help" not in c]
    assert [c[c.index("--save-observation") + 1] for c in doctor_calls] == [
        str(record.observation(case.name, m)) for m in GPU_MODES]
    assert [c[0] for c in calls[1:]] == ["doctor", "attach", "doctor"]  # outside first, then attach + doctor
    for mode in GPU_MODES:
        assert record.observation(case.name, mode).exists()
        assert stat.S_IMODE(record.report(case.name, mode).stat().st_mode) == 0o600
    monkeypatch.setattr(harness, "dflash_diag_argv", lambda: [sys.executable, str(_fake_doctor(tmp_path, False))])
    assert not harness.doctor_can_save_observations()


@pytest.mark.slow
def test_outside_then_attach_diagnose_the_same_process(tmp_path: Path) -> None:
    """The real doctor and attach: one PID in both reports; the probes are absent from outside, present after."""
    record = Recording(tmp_path / "rec", observations=False)
    record.directory.mkdir(mode=0o700)
    case = replace(_case("healthy_loader"), modes=GPU_MODES, attach_probes="all")
    results = run_case_modes(case, GPU_MODES, duration_s=2.0, record=record)
    assert not any(r.error for r in results), [r.error for r in results]
    outside, attached = (json.loads(record.report(case.name, m).read_text()) for m in GPU_MODES)
    assert outside["pid"] == attached["pid"]
    assert "no-probes" in {f["rule_id"] for f in outside["findings"]}
    assert "no-probes" not in {f["rule_id"] for f in attached["findings"]}


def test_the_programs_own_rate_during_the_window_is_read_from_what_it_printed() -> None:
    text = ("step 25 loss 0.91 steps/s=112.4\nstep 50 loss 0.88 steps/s=98.0\nepoch 1 it/s: 1,204.5\n"
            "step 75 loss 0.85 steps/s=101.0\n")
    assert harness.printed_rate(text) == pytest.approx(106.7)  # the median of the four printed rates
    assert harness.printed_rate("iter 100 loss 0.5\n") is None  # a program that prints no rate
    row = harness.score(_case("healthy_loader"), "outside", {"findings": [], "headline": None}, 1.0).row()
    assert row["program_rate"] is None
