"""The observation as JSON (observe/codec.py, schema dflash-diag.observation/1): real observations (py-spy
recordings of real programs, a real torchrun job's ranks, this process's own /proc, a real H200 torch.profiler
trace) round-trip, and ``analyse`` of the copy equals the original's; a field the model gains is written and read
without an edit of the codec; a foreign, crafted or oversized document is refused in one line that names the field,
never with a traceback."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "findings"))

from findings_builders import HEALTHY_APP, HEALTHY_PROBES, NOW_S, board  # noqa: E402
from job_fixtures import load_job  # noqa: E402

from dflash_diag.analysis import analyse  # noqa: E402
from dflash_diag.model import (  # noqa: E402
    NA,
    GpmReading,
    GpuProcess,
    GpuSample,
    NativeProfile,
    Observation,
    PeerNative,
    StagePatterns,
)
from dflash_diag.model.job import JobObservation  # noqa: E402
from dflash_diag.model.kernels import KernelTrace, KernelWindow  # noqa: E402
from dflash_diag.model.sched import EnvRead, OutsideWait, PeerProcess  # noqa: E402
from dflash_diag.observe import codec  # noqa: E402
from dflash_diag.observe.codec import (  # noqa: E402
    OBSERVATION_SCHEMA,
    ObservationFormatError,
    encode_observation,
    read_observation,
)
from dflash_diag.sources import procfs  # noqa: E402
from dflash_diag.sources.kernel_trace import read_trace_file  # noqa: E402
from dflash_diag.sources.native_profile import parse_raw  # noqa: E402
from dflash_diag.sources.outside import OutsideReader  # noqa: E402
from dflash_diag.sources.pyspy_json import load_recorded_dumps  # noqa: E402
from dflash_diag.sources.sched import SchedReader, read_os_facts  # noqa: E402

FIXTURES = TESTS / "fixtures"
WALL0 = 1_764_412_345.0


def _gpu(t: float, used: int) -> GpuSample:
    return GpuSample(index=0, name="NVIDIA H200", uuid="GPU-1", util_pct=97.5, mem_util_pct=NA("not supported"),
                     memory_used_bytes=used, memory_total_bytes=141 * 2**30, power_w=650.0, power_limit_w=700.0,
                     sm_clock_mhz=1980, max_sm_clock_mhz=1980, temperature_c=61, throttle_reasons=("sw power cap",),
                     processes=(GpuProcess(pid=4242, used_memory_bytes=used, sm_util_pct=NA("not reported")),),
                     monotonic_s=t)


@functools.cache
def _h200_trace() -> KernelTrace:
    return read_trace_file(FIXTURES / "h200" / "kernels-qwen3.5-4b.json")


def _recorded(name: str, **overrides: Any) -> Observation:
    """A py-spy recording of a real program, with every other kind of reading the model holds filled in: this
    process's own /proc series, scheduler sweeps, OS facts and outside facts, a wait that ends in another process,
    NVML readings (some N/A), two boards, the source lines the recording kept, a real H200 torch.profiler trace and
    a kernel window's cost, non-default stage patterns and a float that JSON has no number for."""
    stacks = load_recorded_dumps(FIXTURES / "cpu" / name, start_monotonic_s=100.0, start_wall_s=WALL0)
    recorded = json.loads((FIXTURES / "cpu" / "pipeline_child_lines.json").read_text())["lines"]
    files = {f.filename for s in stacks for t in s.threads for f in t.frames if f.filename.endswith("pipeline_child.py")}
    lines = {f"{name}:{line}": text for name in files for line, text in recorded.items()}
    sweeps = (procfs.read_threads(os.getpid()), procfs.read_threads(os.getpid()))
    outside = OutsideReader(os.getpid())
    obs = Observation(
        pid=stacks[0].pid, cmdline=("python", "pipeline_child.py", "--mode", "x"), started_wall_s=WALL0,
        window_s=len(stacks) * 0.2, stacks=stacks, proc=sweeps,
        gpus=((_gpu(100.0, 80 * 2**30),), (_gpu(101.0, 81 * 2**30),)),
        boards=(board(HEALTHY_PROBES, HEALTHY_APP, wall_time_s=WALL0 + 1), board(HEALTHY_PROBES, HEALTHY_APP,
                                                                                  wall_time_s=WALL0 + 3, seq=11)),
        process_alive=True, warnings=("sampling backed off to 2.5 Hz",), source_lines=lines,
        resources=(procfs.read_process(os.getpid()), procfs.read_process(os.getpid())),
        children=stacks[:2], kernels=_h200_trace(),
        patterns=StagePatterns(target=("target-*", "tgt*"), drafter=("drafter-*",)), now_wall_s=WALL0 + 4.0,
        rate_hz=float("inf"), rate_reason="burst",
        sched=(SchedReader(os.getpid())(), SchedReader(os.getpid())()), os_facts=read_os_facts(os.getpid()),
        outside_waits=(OutsideWait(tid=stacks[0].threads[0].os_thread_id or 1, kind="file-lock",
                                   target="/runs/registry.lock", syscall="flock/fcntl",
                                   peers=(PeerProcess(pid=777, comm="python", cmdline="python syncer.py", state="R",
                                                      cpu_pct=None, top_frame="pack (syncer.py:20)",
                                                      relation="child"),), monotonic_s=100.5),),
        gpm=(GpmReading(index=0, window_s=4.0, sm_util_pct=96.0, sm_occupancy_pct=41.5, any_tensor_pct=2.0,
                        hmma_tensor_pct=NA("not supported"), fp32_pct=88.0, fp16_pct=0.0, dram_bw_pct=35.0),),
        kernel_window=KernelWindow(cuda=True, torch="2.11.0+cu128", steps=5, stop_ms=412.5, export_ms=1880.0,
                                   torch_trace_bytes=48_000_000, method="gdb"),
        native=NativeProfile(rate_hz=20.0, duration_s=1.5, samples=151,
                             stacks=parse_raw((FIXTURES / "cpu" / "pyspy_native_invoice.raw").read_text())),
        env_reads=(EnvRead(name="SYMPY_CACHE_SIZE", value="16", reader="sympy/core/cache.py"),),
        peer_native=(PeerNative(pid=777, env=(("TZ", ":/etc/localtime"),), profile=NativeProfile(
            rate_hz=20.0, duration_s=2.5, samples=48,
            stacks=parse_raw((FIXTURES / "cpu" / "pyspy_native_invoice.raw").read_text())[:3])),),
        native_env=(("TZ", "UTC"),))
    obs = dataclasses.replace(obs, process=outside.process_facts(), code=outside.code_facts(stacks)[0],
                              files=outside.code_facts(stacks)[1])
    return dataclasses.replace(obs, **overrides)


