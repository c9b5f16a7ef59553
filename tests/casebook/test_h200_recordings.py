"""The oversubscription example (issue 28) and its twin as the H200 host ran them (2026-12-05 12:25 UTC, 16 CPUs,
torch 2.11.0+cu130, every mode; docs/benchmarks.md "Settings and the scheduler on the H200"), replayed offline.

What that run showed, held here: (1) on 16 CPUs the four members' 8-thread pools do not oversubscribe the machine
(their demand is about 5 CPUs' worth): no `cpu-oversubscribed`, rightly, on either program; (2) both programs, which
never touch the GPU, got `gpu-underused` (a false warning): torch's CUDA build maps the driver library at import,
and that mapping was read as the process using the only GPU. The reader now also reads whether a GPU's device file
is open (``ProcessFacts.gpu_device_open``), which these recordings predate: replayed as recorded the warning is
still there; with that fact as the reader now reads it for a process that opened no GPU device, no warning is left.
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
    as_recorded = {f.rule_id for f in analyse(obs).findings if f.severity >= Severity.WARNING}
    assert as_recorded == {"gpu-underused"}  # the false warning the H200 run showed
    read_now = replace(obs, process=replace(obs.process, gpu_device_open=False))
    warnings = [f.rule_id for f in analyse(read_now).findings if f.severity >= Severity.WARNING]
    assert warnings == []
