"""The oversubscription example (issue 28) and its twin as the H200 host ran them (2026-12-05 12:25 UTC, 16 CPUs,
torch 2.11.0+cu130, every mode; docs/benchmarks.md "Settings and the scheduler on the H200"), replayed offline.

What that run showed, held here: (1) on 16 CPUs the four members' 8-thread pools do not oversubscribe the machine
(their demand is about 5 CPUs' worth): no `cpu-oversubscribed`, rightly, on either program; (2) both programs, which
never touch the GPU, got `gpu-underused` (a false warning): torch's CUDA build maps the driver library at import,
and that mapping was read as the process using the only GPU. The reader now also reads whether a GPU's device file
is open (``ProcessFacts.gpu_device_open``), which these recordings predate: replayed as recorded the warning is
still there; with that fact as the reader now reads it for a process that opened no GPU device, no warning is left.

And the example confined to 2 of the host's 16 CPUs (``taskset -c 0,1``: the issue's 2-core box; 2026-12-05 15:24
UTC, ``taskset2/``): its pools oversubscribe the two CPUs it may use, and `cpu-oversubscribed` is named in every
mode. That run found the device-file reading not enough: both programs had a GPU's device file open (torch's CUDA
build opens it for a program that never uses the GPU) and drew `gpu-underused` again. A GPU counts as this
process's, where NVML does not list it, only where NVML shows a context it may be hiding (other PIDs listed, the
list unreadable, or memory held beyond the driver's own); both recordings now replay with the oversubscription
leading the planted program, and the twin told that 2 of 16 CPUs are too few for its 4 busy threads (true of a
pinned process on that host, not of the 2-core box the twin was written for).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dflash_diag.analysis import analyse
from dflash_diag.analysis.sched import summary_of
from dflash_diag.model import Severity
from dflash_diag.model.sched import SchedSummary
from dflash_diag.snapshot.bundle import load_observation

H200 = Path(__file__).resolve().parent / "observations_h200"
RUNS = sorted(p.name.removesuffix(".json.gz") for p in H200.glob("*.json.gz"))
TWO_CPUS = H200 / "taskset2"
# The same run live again after those fixes (15:32 UTC), on the GPU host the call got: an H100's, 16 CPUs.
TWO_CPUS_LIVE = H200 / "taskset2_h100"


def test_every_mode_of_both_programs_is_recorded() -> None:
    assert RUNS == [f"{case}__{mode}" for case in ("ensemble_num_threads", "healthy_ensemble_threads")
                    for mode in ("attach", "outside", "probes")]


@pytest.mark.parametrize("run", RUNS)
def test_sixteen_cpus_are_not_oversubscribed_by_the_example(run: str) -> None:
    obs = load_observation(str(H200 / f"{run}.json.gz"))
    summary = summary_of(obs)
    assert isinstance(summary, SchedSummary) and summary.cores == 16.0
    assert summary.demand < 8.0, summary.demand  # ~5 CPUs' worth wanted at most
    assert "cpu-oversubscribed" not in {f.rule_id for f in analyse(obs).findings}


@pytest.mark.parametrize("run", RUNS)
def test_a_cpu_program_under_torchs_cuda_build_is_not_on_the_gpu(run: str) -> None:
    obs = load_observation(str(H200 / f"{run}.json.gz"))
    assert obs.process is not None and obs.process.uses_cuda is True and obs.process.gpu_device_open is None
    # The false warning the H200 run showed is gone as recorded: the GPU listed no process and held only the
    # driver's memory, so no context of this process could hide there.
    assert [f.rule_id for f in analyse(obs).findings if f.severity >= Severity.WARNING] == []
    read_now = replace(obs, process=replace(obs.process, gpu_device_open=False))
    warnings = [f.rule_id for f in analyse(read_now).findings if f.severity >= Severity.WARNING]
    assert warnings == []
    # A GPU that holds memory beyond the driver's (a context NVML does not name, as in a PID namespace) would be
    # the process's: the rule stays able to speak there.
    busy = tuple(tuple(replace(g, memory_used_bytes=8 << 30) for g in sweep) for sweep in obs.gpus)  # type: ignore[union-attr]
    hidden = replace(obs, gpus=busy, process=replace(obs.process, gpu_device_open=True))
    assert "gpu-underused" in {f.rule_id for f in analyse(hidden).findings}


@pytest.mark.parametrize("mode", ["outside", "probes", "attach"])
def test_on_two_of_sixteen_cpus_the_example_is_named_oversubscribed_in_every_mode(mode: str) -> None:
    obs = load_observation(str(TWO_CPUS / f"ensemble_num_threads__{mode}.json.gz"))
    summary = summary_of(obs)
    assert isinstance(summary, SchedSummary) and summary.cores == 2.0 and summary.machine_cpus == 16
    analysis = analyse(obs)
    assert analysis.headline is not None and analysis.headline.rule_id == "cpu-oversubscribed"
    assert "its affinity allows 2 of the machine's 16" in analysis.headline.text
    assert obs.process is not None and obs.process.gpu_device_open is True  # the device file was open ...
    assert "gpu-underused" not in {f.rule_id for f in analysis.findings}  # ... and no context: not on the GPU
    twin = analyse(load_observation(str(TWO_CPUS / f"healthy_ensemble_threads__{mode}.json.gz")))
    assert {f.rule_id for f in twin.findings if f.severity >= Severity.WARNING} == {"cpu-affinity-narrow"}


@pytest.mark.parametrize("mode", ["outside", "probes", "attach"])
def test_live_after_the_fixes_the_example_leads_with_its_oversubscription(mode: str) -> None:
    """Recorded with the fixes in (no replay-only claim): the live answer's headline, read again from its
    observation, is the oversubscription; no GPU warning on a program that never used one."""
    analysis = analyse(load_observation(str(TWO_CPUS_LIVE / f"ensemble_num_threads__{mode}.json.gz")))
    assert analysis.headline is not None and analysis.headline.rule_id == "cpu-oversubscribed"
    assert {f.rule_id for f in analysis.findings if f.severity >= Severity.WARNING} == {"cpu-oversubscribed"}