RECORDINGS = ["pyspy_tiny_trainer.json", "pyspy_drafter_bound.json", "pyspy_target_bound.json",
              "pyspy_ckpt_compile.json"]


@pytest.mark.parametrize("name", RECORDINGS)
def test_a_real_observation_round_trips_and_is_judged_the_same(name: str) -> None:
    obs = _recorded(name)
    copy = read_observation(encode_observation(obs, tool_version="test"))
    assert copy == obs
    assert analyse(copy) == analyse(obs)
    assert analyse(copy).findings  # something was judged: the equality is not of two empty analyses


def test_every_reading_of_the_model_is_filled_in_the_round_trip_case() -> None:
    """The round trip above proves each field only if each is filled: a field of the Observation left at its empty
    default here is a reading no test writes and reads back."""
    obs = _recorded("pyspy_drafter_bound.json")
    empty = [f.name for f in dataclasses.fields(Observation) if getattr(obs, f.name) in ((), {}, None, "")]
    assert empty == []
    assert obs.sched[0].tasks and isinstance(obs.os_facts.env, tuple | NA)  # type: ignore[union-attr]


def _scheduler_cases() -> dict[str, Observation]:
    """What the scheduler's, the settings' and the outside-wait rules read (sched sweeps, OS facts, a file lock held
    by another process, the settings probe's board): observations the rules name a finding from."""
    sys.path.insert(0, str(TESTS / "findings"))
    from sched_builders import Thread, ensemble, pools, scenario

    from dflash_diag.model import Frame

    flock = Thread("MainThread", 4242, 0.05, 0.0, stack_frames=(Frame("log_step", "/app/train_loop.py", 33),))
    waits = [OutsideWait(tid=4242, kind="file-lock", target="/runs/registry.lock", syscall="flock/fcntl",
                         peers=(PeerProcess(pid=777, comm="python", cmdline="python syncer.py /runs", state="R",
                                            cpu_pct=c, top_frame="pack (syncer.py:20)", relation="child"),),
                         monotonic_s=0.5 * i) for i, c in enumerate([None, 80.0, 91.0, 85.0, 70.0, 99.0])]
    return {
        "cpu-oversubscribed": scenario(ensemble() + pools(36, run=0.04, wait=0.3)),
        "wait-chain": scenario([flock], outside_waits=waits),
        "settings-changed": scenario(ensemble(), env=[("OMP_NUM_THREADS", "8", "process"),
                                                      ("CUDA_LAUNCH_BLOCKING", "1", "process")]),
    }


