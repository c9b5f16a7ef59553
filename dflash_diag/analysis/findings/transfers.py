"""Host-to-device copies that hold the thread feeding the GPU: a batch in ordinary (pageable) host memory copied
with ``.to(device)`` / ``.cuda()``. CUDA cannot DMA from pageable memory: the driver stages the batch through a
pinned buffer while the thread waits (and, as the H200's traces show, first waits for the work already queued on the
stream), so ``non_blocking=True`` does nothing and the GPU idles while the host copies.

The evidence, each with its cost:

- the stack samples (outside or under probes): the thread sits at a line that copies to the device (``.to(device,
  ...)``, ``.cuda()``, ``torch.as_tensor(..., device=...)``, ``dst.copy_(src, non_blocking=True)``); a C call leaves no
  frame of its own, so the line's text says what it does. A copy from pinned memory with ``non_blocking=True`` returns
  at once and is hardly ever sampled there (the healthy twin's side-stream prefetcher): a thread found there a sixth
  of its samples or more is held by its copies. ``non_blocking=True`` on the line and the thread still held says the
  source is pageable;
- a kernel trace: the copies named ``Memcpy HtoD (Pageable -> Device)``, their bytes, and how long the calls that
  issued them held their threads (``cudaMemcpyAsync``'s time), against the traced window.

A warning when the held share is measured (>= 15% of the thread's samples at the one-sigma lower bound, or of the
traced window) and the GPU is not saturated (NVML < 90%: on a saturated GPU the copy's wait is partly the queued work
the thread would wait for anyway); information otherwise. The finding slows the copying thread's stage (the whole
process for a thread outside the stages).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from dflash_diag.analysis.classify import is_gpu_sync_line
from dflash_diag.analysis.findings._context import Context, frame_site, lower_bound, pct, python_frames
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.model import PIPELINE_STAGES, Finding, Severity, Stage, ThreadStats
from dflash_diag.model.evidence import is_library_file
from dflash_diag.model.kernels import CopyStat
from dflash_diag.model.stacks import ThreadSample

# A copy line: ``x.to(device, non_blocking=True)``, ``x.to("cuda")``, ``x.cuda()``, ``torch.as_tensor(a, device=d)``,
# ``dst.copy_(src, non_blocking=True)``. ``.to(torch.float16)`` (a cast) and ``.to("cpu")`` (a copy back: a host
# sync, ``hostsync.py``) are not.
_TO_DEVICE = re.compile(r"\.to\((?P<args>[^()]*(?:\([^()]*\)[^()]*)*)\)")
_DEVICE_WORDS = re.compile(r"cuda|device|\bdev\b|gpu|non_blocking|local_rank|\brank\b", re.I)
_OTHER_COPY = re.compile(r"\.cuda\(|\bto_device\(|\bmove_to_device\(|\bcopy_\([^)]*non_blocking"
                         r"|torch\.(as_tensor|tensor|from_numpy)\([^#]*device\s*=")
_NON_BLOCKING = re.compile(r"non_blocking\s*=\s*True")
# A sixth of the copying thread's samples (lower bound), or of the traced window: the copies are a measured part of
# its time (the same bar as host syncs: a per-log-line copy stays far below).
HELD_SHARE = 0.15
# The GPU this busy is the bottleneck: the thread's wait in the copy is partly the queued work it would wait for.
GPU_SATURATED_PCT = 90.0
# A trace with less pageable host-to-device traffic than this says nothing worth a line.
TRACE_MIN_BYTES = 16 * 2**20
SITES_SHOWN = 3

RULES = (RuleSpec("pageable-h2d-copy"),)


def check(ctx: Context) -> Iterator[Finding]:
    if ctx.on_cuda() is False or not _cuda(ctx):
        return  # `.to(device)` on a CPU-only process copies nothing to a GPU
    sampled = _from_samples(ctx)
    traced = _from_trace(ctx)
    if sampled is None and traced is None:
        return
    util = _gpu_util_pct(ctx)
    saturated = util is not None and util >= GPU_SATURATED_PCT
    lead = sampled if sampled is not None and (traced is None or sampled.bound >= traced.bound) else traced
    assert lead is not None
    measured = lead.bound >= HELD_SHARE
    evidence = list(sampled.evidence if sampled is not None else ()) + list(traced.evidence if traced else ())
    if util is not None:
        evidence.append(("GPU utilisation", f"{util:.0f}% (NVML, mean over the window)"))
    where = f" at {lead.site}" if lead.site else ""
    claim = f"{lead.thread} is held by host-to-device copies {pct(lead.share)} of {lead.of}{where}: {lead.why}"
    if saturated:
        claim += (f"; the GPU reads {util:.0f}% busy, so part of the wait may be queued GPU work the copy waits for: "
                  "pin the source and compare")
    yield Finding(
        rule_id="pageable-h2d-copy",
        severity=Severity.WARNING if measured and not saturated else Severity.INFO,
        claim=claim,
        evidence=tuple(evidence),
        remedy="Pin the host memory the batches come from (DataLoader(pin_memory=True), or tensor.pin_memory() once "
               "for a shard kept in RAM) and copy with .to(device, non_blocking=True), ideally on a side stream one "
               "batch ahead (torch.cuda.Stream + wait_stream + record_stream), so the copy overlaps the step.",
        impact=round(lead.share, 3),
        stages=lead.stages,
    )


@dataclass(frozen=True, slots=True)
class _Held:
    thread: str
    share: float  # of ``of``
    bound: float  # what is compared with HELD_SHARE: the sampled share's one-sigma lower bound, the trace's share
    of: str  # "its samples" / "the traced window"
    site: str
    why: str
    evidence: tuple[tuple[str, str], ...]
    stages: tuple[str, ...]


def _from_samples(ctx: Context) -> _Held | None:
    best: tuple[float, ThreadStats, Counter[str], int, bool] | None = None
    for stats in ctx.sampled():
        sites: Counter[str] = Counter()
        non_blocking = False
        n = 0
        for thread, _state in ctx.stats_rows(stats):
            n += 1
            found = _copy_site(ctx, thread)
            if found is not None:
                sites[found[0]] += 1
                non_blocking = non_blocking or found[1]
        if not sites or n == 0:
            continue
        share = sum(sites.values()) / n
        bound = lower_bound(share, n)
        if best is None or bound > best[0]:
            best = (bound, stats, sites, n, non_blocking)
    if best is None:
        return None
    bound, stats, sites, n, non_blocking = best
    share = sum(sites.values()) / n
    if bound < HELD_SHARE and share < HELD_SHARE / 2:
        return None  # a copy now and then: nothing to say
    why = ("the line asks for non_blocking=True, yet the thread waits: its source is pageable memory (non_blocking only "
           "overlaps a copy from pinned memory)") if non_blocking else (
           "each copy is synchronous (no non_blocking=True) and, from pageable memory, staged through a driver buffer")
    evidence = [(f"{stats.name} at host-to-device copies", f"{pct(share)} of its {n} samples (at least "
                                                            f"{pct(bound)})")]
    for site, count in sites.most_common(SITES_SHOWN):
        evidence.append(("copy site", f"{site} ({count} samples)"))
    return _Held(thread=stats.name, share=share, bound=bound, of="its samples", site=sites.most_common(1)[0][0], why=why,
                 evidence=tuple(evidence), stages=_stages(stats.stage))


def _copy_site(ctx: Context, thread: ThreadSample) -> tuple[str, bool] | None:
    """The program's line (and the innermost line's text) when the sample sits in a host-to-device copy."""
    frames = python_frames(thread)
    if not frames:
        return None
    text = ctx.line_text(frames[0])
    if text is None or not is_h2d_copy_line(text):
        return None
    user = next((f for f in frames if not is_library_file(f.filename)), frames[0])
    shown = text.strip()[:70]
    return f"{frame_site(user)} `{shown}`" if user is frames[0] else (
        f"{frame_site(user)} (copying at {frame_site(frames[0])} `{shown}`)"), bool(_NON_BLOCKING.search(text))


def is_h2d_copy_line(text: str) -> bool:
    """A source line that copies host data to a GPU (see ``_TO_DEVICE`` / ``_OTHER_COPY``), not one back to the host."""
    code = text.split("#", 1)[0]
    if is_gpu_sync_line(code):
        return False  # `.to("cpu")`, `.cpu()`, `.item()`: a copy back to the host is a sync
    if _OTHER_COPY.search(code):
        return True
    return any(_DEVICE_WORDS.search(m.group("args")) for m in _TO_DEVICE.finditer(code))


def _from_trace(ctx: Context) -> _Held | None:
    summary = ctx.kernels
    if summary is None:
        return None
    pageable = [c for c in summary.copies if c.direction == "HtoD" and c.host_memory == "Pageable"]
    if not pageable or sum(c.bytes for c in pageable) < TRACE_MIN_BYTES:
        return None
    window = summary.step_window_us or summary.window_us
    if window <= 0:
        return None
    copy: CopyStat = max(pageable, key=lambda c: c.host_us)
    tid, held = copy.host_us_by_thread[0] if copy.host_us_by_thread else (None, copy.host_us)
    name = summary.thread_label(tid)
    share = min(1.0, held / window)
    stats = next((t for t in ctx.threads if t.os_thread_id == tid), None) if tid is not None else None
    evidence = (("pageable host-to-device copies (kernel trace)",
                 f"{copy.count} copies, {copy.bytes / 2**20:.0f} MiB, {copy.gpu_us / 1e3:.1f} ms on the GPU; the "
                 f"calls that issued them held {name} {held / 1e3:.1f} ms of the {window / 1e3:.1f} ms traced"),)
    return _Held(thread=name, share=share, bound=share, of="the traced window", site="",
                 why="the trace names the copies 'Pageable -> Device': CUDA stages them through a driver buffer "
                     "while the thread waits", evidence=evidence,
                 stages=_stages(stats.stage) if stats is not None else ())


def _stages(stage: Stage) -> tuple[str, ...]:
    return (stage,) if stage in PIPELINE_STAGES else ()


def _cuda(ctx: Context) -> bool:
    if ctx.on_cuda() is True:
        return True
    facts = ctx.obs.process
    return facts is not None and facts.cuda_in_use is True


def _gpu_util_pct(ctx: Context) -> float | None:
    mine = set(ctx.process_gpus())
    sweeps = ctx.obs.gpus if isinstance(ctx.obs.gpus, tuple) else ()
    values = [float(g.util_pct) for sweep in sweeps for g in sweep
              if g.index in mine and isinstance(g.util_pct, int | float)]
    return sum(values) / len(values) if values else None
