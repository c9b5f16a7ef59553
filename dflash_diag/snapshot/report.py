"""``report.md``: the human half of the bundle, rendered from the (already redacted) snapshot document.

Order follows what a maintainer reads first: findings, what is missing from the report, versions, config and
flags, environment knobs, threads and their states, pipeline, GPUs, probes, code drift.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dflash_contract.board import AppKeys
from dflash_diag.view.findings import (
    BADGE,
    FIX,
    RULE,
    FindingDoc,
    HeadlineDoc,
    Line,
    Span,
    findings_lines,
    headline_lines,
)

MAX_PROBE_JSON_CHARS = 1500


def _val(value: Any) -> str:
    if isinstance(value, Mapping) and set(value) == {"na"}:
        return f"N/A: {value['na']}"
    if value is None:
        return "N/A"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _pct(value: Any) -> Any:
    return f"{100 * value:.0f}%" if isinstance(value, int | float) and not isinstance(value, bool) else value


def _cell(value: Any) -> str:
    return _val(value).replace("|", "\\|").replace("\n", " ")


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


def markdown_lines(lines: Iterable[Line]) -> list[str]:
    """The markdown adapter of finding lines (view/findings.py): the headline in bold, a finding as a heading with
    its evidence and fix as a list under it, a badge as ``[WARNING]``, a rule id as code."""
    out: list[str] = []
    under = ""  # the role of the line the indented ones belong to
    for line in lines:
        text = "".join(_markdown_span(span) for span in line.spans)
        if line.depth == 0:
            under = line.role
            out += [{"headline": f"**{text}**", "finding": f"### {text}"}.get(line.role, text), ""]
        elif under == "headline":  # its fix: a paragraph of its own
            out += [text, ""]
        else:
            out.append(f"- {text}")
            if line.role == "fix":  # a finding's last line
                out.append("")
    return out


def _markdown_span(span: Span) -> str:
    if span.tag == BADGE:
        return f"[{span.text}]"
    if span.tag == RULE:
        return f"`{span.text}`"
    if span.tag == FIX:
        return f"**{span.text}**"
    return span.text


def _findings(doc: Mapping[str, Any]) -> list[str]:
    # The document build.py has just written (view/findings.py's shapes), redacted: drawn as it stands.
    findings: list[FindingDoc] = doc.get("findings") or []
    headline: HeadlineDoc | None = doc.get("headline")
    out = ["## Findings", ""] + (markdown_lines(headline_lines(headline)) if headline is not None else [])
    if findings and not any(f["severity"] in ("warning", "critical") for f in findings):
        out += ["No warning or critical findings. Informational:", ""]
    return out + markdown_lines(findings_lines(None, findings))


def _threads(doc: Mapping[str, Any]) -> list[str]:
    threads = doc.get("threads") or []
    out = ["## Threads and their states", ""]
    if not threads:
        out.append("No thread states (see Missing).")
        return out
    rows = []
    for t in threads:
        shares = sorted(((k, v) for k, v in (t.get("shares") or {}).items() if v), key=lambda kv: -kv[1])[:3]
        top = t.get("top_frame") or {}
        rows.append([
            t.get("name"), t.get("stage"), t.get("os_thread_id"), t.get("n_samples"),
            ", ".join(f"{k} {100 * v:.0f}%" for k, v in shares),
            _val(t.get("cpu_pct")) if not isinstance(t.get("cpu_pct"), float) else f"{t['cpu_pct']:.0f}%",
            f"{t.get('gil_held_pct', 0):.0f}%",
            f"{top.get('name')} ({str(top.get('filename', '')).rsplit('/', 1)[-1]}:{top.get('line')})" if top else "",
        ])
    out += _table(["thread", "stage", "tid", "samples", "top states", "CPU", "GIL held", "top frame"], rows)
    out += ["", "Per-thread timeline: `timeline.svg`. All stacks with native frames: `stacks.txt`."]
    return out


def _pipeline(doc: Mapping[str, Any]) -> list[str]:
    p = doc.get("pipeline") or {}
    rates = doc.get("rates") or {}
    out = ["## Pipeline and rates", ""]
    if p.get("verdict"):
        out += [f"**{p.get('verdict')}**", ""]
    rows: list[list[Any]] = [
        ["tokens/s", rates.get(AppKeys.TOKENS_PER_S)],
        ["target batches/s", rates.get(AppKeys.TARGET_BATCHES_PER_S)],
        ["drafter batches/s", rates.get(AppKeys.DRAFTER_BATCHES_PER_S)],
        ["step", rates.get(AppKeys.STEP)],
        [f"{p.get('queue_name', 'q_hs')} depth / max", f"{_val(p.get('queue_depth'))} / {_val(p.get('queue_maxsize'))}"],
        ["queue trend", f"{p['queue_trend_per_s']:+.2f} items/s" if isinstance(p.get("queue_trend_per_s"), int | float)
         else p.get("queue_trend_per_s")],
        ["target blocked in put", _pct(p.get("producer_starved_share"))],
        ["drafter blocked in get", _pct(p.get("consumer_starved_share"))],
        ["bottleneck", p.get("bottleneck")],
    ]
    return out + _table(["what", "value"], rows)


def _gpus(doc: Mapping[str, Any]) -> list[str]:
    gpus = doc.get("gpus")
    out = ["## GPUs", ""]
    if not isinstance(gpus, list):
        out.append(_val(gpus))
        return out
    rows = [[g.get("index"), g.get("name"), g.get("util_pct"), g.get("memory_used_bytes"), g.get("memory_total_bytes"),
             g.get("power_w"), g.get("sm_clock_mhz"), g.get("temperature_c"), g.get("throttle_reasons")] for g in gpus]
    return out + _table(["#", "name", "util %", "mem used B", "mem total B", "power W", "SM MHz", "temp C",
                         "throttle"], rows)


def _probes(doc: Mapping[str, Any]) -> list[str]:
    board = doc.get("board")
    out = ["## Probes", ""]
    if not isinstance(board, Mapping):
        out.append("No probe board: the process was not started under probes (`dflash-diag run -- ...`).")
        return out
    written = board.get("wall_time_s")
    created = doc.get("created_wall_s")
    age = f", {created - written:.1f} s before the snapshot" if isinstance(written, int | float) and isinstance(
        created, int | float) else ""
    out.append(f"Board `{board.get('schema')}` seq {board.get('seq')}{age} (full payloads in `board.json`).")
    out.append("")
    for name, payload in sorted((board.get("probes") or {}).items()):
        status = payload.get("status") if isinstance(payload, Mapping) else "?"
        text = json.dumps(payload, sort_keys=True)
        if len(text) > MAX_PROBE_JSON_CHARS:
            text = text[:MAX_PROBE_JSON_CHARS] + " ... (full payload in board.json)"
        out += [f"- **{name}** ({status}): `{text}`"]
    return out


def _code(doc: Mapping[str, Any]) -> list[str]:
    code = doc.get("code") or {}
    out = ["## Code and drift", ""]
    out.append(f"Project root: {_val(code.get('root'))} ({code.get('how') or 'unknown'}); "
               f"{len(code.get('files') or {})} .py files hashed (sha256 in snapshot.json)"
               + (f"; {code['truncated']}" if code.get("truncated") else "") + ".")
    changed = code.get("changed_after_start") or []
    stale = code.get("stale_modules") or []
    if changed:
        out += ["", "Changed on disk after the process started (the running process may execute older code):"]
        out += [f"- `{path}`" for path in changed[:50]]
    if stale:
        out += ["", "Stale modules reported by the codedrift probe:"]
        out += [f"- `{s.get('module')}` ({s.get('file')})" for s in stale[:50] if isinstance(s, Mapping)]
    if not changed and not stale:
        out += ["", "No drift seen."]
    return out


def render_report(doc: Mapping[str, Any]) -> str:
    process = doc.get("process") or {}
    lines = [
        f"# dflash-diag snapshot of PID {doc.get('pid')}",
        "",
        f"- taken: {doc.get('created_utc')} by dflash-diag {doc.get('tool', {}).get('version')} "
        f"(schema `{doc.get('schema')}`)",
        f"- command: `{' '.join(process.get('argv') or [])}`",
        f"- cwd: {_val(process.get('cwd'))}; host: {_val(process.get('hostname'))}",
        f"- alive at the end of the snapshot: {process.get('alive_at_end')}",
        "",
    ]
    lines += _findings(doc)
    missing = doc.get("missing") or []
    lines += ["## Missing from this report", ""]
    lines += [f"- {m.get('what')}: {m.get('why')}" for m in missing] or ["Nothing: every source answered."]
    lines += ["", "## Versions", ""]
    lines += _table(["component", "version"], [[k, v] for k, v in (doc.get("versions") or {}).items()])
    app = doc.get("app") or {}
    lines += ["", "## Config and flags", ""]
    if app:
        lines.append(f"App `{app.get('name')}`, scenario: {_val(app.get('scenario'))}.")
        lines.append("")
    config = doc.get("config") or {}
    lines += _table(["key", "value"], [[k, v] for k, v in sorted(config.items())]) if config else [
        "No app config published (no board, or the app did not call set_app)."]
    lines += ["", "### Environment knobs", ""]
    knobs = doc.get("env_knobs") or {}
    lines += _table(["variable", "value"], [[k, v] for k, v in knobs.items()]) if knobs else ["None set."]
    lines += [""] + _pipeline(doc) + [""] + _threads(doc) + [""] + _gpus(doc) + [""] + _probes(doc) + [""] + _code(doc)
    timings = doc.get("timings_s") or {}
    lines += ["", "## How this snapshot was taken", "",
              ", ".join(f"{k} {v:.2f} s" for k, v in timings.items() if isinstance(v, int | float)), ""]
    return "\n".join(lines)
