"""The bundle's files from constructed gatherings: GPUs (a fake NVML reading), missing parts, redaction of
values planted in odd places."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "findings"))

from findings_builders import HEALTHY_APP, HEALTHY_PROBES, NOW_S, board, observation

from dflash_diag.model import NA, GpuProcess, GpuSample
from dflash_diag.snapshot.build import analyse_gathered, build_files
from dflash_diag.snapshot.gather import Gathered


def _gpu() -> GpuSample:
    return GpuSample(index=0, name="NVIDIA H200", uuid="GPU-1", util_pct=97.0, mem_util_pct=40.0,
                     memory_used_bytes=80 * 2**30, memory_total_bytes=141 * 2**30, power_w=650.0, power_limit_w=700.0,
                     sm_clock_mhz=1980, max_sm_clock_mhz=1980, temperature_c=61, throttle_reasons=(),
                     processes=(GpuProcess(pid=4242, used_memory_bytes=80 * 2**30, sm_util_pct=NA("not reported")),),
                     monotonic_s=1.0)


def test_gpus_missing_parts_and_planted_secrets() -> None:
    secret = "plantedInConfigValue123"
    app = {**HEALTHY_APP, "config": {**HEALTHY_APP["config"], "notes": f"run with token={secret}",
                                     "wandb_key": secret}}
    obs = observation((board(HEALTHY_PROBES, app),))
    obs = dataclasses.replace(obs, gpus=((_gpu(),),))
    g = Gathered(pid=4242, started_wall_s=NOW_S, observation=obs, board=obs.board,
                 cmdline=("python", "train.py", "--hf-token", secret), environ={"HF_TOKEN": secret, "PATH": "/bin"})
    g.miss("native stacks", "timed out after 2.3 s")
    files = build_files(g, analyse_gathered(g, NOW_S), NOW_S)
    for name, data in files.items():
        assert secret.encode() not in data, name
    report = files["report.md"].decode()
    assert "| 0 | NVIDIA H200 | 97 |" in report
    assert "- native stacks: timed out after 2.3 s" in report
    assert json.loads(files["nvml.json"])[0][0]["processes"][0]["sm_util_pct"] == {"na": "not reported"}
    doc = json.loads(files["snapshot.json"])
    assert doc["gpus"][0]["name"] == "NVIDIA H200" and doc["missing"] == [
        {"what": "native stacks", "why": "timed out after 2.3 s"}]
    assert "no stacks could be taken" in files["stacks.txt"].decode()