@pytest.mark.parametrize("rule", ["cpu-oversubscribed", "wait-chain", "settings-changed"])
def test_what_the_scheduler_and_settings_rules_read_round_trips(rule: str) -> None:
    obs = dataclasses.replace(_scheduler_cases()[rule], now_wall_s=NOW_S)
    copy = read_observation(encode_observation(obs, tool_version="test"))
    assert copy == obs
    analysis = analyse(copy)
    assert analysis == analyse(obs)
    assert rule in {f.rule_id for f in analysis.findings}  # judged from what was read back


@pytest.mark.parametrize("name", ["ddp_straggler", "ddp_thread_died", "ddp_rank0_barrier", "ddp_healthy"])
def test_a_real_job_round_trips_and_is_judged_the_same(name: str) -> None:
    job = load_job(name, launcher_stderr="torch.distributed.elastic: failed (exitcode: 1) local_rank: 2 (pid: 9)")
    copy = read_observation(encode_observation(job, tool_version="test"))
    assert isinstance(copy, JobObservation) and copy == job
    assert analyse(copy) == analyse(job)


def test_the_document_is_versioned_compact_and_its_frames_are_written_once() -> None:
    obs = _recorded("pyspy_tiny_trainer.json")
    doc = json.loads(encode_observation(obs, tool_version="9.9"))
    assert doc["schema"] == OBSERVATION_SCHEMA and doc["kind"] == "process" and doc["tool"]["version"] == "9.9"
    frames = {f for s in obs.stacks for t in s.threads for f in t.frames}
    frames |= {f for s in obs.native.stacks for f in s.frames}  # type: ignore[union-attr]
    assert len(doc["tables"]["Frame"]) == len(frames)  # each distinct frame once, referred to by index
    assert isinstance(doc["observation"]["stacks"][0]["threads"][0]["frames"][0], int)
    assert doc["observation"]["rate_hz"] == "inf"  # no JSON number for it: its name, read back as the float
    assert doc["observation"]["gpus"][0][0]["mem_util_pct"] == {"reason": "not supported"}  # an N/A


def test_analyse_is_a_pure_function_of_the_observation() -> None:
    """Judged twice, now or later, here or elsewhere: the same analysis (the time it judges at is recorded)."""
    obs = _recorded("pyspy_drafter_bound.json")
    assert analyse(obs) == analyse(obs)
    later = dataclasses.replace(obs, now_wall_s=obs.now_wall_s + 3600)  # an hour on: every board is stale
    assert analyse(later) != analyse(obs)


