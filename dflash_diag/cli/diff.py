"""`dflash-diag diff`: two snapshots side by side, changes ranked by how likely they explain the rate difference."""

from __future__ import annotations

import argparse
from typing import Any

from dflash_contract.redact import redact_tree
from dflash_diag.cli._output import console as make_console
from dflash_diag.cli._output import dump_json, shown
from dflash_diag.model.text import printable_tree

DIFF_SCHEMA = "dflash-diag.diff/1"


class DiffCommand:
    """Compare two snapshot bundles: what changed (command line, versions, flags, config, code, env knobs, threads)
    and the rates.

    A and B are bundles written by `dflash-diag snapshot` (.tar.gz, the --dir directory, or their
    snapshot.json). The rate differences (tok/s, stage b/s, state shares) come first; then every change,
    most likely cause first (ranking: docs/bug-reports.md, "Comparing two runs").

      dflash-diag diff fast-run.tar.gz slow-run.tar.gz
      dflash-diag diff A.tar.gz B.tar.gz --json
    """

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("a", metavar="A", help="the reference snapshot (e.g. the fast run)")
        parser.add_argument("b", metavar="B", help="the snapshot to explain (e.g. the slow run)")
        parser.add_argument("--json", action="store_true", help=f"machine-readable output (schema {DIFF_SCHEMA})")
        parser.add_argument("--all", action="store_true", help="also list changes of low likelihood (score < 0.3)")

    def run(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
        from dflash_diag.snapshot.bundle import load_snapshot
        from dflash_diag.snapshot.compare import compare

        # Bundles come from other people: every string made printable (and redacted again) before it is shown.
        doc_a, doc_b = (printable_tree(redact_tree(load_snapshot(p))) for p in (args.a, args.b))
        rates, changes = compare(doc_a, doc_b)
        if args.json:
            dump_json(diff_json(shown(args.a), shown(args.b), doc_a, doc_b, rates, changes))
            return 0
        _print(shown(args.a), shown(args.b), doc_a, doc_b, rates, changes, show_all=args.all)
        return 0


def _side(path: str, doc: dict[str, Any]) -> dict[str, Any]:
    return {"path": path, "pid": doc.get("pid"), "created_utc": doc.get("created_utc"),
            "argv": (doc.get("process") or {}).get("argv")}


def diff_json(path_a: str, path_b: str, a: dict[str, Any], b: dict[str, Any], rates: list[Any],
              changes: list[Any]) -> dict[str, Any]:
    return {
        "schema": DIFF_SCHEMA,
        "a": _side(path_a, a),
        "b": _side(path_b, b),
        "rates": [{"name": r.name, "a": r.a, "b": r.b, "ratio": None if r.ratio is None else round(r.ratio, 4)}
                  for r in rates],
        "changes": [{"rank": i + 1, "kind": c.kind, "key": c.key, "a": c.a, "b": c.b, "score": round(c.score, 3),
                     "note": c.note} for i, c in enumerate(changes)],
    }


def _print(path_a: str, path_b: str, a: dict[str, Any], b: dict[str, Any], rates: list[Any], changes: list[Any],
           *, show_all: bool) -> None:
    from rich.markup import escape
    from rich.table import Table

    console = make_console(wide_when_piped=True)
    console.print(f"[bold]A[/] {escape(path_a)}  (PID {a.get('pid')}, {a.get('created_utc')})")
    console.print(f"[bold]B[/] {escape(path_b)}  (PID {b.get('pid')}, {b.get('created_utc')})")
    console.print()
    if rates:
        table = Table(title="rates (the difference to explain)", title_justify="left")
        for col in ("rate", "A", "B", "B/A"):
            table.add_column(col, justify="right" if col != "rate" else "left")
        for r in rates:
            ratio = "" if r.ratio is None else f"{r.ratio:.2f}x"
            table.add_row(escape(r.name), escape(r.a), escape(r.b), ratio)
        console.print(table)
    else:
        console.print("rates: none published by the app in either run, and no thread-state share moved by 5 points or more")
    shown = [c for c in changes if show_all or c.score >= 0.3]
    if not shown:
        console.print("[green]no differences[/] in versions, config, command line, flags, code, env knobs or threads.")
        return
    table = Table(title="changes, most likely cause first", title_justify="left")
    with_notes = any(c.note for c in shown)
    table.add_column("#", justify="right")
    table.add_column("kind")
    table.add_column("what", overflow="fold", min_width=min(32, max(len(c.key) for c in shown)))
    table.add_column("A", overflow="fold")
    table.add_column("B", overflow="fold")
    table.add_column("likely")
    if with_notes:
        table.add_column("note", overflow="fold")
    for i, c in enumerate(shown, 1):
        row = [str(i), c.kind, escape(c.key), escape(c.a), escape(c.b), f"{c.score:.2f}"]
        table.add_row(*row, *([escape(c.note)] if with_notes else []))
    console.print(table)
    hidden = len(changes) - len(shown)
    if hidden:
        console.print(f"[dim]{hidden} low-likelihood changes hidden (--all shows them)[/]")
