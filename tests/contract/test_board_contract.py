"""One home for each shared idea (dflash_contract): the board schema, the probe names, the payload keys,
strict JSON, /proc identity and the redactor are defined once, and writers and readers use them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import probes
from dflash_contract import board as contract

ROOT = Path(__file__).resolve().parents[2]
CODE = [p for d in ("dflash_diag", "probes", "dflash_contract", "reference_trainer")
        for p in sorted((ROOT / d).rglob("*.py"))]
# Every module that writes or reads a board: all of them but the contract, which defines the keys.
SCANNED = [p for p in CODE if not p.is_relative_to(ROOT / "dflash_contract")]
KEY_CLASSES = {
    "gil": contract.GilKeys, "allocator": contract.AllocatorKeys, "queues": contract.QueueKeys,
    "checkpoint": contract.CheckpointKeys, "compile": contract.CompileKeys, "cudagraphs": contract.CudagraphsKeys,
    "fastpath": contract.FastpathKeys, "codedrift": contract.CodedriftKeys, "threads": contract.ThreadsKeys,
    "health": contract.HealthKeys, "collectives": contract.CollectivesKeys, "mailbox": contract.MailboxKeys,
    "syncs": contract.SyncKeys, "settings": contract.SettingsKeys,
}
ALL_KEY_CLASSES = (*KEY_CLASSES.values(), contract.PayloadKeys, contract.AppKeys, contract.SessionKeys)
# Keys too generic to tell a payload key from another document's field by their spelling alone (they are also
# snapshot, py-spy, trainer or thread fields): a literal of one counts where it is read from a board (below).
GENERIC = {"rank", "seq", "op", "current", "count", "total", "total_ms", "gone", "world_size", "threads", "status", "reason", "step", "steps", "window_s", "site", "fallback", "file", "cuda_available",
           "function", "thread", "module", "torch", "tid", "samples", "calls", "limit", "how", "active", "name",
           "config", "loss", "lr", "errors", "exception", "stale", "scenario", "enabled", "wandb", "device", "role",
           "group", "groups", "versions", "alive", "where", "installed", "sites", "armed", "interval_s",
           "wall_time_s", "attached", "publishes", "seconds"}
# Literals that spell a payload key's name but mean something else where they stand (each says what).
_TRAINER_OWN = "the trainer's own metric (log line, summary JSON), which it publishes by name through set_app like any " \
               "program (tests/probes/test_trainer.py holds its app section to AppKeys)"
_EVIDENCE = "an evidence label of a finding (doctor's JSON), not a key"
NOT_BOARD_KEYS = {
    ("probes/allocator.py", "num_device_alloc"): "torch.cuda.memory_stats()'s own key, which the probe reads",
    ("probes/allocator.py", "num_device_free"): "torch.cuda.memory_stats()'s own key, which the probe reads",
    ("probes/allocator.py", "num_sync_all_streams"): "torch.cuda.memory_stats()'s own key, which the probe reads",
    ("probes/compile.py", "recompiles"): "the torch artifact log's name (TORCH_LOGS=recompiles)",
    ("probes/compile.py", "graph_breaks"): "the torch artifact log's name (TORCH_LOGS=graph_breaks)",
    ("dflash_contract/readings.py", "compile_time_s"): "the Prometheus/wandb series' catalogue name",
    ("probes/attach.py", "board_error"): "a field of the attach report (docs/attach.md), not of the board",
    ("dflash_diag/cli/attach.py", "board_error"): "a field of the attach report (docs/attach.md), not of the board",
    ("dflash_diag/inject/ptrace.py", "gone"): "a kind of ptrace driver failure (the process is gone)",
    ("dflash_diag/view/kernels.py", "devices"): "a field of the kernel-trace summary (docs/integrations.md)",
    ("probes/kernels.py", "hook_errors"): "a field of the kernel recorder's outcome file, not of the board",
    ("dflash_diag/view/job.py", "entered"): "a field of a rank's row in the job document (docs/jobs.md)",
    ("dflash_diag/view/job.py", "completed"): "a field of a rank's row in the job document (docs/jobs.md)",
    ("dflash_diag/view/job.py", "backend"): "a field of a rank's row in the job document (docs/jobs.md)",
    ("dflash_diag/view/job.py", "in_collectives_s"): "a field of a rank's row in the job document (docs/jobs.md)",
    ("dflash_diag/inject/ptrace_driver.py", "gone"): "a kind of ptrace driver failure (the process is gone)",
    ("dflash_diag/analysis/findings/cudagraphs.py", "skips"): _EVIDENCE,
    ("dflash_diag/analysis/findings/cudagraphs.py", "captures"): _EVIDENCE,
    ("dflash_diag/analysis/findings/cudagraphs.py", "partitions"): _EVIDENCE,
    ("dflash_diag/analysis/findings/fastpath.py", "flex_attention"): _EVIDENCE,
    ("dflash_diag/snapshot/compare.py", "reentrant"): "the value of diff's checkpoint.mode fact",
    ("dflash_diag/view/report.py", "tokens_per_s"): "a field of top --batch's stage rows (docs/top.md)",
    ("dflash_diag/view/report.py", "devices"): "a field of top --batch's gpus section",
    ("reference_trainer/metrics.py", "tokens_per_s"): _TRAINER_OWN,
    ("reference_trainer/metrics.py", "target_batches_per_s"): _TRAINER_OWN,
    ("reference_trainer/metrics.py", "drafter_batches_per_s"): _TRAINER_OWN,
    ("reference_trainer/train.py", "tokens_per_s"): _TRAINER_OWN,
    ("reference_trainer/train.py", "step_ms"): _TRAINER_OWN,
    ("reference_trainer/train.py", "use_reentrant"): "a field of the trainer's summary JSON",
    ("reference_trainer/train.py", "backend"): "a field of the trainer's summary JSON (its ddp section)",
    ("dflash_diag/analysis/flightrec.py", "completed"): "a Flight Recorder entry's state, as torch writes it",
    ("reference_trainer/scenarios.py", "reentrant"): "a scenario's name (docs/trainer.md)",
    ("reference_trainer/scenarios.py", "recompiles"): "a scenario's name (docs/trainer.md)",
}
# What a board is read through: a call that returns a probe's payload (by the probe's name), and the board
# sections and helpers whose result is a payload or a piece of one.
PROBE_LOOKUPS = {"probe", "first_probe", "_ok"}
PAYLOAD_METHODS = {"probe", "first_probe", "app"}  # board.probe(name), ctx.app()
KEY_HELPERS = {"num", "_num", "text", "flag", "sub", "_sub", "items", "_items"}  # helper(payload, key), by name
PAYLOAD_FUNCTIONS = {"_ok", "sub", "_sub", "items", "_items"}
PAYLOAD_ATTRS = {"probes", "session", "app"}


def _constants(cls: type) -> dict[str, str]:
    return {k: v for k, v in vars(cls).items() if k.isupper() and isinstance(v, str)}


def _source(path: Path) -> str:
    return path.read_text()


def test_probe_names_are_defined_once_and_used_everywhere() -> None:
    assert set(contract.PROBE_NAMES) == set(_constants(contract.ProbeName).values()) == probes.ALL_PROBES
    from dflash_diag.cli import attach, run
    from dflash_diag.inject import request as inject_request

    assert run.KNOWN_PROBES is contract.PROBE_NAMES and attach.KNOWN_PROBES is contract.PROBE_NAMES
    assert inject_request.KNOWN_PROBES is contract.PROBE_NAMES
    from probes import ProbesConfig
    from probes.registry import PROBES

    # One registry: every probe has a class and a Config, by its name, in the board's order; nothing else is built.
    assert tuple(spec.name for spec in PROBES) == tuple(contract.PROBE_NAMES)
    assert set(ProbesConfig().probes) == set(contract.PROBE_NAMES)
    listed = re.compile(r'\(\s*"gil",\s*"allocator"')
    assert [str(p.relative_to(ROOT)) for p in CODE if listed.search(_source(p))] == ["dflash_contract/board/keys.py"]


def test_one_probe_list_grammar_for_run_attach_the_environment_and_the_trainer() -> None:
    import argparse

    from dflash_diag.cli import attach, run

    assert probes.parse_probe_list is contract.parse_probe_list
    assert attach.parse_probes("all,-gil,-health") == sorted(set(contract.PROBE_NAMES) - {"gil", "health"})
    assert run._check_probe_list("gil, queues") == "gil, queues"
    for bad in ("gli", "-all", "--gil"):  # what the program's bootstrap would refuse, `run` refuses first
        with pytest.raises(ValueError, match="unknown probe"):
            contract.parse_probe_list(bad)
        with pytest.raises(argparse.ArgumentTypeError, match="unknown probe"):
            run._check_probe_list(bad)
        with pytest.raises(argparse.ArgumentTypeError, match="unknown probe"):
            attach.parse_probes(bad)


def test_every_payload_key_is_written_by_its_probe() -> None:
    writers = {**{probe: ROOT / "probes" / f"{probe}.py" for probe in KEY_CLASSES}, "session": ROOT / "probes/session.py"}
    parts = {"allocator": [ROOT / "probes" / "_vocab.py"]}  # a probe's helper module writes some of its keys
    for probe, cls in {**KEY_CLASSES, "session": contract.SessionKeys}.items():
        text = "\n".join(_source(p) for p in [writers[probe], *parts.get(probe, [])])
        unused = [name for name in _constants(cls) if not re.search(rf"\b{cls.__name__}\.{name}\b", text)]
        assert unused == [], f"{cls.__name__}: keys the {probe} probe never writes: {unused}"


def test_every_exception_to_the_scan_is_still_there() -> None:
    """An entry of NOT_BOARD_KEYS whose literal is gone would let a real key literal in later: none is stale."""
    stale = [f"{path}: {value!r}" for path, value in NOT_BOARD_KEYS
             if not any(_string(n) == value for n in ast.walk(ast.parse(_source(ROOT / path))))]
    assert stale == []


def _call_name(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def _string(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _not_keys(tree: ast.AST) -> set[int]:
    """Docstrings, the text parts of f-strings and attribute names (``getattr(queue, "maxsize")``): not keys."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) in ("getattr", "hasattr", "setattr") and len(node.args) > 1:
            out.add(id(node.args[1]))
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and body and \
                isinstance(body[0], ast.Expr) and _string(body[0].value) is not None:
            out.add(id(body[0].value))
        if isinstance(node, ast.JoinedStr):
            out.update(id(v) for v in node.values)
    return out


