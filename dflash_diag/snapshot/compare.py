"""Two snapshot documents side by side: the rate difference to explain, and every change that could explain
it, ranked by how likely it is to (pure functions over the decoded ``snapshot.json`` documents).

Ranking heuristic (docs/bug-reports.md, "Comparing two runs"): each change gets a score in 0..1 =
the prior of its kind (how often such a change moves throughput in threaded PyTorch training) raised for
keys known to matter (the seed incident's failures, docs/scenarios.md): a checkpoint mode, a compile switch,
a fast-path flag, a torch/triton/fla version, an allocator knob, a changed source file, a new finding.
Ties keep a stable order (kind, then key). Rates are the effect, listed apart, never ranked as causes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dflash_contract.board import AppKeys, CheckpointKeys, FastpathKeys, GilKeys, ProbeName

# Prior likelihood that a change of this kind explains a throughput difference.
KIND_PRIOR: dict[str, float] = {
    "finding": 0.85,  # a root cause present in one run only: the tool already names it
    "config": 0.55,
    "code": 0.6,
    "drift": 0.7,
    "version": 0.5,
    "env": 0.4,
    "threads": 0.6,
    "probe": 0.6,
}
# Keys (regex, matched on the dotted key) that are known to move throughput: the score becomes this.
HOT_KEYS: tuple[tuple[str, re.Pattern[str], float], ...] = (
    ("config", re.compile(r"(^|\.)(use_reentrant|checkpoint\w*|compile\w*|scenario|sequential)$"), 0.95),
    ("config", re.compile(r"(^|\.)(batch_size|seq_len|num_anchors|queue_size|\w*devices|dtype|\w*chunk\w*|preset)$"), 0.8),
    ("probe", re.compile(r"^(fastpath\.(gdn_fast_path|flex_attention|gdn_kernels\..*)|checkpoint\.mode)$"), 0.95),
    ("version", re.compile(r"^(torch|triton|fla|transformers|cuda|causal-conv1d)$"), 0.75),
    ("version", re.compile(r"^driver$"), 0.6),
    ("env", re.compile(r"^(CUDA_LAUNCH_BLOCKING|PYTORCH_CUDA_ALLOC_CONF|TORCH_COMPILE_DISABLE|TORCHDYNAMO_DISABLE|"
                       r"TORCHINDUCTOR_\w+|TORCH_LOGS|PYTORCH_NO_CUDA_MEMORY_CACHING)$"), 0.85),
    ("env", re.compile(r"^(OMP_NUM_THREADS|MKL_NUM_THREADS|CUDA_VISIBLE_DEVICES|TORCH_\w+|PYTHON_GIL)$"), 0.65),
)
# Config keys that name places, schedules and bookkeeping (where checkpoints go, how often to log, a seed):
# they change between runs all the time and almost never explain a rate. Checked before HOT_KEYS.
COLD_KEYS = re.compile(
    r"(^|\.)(\w*_dir|\w*_path|\w*_file|\w*_jsonl?|path|log_interval|save_every|seed|wandb\w*|max_seconds|"
    r"max_steps|resume|run_name|name|notes|tags)$"
)
COLD_SCORE = 0.15
# State shares that moved by less than this (absolute) are sampling noise, not a change.
SHARE_DELTA_MIN = 0.05


@dataclass(frozen=True, slots=True)
class Change:
    kind: str
    key: str
    a: str
    b: str
    score: float
    note: str = ""


@dataclass(frozen=True, slots=True)
class RateDelta:
    name: str
    a: str
    b: str
    ratio: float | None  # b / a


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, Mapping) and set(value) == {"na"}:
        return f"N/A: {value['na']}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}; lists stay whole values."""
    if isinstance(value, Mapping) and not (set(value) == {"na"}):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value} if prefix else {}


def _score(kind: str, key: str) -> float:
    if kind == "config" and COLD_KEYS.search(key):
        return COLD_SCORE
    score = KIND_PRIOR.get(kind, 0.3)
    for hot_kind, pattern, hot in HOT_KEYS:
        if hot_kind == kind and pattern.search(key):
            score = max(score, hot)
    return score


def _diff_maps(kind: str, a: Mapping[str, Any], b: Mapping[str, Any], note: str = "") -> list[Change]:
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if va != vb:
            out.append(Change(kind, key, _show(va) if key in a else "(absent)", _show(vb) if key in b else "(absent)",
                              _score(kind, key), note))
    return out


def _mapping(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, Mapping) else {}


def _code_changes(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Change]:
    ca, cb = _mapping(a, "code"), _mapping(b, "code")
    fa, fb = _mapping(ca, "files"), _mapping(cb, "files")
    out: list[Change] = []
    if fa and fb:
        for path in sorted(set(fa) | set(fb)):
            ha, hb = fa.get(path), fb.get(path)
            if ha != hb:
                note = "source differs" if ha and hb else ("added" if hb else "removed")
                out.append(Change("code", path, str(ha)[:12] if ha else "(absent)", str(hb)[:12] if hb else "(absent)",
                                  _score("code", path) if ha and hb else 0.45, note))
    for side, doc in (("A", ca), ("B", cb)):
        drift = [str(p) for p in (doc.get("changed_after_start") or [])]
        stale = [str(s.get("module")) for s in (doc.get("stale_modules") or []) if isinstance(s, Mapping)]
        if drift or stale:
            names = ", ".join((stale or drift)[:4])
            out.append(Change("drift", f"stale code in {side}", "yes" if side == "A" else "-", "yes" if side == "B" else "-",
                              KIND_PRIOR["drift"], f"run {side} may execute code older than its files: {names}"))
    return out


