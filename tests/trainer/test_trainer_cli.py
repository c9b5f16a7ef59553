"""The real CLI in a subprocess: trains, reports, fails loudly, stops and resumes without losing a step."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from trainer_helpers import ROOT, Run, cli, cli_at_once, read_json, read_jsonl, tiny_args

SUMMARY_KEYS = {"steps", "tokens_per_s", "loss_first", "loss_last", "target_batches_per_s", "drafter_batches_per_s",
                "queue_depth_mean", "threads"}


@pytest.mark.slow
def test_tiny_preset_trains_and_loss_falls(tmp_path: Path) -> None:
    summary_path = tmp_path / "summary.json"
    result = cli(tiny_args(tmp_path, "--max-steps", "80", "--summary-json", str(summary_path)), tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "GatedDeltaNet: torch fallback (no CUDA)" in out  # the slow path is reported, not hidden
    log_lines = [line for line in out.splitlines() if line.startswith("step ")]
    assert len(log_lines) == 9  # step 1, 10, ..., 80
    for field in ("tok/s", "q_hs", "target", "drafter", "loss", "acc", "ms"):
        assert field in log_lines[-1]
    summary = read_json(summary_path)
    assert SUMMARY_KEYS <= summary.keys()
    assert summary["steps"] == 80 and summary["stop_reason"] == "max_steps"
    assert set(summary["threads"]) == {"target-0", "drafter-0"}
    assert summary["tokens_per_s"] > 0 and summary["drafter_batches_per_s"] > 0
    # Real learning, not only losing the initial scale (the mask token's own logit): below a uniform guess
    # over the 64 tokens the stream uses, and right more often than a guess.
    assert summary["loss_last"] < summary["loss_first"] - 5
    assert summary["loss_last"] < math.log(64)
    assert summary["accuracy_last"] > 0.05
    assert (tmp_path / "ckpt" / "checkpoint.pt").is_file()
    assert oct((tmp_path / "ckpt" / "checkpoint.pt").stat().st_mode & 0o777) == "0o600"


BAD_IN_A_SUBPROCESS = [
    (["--max-steps", "0"], "--max-steps must be >= 1", 2),
    (["--resume", "missing.pt"], "no checkpoint at missing.pt", 6),
]


@pytest.mark.slow
def test_bad_flags_and_paths_give_one_line_errors(tmp_path: Path) -> None:
    """Each case a process of its own, started together (one startup's wait, not one per case)."""
    dirs = [tmp_path / str(i) for i in range(len(BAD_IN_A_SUBPROCESS))]
    for d in dirs:
        d.mkdir()
    runs = [Run(tiny_args(d, *args), d) for d, (args, _, _) in zip(dirs, BAD_IN_A_SUBPROCESS, strict=True)]
    for (result, _), (args, needle, code) in zip(cli_at_once(runs, timeout_s=120), BAD_IN_A_SUBPROCESS, strict=True):
        assert result.returncode == code, (args, result.stderr[-2000:])
        assert "Traceback" not in result.stderr
        errors = [line for line in result.stderr.splitlines() if "error:" in line]
        assert len(errors) == 1 and needle in errors[0], result.stderr


@pytest.mark.parametrize("args, needle, code", [
    (["--preset", "huge"], "unknown preset 'huge'", 2),
    (["--queue-size", "x"], "--queue-size", 2),
    (["--use-reentrant", "maybe"], "expected true or false", 2),
    (["--target-devices", "cuda:0"], "CUDA is not available", 2),
    (["--drafter-devices", "tpu"], "use cpu, cuda or cuda:N", 2),
    (["--probes", "gil,bogus"], "unknown probe 'bogus'", 2),
    (["--target-path", "no-such-dir"], "not a directory", 6),
    (["--data", "no-such.jsonl"], "no such file", 6),
    (["--cpu-threads", "0"], "--cpu-threads must be >= 1", 2),
])
def test_bad_flags_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str,
                              code: int) -> None:
    """The same one-line contract through ``main()`` (cheaper than a subprocess per case)."""
    from reference_trainer.cli import main

    assert main(tiny_args(tmp_path, "--probes", "none", *args)) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and needle in errors[0], err


@pytest.mark.slow
def test_a_failing_thread_stops_the_run_nonzero_within_seconds(tmp_path: Path) -> None:
    """A target thread failing, and a drafter thread of two: each run a process of its own, started together."""
    failures = [("target:3", "cpu"), ("drafter:2", "cpu,cpu")]
    runs = [Run(tiny_args(tmp_path / str(i), "--max-steps", "100000", "--drafter-devices", drafters,
                          "--target-devices", "cpu,cpu"), tmp_path, env={"REFERENCE_TRAINER_FAIL_AT": fail_at})
            for i, (fail_at, drafters) in enumerate(failures)]
    for i, ((result, seconds), (fail_at, _)) in enumerate(zip(cli_at_once(runs), failures, strict=True)):
        assert result.returncode == 1, (fail_at, result.stderr[-2000:])
        role = fail_at.split(":")[0]
        assert f"thread {role}-" in result.stderr and "injected failure" in result.stderr
        assert "RuntimeError" in result.stderr  # the thread's own traceback: a crash, not a user mistake
        assert not (tmp_path / str(i) / "ckpt" / "checkpoint.pt").exists()
        assert seconds < 90  # not a hang (startup under CPU contention dominates this)