class _BoardReads(ast.NodeVisitor):
    """Keys read from a board by a literal, in one function: the names bound to a payload (from a probe lookup, a
    board section, a helper, an item or an iteration of one) are followed, so the literal is caught whatever it
    spells: one left behind by a renamed key (which no longer matches any key) included."""

    def __init__(self, func: ast.AST) -> None:
        self.bound: set[str] = set()
        for _ in range(3):  # bindings that follow bindings
            for node in ast.walk(func):
                self._bind(node)
        self.found: list[tuple[int, str]] = []
        for node in ast.walk(func):
            self._read(node)

    def payload(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Call):
            name, method = _call_name(node), isinstance(node.func, ast.Attribute)
            if method:
                return name in PAYLOAD_METHODS or (name in ("get", "values", "items") and self.payload(node.func.value))
            if name in ("sorted", "list", "tuple", "reversed", "enumerate", "dict") and node.args:
                return self.payload(node.args[0])
            return name in PAYLOAD_FUNCTIONS or name in PAYLOAD_METHODS
        if isinstance(node, ast.Attribute):
            return node.attr in PAYLOAD_ATTRS
        if isinstance(node, ast.Name):
            return node.id in self.bound
        if isinstance(node, ast.Subscript):
            return self.payload(node.value)
        if isinstance(node, ast.BoolOp):
            return any(self.payload(v) for v in node.values)
        if isinstance(node, ast.IfExp):
            return self.payload(node.body) or self.payload(node.orelse)
        return False

    def _targets(self, target: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.bound.add(target.id)
        elif isinstance(target, ast.Tuple | ast.List | ast.Starred):
            for node in ast.iter_child_nodes(target):
                self._targets(node)

    def _bind(self, node: ast.AST) -> None:
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr) and node.value is not None and self.payload(node.value):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                self._targets(target)
        elif isinstance(node, ast.For | ast.comprehension) and self.payload(node.iter):
            self._targets(node.target)

    def _read(self, node: ast.AST) -> None:
        if isinstance(node, ast.Call):
            name = _call_name(node)
            keys = [a for a in node.args if _string(a) is not None]
            if name in PROBE_LOOKUPS or (name in KEY_HELPERS and isinstance(node.func, ast.Name)):
                self.found.extend((a.lineno, f"{name}({_string(a)!r})") for a in keys)
            elif name in ("get", "pop", "setdefault") and isinstance(node.func, ast.Attribute) and node.args and \
                    _string(node.args[0]) is not None and self.payload(node.func.value):
                self.found.append((node.lineno, f".{name}({_string(node.args[0])!r})"))
        elif isinstance(node, ast.Subscript) and _string(node.slice) is not None and self.payload(node.value):
            self.found.append((node.lineno, f"[{_string(node.slice)!r}]"))