def _finding_changes(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Change]:
    def serious(doc: Mapping[str, Any]) -> dict[str, str]:
        return {str(f.get("rule_id")): str(f.get("severity")) for f in doc.get("findings") or []
                if isinstance(f, Mapping) and f.get("severity") in ("warning", "critical")}

    sa, sb = serious(a), serious(b)
    out = []
    for rule in sorted(set(sa) | set(sb)):
        if sa.get(rule) != sb.get(rule):
            score = KIND_PRIOR["finding"] + (0.05 if "critical" in (sa.get(rule), sb.get(rule)) else 0.0)
            out.append(Change("finding", rule, sa.get(rule, "(none)"), sb.get(rule, "(none)"), min(1.0, score),
                              "a root cause raised in one run only"))
    return out


def _probe_facts(doc: Mapping[str, Any]) -> dict[str, Any]:
    board = _mapping(doc, "board")
    probes = _mapping(board, "probes")
    facts: dict[str, Any] = {}
    fast = _mapping(probes, ProbeName.FASTPATH)
    for key in (FastpathKeys.GDN_FAST_PATH, FastpathKeys.FLEX_ATTENTION):
        if key in fast:
            facts[f"fastpath.{key}"] = fast[key]
    for k, v in _mapping(fast, FastpathKeys.GDN_KERNELS).items():
        facts[f"fastpath.gdn_kernels.{k}"] = v
    calls = _mapping(_mapping(probes, ProbeName.CHECKPOINT), CheckpointKeys.CALLS)
    if calls:
        re_calls, non = calls.get(CheckpointKeys.REENTRANT) or 0, calls.get(CheckpointKeys.NON_REENTRANT) or 0
        facts["checkpoint.mode"] = ("mixed" if re_calls and non else "reentrant" if re_calls
                                    else "non-reentrant" if non else "unused")
    gil = _mapping(probes, ProbeName.GIL)
    if GilKeys.FREE_THREADED in gil:
        facts["gil.free_threaded"] = gil[GilKeys.FREE_THREADED]
    return facts


def _layout(doc: Mapping[str, Any]) -> dict[str, Any]:
    threads = [t for t in doc.get("threads") or [] if isinstance(t, Mapping)]
    out: dict[str, Any] = {}
    for stage in ("target", "drafter", "other"):
        names = sorted(str(t.get("name")) for t in threads if t.get("stage") == stage)
        out[f"{stage} threads"] = f"{len(names)}: {', '.join(names[:8])}" if names else "0"
    return out


def _ratio(b: float, a: float) -> float | None:
    """b / a, or None when there is no finite answer (a is zero, or the quotient overflows)."""
    if not a:
        return None
    ratio = b / a
    return ratio if math.isfinite(ratio) else None


def _rates(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[RateDelta]:
    ra, rb = _mapping(a, "rates"), _mapping(b, "rates")
    out: list[RateDelta] = []
    for key, label in ((AppKeys.TOKENS_PER_S, "tok/s"), (AppKeys.TARGET_BATCHES_PER_S, "target b/s"),
                       (AppKeys.DRAFTER_BATCHES_PER_S, "drafter b/s"), (AppKeys.STEP_MS, "step ms")):
        va, vb = ra.get(key), rb.get(key)
        if va is None and vb is None:
            continue
        ratio = _ratio(vb, va) if isinstance(va, int | float) and isinstance(vb, int | float) else None
        out.append(RateDelta(label, _show(va), _show(vb), ratio))
    sa, sb = _mapping(ra, "state_shares"), _mapping(rb, "state_shares")
    for stage in sorted(set(sa) | set(sb)):
        xa, xb = _mapping(sa, stage), _mapping(sb, stage)
        for state in sorted(set(xa) | set(xb)):
            va, vb = float(xa.get(state) or 0.0), float(xb.get(state) or 0.0)
            if abs(vb - va) >= SHARE_DELTA_MIN:
                out.append(RateDelta(f"{stage} {state} share", f"{100 * va:.0f}%", f"{100 * vb:.0f}%", _ratio(vb, va)))
    return out


def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[list[RateDelta], list[Change]]:
    """The rate deltas (the effect) and the ranked changes (candidate causes), most likely first."""
    changes: list[Change] = []
    changes += _finding_changes(a, b)
    changes += _diff_maps("config", flatten(_mapping(a, "config")), flatten(_mapping(b, "config")))
    changes += _diff_maps("probe", _probe_facts(a), _probe_facts(b))
    changes += _code_changes(a, b)
    changes += _diff_maps("version", _mapping(a, "versions"), _mapping(b, "versions"))
    changes += _diff_maps("env", _mapping(a, "env_knobs"), _mapping(b, "env_knobs"))
    changes += _diff_maps("threads", _layout(a), _layout(b))
    order = list(KIND_PRIOR)
    changes.sort(key=lambda c: (-c.score, order.index(c.kind) if c.kind in order else 99, c.key))
    return _rates(a, b), changes
