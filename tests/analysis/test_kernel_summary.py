"""The summary of a torch.profiler trace (analysis.kernels) and the reading of trace files (sources.kernel_trace),
on traces in torch's own export format: the handmade fixture (every gap kind, phase and launcher once, numbers
worked out below). The findings drawn from it: tests/findings/; a real H200 trace, when kept: tests/export/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kernel_traces import A, B, TorchTrace, launch_loop

from dflash_diag.analysis.kernels import matmul_kind, phase, short_kernel_name, summarise
from dflash_diag.errors import ExitCode
from dflash_diag.model.kernels import (
    AFTER_SYNC,
    LAUNCH_BOUND,
    MATMUL_FP32,
    MATMUL_TENSOR,
    MATMUL_UNKNOWN,
    QUEUED,
    UNATTRIBUTED,
)
from dflash_diag.sources.kernel_trace import KernelTraceError, parse_trace, read_trace_file
from dflash_diag.view.kernels import summary_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HANDMADE = FIXTURES / "kernels" / "synthetic_torch_trace.json"
H200 = FIXTURES / "h200" / "kernels-qwen3.5-4b.json"

def test_the_handmade_trace_splits_every_idle_microsecond_by_its_cause() -> None:
    s = summarise(read_trace_file(HANDMADE))
    assert s.window_us == pytest.approx(5000.0)
    (gpu,) = s.devices
    # kernels [30,1030] [1130,1230]+[1230,2230] [2240,3240] [3420,3520], a copy [3620,3720], an orphan [4000,4100]
    assert gpu.busy_us == pytest.approx(3400.0) and gpu.gpu_spans == 7
    assert gpu.idle_us[LAUNCH_BOUND] == pytest.approx(200.0)  # relu launched 80 us after sgemm_a ended; the copy too
    assert gpu.idle_us[AFTER_SYNC] == pytest.approx(180.0)  # sgd_kernel, launched after drafter-0's item() sync
    assert gpu.idle_us[QUEUED] == pytest.approx(10.0)  # sgemm_bwd was launched long before: it waited on the GPU
    assert gpu.idle_us[UNATTRIBUTED] == pytest.approx(280.0)  # the orphan's launch is not in the trace
    assert gpu.idle_us["edges"] == pytest.approx(930.0)  # before the first kernel and after the last
    assert sum(gpu.idle_us.values()) == pytest.approx(gpu.idle_total_us)
    assert gpu.idle_by_thread[LAUNCH_BOUND] == pytest.approx({A: 100.0, B: 100.0})
    assert gpu.idle_by_thread[AFTER_SYNC] == pytest.approx({A: 180.0})
    assert dict(s.gpu_time_by_phase) == pytest.approx(
        {"forward": 2100.0, "backward": 1000.0, "optimizer": 100.0, "outside ops": 100.0, "unattributed": 100.0})
    assert s.gpu_time_by_thread == ((A, pytest.approx(2200.0), 4), (B, pytest.approx(1100.0), 2))
    assert [k.name for k in s.top_kernels[:3]] == ["sgemm_bwd", "void sgemm_a<float>(float*)", "void sgemm_b<float>(float*)"]
    assert [(g.kind, g.tid, round(g.dur_us)) for g in s.longest_idle] == [
        (AFTER_SYNC, A, 180), (LAUNCH_BOUND, A, 100), (LAUNCH_BOUND, B, 100)]
    assert s.unattributed_gpu_us == pytest.approx(100.0)
    doc = summary_json(s)
    assert json.loads(json.dumps(doc)) == doc and doc["devices"][0]["busy_ms"] == 3.4


def test_steps_bound_the_window_the_shares_are_of() -> None:
    trace = launch_loop(steps=4, kernels_per_step=10, kernel_us=100.0, host_gap_us=60.0, ahead=False)
    s = summarise(parse_trace(trace.data(), source="t"))
    # ProfilerStep#N spans mark each step's end: the shares are of the three steps between the first and last mark
    assert s.steps == 4 and s.step_window_us == pytest.approx(3 * 10 * 160.0)
    assert s.devices[0].window_us == pytest.approx(3 * 10 * 160.0)


def test_phase_names_and_short_kernel_names() -> None:
    assert phase(["Optimizer.step#AdamW.step", "aten::mul_"]) == "optimizer"
    assert phase(["autograd::engine::evaluate_function: AddmmBackward0"]) == "backward"
    assert phase(["CompiledFunctionBackward"]) == "backward"
    assert phase(["aten::linear"]) == "forward" and phase([]) == "outside ops"
    assert short_kernel_name("void at::native::vectorized_elementwise_kernel<4, float>(int, float)") == \
        "at::native::vectorized_elementwise_kernel"


@pytest.mark.parametrize(("content", "says"), [
    (b"not json", "is not JSON"),
    (b'{"traceEvents": [{"ph": "X", "cat": "state", "name": "python", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]}',
     "holds no torch.profiler events"),
    (b'{"events": []}', "has no traceEvents"),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": NaN, "dur": 1}]}',
     "is not JSON"),
])
def test_files_that_are_not_torch_traces_are_refused_in_one_line(tmp_path: Path, content: bytes, says: str) -> None:
    path = tmp_path / "trace.json"
    path.write_bytes(content)
    with pytest.raises(KernelTraceError) as err:
        read_trace_file(path)
    assert says in str(err.value) and err.value.exit_code == ExitCode.BAD_INPUT


def test_a_trace_of_another_process_is_refused(tmp_path: Path) -> None:
    with pytest.raises(KernelTraceError, match="is of PID 4242, not of PID 99"):
        read_trace_file(HANDMADE, pid=99)
    assert read_trace_file(HANDMADE, pid=4242).pid == 4242


def test_names_the_program_chose_are_redacted() -> None:
    t = launch_loop(steps=1, kernels_per_step=2, kernel_us=10.0, host_gap_us=5.0, ahead=False)
    t.op(A, "upload password=hunter2hunter2", 0, 5, cat="user_annotation")
    trace = parse_trace(t.data(), source="t")
    names = {s.name for s in trace.spans}
    assert "upload password=<redacted>" in names and not any("hunter2" in n for n in names)


def test_matmul_kernels_are_told_apart_by_how_they_ran() -> None:
    """Kernel names as cuBLAS, cuBLASLt and CUTLASS give them (the first two from the H200 trace below)."""
    fp32 = ("sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_"
            "kernel__5x_cublas", "ampere_sgemm_128x64_nn",
            "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nn_align1>(cutlass_80_simt_sgemm_128x64_8x5_nn_"
            "align1::Params)")
    tensor = ("nvjet_sm90_tst_192x192_64x4_2x1_v_bz_coopB_TNN", "cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4",
              "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off",
              "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off")
    assert {matmul_kind(n) for n in fp32} == {MATMUL_FP32}
    assert {matmul_kind(n) for n in tensor} == {MATMUL_TENSOR}
    assert matmul_kind("void gemm_kernel<float>(float*)") == MATMUL_UNKNOWN
    for other in ("void at::native::elementwise_kernel<128, 2>", "void gemv2T_kernel_val<int, int, float, float>",
                  "void batch_trsm_left_kernel<float, 64, 4, 3, false, true, true>"):
        assert matmul_kind(other) is None


def test_the_real_h200_trace_splits_its_matmul_time_by_precision() -> None:
    """The reference trainer's qwen3.5-4b step on the H200: bf16 matmuls on the tensor cores (nvjet) and the
    GatedDeltaNet fallback's fp32 matmuls (sm80 ffma tiles) on the FP32 pipes."""
    s = summarise(read_trace_file(H200))
    assert s.kernel_us == pytest.approx(53229.1, abs=0.5)
    assert s.matmul_share(MATMUL_FP32) == pytest.approx(0.218, abs=0.001)
    assert s.matmul_share(MATMUL_TENSOR) == pytest.approx(0.196, abs=0.001)
    assert len(s.top_fp32_matmuls) == 3 and all("ffma" in k.name for k in s.top_fp32_matmuls)
    (copy,) = s.copies  # the only copies it made: device to device
    assert (copy.kind, copy.count, copy.bytes) == ("DtoD (Device)", 48, 1_415_577_600)