def _literal_keys(path: Path) -> list[str]:
    tree = ast.parse(_source(path))
    where = str(path.relative_to(ROOT))
    prose = _not_keys(tree)
    specific = {v for cls in ALL_KEY_CLASSES for v in _constants(cls).values()} - GENERIC
    found = {(node.lineno, f"{node.value!r}") for node in ast.walk(tree)
             if id(node) not in prose and _string(node) in specific and (where, node.value) not in NOT_BOARD_KEYS}
    for func in ast.walk(tree):
        if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            found.update(_BoardReads(func).found)
    return [f"{where}:{line} {what}" for line, what in sorted(found)]


def test_no_module_spells_a_board_key_as_a_literal() -> None:
    """Every module of dflash_diag/, probes/ and reference_trainer/, not a hand list: a payload key's name spelled
    anywhere, or any literal read from a board (a probe looked up by name, a key of a payload, of ``app`` or of
    ``session``), fails. With every key a constant, renaming one renames it for the writer and every reader; a
    literal would silently read nothing (an empty trace counter, a missing Prometheus series, a rule that never
    fires) while the writer writes the new name."""
    found = [hit for path in SCANNED for hit in _literal_keys(path)]
    assert found == [], "board keys spelled as literals (use the dflash_contract.board constants):\n" + "\n".join(found)


