"""fp32 matmuls that do not use the tensor cores: a GPU whose matrix multiplies run on its FP32 pipes while its tensor
cores idle (float32 matmul precision ``'highest'`` with TF32 off, torch's default; autocast left off).

The evidence is what the GPU itself did:

- NVML GPM over the window (Hopper and newer; read from outside, no probe): the share of the window the FP32 pipes
  and the tensor pipes were busy, and the SMs. A TF32-off matmul load read FP32 69%, tensor 6% on the H200; a bf16
  load FP32 0%, tensor 92%. GPM is device-wide: it is this process's only on a GPU no other process runs on (NVML's
  process list), else it is not used.
- a kernel trace (``--kernels-trace``, ``--kernel-window``): the kernel time in matmuls by how they ran, from the
  kernels' names (``sgemm``, ``*simt*``, ``*_ffma_*`` on the FP32 pipes; ``tensorop``, ``tf32``, ``bf16``, ``nvjet``
  on the tensor cores): the share of the GPU's kernel time in fp32 matmuls is the measured cost.

The ``settings`` probe, when present, says which setting it is (the float32 matmul precision, TF32, and the call that
set them, with its line): a process whose flags allow TF32 runs its fp32 matmuls on the tensor cores, so FP32-pipe
work there is something else (elementwise math) and nothing is claimed. Severity follows the measured share: a GPU
that spends most of its cycles on fp32 matmuls (a warning) against one that does some (information: a run may keep
full fp32 on purpose, and a small fp32 region such as a loss under autocast is fine).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dflash_contract.board import ProbeName, SettingsKeys
from dflash_diag.analysis.findings._context import Context, pct, sub
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.kernels import short_kernel_name
from dflash_diag.model import Finding, GpmReading, Severity
from dflash_diag.model.kernels import MATMUL_FP32, MATMUL_TENSOR

# GPM: the FP32 pipes busy this share of the window's cycles with the tensor pipes at most a quarter of that, on a GPU
# whose SMs work most of the window: fp32 matmuls are most of what the GPU does (a TF32-off matmul load read 69%, a
# bf16 one 0%, on the H200). Half that is information: some fp32 matmul work, maybe on purpose.
FP32_PIPE_WARNING_PCT = 40.0
FP32_PIPE_INFO_PCT = 20.0
TENSOR_TO_FP32_MAX = 0.25
# Below this SM use the GPU waits for the host: its math precision is not what limits it.
SM_BUSY_PCT = 60.0
# A kernel trace: the share of all kernel time in fp32 matmuls on the FP32 pipes. The reference trainer's bf16 run
# with its fp32 GatedDeltaNet fallback read 22% (its deliberate fp32 region): information; 40% is most of the GPU.
TRACE_WARNING_SHARE = 0.40
TRACE_INFO_SHARE = 0.10
# A TF32 (or bf16) matmul runs several times faster than the same one on the FP32 pipes (H200: 67 TFLOPS FP32, 495
# TF32 dense): at least half the time in fp32 matmuls would come back. The impact says that much, no more.
RECOVERABLE = 0.5
_PRECISION_CALL = "torch.set_float32_matmul_precision"
_TF32_PRECISIONS = ("high", "medium")

RULES = (RuleSpec("fp32-matmul-no-tensor-cores"),)


@dataclass(frozen=True, slots=True)
class _Seen:
    device: int
    share: float  # of the GPU's cycles (GPM: the FP32 pipes) or kernel time (trace: fp32 matmuls)
    evidence: tuple[tuple[str, str], ...]
    warning: bool
    what: str  # what was measured, for the claim


def check(ctx: Context) -> Iterator[Finding]:
    if ctx.on_cuda() is False:
        return
    settings = ctx.probe(ProbeName.SETTINGS)
    flags = sub(settings, SettingsKeys.TORCH_FLAGS)
    if _tf32_allowed(flags):
        return  # fp32 matmuls run as TF32 on the tensor cores here: FP32-pipe work is something else
    seen = _from_trace(ctx) or _from_gpm(ctx)
    if seen is None:
        return
    setting, call = _setting(flags, settings)
    claim = (f"cuda:{seen.device} runs its float32 matmuls on the FP32 pipes, not the tensor cores: {seen.what}"
             + (f"; {setting}" if setting else ""))
    evidence = list(seen.evidence)
    if setting:
        evidence.append(("setting", setting))
    if call:
        evidence.append(("set by", call))
    yield Finding(
        rule_id="fp32-matmul-no-tensor-cores",
        severity=Severity.WARNING if seen.warning else Severity.INFO,
        claim=claim,
        evidence=tuple(evidence),
        remedy="Let the matmuls use the tensor cores: run the forward under torch.autocast('cuda', "
               "dtype=torch.bfloat16) (check that the autocast context is enabled for your precision), or allow TF32 "
               "for float32 matmuls with torch.set_float32_matmul_precision('high') (and remove a later call that sets "
               "'highest' or allow_tf32=False, e.g. a determinism helper). Keep full fp32 only where it is needed.",
        impact=round(min(1.0, seen.share) * RECOVERABLE, 3),
    )


def _from_trace(ctx: Context) -> _Seen | None:
    summary = ctx.kernels
    if summary is None or summary.kernel_us <= 0:
        return None
    share = summary.matmul_share(MATMUL_FP32)
    if share < TRACE_INFO_SHARE:
        return None
    device = summary.devices[0].device if summary.devices else 0
    tensor = summary.matmul_share(MATMUL_TENSOR)
    evidence = [("fp32 matmuls (FP32 pipes)", f"{pct(share)} of the kernel time ({_ms(share * summary.kernel_us)} of "
                                              f"{_ms(summary.kernel_us)} in the trace)"),
                ("matmuls on the tensor cores", f"{pct(tensor)} of the kernel time")]
    for k in summary.top_fp32_matmuls:
        evidence.append(("fp32 matmul kernel", f"{short_kernel_name(k.name)}: {k.count} calls, {_ms(k.total_us)}"))
    return _Seen(device=device, share=share, evidence=tuple(evidence), warning=share >= TRACE_WARNING_SHARE,
                 what=f"{pct(share)} of the GPU's kernel time is fp32 matmuls (kernel trace), "
                      f"{pct(tensor)} tensor-core matmuls")


def _from_gpm(ctx: Context) -> _Seen | None:
    best: _Seen | None = None
    for reading in own_gpm(ctx):
        fp32, tensor, sm = _num(reading.fp32_pct), _num(reading.any_tensor_pct), _num(reading.sm_util_pct)
        if fp32 is None or tensor is None or sm is None:
            continue
        if fp32 < FP32_PIPE_INFO_PCT or tensor > TENSOR_TO_FP32_MAX * fp32 or sm < SM_BUSY_PCT:
            continue
        evidence = (("FP32 pipes busy", f"{fp32:.0f}% of the window (NVML GPM, {reading.window_s:.1f} s)"),
                    ("tensor pipes busy", f"{tensor:.0f}%"),
                    ("SMs busy", f"{sm:.0f}%"))
        seen = _Seen(device=reading.index, share=fp32 / 100.0, evidence=evidence,
                     warning=fp32 >= FP32_PIPE_WARNING_PCT,
                     what=f"over the window its FP32 pipes were busy {fp32:.0f}% and its tensor cores {tensor:.0f}% "
                          f"(SMs {sm:.0f}%, NVML GPM)")
        if best is None or seen.share > best.share:
            best = seen
    return best


def own_gpm(ctx: Context) -> tuple[GpmReading, ...]:
    """The GPM readings of the GPUs this process uses and no other process does: device-wide readings are its own
    only there (NVML lists the processes on each GPU at every sweep)."""
    mine = set(ctx.process_gpus())
    if not mine or not ctx.obs.gpm:
        return ()
    sweeps = ctx.obs.gpus if isinstance(ctx.obs.gpus, tuple) else ()
    shared: set[int] = set()
    for sweep in sweeps:
        for gpu in sweep:
            if isinstance(gpu.processes, tuple) and any(p.pid != ctx.obs.pid for p in gpu.processes):
                shared.add(gpu.index)
    return tuple(r for r in ctx.obs.gpm if r.index in mine and r.index not in shared)


def _tf32_allowed(flags: Mapping[str, Any]) -> bool:
    precision = flags.get(SettingsKeys.FLOAT32_MATMUL_PRECISION)
    return flags.get(SettingsKeys.CUDA_MATMUL_ALLOW_TF32) is True or precision in _TF32_PRECISIONS


def _setting(flags: Mapping[str, Any], settings: Mapping[str, Any] | None) -> tuple[str, str]:
    """What the settings probe says keeps the matmuls in full fp32, and the call that set it (with its line)."""
    precision = flags.get(SettingsKeys.FLOAT32_MATMUL_PRECISION)
    if not isinstance(precision, str):
        return "", ""
    setting = (f"float32 matmul precision '{precision}' and TF32 off (torch's default: the tensor cores take only "
               "bf16/fp16 matmuls, under autocast or in those dtypes)")
    rows = settings.get(SettingsKeys.SETTING_CALLS) if settings is not None else None
    for row in reversed(rows) if isinstance(rows, list) else ():  # newest last: the call whose value holds now
        if isinstance(row, Mapping) and row.get(SettingsKeys.CALL) == _PRECISION_CALL \
                and precision in str(row.get(SettingsKeys.ARG)):
            callers = row.get(SettingsKeys.CALLERS)
            who = ", ".join(str(c) for c in callers[:3]) if isinstance(callers, list) and callers else "?"
            return setting, f"{_PRECISION_CALL}({row.get(SettingsKeys.ARG)}) by {who} at {row.get(SettingsKeys.SITE)}"
    return setting, ""


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _ms(us: float) -> str:
    return f"{us / 1e3:.1f} ms"
