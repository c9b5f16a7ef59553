"""GPUs left idle by their own threads: utilisation low while the threads that drive the GPU are not waiting on
the pipeline queue -- they are busy on the CPU side (Python, the GIL, kernel launches).

The finding is information on its own: a GPU half idle is what a small healthy model looks like too (recorded on
the H200 and an H100: the casebook's healthy twins run 15-42% busy), so low utilisation is not a measured cost. It is
as serious as the cause linked to it (``analysis.causal``: the headline takes the cause's severity), which is
where the cost is measured: host syncs, GIL waits, a slow fallback, a recompiling step."""

from __future__ import annotations

from collections.abc import Iterator

from dflash_contract.board import AppKeys
from dflash_diag.analysis.findings._context import Context, mean_share, pct, sub, threads_text
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.findings.kernels import trace_evidence
from dflash_diag.analysis.hotspots import hot_functions, spots_text
from dflash_diag.model import PIPELINE_STAGES, Finding, Severity, Stage, ThreadState, ThreadStats
from dflash_diag.model.findings import SYMPTOM

# A training GPU below half utilisation over a window is starved by its host side (launch-bound), unless its
# threads are waiting on the queue (then the pipeline rule explains it).
GPU_IDLE_UTIL_PCT = 50.0
# NVML's utilisation is itself a ~1 s average: fewer readings than this are not a window.
MIN_GPU_SWEEPS = 3
# Threads blocked on q_hs at least this share of the time are waiting on the other stage, not starving the GPU.
QUEUE_WAIT_EXPLAINS = 0.30
_STAGE_WAIT = {Stage.TARGET: ThreadState.QUEUE_PUT, Stage.DRAFTER: ThreadState.QUEUE_GET}
# A thread outside the named stages drives the GPU when it is not idle at least this share of its samples.
BUSY_SHARE = 0.5
# The host's own code named in the claim when one function takes at least this share of the feeding threads' samples:
# where the time that does not feed the GPU goes (a tokenizer, a per-sample loop), said where a user reads first.
HOST_HOT_SHARE = 0.20
HOST_HOT_SHOWN = 2

RULES = (RuleSpec("gpu-underused", kind=SYMPTOM, sampled=True, stage_verdict=True),)


def check(ctx: Context) -> Iterator[Finding]:
    sweeps = ctx.obs.gpus
    if not isinstance(sweeps, tuple) or len(sweeps) < MIN_GPU_SWEEPS:
        return
    utils: dict[int, list[float]] = {}
    names: dict[int, str] = {}
    for sweep in sweeps:
        for gpu in sweep:
            if isinstance(gpu.util_pct, int | float):
                utils.setdefault(gpu.index, []).append(float(gpu.util_pct))
                names[gpu.index] = gpu.name
    by_gpu = _threads_by_gpu(ctx)
    for index, values in sorted(utils.items()):
        threads = by_gpu.get(index, ())
        if len(values) < MIN_GPU_SWEEPS or not threads:
            continue  # a GPU no watched thread uses is not ours to judge
        util = sum(values) / len(values)
        if util >= GPU_IDLE_UTIL_PCT:
            continue
        stages = sorted({t.stage for t in threads})
        # The GPU idles because of the queue only when every stage on it waits on the queue; when one stage
        # does not wait (the slow one), it is that stage's host side that cannot feed the GPU.
        waiting = min((mean_share([t for t in threads if t.stage == s], _STAGE_WAIT[s])
                       for s in stages if s in _STAGE_WAIT), default=0.0)
        if waiting >= QUEUE_WAIT_EXPLAINS:
            continue
        python = mean_share(threads, ThreadState.PYTHON)
        gil = mean_share(threads, ThreadState.GIL_WAIT)
        sync = mean_share(threads, ThreadState.GPU_WAIT)
        traced = trace_evidence(ctx, index)
        hot = hot_functions([row for t in threads for row in ctx.stats_rows(t)], n=HOST_HOT_SHOWN)
        where = f"; its threads' time goes to {spots_text(hot)}" if hot and hot[0].share >= HOST_HOT_SHARE else ""
        drivers = threads_text([t.name for t in threads], limit=3)
        yield Finding(
            rule_id="gpu-underused",
            severity=Severity.INFO,
            # Thread names, not stage words: a program we did not write has no "target" or "drafter" stage.
            claim=f"cuda:{index} is busy only {util:.0f}% of the time while the threads that drive it ({drivers}) are "
            f"not waiting on the queue: the host side cannot feed it{where}",
            evidence=(
                ("GPU", f"{names.get(index, '?')}, mean utilisation {util:.0f}% over {len(values)} readings"),
                ("threads", ", ".join(t.name for t in threads[:6])),
                ("their time", f"python+GIL {pct(python)}, GIL wait {pct(gil)}, GPU wait {pct(sync)}, "
                               f"queue wait {pct(waiting)}"),
            ) + ((traced,) if traced is not None else ()),
            remedy="The GPU waits for kernel launches: cut Python per step (torch.compile, CUDA graphs, fused ops), "
            "relieve GIL contention (fewer busy Python threads), remove host syncs; see the other findings.",
            impact=max(0.0, 1.0 - util / 100.0) * 0.5,
            kind=SYMPTOM,
            stages=tuple(s for s in stages if s in PIPELINE_STAGES),
        )


def _threads_by_gpu(ctx: Context) -> dict[int, tuple[ThreadStats, ...]]:
    devices: dict[str, int] = {}
    for name, info in sub(ctx.app(), AppKeys.THREADS).items():
        device = info.get(AppKeys.DEVICE) if hasattr(info, "get") else None
        if isinstance(device, str) and device.startswith("cuda:") and device[5:].isdigit():
            devices[str(name)] = int(device[5:])
    out: dict[int, list[ThreadStats]] = {}
    for t in ctx.sampled():
        index = t.gpu_index if t.gpu_index is not None else devices.get(t.name)
        if index is not None:
            out.setdefault(index, []).append(t)
    if out:
        return {k: tuple(v) for k, v in out.items()}
    # No thread -> device map (a program we did not write): the process's own GPUs per NVML, each driven by the
    # threads that do work (the busy ones; idle helpers and the main thread waiting in join are not drivers).
    ours = ctx.process_gpus()
    busy = tuple(t for t in ctx.sampled() if _busy_share(t) >= BUSY_SHARE)
    if len(ours) == 1 and busy:
        return {ours[0]: busy}
    return {}


def _busy_share(t: ThreadStats) -> float:
    return 1.0 - sum(t.shares.get(s, 0.0) for s in (ThreadState.IDLE,))
