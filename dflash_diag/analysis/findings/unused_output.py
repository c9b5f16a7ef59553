"""Work whose output nothing reads: a module called every step whose result is dropped (an auxiliary head whose
loss weight is 0.0 and still runs, a decoder kept from another stage, an evaluation call left in the loop).

Two mechanisms say the output is not read, each at a program line the stack samples show in progress:

- the code on disk: the line assigns a call on an attribute (``recon = self.decoder(h)``: a module called) to a name
  its function never reads again (``SourceLine.unused_outputs``; vocabulary projections are
  ``wasted-full-vocab-logits``' own);
- the ``health`` probe: the trainable tensors that got no gradient while their weights stayed put, none of them
  reached by the last loss's autograd graph (``stuck_none_in_graph`` 0), all under one module whose name the line
  calls (``recon.0.weight``, ``recon.2.bias`` and ``out["recon"] = self.recon(h)``): the module ran with autograd on
  and its output reaches no loss. A line that detaches the output or turns autograd off says the output is read
  as a target: not this.

The cost is the share of the thread's samples inside that call (one-sigma lower bound): a warning from 15% on a CPU,
information from 5%. On a GPU the call's kernels run asynchronously: the samples measure launching them, not their
GPU time, so the finding is information there, carrying what the GPU side measured (the allocator's throughput,
a kernel trace's longest kernels).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from dflash_contract.board import HealthKeys, ProbeName
from dflash_diag.analysis.findings._context import Context, frame_site, items, lower_bound, num, pct, text
from dflash_diag.analysis.findings._registry import RuleSpec
from dflash_diag.analysis.findings.wasted import gpu_side_evidence
from dflash_diag.model import PIPELINE_STAGES, Finding, Frame, Severity, ThreadStats
from dflash_diag.model.evidence import is_library_file
from dflash_diag.model.stacks import ThreadSample

# A sixth of the thread's samples (lower bound) in work nothing reads: the same bar as host syncs and copies.
COST_SHARE = 0.15
MIN_SHARE = 0.05
# A line that reads the output as a target (a teacher's, a stop-gradient branch): its module gets no gradient by
# design, and its output is used.
_READ_WITHOUT_GRAD = re.compile(r"\.detach\(|no_grad|inference_mode|stop_grad", re.IGNORECASE)
_PARAM_NAME = re.compile(r"^[A-Za-z_]\w*$")

RULES = (RuleSpec("wasted-unused-output", sampled=True),)


@dataclass(frozen=True, slots=True)
class _Site:
    stats: ThreadStats
    share: float
    bound: float
    site: str  # "speech_ctc.py:56 (SpeechModel.forward)"
    text: str  # the line
    why: str  # what says the output is not read


def check(ctx: Context) -> Iterator[Finding]:
    modules = _gradless_modules(ctx)
    best = _best_site(ctx, modules)
    if best is None or best.bound < MIN_SHARE:
        return
    cuda = ctx.on_cuda() is True
    evidence = [(f"{best.stats.name} inside the call", f"{pct(best.share)} of its {best.stats.n_samples} samples "
                                                      f"(at least {pct(best.bound)})"),
                ("the call", f"{best.site} `{best.text}`"), ("its output", best.why)]
    if cuda:
        evidence += gpu_side_evidence(ctx)
        measured = ("on a GPU its kernels run asynchronously: the samples measure launching them, not their GPU time "
                    "(a kernel trace does)")
    else:
        measured = f"{pct(best.share)} of {best.stats.name}'s samples are inside it"
    yield Finding(
        rule_id="wasted-unused-output",
        severity=Severity.WARNING if best.bound >= COST_SHARE and not cuda else Severity.INFO,
        claim=f"{best.site} computes an output that nothing reads ({best.why}): {measured}",
        evidence=tuple(evidence),
        remedy="Skip the call when its result is not used (a head whose loss weight is 0: do not run it, and freeze "
               "its parameters with requires_grad_(False)); if a forward hook or a side effect is what is wanted, "
               "run it only when that is read.",
        impact=round(best.bound if not cuda else 0.0, 3),
        stages=(best.stats.stage,) if best.stats.stage in PIPELINE_STAGES else (),
    )


def _best_site(ctx: Context, modules: Mapping[str, str]) -> _Site | None:
    best: _Site | None = None
    for stats in ctx.sampled():
        rows = ctx.stats_rows(stats)
        if not rows:
            continue
        sites: Counter[tuple[str, str, str]] = Counter()
        for thread, _state in rows:
            found = _unread_call(ctx, thread, modules)
            if found is not None:
                sites[found] += 1
        if not sites:
            continue
        (site, line_text, why), hits = sites.most_common(1)[0]
        share = hits / len(rows)
        found_site = _Site(stats=stats, share=share, bound=lower_bound(share, len(rows)), site=site, text=line_text,
                           why=why)
        if best is None or found_site.bound > best.bound:
            best = found_site
    return best


def _unread_call(ctx: Context, thread: ThreadSample, modules: Mapping[str, str]) -> tuple[str, str, str] | None:
    """(site, line text, why) of the program's frame in this sample that is a call whose output nothing reads."""
    for frame in thread.frames:
        if frame.native or is_library_file(frame.filename):
            continue
        line = ctx.code.get((frame.filename, frame.line))
        if line is not None:
            for n, line_text in line.unused_outputs:
                if n == frame.line:
                    return frame_site(frame), line_text, "assigned to a name its function never reads"
        found = _gradless_call(ctx, frame, modules)
        if found is not None:
            return found
    return None