def test_the_scan_catches_a_literal_and_a_renamed_key() -> None:
    """The scan itself: a reader written with literals is caught, whether the literal spells a key of today or one
    renamed since (which matches no constant any more)."""
    reader = ROOT / "dflash_diag" / "_scan_probe.py"
    code = ("def counters(board, payload):\n"
            "    depth = board.probe('queues')\n"
            "    for name, row in sorted(depth.items()):\n"
            "        yield row.get('queue_depth_renamed')\n"
            "    yield board.session.get('steps'), num(payload, 'depth'), ('compile_time_s', 1)\n")
    try:
        reader.write_text(code)
        hits = [h.split(" ", 1)[1] for h in _literal_keys(reader)]
    finally:
        reader.unlink()
    assert hits == ["probe('queues')", ".get('queue_depth_renamed')", "'compile_time_s'", "'depth'", ".get('steps')",
                    "num('depth')"]


def test_one_definition_of_the_schema_strict_json_stat_and_the_redactor() -> None:
    def where(pattern: str) -> list[str]:
        rx = re.compile(pattern)
        return sorted(str(p.relative_to(ROOT)) for p in CODE if rx.search(_source(p)))

    assert where(r'"dflash-diag\.board/1"') == ["dflash_contract/board/schema.py"]
    assert where(r"def _reject_constant") == ["dflash_contract/board/validate.py"]
    assert where(r"split\(\)\[19\]|rest\[19\]") == ["dflash_contract/proc.py"]  # /proc stat field 22
    assert where(r"(?m)^def (redact_\w+|scrub_\w+)") == ["dflash_contract/redact.py"]
    assert where(r"(?m)^def (process_alive|process_exists)\b") == ["dflash_contract/proc.py"]
    assert where(r"(?m)^class BoardWriter\b") == []  # the model's is WriterIdentity, the probes' BoardPublisher