def test_copies_are_summed_by_direction_and_host_memory_with_their_issuing_threads() -> None:
    t = TorchTrace().thread(A, "train-loop").thread(B, "prefetch")
    corr = 1
    for i in range(4):  # a pageable 64 MiB copy holds its thread 5 ms; a pinned one returns at once
        at = i * 10_000.0
        t.launch(A, at, corr, name="cudaMemcpyAsync", dur=5000.0)
        t.gpu("Memcpy HtoD (Pageable -> Device)", at + 100, at + 5100, corr, cat="gpu_memcpy", nbytes=64 << 20)
        t.launch(B, at + 6000, corr + 1, name="cudaMemcpyAsync", dur=8.0)
        t.gpu("Memcpy HtoD (Pinned -> Device)", at + 6010, at + 8010, corr + 1, cat="gpu_memcpy", nbytes=64 << 20)
        t.launch(A, at + 9000, corr + 2, name="cudaMemcpyAsync", dur=30.0)
        t.gpu("Memcpy DtoH (Device -> Pageable)", at + 9010, at + 9020, corr + 2, cat="gpu_memcpy", nbytes=4)
        corr += 3
    s = summarise(parse_trace(t.data(), source="t.json"))
    by = {c.kind: c for c in s.copies}
    assert set(by) == {"HtoD (Pageable)", "HtoD (Pinned)", "DtoH (Pageable)"}
    pageable = by["HtoD (Pageable)"]
    assert (pageable.count, pageable.bytes) == (4, 4 * (64 << 20))
    assert pageable.gpu_us == pytest.approx(20_000.0) and pageable.host_us == pytest.approx(20_000.0)
    assert pageable.host_us_by_thread == ((A, pytest.approx(20_000.0)),)
    assert by["HtoD (Pinned)"].host_us == pytest.approx(32.0)
    assert summary_json(s)["copies"][0] == {"kind": "HtoD (Pageable)", "count": 4, "bytes": 4 * (64 << 20),
                                            "gpu_ms": 20.0, "host_ms": 20.0}