# --- a field the model gains ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _PipeUse:
    sm_occupancy_pct: float | NA
    pipes: tuple[tuple[str, float], ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class _Extended(Observation):
    """An Observation as a later version may have it: new fields of new kinds, with defaults."""

    pipe_use: tuple[_PipeUse, ...] = ()
    per_line_syncs: dict[str, int] = dataclasses.field(default_factory=dict)


def test_a_field_added_to_the_model_is_written_and_read_without_a_codec_edit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(codec.KINDS, "process", _Extended)
    base = _recorded("pyspy_tiny_trainer.json")
    extended = _Extended(**{f.name: getattr(base, f.name) for f in dataclasses.fields(Observation)},
                         pipe_use=(_PipeUse(NA("no GPM"), ()), _PipeUse(71.5, (("tensor", 0.6), ("fp32", 0.1)))),
                         per_line_syncs={"loss.py:40": 25})
    data = encode_observation(extended, tool_version="test")
    assert read_observation(data) == extended
    # An older document, without the new fields, reads with their defaults.
    doc = json.loads(data)
    del doc["observation"]["pipe_use"], doc["observation"]["per_line_syncs"]
    older = read_observation(json.dumps(doc).encode())
    assert older.pipe_use == () and older.per_line_syncs == {}  # type: ignore[attr-defined]


# --- refused ---------------------------------------------------------------------------------------------------------


def _document() -> dict[str, Any]:
    """A real observation's document (without the kernel trace: small enough to damage 300 times)."""
    return json.loads(encode_observation(_recorded("pyspy_target_bound.json", kernels=None), tool_version="test"))


@pytest.mark.parametrize(("change", "needle"), [
    (lambda d: d.update(schema="dflash-diag.snapshot/2"), "not a dflash-diag observation"),
    (lambda d: d.pop("schema"), "no schema"),
    (lambda d: d.update(kind="cluster"), "kind is 'cluster'"),
    (lambda d: d["observation"].update(future_field=1), "'future_field', which a Observation does not have"),
    (lambda d: d["observation"].pop("pid"), "observation has no 'pid'"),
    (lambda d: d["observation"].update(pid="4242"), "observation.pid is a string, expected an integer"),
    (lambda d: d["observation"].update(pid=2**70), "beyond 64 bits"),
    (lambda d: d["observation"].update(process_alive=1), "process_alive is a number, expected a boolean"),
    (lambda d: d["observation"]["stacks"][0]["threads"][0]["frames"].append(10**6), "beyond the"),
    (lambda d: d["observation"]["stacks"][0].update(threads={}), "threads is an object, expected a list"),
    (lambda d: d["observation"].update(gpus={"why": "x"}), "observation.gpus has 'why', which a NA does not have"),
    (lambda d: d["observation"].update(boards=7), "observation.boards is a number that reads as none of"),
    (lambda d: d["observation"]["boards"][0].update(threads={"main": "x"}), "expected an integer"),
    (lambda d: d["tables"].update(Frame=[{"name": 1}]), "tables.Frame[0]"),
    (lambda d: d.update(extra=True), "'extra', which dflash-diag.observation/1 does not"),
])
def test_a_crafted_document_is_refused_naming_the_field(change: Any, needle: str) -> None:
    doc = _document()
    change(doc)
    with pytest.raises(ObservationFormatError) as caught:
        read_observation(json.dumps(doc).encode())
    message = str(caught.value)
    assert needle in message and "\n" not in message, message


@pytest.mark.parametrize(("data", "needle"), [
    (b"\xff\xfe", "not UTF-8"),
    (b'{"schema": "dflash-diag.observation/1", "pid": NaN}', "not valid JSON"),
    (b"[" * 100 + b"]" * 100, "nested deeper"),
    (b"[" + b"0," * (codec.MAX_JSON_TOKENS + 1) + b"0]", "JSON values and keys"),
    (b"[1, 2]", "not a dflash-diag observation"),
])
def test_a_malformed_or_oversized_document_is_refused(data: bytes, needle: str) -> None:
    with pytest.raises(ObservationFormatError, match=needle):
        read_observation(data)


def test_random_damage_is_refused_or_read_never_a_traceback() -> None:
    """Leaves of a real document replaced by values of every other JSON kind: each read either works or is one
    ObservationFormatError (a crafted file never reaches the analysis as a half-typed value)."""
    rng = random.Random(7)
    base = _document()
    leaves: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            if isinstance(value, dict | list) and value:
                walk(value)
            else:
                leaves.append((node, key))

    walk(base)
    junk = [None, True, -1, 2.5, "x", [], {}, [1], {"reason": 3}]
    for _ in range(300):
        parent, key = rng.choice(leaves)
        old = parent[key]
        parent[key] = rng.choice(junk)
        try:
            obs = read_observation(json.dumps(base).encode())
            analyse(obs)  # what reads is judged without an exception escaping (the analysis never raises)
        except ObservationFormatError:
            pass
        finally:
            parent[key] = old
