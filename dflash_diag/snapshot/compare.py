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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dflash_contract.board import AppKeys, CheckpointKeys, FastpathKeys, GilKeys, ProbeName
from dflash_diag.model import PIPELINE_STAGES, Stage, StageNames

# Prior likelihood that a change of this kind explains a throughput difference.
KIND_PRIOR: dict[str, float] = {
    "finding": 0.85,  # a root cause present in one run only: the tool already names it
    "flag": 0.6,  # a command-line option given in one run only, or with another value
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
# dflash-diag's own settings in the program's environment (``dflash-diag run`` sets them, and puts its bootstrap
# first on PYTHONPATH): how the program was watched, not how it ran. Listed with --all, never ranked as a cause.
TOOL_ENV = re.compile(r"^DFLASH_DIAG_\w*$")
TOOL_SCORE = 0.05
TOOL_NOTE = "dflash-diag's own setting (how the run was watched)"
_BOOTSTRAP_ENTRY = re.compile(r"(^|/)probes/_bootstrap/?$")
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
    if kind == "env" and TOOL_ENV.match(key):
        return TOOL_SCORE
    score = KIND_PRIOR.get(kind, 0.3)
    if kind == "flag":
        # `--use-reentrant false` is the config key use_reentrant: the same known causes, the same cold keys.
        kind, key = "config", key.lstrip("-").replace("-", "_")
    if kind == "config" and COLD_KEYS.search(key):
        return COLD_SCORE
    for hot_kind, pattern, hot in HOT_KEYS:
        if hot_kind == kind and pattern.search(key):
            score = max(score, hot)
    return score


def _diff_maps(kind: str, a: Mapping[str, Any], b: Mapping[str, Any], note: str = "") -> list[Change]:
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if va != vb:
            why = TOOL_NOTE if kind == "env" and TOOL_ENV.match(key) else note
            out.append(Change(kind, key, _show(va) if key in a else "(absent)", _show(vb) if key in b else "(absent)",
                              _score(kind, key), why))
    return out


def _env_knobs(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The environment knobs of a run, without the entry ``dflash-diag run`` puts first on PYTHONPATH (its
    bootstrap): a run under probes and one attached to must not differ by the tool's own path."""
    knobs = dict(_mapping(doc, "env_knobs"))
    path = knobs.get("PYTHONPATH")
    if isinstance(path, str):
        kept = [p for p in path.split(":") if p and not _BOOTSTRAP_ENTRY.search(p)]
        if kept:
            knobs["PYTHONPATH"] = ":".join(kept)
        else:
            del knobs["PYTHONPATH"]
    return knobs


def argv_options(argv: Sequence[Any]) -> dict[str, str]:
    """A command line as option -> value, compared token by token (argv is redacted in the bundle: a secret's
    value reads the same in both runs, so only what really changed differs).

    ``--lr 0.01`` and ``--lr=0.01`` are ``{"--lr": "0.01"}``; a switch alone (``--compile``) is "(set)"; the words
    that are no option's value are ``argument N`` (the script is ``argument 1``). The interpreter's path (argv[0]) is
    left out: the same program run from another venv is the same command, and the versions diff says what that venv
    changed."""
    tokens = [str(t) for t in argv]
    out: dict[str, str] = {}
    i, positional = 1, 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("-") and token not in ("-", "--") and not _is_number(token):
            name, eq, value = token.partition("=")
            if not eq and i + 1 < len(tokens) and (not tokens[i + 1].startswith("-") or _is_number(tokens[i + 1])):
                value, i = tokens[i + 1], i + 1
            elif not eq:
                value = "(set)"
            out[name] = value
        else:
            positional += 1
            out[f"argument {positional}"] = token
        i += 1
    return out


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


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


def stage_names(doc: Mapping[str, Any]) -> StageNames:
    """The words a bundle's program uses for its stages: recorded with its pipeline view (``pipeline.names``), or,
    in a bundle from before they were, read off its threads' names the same way."""
    recorded = _mapping(_mapping(doc, "pipeline"), "names")
    if "own_words" in recorded:
        stems = {Stage.of(k): str(v) for k, v in _mapping(recorded, "stems").items() if Stage.of(k) in PIPELINE_STAGES}
        return StageNames(own_words=recorded.get("own_words") is True, queue=str(recorded.get("queue") or ""),
                          stems=stems)
    threads = [t for t in doc.get("threads") or [] if isinstance(t, Mapping)]
    members = {stage: [str(t.get("name")) for t in threads if t.get("stage") == stage and not t.get("helper")]
               for stage in PIPELINE_STAGES}
    return StageNames.of_threads(members)


def _layout(doc: Mapping[str, Any], names: StageNames) -> dict[str, Any]:
    threads = [t for t in doc.get("threads") or [] if isinstance(t, Mapping)]
    out: dict[str, Any] = {}
    for stage in Stage:
        members = sorted(str(t.get("name")) for t in threads if t.get("stage") == stage)
        out[f"{names.word(stage)} threads"] = f"{len(members)}: {', '.join(members[:8])}" if members else "0"
    return out


def _argv(doc: Mapping[str, Any]) -> list[Any]:
    argv = _mapping(doc, "process").get("argv")
    return list(argv) if isinstance(argv, list) else []


def _ratio(b: float, a: float) -> float | None:
    """b / a, or None when there is no finite answer (a is zero, or the quotient overflows)."""
    if not a:
        return None
    ratio = b / a
    return ratio if math.isfinite(ratio) else None


def _rates(a: Mapping[str, Any], b: Mapping[str, Any], names: StageNames) -> list[RateDelta]:
    ra, rb = _mapping(a, "rates"), _mapping(b, "rates")
    out: list[RateDelta] = []
    for key, label in ((AppKeys.TOKENS_PER_S, "tok/s"),
                       (AppKeys.TARGET_BATCHES_PER_S, f"{names.word(Stage.TARGET)} b/s"),
                       (AppKeys.DRAFTER_BATCHES_PER_S, f"{names.word(Stage.DRAFTER)} b/s"), (AppKeys.STEP_MS, "step ms")):
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
                out.append(RateDelta(f"{names.word(stage)} {state} share", f"{100 * va:.0f}%", f"{100 * vb:.0f}%", _ratio(vb, va)))
    return out


def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[list[RateDelta], list[Change]]:
    """The rate deltas (the effect) and the ranked changes (candidate causes), most likely first."""
    changes: list[Change] = []
    changes += _finding_changes(a, b)
    changes += _diff_maps("config", flatten(_mapping(a, "config")), flatten(_mapping(b, "config")))
    changes += _diff_maps("probe", _probe_facts(a), _probe_facts(b))
    changes += _code_changes(a, b)
    changes += _diff_maps("version", _mapping(a, "versions"), _mapping(b, "versions"))
    changes += _diff_maps("env", _env_knobs(a), _env_knobs(b))
    changes += _diff_maps("flag", argv_options(_argv(a)), argv_options(_argv(b)), "on the command line")
    # One set of words for both sides (B's, the run to explain): a row must name the same stage in A and B.
    names = stage_names(b)
    changes += _diff_maps("threads", _layout(a, names), _layout(b, names))
    order = list(KIND_PRIOR)
    changes.sort(key=lambda c: (-c.score, order.index(c.kind) if c.kind in order else 99, c.key))
    return _rates(a, b, names), changes
