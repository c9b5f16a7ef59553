"""The wait-for graph as JSON (``doctor --json``'s ``waits``, ``top --batch --json``) and as plain lines (doctor's
text, ``top``'s Waits tab). No rich, no Textual."""

from __future__ import annotations

from typing import Any

from dflash_diag.model import NA, Maybe, StageNames
from dflash_diag.model.waits import ChainHop, ThreadWaits, WaitEdge, WaitGraph, edge_text

WAITS_SCHEMA = "dflash-diag.waits/1"


def _edge_json(edge: WaitEdge) -> dict[str, Any]:
    return {"kind": edge.kind, "target": edge.target, "share": round(edge.share, 3), "site": edge.site,
            "to_threads": list(edge.to_threads)}


def _thread_json(node: ThreadWaits) -> dict[str, Any]:
    return {"name": node.name, "stage": node.stage, "samples": node.n_samples,
            "computing_share": round(node.computing_share, 3), "hot": node.hot,
            "cpu_pct": None if node.cpu_pct is None else round(node.cpu_pct, 1),
            "stack_changed": node.stack_changed, "holds": list(node.holds),
            "waits": [_edge_json(e) for e in node.waits]}


def _hop_json(hop: ChainHop) -> dict[str, Any]:
    return {"threads": list(hop.threads), "waits": None if hop.edge is None else _edge_json(hop.edge), "hot": hop.hot}


def waits_json(graph: Maybe[WaitGraph]) -> dict[str, Any]:
    """The documented ``waits`` section (docs/findings.md, "The wait-for graph")."""
    if isinstance(graph, NA):
        return {"schema": WAITS_SCHEMA, "status": "na", "reason": graph.reason}
    return {"schema": WAITS_SCHEMA, "status": "ok", "progress": graph.progress,
            "process_cpu_pct": None if graph.process_cpu_pct is None else round(graph.process_cpu_pct, 1),
            "path": graph.chain_text(), "chain": [_hop_json(h) for h in graph.chain],
            "cycle": list(graph.cycle), "note": graph.note,
            "threads": [_thread_json(n) for n in graph.threads]}


def waits_lines(graph: Maybe[WaitGraph], names: StageNames | None = None) -> list[str]:
    """One line for the path, then one per thread: what it computes and what it waits on. ``names``: the words
    for the stages (the program's, or the roles), else their wire values."""
    if isinstance(graph, NA):
        return [str(graph)]
    lines = [f"path (root last): {graph.chain_text() or 'no thread loses time waiting'}",
             f"progress: {'yes' if graph.progress else 'NONE: no thread computes, no stack moves'}"
             + (f"; process CPU {graph.process_cpu_pct:.1f}% of one core" if graph.process_cpu_pct is not None else "")]
    if graph.cycle:
        lines.append(f"lock cycle: {' -> '.join((*graph.cycle, graph.cycle[0]))}")
    for node in graph.threads:
        doing = f"computes {100 * node.computing_share:.0f}%" + (f" in {node.hot}" if node.hot else "")
        waits = "; ".join(edge_text(e) + (f" -> {', '.join(e.to_threads[:3])}" if e.to_threads else "")
                          for e in node.waits[:3])
        held = f"; holds {', '.join(node.holds)}" if node.holds else ""
        stage = f" [{names.word(node.stage)}]" if names is not None else f" [{node.stage}]"
        lines.append(f"{node.name}{stage}: {doing}" + (f"; {waits}" if waits else "") + held)
    return lines