@pytest.mark.slow
def test_sigterm_checkpoints_and_resume_loses_no_step(tmp_path: Path) -> None:
    steps = 12
    straight = tmp_path / "straight.jsonl"
    # The uninterrupted run, beside the interrupted one (they share nothing): its losses are what the resumed run
    # must reproduce.
    pool = ThreadPoolExecutor(max_workers=1)
    straight_run = pool.submit(cli, tiny_args(tmp_path / "a", "--max-steps", str(steps), "--metrics-jsonl",
                                              str(straight)), tmp_path)

    resumed = tmp_path / "resumed.jsonl"
    args = tiny_args(tmp_path / "b", "--max-steps", str(steps), "--metrics-jsonl", str(resumed))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DFLASH_DIAG_BOARD_DIR": str(tmp_path / "board")}
    proc = subprocess.Popen([sys.executable, "-m", "reference_trainer", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not resumed.exists() or len(read_jsonl(resumed)) < 3):
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        reference = straight_run.result()
        pool.shutdown()
    assert reference.returncode == 0, reference.stderr[-2000:]
    assert proc.returncode == 0, err[-2000:]
    assert "SIGTERM: finishing the current step" in err
    first = read_jsonl(resumed)
    assert 3 <= len(first) < steps, "SIGTERM must stop the run early"
    assert (tmp_path / "b" / "ckpt" / "checkpoint.pt").is_file()

    again = cli([*args, "--resume"], tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"at step {len(first)}" in again.stdout
    records = read_jsonl(resumed)
    assert [r["step"] for r in records] == list(range(1, steps + 1))  # no step lost, none repeated
    expected = read_jsonl(straight)
    # Same batches in the same order, same optimiser and schedule state: the very same losses.
    for got, want in zip(records, expected, strict=True):
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-4, abs=1e-5), (got, want)


def test_resume_refuses_foreign_or_corrupt_checkpoints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    from reference_trainer.cli import main

    assert main(tiny_args(tmp_path, "--probes", "none", "--max-steps", "1")) == 0
    checkpoint = tmp_path / "ckpt" / "checkpoint.pt"
    state = torch.load(checkpoint, weights_only=False)
    assert state["step"] == 1 and state["ledger"] == {"cursor": 1, "consumed_ahead": []}
    state["drafter_config"]["hidden_size"] = 4096
    torch.save(state, tmp_path / "foreign.pt")
    (tmp_path / "corrupt.pt").write_bytes(b"not a checkpoint")
    capsys.readouterr()
    for name, needle in [("foreign.pt", "different drafter shape"), ("corrupt.pt", "not a readable checkpoint")]:
        assert main(tiny_args(tmp_path, "--probes", "none", "--resume", str(tmp_path / name))) == 6
        err = capsys.readouterr().err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and needle in err, err


@pytest.mark.parametrize("preset", ["qwen3.5-4b", "qwen3.5-9b"])
def test_gpu_presets_default_to_every_measured_speed_switch(preset: str) -> None:
    """The GPU presets turn on what the H200 run measured as faster (docs/benchmarks.md); each flag overrides."""
    from reference_trainer.cli import parse_args

    devices = ["--target-devices", "cpu", "--drafter-devices", "cpu"]
    config, _ = parse_args(["--preset", preset, *devices])
    assert (config.checkpoint_layers, config.fused_adamw, config.compile_layers) == (False, True, True)
    assert (config.objective.loss, config.objective.mask_build, config.target.short_conv) == (
        "fused-compiled", "anchors", "auto")
    config, _ = parse_args(["--preset", preset, *devices, "--compile-layers", "false", "--short-conv", "torch",
                            "--loss", "chunked", "--block-mask", "mask_mod", "--checkpoint-layers", "true",
                            "--fused-adamw", "false"])
    assert (config.checkpoint_layers, config.fused_adamw, config.compile_layers) == (True, False, False)
    assert (config.objective.loss, config.objective.mask_build, config.target.short_conv) == (
        "chunked", "mask_mod", "torch")


def test_tiny_preset_keeps_the_quick_to_start_settings() -> None:
    from reference_trainer.cli import parse_args

    config, _ = parse_args(["--preset", "tiny"])
    assert (config.compile_layers, config.target.short_conv, config.objective.mask_build) == (False, "torch", "mask_mod")
    config, _ = parse_args(["--preset", "tiny", "--compile-layers"])
    assert config.compile_layers is True