def _gradless_call(ctx: Context, frame: Frame, modules: Mapping[str, str]) -> tuple[str, str, str] | None:
    if not modules:
        return None
    line_text = ctx.line_text(frame) or ""
    if _READ_WITHOUT_GRAD.search(line_text):
        return None
    for module, why in modules.items():
        if re.search(rf"\b{re.escape(module)}\s*\(", line_text):
            return frame_site(frame), line_text.strip()[:120], why
    return None


def _gradless_modules(ctx: Context) -> dict[str, str]:
    """Module name -> why, for the health probe's groups whose stuck tensors all lack a gradient, none reached by the
    loss's graph, all under one module (the deepest name their names share)."""
    out: dict[str, str] = {}
    for row in items(ctx.probe(ProbeName.HEALTH), HealthKeys.GROUPS):
        if not isinstance(row, Mapping):
            continue
        stuck, none = num(row, HealthKeys.STUCK_TENSORS), num(row, HealthKeys.STUCK_GRAD_NONE)
        if not stuck or none != stuck or num(row, HealthKeys.STUCK_NONE_IN_GRAPH) != 0:
            continue
        names = [n for n in items(row, HealthKeys.STUCK_EXAMPLES) if isinstance(n, str)]
        module = _shared_module(names)
        if module is None:
            continue
        group = text(row, HealthKeys.GROUP) or "an optimizer"
        out.setdefault(module, f"its module's {stuck:.0f} trainable tensors in {group} get no gradient and the loss's "
                               f"autograd graph reaches none of them, e.g. {names[0]} (health probe)")
    return out


def _shared_module(names: list[str]) -> str | None:
    """The deepest named module every parameter name is under, when they part only at indices or at the parameter
    itself: ``recon`` for ``recon.0.weight``, ``recon.2.bias``. None when they part at named children
    (``model.recon.0.weight`` and ``model.aux.1.weight``: ``model``'s output may well reach the loss), share
    nothing, or a name is a tensor's index rather than a path."""
    paths = [n.split(".") for n in names]
    if not paths or any(len(p) < 2 for p in paths):
        return None
    common: list[str] = []
    for parts in zip(*(p[:-1] for p in paths), strict=False):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    parting = {p[len(common)] for p in paths if len(p) > len(common) + 1}
    if any(_PARAM_NAME.match(part) for part in parting):
        return None
    named = [c for c in common if _PARAM_NAME.match(c)]
    return named[-1] if named else None
